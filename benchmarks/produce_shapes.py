"""The ceiling of each storage shape for durable produce, against the bare append-and-fsync file writer.

    python -m benchmarks.produce_shapes [--size 102400] [--group 7] [--seconds 3] [--rounds 3] [--dir PATH]

Raw loops on one disk, no daemon, alternating rounds: the file baseline (``data_raw.file_baseline``), SQLite with the
batches as blobs (``data_raw.sqlite_baseline``, 4 KiB pages, and the same with 64 KiB pages), and the batches in a
segment file (append + ``fdatasync``) with one SQLite index row per batch in a WAL, ``synchronous=FULL``
transaction (two syncs per group). ``--group`` batches per sync (the daemon's observed grouping is ~7). Prints
each shape's median MB/s and its share of the file's; benchmarks/data_path_notes.md has a run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.data_raw import file_baseline, record_batch, sqlite_baseline

_BLOBS = """CREATE TABLE bare_batches (topic text NOT NULL, partition_index integer NOT NULL,
    base_offset bigint NOT NULL, last_offset bigint NOT NULL, max_timestamp_ms bigint NOT NULL,
    size_bytes integer NOT NULL, data BLOB NOT NULL, PRIMARY KEY (topic, partition_index, base_offset))"""
_INDEX = """CREATE TABLE segment_index (topic text NOT NULL, partition_index integer NOT NULL,
    base_offset bigint NOT NULL, last_offset bigint NOT NULL, max_timestamp_ms bigint NOT NULL,
    size_bytes integer NOT NULL, file_position bigint NOT NULL, PRIMARY KEY (topic, partition_index, base_offset))"""


def _connect(path: Path, page_size: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size={page_size}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _cleanup(*paths: Path) -> None:
    for path in paths:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def sqlite_pages(directory: Path, batch: bytes, group: int, seconds: float, per_batch: int, page: int) -> float:
    """MB/s of ``group`` blob INSERTs + COMMIT per round on a database of ``page``-byte pages."""
    path = directory / f"pages-{os.getpid()}.db"
    conn = _connect(path, page)
    try:
        conn.execute(_BLOBS)
        offset = commits = 0
        started = time.perf_counter()
        while time.perf_counter() < started + seconds:
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO bare_batches VALUES (?, ?, ?, ?, ?, ?, ?)",
                [("bench", 0, offset + i * per_batch, offset + (i + 1) * per_batch - 1, 0, len(batch), batch)
                 for i in range(group)],
            )  # fmt: skip
            conn.execute("COMMIT")
            offset += group * per_batch
            commits += 1
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
        _cleanup(path)
    return commits * group * len(batch) / elapsed / 1e6


def segment_and_index(directory: Path, batch: bytes, group: int, seconds: float, per_batch: int) -> float:
    """MB/s of ``group`` batches appended to a segment file + ``fdatasync``, then their index rows committed."""
    segment = directory / f"segment-{os.getpid()}.log"
    path = directory / f"index-{os.getpid()}.db"
    fd = os.open(segment, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    conn = _connect(path, 4096)
    payload = batch * group
    try:
        conn.execute(_INDEX)
        position = offset = commits = 0
        started = time.perf_counter()
        while time.perf_counter() < started + seconds:
            os.write(fd, payload)
            os.fdatasync(fd)
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO segment_index VALUES (?, ?, ?, ?, ?, ?, ?)",
                [("bench", 0, offset + i * per_batch, offset + (i + 1) * per_batch - 1, 0, len(batch),
                  position + i * len(batch)) for i in range(group)],
            )  # fmt: skip
            conn.execute("COMMIT")
            position += len(payload)
            offset += group * per_batch
            commits += 1
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        conn.close()
        _cleanup(path, segment)
    return commits * group * len(batch) / elapsed / 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=102_400, help="record value bytes (100 KiB: one record per batch)")
    p.add_argument("--group", type=int, default=7)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", type=Path, default=Path.cwd(), help="a directory on the disk to measure")
    args = p.parse_args(argv)
    per_batch = 1 if args.size >= 102_400 else 16
    batch = record_batch(args.size, per_batch)
    g, s = args.group, args.seconds
    shapes: dict[str, Callable[[Path], float]] = {
        "file: append + fsync": lambda d: float(file_baseline(d, batch, g, s)["mb_per_s"]),
        "SQLite blobs, 4 KiB pages": lambda d: float(sqlite_baseline(d, batch, g, s, per_batch)["mb_per_s"]),
        "SQLite blobs, 64 KiB pages": lambda d: sqlite_pages(d, batch, g, s, per_batch, 65_536),
        "segment file + SQLite index": lambda d: segment_and_index(d, batch, g, s, per_batch),
    }
    results: dict[str, list[float]] = {name: [] for name in shapes}
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="kgc-shapes-") as tmp:
        for _ in range(args.rounds):
            for name, run in shapes.items():
                results[name].append(run(Path(tmp)))
    base = statistics.median(results["file: append + fsync"])
    print(f"{len(batch):,}-byte batches, {g} per sync, {args.rounds} rounds of {s:g} s, load {os.getloadavg()[0]:.1f}")
    for name, runs in results.items():
        median = statistics.median(runs)
        shown = ", ".join(f"{x:.1f}" for x in runs)
        print(f"{name:30s} {median:8.1f} MB/s  {median / base:6.1%} of the file  ({shown})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
