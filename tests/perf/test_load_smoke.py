"""Smoke test of the load generator (benchmarks/): every scenario runs against the real daemon and the bare server
at toy sizes and reports results without errors. It records no timing claim; the numbers live in
docs/performance.md (``python -m benchmarks.run``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import load, servers
from benchmarks.load import Options

from .scenarios import check, served


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Server]:
    work = tmp_path_factory.mktemp("daemon")
    yield from served(servers.daemon(work, storage_url="memory", delay_ms=50, pin_core=False))


def test_heartbeat_closed_and_open_loop(daemon: servers.Server) -> None:
    base = Options(
        "heartbeat",
        port=daemon.port,
        workers=2,
        groups=4,
        members=3,
        connections=2,
        window=4,
        duration=1.0,
        warmup=0.2,
        tag="smoke-",
    )
    result = load.run(base)
    check(result)
    assert result["members"] == 12
    assert isinstance(result["count"], int) and result["count"] > 0
    assert result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
    fixed = load.run(Options(**{**vars(base), "rate": 200.0, "tag": "smoke-r-"}))
    check(fixed)
    assert isinstance(fixed["count"], int) and fixed["count"] > 0


def test_commit(daemon: servers.Server) -> None:
    result = load.run(
        Options(
            "commit",
            port=daemon.port,
            workers=1,
            groups=2,
            members=1,
            partitions=3,
            connections=2,
            window=2,
            duration=1.0,
            warmup=0.2,
            tag="smoke-",
        )
    )
    check(result)
    assert isinstance(result["count"], int) and result["count"] > 0
    assert result["partition_commits_rate"] == result["rate"] * 3


def test_rebalance_and_scale(daemon: servers.Server) -> None:
    rebalance = load.run(Options("rebalance", port=daemon.port, workers=2, members=5, delay_ms=50, tag="smoke-"))
    check(rebalance)
    assert rebalance["members"] == 5 and rebalance["join_requests"] >= 5
    scale = load.run(
        Options("scale", port=daemon.port, workers=1, groups=3, members=2, connections=2, pid=daemon.pid, tag="smoke-")
    )
    check(scale)
    assert scale["members"] == 6 and isinstance(scale["VmRSS"], int) and scale["VmRSS"] > 0


def test_bare_server_answers_the_same_scenarios(tmp_path: Path) -> None:
    srv = servers.bare(tmp_path, pin_core=False)
    try:
        srv.wait_ready(60)
        result = load.run(
            Options(
                "commit",
                port=srv.port,
                workers=1,
                groups=2,
                members=2,
                partitions=2,
                connections=2,
                window=2,
                duration=0.5,
                warmup=0.1,
                tag="smoke-",
            )
        )
        check(result)
        assert isinstance(result["count"], int) and result["count"] > 0
        heartbeat = load.run(
            Options("heartbeat", port=srv.port, workers=1, groups=2, members=2, connections=2, window=2,
                    duration=0.5, warmup=0.1, tag="smoke-hb-")
        )  # fmt: skip
        check(heartbeat)  # answered in place by the listener (BareServer.heartbeat)
        assert isinstance(heartbeat["count"], int) and heartbeat["count"] > 0
    finally:
        srv.stop()
