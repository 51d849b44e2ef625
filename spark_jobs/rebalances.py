"""Per group and window (hour, day): rebalance count and rate, cause mix, phase durations, time in each state,
member churn, static vs dynamic membership. Every function is a pure DataFrame transform."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .config import ReportConfig, ReportRange
from .schema import (
    COMPLETING_REBALANCE,
    EMPTY,
    EVICTION_CAUSES,
    GROUP_DELETION_CAUSES,
    LEAVE_CAUSES,
    PREPARING_REBALANCE,
    STABLE,
    Inputs,
)
from .windows import WINDOW_KEYS, bucket, in_range, per_hour, split_interval, with_window_columns

PERCENTILES = (0.5, 0.9, 0.99)


def percentile_columns(col: str, accuracy: int, prefix: str = "") -> list[Column]:
    """p50/p90/p99 (nearest rank via percentile_approx: exact below ~accuracy values per group) and max."""
    p = F.percentile_approx(F.col(col), list(PERCENTILES), accuracy)
    return [
        p[0].alias(f"{prefix}p50_ms"),
        p[1].alias(f"{prefix}p90_ms"),
        p[2].alias(f"{prefix}p99_ms"),
        F.max(col).alias(f"{prefix}max_ms"),
    ]


def rebalance_counts(episodes: DataFrame, rng: ReportRange) -> DataFrame:
    """group_id, granularity, window_start(_ms), window_hours, rebalances, completed (reached Stable), empty,
    restarted, deleted, in_progress, rebalances_per_hour."""
    counts = (
        bucket(episodes, "started_ms")
        .groupBy("group_id", *WINDOW_KEYS)
        .agg(
            F.count("*").alias("rebalances"),
            *[F.count_if(F.col("outcome") == o).alias(name) for o, name in _OUTCOMES],
        )
    )
    return with_window_columns(counts, rng).withColumn("rebalances_per_hour", per_hour(F.col("rebalances")))


_OUTCOMES = (
    ("stable", "completed"),
    ("empty", "ended_empty"),
    ("restarted", "restarted"),
    ("deleted", "deleted"),
    ("in_progress", "in_progress"),
)


def cause_mix(episodes: DataFrame, rng: ReportRange) -> DataFrame:
    """group_id, granularity, window_start(_ms), cause, rebalances, share (of the group's rebalances in the window)."""
    by_cause = (
        bucket(episodes, "started_ms").groupBy("group_id", *WINDOW_KEYS, "cause").agg(F.count("*").alias("rebalances"))
    )
    totals = by_cause.groupBy("group_id", *WINDOW_KEYS).agg(F.sum("rebalances").alias("_total"))
    out = by_cause.join(totals, ["group_id", *WINDOW_KEYS]).withColumn("share", F.col("rebalances") / F.col("_total"))
    return with_window_columns(out.drop("_total"), rng).drop("window_hours")


def phase_durations(episodes: DataFrame, config: ReportConfig, rng: ReportRange) -> DataFrame:
    """group_id, granularity, window_start(_ms), phase (join / sync / rebalance), count, p50/p90/p99/max (ms).
    Bucketed by the rebalance's start; phases that did not complete are not counted."""
    phases = episodes.select(
        "group_id",
        "started_ms",
        F.explode(
            F.array(
                F.struct(F.lit("join").alias("phase"), F.col("join_duration_ms").alias("duration_ms")),
                F.struct(F.lit("sync").alias("phase"), F.col("sync_duration_ms").alias("duration_ms")),
                F.struct(F.lit("rebalance").alias("phase"), F.col("rebalance_duration_ms").alias("duration_ms")),
            )
        ).alias("_p"),
    ).select("group_id", "started_ms", "_p.phase", "_p.duration_ms")
    phases = phases.where(F.col("duration_ms").isNotNull())
    out = (
        bucket(phases, "started_ms")
        .groupBy("group_id", *WINDOW_KEYS, "phase")
        .agg(F.count("*").alias("count"), *percentile_columns("duration_ms", config.percentile_accuracy))
    )
    return with_window_columns(out, rng).drop("window_hours")


_STATE_COLUMNS = (
    (EMPTY, "empty_ms"),
    (PREPARING_REBALANCE, "preparing_rebalance_ms"),
    (COMPLETING_REBALANCE, "completing_rebalance_ms"),
    (STABLE, "stable_ms"),
)


def state_time(intervals: DataFrame, rng: ReportRange) -> DataFrame:
    """group_id, granularity, window_start(_ms), empty_ms, preparing_rebalance_ms, completing_rebalance_ms,
    stable_ms, tracked_ms (time the group existed and its state is known), rebalancing_ms (PreparingRebalance +
    CompletingRebalance), rebalancing_share and empty_share (of tracked_ms).

    Time outside Stable is split on purpose: rebalancing is time the members could not consume, Empty is a group
    with no members (idle, or its consumers stopped). Adding them up would make an idle group look the least healthy.
    """
    pieces = split_interval(intervals, "start_ms", "end_ms")
    out = pieces.groupBy("group_id", *WINDOW_KEYS).agg(
        *[
            F.sum(F.when(F.col("state") == s, F.col("overlap_ms")).otherwise(0)).cast("long").alias(c)
            for s, c in _STATE_COLUMNS
        ],
        F.sum("overlap_ms").cast("long").alias("tracked_ms"),
    )
    tracked = F.col("tracked_ms")
    out = (
        out.withColumn("rebalancing_ms", F.col("preparing_rebalance_ms") + F.col("completing_rebalance_ms"))
        .withColumn("rebalancing_share", F.when(tracked > 0, F.col("rebalancing_ms") / tracked))
        .withColumn("empty_share", F.when(tracked > 0, F.col("empty_ms") / tracked))
    )
    return with_window_columns(out, rng).drop("window_hours")


def member_churn(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """group_id, granularity, window_start(_ms), window_hours, joins, static_joins, leaves, evictions,
    removed_by_group_deletion, joins/leaves/evictions_per_hour. Leaves are LeaveGroup (own or admin), evictions are
    removals by a timeout, fencing or the group size limit."""
    joined = inputs.member_joined.where(in_range(F.col("timestamp_ms"), rng)).select(
        "group_id",
        "timestamp_ms",
        F.lit("join").alias("kind"),
        F.col("group_instance_id").isNotNull().alias("is_static"),
    )
    cause = F.col("cause")
    removed = inputs.member_removed.where(in_range(F.col("timestamp_ms"), rng)).select(
        "group_id",
        "timestamp_ms",
        F.when(cause.isin(*LEAVE_CAUSES), "leave")
        .when(cause.isin(*EVICTION_CAUSES), "eviction")
        .when(cause.isin(*GROUP_DELETION_CAUSES), "group_deleted")
        .otherwise("other")
        .alias("kind"),
        F.col("group_instance_id").isNotNull().alias("is_static"),
    )
    kind = F.col("kind")
    out = (
        bucket(joined.unionByName(removed), "timestamp_ms")
        .groupBy("group_id", *WINDOW_KEYS)
        .agg(
            F.count_if(kind == "join").alias("joins"),
            F.count_if((kind == "join") & F.col("is_static")).alias("static_joins"),
            F.count_if(kind == "leave").alias("leaves"),
            F.count_if(kind == "eviction").alias("evictions"),
            F.count_if(kind == "group_deleted").alias("removed_by_group_deletion"),
            F.count_if(kind == "other").alias("other_removals"),
        )
    )
    out = with_window_columns(out, rng)
    for c in ("joins", "leaves", "evictions"):
        out = out.withColumn(f"{c}_per_hour", per_hour(F.col(c)))
    return out


def evictions(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """One row per member removed by a timeout, fencing or the group size limit: group_id, timestamp_ms, member_id,
    group_instance_id, cause, generation_id."""
    return inputs.member_removed.where(
        in_range(F.col("timestamp_ms"), rng) & F.col("cause").isin(*EVICTION_CAUSES)
    ).select("group_id", "timestamp_ms", "member_id", "group_instance_id", "cause", "generation_id")


def membership(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """Static vs dynamic members, from the generation snapshots written in each window: group_id, granularity,
    window_start(_ms), generations (snapshots with members), max_members, member_slots (sum of members over the
    snapshots), static_member_slots, static_share (static_member_slots / member_slots)."""
    per_snapshot = inputs.generation_members.groupBy("position").agg(
        F.count("*").alias("members"), F.count("group_instance_id").alias("static_members")
    )
    snapshots = (
        inputs.group_metadata_log.where((F.col("member_count") > 0) & in_range(F.col("timestamp_ms"), rng))
        .select("position", "group_id", "timestamp_ms")
        .join(per_snapshot, "position")
    )
    out = (
        bucket(snapshots, "timestamp_ms")
        .groupBy("group_id", *WINDOW_KEYS)
        .agg(
            F.count("*").alias("generations"),
            F.max("members").alias("max_members"),
            F.sum("members").alias("member_slots"),
            F.sum("static_members").alias("static_member_slots"),
        )
        .withColumn("static_share", F.col("static_member_slots") / F.col("member_slots"))
    )
    return with_window_columns(out, rng).drop("window_hours")
