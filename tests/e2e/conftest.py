"""End-to-end fixtures: the real daemon as a subprocess on a free port, with short group timeouts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon import Daemon, free_port, port_open

__all__ = ["Daemon", "free_port", "port_open"]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("daemon")).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"
