"""Burrow 1.2 (Debian's ``burrow``, Sarama inside) against the real daemon: it reads the committed offsets of a group
from ``__consumer_offsets`` and reports them with their lag. Burrow 1.2 keeps its own state in ZooKeeper, so the test
runs a standalone ZooKeeper (Debian's ``zookeeper`` jars, Java). Burrow and ZooKeeper are installed with apt-get when
missing (as tests/chromium.py installs Chromium); without apt-get the test is skipped on a developer machine and
fails under CI (``tests/needs.py``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from glob import glob
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.needs import missing

from .daemon import Daemon, free_port, port_open

pytestmark = pytest.mark.e2e

BURROW = shutil.which("Burrow") or shutil.which("burrow")
JAVA = shutil.which("java")
ZOOKEEPER_JARS = glob("/usr/share/java/zookeeper*.jar")
TOPIC = "bt"
GROUP = "burrow-e2e"


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _install_tools() -> None:
    """Debian's burrow and zookeeper packages, when apt-get is there (waiting for another apt's lock)."""
    global BURROW, ZOOKEEPER_JARS
    apt = shutil.which("apt-get")
    if apt is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=300"]
    subprocess.run([apt, *lock, "update", "-qq"], check=False, env=env, capture_output=True, timeout=900)
    subprocess.run([apt, *lock, "install", "-y", "-qq", "burrow", "zookeeper"], check=False, env=env,
                   capture_output=True, timeout=1500)  # fmt: skip
    BURROW = shutil.which("Burrow") or shutil.which("burrow")
    ZOOKEEPER_JARS = glob("/usr/share/java/zookeeper*.jar")


@pytest.fixture(scope="module")
def tools() -> None:
    if BURROW is None or not ZOOKEEPER_JARS:
        _install_tools()
    if BURROW is None or JAVA is None or not ZOOKEEPER_JARS:
        missing("needs Burrow, Java and ZooKeeper (apt-get install -y burrow zookeeper)")


def _zookeeper_ok(port: int) -> bool:
    """ZooKeeper's "srvr" answers its version once it serves sessions (an open port is too early for Burrow)."""
    if not port_open(port):
        return False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"srvr")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
            return b"Mode: standalone" in answer
    except OSError:
        return False


@pytest.fixture(scope="module")
def zookeeper(tools: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    work = tmp_path_factory.mktemp("zookeeper")
    port = free_port()
    (work / "zoo.cfg").write_text(
        f"tickTime=2000\ndataDir={work / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n4lw.commands.whitelist=srvr\n"
    )
    classpath = ":".join(["/etc/zookeeper/conf", *glob("/usr/share/java/*.jar")])
    with open(work / "zk.log", "wb") as log:
        process = subprocess.Popen(
            [JAVA or "java", "-Xmx128m", "-cp", classpath, "org.apache.zookeeper.server.ZooKeeperServerMain",
             str(work / "zoo.cfg")],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait(lambda: _zookeeper_ok(port) or process.poll() is not None, 60, "ZooKeeper serving")
        assert process.poll() is None, (work / "zk.log").read_text()[-2000:]
        yield port
    finally:
        process.terminate()
        process.wait(15)


@pytest.fixture(scope="module")
def daemon(tools: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("burrow-daemon"), topics=(f"{TOPIC}:2",)).start()
    try:
        yield d
    finally:
        assert d.stop() == 0, d.log_text()[-3000:]


@pytest.fixture(scope="module")
def burrow(zookeeper: int, daemon: Daemon, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("burrow")
    http = free_port()
    kafka = f'servers=["{daemon.bootstrap}"]\nclient-profile="kgc"\n'
    (work / "burrow.toml").write_text(
        f'[general]\npidfile="{work / "burrow.pid"}"\n[logging]\nlevel="info"\n'
        f'[zookeeper]\nservers=["127.0.0.1:{zookeeper}"]\ntimeout=6\nroot-path="/burrow"\n'
        '[client-profile.kgc]\nclient-id="burrow-e2e"\nkafka-version="1.0.0"\n'
        f'[cluster.kgc]\nclass-name="kafka"\n{kafka}topic-refresh=5\noffset-refresh=2\n'
        f'[consumer.kgc]\nclass-name="kafka"\ncluster="kgc"\n{kafka}start-latest=false\ngroup-whitelist=""\n'
        f'[httpserver.default]\naddress="127.0.0.1:{http}"\n'
        '[storage.default]\nclass-name="inmemory"\nworkers=4\nintervals=10\nmin-distance=1\n'
    )
    with open(work / "burrow.log", "wb") as log:
        process = subprocess.Popen(
            [BURROW or "Burrow", "-config-dir", str(work)], cwd=work, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        _wait(lambda: port_open(http) or process.poll() is not None, 30, "Burrow's HTTP listener")
        assert process.poll() is None, (work / "burrow.log").read_text()[-3000:]
        yield f"http://127.0.0.1:{http}"
    finally:
        process.terminate()
        process.wait(15)
        text = (work / "burrow.log").read_text(errors="replace")
        # Burrow 1.2 decodes GroupMetadataValue versions 0-1 only; Kafka (2.3+) writes 3, as we do: it says so
        # and skips those records. Anything else it could not decode would be ours to fix.
        undecoded = [line for line in text.splitlines() if "failed to decode" in line and "value version" not in line]
        assert undecoded == [], undecoded[:5]


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def test_burrow_reads_committed_offsets_from_the_internal_topic(daemon: Daemon, burrow: str) -> None:
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap, enable_idempotence=False)
    for i in range(20):
        producer.send(TOPIC, value=b"m%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=daemon.bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        _wait(lambda: consumer.poll(timeout_ms=200) is not None and len(consumer.assignment()) == 2, 30, "assigned")
        committed = {0: 4, 1: 7}
        for step in (1, 2, 3):  # several commits a little apart: Burrow keeps a window of them
            consumer.commit(
                {TopicPartition(TOPIC, p): OffsetAndMetadata(o - 3 + step, "", -1) for p, o in committed.items()}
            )
            time.sleep(1.1)

        def lag() -> Any:
            try:
                status = get(f"{burrow}/v3/kafka/kgc/consumer/{GROUP}/lag")["status"]
            except Exception:
                return None
            ends = {p["partition"]: p["end"]["offset"] for p in status.get("partitions") or [] if p.get("end")}
            return status if ends == committed else None

        status = _wait(lag, 60, "Burrow to report the committed offsets")
    finally:
        consumer.close()
    assert get(f"{burrow}/v3/kafka/kgc/consumer")["consumers"] == [GROUP]
    assert TOPIC in get(f"{burrow}/v3/kafka/kgc/topic")["topics"]
    assert {p["partition"]: p["current_lag"] for p in status["partitions"]} == {0: 10 - 4, 1: 10 - 7}
    assert Path(daemon.log_path).read_text().count("level=error") == 0
