"""The report's per-group figures (summary.json, what the HTML page shows) for the cases issue #18 found wrong:
an idle (Empty) group is not "outside Stable" like a rebalancing one, an operator's offset reset is not a consumer
rewind, and the end of the range is the time the report runs, the same for every group."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_jobs.config import ReportConfig, ReportRange
from spark_jobs.load import build_summary
from spark_jobs.metrics import compute_metrics
from spark_jobs.rebalance_report import run_inputs
from spark_jobs.report_html import render_report

from .history import History, M

RANGE = ReportRange(0, 60 * M)
T = [("t", p) for p in range(3)]


def idle_and_busy() -> History:
    return (
        History()
        # idle: Stable 0-10 min, then its only member leaves and the group stays Empty (50 of 60 min).
        .started(1, "idle", 0, 0, prev="Empty")
        .joined(2, "idle", 0, 1, join_ms=0)
        .snapshot(3, "idle", 0, 1, {"m1": (None, T)})
        .stabilized(4, "idle", 0, 1, sync_ms=0, total_ms=0)
        .commit(5, "idle", "t", 0, 100, 5 * M)
        .commit(6, "idle", "t", 1, 100, 5 * M)
        .commit(7, "idle", "t", 2, 100, 5 * M)
        .member_removed(8, "idle", 10 * M, "m1", "left")
        .started(9, "idle", 10 * M, 1, cause="member_left")
        .joined(10, "idle", 10 * M, 2, join_ms=0, state="Empty", members=0)
        .snapshot(11, "idle", 10 * M, 2)
        # The operator resets the Empty group's offsets: generation -1, one request for three partitions. The
        # third row carries a member id, as the daemon still records it for such a commit (classified by the
        # generation alone).
        .commit(12, "idle", "t", 0, 50, 30 * M, member="", gen=-1)
        .commit(13, "idle", "t", 1, 50, 30 * M, member="", gen=-1)
        .commit(14, "idle", "t", 2, 50, 30 * M, member="admin-client", gen=-1)
        # The audit trail names who reset them (stamped once the commit was durable), and an older, unrelated action.
        .admin_action(15, "idle", 30 * M + 40, "offsets.reset", "User:ada", "kgc/1.0")
        .admin_action(16, "idle", 29 * M, "offsets.reset", "User:mallory", "other")
        .admin_action(17, "busy", 30 * M + 10, "offsets.alter", "User:bob", "not-this-group")
        # busy: joins for 5 min, syncs for 5 min, then Stable (10 of 60 min rebalancing).
        .started(20, "busy", 0, 0, prev="Empty")
        .joined(21, "busy", 5 * M, 1, join_ms=5 * M)
        .snapshot(22, "busy", 10 * M, 1, {"m1": (None, T)})
        .stabilized(23, "busy", 10 * M, 1, sync_ms=5 * M, total_ms=10 * M)
        .commit(24, "busy", "t", 0, 100, 20 * M)
        .commit(25, "busy", "t", 0, 90, 25 * M)  # the consumer's own commit goes back: a rewind
        .commit(26, "busy", "t", 1, 100, 20 * M)
        .commit(27, "busy", "t", 2, 100, 20 * M)
    )


@pytest.fixture(scope="module")
def summary(spark: SparkSession) -> dict[str, Any]:
    config = ReportConfig(since_ms=RANGE.since_ms, until_ms=RANGE.until_ms)
    tables = compute_metrics(idle_and_busy().inputs(spark), config, RANGE)
    return build_summary(tables, config, RANGE, "test")


def _group(summary: dict[str, Any], group: str) -> dict[str, Any]:
    return next(g for g in summary["groups"] if g["group_id"] == group)


def test_empty_time_is_not_rebalancing_time(summary: dict[str, Any]) -> None:
    idle, busy = _group(summary, "idle"), _group(summary, "busy")
    # The idle group never rebalanced for any time; it was Empty 50 of 60 minutes.
    assert idle.get("rebalancing_share") == 0.0
    assert idle.get("empty_share") == pytest.approx(50 / 60)
    assert busy.get("rebalancing_share") == pytest.approx(10 / 60)
    assert busy.get("empty_share") == 0.0


def test_an_operators_reset_is_not_a_consumer_rewind(summary: dict[str, Any]) -> None:
    totals = summary["totals"]
    assert totals["commit_rewinds"] == 1  # busy's, not the three partitions of idle's reset
    assert _group(summary, "busy")["rewinds"] == 1
    assert _group(summary, "idle")["rewinds"] == 0
    assert totals.get("offset_resets") == 1  # one reset request
    assert totals.get("offset_reset_partitions") == 3
    assert _group(summary, "idle").get("resets") == 1


def test_an_operators_reset_names_who_did_it(spark: SparkSession) -> None:
    """From the audit trail: the first offsets action on the group at or after the reset's commit; a consumer's
    rewind has no actor row at all, and a reset without an audit entry has a null one."""
    config = ReportConfig(since_ms=RANGE.since_ms, until_ms=RANGE.until_ms)
    tables = compute_metrics(idle_and_busy().inputs(spark), config, RANGE)
    resets = {
        (r["partition_index"], r["principal"], r["client_id"], r["via"]) for r in tables["offset_resets"].collect()
    }
    assert resets == {(p, "User:ada", "kgc/1.0", "http") for p in range(3)}
    assert "principal" not in tables["commit_rewinds"].columns
    html = render_report(tables, build_summary(tables, config, RANGE, "test"))
    assert "User:ada" in html and "User:mallory" not in html and "User:bob" not in html
    without = compute_metrics(idle_and_busy().inputs(spark).map(
        lambda name, df: df.limit(0) if name == "admin_actions" else df), config, RANGE)  # fmt: skip
    assert {r["principal"] for r in without["offset_resets"].collect()} == {None}


def quiet_and_busy(now: int) -> History:
    """quiet: Stable since 3 h ago, its consumer committed once 2 min later and never again (it may still heartbeat:
    heartbeats are not stored). loud: another group, events until 10 minutes ago."""
    base = (now - 3 * 60 * M) // M * M
    history = (
        History()
        .started(1, "quiet", base, 0, prev="Empty")
        .joined(2, "quiet", base, 1, join_ms=0)
        .snapshot(3, "quiet", base + 1 * M, 1, {"q1": (None, T[:1])})
        .stabilized(4, "quiet", base + 1 * M, 1, sync_ms=M, total_ms=M)
        .commit(5, "quiet", "t", 0, 100, base + 2 * M, member="q1")
        .started(10, "loud", base, 0, prev="Empty")
        .joined(11, "loud", base, 1, join_ms=0)
        .snapshot(12, "loud", base + 1 * M, 1, {"l1": (None, T[:1])})
        .stabilized(13, "loud", base + 1 * M, 1, sync_ms=M, total_ms=M)
    )
    for i in range(17):  # every 10 minutes, the last at base + 170 min = 10 minutes ago
        history.commit(20 + i, "loud", "t", 0, 100 + i, base + (i + 1) * 10 * M, member="l1")
    return history


def test_the_end_of_range_is_now_and_the_same_for_every_group(spark: SparkSession, tmp_path: Path) -> None:
    before = int(time.time() * 1000)
    inputs = quiet_and_busy(before).inputs(spark)
    alone = run_inputs(spark, inputs, tmp_path / "alone", ReportConfig(group_glob="quiet"), "test").summary
    full = run_inputs(spark, inputs, tmp_path / "full", ReportConfig(), "test").summary
    after = int(time.time() * 1000)
    for summary in (alone, full):
        assert before <= summary["range"]["until_ms"] <= after
        # quiet's partition has had no commit for ~3 hours while Stable: one stretch, still going on.
        quiet = _group(summary, "quiet")
        assert (quiet["stale_stretches"], quiet.get("ongoing_stale")) == (1, 1)
    assert alone["range"]["since_ms"] == full["range"]["since_ms"]
