"""Burrow's evaluation of a real consumer group against the real daemon: a kafka-python consumer that commits while
it consumes is OK; committing the same offset while a producer goes on is STALL; no commit at all while the
producer goes on is STOP; catching up makes it OK again. Read through GET /v1/groups/{group}/status, the group list,
/metrics and ``kgc groups status``."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer

from .daemon import ROOT, Daemon
from .helpers import wait_for

pytestmark = pytest.mark.e2e

TOPIC = "burrow"
GROUP = "burrow-g"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    # A short window (5 commits) and a short "caught up recently" grace, so that STOP comes within seconds.
    env = {"KGC_LAG__INTERVALS": "5", "KGC_LAG__RECENT_ZERO_LAG_MS": "500"}
    d = Daemon(tmp_path_factory.mktemp("burrow"), topics=(f"{TOPIC}:1",), env_extra=env).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"


def get(daemon: Daemon, path: str) -> Any:
    with urllib.request.urlopen(daemon.http_url + path, timeout=10) as resp:
        body = resp.read()
    return body.decode() if path == "/metrics" else json.loads(body)


def status(daemon: Daemon) -> dict[str, Any]:
    result: dict[str, Any] = get(daemon, f"/v1/groups/{GROUP}/status?all=true")
    return result


def partition_status(daemon: Daemon) -> str:
    [p] = status(daemon)["partitions"]
    return str(p["status"])


def test_ok_then_stall_then_stop_then_ok_again(daemon: Daemon) -> None:
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap, enable_idempotence=False, acks="all")
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=daemon.bootstrap, group_id=GROUP, auto_offset_reset="earliest",
        enable_auto_commit=False,
    )  # fmt: skip
    produced = 0

    def produce(n: int) -> None:
        nonlocal produced
        for _ in range(n):
            producer.send(TOPIC, b"m-%d" % produced)
            produced += 1
        producer.flush()

    consumed = 0

    def consume_all() -> None:
        nonlocal consumed

        def caught_up() -> bool:
            nonlocal consumed
            consumed += sum(len(msgs) for msgs in consumer.poll(timeout_ms=200).values())
            return consumed >= produced

        wait_for(caught_up, 30, "the consumer to read everything produced")

    try:
        # OK: it consumes what is produced and commits each time.
        for _ in range(6):
            produce(5)
            consume_all()
            consumer.commit()
        body = status(daemon)
        assert body["status"] == "OK" and body["totallag"] == 0 and body["complete"] == 1.0
        [p] = body["partitions"]
        assert p["end"]["offset"] == produced and p["end"]["lag"] == 0 and p["current_lag"] == 0

        # STALL: it goes on committing, the same offset, while the producer goes on.
        stalled_at = produced

        def commit_without_consuming() -> bool:
            produce(1)
            consumer.commit()  # the consumed position has not moved
            return partition_status(daemon) == "STALL"

        wait_for(commit_without_consuming, 30, "STALL", interval=0.1)
        body = status(daemon)
        assert body["status"] == "ERR" and body["partitions"][0]["end"]["offset"] == stalled_at
        assert body["totallag"] == produced - stalled_at

        # STOP: no commit any more, and the producer goes on.
        def produce_only() -> bool:
            produce(1)
            return partition_status(daemon) == "STOP"

        wait_for(produce_only, 30, "STOP", interval=0.2)
        assert status(daemon)["status"] == "ERR"
        listed = get(daemon, "/v1/groups")
        assert {g["group_id"]: g["status"] for g in listed["groups"]}[GROUP] == "ERR"
        assert f'kgc_group_status{{group="{GROUP}",status="ERR"}} 1.0' in get(daemon, "/metrics")
        cli = subprocess.run(
            [sys.executable, "-m", "daemon", "groups", "status", GROUP, "--url", daemon.http_url],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert "Status:   ERR" in cli.stdout and "STOP" in cli.stdout

        # Caught up: it reads the rest and commits; nothing is produced any more.
        consume_all()
        consumer.commit()
        body = status(daemon)
        assert (body["status"], body["totallag"], body["partitions"][0]["status"]) == ("OK", 0, "OK")
        assert f'kgc_group_status{{group="{GROUP}",status="OK"}} 1.0' in get(daemon, "/metrics")
    finally:
        consumer.close()
        producer.close()
    assert " ERROR " not in daemon.log_text() and "level=ERROR" not in daemon.log_text()
