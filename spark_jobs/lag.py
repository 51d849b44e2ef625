"""Consumer lag over time, from the stored commits and the stored record batches.

At each commit of a (group, topic, partition):

* **lag in messages** = the partition's log end at the commit's time - the committed offset (never below 0). The log
  end at time t is ``last_offset + 1`` of the last batch appended at or before t (``partition_batches.appended_ms``;
  0 before the first batch).
* **lag in time** = the commit's time - the append time of the first unconsumed batch (the batch holding the
  committed offset, which is the next record the group reads): how old the oldest message it has not read is. 0 when
  the lag in messages is 0.

Both are null for a partition with no stored batch at all (a topic produced elsewhere: this daemon only coordinates
its consumers). Commits are compared with batches of their own partition only, with two sorts per partition (a
running maximum over batches and commits in time order; the last batch start at or below each committed offset in
offset order), so the cost grows as (commits + batches) log (commits + batches), never as their product.

Tables:

* ``commit_lag`` - one row per commit in the range: group_id, topic, partition_index, position,
  commit_timestamp_ms, committed_offset, log_end_offset, lag_messages, lag_ms.
* ``lag_windows`` - per group, partition and window (minute, hour, day): commits, max/avg/last lag in messages,
  max/avg lag in time.
* ``group_lag_windows`` - per group and window: partitions committed, max and avg lag in messages and in time
  over its commits (the max is the worst partition's worst moment).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .config import DAY_MS, HOUR_MS, ReportRange
from .schema import Inputs
from .windows import in_range

KEY = ["group_id", "topic", "partition_index"]
TP = ["topic", "partition_index"]

# A minute shows a consumer falling behind and catching up; hours and days show the trend.
LAG_GRANULARITIES: dict[str, int] = {"minute": 60_000, "hour": HOUR_MS, "day": DAY_MS}

_BATCH, _COMMIT = 0, 1  # at equal time (or offset) a batch sorts before a commit: it counts for that commit


def commit_lag(inputs: Inputs, rng: ReportRange) -> DataFrame:
    """Every commit of the range with the log end at its time, its lag in messages and its lag in time."""
    commits = inputs.offset_commits.where(in_range(F.col("commit_timestamp_ms"), rng)).select(
        *KEY, "position", "commit_timestamp_ms", "committed_offset"
    )
    batches = inputs.partition_batches.select(*TP, "base_offset", "last_offset", "appended_ms")
    known = batches.select(*TP).distinct().withColumn("_has_batches", F.lit(True))

    # Log end at each commit: the running maximum of last_offset + 1 over the partition's batches in time order.
    by_time = commits.select(
        *KEY, "position", "commit_timestamp_ms", "committed_offset",
        F.col("commit_timestamp_ms").alias("_t"), F.lit(_COMMIT).alias("_kind"),
        F.lit(None).cast("long").alias("_end"),
    ).unionByName(batches.select(
        F.lit(None).cast("string").alias("group_id"), *TP, F.lit(None).cast("long").alias("position"),
        F.lit(None).cast("long").alias("commit_timestamp_ms"), F.lit(None).cast("long").alias("committed_offset"),
        F.col("appended_ms").alias("_t"), F.lit(_BATCH).alias("_kind"), (F.col("last_offset") + 1).alias("_end"),
    ))  # fmt: skip
    w_time = (
        Window.partitionBy(*TP)
        .orderBy("_t", "_kind", "position")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    with_end = by_time.withColumn("log_end_offset", F.coalesce(F.max("_end").over(w_time), F.lit(0).cast("long")))
    with_end = with_end.where(F.col("_kind") == _COMMIT).drop("_t", "_kind", "_end")

    # The first unconsumed batch: the last batch starting at or below the committed offset, in offset order.
    by_offset = with_end.select(
        "*", F.col("committed_offset").alias("_o"), F.lit(_COMMIT).alias("_kind"),
        F.lit(None).cast("long").alias("_appended"),
    ).unionByName(batches.select(
        F.lit(None).cast("string").alias("group_id"), *TP, F.lit(None).cast("long").alias("position"),
        F.lit(None).cast("long").alias("commit_timestamp_ms"), F.lit(None).cast("long").alias("committed_offset"),
        F.lit(None).cast("long").alias("log_end_offset"), F.col("base_offset").alias("_o"),
        F.lit(_BATCH).alias("_kind"), F.col("appended_ms").alias("_appended"),
    ))  # fmt: skip
    w_offset = (
        Window.partitionBy(*TP)
        .orderBy("_o", "_kind", "position")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    located = by_offset.withColumn("_first_unconsumed_ms", F.last("_appended", ignorenulls=True).over(w_offset))
    located = located.where(F.col("_kind") == _COMMIT)

    lag_messages = F.greatest(F.col("log_end_offset") - F.col("committed_offset"), F.lit(0).cast("long"))
    lag_ms = F.when(lag_messages > 0, F.col("commit_timestamp_ms") - F.col("_first_unconsumed_ms")).otherwise(
        F.lit(0).cast("long")
    )
    has = F.col("_has_batches").isNotNull()
    return located.join(known, TP, "left").select(
        *KEY,
        "position",
        "commit_timestamp_ms",
        "committed_offset",
        F.when(has, F.col("log_end_offset")).alias("log_end_offset"),
        F.when(has, lag_messages).alias("lag_messages"),
        F.when(has, lag_ms).alias("lag_ms"),
    )


def _bucket(df: DataFrame) -> DataFrame:
    grains = F.array(*[F.struct(F.lit(n).alias("g"), F.lit(ms).cast("long").alias("w"))
                       for n, ms in LAG_GRANULARITIES.items()])  # fmt: skip
    return (
        df.withColumn("_gw", F.explode(grains))
        .withColumn("granularity", F.col("_gw.g"))
        .withColumn(
            "window_start_ms", F.floor(F.col("commit_timestamp_ms") / F.col("_gw.w")).cast("long") * F.col("_gw.w")
        )
        .drop("_gw")
    )


def _stats() -> list[Column]:
    return [
        F.count("*").alias("commits"),
        F.max("lag_messages").alias("max_lag_messages"),
        F.avg("lag_messages").alias("avg_lag_messages"),
        F.max("lag_ms").alias("max_lag_ms"),
        F.avg("lag_ms").alias("avg_lag_ms"),
    ]


def lag_windows(lags: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(per group x partition x window, per group x window) summaries of ``commit_lag``; windows are aligned to the
    epoch (UTC) and only those with a commit have a row."""
    bucketed = _bucket(lags)
    per_partition = bucketed.groupBy(*KEY, "granularity", "window_start_ms").agg(
        *_stats(),
        F.max_by("lag_messages", "position").alias("last_lag_messages"),
    )
    per_group = bucketed.groupBy("group_id", "granularity", "window_start_ms").agg(
        F.count_distinct("topic", "partition_index").alias("partitions"), *_stats()
    )
    start = F.timestamp_millis("window_start_ms").alias("window_start")
    return per_partition.select("*", start), per_group.select("*", start)
