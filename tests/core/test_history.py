"""coordinator.history: the one fold of a group's records into rebalance views (memory and storage both use it)."""

from __future__ import annotations

from coordinator.history import (
    HistoryEvent,
    HistoryEventKind,
    MemberIn,
    MemberOut,
    PartitionMove,
    RebalanceOutcome,
    assignment_owners,
    committed_as_of,
    fold_history,
    rebalances_of,
)
from coordinator.records import (
    GroupRemovalCause,
    GroupStabilized,
    JoinPhaseCompleted,
    MemberJoined,
    MemberRemoved,
    OffsetRemovalCause,
    RebalanceCause,
    RebalanceStarted,
    Record,
    RemovalCause,
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


def static_joined(member_id: str, instance: str, ts: int) -> MemberJoined:
    return MemberJoined("g", member_id, instance, f"c-{member_id}", "/h", ("range",), 45_000, 60_000, ts)


def fenced(member_id: str, instance: str, gen: int, ts: int) -> MemberRemoved:
    return MemberRemoved("g", member_id, instance, RemovalCause.FENCED, None, gen, ts)


def replacement(position: int, old: str, new: str, instance: str, ts: int) -> HistoryEvent:
    return HistoryEvent(HistoryEventKind.STATIC_REPLACEMENT, "g", position, ts, member_id=new, previous_member_id=old,
                        group_instance_id=instance, client_id=f"c-{new}", client_host="/h")  # fmt: skip


def first_generation(a: str = "a") -> list[Record]:
    """Static member ``a`` (instance i-a) alone in generation 1, Stable."""
    return [
        static_joined(a, "i-a", 1_000), start(0, 1_000, a), join_done(1, (a,), 1_100),
        group_record("g", 1, [member(a, consumer_assignment({"t": [0]}))], 1_200),
        GroupStabilized("g", 1, 100, 200, 1_200),
    ]  # fmt: skip


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


def test_a_static_replacement_in_stable_is_an_event_and_not_part_of_the_next_rebalance() -> None:
    """In place (no rebalance): the fenced removal and the new id's join are no rebalance's; before, the next
    rebalance (b joining) listed a2 in and a out."""
    records = [
        *first_generation(),
        fenced("a", "i-a", 1, 5_000), static_joined("a2", "i-a", 5_000),  # positions 5, 6
        group_record("g", 1, [member("a2", consumer_assignment({"t": [0]}))], 5_000),
        joined("b", 9_000), start(1, 9_000, "b"), join_done(2, ("a2", "b"), 9_100),
        group_record("g", 2, [member("a2", b""), member("b", b"")], 9_200), GroupStabilized("g", 2, 100, 200, 9_200),
    ]  # fmt: skip
    folded = fold_history(numbered(records))
    first, second = folded.rebalances
    assert second.members_in == [MemberIn("b", None, "c", "/h", 9_000)] and second.members_out == []
    assert [m.member_id for m in first.members_in] == ["a"]
    assert folded.events == [replacement(6, "a", "a2", "i-a", 5_000)]


def test_a_static_replacement_during_a_rebalance_stays_in_it_and_is_an_event() -> None:
    """PreparingRebalance: the replacement is that rebalance's (as before); it is an event as well."""
    records = [
        *first_generation(),
        joined("b", 9_000), start(1, 9_000, "b"),
        fenced("a", "i-a", 1, 9_050), static_joined("a2", "i-a", 9_050),  # positions 7, 8
        join_done(2, ("a2", "b"), 9_100),
        group_record("g", 2, [member("a2", b""), member("b", b"")], 9_200), GroupStabilized("g", 2, 100, 200, 9_200),
        joined("c", 20_000), start(2, 20_000, "c"),
    ]  # fmt: skip
    folded = fold_history(numbered(records))
    _, second, third = folded.rebalances
    assert [m.member_id for m in second.members_in] == ["b", "a2"]
    assert second.members_out == [MemberOut("a", "i-a", "fenced", None, 9_050)]
    assert [m.member_id for m in third.members_in] == ["c"] and third.members_out == []
    assert folded.events == [replacement(8, "a", "a2", "i-a", 9_050)]


def test_a_static_replacement_that_starts_a_rebalance_counts_for_it() -> None:
    """Stable with another protocol selected: the core starts a rebalance (cause static_member_replaced) right
    after the replacement; it is that rebalance's in/out, and an event."""
    records = [
        *first_generation(),
        fenced("a", "i-a", 1, 5_000), static_joined("a2", "i-a", 5_000),
        RebalanceStarted("g", 1, RebalanceCause.STATIC_MEMBER_REPLACED, "a2", "i-a", None, "Stable", 5_000),
    ]  # fmt: skip
    folded = fold_history(numbered(records))
    second = folded.rebalances[1]
    assert [m.member_id for m in second.members_in] == ["a2"] and [m.member_id for m in second.members_out] == ["a"]
    assert folded.events == [replacement(6, "a", "a2", "i-a", 5_000)]


def test_delete_and_recreate_are_events_between_the_two_lives() -> None:
    records = [
        *first_generation(),
        MemberRemoved("g", "a", "i-a", RemovalCause.ADMIN, None, 1, 3_000),
        start(1, 3_000, "a"), JoinPhaseCompleted("g", 2, "Empty", "consumer", None, None, (), (), 0, 3_000),
        group_record("g", 2, [], 3_000),
        new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=4_000),  # position 9
        joined("b", 7_000), start(0, 7_000, "b"),  # position 10: the new life's first record
    ]  # fmt: skip
    folded = fold_history(numbered(records))
    assert folded.events == [
        HistoryEvent(HistoryEventKind.GROUP_DELETED, "g", 9, 4_000, cause="deleted"),
        HistoryEvent(HistoryEventKind.GROUP_RECREATED, "g", 10, 7_000),
    ]
    assert [r.outcome for r in folded.rebalances] == [RebalanceOutcome.STABLE, RebalanceOutcome.EMPTY,
                                                      RebalanceOutcome.IN_PROGRESS]  # fmt: skip
    assert [r.position for r in folded.rebalances] == [1, 6, 11]
