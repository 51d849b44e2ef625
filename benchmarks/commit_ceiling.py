"""The ceiling of durable offset commits on this disk: a bare SQLite writer with none of the daemon's code.

    python -m benchmarks.commit_ceiling [--seconds 5] [--requests-per-txn 16,64,256] [--core 0]

One thread, the stdlib ``sqlite3``, a schema of its own with the rows a durable commit needs and nothing else: every
commit of a partition one history row (indexed by group and time, as the daemon's ``offset_commits``) and one upsert
of the partition's current offset. WAL with ``synchronous=FULL`` (a committed transaction survives power loss), the
transaction groups ``requests-per-txn`` OffsetCommit requests of 4 partitions of 64 groups, the rows bound as
prebuilt tuples, one multi-row statement per table. No network, no parsing, no coordinator: what SQLite and the disk
allow on one core for these rows, the number the daemon's partition-commits/s is measured against
(``benchmarks.run``'s commit scenario). Prints one JSON line per grouping.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

GROUPS = 64
PARTITIONS = 4
SCHEMA = (
    "CREATE TABLE history (id INTEGER PRIMARY KEY, grp TEXT NOT NULL, topic TEXT NOT NULL, part INTEGER NOT NULL, "
    "off INTEGER NOT NULL, epoch INTEGER NOT NULL, meta TEXT NOT NULL, ts INTEGER NOT NULL, member TEXT NOT NULL, "
    "gen INTEGER NOT NULL)",
    "CREATE INDEX history_by_group ON history (grp, ts, id)",
    "CREATE TABLE current (grp TEXT NOT NULL, topic TEXT NOT NULL, part INTEGER NOT NULL, off INTEGER NOT NULL, "
    "epoch INTEGER NOT NULL, meta TEXT NOT NULL, ts INTEGER NOT NULL, member TEXT NOT NULL, gen INTEGER NOT NULL, "
    "PRIMARY KEY (grp, topic, part))",
)


def run(path: Path, per_txn: int, seconds: float) -> dict[str, Any]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    for sql in SCHEMA:
        conn.execute(sql)
    rows = per_txn * PARTITIONS
    insert = "INSERT INTO history (grp, topic, part, off, epoch, meta, ts, member, gen) VALUES " + ",".join(
        ["(?,?,?,?,?,?,?,?,?)"] * rows
    )
    upserts: dict[int, str] = {}

    def upsert(k: int) -> str:
        if k not in upserts:
            upserts[k] = (
                "INSERT INTO current (grp, topic, part, off, epoch, meta, ts, member, gen) VALUES "
                + ",".join(["(?,?,?,?,?,?,?,?,?)"] * k)
                + " ON CONFLICT (grp, topic, part) DO UPDATE SET off = excluded.off, epoch = excluded.epoch, "
                "meta = excluded.meta, ts = excluded.ts, member = excluded.member, gen = excluded.gen"
            )
        return upserts[k]

    members = [f"consumer-{g}-0b7c2f4e-6a8d-4d1e-9b7f-3c2a1e0d9f8b" for g in range(GROUPS)]
    n = 0
    txns = 0
    started = time.perf_counter()
    cpu = time.process_time()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        now = int(time.time() * 1000)
        history: list[Any] = []
        latest: dict[tuple[str, str, int], tuple[Any, ...]] = {}
        for _ in range(per_txn):
            g = n % GROUPS
            n += 1
            for p in range(PARTITIONS):
                row = (f"group-{g}", "topic", p, n, -1, "", now, members[g], 1)
                history.extend(row)
                latest[(row[0], "topic", p)] = row
        current = [x for row in latest.values() for x in row]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(insert, history)
        conn.execute(upsert(len(latest)), current)
        conn.execute("COMMIT")
        txns += 1
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    conn.close()
    return {
        "requests_per_txn": per_txn,
        "requests_per_s": n / elapsed,
        "partition_commits_per_s": n * PARTITIONS / elapsed,
        "transactions_per_s": txns / elapsed,
        "cpu_share": cpu / elapsed,
    }


def measure(work: Path, groupings: list[int], seconds: float, core: int | None) -> list[dict[str, Any]]:
    """Every grouping on a fresh database in ``work``; with ``core``, pinned to it (in a child, so the caller's
    affinity stays as it is)."""
    out: list[dict[str, Any]] = []
    for per_txn in groupings:
        path = work / f"ceiling-{per_txn}.db"
        for f in work.glob(f"ceiling-{per_txn}.db*"):
            f.unlink()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: pinned, measures, writes its JSON line, exits
            os.close(read)
            if core is not None:
                os.sched_setaffinity(0, {core})
            result = run(path, per_txn, seconds)
            os.write(write, json.dumps(result).encode())
            os._exit(0)
        os.close(write)
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        os.close(read)
        os.waitpid(pid, 0)
        out.append(json.loads(b"".join(chunks)))
        for f in work.glob(f"ceiling-{per_txn}.db*"):
            f.unlink()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--requests-per-txn", default="16,64,256")
    p.add_argument("--core", type=int, default=0, help="the core to pin the writer to (-1: any)")
    p.add_argument("--dir", type=Path, help="where the databases go (default: a temporary directory)")
    args = p.parse_args(argv)
    groupings = [int(x) for x in args.requests_per_txn.split(",") if x]
    core = None if args.core < 0 else args.core
    with tempfile.TemporaryDirectory(prefix="kgc-ceiling-", dir=args.dir) as tmp:
        for r in measure(Path(tmp), groupings, args.seconds, core):
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
