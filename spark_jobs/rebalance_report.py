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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

if __package__ in (None, ""):  # run as a script by spark-submit: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "spark_jobs"

from spark_jobs.config import HOUR_MS, ReportConfig
from spark_jobs.extract import read_source, source_bytes
from spark_jobs.load import REPORT_FILE, build_summary, read_tables, write_summary, write_tables
from spark_jobs.metrics import compute_metrics, filter_groups, now_ms, resolve_range
from spark_jobs.report_html import render_report
from spark_jobs.schema import TABLES, Inputs
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
    now = now_ms()
    everything = inputs
    inputs = filter_groups(inputs, config.group_glob)
    # Every metric reads the inputs again: keep them (JDBC would otherwise re-query the database per metric).
    persisted: list[DataFrame] = []

    def keep(df: DataFrame) -> DataFrame:
        persisted.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return persisted[-1]

    inputs = inputs.map(lambda _name, df: keep(df))
    rows = input_rows(inputs)  # also fills the cache, in one job
    # The range is that of the whole log, whichever groups are reported: until = now, since = the first event.
    rng = resolve_range(everything if config.group_glob else inputs, config, now)
    read = time.monotonic()
    small = rows < SMALL_INPUT_ROWS
    with small_input_settings(spark, small):
        metrics = compute_metrics(inputs, config, rng, keep)
        if small:
            # Fill the shared intermediates' caches before the writes run at once (else each would compute them).
            for df in persisted[len(TABLES) :]:
                df.count()
        paths = write_tables(metrics, out_dir, parallel=SMALL_INPUT_WRITERS if small else 1)
        for df in persisted:
            df.unpersist()
        written = time.monotonic()
        tables = read_tables(spark, paths, {name: df.schema for name, df in metrics.items()})
        summary = build_summary(tables, config, rng, source)
        summary_path = write_summary(summary, out_dir)
        report_path = out_dir / REPORT_FILE
        report_path.write_text(render_report(tables, summary), encoding="utf-8")
    log.info(
        "%d input rows: read %.1fs, tables %.1fs, summary and page %.1fs",
        rows,
        read - started,
        written - read,
        time.monotonic() - written,
    )
    return ReportResult(out_dir, paths, summary_path, report_path, summary, time.monotonic() - started)


# Below this many input rows, a shuffle into several partitions, generated code (compiled per query: the report runs
# ~100) and adaptive re-planning cost more than they save, and the tables are written a few at a time.
SMALL_INPUT_ROWS = 200_000
SMALL_INPUT_WRITERS = 4
# A source smaller than this on disk gets a JVM tuned for a short run (session.SHORT_RUN_JAVA_OPTIONS). The 1M-row
# synthetic export is 10.7 MB; a SQLite file is larger per row.
SHORT_RUN_SOURCE_BYTES = 100_000_000


def input_rows(inputs: Inputs) -> int:
    counts = [df.select(F.count(F.lit(1)).alias("n")) for _name, df in inputs.items()]
    row = reduce(DataFrame.unionByName, counts).agg(F.sum("n").alias("n")).first()
    return int(row["n"] or 0) if row is not None else 0


@contextmanager
def small_input_settings(spark: SparkSession, small: bool) -> Iterator[None]:
    """For a small input: one shuffle partition, no whole-stage code generation, no adaptive execution; the
    session's own values are restored after."""
    if not small:
        yield
        return
    settings = {
        "spark.sql.shuffle.partitions": "1",
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.adaptive.enabled": "false",
        # Interpreted expressions: no Janino compilation at all (what the transform tests run with, on every query
        # of the report). Compiling is most of a cold JVM's time on a small input.
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


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
    p.add_argument("--until", type=parse_time, help="end and 'as of' time; default: now")
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
    p.add_argument(
        "--jvm",
        choices=("auto", "short", "default"),
        default="auto",
        help="short: C1 compiler and serial GC (measured quicker up to 1M rows); auto: short when the source is a"
        " file or export smaller than 100 MB",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per thread that ran a job, at its end
    config = ReportConfig(
        since_ms=args.since,
        until_ms=args.until,
        group_glob=args.group,
        offsets_retention_minutes=args.offsets_retention_minutes,
        expiry_horizon_ms=int(args.expiry_horizon_hours * HOUR_MS),
        stale_commit_ms=int(args.stale_commit_minutes * 60_000),
    )
    size = source_bytes(args.source)
    short_run = args.jvm == "short" or (args.jvm == "auto" and size is not None and size < SHORT_RUN_SOURCE_BYTES)
    spark = build_session(
        args.master,
        shuffle_partitions=args.shuffle_partitions,
        driver_memory=args.driver_memory,
        short_run=short_run,
    )
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
