"""The independent lean baseline (benchmarks/lean_server.py): it shares no code with the daemon, and it answers
what the benchmark scenarios send, with the right errors for members it does not know. No timing is asserted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import client as c
from benchmarks import load, servers
from benchmarks.load import Options

from .scenarios import check, served

OURS = ("protocol", "coordinator", "broker", "security", "storage", "runtime", "servers", "daemon", "spark_jobs")


def test_the_lean_server_imports_no_code_of_the_daemon() -> None:
    code = "import sys, benchmarks.lean_server; print(' '.join(sorted(sys.modules)))"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    loaded = done.stdout.split()
    assert "benchmarks.lean_server" in loaded
    ours = sorted(
        m for m in loaded if m.split(".")[0] in OURS or (m.startswith("benchmarks.") and m != "benchmarks.lean_server")
    )
    assert ours == []


@pytest.fixture(scope="module")
def lean(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    yield from served(servers.lean(tmp_path_factory.mktemp("lean"), pin_core=False))


def test_heartbeat_and_commit_scenarios(lean: servers.Server) -> None:
    common = {"port": lean.port, "workers": 1, "connections": 2, "window": 2, "duration": 0.5, "warmup": 0.1}
    heartbeat = load.run(Options("heartbeat", groups=3, members=3, tag="lean-hb-", **common))  # type: ignore[arg-type]
    check(heartbeat)
    assert heartbeat["members"] == 9 and isinstance(heartbeat["count"], int) and heartbeat["count"] > 0
    commit = load.run(Options("commit", groups=2, members=1, partitions=3, tag="lean-c-", **common))  # type: ignore[arg-type]
    check(commit)
    assert isinstance(commit["count"], int) and commit["count"] > 0


def test_unknown_members_and_old_generations_are_refused(lean: servers.Server) -> None:
    async def scenario() -> tuple[int, int, int, int]:
        conn = await c.connect("127.0.0.1", lean.port)
        try:
            member_id, generation = await c.form_member(conn, "lean-errors", 10_000, 10_000)
            ok = await c.heartbeat_once(conn, c.Member("lean-errors", member_id, generation, 0))
            old = await c.heartbeat_once(conn, c.Member("lean-errors", member_id, generation + 1, 0))
            stranger = await c.heartbeat_once(conn, c.Member("lean-errors", "nobody", generation, 0))
            no_group = await c.heartbeat_once(conn, c.Member("no-such-group", member_id, generation, 0))
            return ok, old, stranger, no_group
        finally:
            conn.close()

    assert asyncio.run(scenario()) == (0, c.ILLEGAL_GENERATION, c.UNKNOWN_MEMBER_ID, c.UNKNOWN_MEMBER_ID)
