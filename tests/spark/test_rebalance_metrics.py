"""Rebalance history transforms on small inline histories; every expected value is worked out by hand in the test."""

from __future__ import annotations

import math

from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_jobs import rebalances, timeline
from spark_jobs.config import ReportConfig, ReportRange

from .history import H, History, M


def nearest_rank(values: list[int], p: float) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(p * len(ordered)), 1) - 1]


def three_rebalances() -> History:
    """Group g: Empty, a first rebalance, Stable, a second one (session timeout), Stable, and a third one that is
    still in its join phase at until = 3 h."""
    return (
        History()
        .snapshot(1, "g", 0, 0)
        .started(2, "g", 10 * M, 0, cause="new_member", prev="Empty")
        .joined(3, "g", 13 * M, 1, join_ms=3 * M)
        .snapshot(4, "g", 14 * M, 1, {"m1": (None, [("t", 0)])})
        .stabilized(5, "g", 14 * M, 1, sync_ms=1 * M, total_ms=4 * M)
        .started(6, "g", 70 * M, 1, cause="session_timeout")
        .joined(7, "g", 75 * M, 2, join_ms=5 * M)
        .stabilized(8, "g", 77 * M, 2, sync_ms=2 * M, total_ms=7 * M)
        .started(9, "g", 170 * M, 2, cause="member_left")
    )


RANGE = ReportRange(0, 3 * H)


def test_episodes_report_outcomes_and_the_rebalance_in_progress_at_until(spark: SparkSession) -> None:
    episodes = timeline.rebalance_episodes(three_rebalances().inputs(spark), RANGE)
    cols = ["position", "cause", "outcome", "ended_ms", "join_duration_ms", "sync_duration_ms", "rebalance_duration_ms"]
    assertDataFrameEqual(
        episodes.select(cols),
        [
            Row(
                position=2,
                cause="new_member",
                outcome="stable",
                ended_ms=14 * M,
                join_duration_ms=3 * M,
                sync_duration_ms=1 * M,
                rebalance_duration_ms=4 * M,
            ),
            Row(
                position=6,
                cause="session_timeout",
                outcome="stable",
                ended_ms=77 * M,
                join_duration_ms=5 * M,
                sync_duration_ms=2 * M,
                rebalance_duration_ms=7 * M,
            ),
            Row(
                position=9,
                cause="member_left",
                outcome="in_progress",
                ended_ms=None,
                join_duration_ms=None,
                sync_duration_ms=None,
                rebalance_duration_ms=None,
            ),
        ],
    )


def test_rebalance_counts_and_rate_per_window(spark: SparkSession) -> None:
    episodes = timeline.rebalance_episodes(three_rebalances().inputs(spark), RANGE)
    counts = rebalances.rebalance_counts(episodes, RANGE)
    cols = ["granularity", "window_start_ms", "rebalances", "completed", "in_progress", "rebalances_per_hour"]
    assertDataFrameEqual(
        counts.select(cols),
        [
            Row(
                granularity="hour", window_start_ms=0, rebalances=1, completed=1, in_progress=0, rebalances_per_hour=1.0
            ),
            Row(
                granularity="hour", window_start_ms=H, rebalances=1, completed=1, in_progress=0, rebalances_per_hour=1.0
            ),
            Row(
                granularity="hour",
                window_start_ms=2 * H,
                rebalances=1,
                completed=0,
                in_progress=1,
                rebalances_per_hour=1.0,
            ),
            # The day window is covered for 3 h only (the report range), so the rate is 3 / 3.
            Row(
                granularity="day", window_start_ms=0, rebalances=3, completed=2, in_progress=1, rebalances_per_hour=1.0
            ),
        ],
    )


def test_cause_mix(spark: SparkSession) -> None:
    episodes = timeline.rebalance_episodes(three_rebalances().inputs(spark), RANGE)
    mix = rebalances.cause_mix(episodes, RANGE).where("granularity = 'day'")
    assertDataFrameEqual(
        mix.select("cause", "rebalances", "share"),
        [
            Row(cause="new_member", rebalances=1, share=1 / 3),
            Row(cause="session_timeout", rebalances=1, share=1 / 3),
            Row(cause="member_left", rebalances=1, share=1 / 3),
        ],
    )


def test_time_in_each_state_rebalancing_apart_from_empty(spark: SparkSession) -> None:
    intervals = timeline.state_intervals(three_rebalances().inputs(spark), RANGE)
    st = rebalances.state_time(intervals, RANGE)
    cols = [
        "granularity",
        "window_start_ms",
        "empty_ms",
        "preparing_rebalance_ms",
        "completing_rebalance_ms",
        "stable_ms",
        "tracked_ms",
        "rebalancing_ms",
        "rebalancing_share",
        "empty_share",
    ]
    # Hour 0: Empty 0-10, Preparing 10-13, Completing 13-14, Stable 14-60 (minutes).
    # Hour 1: Stable 60-70, Preparing 70-75, Completing 75-77, Stable 77-120.
    # Hour 2: Stable 120-170, Preparing 170-180 (open at until).
    assertDataFrameEqual(
        st.select(cols),
        [
            Row("hour", 0, 10 * M, 3 * M, 1 * M, 46 * M, 60 * M, 4 * M, 4 / 60, 10 / 60),
            Row("hour", H, 0, 5 * M, 2 * M, 53 * M, 60 * M, 7 * M, 7 / 60, 0.0),
            Row("hour", 2 * H, 0, 10 * M, 0, 50 * M, 60 * M, 10 * M, 10 / 60, 0.0),
            Row("day", 0, 10 * M, 18 * M, 3 * M, 149 * M, 180 * M, 21 * M, 21 / 180, 10 / 180),
        ],
    )


def test_phase_duration_percentiles(spark: SparkSession) -> None:
    history = three_rebalances()
    # Two more completed rebalances in hour 2 of another group, to have more than two values.
    for i, (join_ms, sync_ms) in enumerate([(1000, 300), (9000, 100), (4000, 200), (2000, 400)]):
        base = 10 + 4 * i
        ts = 2 * H + i * M
        history.started(100 + base, "k", ts, i).joined(101 + base, "k", ts, i + 1, join_ms=join_ms).stabilized(
            102 + base, "k", ts, i + 1, sync_ms=sync_ms, total_ms=join_ms + sync_ms
        )
    episodes = timeline.rebalance_episodes(history.inputs(spark), RANGE)
    out = rebalances.phase_durations(episodes, ReportConfig(), RANGE).where("granularity = 'day'")
    joins_k = [1000, 9000, 4000, 2000]
    syncs_k = [300, 100, 200, 400]

    def expected(group: str, phase: str, values: list[int]) -> Row:
        return Row(
            group,
            phase,
            len(values),
            nearest_rank(values, 0.5),
            nearest_rank(values, 0.9),
            nearest_rank(values, 0.99),
            max(values),
        )

    assertDataFrameEqual(
        out.select("group_id", "phase", "count", "p50_ms", "p90_ms", "p99_ms", "max_ms"),
        [
            expected("g", "join", [3 * M, 5 * M]),
            expected("g", "sync", [1 * M, 2 * M]),
            expected("g", "rebalance", [4 * M, 7 * M]),
            expected("k", "join", joins_k),
            expected("k", "sync", syncs_k),
            expected("k", "rebalance", [j + s for j, s in zip(joins_k, syncs_k, strict=True)]),
        ],
    )


def deleted_and_recreated() -> History:
    return (
        History()
        .started(1, "h", 0, 0, prev="Empty")
        .joined(2, "h", 1 * M, 1, join_ms=1 * M)
        .stabilized(3, "h", 2 * M, 1, sync_ms=1 * M, total_ms=2 * M)
        .started(4, "h", 5 * M, 1, cause="member_left")
        .joined(5, "h", 5 * M, 2, join_ms=0, state="Empty", members=0)
        .snapshot(6, "h", 5 * M, 2)
        .removed(7, "h", 10 * M)
        .started(8, "h", 20 * M, 0, prev="Empty")
        .joined(9, "h", 21 * M, 1, join_ms=1 * M)
        .stabilized(10, "h", 22 * M, 1, sync_ms=1 * M, total_ms=2 * M)
    )


def test_state_intervals_of_a_group_deleted_and_recreated(spark: SparkSession) -> None:
    rng = ReportRange(0, 30 * M)
    intervals = timeline.state_intervals(deleted_and_recreated().inputs(spark), rng)
    assertDataFrameEqual(
        intervals.select("incarnation", "state", "generation_id", "start_ms", "end_ms", "is_open"),
        [
            Row(0, "PreparingRebalance", 0, 0, 1 * M, False),
            Row(0, "CompletingRebalance", 1, 1 * M, 2 * M, False),
            Row(0, "Stable", 1, 2 * M, 5 * M, False),
            # PreparingRebalance 5-5 has no length; the Empty snapshot repeats the join phase's Empty.
            Row(0, "Empty", 2, 5 * M, 10 * M, False),
            # 10-20: the group did not exist (Dead), not reported.
            Row(1, "PreparingRebalance", 0, 20 * M, 21 * M, False),
            Row(1, "CompletingRebalance", 1, 21 * M, 22 * M, False),
            Row(1, "Stable", 1, 22 * M, 30 * M, True),
        ],
    )


def test_episodes_of_a_group_deleted_and_recreated(spark: SparkSession) -> None:
    rng = ReportRange(0, 30 * M)
    episodes = timeline.rebalance_episodes(deleted_and_recreated().inputs(spark), rng)
    assertDataFrameEqual(
        episodes.select("position", "incarnation", "outcome", "from_generation_id", "to_generation_id", "ended_ms"),
        [
            Row(1, 0, "stable", 0, 1, 2 * M),
            Row(4, 0, "empty", 1, 2, 5 * M),
            Row(8, 1, "stable", 0, 1, 22 * M),
        ],
    )


def test_state_intervals_are_clipped_to_since(spark: SparkSession) -> None:
    rng = ReportRange(30 * M, 3 * H)
    st = rebalances.state_time(timeline.state_intervals(three_rebalances().inputs(spark), rng), rng)
    # From 30 min: hour 0 is Stable 30-60 only; the day holds the rest as before.
    assertDataFrameEqual(
        st.where("window_start_ms = 0").select("granularity", "stable_ms", "tracked_ms"),
        [Row("hour", 30 * M, 30 * M), Row("day", 133 * M, 150 * M)],
    )


def churn_history() -> History:
    return (
        History()
        .member_joined(1, "m", 1 * M, "m1")
        .member_joined(2, "m", 2 * M, "m2", instance="i2")
        .member_removed(3, "m", 30 * M, "m1", "left")
        .member_joined(4, "m", 61 * M, "m3")
        .member_removed(5, "m", 70 * M, "m2", "session_timeout", instance="i2")
        .member_removed(6, "m", 80 * M, "m3", "group_deleted")
        .member_removed(7, "m", 3 * H, "m4", "left")  # after until: not counted
        .snapshot(8, "m", 1 * M, 1, {"m1": (None, []), "m2": ("i2", [])})
        .snapshot(9, "m", 70 * M, 2, {"m2": ("i2", []), "m3": ("i3", []), "m4": (None, [])})
        .snapshot(10, "m", 80 * M, 3)
    )


def test_member_churn(spark: SparkSession) -> None:
    rng = ReportRange(0, 2 * H)
    churn = rebalances.member_churn(churn_history().inputs(spark), rng)
    cols = [
        "granularity",
        "window_start_ms",
        "joins",
        "static_joins",
        "leaves",
        "evictions",
        "removed_by_group_deletion",
        "joins_per_hour",
        "evictions_per_hour",
    ]
    assertDataFrameEqual(
        churn.select(cols),
        [
            Row("hour", 0, 2, 1, 1, 0, 0, 2.0, 0.0),
            Row("hour", H, 1, 0, 0, 1, 1, 1.0, 1.0),
            Row("day", 0, 3, 1, 1, 1, 1, 1.5, 0.5),  # the day is covered for 2 h
        ],
    )


def test_static_and_dynamic_membership(spark: SparkSession) -> None:
    rng = ReportRange(0, 2 * H)
    out = rebalances.membership(churn_history().inputs(spark), rng)
    assertDataFrameEqual(
        out.select(
            "granularity",
            "window_start_ms",
            "generations",
            "max_members",
            "member_slots",
            "static_member_slots",
            "static_share",
        ),
        [
            Row("hour", 0, 1, 2, 2, 1, 1 / 2),
            Row("hour", H, 1, 3, 3, 2, 2 / 3),
            Row("day", 0, 2, 3, 5, 3, 3 / 5),
        ],
    )
