"""Partitions moved between consecutive generations, and assignment balance."""

from __future__ import annotations

from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_jobs import assignments
from spark_jobs.config import ReportRange

from .history import History, M

RANGE = ReportRange(0, 60 * M)
COLS = [
    "group_id",
    "incarnation",
    "generation_id",
    "assigned_partitions",
    "previous_generation_id",
    "partitions_moved",
    "partitions_added",
    "moved_share",
    "max_partitions_per_member",
    "min_partitions_per_member",
    "balance_ratio",
]


def test_moves_balance_empty_assignment_and_recreated_group(spark: SparkSession) -> None:
    t = [("t", p) for p in range(5)]
    history = (
        History()
        .snapshot(1, "a", 1 * M, 1, {"m1": (None, t[0:2]), "m2": (None, t[2:4])})
        # t2: m2 -> m1, t3: m2 -> m3: 2 of 4 moved.
        .snapshot(2, "a", 2 * M, 2, {"m1": (None, t[0:3]), "m3": (None, t[3:4])})
        # A generation with members but no assignment: reported, not a baseline.
        .snapshot(3, "a", 3 * M, 3, {"m1": (None, []), "m3": (None, [])})
        # Against generation 2: t2 m1 -> m3 moved (1 of 4), t4 is new.
        .snapshot(4, "a", 4 * M, 4, {"m1": (None, t[0:2]), "m3": (None, t[2:5])})
        .removed(5, "a", 5 * M)
        # Recreated: generations restart, no baseline.
        .snapshot(6, "a", 6 * M, 1, {"m9": (None, t)})
    )
    out = assignments.assignment_changes(history.inputs(spark), RANGE)
    assertDataFrameEqual(
        out.select(COLS),
        [
            Row("a", 0, 1, 4, None, None, None, None, 2, 2, 1.0),
            Row("a", 0, 2, 4, 1, 2, 0, 0.5, 3, 1, 3.0),
            Row("a", 0, 3, 0, None, None, None, None, 0, 0, None),
            Row("a", 0, 4, 5, 2, 1, 1, 0.25, 3, 2, 1.5),
            Row("a", 1, 1, 5, None, None, None, None, 5, 5, 1.0),
        ],
    )


def test_static_members_keep_their_partitions_across_an_empty_generation(spark: SparkSession) -> None:
    p = [("orders", i) for i in range(3)]
    history = (
        History()
        .snapshot(10, "s", 1 * M, 1, {"a1": ("i1", p[0:2]), "a2": ("i2", p[2:3])})
        .snapshot(11, "s", 2 * M, 2)  # Empty
        # New member ids, same instance ids, same partitions: nothing moved.
        .snapshot(12, "s", 3 * M, 3, {"b1": ("i1", p[0:2]), "b2": ("i2", p[2:3])})
        # Dynamic members: new ids own everything.
        .snapshot(20, "d", 1 * M, 1, {"a1": (None, p[0:2]), "a2": (None, p[2:3])})
        .snapshot(21, "d", 3 * M, 2, {"b1": (None, p[0:2]), "b2": (None, p[2:3])})
    )
    out = assignments.assignment_changes(history.inputs(spark), RANGE).where("generation_id > 1")
    assertDataFrameEqual(
        out.select("group_id", "generation_id", "previous_generation_id", "partitions_moved", "moved_share"),
        [Row("s", 3, 1, 0, 0.0), Row("d", 2, 1, 3, 1.0)],
    )


def test_a_baseline_before_since_is_used_but_not_reported(spark: SparkSession) -> None:
    p = [("t", i) for i in range(2)]
    history = (
        History()
        .snapshot(1, "a", 1 * M, 1, {"m1": (None, p)})
        .snapshot(2, "a", 20 * M, 2, {"m1": (None, p[0:1]), "m2": (None, p[1:2])})
    )
    out = assignments.assignment_changes(history.inputs(spark), ReportRange(10 * M, 60 * M))
    assertDataFrameEqual(
        out.select("generation_id", "previous_generation_id", "partitions_moved", "moved_share"), [Row(2, 1, 1, 0.5)]
    )


def test_non_consumer_groups_are_not_reported(spark: SparkSession) -> None:
    history = History().snapshot(1, "connect", 1 * M, 1, {"w1": (None, [])}, protocol_type="connect")
    assert assignments.assignment_changes(history.inputs(spark), RANGE).count() == 0


def test_a_static_members_restart_is_not_a_rebalance(spark: SparkSession) -> None:
    """A static member restarting within its session timeout is replaced in place: another snapshot of the same
    generation, no rebalance. It moved nothing, and it must not count as a rebalance that moved 0 %."""
    p = [("t", i) for i in range(4)]
    history = (
        History()
        .snapshot(1, "a", 1 * M, 1, {"a1": ("i1", p[0:2]), "a2": ("i2", p[2:4])})
        # Generation 2: i3 joins and takes t1 and t3 -> 2 of 4 moved.
        .snapshot(2, "a", 2 * M, 2, {"a1": ("i1", p[0:1]), "a2": ("i2", p[2:3]), "a3": ("i3", [p[1], p[3]])})
        # i2 restarts as member b2: same generation, same partitions (the replacement, not a rebalance).
        .snapshot(3, "a", 3 * M, 2, {"a1": ("i1", p[0:1]), "b2": ("i2", p[2:3]), "a3": ("i3", [p[1], p[3]])})
        # Generation 3: i1 t0 -> i2, t1 i3 -> i1, t2 i2 -> i3 -> 3 of 4 moved (against the restart's snapshot).
        .snapshot(4, "a", 4 * M, 3, {"a1": ("i1", p[1:2]), "b2": ("i2", p[0:1]), "a3": ("i3", p[2:4])})
        # Generation 4: i3 leaves; its t2 and t3 go to i1 and i2 -> 2 of 4 moved.
        .snapshot(5, "a", 5 * M, 4, {"a1": ("i1", p[1:3]), "b2": ("i2", [p[0], p[3]])})
    )
    out = assignments.assignment_changes(history.inputs(spark), RANGE).orderBy("position").collect()
    moves = [(r["generation_id"], r["partitions_moved"], r["moved_share"]) for r in out]
    assert moves == [(1, None, None), (2, 2, 0.5), (2, None, None), (3, 3, 0.75), (4, 2, 0.5)]
    shares = [m[2] for m in moves if m[2] is not None]
    # The mean over the three rebalances, not (0.5 + 0 + 0.75 + 0.5) / 4 = 0.4375 with the restart averaged in.
    assert sum(shares) / len(shares) == (0.5 + 0.75 + 0.5) / 3
    assert [r["rebalance"] for r in out] == [True, True, False, True, True]
