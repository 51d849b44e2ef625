"""Smoke test of ``benchmarks.member_memory``: the probe forms its groups through the real daemon (join, rejoin,
sync of every member over one in-memory connection a group) on both storages and reports bytes per member; the byte
figures are benchmark numbers (benchmarks/notes.md), not asserted here."""

from __future__ import annotations

import json

import pytest

from benchmarks import member_memory


@pytest.mark.parametrize(("storage", "extra"), [("memory", ["--tracemalloc", "3"]), ("sqlite", [])])
def test_the_probe_forms_every_group(storage: str, extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert member_memory.main(["--groups", "3", "--members", "4", "--storage", storage, *extra]) == 0
    first, *top = capsys.readouterr().out.splitlines()
    result = json.loads(first)
    assert (result["groups"], result["members"], result["storage"]) == (3, 12, storage)
    assert "bytes_per_member" in result
    assert len(top) == (3 if extra else 0)
