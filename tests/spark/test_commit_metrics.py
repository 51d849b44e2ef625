"""Commit cadence, rewinds, partitions left uncommitted while Stable, Empty groups about to expire."""

from __future__ import annotations

import math

from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_jobs import commits, timeline
from spark_jobs.config import DAY_MS, ReportConfig, ReportRange

from .history import History, M

S = 1000


def nearest_rank(values: list[int], p: float) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(p * len(ordered)), 1) - 1]


def commit_history() -> History:
    return (
        History()
        .commit(1, "c", "t", 0, 10, 0, member="m1", gen=1)
        .commit(2, "c", "t", 0, 20, 5 * S, member="m1", gen=1)
        .commit(3, "c", "t", 0, 15, 15 * S, member="m2", gen=2)  # rewind by 5
        .offset_removed(4, "c", "t", 0, 20 * S)
        .commit(5, "c", "t", 0, 3, 30 * S, member="m2", gen=2)  # after a removal: a new lineage, not a rewind
        .commit(6, "c", "t", 0, 8, 32 * S, member="m2", gen=2)
        .commit(7, "c", "t", 1, 100, 1 * S)
        .commit(8, "c", "t", 1, 100, 2 * S)  # same offset: not a rewind
    )


RANGE = ReportRange(0, 60 * S)


def test_commit_cadence_per_partition_and_group(spark: SparkSession) -> None:
    steps = commits.commit_steps(commit_history().inputs(spark))
    per_partition, per_group = commits.commit_cadence(steps, ReportConfig(), RANGE)
    p0 = [5 * S, 10 * S, 2 * S]  # 0->5, 5->15, (removal), 30->32
    p1 = [1 * S]

    def pct(values: list[int]) -> tuple[int, int, int, int]:
        return nearest_rank(values, 0.5), nearest_rank(values, 0.9), nearest_rank(values, 0.99), max(values)

    cols = [
        "commits",
        "first_commit_ms",
        "last_commit_ms",
        "interval_p50_ms",
        "interval_p90_ms",
        "interval_p99_ms",
        "interval_max_ms",
    ]
    assertDataFrameEqual(
        per_partition.select("partition_index", *cols),
        [Row(0, 5, 0, 32 * S, *pct(p0)), Row(1, 2, 1 * S, 2 * S, *pct(p1))],
    )
    assertDataFrameEqual(per_group.select("group_id", "partitions", *cols), [Row("c", 2, 7, 0, 32 * S, *pct(p0 + p1))])


def test_commit_rewinds(spark: SparkSession) -> None:
    steps = commits.commit_steps(commit_history().inputs(spark))
    rewinds = commits.commit_rewinds(steps, RANGE)
    assertDataFrameEqual(
        rewinds.select(
            "partition_index",
            "position",
            "previous_offset",
            "committed_offset",
            "rewind_by",
            "member_id",
            "previous_member_id",
            "previous_generation_id",
        ),
        [Row(0, 3, 20, 15, 5, "m2", "m1", 1)],
    )


def stale_history() -> History:
    a = [("t", 0), ("t", 1)]
    return (
        History()
        .started(1, "st", 0, 0, prev="Empty")
        .joined(2, "st", 0, 1, join_ms=0)
        .snapshot(3, "st", 1 * M, 1, {"m1": (None, a)})
        .stabilized(4, "st", 1 * M, 1, sync_ms=M, total_ms=M)  # Stable from 1 min
        .commit(5, "st", "t", 0, 1, 5 * M)
        .commit(6, "st", "t", 1, 1, 5 * M)
        .commit(7, "st", "t", 0, 2, 10 * M)
        .commit(8, "st", "t", 0, 3, 40 * M)
        .started(9, "st", 60 * M, 1, cause="leader_rejoin")
        .joined(10, "st", 61 * M, 2, join_ms=M)
        .snapshot(11, "st", 62 * M, 2, {"m1": (None, [("t", 0), ("t", 2)])})
        .stabilized(12, "st", 62 * M, 2, sync_ms=M, total_ms=2 * M)  # Stable from 62 min, open at until
        .commit(13, "st", "t", 0, 4, 70 * M)
        .commit(14, "st", "t", 0, 5, 100 * M)
    )


def test_stale_partitions_while_stable(spark: SparkSession) -> None:
    rng = ReportRange(0, 120 * M)
    inputs = stale_history().inputs(spark)
    intervals = timeline.state_intervals(inputs, rng)
    stale = commits.stale_partitions(inputs, intervals, ReportConfig(stale_commit_ms=15 * M), rng)
    assertDataFrameEqual(
        stale.select(
            "partition_index",
            "generation_id",
            "owner",
            "gap_start_ms",
            "gap_end_ms",
            "gap_ms",
            "after_commit",
            "ongoing",
        ),
        [
            Row(0, 1, "m1", 10 * M, 40 * M, 30 * M, True, False),
            Row(0, 1, "m1", 40 * M, 60 * M, 20 * M, True, False),  # ends when the rebalance starts
            Row(1, 1, "m1", 5 * M, 60 * M, 55 * M, True, False),
            Row(0, 2, "m1", 70 * M, 100 * M, 30 * M, True, False),
            Row(0, 2, "m1", 100 * M, 120 * M, 20 * M, True, True),
            Row(2, 2, "m1", 62 * M, 120 * M, 58 * M, False, True),  # assigned, never committed
            # t-1 is not assigned in generation 2, so its silence then is not reported.
        ],
    )


def test_empty_groups_whose_offsets_expire_within_a_day(spark: SparkSession) -> None:
    d = DAY_MS
    until = 10 * d
    history = (
        History()
        # e1: consumer group Empty since day 2; offsets expire at day 2 + 7 = day 9 (already due at until).
        .snapshot(1, "e1", 0, 1, {"m1": (None, [("t", 0)])})
        .started(2, "e1", 2 * d, 1, cause="member_left")
        .joined(3, "e1", 2 * d, 2, join_ms=0, state="Empty", members=0)
        .snapshot(4, "e1", 2 * d, 2)
        .commit(5, "e1", "t", 0, 1, 1 * d)
        .commit(6, "e1", "t", 1, 1, 1 * d)
        # e2: Empty since day 5: expiry day 12, beyond until + 1 day.
        .snapshot(10, "e2", 5 * d, 2)
        .commit(11, "e2", "t", 0, 1, 0)
        # e3: Stable: nothing expires, however old.
        .started(20, "e3", 0, 0, prev="Empty")
        .joined(21, "e3", 0, 1, join_ms=0)
        .snapshot(22, "e3", 0, 1, {"m1": (None, [("t", 0)])})
        .stabilized(23, "e3", 0, 1, sync_ms=0, total_ms=0)
        .commit(24, "e3", "t", 0, 1, 0)
        # simple: no protocol type, no metadata: retention counts from each commit.
        .commit(30, "simple", "t", 0, 1, int(3.5 * d), member="", gen=-1)
        .commit(31, "simple", "t", 1, 1, int(4.5 * d), member="", gen=-1)
        # e4: Empty since day 8 but an explicit expire timestamp (OffsetCommit v2-4) at day 10.2.
        .snapshot(40, "e4", 8 * d, 2)
        .commit(41, "e4", "t", 0, 1, 0, expire_ts=int(10.2 * d))
        # e5: its only offset was deleted.
        .snapshot(50, "e5", 0, 2)
        .commit(51, "e5", "t", 0, 1, 0)
        .offset_removed(52, "e5", "t", 0, 1 * d)
    )
    out = commits.expiring_groups(history.inputs(spark), ReportConfig(), ReportRange(0, until))
    assertDataFrameEqual(
        out.select(
            "group_id",
            "protocol_type",
            "empty_since_ms",
            "live_offsets",
            "offsets_expiring",
            "earliest_expiry_ms",
            "all_expired_ms",
        ),
        [
            Row("e1", "consumer", 2 * d, 2, 2, 9 * d, 9 * d),
            Row("simple", "", None, 2, 1, int(10.5 * d), int(11.5 * d)),
            Row("e4", "consumer", 8 * d, 1, 1, int(10.2 * d), int(10.2 * d)),
        ],
    )


def test_retention_is_a_parameter(spark: SparkSession) -> None:
    history = History().snapshot(1, "e", 0, 2).commit(2, "e", "t", 0, 1, 0)
    rng = ReportRange(0, 2 * DAY_MS)
    assert commits.expiring_groups(history.inputs(spark), ReportConfig(), rng).count() == 0
    short = ReportConfig(offsets_retention_minutes=24 * 60)  # 1 day from Empty at 0: due at day 1
    out = commits.expiring_groups(history.inputs(spark), short, rng)
    assertDataFrameEqual(out.select("group_id", "earliest_expiry_ms"), [Row("e", DAY_MS)])
