"""What the load-generator smoke tests share: a benchmark server started for a module, and the check of a result."""

from __future__ import annotations

from collections.abc import Iterator

from benchmarks import servers


def served(srv: servers.Server) -> Iterator[servers.Server]:
    """``srv`` once it answers, stopped after the tests that use it (the body of a module fixture)."""
    try:
        srv.wait_ready(60)
        yield srv
    finally:
        srv.stop()


def check(result: dict[str, object]) -> None:
    """A load run that completed without a protocol error."""
    assert "error" not in result, result.get("error")
    assert result["errors"] == 0, result
