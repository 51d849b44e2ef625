"""Consumer lag end to end: the real daemon (SQLite), a backlog produced by kafka-python, a kafka-python group that
commits part of it, and the same lag - in messages and in time - in the HTTP API, the CLI (``kgc groups describe
--offsets``, run as its own process), ``/metrics`` and the dashboard (headless Chromium); then offset resets on the
real log once the group is Empty.

Times: the broker stamps each batch with its append time, which we cannot read from the client (CreateTime topic),
so each backlog is bracketed by the wall clock before and after it is produced; the lag in time the daemon reports
must fall in the interval those brackets allow (seconds wide at most), nothing tighter."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.cdp import Browser
from tests.chromium import ensure_chromium

from .daemon import ROOT, Daemon
from .helpers import wait_for

pytestmark = pytest.mark.e2e

TOPIC = "lagged"
GROUP = "lagging"


def get(daemon: Daemon, path: str) -> Any:
    with urllib.request.urlopen(daemon.http_url + path, timeout=10) as r:
        body = r.read().decode()
    return body if path == "/metrics" else json.loads(body)


def produce(producer: KafkaProducer, partition: int, count: int) -> tuple[int, int]:
    """``count`` messages to the partition, acknowledged (acks=all: durable); the wall-clock bracket around them."""
    before = int(time.time() * 1000)
    futures = [producer.send(TOPIC, value=b"m%d" % i, partition=partition) for i in range(count)]
    producer.flush()
    for f in futures:
        f.get(timeout=10)
    return before, int(time.time() * 1000)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("lag"), topics=(f"{TOPIC}:3",)).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"


def test_the_same_lag_in_the_api_the_cli_the_metrics_and_the_dashboard(daemon: Daemon, tmp_path: Path) -> None:
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap, enable_idempotence=False, acks="all", linger_ms=50)
    try:
        batch_a = produce(producer, 0, 10)  # offsets 0-9
        time.sleep(1.5)  # the two backlogs' append times must be told apart
        batch_b = produce(producer, 0, 10)  # offsets 10-19
        produce(producer, 1, 5)  # offsets 0-4
    finally:
        producer.close()

    consumer = KafkaConsumer(bootstrap_servers=daemon.bootstrap, group_id=GROUP, enable_auto_commit=False,
                             client_id="lag-e2e")  # fmt: skip
    try:
        consumer.subscribe([TOPIC])
        wait_for(lambda: bool(consumer.poll(timeout_ms=200) is not None and consumer.assignment()), 30, "assignment")
        tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
        consumer.commit({tp0: OffsetAndMetadata(5, "", -1), tp1: OffsetAndMetadata(5, "", -1)})

        # -------------------------------------------------------------------------------------------- HTTP API
        lag = get(daemon, f"/v1/groups/{GROUP}/lag")
        rows = {p["partition"]: p for p in lag["partitions"]}
        assert set(rows) == {0, 1, 2}
        member = rows[0]["member_id"]
        assert member and all(p["member_id"] == member and p["client_id"] == "lag-e2e" for p in rows.values())
        assert [(rows[p]["committed_offset"], rows[p]["log_end_offset"], rows[p]["lag"]) for p in (0, 1, 2)] == [
            (5, 20, 15), (5, 5, 0), (None, 0, None)
        ]  # fmt: skip
        assert rows[1]["lag_ms"] == 0 and rows[2]["lag_ms"] is None
        appended_a = lag["now_ms"] - rows[0]["lag_ms"]  # the append time of the batch holding offset 5
        assert batch_a[0] - 1_000 <= appended_a <= batch_a[1] + 1_000  # generous: clocks of two processes
        assert appended_a < batch_b[0]
        assert lag["total_lag"] == 15 and lag["max_lag_ms"] == rows[0]["lag_ms"]
        detail = get(daemon, f"/v1/groups/{GROUP}")
        assert [p["lag"] for p in detail["lag"]["partitions"]] == [15, 0, None]
        assert detail["lag"]["now_ms"] - detail["lag"]["partitions"][0]["lag_ms"] == appended_a  # same batch time
        (listed,) = [g for g in get(daemon, "/v1/lag")["groups"] if g["group"] == GROUP]
        assert (listed["total_lag"], listed["max_lag"], listed["partitions"]) == (15, 15, 3)

        # ------------------------------------------------------------------------------------------------- CLI
        before = int(time.time() * 1000)
        done = subprocess.run(
            [sys.executable, "-m", "daemon", "groups", "describe", GROUP, "--offsets", "--url", daemon.http_url],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        after = int(time.time() * 1000)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                    "CONSUMER-ID", "HOST", "CLIENT-ID", "TIME-LAG"]  # fmt: skip
        cli = {int(r[2]): r for r in (line.split() for line in lines[1:])}
        assert [cli[p][3:6] for p in (0, 1, 2)] == [["5", "20", "15"], ["5", "5", "0"], ["-", "0", "-"]]
        assert {cli[p][6] for p in cli} == {member} and cli[1][9] == "0.000s" and cli[2][9] == "-"
        seconds = float(cli[0][9].removesuffix("s"))
        assert (before - appended_a) / 1000 - 0.001 <= seconds <= (after - appended_a) / 1000 + 0.001

        # --------------------------------------------------------------------------------------------- metrics
        before = int(time.time() * 1000)
        text = get(daemon, "/metrics")
        after = int(time.time() * 1000)
        series = {
            (s.name, s.labels.get("group"), s.labels.get("partition")): (s.value, s.labels)
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        value, labels = series[("kafka_consumergroup_group_lag", GROUP, "0")]
        assert value == 15 and labels["consumer_id"] == member and labels["client_id"] == "lag-e2e"
        assert series[("kafka_consumergroup_group_lag", GROUP, "1")][0] == 0
        seconds = series[("kafka_consumergroup_group_lag_seconds", GROUP, "0")][0]
        assert (before - appended_a) / 1000 - 0.001 <= seconds <= (after - appended_a) / 1000 + 0.001
        assert series[("kafka_consumergroup_group_sum_lag", GROUP, None)][0] == 15
        assert series[("kafka_consumergroup_group_max_lag", GROUP, None)][0] == 15
        assert series[("kafka_partition_latest_offset", None, "0")][0] == 20

        # ------------------------------------------------------------------------------------------- dashboard
        with Browser(ensure_chromium(), tmp_path / "profile") as page:
            page.navigate(f"{daemon.http_url}/?refresh=500#/group/{GROUP}")
            page.wait_for("document.querySelectorAll('#offsets-body tr[data-tp]').length === 3", what="lag rows")
            shown = page.evaluate(
                "Object.fromEntries([...document.querySelectorAll('#offsets-body tr[data-tp]')].map(r => [r.dataset.tp,"
                " [r.querySelector('.lag').dataset.lag, r.querySelector('.time-lag').dataset.ms,"
                " r.querySelector('.owner').dataset.owner]]))"
            )
            shown_ms = int(shown[f"{TOPIC}/0"][1])
            assert [shown[f"{TOPIC}/{p}"][0] for p in (0, 1, 2)] == ["15", "0", ""]
            assert {v[2] for v in shown.values()} == {member}
            assert shown_ms > 0 and shown[f"{TOPIC}/1"][1] == "0"
            page.navigate(f"{daemon.http_url}/?refresh=500#/")
            page.wait_for(f"document.querySelector('tr[data-group=\"{GROUP}\"] td.lag')", what="the groups list")
            assert page.evaluate(f"document.querySelector('tr[data-group=\"{GROUP}\"] td.lag').dataset.lag") == "15"
        assert int(time.time() * 1000) - appended_a >= shown_ms >= rows[0]["lag_ms"]  # later than the API's view

        # A commit into the second backlog: its batch's append time.
        consumer.commit({tp0: OffsetAndMetadata(12, "", -1)})
        lag = get(daemon, f"/v1/groups/{GROUP}/lag")
        p0 = lag["partitions"][0]
        assert p0["lag"] == 8
        assert batch_b[0] - 1_000 <= lag["now_ms"] - p0["lag_ms"] <= batch_b[1] + 1_000
    finally:
        consumer.close()  # LeaveGroup: the group is Empty, so its offsets can be reset

    # ------------------------------------------------------------------------------- resets on the real log
    def reset(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "daemon", "groups", "reset-offsets", GROUP, "--topic", f"{TOPIC}:0", *args,
             "--url", daemon.http_url, "--export"],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    between = (batch_a[1] + batch_b[0]) // 2  # after every CreateTime of the first backlog, before the second's
    assert reset("--to-earliest") == f"{TOPIC},0,0"
    assert reset("--to-latest") == f"{TOPIC},0,20"
    assert reset("--to-offset", "1000") == f"{TOPIC},0,20"  # clamped to the log end
    assert reset("--shift-by", "-100") == f"{TOPIC},0,0"  # clamped to the log start
    assert reset("--to-datetime", str(between)) == f"{TOPIC},0,10"  # ListOffsets by timestamp: the second backlog
    assert reset("--to-latest", "--execute") == f"{TOPIC},0,20"
    assert get(daemon, f"/v1/groups/{GROUP}/lag")["partitions"][0]["lag"] == 0
