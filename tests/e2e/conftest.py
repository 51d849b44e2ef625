"""End-to-end fixtures: the real daemon as a subprocess on a free port, with short group timeouts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    port = free_port()
    log_path = tmp_path_factory.mktemp("daemon") / "kgc.log"
    args = [
        sys.executable, "-m", "coordinator", "serve",
        "--kafka-listen", f"127.0.0.1:{port}",
        "--topic", "e2e6:6",
        "--topic", "e2e2:2",
        "--set", "group.initial.rebalance.delay.ms=200",
        "--set", "group.min.session.timeout.ms=1000",
        "--log-level", "INFO",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    daemon = Daemon(process, port, log_path)
    try:
        wait_for(lambda: _port_open(port) or process.poll() is not None, 20, "daemon listening")
        assert process.poll() is None, f"daemon exited early:\n{daemon.log_text()}"
        yield daemon
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                pytest.fail(f"daemon did not stop on SIGTERM:\n{daemon.log_text()[-3000:]}")
            assert code == 0, f"daemon exit code {code}:\n{daemon.log_text()[-3000:]}"
