"""A well-behaved classic-group client for the pure core: the loop a real consumer runs, one ``step`` at a time.

``Client.step()`` looks at its parked JoinGroup/SyncGroup (if any) and acts as the Java consumer does:
MEMBER_ID_REQUIRED -> rejoin with the given id; UNKNOWN_MEMBER_ID -> rejoin with no id; any other join/sync error
-> rejoin; a finished join -> SyncGroup (the leader assigns every member it was given); otherwise it heartbeats and
rejoins when told REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID. ``settle(env, clients)`` steps
every client and moves time one heartbeat interval at a time until the group is Stable with all of them synced (or
Empty when none is left), and fails if that does not happen in ``limit_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.deferred import Deferred
from coordinator.group import GroupState
from coordinator.messages import JoinGroupResult, SyncGroupResult
from protocol.errors import ErrorCode
from tests.core.conftest import Env, heartbeat, join, sync

E = ErrorCode
DEFAULT_PROTOCOLS: list[tuple[str, bytes]] = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


@dataclass
class Client:
    env: Env
    group_id: str
    client_id: str
    instance_id: str | None = None
    protocols: list[tuple[str, bytes]] = field(default_factory=lambda: list(DEFAULT_PROTOCOLS))
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 60_000
    member_id: str = ""
    generation: int = -1
    synced: bool = False
    join_reply: Deferred[JoinGroupResult] | None = None
    sync_reply: Deferred[SyncGroupResult] | None = None

    def rejoin(self, member_id: str | None = None) -> None:
        if member_id is not None:
            self.member_id = member_id
        self.synced = False
        self.sync_reply = None
        self.join_reply = join(
            self.env.gm,
            self.group_id,
            self.member_id,
            instance_id=self.instance_id,
            client_id=self.client_id,
            protocols=self.protocols,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
        )

    def step(self) -> None:
        if self.join_reply is not None:
            if not self.join_reply.done:
                return
            result = self.join_reply.result()
            self.join_reply = None
            if result.error is E.none:
                self.member_id, self.generation = result.member_id, result.generation_id
                assignments = {m.member_id: b"a" for m in result.members} if result.leader == self.member_id else None
                self.sync_reply = sync(self.env.gm, self.group_id, self.member_id, self.generation, assignments)
            elif result.error is E.member_id_required:
                self.rejoin(result.member_id)
            elif result.error in (E.unknown_member_id, E.fenced_instance_id):
                self.rejoin("")
            else:
                self.rejoin()
            return
        if self.sync_reply is not None:
            if not self.sync_reply.done:
                return
            sync_result = self.sync_reply.result()
            self.sync_reply = None
            if sync_result.error is E.none:
                self.synced = True
            else:
                self.rejoin("" if sync_result.error is E.unknown_member_id else None)
            return
        if not self.member_id:
            self.rejoin()
            return
        error = heartbeat(self.env.gm, self.group_id, self.member_id, self.generation, self.instance_id)
        if error is E.none:
            return
        self.rejoin("" if error in (E.unknown_member_id, E.fenced_instance_id) else None)


def is_settled(env: Env, group_id: str, clients: list[Client]) -> bool:
    group = env.gm.group(group_id)
    if not clients:
        return group is None or group.state is GroupState.EMPTY
    return (
        group is not None
        and group.state is GroupState.STABLE
        and set(group.members) == {c.member_id for c in clients}
        and all(c.synced and c.generation == group.generation_id for c in clients)
    )


def settle(env: Env, group_id: str, clients: list[Client], *, step_ms: int = 1_000, limit_ms: int = 600_000) -> None:
    """Let ``clients`` behave well until their group is Stable with all of them (Empty without any)."""
    waited = 0
    while True:
        for client in clients:
            client.step()
        if env.log.auto_commit is False:
            env.log.commit()
        if is_settled(env, group_id, clients):
            return
        if waited >= limit_ms:
            group = env.gm.group(group_id)
            raise AssertionError(f"group {group_id} not settled after {limit_ms} ms: {group}")
        env.advance(step_ms)
        waited += step_ms
