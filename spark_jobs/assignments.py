"""Per generation snapshot of a ``consumer`` group: partitions moved since the previous assignment, and balance.

A partition's owner is the member's ``group.instance.id`` when it has one (a restarted static member keeps its
partitions under a new member id), its member id otherwise.

``partitions_moved`` counts the partitions of the previous assignment whose owner is different now (including
partitions no longer assigned); ``moved_share`` divides it by the partitions of the previous assignment, and
``partitions_added`` counts partitions assigned now that were not before. "Previous assignment" is the last earlier
snapshot of the same group incarnation that assigned at least one partition: a snapshot with members but no assigned
partition (a leader that assigned nothing, undecodable bytes) is reported with moved = null and is not used as the
baseline, nor is an Empty snapshot; a deleted and recreated group starts with no baseline.

Only a rebalance moves partitions. A static member restarting within its session timeout is replaced in place: the
daemon writes another snapshot of the *same* generation, with no RebalanceStarted. Such a snapshot is reported with
``rebalance`` = false and moved/added/moved_share null, so averages of ``moved_share`` are over real rebalances only
(the first snapshot of each generation). It still serves as the baseline of the next one (its owners are the same).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .config import ReportRange
from .schema import Inputs
from .timeline import with_incarnation
from .windows import in_range

CONSUMER = "consumer"


def assignment_changes(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """Columns: group_id, incarnation, generation_id, position, timestamp_ms, rebalance (the first snapshot of its
    generation, i.e. the outcome of a rebalance), members, assigned_partitions, previous_generation_id,
    partitions_moved, partitions_added, moved_share, max_partitions_per_member, min_partitions_per_member,
    balance_ratio (max / min; null when some member has none)."""
    snapshots = inputs.group_metadata_log.where(
        (F.col("protocol_type") == CONSUMER) & (F.col("member_count") > 0)
    ).select("position", "group_id", "generation_id", "timestamp_ms")
    owned = inputs.assigned_partitions.select(
        "position", "member_id", "topic", "partition_index", F.coalesce("group_instance_id", "member_id").alias("owner")
    )
    per_member = (
        inputs.generation_members.select("position", "member_id")
        .join(owned.groupBy("position", "member_id").agg(F.count("*").alias("_n")), ["position", "member_id"], "left")
        .groupBy("position")
        .agg(
            F.count("*").alias("members"),
            F.sum(F.coalesce("_n", F.lit(0))).cast("long").alias("assigned_partitions"),
            F.max(F.coalesce("_n", F.lit(0))).cast("long").alias("max_partitions_per_member"),
            F.min(F.coalesce("_n", F.lit(0))).cast("long").alias("min_partitions_per_member"),
        )
    )
    snaps = with_incarnation(snapshots.join(per_member, "position", "left"), inputs.group_removals).fillna(
        0, subset=["members", "assigned_partitions", "max_partitions_per_member", "min_partitions_per_member"]
    )
    lineage = (
        Window.partitionBy("group_id", "incarnation").orderBy("position").rowsBetween(Window.unboundedPreceding, -1)
    )
    has_assignment = F.col("assigned_partitions") > 0
    same_generation = Window.partitionBy("group_id", "incarnation", "generation_id").orderBy("position")
    snaps = (
        snaps.withColumn("rebalance", F.row_number().over(same_generation) == 1)
        .withColumn("_prev_position", F.last(F.when(has_assignment, F.col("position")), ignorenulls=True).over(lineage))
        .withColumn(
            "previous_generation_id",
            F.last(F.when(has_assignment, F.col("generation_id")), ignorenulls=True).over(lineage),
        )
    )
    # Only snapshots in range are reported, but their baseline may be older.
    pairs = snaps.where(
        in_range(F.col("timestamp_ms"), rng) & F.col("rebalance") & has_assignment & F.col("_prev_position").isNotNull()
    )
    pairs = pairs.select("position", "_prev_position")
    before = owned.withColumnRenamed("position", "_prev_position").withColumnRenamed("owner", "_prev_owner")
    after = owned.select("position", "topic", "partition_index", "owner")
    compared = (
        pairs.join(before.drop("member_id"), "_prev_position")
        .join(after, ["position", "topic", "partition_index"], "left")
        .groupBy("position")
        .agg(
            F.count("*").alias("_before"),
            F.count_if(~F.col("owner").eqNullSafe(F.col("_prev_owner"))).alias("partitions_moved"),
        )
    )
    added = (
        pairs.join(after, "position")
        .join(
            before.select("_prev_position", "topic", "partition_index"),
            ["_prev_position", "topic", "partition_index"],
            "left_anti",
        )
        .groupBy("position")
        .agg(F.count("*").alias("partitions_added"))
    )
    out = (
        snaps.where(in_range(F.col("timestamp_ms"), rng))
        .join(compared, "position", "left")
        .join(added, "position", "left")
        .withColumn(
            "partitions_added",
            F.when(F.col("partitions_moved").isNotNull(), F.coalesce("partitions_added", F.lit(0)).cast("long")),
        )
        .withColumn("moved_share", F.col("partitions_moved") / F.col("_before"))
        .withColumn(
            "balance_ratio",
            F.when(
                F.col("min_partitions_per_member") > 0,
                F.col("max_partitions_per_member") / F.col("min_partitions_per_member"),
            ),
        )
    )
    return out.select(
        "group_id",
        "incarnation",
        "generation_id",
        "position",
        "timestamp_ms",
        "rebalance",
        "members",
        "assigned_partitions",
        F.when(F.col("partitions_moved").isNotNull(), F.col("previous_generation_id")).alias("previous_generation_id"),
        F.col("partitions_moved").cast("long").alias("partitions_moved"),
        "partitions_added",
        "moved_share",
        "max_partitions_per_member",
        "min_partitions_per_member",
        "balance_ratio",
    )


def assignments_by_generation(inputs: Inputs) -> DataFrame:
    """group_id, incarnation, generation_id, topic, partition_index, owner: the partitions assigned by the latest
    snapshot of each generation (a static member replacement writes another snapshot of the same generation)."""
    latest = (
        with_incarnation(
            inputs.group_metadata_log.select("position", "group_id", "generation_id"), inputs.group_removals
        )
        .groupBy("group_id", "incarnation", "generation_id")
        .agg(F.max("position").alias("position"))
    )
    owned = inputs.assigned_partitions.select(
        "position", "topic", "partition_index", F.coalesce("group_instance_id", "member_id").alias("owner")
    )
    return latest.join(owned, "position").select(
        "group_id", "incarnation", "generation_id", "topic", "partition_index", "owner"
    )
