"""The real daemon as a subprocess: start, stop (SIGTERM), kill (SIGKILL) and restart on the same database."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]

DEFAULT_ARGS = (
    "--set", "group.initial.rebalance.delay.ms=200",
    "--set", "group.min.session.timeout.ms=1000",
)  # fmt: skip


def free_port() -> int:
    """A port that is free now, below the kernel's ephemeral range (32768-60999 here). A port the kernel handed out
    for ``bind(0)`` is in that range, so between our probe and the daemon's bind any outgoing connection of the test
    run (the fuzzer alone opens 100,000s) could take it as its local port; ports below the range are never given to
    outgoing connections, so only another test's explicit bind can collide, and the random pick makes that rare."""
    low, high = _PRIVATE_PORTS
    for _ in range(200):
        port = random.randrange(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}-{high}")


_PRIVATE_PORTS = (20_000, 32_768)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class Daemon:
    """One daemon configuration; ``start()`` may be called again after ``stop()``/``kill()`` (same ports, same DB)."""

    workdir: Path
    topics: tuple[str, ...] = ("e2e6:6", "e2e2:2")
    storage_url: str | None = None  # None: SQLite under workdir/data
    extra_args: tuple[str, ...] = DEFAULT_ARGS
    env_extra: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "kgc.log"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def args(self) -> list[str]:
        args = [
            sys.executable, "-m", "daemon", "serve",
            "--kafka-listen", f"127.0.0.1:{self.port}",
            "--http-listen", f"127.0.0.1:{self.http_port}",
            "--data-dir", str(self.workdir / "data"),
            "--log-level", "INFO",
        ]  # fmt: skip
        if self.storage_url:
            args += ["--storage-url", self.storage_url]
        for topic in self.topics:
            args += ["--topic", topic]
        return args + list(self.extra_args)

    def start(self, timeout: float = 30) -> Daemon:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")}
        env.update(self.env_extra)
        with open(self.log_path, "ab") as log:
            log.write(f"--- start #{self.starts + 1}\n".encode())
            log.flush()
            self.process = subprocess.Popen(self.args(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.starts += 1
        process = self.process
        wait_for(lambda: port_open(self.port) or process.poll() is not None, timeout, "daemon listening")
        assert process.poll() is None, f"daemon exited early:\n{self.log_text()[-3000:]}"
        return self

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM and wait; returns the exit code (fails loudly if it hangs)."""
        process = self.process
        if process is None or process.poll() is not None:
            return process.returncode if process is not None else 0
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"daemon did not stop on SIGTERM:\n{self.log_text()[-3000:]}") from None

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye (a crash)."""
        process = self.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
