"""Storage that tells the truth, on the real daemon process (issue #15, part 6).

* ``/readyz`` during a full disk: the SQLite database lives on a small tmpfs that the test fills up. A commit then
  gets COORDINATOR_NOT_AVAILABLE, ``/readyz`` answers 503 with the reason, the failed writes are not logged once
  each, and when space returns the daemon recovers by itself (``/readyz`` 200 through its probe write, then a
  commit succeeds). Needs root (``mount -t tmpfs``); skipped elsewhere, failed under CI.
* One daemon per SQLite database: a second daemon on the same data directory exits non-zero before it opens its
  Kafka port, naming the first one's pid; the first one carries on; after a SIGKILL the restart is not blocked.
* An unwritable ``-shm`` (or database, or ``-wal``): the start fails with a message naming the file. Root ignores
  file modes, so the test makes the file immutable (``chattr +i``), which refuses writes to root too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.daemon import DEFAULT_ARGS, ROOT, Daemon
from tests.e2e.helpers import wait_for
from tests.needs import missing
from tests.server.wire import WireClient, build_request

from .conftest import DAEMON_TOPICS, TOPIC

pytestmark = [pytest.mark.e2e]

COORDINATOR_NOT_AVAILABLE = 15


def readyz(http_url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(http_url + "/readyz", timeout=5) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def commit(daemon: Daemon, group: str, offset: int) -> int:
    """One OffsetCommit v2 of a standalone (simple) consumer for partition 0; the partition's error code."""
    client = WireClient("127.0.0.1", daemon.port)
    try:
        request = build_request(
            8, 2, group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time=timedelta(0),
            topics=[{"name": TOPIC, "partitions": [
                {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}
            ]}],
        )  # fmt: skip
        response = client.call(request)
    finally:
        client.close()
    return int(response.topics[0].partitions[0].error_code)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs (needs root): {done.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Write a file until the file system is full; returns it."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"\0" * 65536
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    return filler


def test_readyz_during_full_disk(tmp_path: Path) -> None:
    # The log file stays on the real disk; only the data directory is the small file system.
    with tmpfs(tmp_path / "data", "16m") as data:
        daemon = Daemon(tmp_path, topics=DAEMON_TOPICS)
        daemon.start()
        try:
            wait_for(lambda: readyz(daemon.http_url)[0] == 200, 30, "ready at start")
            assert commit(daemon, "disk-full", 1) == 0
            filler = fill(data)
            errors = [commit(daemon, "disk-full", 2 + i) for i in range(20)]
            assert errors == [COORDINATOR_NOT_AVAILABLE] * 20, errors
            status, body = readyz(daemon.http_url)
            assert status == 503 and body["ready"] is False, body
            assert "storage writes failing since" in body["detail"], body
            assert "database or disk is full" in body["detail"], body
            assert daemon.process is not None and daemon.process.poll() is None, "the daemon died"

            filler.unlink()  # space returns; no client writes: the readiness probe's own write notices
            wait_for(lambda: readyz(daemon.http_url)[0] == 200, 10, "/readyz 200 once space is back")
            assert "writes succeed" in readyz(daemon.http_url)[1]["detail"]
            assert commit(daemon, "disk-full", 100) == 0
        finally:
            daemon.stop()
    logged = daemon.log_text()
    failed_writes = [line for line in logged.splitlines() if "storage: write of" in line]
    # 20 refused commits: the throttle writes a few lines per cause and a summary, never one per commit.
    assert 1 <= len(failed_writes) <= 5, failed_writes
    assert "level=error" not in logged, logged[-3000:]


def run_to_exit(daemon: Daemon, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Start ``daemon``'s command line in the foreground and wait for it to exit (a start that must fail)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")}
    return subprocess.run(
        daemon.args(), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def stored_offset(daemon: Daemon, group: str) -> int | None:
    with urllib.request.urlopen(f"{daemon.http_url}/v1/groups/{group}/offsets", timeout=5) as resp:
        offsets = json.load(resp)["offsets"]
    return next((o["offset"] for o in offsets if (o["topic"], o["partition"]) == (TOPIC, 0)), None)


def test_second_daemon_on_the_same_database_is_refused(tmp_path: Path) -> None:
    first = Daemon(tmp_path / "first", topics=DAEMON_TOPICS)
    data_dir = first.workdir / "data"
    # The same --data-dir as the first (the last --data-dir on the command line wins).
    second = Daemon(tmp_path / "second", topics=DAEMON_TOPICS, extra_args=(*DEFAULT_ARGS, "--data-dir", str(data_dir)))
    first.start()
    try:
        assert commit(first, "locked", 7) == 0
        assert first.process is not None
        refused = run_to_exit(second)
        output = refused.stdout + refused.stderr
        assert refused.returncode != 0, output
        assert "in use by another coordinator" in output and f"pid {first.process.pid} " in output, output
        assert "kafka listener started" not in output, output  # refused before the Kafka port opened
        assert "level=error" in output and output.count("Traceback") == 0, output
        # The first daemon is untouched and still writes.
        assert commit(first, "locked", 8) == 0
        assert readyz(first.http_url)[0] == 200

        first.kill()  # SIGKILL: the kernel drops the lock with the process; the restart is not blocked
        first.start()
        wait_for(lambda: readyz(first.http_url)[0] == 200, 30, "ready after the restart")
        assert stored_offset(first, "locked") == 8
        assert commit(first, "locked", 9) == 0
    finally:
        first.stop()
    # Once the first daemon has stopped, the second may have the database.
    second.start()
    try:
        wait_for(lambda: readyz(second.http_url)[0] == 200, 30, "second daemon ready once the first stopped")
        assert stored_offset(second, "locked") == 9
    finally:
        second.stop()


def test_unwritable_database_files_fail_the_start(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, topics=DAEMON_TOPICS)
    daemon.start()
    assert commit(daemon, "immutable", 1) == 0
    daemon.kill()  # leaves coordinator.db-wal and -shm behind, as after any crash
    data = tmp_path / "data"
    for target in (data / "coordinator.db-shm", data / "coordinator.db", data / "coordinator.db-wal", data):
        assert target.exists(), sorted(p.name for p in data.iterdir())
        if subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode != 0:
            missing(f"cannot make {target} immutable (chattr +i needs root and a file system that supports it)")
        try:
            refused = run_to_exit(daemon)
        finally:
            subprocess.run(["chattr", "-i", str(target)], check=True)
        output = refused.stdout + refused.stderr
        expected = f"cannot create files in the data directory {data}" if target == data else f"cannot open {target}"
        assert refused.returncode != 0, (target, output)
        assert expected in output and "Operation not permitted" in output, (target, output)
        assert "kafka listener started" not in output and "Traceback" not in output, (target, output)
    # Writable again: the daemon starts and has the commit.
    daemon.start()
    try:
        wait_for(lambda: readyz(daemon.http_url)[0] == 200, 30, "ready once the files are writable")
        assert stored_offset(daemon, "immutable") == 1
    finally:
        daemon.stop()
