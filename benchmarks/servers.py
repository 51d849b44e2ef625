"""Start the daemon, the lean baseline or our bare listener as a child pinned to one core, wait until it answers,
stop it."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.client import wait_for_port

SERVER_CORE = "0"
LOAD_CORE = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pin_self_to_load_core() -> None:
    """The runner and the load workers it forks run on the core the server does not use."""
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {LOAD_CORE})


class Server:
    def __init__(self, argv: Sequence[str], port: int, log_path: Path, *, pin_core: bool = True) -> None:
        self.port = port
        self.log_path = log_path
        pinnable = pin_core and shutil.which("taskset") and (os.cpu_count() or 1) > 1
        pin = ["taskset", "-c", SERVER_CORE] if pinnable else []
        self.log = open(log_path, "w")  # noqa: SIM115
        env = {**os.environ, "KGC_LOG__LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}
        self.started = time.monotonic()
        self.proc = subprocess.Popen([*pin, sys.executable, *argv], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.ready_seconds = 0.0

    @property
    def pid(self) -> int:
        return self.proc.pid  # taskset execs the program: same pid

    def wait_ready(self, timeout_s: float = 120.0) -> float:
        """Seconds from spawning the process to its first answered ApiVersions."""
        asyncio.run(wait_for_port("127.0.0.1", self.port, timeout_s))
        self.ready_seconds = time.monotonic() - self.started
        if self.proc.poll() is not None:
            raise RuntimeError(f"server exited: see {self.log_path}")
        return self.ready_seconds

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def daemon(
    work: Path,
    *,
    storage_url: str | None = None,
    data_dir: Path | None = None,
    delay_ms: int = 100,
    partitions: int = 64,
    extra: Sequence[str] = (),
    name: str = "daemon",
    pin_core: bool = True,
) -> Server:
    port = free_port()
    argv = [
        "-m",
        "daemon",
        "serve",
        "--kafka-listen",
        f"127.0.0.1:{port}",
        "--http-listen",
        f"127.0.0.1:{free_port()}",
        "--topic",
        f"bench:{partitions}",
        "--set",
        f"group.initial.rebalance.delay.ms={delay_ms}",
        "--log-level",
        "WARNING",
    ]
    if storage_url:
        argv += ["--storage-url", storage_url]
    argv += ["--data-dir", str(data_dir or work / f"{name}-data")]
    argv += list(extra)
    return Server(argv, port, work / f"{name}.log", pin_core=pin_core)


def bare(work: Path, *, pin_core: bool = True) -> Server:
    port = free_port()
    argv = ["-m", "benchmarks.bare_server", "--listen", f"127.0.0.1:{port}"]
    return Server(argv, port, work / "bare.log", pin_core=pin_core)


def lean(work: Path, *, pin_core: bool = True) -> Server:
    """The independent lean baseline (``benchmarks/lean_server.py``: no code of the daemon)."""
    port = free_port()
    argv = ["-m", "benchmarks.lean_server", "--listen", f"127.0.0.1:{port}"]
    return Server(argv, port, work / "lean.log", pin_core=pin_core)
