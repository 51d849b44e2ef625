"""coordinator.history: the one fold of a group's records into rebalance views (memory and storage both use it)."""

from __future__ import annotations

from coordinator.history import (
    PartitionMove,
    RebalanceOutcome,
    assignment_owners,
    committed_as_of,
    rebalances_of,
)
from coordinator.records import (
    GroupRemovalCause,
    GroupStabilized,
    JoinPhaseCompleted,
    MemberJoined,
    OffsetRemovalCause,
    RebalanceCause,
    RebalanceStarted,
    Record,
    new_group_tombstone,
    new_offset_tombstone,
)
from tests.storage.records_gen import commit, consumer_assignment, group_record, member


def start(gen: int, ts: int, member_id: str) -> RebalanceStarted:
    return RebalanceStarted("g", gen, RebalanceCause.NEW_MEMBER, member_id, None, None, "Stable", ts)


def joined(member_id: str, ts: int) -> MemberJoined:
    return MemberJoined("g", member_id, None, "c", "/h", ("range",), 45_000, 60_000, ts)


def join_done(gen: int, members: tuple[str, ...], ts: int) -> JoinPhaseCompleted:
    return JoinPhaseCompleted("g", gen, "CompletingRebalance", "consumer", "range", members[0], members, (), 10, ts)


def numbered(records: list[Record]) -> list[tuple[int, Record]]:
    return list(enumerate(records))


def test_moves_compare_the_record_in_force_at_the_start_with_the_one_written_while_open() -> None:
    """A static member replacing itself later rewrites its generation's record: that must not rewrite the moves of
    the rebalance that made the generation (the fold compares positions, not 'the last record of a generation')."""
    a_all = [member("a", consumer_assignment({"t": [0, 1]}))]
    a0, t1 = member("a", consumer_assignment({"t": [0]})), consumer_assignment({"t": [1]})
    records: list[Record] = [
        joined("b", 1_000), start(1, 1_000, "b"), join_done(2, ("b", "a"), 1_100),
        group_record("g", 2, [a0, member("b", t1)], 1_200), GroupStabilized("g", 2, 100, 200, 1_200),
        group_record("g", 2, [a0, member("b2", t1)], 5_000),  # later, in Stable: b's static replacement b2
    ]  # fmt: skip
    before = group_record("g", 1, a_all, 500)
    (r,) = rebalances_of(numbered([before, *records]))
    assert r.outcome is RebalanceOutcome.STABLE and r.members == ["a", "b"]  # sorted
    assert r.partitions_moved == [PartitionMove("t", 1, "a", "b")]
    assert [m.member_id for m in r.members_in] == ["b"]


def test_a_tombstone_resets_the_assignment_in_force_and_an_undecodable_one_hides_moves() -> None:
    records: list[Record] = [
        group_record("g", 1, [member("a", consumer_assignment({"t": [0]}))], 100),
        new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=200),
        start(0, 300, "a"), join_done(1, ("a",), 310),
        group_record("g", 1, [member("a", consumer_assignment({"t": [0]}))], 320), GroupStabilized("g", 1, 10, 20, 320),
        start(1, 400, "b"), join_done(2, ("a", "b"), 410),
        group_record("g", 2, [member("a", b"\xff"), member("b", consumer_assignment({"t": [1]}))], 420),
        GroupStabilized("g", 2, 10, 20, 420),
    ]  # fmt: skip
    first, second = rebalances_of(numbered(records))
    assert first.partitions_moved == [PartitionMove("t", 0, None, "a")]  # from nobody: the group was deleted
    assert second.outcome is RebalanceOutcome.STABLE and second.partitions_moved is None
    assert assignment_owners(group_record("g", 3, [], 0, protocol_type="")) == {}


def test_committed_as_of_replays_commits_and_tombstones_up_to_the_instant() -> None:
    records: list[Record] = [
        commit("g", "t", 0, 10, 1_000),
        commit("g", "t", 1, 20, 1_000),
        new_offset_tombstone("g", "t", 1, cause=OffsetRemovalCause.DELETED, now_ms=2_000),
        new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=3_000),
    ]
    assert committed_as_of(records, 999) == {}
    assert committed_as_of(records, 1_000) == {("t", 0): 10, ("t", 1): 20}
    assert committed_as_of(records, 2_000) == {("t", 0): 10}
    assert committed_as_of(records, 3_000) == {}
