"""The whole pipeline: the daemon (SQLite default) records what real consumers did; the Spark report reads that database
through JDBC and through a ``kgc export`` Parquet export, and both reports show exactly what the test drove.

Cast (group ``report-e2e``, topic ``rep6`` with 6 partitions, round-robin): L a dynamic aiokafka consumer (the first,
so the leader; see members.py for why not kafka-python), B a static kafka-python consumer
(``group.instance.id=static-b``), A a dynamic kafka-python consumer, C a confluent-kafka consumer in a child process.
Story:

1. L, B, A and C join one after the other (4 rebalances, cause new_member).
2. C is SIGKILLed; its session (2 s) expires (1 rebalance, session_timeout; C evicted).
3. B restarts within its session timeout with the same instance id: no rebalance; the new member id replaces (fences)
   the old one and keeps B's partitions (a snapshot of the same generation).
4. A leaves with a KIP-800 reason (kafka-python 3.0.12 sends LeaveGroup v5 with it) (1 rebalance, member_left).

The members commit after every step; one commit goes backwards (a rewind). The expected figures come from what the
clients themselves observed (their assignments per generation) and what the test committed, never from the daemon's
database or the report. ``kgc export`` runs once while the daemon is running (SQLite WAL: a concurrent reader) and
once after it stopped (incremental: only the new rows).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from PIL import Image
from pyspark.sql import SparkSession

from spark_jobs.config import ReportConfig
from spark_jobs.jdbc_drivers import find_jars
from spark_jobs.rebalance_report import ReportResult, run_report
from tests.browser.conftest import run_chromium
from tests.e2e.daemon import ROOT, Daemon
from tests.e2e.helpers import ChildMember, wait_for
from tests.needs import missing

from .members import AioConsumer, Consumer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.spark,
    pytest.mark.usefixtures("jdbc_jars"),
]


@pytest.fixture(scope="module")
def jdbc_jars() -> None:
    if not all(find_jars().values()):
        missing("JDBC drivers missing: bash spark_jobs/setup_jdbc.sh")


GROUP = "report-e2e"
TOPIC = "rep6"
PARTITIONS = frozenset(range(6))
REASON = "spark e2e: consumer A shutting down"
CHILD_SESSION_TIMEOUT_MS = 2000


def _group(d: Daemon) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"{d.http_url}/v1/groups/{GROUP}", timeout=5) as resp:
            return json.load(resp)  # type: ignore[no-any-return]
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


class Story:
    """What the test drove: the owners of every persisted assignment, the rebalances, member churn and commits."""

    def __init__(self, d: Daemon) -> None:
        self.d = d
        self.snapshots: list[tuple[int, dict[int, str]]] = []  # (generation, partition -> owner label)
        self.rebalances: Counter[str] = Counter()
        self.joins = self.static_joins = self.leaves = self.evictions = 0
        self.committed: dict[int, int] = {}  # partition -> last committed offset
        self.commits = self.rewinds = 0

    def settle(self, generation: int, members: dict[str, Consumer | ChildMember]) -> None:
        """Wait until the group is Stable in ``generation`` with these members and every client sees its share of
        the partitions; record the owners as the clients report them."""

        def ready() -> bool:
            g = _group(self.d)
            if g is None or g["state"] != "Stable" or g["generation_id"] != generation:
                return False
            if len(g["members"]) != len(members):
                return False
            consumers = [m for m in members.values() if isinstance(m, Consumer)]
            if any(c.generation != generation for c in consumers):
                return False
            shares = [m.assignment for m in members.values()]
            return sum(len(s) for s in shares) == len(PARTITIONS) and frozenset().union(*shares) == PARTITIONS

        try:
            wait_for(ready, 60, f"generation {generation} stable with {sorted(members)}")
        except AssertionError as e:
            clients = {k: (getattr(m, "generation", None), sorted(m.assignment)) for k, m in members.items()}
            raise AssertionError(
                f"{e}\ngroup: {_group(self.d)}\nclients: {clients}\ndaemon log:\n{self.d.log_text()[-4000:]}"
            ) from None
        self.snapshots.append((generation, {p: label for label, m in members.items() for p in sorted(m.assignment)}))

    def commit_round(self, members: dict[str, Consumer | ChildMember], base: int) -> None:
        for m in members.values():
            if isinstance(m, Consumer) and m.assignment:
                self.commit(m, {p: base + p for p in m.assignment})

    def commit(self, consumer: Consumer, offsets: dict[int, int]) -> None:
        consumer.commit(offsets)
        for p, o in offsets.items():
            self.rewinds += int(p in self.committed and o < self.committed[p])
            self.committed[p] = o
            self.commits += 1

    def moved(self) -> list[tuple[int, int | None]]:
        """(generation, partitions whose owner changed since the previous snapshot); None for the first, and for a
        snapshot of the same generation as the previous one (the static restart: not a rebalance)."""
        out: list[tuple[int, int | None]] = []
        previous: tuple[int, dict[int, str]] | None = None
        for generation, owners in self.snapshots:
            if previous is None or previous[0] == generation:
                out.append((generation, None))
            else:
                out.append((generation, sum(owners[p] != o for p, o in previous[1].items())))
            previous = (generation, owners)
        return out


def _export(d: Daemon, out: Path) -> dict[str, str]:
    cmd = [sys.executable, "-m", "daemon", "export", "--out", str(out), "--data-dir", str(d.workdir / "data")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(line.split("\t", 1) for line in done.stdout.splitlines())


def _drive(d: Daemon, story: Story, export_dir: Path) -> dict[str, str]:
    """The story; returns the output of the export taken while the daemon was running."""
    members: dict[str, Consumer | ChildMember] = {}
    child: ChildMember | None = None
    try:
        members["L"] = AioConsumer(d.bootstrap, GROUP, TOPIC).start()
        story.rebalances["new_member"] += 1
        story.joins += 1
        story.settle(1, members)
        story.commit_round(members, 100)

        members["static-b"] = Consumer(d.bootstrap, GROUP, TOPIC, instance_id="static-b").start()
        story.rebalances["new_member"] += 1
        story.joins += 1
        story.static_joins += 1
        story.settle(2, members)
        story.commit_round(members, 200)

        members["A"] = Consumer(d.bootstrap, GROUP, TOPIC).start()
        story.rebalances["new_member"] += 1
        story.joins += 1
        story.settle(3, members)
        story.commit_round(members, 300)

        child = members["C"] = ChildMember(d.bootstrap, GROUP, TOPIC, CHILD_SESSION_TIMEOUT_MS)
        story.rebalances["new_member"] += 1
        story.joins += 1
        story.settle(4, members)
        story.commit_round(members, 400)
        running_export = _export(d, export_dir)  # while the daemon is writing

        # crash: SIGKILL; the session expires
        child.kill()
        del members["C"]
        story.rebalances["session_timeout"] += 1
        story.evictions += 1
        story.settle(5, members)
        story.commit_round(members, 500)

        # static restart within the session timeout: the new member id replaces the old one (fenced), no rebalance
        b = members["static-b"]
        assert isinstance(b, Consumer)
        old_id, old_assignment = b.member_id, b.assignment
        b.close()
        members["static-b"] = b = Consumer(d.bootstrap, GROUP, TOPIC, instance_id="static-b").start()
        story.joins += 1
        story.static_joins += 1
        story.evictions += 1  # the replaced member id is fenced
        wait_for(lambda: b.member_id not in ("", old_id) and b.assignment == old_assignment, 30, "B back")
        story.settle(5, members)
        story.commit_round(members, 600)

        # leave with a KIP-800 reason
        a = members.pop("A")
        assert isinstance(a, Consumer)
        a.close(leave_reason=REASON)
        story.rebalances["member_left"] += 1
        story.leaves += 1
        story.settle(6, members)
        story.commit_round(members, 700)
        lead = members["L"]
        assert isinstance(lead, Consumer)
        first = min(lead.assignment)
        story.commit(lead, {first: 1})  # a rewind
        assert story.rewinds == 1
        assert d.stop() == 0, d.log_text()[-3000:]  # frozen: nothing is written after this
        return running_export
    finally:
        if child is not None:
            child.kill()
        d.kill()
        for m in members.values():
            if isinstance(m, Consumer):
                with contextlib.suppress(AssertionError):  # the daemon is gone: a client may be slow to give up
                    m.close(timeout=10)


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> tuple[Story, Daemon, Path, dict[str, str], dict[str, str]]:
    root = tmp_path_factory.mktemp("report-e2e")
    d = Daemon(root / "daemon", topics=(f"{TOPIC}:6",)).start()
    story = Story(d)
    export_dir = root / "export"
    running = _drive(d, story, export_dir)
    stopped = _export(d, export_dir)
    return story, d, export_dir, running, stopped


def _check(spark: SparkSession, result: ReportResult, story: Story) -> None:
    totals = result.summary["totals"]
    assert totals["groups"] == 1
    assert totals["rebalances"] == sum(story.rebalances.values())
    assert totals["rebalances_by_cause"] == dict(story.rebalances)
    assert totals["rebalances_by_outcome"] == {"stable": sum(story.rebalances.values())}
    assert totals["commit_rewinds"] == story.rewinds
    (group,) = result.summary["groups"]
    assert group["group_id"] == GROUP and group["commits"] == story.commits

    def table(name: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in spark.read.parquet(str(result.tables[name])).collect()]

    changes = sorted(table("assignment_changes"), key=lambda r: r["position"])
    assert any(story.moved()[i][1] for i in range(1, 4))  # the joins moved partitions: the comparison has teeth
    assert [(r["generation_id"], r["partitions_moved"]) for r in changes] == story.moved()
    # The mean share moved is over the five rebalances that assigned, not the static restart's snapshot.
    shares = [n / len(PARTITIONS) for _g, n in story.moved() if n is not None]
    assert len(shares) == 5 and group["avg_moved_share"] == pytest.approx(sum(shares) / len(shares))
    assert all(r["assigned_partitions"] == len(PARTITIONS) for r in changes)
    churn = [r for r in table("member_churn") if r["granularity"] == "day"]
    sums = {k: sum(r[k] for r in churn) for k in ("joins", "static_joins", "leaves", "evictions")}
    assert sums == {
        "joins": story.joins,
        "static_joins": story.static_joins,
        "leaves": story.leaves,
        "evictions": story.evictions,
    }
    episodes = sorted(table("rebalance_episodes"), key=lambda r: r["position"])
    assert [(r["from_generation_id"], r["to_generation_id"]) for r in episodes] == [(g, g + 1) for g in range(6)]


@pytest.fixture(scope="module")
def until_ms(driven: tuple[Story, Daemon, Path, dict[str, str], dict[str, str]]) -> int:
    return int(time.time() * 1000) + 1  # after everything: the daemon is stopped


def test_report_over_jdbc_shows_what_the_clients_did(
    spark: SparkSession, driven: tuple[Story, Daemon, Path, dict[str, str], dict[str, str]], until_ms: int,
    tmp_path: Path, chromium: str,
) -> None:  # fmt: skip
    story, d, _, _, _ = driven
    db = d.workdir / "data" / "coordinator.db"
    result = run_report(spark, f"sqlite:///{db}", tmp_path / "jdbc", ReportConfig(until_ms=until_ms))
    _check(spark, result, story)

    # The HTML report in headless Chromium: four drawn charts, and a screenshot that is not blank.
    dom = run_chromium(chromium, tmp_path / "profile", "--dump-dom", result.report_path.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 4 and "No data in the report range" not in dom.stdout
    assert dom.stdout.count("<circle") >= 1 and dom.stdout.count("<rect") >= 4
    shot = tmp_path / "report.png"
    done = run_chromium(
        chromium, tmp_path / "profile", "--window-size=1100,1600", f"--screenshot={shot}", result.report_path.as_uri()
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50  # text, axes, coloured marks
    background = max(colours)[0]
    assert background < 0.97 * image.width * image.height  # far from one flat colour


def test_report_over_the_parquet_export_shows_the_same(
    spark: SparkSession, driven: tuple[Story, Daemon, Path, dict[str, str], dict[str, str]], until_ms: int,
    tmp_path: Path,
) -> None:  # fmt: skip
    story, _, export_dir, running, stopped = driven
    # The export taken while the daemon ran had the first four rebalances; the second run added only the rest.
    assert running["rebalance_started"].startswith("4 rows")
    assert stopped["rebalance_started"].startswith("2 rows")
    state = json.loads((export_dir / "_export_state.json").read_text())
    first_high = int(running["rebalance_started"].split("..")[1])
    assert stopped["rebalance_started"].endswith(f"{first_high + 1}..{state['last_position']['rebalance_started']}")
    result = run_report(spark, str(export_dir), tmp_path / "parquet", ReportConfig(until_ms=until_ms))
    _check(spark, result, story)
    # The KIP-800 reason travelled from the client to the export.
    left = [r for r in pq.read_table(export_dir / "member_removed").to_pylist() if r["cause"] == "left"]
    assert [r["reason"] for r in left] == [REASON]
