"""Repeated fixed-rate commit runs against one SQLite daemon (the issue's "p99 in every one of N runs").

    python -m benchmarks.commit_tail --rates 2500,5000 --runs 5 [--max 2] [--json out.json]

The daemon runs under ``taskset -c 0`` on a fresh database, the load on core 1 (one process for the fixed rates, as
``benchmarks.run`` sends them). OffsetCommit v8 of 4 partitions per request, 64 single-member groups: a rate of
2,500 requests/s is 10,000 partition-commits/s. Prints every run's p50/p99/max; no assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import servers
from benchmarks.load import Options
from benchmarks.run import _load


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of each thread of ``pid`` by thread name (the writer thread's name says so)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = "writer" if "sqlite" in name else "main" if task.name == str(pid) else "other"
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", default="2500,5000", help="requests/s, comma-separated (x4 partition-commits/s)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--max", type=int, default=1, help="closed-loop runs after the fixed rates")
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--json", type=Path)
    p.add_argument("--extra", default="", help="extra daemon arguments, space-separated")
    args = p.parse_args(argv)
    servers.pin_self_to_load_core()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kgc-commit-tail-") as tmp:
        srv = servers.daemon(Path(tmp), name="commit-tail", extra=args.extra.split() if args.extra else ())
        try:
            srv.wait_ready()
            for rate in [float(r) for r in args.rates.split(",") if r] + [0.0] * args.max:
                runs = args.runs if rate else 1
                for k in range(runs):
                    tag = f"t{int(rate)}-{k}-{os.getpid()}-"
                    opts = Options(
                        "commit", port=srv.port, groups=64, members=1, partitions=4, rate=rate,
                        duration=args.duration, warmup=1.5, connections=8, window=8, tag=tag,
                    )  # fmt: skip
                    before = thread_cpu(srv.pid)
                    r = _load(opts, f"commit {int(rate) or 'max'}/s run {k + 1}")
                    after = thread_cpu(srv.pid)
                    r.pop("options", None)
                    # CPU per answered request over the whole run (group forming and warm-up included: roughly)
                    answered = max(1, r.get("count", 0))
                    r["cpu_us_per_commit"] = {
                        kind: round((after.get(kind, 0.0) - before.get(kind, 0.0)) / answered * 1e6, 1)
                        for kind in after
                    }
                    results.append({"rate_offered": rate, **r})
        finally:
            srv.stop()
    for r in results:
        print(
            f"{int(r['rate_offered']) or 'max':>6} rate={r.get('rate', 0):8.0f}"
            f" partition-commits/s={r.get('partition_commits_rate', 0):8.0f}"
            f" p50={r.get('p50_ms', -1):6.2f} p99={r.get('p99_ms', -1):7.2f} max={r.get('max_ms', -1):7.2f}"
            f" cpu us/commit={r.get('cpu_us_per_commit')}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
