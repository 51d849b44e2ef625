"""Smoke test of ``benchmarks.instructions``: the in-process exchange it counts (join, rejoin, sync, heartbeat of
every member, through the real daemon's connections, adapters, core and storage) completes without an error answer
on both storages. The instruction counts themselves need valgrind and are benchmark numbers, not asserted here."""

from __future__ import annotations

import pytest

from benchmarks import instructions


@pytest.mark.parametrize(("storage", "counted"), [("memory", "join1"), ("sqlite", "sync")])
def test_the_counted_exchange_completes(storage: str, counted: str) -> None:
    assert instructions.main(["--inner", counted, "--members", "10", "--storage", storage]) == 0


def test_a_refused_sync_fails_the_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    # A SyncGroup for a generation that does not exist is refused (ILLEGAL_GENERATION): the probe must notice.
    real = instructions.sync_frame
    monkeypatch.setattr(instructions, "sync_frame", lambda g, gen, m, a: real(g, gen + 1, m, a))
    with pytest.raises(RuntimeError, match="SyncGroup errors: \\[22\\]"):
        instructions.main(["--inner", "none", "--members", "5", "--storage", "memory"])


def test_a_refused_heartbeat_fails_the_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    real = instructions.heartbeat_frame
    monkeypatch.setattr(instructions, "heartbeat_frame", lambda g, gen, m: real(g, gen, m + "-unknown"))
    with pytest.raises(RuntimeError, match="Heartbeat errors: \\[25\\]"):
        instructions.main(["--inner", "none", "--members", "5", "--storage", "memory"])
