"""The whole job (extract -> transform -> load) against a database written by the daemon's own storage layer,
read through Spark JDBC, and against a Parquet export made by the synthetic generator."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_jobs.config import ReportConfig
from spark_jobs.jdbc_drivers import find_jars
from spark_jobs.rebalance_report import ReportResult, run_inputs, run_report
from spark_jobs.synthetic import SyntheticSpec, generate, write_export
from tests.chromium import ensure_chromium
from tests.needs import missing
from tests.storage.conftest import PG_URL, require_postgres

from .history import M


def _write_daemon_history(url: str, schema: str | None = None) -> None:
    """A consumer group's life through the daemon's record factories and SqlRecordLog, and two record batches of
    its partition t/0: offsets 0-149 appended at 1 min, 150-199 at 12 min."""
    from broker.records import BatchAppended, TopicCreated
    from coordinator import records as r
    from protocol.consumer_protocol import encode_assignment
    from storage.record_log import SqlRecordLog

    def member(mid: str, parts: list[int]) -> r.MemberMetadata:
        return r.MemberMetadata(
            mid, None, "client", "/127.0.0.1", 300_000, 45_000, b"", encode_assignment({"t": parts})
        )

    def snapshot(gen: int, members: list[r.MemberMetadata], now: int) -> r.GroupMetadataRecord:
        return r.new_group_metadata_record(
            "orders",
            protocol_type="consumer",
            generation_id=gen,
            protocol="range",
            leader=members[0].member_id,
            current_state_timestamp_ms=now,
            members=members,
            now_ms=now,
        )

    history: list[r.Record] = [
        r.RebalanceStarted("orders", 0, r.RebalanceCause.NEW_MEMBER, "a", None, None, "Empty", 0),
        r.JoinPhaseCompleted("orders", 1, "CompletingRebalance", "consumer", "range", "a", ("a",), (), 3 * M, 3 * M),
        snapshot(1, [member("a", [0, 1, 2, 3])], 4 * M),
        r.GroupStabilized("orders", 1, 1 * M, 4 * M, 4 * M),
        r.new_offset_commit_record(
            "orders",
            "t",
            0,
            offset=100,
            leader_epoch=-1,
            metadata=None,
            commit_timestamp_ms=5 * M,
            expire_timestamp_ms=None,
            member_id="a",
            generation_id=1,
        ),
        r.RebalanceStarted("orders", 1, r.RebalanceCause.NEW_MEMBER, "b", None, None, "Stable", 10 * M),
        r.MemberJoined("orders", "b", None, "client", "/127.0.0.1", ("range",), 45_000, 300_000, 10 * M),
        r.JoinPhaseCompleted(
            "orders", 2, "CompletingRebalance", "consumer", "range", "a", ("a", "b"), (), 2 * M, 12 * M
        ),
        snapshot(2, [member("a", [0, 1]), member("b", [2, 3])], 13 * M),
        r.GroupStabilized("orders", 2, 1 * M, 3 * M, 13 * M),
        r.new_offset_commit_record(
            "orders",
            "t",
            0,
            offset=90,
            leader_epoch=-1,
            metadata=None,
            commit_timestamp_ms=14 * M,
            expire_timestamp_ms=None,
            member_id="a",
            generation_id=2,
        ),
        r.RebalanceStarted("orders", 2, r.RebalanceCause.SESSION_TIMEOUT, "b", None, None, "Stable", 20 * M),
    ]

    data = [
        TopicCreated("t", 4, (), 0),
        BatchAppended("t", 0, 0, 149, 1 * M, 0, b"batch-1", 1 * M),
        BatchAppended("t", 0, 150, 199, 12 * M, 0, b"batch-2", 12 * M),
    ]

    async def write() -> None:
        log = await SqlRecordLog.open(url, schema=schema)
        try:
            log.append(data)
            await log.flush()
            log.append(history)
            await log.flush()
        finally:
            await log.close()

    asyncio.run(write())


JDBC_MISSING = not all(find_jars().values())


def _check_report(spark: SparkSession, result: ReportResult) -> None:
    totals = result.summary["totals"]
    assert totals["rebalances"] == 3
    assert totals["rebalances_by_cause"] == {"new_member": 2, "session_timeout": 1}
    assert totals["rebalances_by_outcome"] == {"stable": 2, "in_progress": 1}
    assert totals["commit_rewinds"] == 1
    moves = spark.read.parquet(str(result.tables["assignment_changes"])).orderBy("generation_id").collect()
    # Generation 2 gives partitions 2 and 3 (of 4) to the new member b.
    assert [(m["generation_id"], m["partitions_moved"], m["moved_share"]) for m in moves] == [
        (1, None, None),
        (2, 2, 0.5),
    ]
    # Lag at each commit, from the stored batches: at 5 min offset 100 of a log ending at 150, the oldest unread
    # message appended at 1 min; at 14 min offset 90 (a rewind) of a log ending at 200.
    lags = spark.read.parquet(str(result.tables["commit_lag"])).orderBy("position").collect()
    assert [(x["commit_timestamp_ms"], x["log_end_offset"], x["lag_messages"], x["lag_ms"]) for x in lags] == [
        (5 * M, 150, 50, 4 * M),
        (14 * M, 200, 110, 13 * M),
    ]
    hours = spark.read.parquet(str(result.tables["group_lag_windows"])).where("granularity = 'hour'").collect()
    assert [(h["group_id"], h["commits"], h["max_lag_messages"], h["max_lag_ms"]) for h in hours] == [
        ("orders", 2, 110, 13 * M)
    ]
    assert json.loads(result.summary_path.read_text())["totals"] == totals
    page = result.report_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing loaded from a network


def test_report_from_the_daemons_sqlite_database(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if JDBC_MISSING:
        missing("JDBC drivers not installed (spark_jobs/setup_jdbc.sh)")
    db = tmp_path / "coordinator.db"
    _write_daemon_history(f"sqlite+aiosqlite:///{db}")
    with caplog.at_level(logging.WARNING, logger="spark_jobs"):
        _check_report(spark, run_report(spark, f"sqlite:///{db}", tmp_path / "out", ReportConfig(until_ms=30 * M)))
    # Tables the history leaves empty (group_removals, offset_removals, member_removed) are read, not reported
    # missing.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def _pg_execute(statement: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    async def run() -> None:
        engine = create_async_engine(PG_URL)
        try:
            async with engine.begin() as conn:
                await conn.execute(text(statement))
        finally:
            await engine.dispose()

    asyncio.run(run())


@pytest.mark.postgres
def test_report_from_the_daemons_postgresql_database(spark: SparkSession, tmp_path: Path) -> None:
    if JDBC_MISSING:
        missing("JDBC drivers not installed (spark_jobs/setup_jdbc.sh)")
    require_postgres()
    schema = f"kgc_spark_{uuid.uuid4().hex[:10]}"
    _pg_execute(f'CREATE SCHEMA "{schema}"')
    try:
        _write_daemon_history(PG_URL, schema=schema)
        result = run_report(spark, PG_URL, tmp_path / "out", ReportConfig(until_ms=30 * M), schema=schema)
        _check_report(spark, result)
    finally:
        _pg_execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


SYNTHETIC = SyntheticSpec(groups=3, members=3, partitions=6, rebalances=4, commits=3 * 6 * 20)


@pytest.fixture(scope="module")
def synthetic_report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> ReportResult:
    root = tmp_path_factory.mktemp("synthetic")
    counts = write_export(generate(spark, SYNTHETIC), root / "export")
    assert counts["rebalance_started"] == SYNTHETIC.groups * SYNTHETIC.rebalances
    return run_report(spark, str(root / "export"), root / "out", ReportConfig())


def test_report_from_a_synthetic_parquet_export(spark: SparkSession, synthetic_report: ReportResult) -> None:
    totals = synthetic_report.summary["totals"]
    assert totals["rebalances"] == SYNTHETIC.groups * SYNTHETIC.rebalances
    assert totals["groups"] == SYNTHETIC.groups
    assert synthetic_report.summary["table_rows"]["commit_cadence_partition"] == SYNTHETIC.groups * SYNTHETIC.partitions
    # Each partition's batches of 100 arrive half a commit interval (2 min) before the commit that reaches them.
    lags = spark.read.parquet(str(synthetic_report.tables["commit_lag"]))
    row = lags.agg(F.count("*").alias("n"), F.min("lag_messages").alias("lo"), F.min("lag_ms").alias("ms")).first()
    assert row is not None and (row["n"], row["lo"]) == (SYNTHETIC.commits, 100) and row["ms"] >= 2 * M


def test_html_report_renders_in_headless_chromium_without_network(synthetic_report: ReportResult) -> None:
    page = synthetic_report.report_path
    common = [
        ensure_chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1100,2000",
    ]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # The four charts are inline SVG with drawn marks (not the "no data" placeholder).
    assert dom.stdout.count("<svg") == 4
    assert dom.stdout.count("<polyline") >= 1 and dom.stdout.count("<rect") > 10
    shot = page.with_suffix(".png")
    done = subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert done.returncode == 0 and shot.stat().st_size > 20_000


def test_group_glob_limits_the_report(spark: SparkSession, tmp_path: Path) -> None:
    spec = SyntheticSpec(groups=3, members=2, partitions=2, rebalances=2, commits=12)
    from spark_jobs.schema import Inputs

    inputs = Inputs.from_tables(spark, generate(spark, spec))
    result = run_inputs(spark, inputs, tmp_path / "out", ReportConfig(group_glob="group-000[01]"), "synthetic")
    assert sorted(g["group_id"] for g in result.summary["groups"]) == ["group-0000", "group-0001"]
