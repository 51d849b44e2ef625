"""Deletions (DeleteGroups, retention expiry) change memory the way every other record does (issue #16, point 1).

The group goes at once, as every group change applies at once; its offsets go once their tombstones are durable,
as every offset change; a failed write restores the group. The race these tests pin down: a DeleteGroups whose
tombstone is not durable yet, then a JoinGroup for the same group id. The joiner must get a new group that
survives the tombstone, and the log must replay to what memory holds. Every test writes through a ``MemoryLog``
with manual commit, on the manual clock.
"""

from __future__ import annotations

from coordinator.group import GroupState
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import DeleteGroupResult, FetchedOffset
from coordinator.records import (
    GroupRemovalCause,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
    RebalanceCause,
    Record,
    RemovalCause,
    is_state_record,
    new_empty_group_record,
)
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, join_new, leave, sync
from tests.core.expected import completed, empty_group_record, group_record, member, removed, stabilized, started
from tests.core.expected import joined as joined_record
from tests.core.test_coordinator import commit_request, fetch, make_coordinator
from tests.core.test_replay import replayed, snapshot

RETENTION = 100_000
DELETED = OffsetRemovalCause.GROUP_DELETED


def emptied_group_with_offsets() -> tuple[Env, GroupCoordinator, int]:
    """Group "g": formed, two offsets committed by its member, left: Empty with offsets. Everything durable.
    Returns the number of records written so far too (the log keeps them: replay needs the whole log)."""
    env, coord = make_coordinator(auto_commit=False)
    g = form_stable_group(env, "g", 1)
    committed = coord.commit_offsets(commit_request("g", ("t", 0, 10), ("t", 1, 11), generation=1, member_id=g.leader))
    leave(env.gm, "g", g.leader)
    env.log.commit()
    assert committed.result().partitions[0].error is ErrorCode.none
    assert env.group("g").state is GroupState.EMPTY
    return env, coord, len(env.log.records)


def state_records(env: Env, since: int) -> list[Record]:
    """The state records written after the first ``since`` records."""
    return [r for r in env.log.records[since:] if is_state_record(r)]


def written_since(env: Env, since: int) -> list[Record]:
    """Every record (state and history) written after the first ``since`` records: the log is kept whole here."""
    return env.log.records[since:]


def assert_replays_to_memory(env: Env, coord: GroupCoordinator) -> None:
    assert not env.log.pending
    assert snapshot(replayed(env.log.records, env.now())) == snapshot(coord)


def join_to_stable(env: Env, group_id: str = "g") -> str:
    """One new member joins ``group_id`` and syncs; returns its member id once the group is Stable (durable)."""
    reply = join_new(env.gm, group_id, client_id="joiner")
    env.log.commit()  # the new group's records never hold the join up; committed so that the log is complete
    env.run_until(lambda: reply.done)
    joined = reply.result()
    assert joined.error is ErrorCode.none, joined
    synced = sync(env.gm, group_id, joined.member_id, joined.generation_id, {joined.member_id: b"a"})
    env.log.commit()
    assert synced.result().error is ErrorCode.none
    assert env.group(group_id).state is GroupState.STABLE
    return joined.member_id


# ----------------------------------------------------------------------------------------------- the race
def test_join_while_delete_is_being_written_gets_a_new_group_that_survives_the_tombstone() -> None:
    env, coord, mark = emptied_group_with_offsets()
    env.clock.set(env.now() + 5)
    now = env.now()
    deleting = coord.delete_groups(["g"])
    assert not deleting.done and env.log.pending == 1

    joining = join_new(env.gm, "g", client_id="joiner")  # before the tombstone is durable
    assert env.group("g").state is GroupState.PREPARING_REBALANCE
    env.log.commit()  # the tombstone lands: the joiner's group must not be dropped
    assert deleting.result() == [DeleteGroupResult("g", ErrorCode.none)]
    assert not joining.done, joining  # parked in the new group's initial join phase, not failed
    assert env.group("g").state is GroupState.PREPARING_REBALANCE

    env.run_until(lambda: joining.done)
    joined = joining.result()
    assert (joined.error, joined.generation_id, joined.leader) == (ErrorCode.none, 1, joined.member_id)
    synced = sync(env.gm, "g", joined.member_id, 1, {joined.member_id: b"a"})
    env.log.commit()
    assert synced.result().error is ErrorCode.none
    assert env.group("g").state is GroupState.STABLE
    assert fetch(coord, "g", None) == []  # nothing of the old group's offsets survives

    j, done = joined.member_id, now + 3_000  # the new group's initial rebalance delay
    assert written_since(env, mark) == [
        OffsetTombstone("g", "t", 0, DELETED, now),
        OffsetTombstone("g", "t", 1, DELETED, now),
        GroupTombstone("g", GroupRemovalCause.DELETED, now),
        new_empty_group_record("g", now_ms=now),  # the joiner's new group, after the tombstone
        joined_record(j, now, client="joiner"),
        started(0, RebalanceCause.NEW_MEMBER, now, previous="Empty", member=j),
        completed(1, [j], done, started_at=now),
        group_record(1, j, [member(j, b"a", client="joiner")], done, state_at=done),
        stabilized(1, done, join_completed_at=done, started_at=now),
    ]
    assert_replays_to_memory(env, coord)


def test_failed_delete_restores_the_group_as_it_was() -> None:
    env, coord, mark = emptied_group_with_offsets()
    now = env.now()
    before = snapshot(coord)
    deleting = coord.delete_groups(["g"])
    assert coord.groups.group("g") is None
    env.log.fail(ErrorCode.not_leader_or_follower)
    assert deleting.result() == [DeleteGroupResult("g", ErrorCode.not_coordinator)]
    assert snapshot(coord) == before
    assert env.group("g").state is GroupState.EMPTY
    assert fetch(coord, "g", None) == [FetchedOffset("t", 0, 10), FetchedOffset("t", 1, 11)]
    assert written_since(env, mark) == []
    assert_replays_to_memory(env, coord)
    # and the restored group can be deleted again
    again = coord.delete_groups(["g"])
    env.log.commit()
    assert again.result() == [DeleteGroupResult("g", ErrorCode.none)]
    assert written_since(env, mark) == [
        OffsetTombstone("g", "t", 0, DELETED, now),
        OffsetTombstone("g", "t", 1, DELETED, now),
        GroupTombstone("g", GroupRemovalCause.DELETED, now),
    ]
    assert coord.groups.group("g") is None and fetch(coord, "g", None) == []
    assert_replays_to_memory(env, coord)


def test_failed_delete_after_a_join_keeps_the_joiners_group_and_the_old_offsets() -> None:
    """The tombstones were not written, so the log still holds the old offsets, and the joiner's group follows the
    old group in it: memory keeps both, as a restart would."""
    env, coord, mark = emptied_group_with_offsets()
    now = env.now()
    deleting = coord.delete_groups(["g"])
    joining = join_new(env.gm, "g", client_id="joiner")
    env.log.fail()  # the tombstones, the new group's first record and the join's history
    assert deleting.result() == [DeleteGroupResult("g", ErrorCode.coordinator_not_available)]
    assert env.group("g").state is GroupState.PREPARING_REBALANCE  # the joiner's group, not the restored one
    env.run_until(lambda: joining.done)
    joined = joining.result()
    assert (joined.error, joined.generation_id) == (ErrorCode.none, 1)
    synced = sync(env.gm, "g", joined.member_id, 1, {joined.member_id: b"a"})
    env.log.commit()
    assert synced.result().error is ErrorCode.none
    assert env.group("g").state is GroupState.STABLE
    assert fetch(coord, "g", None) == [FetchedOffset("t", 0, 10), FetchedOffset("t", 1, 11)]
    j, done = joined.member_id, now + 3_000
    assert written_since(env, mark) == [
        completed(1, [j], done, started_at=now),
        group_record(1, j, [member(j, b"a", client="joiner")], done, state_at=done),
        stabilized(1, done, join_completed_at=done, started_at=now),
    ]
    assert_replays_to_memory(env, coord)


def test_failed_delete_does_not_restore_over_a_later_group_removed_in_turn() -> None:
    """Deleted, re-created by a joiner, emptied and deleted again before the first tombstone's write completes. The
    first write fails, the joiner's records are written, the second deletion fails: memory must hold the joiner's
    group, as the log does, not the first group."""
    env, coord, mark = emptied_group_with_offsets()
    now = env.now()
    first = coord.delete_groups(["g"])
    join_new(env.gm, "g", client_id="joiner")
    (joiner,) = env.group("g").members
    leave(env.gm, "g", joiner)
    env.run_until(lambda: env.group("g").state is GroupState.EMPTY)  # the join phase ends without members
    joiners_group = snapshot(coord)[0]["g"]
    second = coord.delete_groups(["g"])
    writes = env.log.pending
    env.log.fail(count=1)  # the first deletion
    env.log.commit(writes - 2)  # the joiner's records
    env.log.fail()  # the second deletion
    assert first.result() == [DeleteGroupResult("g", ErrorCode.coordinator_not_available)]
    assert second.result() == [DeleteGroupResult("g", ErrorCode.coordinator_not_available)]
    assert snapshot(coord)[0]["g"] == joiners_group
    assert fetch(coord, "g", None) == [FetchedOffset("t", 0, 10), FetchedOffset("t", 1, 11)]  # never deleted
    end = now + 3_000  # the initial join phase ends without members
    assert written_since(env, mark) == [
        empty_group_record(now),
        joined_record(joiner, now, client="joiner"),
        started(0, RebalanceCause.NEW_MEMBER, now, previous="Empty", member=joiner),
        removed(joiner, RemovalCause.LEFT, 0, now),  # in the initial join phase: no second rebalance
        completed(1, [], end, started_at=now),
        empty_group_record(end, generation=1, protocol_type="consumer"),
    ]
    assert_replays_to_memory(env, coord)


# ------------------------------------------------------------------------------------------- the offsets side
def test_commit_to_a_group_being_deleted_is_a_commit_to_an_unknown_group() -> None:
    env, coord, mark = emptied_group_with_offsets()
    now = env.now()
    deleting = coord.delete_groups(["g"])
    member = coord.commit_offsets(commit_request("g", ("t", 0, 99), generation=1, member_id="c0-x", version=9))
    assert member.result().partitions[0].error is ErrorCode.group_id_not_found  # as for any unknown group
    admin = coord.commit_offsets(commit_request("g", ("t", 2, 7)))  # generation -1: creates a simple group
    env.log.commit()
    assert deleting.result() == [DeleteGroupResult("g", ErrorCode.none)]
    assert admin.result().partitions[0].error is ErrorCode.none
    group = env.group("g")
    assert (group.state, group.protocol_type, group.generation_id) == (GroupState.EMPTY, None, 0)
    assert fetch(coord, "g", None) == [FetchedOffset("t", 2, 7)]
    assert state_records(env, mark) == [
        OffsetTombstone("g", "t", 0, DELETED, now),
        OffsetTombstone("g", "t", 1, DELETED, now),
        GroupTombstone("g", GroupRemovalCause.DELETED, now),
        OffsetCommitRecord("g", "t", 2, 7, -1, "", now, None, "", -1),
    ]
    assert_replays_to_memory(env, coord)


def test_commit_in_flight_before_the_delete_does_not_bring_the_group_back() -> None:
    env, coord, mark = emptied_group_with_offsets()
    now = env.now()
    in_flight = coord.commit_offsets(commit_request("g", ("t", 5, 1)))
    deleting = coord.delete_groups(["g"])
    env.log.commit(1)  # the commit lands before the tombstones
    assert in_flight.result().partitions[0].error is ErrorCode.none
    assert coord.groups.group("g") is None  # not re-created as a simple group by the commit's replay
    env.log.commit()
    assert deleting.result() == [DeleteGroupResult("g", ErrorCode.none)]
    assert coord.groups.group("g") is None and not coord.offsets.committed("g")
    assert state_records(env, mark) == [
        OffsetCommitRecord("g", "t", 5, 1, -1, "", now, None, "", -1),
        OffsetTombstone("g", "t", 0, DELETED, now),
        OffsetTombstone("g", "t", 1, DELETED, now),
        OffsetTombstone("g", "t", 5, DELETED, now),  # the in-flight commit is tombstoned too
        GroupTombstone("g", GroupRemovalCause.DELETED, now),
    ]
    assert_replays_to_memory(env, coord)


def test_commit_in_flight_before_a_failed_delete_is_kept() -> None:
    env, coord, mark = emptied_group_with_offsets()
    now = env.now()
    in_flight = coord.commit_offsets(commit_request("g", ("t", 5, 1)))
    deleting = coord.delete_groups(["g"])
    env.log.commit(1)
    env.log.fail()
    assert written_since(env, mark) == [OffsetCommitRecord("g", "t", 5, 1, -1, "", now, None, "", -1)]
    assert in_flight.result().partitions[0].error is ErrorCode.none
    assert deleting.result() == [DeleteGroupResult("g", ErrorCode.coordinator_not_available)]
    assert env.group("g").state is GroupState.EMPTY
    assert fetch(coord, "g", None) == [FetchedOffset("t", 0, 10), FetchedOffset("t", 1, 11), FetchedOffset("t", 5, 1)]
    assert_replays_to_memory(env, coord)


# --------------------------------------------------------------------------------------------- retention expiry
def expired_group() -> tuple[Env, GroupCoordinator]:
    """Group "g" Empty with offsets, and time past the retention: the next pass deletes it."""
    env, coord = make_coordinator(auto_commit=False, offsets_retention_ms=RETENTION)
    g = form_stable_group(env, "g", 1)
    coord.commit_offsets(commit_request("g", ("t", 0, 10), generation=1, member_id=g.leader))
    leave(env.gm, "g", g.leader)
    env.log.commit()
    env.clock.set(env.now() + RETENTION)
    return env, coord


def test_join_while_expiry_is_being_written_gets_a_new_group() -> None:
    env, coord = expired_group()
    now = env.now()
    mark = len(env.log.records)
    assert coord.retention.run_once() == [
        OffsetTombstone("g", "t", 0, OffsetRemovalCause.EXPIRED, now),
        GroupTombstone("g", GroupRemovalCause.EXPIRED, now),
    ]
    assert coord.groups.group("g") is None
    m = join_to_stable(env)
    assert env.group("g").members.keys() == {m}
    assert fetch(coord, "g", None) == []
    done = now + 3_000
    assert written_since(env, mark) == [
        OffsetTombstone("g", "t", 0, OffsetRemovalCause.EXPIRED, now),
        GroupTombstone("g", GroupRemovalCause.EXPIRED, now),
        empty_group_record(now),  # the joiner's new group
        joined_record(m, now, client="joiner"),
        started(0, RebalanceCause.NEW_MEMBER, now, previous="Empty", member=m),
        completed(1, [m], done, started_at=now),
        group_record(1, m, [member(m, b"a", client="joiner")], done, state_at=done),
        stabilized(1, done, join_completed_at=done, started_at=now),
    ]
    assert_replays_to_memory(env, coord)


def test_failed_expiry_restores_the_group_and_the_next_pass_retries() -> None:
    env, coord = expired_group()
    now, mark = env.now(), len(env.log.records)
    before = snapshot(coord)
    first = coord.retention.run_once()
    env.log.fail()
    assert snapshot(coord) == before
    assert written_since(env, mark) == []
    assert_replays_to_memory(env, coord)
    assert coord.retention.run_once() == first
    env.log.commit()
    assert written_since(env, mark) == [
        OffsetTombstone("g", "t", 0, OffsetRemovalCause.EXPIRED, now),
        GroupTombstone("g", GroupRemovalCause.EXPIRED, now),
    ]
    assert coord.groups.group("g") is None and not coord.offsets.committed("g")
    assert_replays_to_memory(env, coord)
