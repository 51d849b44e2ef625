"""Read APIs (storage.queries) on SQLite and PostgreSQL."""

from __future__ import annotations

from coordinator.history import HistoryEventKind, MemberIn, MemberOut, PartitionMove, fold_history
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
from storage import SqlRecordLog

from .records_gen import commit, consumer_assignment, group_record, member


def started(gen: int, cause: RebalanceCause, ts: int, member_id: str | None = None, state: str = "Stable") -> Record:
    return RebalanceStarted("g", gen, cause, member_id, None, f"why-{ts}", state, ts)


def joined(member_id: str, ts: int) -> Record:
    return MemberJoined("g", member_id, None, f"client-{member_id}", "/10.0.0.1", ("range",), 45_000, 60_000, ts)


def join_done(gen: int, members: tuple[str, ...], ts: int, duration: int, state: str = "CompletingRebalance") -> Record:
    return JoinPhaseCompleted(
        "g",
        gen,
        state,
        "consumer",
        "range" if members else None,
        members[0] if members else None,
        members,
        (),
        duration,
        ts,
    )


def scenario() -> list[list[Record]]:
    """Three rebalances of group g: first member, a second member, then m2 times out (still in progress)."""
    a01 = consumer_assignment({"t": [0, 1]})
    return [
        # 1: m1 creates the group
        [joined("m1", 1_000), started(0, RebalanceCause.NEW_MEMBER, 1_000, "m1", "Empty")],
        [join_done(1, ("m1",), 4_000, 3_000)],
        [group_record("g", 1, [member("m1", a01)], 4_100), GroupStabilized("g", 1, 100, 3_100, 4_100)],
        # 2: m2 joins; t-1 moves from m1 to m2, t-2 appears
        [joined("m2", 10_000), started(1, RebalanceCause.NEW_MEMBER, 10_000, "m2")],
        [join_done(2, ("m1", "m2"), 10_500, 500)],
        [
            group_record(
                "g",
                2,
                [member("m1", consumer_assignment({"t": [0]})), member("m2", consumer_assignment({"t": [1, 2]}))],
                10_600,
            ),
            GroupStabilized("g", 2, 100, 600, 10_600),
        ],
        # 3: m2's session expires; the rebalance is still running
        [
            MemberRemoved("g", "m2", None, RemovalCause.SESSION_TIMEOUT, None, 2, 60_000),
            started(2, RebalanceCause.SESSION_TIMEOUT, 60_000, "m2"),
        ],
    ]


async def write(log: SqlRecordLog, batches: list[list[Record]]) -> None:
    for batch in batches:
        log.append(batch)
        await log.flush()


async def test_rebalance_history_newest_first_with_members_durations_and_moves(record_log: SqlRecordLog) -> None:
    await write(record_log, scenario())
    views, total = await record_log.queries.rebalance_history("g")
    assert total == 3
    assert [(v.from_generation, v.to_generation, v.outcome) for v in views] == [
        (2, None, "in_progress"),
        (1, 2, "stable"),
        (0, 1, "stable"),
    ]
    running, second, first = views
    assert (running.cause, running.member_id, running.started_ms) == ("session_timeout", "m2", 60_000)
    assert running.members_out == [MemberOut("m2", None, "session_timeout", None, 60_000)]
    assert running.partitions_moved is None and running.duration_ms is None

    assert (second.cause, second.previous_state, second.reason) == ("new_member", "Stable", "why-10000")
    assert second.members_in == [MemberIn("m2", None, "client-m2", "/10.0.0.1", 10_000)]
    assert (second.join_completed_ms, second.stabilized_ms) == (10_500, 10_600)
    assert (second.join_duration_ms, second.sync_duration_ms, second.duration_ms) == (500, 100, 600)
    assert (second.leader, second.protocol, second.members) == ("m1", "range", ["m1", "m2"])
    assert second.partitions_moved == [PartitionMove("t", 1, "m1", "m2"), PartitionMove("t", 2, None, "m2")]

    assert first.previous_state == "Empty"
    assert first.members_in == [MemberIn("m1", None, "client-m1", "/10.0.0.1", 1_000)]
    assert first.partitions_moved == [PartitionMove("t", 0, None, "m1"), PartitionMove("t", 1, None, "m1")]
    assert first.duration_ms == 3_100


async def test_rebalance_history_pages_and_time_filters_give_the_same_views(record_log: SqlRecordLog) -> None:
    await write(record_log, scenario())
    everything, _ = await record_log.queries.rebalance_history("g")
    page, total = await record_log.queries.rebalance_history("g", limit=1, offset=1)
    assert total == 3 and page == [everything[1]]  # moves and joins come out the same when read in a window
    page, total = await record_log.queries.rebalance_history("g", limit=1, offset=2)
    assert page == [everything[2]]
    window, total = await record_log.queries.rebalance_history("g", since_ms=1_000, until_ms=60_000)
    assert total == 2 and window == everything[1:]
    assert await record_log.queries.rebalance_history("other") == ([], 0)


async def test_rebalance_to_empty_and_group_deletion(record_log: SqlRecordLog) -> None:
    await write(record_log, scenario()[:3])
    await write(
        record_log,
        [
            [
                MemberRemoved("g", "m1", None, RemovalCause.LEFT, "shutdown", 1, 20_000),
                started(1, RebalanceCause.MEMBER_LEFT, 20_000, "m1"),
            ],
            [join_done(2, (), 20_001, 1, state="Empty"), group_record("g", 2, [], 20_001)],
            [started(2, RebalanceCause.NEW_MEMBER, 30_000, "m9", "Empty")],
            [new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=31_000)],
        ],
    )
    views, total = await record_log.queries.rebalance_history("g")
    assert total == 3
    assert [(v.cause, v.outcome, v.duration_ms) for v in views] == [
        ("new_member", "deleted", None),
        ("member_left", "empty", 1),
        ("new_member", "stable", 3_100),
    ]
    assert views[1].members_out == [MemberOut("m1", None, "left", "shutdown", 20_000)]


async def test_commit_log_time_range_paging_and_latest_offsets(record_log: SqlRecordLog) -> None:
    commits = [commit("g", "t", i % 3, 100 + i, 1_000 + 10 * i, member_id="m1", generation=4) for i in range(30)]
    await write(record_log, [commits[:10], commits[10:], [commit("other", "t", 0, 5, 1_500)]])
    entries, total = await record_log.queries.commit_log("g", since_ms=1_100, until_ms=1_200, limit=4)
    assert total == 10
    assert [e.offset for e in entries] == [119, 118, 117, 116]
    entries, _ = await record_log.queries.commit_log("g", since_ms=1_100, until_ms=1_200, limit=4, offset=8)
    assert [e.offset for e in entries] == [111, 110]
    assert all((e.member_id, e.generation_id, e.topic, e.admin) == ("m1", 4, "t", False) for e in entries)
    everything, total = await record_log.queries.commit_log("g", limit=1_000)
    assert total == 30 and [e.offset for e in everything] == list(range(129, 99, -1))

    latest = await record_log.queries.latest_offsets("g")
    assert [(o.topic, o.partition, o.offset) for o in latest] == [("t", 0, 127), ("t", 1, 128), ("t", 2, 129)]
    assert await record_log.queries.latest_offsets("g", limit=2, offset=1) == latest[1:3]
    assert await record_log.queries.latest_offsets("other", limit=5) != []


async def test_committed_as_of_replays_commits_and_removals(record_log: SqlRecordLog) -> None:
    await write(
        record_log,
        [
            [commit("g", "t", 0, 10, 1_000), commit("g", "t", 1, 20, 1_000)],
            [commit("g", "t", 0, 11, 2_000)],
            [new_offset_tombstone("g", "t", 1, cause=OffsetRemovalCause.DELETED, now_ms=3_000)],
            [new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=4_000)],
            [commit("g", "t", 2, 30, 5_000)],
        ],
    )
    q = record_log.queries
    assert await q.committed_as_of("g", 999) == {}
    assert await q.committed_as_of("g", 1_000) == {("t", 0): 10, ("t", 1): 20}
    assert await q.committed_as_of("g", 2_500) == {("t", 0): 11, ("t", 1): 20}
    assert await q.committed_as_of("g", 3_000) == {("t", 0): 11}
    assert await q.committed_as_of("g", 4_000) == {}
    assert await q.committed_as_of("g", 9_000) == {("t", 2): 30}


async def test_group_records_round_trip_history_records(record_log: SqlRecordLog) -> None:
    batches = scenario()
    await write(record_log, batches)
    stored = await record_log.queries.group_records("g")
    assert [r for _, r in stored] == [r for batch in batches for r in batch]
    positions = [p for p, _ in stored]
    assert positions == sorted(positions)
    assert [r for _, r in await record_log.queries.group_records("g", from_position=3, to_position=5)] == [
        r for batch in batches for r in batch
    ][2:4]


def static_joined(member_id: str, instance: str, ts: int) -> Record:
    return MemberJoined("g", member_id, instance, f"client-{member_id}", "/10.0.0.2", ("range",), 45_000, 60_000, ts)


def fenced(member_id: str, instance: str, gen: int, ts: int) -> Record:
    return MemberRemoved("g", member_id, instance, RemovalCause.FENCED, None, gen, ts)


def two_lives() -> list[list[Record]]:
    """Group g's first life: the scenario's two Stable rebalances, static member m1 (instance i-1) replaced in place by
    m1b at 20_000, then m1b by m1c during a rebalance (m3 joining) at 30_050; deleted at 40_000 (expired); created
    again by m9 at 50_000."""
    return [
        *scenario()[:6],
        [fenced("m1", "i-1", 2, 20_000), static_joined("m1b", "i-1", 20_000), group_record("g", 2, [], 20_000)],
        [joined("m3", 30_000), started(2, RebalanceCause.NEW_MEMBER, 30_000, "m3")],
        [fenced("m1b", "i-1", 2, 30_050), static_joined("m1c", "i-1", 30_050)],
        [join_done(3, ("m1c", "m2", "m3"), 30_100, 100)],
        [group_record("g", 3, [], 30_200), GroupStabilized("g", 3, 100, 200, 30_200)],
        [MemberRemoved("g", "m3", None, RemovalCause.LEFT, None, 3, 35_000), started(3, RebalanceCause.MEMBER_LEFT,
                                                                                    35_000, "m3")],
        [join_done(4, (), 35_001, 1, state="Empty"), group_record("g", 4, [], 35_001)],
        [new_group_tombstone("g", cause=GroupRemovalCause.EXPIRED, now_ms=40_000)],
        [joined("m9", 50_000), started(0, RebalanceCause.NEW_MEMBER, 50_000, "m9", "Empty")],
    ]  # fmt: skip


async def test_history_events_replacements_delete_and_recreate(record_log: SqlRecordLog) -> None:
    await write(record_log, two_lives())
    events, total = await record_log.queries.history_events("g")
    assert total == 4
    assert [(e.kind, e.timestamp_ms) for e in events] == [
        (HistoryEventKind.GROUP_RECREATED, 50_000),
        (HistoryEventKind.GROUP_DELETED, 40_000),
        (HistoryEventKind.STATIC_REPLACEMENT, 30_050),
        (HistoryEventKind.STATIC_REPLACEMENT, 20_000),
    ]
    recreated, deleted, during, in_place = events
    assert (in_place.previous_member_id, in_place.member_id, in_place.group_instance_id) == ("m1", "m1b", "i-1")
    assert (in_place.client_id, in_place.client_host) == ("client-m1b", "/10.0.0.2")
    assert (during.previous_member_id, during.member_id) == ("m1b", "m1c")
    assert deleted.cause == "expired" and deleted.position < recreated.position
    # the fold over everything stored says the same (storage folds only the records the events depend on)
    assert list(reversed(fold_history(await record_log.queries.group_records("g")).events)) == events

    # the in-place replacement is no rebalance's; the one during m3's rebalance stays in it
    views, _ = await record_log.queries.rebalance_history("g")
    by_cause = {(v.cause, v.started_ms): v for v in views}
    m3 = by_cause[("new_member", 30_000)]
    assert [i.member_id for i in m3.members_in] == ["m3", "m1c"]
    assert [o.member_id for o in m3.members_out] == ["m1b"]
    assert all("m1b" not in {i.member_id for i in v.members_in} for v in views if v is not m3)


async def test_history_events_time_range_and_paging(record_log: SqlRecordLog) -> None:
    await write(record_log, two_lives())
    everything, _ = await record_log.queries.history_events("g")
    page, total = await record_log.queries.history_events("g", limit=2, offset=1)
    assert total == 4 and page == everything[1:3]
    # a life that ended before the range and started again in it
    window, total = await record_log.queries.history_events("g", since_ms=45_000)
    assert total == 1 and window == everything[:1]
    window, total = await record_log.queries.history_events("g", since_ms=20_000, until_ms=40_000)
    assert total == 2 and window == everything[2:]
    window, total = await record_log.queries.history_events("g", since_ms=20_001, until_ms=40_001)
    assert total == 2 and window == everything[1:3]
    assert await record_log.queries.history_events("other") == ([], 0)
