"""Entry point: ``python -m spark_jobs.rebalance_report --source SOURCE --out DIR [options]``.

Also runs under ``spark-submit`` (``spark-submit --jars "$(python -m spark_jobs.jdbc_drivers)"
spark_jobs/rebalance_report.py …``; the master then comes from spark-submit unless ``--master`` is given).

SOURCE is the daemon's database URL (``sqlite:///coordinator.db``, ``postgresql://user@host/db``, or ``jdbc:…``),
a SQLite file path, or a Parquet export directory (one sub-directory per table). DIR receives ``tables/<metric>/``
(Parquet), ``summary.json`` and ``report.html``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession

if __package__ in (None, ""):  # run as a script by spark-submit: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "spark_jobs"

from spark_jobs.config import HOUR_MS, ReportConfig
from spark_jobs.extract import read_source
from spark_jobs.load import REPORT_FILE, build_summary, read_tables, write_summary, write_tables
from spark_jobs.metrics import compute_metrics, filter_groups, resolve_range
from spark_jobs.report_html import render_report
from spark_jobs.schema import Inputs
from spark_jobs.session import build_session

log = logging.getLogger("spark_jobs.rebalance_report")


@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    tables: dict[str, Path]
    summary_path: Path
    report_path: Path
    summary: dict[str, Any]
    seconds: float


def run_inputs(spark: SparkSession, inputs: Inputs, out_dir: Path, config: ReportConfig, source: str) -> ReportResult:
    """Transform and load already-extracted inputs (what tests and the synthetic benchmark call)."""
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs = filter_groups(inputs, config.group_glob)
    # Every metric reads the inputs again: keep them (JDBC would otherwise re-query the database per metric).
    inputs = inputs.map(lambda _name, df: df.persist(StorageLevel.MEMORY_AND_DISK))
    rng = resolve_range(inputs, config)
    paths = write_tables(compute_metrics(inputs, config, rng), out_dir)
    for _name, df in inputs.items():
        df.unpersist()
    tables = read_tables(spark, paths)
    summary = build_summary(tables, config, rng, source)
    summary_path = write_summary(summary, out_dir)
    report_path = out_dir / REPORT_FILE
    report_path.write_text(render_report(tables, summary), encoding="utf-8")
    return ReportResult(out_dir, paths, summary_path, report_path, summary, time.monotonic() - started)


def run_report(
    spark: SparkSession,
    source: str,
    out_dir: str | os.PathLike[str],
    config: ReportConfig | None = None,
    *,
    user: str | None = None,
    password: str | None = None,
    schema: str | None = None,
    jdbc_partitions: int = 4,
) -> ReportResult:
    """Extract from SOURCE, compute every metric, write the outputs. The function an end-to-end test calls with
    the daemon's database URL."""
    inputs = read_source(spark, source, user=user, password=password, schema=schema, num_partitions=jdbc_partitions)
    return run_inputs(spark, inputs, Path(out_dir), config or ReportConfig(), _redact(source))


def _redact(source: str) -> str:
    if "://" in source and "@" in source:
        scheme, rest = source.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}" if ":" in creds else source
    return source


def parse_time(value: str) -> int:
    """Epoch milliseconds, or an ISO 8601 date/time (UTC unless it has an offset)."""
    if value.lstrip("-").isdigit():
        return int(value)
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m spark_jobs.rebalance_report", description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="database URL, SQLite file, or Parquet export directory")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--since", type=parse_time, help="start (ISO 8601 or epoch ms); default: the first event")
    p.add_argument("--until", type=parse_time, help="end and 'as of' time; default: just after the last event")
    p.add_argument("--group", help="only groups whose id matches this glob (e.g. 'orders-*')")
    p.add_argument("--master", help="Spark master URL (default: spark-submit's, else local[2])")
    p.add_argument(
        "--offsets-retention-minutes", type=int, default=10080, help="the broker's offsets.retention.minutes"
    )
    p.add_argument("--expiry-horizon-hours", type=float, default=24.0, help="report offsets expiring within this")
    p.add_argument("--stale-commit-minutes", type=float, default=15.0, help="uncommitted-while-Stable threshold")
    p.add_argument("--jdbc-partitions", type=int, default=4, help="parallel JDBC reads per large table")
    p.add_argument("--user", help="database user (overrides the URL's)")
    p.add_argument("--schema", help="PostgreSQL schema of the daemon's tables (default: the search path)")
    p.add_argument("--password-env", default="PGPASSWORD", help="environment variable holding the password")
    p.add_argument("--driver-memory", help="spark.driver.memory for a local run (e.g. 4g)")
    p.add_argument("--shuffle-partitions", type=int, default=8, help="spark.sql.shuffle.partitions")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ReportConfig(
        since_ms=args.since,
        until_ms=args.until,
        group_glob=args.group,
        offsets_retention_minutes=args.offsets_retention_minutes,
        expiry_horizon_ms=int(args.expiry_horizon_hours * HOUR_MS),
        stale_commit_ms=int(args.stale_commit_minutes * 60_000),
    )
    spark = build_session(args.master, shuffle_partitions=args.shuffle_partitions, driver_memory=args.driver_memory)
    try:
        result = run_report(
            spark,
            args.source,
            args.out,
            config,
            user=args.user,
            password=os.environ.get(args.password_env),
            schema=args.schema,
            jdbc_partitions=args.jdbc_partitions,
        )
    finally:
        spark.stop()
    totals = result.summary["totals"]
    log.info(
        "report written to %s in %.1fs: %d groups, %d rebalances, %d rewinds",
        result.report_path,
        result.seconds,
        totals["groups"],
        totals["rebalances"],
        totals["commit_rewinds"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
