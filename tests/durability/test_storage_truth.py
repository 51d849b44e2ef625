"""Storage that tells the truth, on the real daemon process (issue #15, part 6).

* ``/readyz`` during a full disk: the SQLite database lives on a small tmpfs that the test fills up. A commit then
  gets COORDINATOR_NOT_AVAILABLE, ``/readyz`` answers 503 with the reason, the failed writes are not logged once
  each, and when space returns the daemon recovers by itself (``/readyz`` 200 through its probe write, then a
  commit succeeds). Needs root (``mount -t tmpfs``); skipped elsewhere, failed under CI.
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

from tests.e2e.daemon import Daemon
from tests.e2e.helpers import wait_for
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


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        _skip_or_fail(f"cannot mount a tmpfs (needs root): {done.stderr.decode(errors='replace').strip()}")
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
