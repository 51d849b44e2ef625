"""Group life lines derived from the history: incarnations, state intervals and rebalance episodes.

* **Incarnation**: a group id can be deleted (GroupTombstone) and created again; generations restart then. Every row
  gets ``incarnation`` = the number of removals of its group at a lower log position, and comparisons between
  consecutive generations never cross a removal.
* **State intervals**: the state a group is in from one state change to the next, in log order:
  RebalanceStarted -> PreparingRebalance, JoinPhaseCompleted -> its state (CompletingRebalance or Empty),
  GroupStabilized -> Stable, a group metadata snapshot with no members -> Empty, a removal -> Dead (not reported).
  The last interval of a group stays open until ``until``. Intervals are clipped to the report range.
* **Rebalance episodes**: each RebalanceStarted with what came of it before the next one: ``stable`` (GroupStabilized),
  ``empty`` (the join phase ended with no members), ``deleted``, ``restarted`` (a new rebalance began first) or
  ``in_progress`` (nothing yet at ``until``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .config import ReportRange
from .schema import DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Inputs

STATE_EVENT_COLUMNS = ["group_id", "position", "timestamp_ms", "state", "generation_id"]


def with_incarnation(df: DataFrame, group_removals: DataFrame) -> DataFrame:
    """Add ``incarnation``: how many times the row's group was removed before the row's position."""
    removed = group_removals.groupBy("group_id").agg(F.collect_list("position").alias("_removed_at"))
    return (
        df.join(F.broadcast(removed), "group_id", "left")
        .withColumn(
            "incarnation",
            F.coalesce(F.size(F.filter("_removed_at", lambda p: p < F.col("position"))), F.lit(0)),
        )
        .drop("_removed_at")
    )


def state_events(inputs: Inputs) -> DataFrame:
    """Every state change of every group, in log order (not deduplicated, not clipped)."""
    started = inputs.rebalance_started.select(
        "group_id", "position", "timestamp_ms", F.lit(PREPARING_REBALANCE).alias("state"), "generation_id"
    )
    joined = inputs.join_phase_completed.select("group_id", "position", "timestamp_ms", "state", "generation_id")
    stable = inputs.group_stabilized.select(
        "group_id", "position", "timestamp_ms", F.lit(STABLE).alias("state"), "generation_id"
    )
    empty = inputs.group_metadata_log.where(F.col("member_count") == 0).select(
        "group_id", "position", "timestamp_ms", F.lit(EMPTY).alias("state"), "generation_id"
    )
    removed = inputs.group_removals.select(
        "group_id",
        "position",
        "timestamp_ms",
        F.lit(DEAD).alias("state"),
        F.lit(None).cast("int").alias("generation_id"),
    )
    return started.unionByName(joined).unionByName(stable).unionByName(empty).unionByName(removed)


def state_intervals(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """Columns: group_id, incarnation, state, generation_id, start_ms, end_ms, is_open (no later state change by
    ``until``). Clipped to [since, until); Dead time and zero-length intervals are left out."""
    by_group = Window.partitionBy("group_id").orderBy("position")
    events = (
        state_events(inputs)
        .where(F.col("timestamp_ms") < F.lit(rng.until_ms))
        .withColumn("_prev_state", F.lag("state").over(by_group))
        .where(F.col("_prev_state").isNull() | (F.col("_prev_state") != F.col("state")))
        .withColumn("_next_ts", F.lead("timestamp_ms").over(by_group))
    )
    events = with_incarnation(events, inputs.group_removals)
    return (
        events.where(F.col("state") != DEAD)
        .select(
            "group_id",
            "incarnation",
            "state",
            "generation_id",
            F.greatest(F.col("timestamp_ms"), F.lit(rng.since_ms)).alias("start_ms"),
            F.least(F.coalesce(F.col("_next_ts"), F.lit(rng.until_ms)), F.lit(rng.until_ms)).alias("end_ms"),
            F.col("_next_ts").isNull().alias("is_open"),
        )
        .where(F.col("end_ms") > F.col("start_ms"))
    )


def latest_states(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """The state of every group at ``until`` (its last state change before it): group_id, state, since_ms.
    A group whose last change is its removal has state Dead."""
    last = (
        state_events(inputs)
        .where(F.col("timestamp_ms") < F.lit(rng.until_ms))
        .groupBy("group_id")
        .agg(F.max_by(F.struct("state", "timestamp_ms"), "position").alias("_last"))
    )
    return last.select("group_id", F.col("_last.state").alias("state"), F.col("_last.timestamp_ms").alias("since_ms"))


def rebalance_episodes(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """One row per RebalanceStarted in [since, until).

    Columns: group_id, incarnation, position, started_ms, cause, previous_state, member_id, from_generation_id,
    to_generation_id, outcome, ended_ms, join_duration_ms, sync_duration_ms, rebalance_duration_ms.
    Durations are the daemon's own measurements; they are null when that phase did not complete.
    """
    until = F.lit(rng.until_ms)
    start = inputs.rebalance_started.where(F.col("timestamp_ms") < until).select(
        "group_id",
        "position",
        "timestamp_ms",
        F.lit("start").alias("kind"),
        "cause",
        "previous_state",
        "member_id",
        "generation_id",
        F.lit(None).cast("string").alias("state"),
        F.lit(None).cast("long").alias("join_duration_ms"),
        F.lit(None).cast("long").alias("sync_duration_ms"),
        F.lit(None).cast("long").alias("rebalance_duration_ms"),
    )
    join = inputs.join_phase_completed.where(F.col("timestamp_ms") < until).select(
        "group_id",
        "position",
        "timestamp_ms",
        F.lit("join").alias("kind"),
        *[F.lit(None).cast("string").alias(c) for c in ("cause", "previous_state", "member_id")],
        "generation_id",
        "state",
        "join_duration_ms",
        F.lit(None).cast("long").alias("sync_duration_ms"),
        F.lit(None).cast("long").alias("rebalance_duration_ms"),
    )
    stable = inputs.group_stabilized.where(F.col("timestamp_ms") < until).select(
        "group_id",
        "position",
        "timestamp_ms",
        F.lit("stable").alias("kind"),
        *[F.lit(None).cast("string").alias(c) for c in ("cause", "previous_state", "member_id")],
        "generation_id",
        F.lit(STABLE).alias("state"),
        F.lit(None).cast("long").alias("join_duration_ms"),
        "sync_duration_ms",
        "rebalance_duration_ms",
    )
    removed = inputs.group_removals.where(F.col("timestamp_ms") < until).select(
        "group_id",
        "position",
        "timestamp_ms",
        F.lit("removed").alias("kind"),
        *[F.lit(None).cast("string").alias(c) for c in ("cause", "previous_state", "member_id")],
        F.lit(None).cast("int").alias("generation_id"),
        F.lit(DEAD).alias("state"),
        *[F.lit(None).cast("long").alias(c) for c in ("join_duration_ms", "sync_duration_ms", "rebalance_duration_ms")],
    )
    events = start.unionByName(join).unionByName(stable).unionByName(removed)
    by_group = Window.partitionBy("group_id").orderBy("position")
    events = events.withColumn(
        "_episode", F.sum(F.when(F.col("kind") == "start", 1).otherwise(0)).over(by_group)
    ).where(F.col("_episode") > 0)

    def first_of(kind: str, col: str) -> Column:
        return F.min_by(F.when(F.col("kind") == kind, F.col(col)), F.when(F.col("kind") == kind, F.col("position")))

    episodes = events.groupBy("group_id", "_episode").agg(
        first_of("start", "position").alias("position"),
        first_of("start", "timestamp_ms").alias("started_ms"),
        first_of("start", "cause").alias("cause"),
        first_of("start", "previous_state").alias("previous_state"),
        first_of("start", "member_id").alias("member_id"),
        first_of("start", "generation_id").alias("from_generation_id"),
        first_of("join", "generation_id").alias("to_generation_id"),
        first_of("join", "state").alias("_join_state"),
        first_of("join", "timestamp_ms").alias("_join_ms"),
        first_of("join", "join_duration_ms").alias("join_duration_ms"),
        first_of("stable", "timestamp_ms").alias("_stable_ms"),
        first_of("stable", "sync_duration_ms").alias("sync_duration_ms"),
        first_of("stable", "rebalance_duration_ms").alias("rebalance_duration_ms"),
        first_of("removed", "timestamp_ms").alias("_removed_ms"),
    )
    next_start = F.lead("started_ms").over(Window.partitionBy("group_id").orderBy("_episode"))
    episodes = episodes.withColumn("_next_start_ms", next_start)
    outcome = (
        F.when(F.col("_stable_ms").isNotNull(), F.lit("stable"))
        .when(F.col("_join_state") == EMPTY, F.lit("empty"))
        .when(F.col("_removed_ms").isNotNull(), F.lit("deleted"))
        .when(F.col("_next_start_ms").isNotNull(), F.lit("restarted"))
        .otherwise(F.lit("in_progress"))
    )
    ended = (
        F.when(F.col("_stable_ms").isNotNull(), F.col("_stable_ms"))
        .when(F.col("_join_state") == EMPTY, F.col("_join_ms"))
        .when(F.col("_removed_ms").isNotNull(), F.col("_removed_ms"))
        .otherwise(F.col("_next_start_ms"))
    )
    episodes = with_incarnation(episodes, inputs.group_removals)
    return episodes.where(F.col("started_ms") >= F.lit(rng.since_ms)).select(
        "group_id",
        "incarnation",
        "position",
        "started_ms",
        "cause",
        "previous_state",
        "member_id",
        "from_generation_id",
        "to_generation_id",
        outcome.alias("outcome"),
        ended.alias("ended_ms"),
        "join_duration_ms",
        "sync_duration_ms",
        "rebalance_duration_ms",
    )
