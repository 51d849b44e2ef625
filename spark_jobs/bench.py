"""Measure the report on a synthetic history: wall time, CPU seconds and peak memory (RSS of the whole process tree,
JVM included), sampled from /proc; also the lines and WARN lines of its log. Not a test; run it by hand:

    python -m spark_jobs.bench --rows 1000000 --master 'local[2]' --driver-memory 4g --work /tmp/kgc-bench

``--rows`` is the approximate total of log rows; about 88% of them are offset commits (the rest: rebalance history,
snapshots with members and assigned partitions), like a busy cluster's log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .config import HOUR_MS
from .synthetic import START_MS, SyntheticSpec


def _tree_rss_kb(root: int, cpu: dict[int, float] | None = None) -> int:
    """RSS of the process tree under ``root``, in KiB; ``cpu`` gets each process's CPU seconds (user + system)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    ticks: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
                ppid = int(stat[1])
                ticks[int(entry)] = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
            with open(f"/proc/{entry}/statm") as f:
                rss[int(entry)] = int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        if cpu is not None and pid in ticks:
            cpu[pid] = max(cpu.get(pid, 0.0), ticks[pid])
        stack.extend(children.get(pid, []))
    return total


def _written_rows(log: Path) -> int | None:
    match = re.search(r"wrote (\d+) rows", log.read_text()) if log.exists() else None
    return int(match.group(1)) if match else None


CPU_SECONDS: dict[str, float] = {}


def run_measured(cmd: list[str], log_path: Path) -> tuple[float, int, int]:
    """(seconds, peak tree RSS in KiB, exit code); the tree's CPU seconds (sampled every 0.5 s, so a little low)
    go to CPU_SECONDS[log_path.stem]: unlike wall time they hardly depend on what else the machine runs."""
    started = time.monotonic()
    cpu: dict[int, float] = {}
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss_kb(proc.pid, cpu))
            time.sleep(0.5)
    CPU_SECONDS[log_path.stem] = sum(cpu.values())
    return time.monotonic() - started, peak, proc.returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m spark_jobs.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--work", default="/tmp/kgc-spark-bench")
    p.add_argument("--reuse", action="store_true", help="keep an export generated earlier with the same size")
    args = p.parse_args(argv)
    work = Path(args.work)
    export, out = work / f"export-{args.rows}", work / f"out-{args.rows}"
    work.mkdir(parents=True, exist_ok=True)
    # ~136 history rows per rebalance with 6 members and 24 partitions; commits are the rest.
    rebalances = max(int(args.rows * 0.12 / 34 / args.groups), 2)
    commits = args.rows - rebalances * args.groups * 34
    py = sys.executable
    results: dict[str, object] = {
        "rows_requested": args.rows,
        "master": args.master,
        "driver_memory": args.driver_memory,
        "groups": args.groups,
        "rebalances_per_group": rebalances,
        "commits": commits,
    }
    if not (args.reuse and export.exists()):
        gen = [
            py,
            "-m",
            "spark_jobs.synthetic",
            "--out",
            str(export),
            "--groups",
            str(args.groups),
            "--rebalances",
            str(rebalances),
            "--commits",
            str(commits),
        ]
        secs, peak, code = run_measured(gen, work / "generate.log")
        results["generate_seconds"] = round(secs, 1)
        if code != 0:
            print(f"generation failed, see {work / 'generate.log'}", file=sys.stderr)
            return code
    # The report's range ends when it runs by default; the synthetic history is from 2026-01-01, so end the range an
    # hour after its last rebalance instead (the range the report had when it ended at the last stored event).
    until = START_MS + rebalances * SyntheticSpec.period_ms + HOUR_MS
    job = [
        py,
        "-m",
        "spark_jobs.rebalance_report",
        "--source",
        str(export),
        "--out",
        str(out),
        "--master",
        args.master,
        "--driver-memory",
        args.driver_memory,
        "--until",
        str(until),
    ]
    secs, peak, code = run_measured(job, work / "report.log")
    if code != 0:
        print(f"report failed, see {work / 'report.log'}", file=sys.stderr)
        return code
    summary = json.loads((out / "summary.json").read_text())
    log_text = (work / "report.log").read_text()
    results.update(
        report_seconds=round(secs, 1),
        report_cpu_seconds=round(CPU_SECONDS["report"], 1),
        log_lines=len(log_text.splitlines()),
        warn_lines=sum(" WARN " in line for line in log_text.splitlines()),
        peak_rss_mib=round(peak / 1024),
        log_rows=_written_rows(work / "generate.log"),
        rebalances=summary["totals"]["rebalances"],
        rewinds=summary["totals"]["commit_rewinds"],
    )
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
