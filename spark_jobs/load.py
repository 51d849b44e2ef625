"""Load: metric tables -> Parquet (one directory per metric), a JSON summary, and the HTML report.

The summary and the report are built from the written Parquet tables (small aggregates), so the heavy plans run
once, when each table is written.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .config import ReportConfig, ReportRange

TABLES_DIR = "tables"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"


def write_tables(metrics: dict[str, DataFrame], out_dir: Path, parallel: int = 1) -> dict[str, Path]:
    """One Parquet directory per metric. With ``parallel`` > 1 that many writes run at once (one Spark job each,
    submitted from threads): on small inputs a job is mostly driver-side planning and scheduling, and running a few
    together keeps the cores busy."""
    paths = {name: out_dir / TABLES_DIR / name for name in metrics}

    def write(name: str) -> None:
        metrics[name].write.mode("overwrite").parquet(str(paths[name]))

    if parallel <= 1:
        for name in metrics:
            write(name)
    else:
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="write-table") as pool:
            for future in [pool.submit(write, name) for name in metrics]:
                future.result()
    return paths


def read_tables(
    spark: SparkSession, paths: dict[str, Path], schemas: dict[str, StructType] | None = None
) -> dict[str, DataFrame]:
    """The written tables; with their schemas known, Spark does not run a job per table to read them."""
    schemas = schemas or {}
    return {
        name: (spark.read.schema(schemas[name]) if name in schemas else spark.read).parquet(str(path))
        for name, path in paths.items()
    }


def iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _rows(df: DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    rows = df.limit(limit).collect() if limit is not None else df.collect()
    return [{k: _clean(v) for k, v in r.asDict().items()} for r in rows]


def table_rows(tables: dict[str, DataFrame]) -> dict[str, int]:
    """Rows per table, in one Spark job."""
    parts = [df.select(F.lit(name).alias("table"), F.count(F.lit(1)).alias("n")) for name, df in tables.items()]
    rows = reduce(DataFrame.unionByName, parts).collect()
    return {r["table"]: int(r["n"]) for r in rows}


def build_summary(
    tables: dict[str, DataFrame], config: ReportConfig, rng: ReportRange, source: str, list_limit: int = 200
) -> dict[str, Any]:
    """A JSON-ready summary: range, totals, per-group figures, and the lists an operator acts on."""
    episodes = tables["rebalance_episodes"]
    day_state = tables["state_time"].where("granularity = 'day'")
    per_group = (
        episodes.groupBy("group_id")
        .agg(
            F.count("*").alias("rebalances"),
            F.count_if(F.col("outcome") == "in_progress").alias("in_progress"),
            F.percentile_approx("join_duration_ms", 0.9, config.percentile_accuracy).alias("join_p90_ms"),
            F.percentile_approx("sync_duration_ms", 0.9, config.percentile_accuracy).alias("sync_p90_ms"),
        )
        .join(
            day_state.groupBy("group_id").agg(
                F.sum("tracked_ms").alias("tracked_ms"),
                F.sum("rebalancing_ms").alias("rebalancing_ms"),
                F.sum("empty_ms").alias("empty_ms"),
            ),
            "group_id",
            "full",
        )
        .join(
            # moved_share is null for snapshots that are not a rebalance's outcome (a static member's restart).
            tables["assignment_changes"]
            .groupBy("group_id")
            .agg(F.avg("moved_share").alias("avg_moved_share"), F.max("moved_share").alias("max_moved_share")),
            "group_id",
            "full",
        )
        .join(tables["commit_cadence_group"].select("group_id", "commits", "interval_p50_ms"), "group_id", "full")
        .join(
            # the worst lag at any commit in the range (null: no stored batch for its partitions)
            tables["group_lag_windows"]
            .where("granularity = 'day'")
            .groupBy("group_id")
            .agg(F.max("max_lag_messages").alias("max_lag_messages"), F.max("max_lag_ms").alias("max_lag_ms")),
            "group_id",
            "full",
        )
        .join(tables["commit_rewinds"].groupBy("group_id").agg(F.count("*").alias("rewinds")), "group_id", "full")
        .join(
            tables["offset_resets"]
            .groupBy("group_id")
            .agg(
                F.count_distinct("commit_timestamp_ms").alias("resets"),
                F.count("*").alias("reset_partitions"),
            ),
            "group_id",
            "full",
        )
        .join(tables["evictions"].groupBy("group_id").agg(F.count("*").alias("evictions")), "group_id", "full")
        .join(
            tables["stale_partitions"]
            .groupBy("group_id")
            .agg(F.count("*").alias("stale_stretches"), F.count_if("ongoing").alias("ongoing_stale")),
            "group_id",
            "full",
        )
        .withColumn("rebalancing_share", F.when(F.col("tracked_ms") > 0, F.col("rebalancing_ms") / F.col("tracked_ms")))
        .withColumn("empty_share", F.when(F.col("tracked_ms") > 0, F.col("empty_ms") / F.col("tracked_ms")))
        .drop("rebalancing_ms", "empty_ms")
        .fillna(
            0,
            subset=[
                "rebalances",
                "in_progress",
                "commits",
                "rewinds",
                "resets",
                "reset_partitions",
                "evictions",
                "stale_stretches",
                "ongoing_stale",
            ],
        )
        .orderBy(F.desc("rebalances"), "group_id")
    )
    group_rows = _rows(per_group)
    causes = episodes.groupBy("cause").agg(F.count("*").alias("n")).orderBy(F.desc("n")).collect()
    outcomes = episodes.groupBy("outcome").agg(F.count("*").alias("n")).collect()
    counts = table_rows(tables)
    return {
        "generated_at": iso(int(datetime.now(tz=UTC).timestamp() * 1000)),
        "source": source,
        "range": {
            "since": iso(rng.since_ms),
            "until": iso(rng.until_ms),
            "since_ms": rng.since_ms,
            "until_ms": rng.until_ms,
        },
        "parameters": {
            "group_glob": config.group_glob,
            "offsets_retention_minutes": config.offsets_retention_minutes,
            "expiry_horizon_ms": config.expiry_horizon_ms,
            "stale_commit_ms": config.stale_commit_ms,
        },
        "totals": {
            "groups": len(group_rows),
            "rebalances": counts["rebalance_episodes"],
            "rebalances_by_cause": {r["cause"]: r["n"] for r in causes},
            "rebalances_by_outcome": {r["outcome"]: r["n"] for r in outcomes},
            "commit_rewinds": counts["commit_rewinds"],
            "offset_resets": tables["offset_resets"].select("group_id", "commit_timestamp_ms").distinct().count(),
            "offset_reset_partitions": counts["offset_resets"],
            "evictions": counts["evictions"],
            "stale_partition_stretches": counts["stale_partitions"],
            "expiring_groups": counts["expiring_groups"],
        },
        "groups": group_rows[:list_limit],
        "expiring_groups": _rows(tables["expiring_groups"].orderBy("earliest_expiry_ms"), list_limit),
        "table_rows": counts,
    }


def write_summary(summary: dict[str, Any], out_dir: Path) -> Path:
    path = out_dir / SUMMARY_FILE
    path.write_text(json.dumps(summary, indent=2, sort_keys=False, default=str) + "\n")
    return path
