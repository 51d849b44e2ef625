"""Fault isolation per group (issue #15, point 2): what a client sends can never leave a group stuck.

The duplicate-protocol JoinGroup, and the guard at the core's entry points: a handler or timer operation that
raises is answered (or dropped) cleanly, the offending member is removed, the group goes on and can still reach
Stable or Empty, and the records written agree with memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from coordinator import faults, rebalance, static
from coordinator import join as join_module
from coordinator.group import ClassicGroup, GroupState
from coordinator.groups import GroupManager
from coordinator.records import GroupMetadataRecord, GroupTombstone
from protocol.errors import ErrorCode
from tests.core.clients import Client, settle
from tests.core.conftest import Env, form_stable_group, join, join_new, leave, make_env, sync, uuid_counter

S = GroupState
E = ErrorCode
DUPLICATE = [("range", b"evil"), ("range", b"evil")]


def test_duplicate_protocol_names_count_once_and_the_group_goes_on(env: Env) -> None:
    """Kafka keys a member's protocols by name (``mapKey``): a name listed twice is one supported protocol."""
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    evil = join_new(env.gm, "g", client_id="evil", protocols=DUPLICATE)  # and then it vanishes
    group = env.group()
    assert group.state is S.PREPARING_REBALANCE and group.supported_protocols["range"] == 3
    # the real members rejoin, are never told INCONSISTENT_GROUP_PROTOCOL, and end Stable without the attacker
    clients[0].step()
    clients[1].step()
    env.advance(1)
    assert evil.done and evil.result().error is E.none and evil.result().protocol_name == "range"
    settle(env, "g", clients)
    assert len(env.group().members) == 2


def test_duplicate_protocol_names_alone_in_a_group(env: Env) -> None:
    """The 115-byte JoinGroup on a fresh group id: the join phase completes with ``range`` selected."""
    reply = join_new(env.gm, "squat", client_id="evil", protocols=DUPLICATE)
    env.advance(3_000)  # the initial rebalance delay
    assert reply.result().error is E.none and reply.result().protocol_name == "range"
    env.advance(60_000)  # never syncs, then never heartbeats
    env.advance(10_000)
    assert env.group("squat").state is S.EMPTY
    # the group's real consumers can now have it
    form_stable_group(env, "squat")


# ------------------------------------------------------------------------------------------------ the guard
class FaultyGroupManager(GroupManager):
    """A GroupManager with a planted bug, to check the guard at the entry points (the guard is under test).

    The handlers are plain functions over the manager's ``shard``: the ``_planted_faults`` fixture wraps the three
    functions below so that they raise for a FaultyGroupManager's shard when its flags say so."""

    fail_join_of: str | None = None  # client id whose MemberJoined history record raises
    fail_complete_join = 0  # how many join-phase completions raise
    fail_repair = False


_FAULTY: dict[int, FaultyGroupManager] = {}  # id(shard) -> its manager, for the planted functions


@pytest.fixture(autouse=True)
def _planted_faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_member_joined = join_module.member_joined
    real_complete_join = rebalance.complete_join
    real_repair = faults.repair

    def member_joined(group, member, now):  # type: ignore[no-untyped-def]
        record = real_member_joined(group, member, now)
        if any(member.client_id == gm.fail_join_of for gm in _FAULTY.values()):
            raise ValueError("planted fault in JoinGroup")
        return record

    def complete_join(shard, group, out):  # type: ignore[no-untyped-def]
        gm = _FAULTY.get(id(shard))
        if gm is not None and gm.fail_complete_join:
            gm.fail_complete_join -= 1
            raise ValueError("planted fault at the end of the join phase")
        real_complete_join(shard, group, out)

    def repair(shard, group, member_id, out):  # type: ignore[no-untyped-def]
        gm = _FAULTY.get(id(shard))
        if gm is not None and gm.fail_repair:
            raise ValueError("planted fault in the repair")
        real_repair(shard, group, member_id, out)

    monkeypatch.setattr(join_module, "member_joined", member_joined)
    monkeypatch.setattr(static, "member_joined", member_joined)
    monkeypatch.setattr(rebalance, "complete_join", complete_join)
    monkeypatch.setattr(faults, "repair", repair)
    yield
    _FAULTY.clear()


def faulty_env(**config: int) -> tuple[Env, FaultyGroupManager]:
    env = make_env(**config)
    gm = FaultyGroupManager(env.config, env.clock, env.timer, env.log, new_uuid=uuid_counter())
    _FAULTY[id(gm.shard)] = gm
    env.gm = gm
    return env, gm


def replayed(env: Env, group_id: str = "g") -> ClassicGroup | None:
    fresh = make_env()
    for record in env.records(GroupMetadataRecord, GroupTombstone):
        fresh.gm.replay(record)
    return fresh.gm.group(group_id)


def test_a_join_that_raises_removes_that_member_and_the_group_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    env, gm = faulty_env()
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    gm.fail_join_of = "evil"
    with caplog.at_level(logging.WARNING, logger="coordinator.group"):
        reply = join_new(gm, "g", client_id="evil")
    assert reply.result().error is E.unknown_member_id  # a real client would rejoin, not give up
    assert gm.faults == 1
    assert not any(m.client_id == "evil" for m in env.group().members.values())
    assert env.group().state is S.PREPARING_REBALANCE
    (line,) = [r for r in caplog.records if "failed" in r.getMessage()]
    assert line.levelno == logging.WARNING and line.getMessage().startswith("[group=g] JoinGroup failed")
    settle(env, "g", clients)
    assert gm.faults == 1
    group = replayed(env)
    assert group is not None and set(group.members) == set(env.group().members)


def test_a_join_phase_that_raises_restarts_the_rebalance() -> None:
    env, gm = faulty_env()
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    gm.fail_complete_join = 1
    clients[0].rejoin()  # the leader forces a rebalance; the join phase raises when the follower rejoins
    settle(env, "g", clients)
    assert gm.faults == 1 and env.group().state is S.STABLE


def test_a_group_whose_repair_also_raises_is_reset_to_empty_and_refilled() -> None:
    env, gm = faulty_env()
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    generation = env.group().generation_id
    gm.fail_complete_join = 1
    gm.fail_repair = True
    parked = join(gm, "g", clients[0].member_id)
    clients[0].join_reply = parked
    follower = join(gm, "g", clients[1].member_id)  # everyone rejoined: the join phase completes and raises
    assert gm.faults == 1
    assert parked.result().error is E.unknown_member_id and follower.result().error is E.unknown_member_id
    group = env.group()
    assert group.state is S.EMPTY and not group.members and group.generation_id == generation + 1
    again = replayed(env)
    assert again is not None and again.state is S.EMPTY and again.generation_id == group.generation_id
    gm.fail_repair = False
    clients[1].join_reply = follower
    settle(env, "g", clients)
    assert gm.faults == 1


def test_a_timer_fault_does_not_escape_to_the_timer() -> None:
    env, gm = faulty_env()
    reply = join_new(gm, "g", client_id="c0")
    gm.fail_complete_join = 1
    env.advance(3_000)  # the initial delay ends: its operation raises inside the timer
    assert gm.faults == 1
    assert reply.result().error is E.none  # the repair completed the join phase: everyone had joined
    assert env.group().state is S.COMPLETING_REBALANCE
    settle(env, "g", [])  # the lone member never comes back


def test_a_rebalance_timeout_of_zero_does_not_spin_the_join_timer(caplog: pytest.LogCaptureFixture) -> None:
    """Found by the property tests: a static member with rebalance timeout 0 that does not rejoin made the
    "nobody rejoined, extend the join phase" timer re-arm itself with no delay: a busy loop (and a WARNING per turn)
    until the member's session ended. The extension now waits at least group.min.session.timeout.ms."""
    env = make_env()
    static = Client(env, "g", "s", instance_id="i0", rebalance_timeout_ms=0)
    dynamic = Client(env, "g", "d")
    settle(env, "g", [static, dynamic])
    with caplog.at_level(logging.WARNING, logger="coordinator.group"):
        leave(env.gm, "g", dynamic.member_id)  # PreparingRebalance; the static member does not rejoin
        env.advance(20_000)  # its session (10 s) ends meanwhile
    assert len([r for r in caplog.records if "no member rejoined" in r.getMessage()]) <= 2
    assert env.group().state is S.EMPTY  # the absent static member's session ended the join phase
    # (with a rebalance timeout of 0 it could never sync in time, in Kafka too: it comes back configured sanely)
    static.rebalance_timeout_ms = 60_000
    settle(env, "g", [static])


def test_a_leader_that_sends_its_sync_twice_during_the_write_gets_what_was_written() -> None:
    """Found by the property tests: a leader's second SyncGroup while its first assignment was still being written
    wrote a second GroupMetadataRecord, but the first write's completion made the group Stable with the first
    assignment: memory and the log disagreed (a reload handed out the second). The last write requested wins."""
    env = make_env(auto_commit=False)
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    for c in clients:
        c.rejoin()
    env.advance(1)
    results = [c.join_reply.result() for c in clients if c.join_reply is not None]
    leader = next(r for r in results if r.leader == r.member_id)
    follower = next(r for r in results if r.leader != r.member_id)
    ids = [leader.member_id, follower.member_id]
    first = sync(env.gm, "g", leader.member_id, leader.generation_id, {m: b"first" for m in ids})
    second = sync(env.gm, "g", leader.member_id, leader.generation_id, {m: b"second" for m in ids})
    other = sync(env.gm, "g", follower.member_id, follower.generation_id)
    assert first.result().error is E.rebalance_in_progress  # superseded by the second
    env.log.commit()
    assert second.result().assignment == b"second" and other.result().assignment == b"second"
    assert {m: x.assignment for m, x in env.group().members.items()} == {m: b"second" for m in ids}
    group = replayed(env)
    assert group is not None and {m: x.assignment for m, x in group.members.items()} == {m: b"second" for m in ids}


def test_a_reply_callback_that_raises_does_not_stop_the_join_phase_half_way() -> None:
    """The end of a join phase answers every member in turn; a listener's callback that raises on the first answer
    must not leave the others unanswered (and the group half-updated)."""
    env = make_env()
    replies = [join_new(env.gm, "g", client_id=f"c{i}") for i in range(2)]

    def broken(_: object) -> None:
        raise RuntimeError("listener bug")

    replies[0].add_callback(broken)
    env.advance(6_000)  # the initial delay, extended once for the second member
    assert all(r.result().error is E.none for r in replies)
    assert env.gm.faults == 0 and env.group().state is S.COMPLETING_REBALANCE
    assert all(env.timer.is_scheduled(m.heartbeat_key) for m in env.group().members.values())
