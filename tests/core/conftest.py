"""Helpers for deterministic GroupManager tests (also used by the offsets/admin tests).

Everything runs on a ``ManualClock`` + ``ManualTimer`` + ``MemoryLog``; time only moves with ``env.advance(ms)``.

API:

* ``make_env(*, auto_commit=True, **config) -> Env`` and the ``env`` fixture (defaults: ``GroupConfig()`` with
  Kafka's defaults). ``Env`` has ``clock``, ``timer``, ``log``, ``config``, ``gm`` (the ``GroupManager``),
  ``advance(ms)``, ``run_until(predicate)``, ``records(*types)`` (records written so far, optionally filtered) and
  ``take()`` (return and forget them). Member ids are deterministic: ``<clientId|instanceId>-<uuid n>``.
* Request builders with sensible defaults: ``join_request``, ``sync_request``, ``heartbeat_request``.
* Calls: ``join(gm, group_id, member_id="", **kw)`` (one JoinGroup), ``join_new(gm, group_id, **kw)`` (a new member
  incl. the MEMBER_ID_REQUIRED round trip for dynamic v4+ members; returns the parked Deferred),
  ``sync(gm, group_id, member_id, generation_id, assignments=None, **kw)``, ``heartbeat(gm, group_id, member_id,
  generation_id, instance_id=None)``, ``leave(gm, group_id, *members)`` (a member is a member-id string or a
  ``LeaveMember``).
* ``form_stable_group(env, group_id="g", n=2, *, instance_ids=None, protocols=..., assignments=None,
  session_timeout_ms=..., rebalance_timeout_ms=...) -> StableGroup``: n members join, the (initial) join phase
  completes, everyone syncs, the leader's assignment is committed. ``StableGroup`` has ``group_id``,
  ``generation``, ``leader``, ``member_ids`` (join order), ``followers``, ``instance_ids`` and ``assignments``
  (member id -> bytes). With ``auto_commit=False`` it commits the log itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.deferred import Deferred
from coordinator.group import ClassicGroup, GroupState
from coordinator.groups import GroupManager
from coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupRequest,
    LeaveGroupResult,
    LeaveMember,
    SyncGroupRequest,
    SyncGroupResult,
)
from coordinator.record_log import MemoryLog
from coordinator.records import Record
from protocol.errors import ErrorCode

DEFAULT_PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", b"range-meta"), ("roundrobin", b"rr-meta"))
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 60_000


@dataclass
class Env:
    clock: ManualClock
    timer: ManualTimer
    log: MemoryLog
    config: GroupConfig
    gm: GroupManager

    def advance(self, ms: int) -> None:
        self.timer.advance(ms)

    def now(self) -> int:
        return self.clock.now_ms()

    def run_until(self, predicate: Callable[[], bool], *, step_ms: int = 100, limit_ms: int = 3_600_000) -> None:
        waited = 0
        while not predicate():
            if waited >= limit_ms:
                raise AssertionError(f"condition not reached within {limit_ms} ms")
            self.timer.advance(step_ms)
            waited += step_ms

    def records(self, *types: type) -> list[Record]:
        return self.log.of_type(*types) if types else list(self.log.records)

    def take(self) -> list[Record]:
        return self.log.take()

    def group(self, group_id: str = "g") -> ClassicGroup:
        group = self.gm.group(group_id)
        assert group is not None, f"no group {group_id}"
        return group


def uuid_counter() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"00000000-0000-4000-8000-{next(counter):012d}"


def make_env(*, auto_commit: bool = True, start_ms: int = 0, **config: int) -> Env:
    clock = ManualClock(start_ms)
    timer = ManualTimer(clock)
    log = MemoryLog(auto_commit=auto_commit)
    cfg = GroupConfig(**config)
    gm = GroupManager(cfg, clock, timer, log, new_uuid=uuid_counter())
    return Env(clock=clock, timer=timer, log=log, config=cfg, gm=gm)


@pytest.fixture
def env() -> Env:
    return make_env()


# ------------------------------------------------------------------------------------------------ request builders
def join_request(
    group_id: str = "g",
    member_id: str = "",
    *,
    instance_id: str | None = None,
    protocols: Sequence[tuple[str, bytes]] = DEFAULT_PROTOCOLS,
    protocol_type: str = "consumer",
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
    client_id: str = "client",
    client_host: str = "/127.0.0.1",
    api_version: int = 9,
    reason: str | None = None,
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=list(protocols),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        client_id=client_id,
        client_host=client_host,
        api_version=api_version,
        reason=reason,
    )


def sync_request(
    group_id: str,
    member_id: str,
    generation_id: int,
    assignments: dict[str, bytes] | None = None,
    *,
    instance_id: str | None = None,
    protocol_type: str | None = "consumer",
    protocol_name: str | None = None,
    api_version: int = 5,
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=list((assignments or {}).items()),
        api_version=api_version,
    )


def heartbeat_request(
    group_id: str, member_id: str, generation_id: int, instance_id: str | None = None
) -> HeartbeatRequest:
    return HeartbeatRequest(group_id, generation_id, member_id, instance_id)


# ----------------------------------------------------------------------------------------------------- calls
def join(gm: GroupManager, group_id: str = "g", member_id: str = "", **kw: object) -> Deferred[JoinGroupResult]:
    return gm.join_group(join_request(group_id, member_id, **kw))  # type: ignore[arg-type]


def join_new(gm: GroupManager, group_id: str = "g", **kw: object) -> Deferred[JoinGroupResult]:
    """A new member joins; a dynamic v4+ member first gets MEMBER_ID_REQUIRED and rejoins with that id."""
    first = join(gm, group_id, "", **kw)
    if first.done and first.result().error is ErrorCode.member_id_required:
        return join(gm, group_id, first.result().member_id, **kw)
    return first


def sync(
    gm: GroupManager,
    group_id: str,
    member_id: str,
    generation_id: int,
    assignments: dict[str, bytes] | None = None,
    **kw: object,
) -> Deferred[SyncGroupResult]:
    return gm.sync_group(sync_request(group_id, member_id, generation_id, assignments, **kw))  # type: ignore[arg-type]


def heartbeat(
    gm: GroupManager, group_id: str, member_id: str, generation_id: int, instance_id: str | None = None
) -> ErrorCode:
    return gm.heartbeat(heartbeat_request(group_id, member_id, generation_id, instance_id))


def leave(gm: GroupManager, group_id: str, *members: str | LeaveMember) -> Deferred[LeaveGroupResult]:
    items = [m if isinstance(m, LeaveMember) else LeaveMember(m) for m in members]
    return gm.leave_group(LeaveGroupRequest(group_id, items))


# ------------------------------------------------------------------------------------------------ scenarios
@dataclass
class StableGroup:
    group_id: str
    generation: int
    leader: str
    member_ids: list[str]
    instance_ids: list[str | None]
    assignments: dict[str, bytes] = field(default_factory=dict)

    @property
    def followers(self) -> list[str]:
        return [m for m in self.member_ids if m != self.leader]


def session_end(env: Env, member_id: str, group_id: str = "g") -> int:
    """When a member's session ends: its deadline, which a heartbeat moves without a timer call; the session timer
    must be armed at or before it (when it fires early, it re-arms for the deadline)."""
    member = env.group(group_id).members[member_id]
    armed = env.timer.deadline((group_id, member_id))
    assert armed is not None and armed <= member.session_deadline_monotonic_ms, (armed, member)
    return member.session_deadline_monotonic_ms


def form_stable_group(
    env: Env,
    group_id: str = "g",
    n: int = 2,
    *,
    instance_ids: Sequence[str | None] | None = None,
    protocols: Sequence[tuple[str, bytes]] = DEFAULT_PROTOCOLS,
    assignments: dict[str, bytes] | None = None,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
    api_version: int = 9,
) -> StableGroup:
    """Bring a NEW group with n members to Stable (initial delay elapsed, every member synced, record durable)."""
    ids = list(instance_ids) if instance_ids is not None else [None] * n
    assert len(ids) == n
    replies = [
        join_new(
            env.gm,
            group_id,
            instance_id=ids[i],
            client_id=f"c{i}",
            protocols=protocols,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            api_version=api_version,
        )
        for i in range(n)
    ]
    env.run_until(lambda: all(r.done for r in replies))
    results = [r.result() for r in replies]
    assert all(r.error is ErrorCode.none for r in results), results
    generation = results[0].generation_id
    leader = results[0].leader
    member_ids = [r.member_id for r in results]
    given = assignments if assignments is not None else {m: f"assignment-{m}".encode() for m in member_ids}
    syncs = [sync(env.gm, group_id, m, generation) for m in member_ids if m != leader]
    syncs.append(sync(env.gm, group_id, leader, generation, given))
    if not env.log.auto_commit:
        env.log.commit()
    assert all(s.done and s.result().error is ErrorCode.none for s in syncs)
    group = env.group(group_id)
    assert group.state is GroupState.STABLE
    return StableGroup(group_id, generation, leader, member_ids, ids, {m: given.get(m, b"") for m in member_ids})
