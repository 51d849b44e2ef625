"""Measure the real daemon's start-up on an existing database: process start -> Kafka port open -> /readyz true.

A script, not a test (timings belong in benchmarks). Typical use, on the database ``benchmarks.bench_load`` generates:

    python -m benchmarks.bench_load --data-dir /tmp/kgc-bench --keep
    python -m tests.durability.startup_time --data-dir /tmp/kgc-bench [--runs 3] [--storage-url URL]

Each run starts ``python -m daemon serve`` on free ports, polls every 10 ms, records both times and the daemon's CPU
time when /readyz first says true (``/proc/PID/stat``: on a shared host the wall times say more about the neighbours),
then stops the daemon with SIGTERM (shutdown time is reported too). The daemon writes to its database (it claims it,
an offset commit would land there): point it at a copy of a database you want to keep as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.e2e.daemon import ROOT, free_port, port_open


def readyz(http_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz", timeout=1) as resp:
            return bool(json.load(resp)["ready"])
    except (OSError, ValueError):
        return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads), from ``/proc/PID/stat``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(data_dir: Path, storage_url: str | None, log_path: Path, timeout_s: float) -> dict[str, float]:
    port, http_port = free_port(), free_port()
    args = [
        sys.executable, "-m", "daemon", "serve",
        "--kafka-listen", f"127.0.0.1:{port}",
        "--http-listen", f"127.0.0.1:{http_port}",
        "--data-dir", str(data_dir),
        "--log-level", "WARNING",
    ]  # fmt: skip
    if storage_url:
        args += ["--storage-url", storage_url]
    with open(log_path, "ab") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    result: dict[str, float] = {}
    try:
        while time.monotonic() - t0 < timeout_s:
            if proc.poll() is not None:
                raise SystemExit(f"daemon exited with {proc.returncode}; see {log_path}")
            if "port_open_s" not in result and port_open(port):
                result["port_open_s"] = time.monotonic() - t0
            if "port_open_s" in result and readyz(http_port):
                result["ready_s"] = time.monotonic() - t0
                result["cpu_s"] = cpu_seconds(proc.pid)
                break
            time.sleep(0.01)
        else:
            raise SystemExit(f"not ready after {timeout_s}s; see {log_path}")
    finally:
        t1 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        result["stop_s"] = time.monotonic() - t1
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="directory holding coordinator.db (SQLite)")
    parser.add_argument("--storage-url", default=None, help="a PostgreSQL URL instead of the SQLite file")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    opts = parser.parse_args()
    log_path = Path("/tmp") / "kgc-startup-time.log"
    runs = [one_run(opts.data_dir, opts.storage_url, log_path, opts.timeout) for _ in range(opts.runs)]
    for i, r in enumerate(runs, 1):
        print(
            f"run {i}: port open {r['port_open_s']:.2f}s, /readyz true {r['ready_s']:.2f}s "
            f"(daemon CPU {r['cpu_s']:.2f}s), stop {r['stop_s']:.2f}s"
        )
    print(
        f"median: port open {statistics.median(r['port_open_s'] for r in runs):.2f}s, "
        f"ready {statistics.median(r['ready_s'] for r in runs):.2f}s, "
        f"daemon CPU {statistics.median(r['cpu_s'] for r in runs):.2f}s (daemon log: {log_path})"
    )


if __name__ == "__main__":
    main()
