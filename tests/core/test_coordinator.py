"""GroupCoordinator facade: offsets through the real GroupManager, delegation, sharding, loading.

``make_coordinator`` / ``commit_request`` / ``fetch`` are shared with the admin, retention and replay tests.
"""

from __future__ import annotations

import struct

from coordinator.group import GroupState
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import (
    FetchedOffset,
    HeartbeatRequest,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetFetchRequest,
)
from coordinator.rebalance import heartbeat_key
from coordinator.records import RebalanceCause, RemovalCause
from coordinator.retention import CLEANUP_TIMER_KEY
from coordinator.sharding import partition_for
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, join_new, join_request, make_env, sync_request
from tests.core.expected import commit as commit_record
from tests.core.expected import (
    completed,
    empty_group_record,
    group_record,
    member,
    removed,
    stabilized,
    started,
)
from tests.core.expected import joined as joined_record

T0 = 1_000_000


def make_coordinator(*, auto_commit: bool = True, start_ms: int = T0, **config: int) -> tuple[Env, GroupCoordinator]:
    """A coordinator whose GroupManager is the conftest one (deterministic member ids), on a manual clock."""
    env = make_env(auto_commit=auto_commit, start_ms=start_ms, **config)
    return env, GroupCoordinator(env.config, env.clock, env.timer, env.log, groups=env.gm)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (topics + null user data)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


def commit_request(
    group_id: str,
    *parts: tuple[str, int, int],
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    version: int = 8,
    retention_ms: int = -1,
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        partitions=[OffsetCommitPartition(t, p, o) for t, p, o in parts],
        api_version=version,
        retention_time_ms=retention_ms,
    )


def commit(coord: GroupCoordinator, group_id: str, *parts: tuple[str, int, int], **kw: object) -> OffsetCommitResult:
    reply = coord.commit_offsets(commit_request(group_id, *parts, **kw))  # type: ignore[arg-type]
    assert reply.done
    return reply.result()


def fetch(coord: GroupCoordinator, group_id: str, topics: list[tuple[str, list[int]]] | None) -> list[FetchedOffset]:
    result = coord.fetch_offsets(OffsetFetchRequest(group_id, topics))
    assert result.error is ErrorCode.none
    return list(result.partitions)


def errors(result: OffsetCommitResult) -> list[ErrorCode]:
    return [p.error for p in result.partitions]


# ------------------------------------------------------------------------------------ commits vs the state machine


def test_member_commit_in_stable_group_is_accepted_and_keeps_session_alive() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 2)
    member = g.followers[0]
    key = heartbeat_key("g", member)
    env.advance(8_000)  # session timeout is 10 s; no heartbeats
    before = env.timer.deadline(key)
    env.take()
    assert errors(commit(coord, "g", ("t", 0, 5), generation=g.generation, member_id=member)) == [ErrorCode.none]
    assert env.take() == [commit_record("t", 0, 5, env.now(), member_id=member, generation=g.generation)]
    assert env.timer.deadline(key) == env.now() + 10_000
    assert before is not None and before < env.now() + 10_000
    assert fetch(coord, "g", [("t", [0])]) == [FetchedOffset("t", 0, 5)]


def test_commit_accepted_in_preparing_rebalance_with_previous_generation() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 2)
    join_new(env.gm, "g", client_id="newcomer")  # a new member starts a rebalance
    assert env.group("g").state is GroupState.PREPARING_REBALANCE
    env.take()
    result = commit(coord, "g", ("t", 0, 7), generation=g.generation, member_id=g.leader)
    assert errors(result) == [ErrorCode.none]
    assert env.take() == [commit_record("t", 0, 7, env.now(), member_id=g.leader, generation=g.generation)]
    assert fetch(coord, "g", [("t", [0])]) == [FetchedOffset("t", 0, 7)]


def test_commit_rejected_with_rebalance_in_progress_in_completing_rebalance() -> None:
    env, coord = make_coordinator()
    replies = [join_new(env.gm, "g", client_id=f"c{i}") for i in range(2)]
    env.run_until(lambda: all(r.done for r in replies))
    assert env.group("g").state is GroupState.COMPLETING_REBALANCE
    first = replies[0].result()
    env.take()
    result = commit(coord, "g", ("t", 0, 7), generation=first.generation_id, member_id=first.member_id)
    assert errors(result) == [ErrorCode.rebalance_in_progress]
    assert env.take() == []
    assert fetch(coord, "g", [("t", [0])]) == [FetchedOffset("t", 0)]


def test_admin_commit_only_for_empty_or_unknown_groups() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 1)
    env.take()
    now = env.now()
    assert errors(commit(coord, "g", ("t", 0, 1))) == [ErrorCode.unknown_member_id]
    assert env.take() == []
    assert errors(commit(coord, "unknown", ("t", 0, 1))) == [ErrorCode.none]
    assert coord.groups.group("unknown") is not None
    assert env.take() == [commit_record("t", 0, 1, now, group="unknown")]  # a simple group: no group record
    # once the group is Empty (its member left), the reset-offsets tool may commit
    leave_reply = coord.leave_group(LeaveGroupRequest("g", [LeaveMember(g.leader)]))
    assert leave_reply.result().error is ErrorCode.none
    assert env.group("g").state is GroupState.EMPTY
    assert env.take() == [
        removed(g.leader, RemovalCause.LEFT, g.generation, now),
        started(g.generation, RebalanceCause.MEMBER_LEFT, now, previous="Stable", member=g.leader),
        completed(g.generation + 1, [], now, started_at=now),
        empty_group_record(now, generation=g.generation + 1, protocol_type="consumer"),
    ]
    assert errors(commit(coord, "g", ("t", 0, 2))) == [ErrorCode.none]
    assert env.take() == [commit_record("t", 0, 2, now)]
    assert fetch(coord, "g", None) == [FetchedOffset("t", 0, 2)]


def test_member_commit_with_stale_generation_is_illegal_generation() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 2)
    env.take()
    assert errors(commit(coord, "g", ("t", 0, 1), generation=g.generation - 1, member_id=g.leader)) == [
        ErrorCode.illegal_generation
    ]
    assert env.take() == []


# -------------------------------------------------------------------------------------------- facade, sharding


def test_facade_delegates_group_requests() -> None:
    env, coord = make_coordinator()
    first = coord.join_group(join_request("g", ""))
    assert first.result().error is ErrorCode.member_id_required
    reply = coord.join_group(join_request("g", first.result().member_id))
    env.run_until(lambda: reply.done)
    joined = reply.result()
    assert joined.error is ErrorCode.none
    synced = coord.sync_group(sync_request("g", joined.member_id, joined.generation_id, {joined.member_id: b"a"}))
    assert synced.result().assignment == b"a"
    m, done = joined.member_id, T0 + 3_000  # the initial rebalance delay
    assert env.take() == [
        empty_group_record(T0),
        joined_record(m, T0),
        started(0, RebalanceCause.NEW_MEMBER, T0, previous="Empty", member=m),
        completed(1, [m], done, started_at=T0),
        group_record(1, m, [member(m, b"a")], done, state_at=done),
        stabilized(1, done, join_completed_at=done, started_at=T0),
    ]
    assert coord.heartbeat(HeartbeatRequest("g", joined.generation_id, joined.member_id)) is ErrorCode.none
    assert [lg.group_id for lg in coord.list_groups(None, None)] == ["g"]
    assert env.take() == []


def test_shard_for_uses_configured_partition_count() -> None:
    _, coord = make_coordinator()
    assert coord.shard_for("my-group") == 12 == partition_for("my-group", 50)
    _, coord7 = make_coordinator(offsets_topic_num_partitions=7)
    assert coord7.shard_for("my-group") == partition_for("my-group", 7)


def test_on_loaded_schedules_cleanup_and_sessions() -> None:
    env, coord = make_coordinator()
    assert not env.timer.is_scheduled(CLEANUP_TIMER_KEY)
    coord.on_loaded()
    assert env.timer.deadline(CLEANUP_TIMER_KEY) == env.now() + env.config.offsets_retention_check_interval_ms
    assert env.take() == []  # nothing to write: arming timers is not a change of state
