"""A generator of synthetic stored history, written as a Parquet export (one directory per table), to measure the
job at scale: ``python -m spark_jobs.synthetic --out DIR --groups 200 --rebalances 50 --commits 10000000``.

Shape: every group has ``members`` members and ``partitions`` partitions of one topic. Rebalance r of a group starts
``period`` after the previous one with a cause taken from a fixed cycle, its join and sync phases take a few seconds,
membership turns over every third rebalance (a leave or an eviction, then a join), and the assignment rotates every
second generation so that some partitions move. One group in ten is static (group.instance.id), and the last rebalance
of one group in seven is left in progress. Commits are spread evenly over the groups' partitions at a fixed cadence
with a little jitter, over the same span as the rebalances; offsets grow, and one commit in 5000 rewinds. Each
partition's record batches (100 records each) arrive at the commit cadence, so every commit has some lag. Positions
follow time across all tables.

Everything is generated with Spark from ``spark.range`` (no driver-side loops over rows), so 10 million rows stay cheap.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .schema import TABLES

CAUSES = ("new_member", "session_timeout", "member_left", "leader_rejoin", "metadata_change", "sync_timeout")
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class SyntheticSpec:
    groups: int = 50
    members: int = 6
    partitions: int = 24
    rebalances: int = 40  # per group
    commits: int = 1_000_000  # total
    period_ms: int = 20 * 60_000  # between rebalances of a group
    seed: int = 7


def _h(*cols: Column) -> Column:
    """A non-negative pseudo-random integer from the columns."""
    return F.abs(F.xxhash64(*cols))


def generate(spark: SparkSession, spec: SyntheticSpec) -> dict[str, DataFrame]:
    """Table name -> DataFrame in the export's column layout (the canonical one)."""
    g = F.col("g")
    r = F.col("r")
    seed = F.lit(spec.seed)
    group_id = F.format_string("group-%04d", g)
    reb = (
        spark.range(spec.groups * spec.rebalances)
        .select((F.col("id") % spec.groups).alias("g"), (F.col("id") / spec.groups).cast("int").alias("r"))
        .withColumn("group_id", group_id)
        .withColumn("static", (g % 10) == 0)
        .withColumn("t0", F.lit(START_MS) + g * 7919 + r * spec.period_ms + _h(g, r, seed) % 60_000)
        .withColumn("join_ms", (_h(g, r, seed, F.lit(1)) % 5_000) + 50)
        .withColumn("sync_ms", (_h(g, r, seed, F.lit(2)) % 1_500) + 10)
        .withColumn("last_in_progress", (r == spec.rebalances - 1) & ((g % 7) == 3))
        .withColumn("cause", F.element_at(F.array(*[F.lit(c) for c in CAUSES]), (r % len(CAUSES)).cast("int") + 1))
        .withColumn("prev_state", F.when(r == 0, F.lit("Empty")).otherwise(F.lit("Stable")))
        .withColumn("churn", (r > 0) & ((r % 3) == 0))
    )
    # (kind, time, payload) events; positions are assigned after a global sort on time.
    started = reb.select("group_id", "g", "r", F.col("t0").alias("ts"), F.lit(0).alias("k"), "cause", "prev_state")
    joined = reb.where(~F.col("last_in_progress")).select(
        "group_id", "g", "r", (F.col("t0") + F.col("join_ms")).alias("ts"), F.lit(1).alias("k"), "join_ms", "static"
    )
    stable = reb.where(~F.col("last_in_progress")).select(
        "group_id",
        "g",
        "r",
        (F.col("t0") + F.col("join_ms") + F.col("sync_ms")).alias("ts"),
        F.lit(2).alias("k"),
        "join_ms",
        "sync_ms",
        "static",
    )
    removed = reb.where("churn").select(
        "group_id", "g", "r", (F.col("t0") - 1).alias("ts"), F.lit(3).alias("k"), "static"
    )
    member_joined = reb.where("churn").select(
        "group_id", "g", "r", (F.col("t0") + 1).alias("ts"), F.lit(4).alias("k"), "static"
    )

    def positioned(df: DataFrame) -> DataFrame:
        return df.withColumn("position", F.col("ts") * 8 + F.col("k"))

    # ts*8+k is unique per group (events of one group are seconds apart) and groups are offset by g*7919 ms plus
    # jitter; a collision across groups is possible but harmless for reading, so make it impossible: add g bits.
    def pos(df: DataFrame) -> DataFrame:
        return positioned(df).withColumn("position", F.col("position") * 4096 + F.col("g") % 4096)

    started, joined, stable, removed, member_joined = (
        pos(d) for d in (started, joined, stable, removed, member_joined)
    )

    def member_id(k: Column) -> Column:
        return F.format_string("consumer-%d-%d-%d", F.col("g"), (F.col("r") / 3).cast("int"), k)

    out: dict[str, DataFrame] = {}
    out["rebalance_started"] = started.select(
        "position",
        "group_id",
        F.col("r").alias("generation_id"),
        "cause",
        F.lit(None).cast("string").alias("member_id"),
        F.lit(None).cast("string").alias("group_instance_id"),
        F.lit(None).cast("string").alias("reason"),
        F.col("prev_state").alias("previous_state"),
        F.col("ts").alias("timestamp_ms"),
    )
    out["join_phase_completed"] = joined.select(
        "position",
        "group_id",
        (F.col("r") + 1).alias("generation_id"),
        F.lit("CompletingRebalance").alias("state"),
        F.lit("consumer").alias("protocol_type"),
        F.lit("range").alias("protocol"),
        member_id(F.lit(0)).alias("leader"),
        F.lit(spec.members).alias("member_count"),
        F.when(F.col("static"), spec.members).otherwise(0).alias("static_member_count"),
        "join_ms",
        F.col("ts").alias("timestamp_ms"),
    ).withColumnRenamed("join_ms", "join_duration_ms")
    out["group_stabilized"] = stable.select(
        "position",
        "group_id",
        (F.col("r") + 1).alias("generation_id"),
        F.col("sync_ms").alias("sync_duration_ms"),
        (F.col("join_ms") + F.col("sync_ms")).alias("rebalance_duration_ms"),
        F.col("ts").alias("timestamp_ms"),
    )
    # The snapshot is written just before GroupStabilized (position - 1 keeps the order and stays unique).
    snap = stable.withColumn("position", F.col("position") - 4096)
    out["group_metadata_log"] = snap.select(
        "position",
        "group_id",
        F.lit("consumer").alias("protocol_type"),
        (F.col("r") + 1).alias("generation_id"),
        F.lit("range").alias("protocol"),
        member_id(F.lit(0)).alias("leader"),
        F.col("ts").alias("current_state_timestamp_ms"),
        F.lit(spec.members).alias("member_count"),
        F.col("ts").alias("timestamp_ms"),
    )
    members = snap.select(
        "position", "group_id", "g", "r", "static", F.explode(F.sequence(F.lit(0), F.lit(spec.members - 1))).alias("k")
    )
    out["generation_members"] = members.select(
        "position",
        "group_id",
        (F.col("r") + 1).alias("generation_id"),
        member_id(F.col("k")).alias("member_id"),
        F.when(F.col("static"), F.format_string("instance-%d", F.col("k"))).alias("group_instance_id"),
        F.lit("consumer").alias("client_id"),
        F.lit("/10.0.0.1").alias("client_host"),
        F.lit(45_000).alias("session_timeout_ms"),
        F.lit(300_000).alias("rebalance_timeout_ms"),
        F.lit(True).alias("assignment_decoded"),
    )
    parts = snap.select(
        "position",
        "group_id",
        "g",
        "r",
        "static",
        F.explode(F.sequence(F.lit(0), F.lit(spec.partitions - 1))).alias("p"),
    )
    owner = ((F.col("p") + (F.col("r") / 2).cast("int")) % spec.members).cast("int")
    out["assigned_partitions"] = parts.select(
        "position",
        "group_id",
        (F.col("r") + 1).alias("generation_id"),
        member_id(owner).alias("member_id"),
        F.when(F.col("static"), F.format_string("instance-%d", owner)).alias("group_instance_id"),
        F.format_string("topic-%d", F.col("g") % 10).alias("topic"),
        F.col("p").alias("partition_index"),
    )
    out["member_removed"] = removed.select(
        "position",
        "group_id",
        member_id(F.lit(spec.members - 1)).alias("member_id"),
        F.when(F.col("static"), F.lit(f"instance-{spec.members - 1}")).alias("group_instance_id"),
        F.when(F.col("r") % 2 == 0, F.lit("left")).otherwise(F.lit("session_timeout")).alias("cause"),
        F.lit(None).cast("string").alias("reason"),
        F.col("r").alias("generation_id"),
        F.col("ts").alias("timestamp_ms"),
    )
    out["member_joined"] = member_joined.select(
        "position",
        "group_id",
        member_id(F.lit(spec.members - 1)).alias("member_id"),
        F.when(F.col("static"), F.lit(f"instance-{spec.members - 1}")).alias("group_instance_id"),
        F.lit("consumer").alias("client_id"),
        F.lit("/10.0.0.1").alias("client_host"),
        F.lit(45_000).alias("session_timeout_ms"),
        F.lit(300_000).alias("rebalance_timeout_ms"),
        F.col("ts").alias("timestamp_ms"),
    )
    keys = spec.groups * spec.partitions
    per_key = max(spec.commits // keys, 1)
    # Commits of a partition span the same time as the group's rebalances.
    commit_interval_ms = max(spec.rebalances * spec.period_ms // per_key, 1)
    c = (
        spark.range(keys * per_key)
        .select((F.col("id") % keys).alias("key"), (F.col("id") / keys).cast("long").alias("i"))
        .select(
            (F.col("key") / spec.partitions).cast("int").alias("g"),
            (F.col("key") % spec.partitions).cast("int").alias("p"),
            "i",
        )
    )
    rewind = (_h(F.col("g"), F.col("p"), F.col("i"), seed) % 5000) == 0
    ts = (
        F.lit(START_MS)
        + F.col("g") * 7919
        + F.col("i") * commit_interval_ms
        + _h(F.col("g"), F.col("p"), F.col("i")) % 1000
    )
    c = c.withColumn("ts", ts).withColumn(
        "position", ((F.col("ts") * 8 + 5) * 4096 + F.col("g") % 4096) * 64 + F.col("p") % 64
    )
    out["offset_commits"] = c.select(
        "position",
        F.format_string("group-%04d", F.col("g")).alias("group_id"),
        F.format_string("topic-%d", F.col("g") % 10).alias("topic"),
        F.col("p").alias("partition_index"),
        (F.col("i") * 100 - F.when(rewind, 150).otherwise(0)).alias("committed_offset"),
        F.lit(-1).alias("leader_epoch"),
        F.col("ts").alias("commit_timestamp_ms"),
        F.lit(None).cast("long").alias("expire_timestamp_ms"),
        F.format_string("consumer-%d-0-%d", F.col("g"), F.col("p") % spec.members).alias("member_id"),
        F.lit(1).alias("generation_id"),
    )
    # Scale the other positions the same way as commits (x64) so all tables share one ordering.
    for name in list(out):
        if name != "offset_commits":
            out[name] = out[name].withColumn("position", F.col("position") * 64)
    # The data path: group g reads topic g % 10; each partition gets a batch of 100 records half a commit interval
    # before the commit that reaches its end, so every commit is 100 messages and about half an interval behind.
    topics = min(spec.groups, 10)
    b = spark.range(topics * spec.partitions * (per_key + 1)).select(
        (F.col("id") % topics).cast("int").alias("t"),
        ((F.col("id") / topics).cast("long") % spec.partitions).cast("int").alias("p"),
        (F.col("id") / (topics * spec.partitions)).cast("long").alias("k"),
    )
    appended = F.lit(START_MS) + F.col("k") * commit_interval_ms - commit_interval_ms // 2
    out["partition_batches"] = b.select(
        F.format_string("topic-%d", F.col("t")).alias("topic"),
        F.col("p").alias("partition_index"),
        (F.col("k") * 100).alias("base_offset"),
        (F.col("k") * 100 + 99).alias("last_offset"),
        appended.alias("appended_ms"),
        (((appended * 8 + 6) * 4096 + F.col("t")) * 64 + F.col("p") % 64).alias("position"),
    )
    empty = {n: spark.createDataFrame([], TABLES[n]) for n in ("group_removals", "offset_removals", "admin_actions")}
    out.update(empty)
    return {name: out[name].select(*[f.name for f in TABLES[name].fields]) for name in TABLES}


def write_export(tables: dict[str, DataFrame], out_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, df in tables.items():
        df.write.mode("overwrite").parquet(str(out_dir / name))
        counts[name] = df.sparkSession.read.parquet(str(out_dir / name)).count()
    return counts


def main(argv: list[str] | None = None) -> int:
    from .session import build_session

    p = argparse.ArgumentParser(prog="python -m spark_jobs.synthetic", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    for field in SyntheticSpec.__dataclass_fields__.values():
        p.add_argument(f"--{field.name.replace('_', '-')}", type=int, default=field.default)
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)
    spec = SyntheticSpec(**{k: getattr(args, k) for k in SyntheticSpec.__dataclass_fields__})
    spark = build_session(args.master, shuffle_partitions=8, jdbc=False)
    started = time.monotonic()
    counts = write_export(generate(spark, spec), Path(args.out))
    spark.stop()
    total = sum(counts.values())
    print(f"wrote {total} rows in {time.monotonic() - started:.1f}s: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
