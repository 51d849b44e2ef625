"""Offset-commit metrics: cadence, rewinds, partitions left uncommitted while Stable, Empty groups about to expire.

Commits of one (group, topic, partition) are compared in log order, and never across an offset removal (OffsetDelete,
expiry, group deletion writes one per partition): after a removal the next commit starts a new lineage, so it is
neither a rewind nor the end of an interval.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .assignments import assignments_by_generation
from .config import ReportConfig, ReportRange
from .rebalances import percentile_columns
from .schema import DEAD, EMPTY, STABLE, Inputs
from .timeline import latest_states
from .windows import in_range

KEY = ["group_id", "topic", "partition_index"]


def commit_steps(inputs: Inputs) -> DataFrame:
    """Every commit with the previous commit of its lineage: the commit's columns plus previous_offset,
    previous_commit_ms, previous_member_id, previous_generation_id, interval_ms (null for a lineage's first)."""
    commits = inputs.offset_commits.select(
        *KEY,
        "position",
        "committed_offset",
        "commit_timestamp_ms",
        "member_id",
        "generation_id",
        F.lit(True).alias("_is_commit"),
    )
    removals = inputs.offset_removals.select(
        *KEY,
        "position",
        F.lit(None).cast("long").alias("committed_offset"),
        F.col("timestamp_ms").alias("commit_timestamp_ms"),
        F.lit(None).cast("string").alias("member_id"),
        F.lit(None).cast("int").alias("generation_id"),
        F.lit(False).alias("_is_commit"),
    )
    w = Window.partitionBy(*KEY).orderBy("position")
    prev_is_commit = F.lag("_is_commit").over(w)

    def prev(col: str) -> Column:
        return F.when(prev_is_commit, F.lag(col).over(w))

    steps = commits.unionByName(removals).select(
        "*",
        prev("committed_offset").alias("previous_offset"),
        prev("commit_timestamp_ms").alias("previous_commit_ms"),
        prev("member_id").alias("previous_member_id"),
        prev("generation_id").alias("previous_generation_id"),
    )
    return (
        steps.where("_is_commit")
        .drop("_is_commit")
        .withColumn("interval_ms", F.col("commit_timestamp_ms") - F.col("previous_commit_ms"))
    )


def commit_cadence(steps: DataFrame, config: ReportConfig, rng: ReportRange) -> tuple[DataFrame, DataFrame]:
    """Per partition (group_id, topic, partition_index) and per group (group_id): commits, partitions (group only),
    first/last commit time, and the interval between consecutive commits of a partition: p50/p90/p99/max."""
    steps = steps.where(in_range(F.col("commit_timestamp_ms"), rng))
    common = [
        F.count("*").alias("commits"),
        F.min("commit_timestamp_ms").alias("first_commit_ms"),
        F.max("commit_timestamp_ms").alias("last_commit_ms"),
        *[c for c in percentile_columns("interval_ms", config.percentile_accuracy, "interval_")],
    ]
    per_partition = steps.groupBy(*KEY).agg(*common)
    per_group = steps.groupBy("group_id").agg(F.count_distinct("topic", "partition_index").alias("partitions"), *common)
    return per_partition, per_group


def is_admin_commit(generation_id: Column) -> Column:
    """An admin commit: an offset reset by the operator (the admin client's AlterConsumerGroupOffsets, the HTTP API)
    or a consumer outside group management (``assign()``). Kafka accepts a commit with generation -1 only for an Empty
    group and ignores its member and instance ids (docs/semantics.md, OffsetCommit C4), so the generation alone
    decides: a member id stored with it tells nothing about who sent it."""
    return generation_id < 0


def _move_columns() -> list[str | Column]:
    return [
        *KEY,
        "position",
        "commit_timestamp_ms",
        "previous_offset",
        "committed_offset",
        (F.col("previous_offset") - F.col("committed_offset")).alias("rewind_by"),
        "member_id",
        "generation_id",
        "previous_member_id",
        "previous_generation_id",
    ]


def commit_rewinds(steps: DataFrame, rng: ReportRange) -> DataFrame:
    """A consumer's own commit of a lower offset than the previous commit of the same lineage (admin commits are
    resets, see ``offset_resets``): group_id, topic, partition_index, position, commit_timestamp_ms, previous_offset,
    committed_offset, rewind_by, member_id, generation_id, previous_member_id, previous_generation_id."""
    return steps.where(
        in_range(F.col("commit_timestamp_ms"), rng)
        & (F.col("committed_offset") < F.col("previous_offset"))
        & ~is_admin_commit(F.col("generation_id"))
    ).select(*_move_columns())


# How long after an admin commit its audit entry may be stamped: the entry is written once the commit is durable.
ACTOR_WINDOW_MS = 60_000
OFFSET_ACTIONS = ("offsets.reset", "offsets.alter")


def offset_resets(steps: DataFrame, rng: ReportRange, admin_actions: DataFrame | None = None) -> DataFrame:
    """Admin commits (generation -1) that moved an offset backwards: an operator's reset, one row per partition.
    Same columns as ``commit_rewinds``; ``member_id`` is what was stored (normally empty); and who did it, from the
    audit trail (``admin_actions``): ``principal``, ``client_id``, ``client_host``, ``via`` of the first
    offsets.reset/offsets.alter action on the group at or after the commit, within ``ACTOR_WINDOW_MS`` (null when
    there is none: a store without an audit trail, or an ``assign()`` consumer's commit coalesced away)."""
    resets = steps.where(
        in_range(F.col("commit_timestamp_ms"), rng)
        & (F.col("committed_offset") < F.col("previous_offset"))
        & is_admin_commit(F.col("generation_id"))
    ).select(*_move_columns())
    if admin_actions is None:
        return resets.select(
            "*", *(F.lit(None).cast("string").alias(c) for c in ("principal", "client_id", "client_host", "via"))
        )
    actions = admin_actions.where(F.col("action").isin(*OFFSET_ACTIONS)).select(
        F.col("group_id").alias("a_group"),
        F.col("timestamp_ms").alias("a_ts"),
        F.col("position").alias("a_pos"),
        "principal",
        "client_id",
        "client_host",
        "via",
    )
    matched = resets.join(
        actions,
        (F.col("a_group") == F.col("group_id"))
        & (F.col("a_ts") >= F.col("commit_timestamp_ms"))
        & (F.col("a_ts") <= F.col("commit_timestamp_ms") + ACTOR_WINDOW_MS),
        "left",
    )
    first = Window.partitionBy(*KEY, "position").orderBy(F.col("a_ts").asc_nulls_last(), F.col("a_pos"))
    return (
        matched.withColumn("_n", F.row_number().over(first))
        .where(F.col("_n") == 1)
        .drop("_n", "a_group", "a_ts", "a_pos")
    )


def stale_partitions(inputs: Inputs, intervals: DataFrame, config: ReportConfig, rng: ReportRange) -> DataFrame:
    """Stretches of at least ``stale_commit_ms`` during which the group was Stable, the partition was assigned in
    that generation, and nobody committed it. Only ``consumer`` groups (their assignments are decoded).

    Columns: group_id, topic, partition_index, generation_id, owner (the assigned member's group.instance.id, else
    its member id), gap_start_ms, gap_end_ms, gap_ms, after_commit (the stretch starts at a commit, not at the start
    of Stable), ongoing (still uncommitted at until).
    """
    stable = intervals.where(F.col("state") == STABLE)
    assigned = stable.join(assignments_by_generation(inputs), ["group_id", "incarnation", "generation_id"])
    # Marker order at equal times: an interval's end, then commits, then a start.
    starts = assigned.select(
        *KEY,
        F.col("start_ms").alias("ts"),
        F.lit(2).alias("_order"),
        F.lit("start").alias("kind"),
        "generation_id",
        "owner",
        F.lit(False).alias("is_open"),
    )
    ends = assigned.select(
        *KEY,
        F.col("end_ms").alias("ts"),
        F.lit(0).alias("_order"),
        F.lit("end").alias("kind"),
        "generation_id",
        F.lit(None).cast("string").alias("owner"),
        "is_open",
    )
    keys = assigned.select("group_id").distinct()
    commits = (
        inputs.offset_commits.where(in_range(F.col("commit_timestamp_ms"), rng))
        .join(keys, "group_id", "left_semi")
        .select(
            *KEY,
            F.col("commit_timestamp_ms").alias("ts"),
            F.lit(1).alias("_order"),
            F.lit("commit").alias("kind"),
            F.lit(None).cast("int").alias("generation_id"),
            F.lit(None).cast("string").alias("owner"),
            F.lit(False).alias("is_open"),
        )
    )
    w = Window.partitionBy(*KEY).orderBy("ts", "_order")
    marks = starts.unionByName(ends).unionByName(commits)
    marks = (
        marks.withColumn(
            "_boundary", F.last(F.when(F.col("kind") != "commit", F.col("kind")), ignorenulls=True).over(w)
        )
        .withColumn("_gen", F.last(F.when(F.col("kind") == "start", F.col("generation_id")), ignorenulls=True).over(w))
        .withColumn("_owner", F.last(F.when(F.col("kind") == "start", F.col("owner")), ignorenulls=True).over(w))
        .withColumn("_next_ts", F.lead("ts").over(w))
        .withColumn("_next_kind", F.lead("kind").over(w))
        .withColumn("_next_open", F.lead("is_open").over(w))
    )
    gaps = marks.where(
        (F.col("_boundary") == "start")
        & F.col("_next_ts").isNotNull()
        & ((F.col("_next_ts") - F.col("ts")) >= F.lit(config.stale_commit_ms))
    )
    return gaps.select(
        *KEY,
        F.col("_gen").alias("generation_id"),
        F.col("_owner").alias("owner"),
        F.col("ts").alias("gap_start_ms"),
        F.col("_next_ts").alias("gap_end_ms"),
        (F.col("_next_ts") - F.col("ts")).alias("gap_ms"),
        (F.col("kind") == "commit").alias("after_commit"),
        ((F.col("_next_kind") == "end") & F.col("_next_open")).alias("ongoing"),
    )


def expiring_groups(inputs: Inputs, config: ReportConfig, rng: ReportRange) -> DataFrame:
    """Empty groups (and simple groups, which have no members) with committed offsets that expire within
    ``expiry_horizon_ms`` after ``until`` (or already have), per Kafka's rule (KIP-211): an explicit expire timestamp
    wins; otherwise retention counts from when the group became Empty (its current_state_timestamp), or from the
    commit time for a group without protocol type or without that timestamp.

    Columns: group_id, protocol_type, empty_since_ms, live_offsets, offsets_expiring, earliest_expiry_ms,
    all_expired_ms (when the last offset expires and the group can be deleted)."""
    until = F.lit(rng.until_ms)
    last_per_key = inputs.offset_commits.select(
        *KEY, "position", "commit_timestamp_ms", "expire_timestamp_ms", F.lit(True).alias("_live")
    ).where(F.col("commit_timestamp_ms") < until)
    removed = inputs.offset_removals.where(F.col("timestamp_ms") < until).select(
        *KEY,
        "position",
        F.col("timestamp_ms").alias("commit_timestamp_ms"),
        F.lit(None).cast("long").alias("expire_timestamp_ms"),
        F.lit(False).alias("_live"),
    )
    live = (
        last_per_key.unionByName(removed)
        .groupBy(*KEY)
        .agg(F.max_by(F.struct("_live", "commit_timestamp_ms", "expire_timestamp_ms"), "position").alias("_l"))
        .where("_l._live")
        .select(*KEY, "_l.commit_timestamp_ms", "_l.expire_timestamp_ms")
    )
    snapshot = (
        inputs.group_metadata_log.where(F.col("timestamp_ms") < until)
        .groupBy("group_id")
        .agg(F.max_by(F.struct("protocol_type", "current_state_timestamp_ms"), "position").alias("_s"))
        .select("group_id", "_s.protocol_type", "_s.current_state_timestamp_ms")
    )
    states = latest_states(inputs, rng)
    groups = (
        live.select("group_id")
        .distinct()
        .join(states, "group_id", "left")
        .join(snapshot, "group_id", "left")
        # No state change at all: a simple group (offsets only). Dead with live offsets: commits after the removal
        # recreated it as a simple group, so the old snapshot does not apply.
        .where(F.col("state").isNull() | F.col("state").isin(EMPTY, DEAD))
        .select(
            "group_id",
            F.when(F.col("state") == DEAD, F.lit(""))
            .otherwise(F.coalesce("protocol_type", F.lit("")))
            .alias("protocol_type"),
            F.when(F.col("state") != DEAD, F.col("current_state_timestamp_ms")).alias("current_state_timestamp_ms"),
        )
    )
    retention = F.lit(config.offsets_retention_ms)
    base = F.when(
        (F.col("protocol_type") != "") & (F.col("current_state_timestamp_ms") >= 0), F.col("current_state_timestamp_ms")
    ).otherwise(F.col("commit_timestamp_ms"))
    expiry = F.coalesce(F.col("expire_timestamp_ms"), base + retention)
    horizon = F.lit(rng.until_ms + config.expiry_horizon_ms)
    out = (
        groups.join(live, "group_id")
        .withColumn("_expiry", expiry)
        .groupBy("group_id", "protocol_type")
        .agg(
            F.max(
                F.when(
                    (F.col("protocol_type") != "") & (F.col("current_state_timestamp_ms") >= 0),
                    F.col("current_state_timestamp_ms"),
                )
            ).alias("empty_since_ms"),
            F.count("*").alias("live_offsets"),
            F.count_if(F.col("_expiry") <= horizon).alias("offsets_expiring"),
            F.min("_expiry").alias("earliest_expiry_ms"),
            F.max("_expiry").alias("all_expired_ms"),
        )
    )
    return out.where(F.col("offsets_expiring") > 0)
