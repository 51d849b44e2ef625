"""Offset commits sharing the storage writer with produced batches, in one process (no network, no clients): how
long a commit waits to be durable while a closed-loop producer keeps the writer busy, per byte-cap setting.

    python -m benchmarks.writer_share [--seconds 5] [--size 1024 --per-batch 16] [--rounds 2] [--page-size 4096]

Real ``SqlRecordLog`` on a fresh SQLite file per run, the real ``Broker`` in front of it. ``--inflight`` produce
calls are kept queued (as that many Produce requests in flight would), each one batch to the next of 8 partitions;
one offset commit is appended every millisecond and its latency is the time from ``append`` to ``on_done``.
Settings (``storage.transaction_data_bytes`` / ``_max``) alternate within each round, so that they see the same
minutes of a shared machine. Reports produce MB/s and commit p50/p99/max per setting (medians over the rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.data_raw import record_batch
from broker.partitions import Broker
from broker.topics import TopicRegistry
from coordinator.records import OffsetCommitRecord
from storage import SqlRecordLog

SETTINGS = [(0, 0), (65_536, 0), (262_144, 0), (262_144, 262_144), (65_536, 262_144)]  # (with commits queued, any)


async def one_run(
    path: Path, cap: int, cap_alone: int, batch: bytes, seconds: float, inflight: int, page_size: int
) -> dict[str, Any]:
    log = await SqlRecordLog.open(
        f"sqlite+aiosqlite:///{path}", max_batch_data_bytes=cap, max_batch_data_bytes_alone=cap_alone,
        sqlite_page_size=page_size,
    )  # fmt: skip
    topics = TopicRegistry(auto_create=False)
    broker = Broker(topics, log, lambda: int(time.time() * 1000))
    broker.start()
    topics.add("t", 8)
    await log.flush()
    stop = asyncio.Event()
    produced = 0
    latencies: list[float] = []
    loop = asyncio.get_running_loop()

    async def producer(k: int) -> None:
        nonlocal produced
        while not stop.is_set():
            done: asyncio.Future[Any] = loop.create_future()
            broker.produce([("t", k % 8, batch)], done.set_result)
            await done
            produced += len(batch)

    async def committer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            started = time.perf_counter()
            done: asyncio.Future[Any] = loop.create_future()
            log.append([OffsetCommitRecord("g", "t", n % 8, n, -1, "", 1, None, "", -1)], done.set_result)
            done.add_done_callback(lambda _f, s=started: latencies.append((time.perf_counter() - s) * 1000))
            await asyncio.sleep(0.001)

    tasks = [asyncio.create_task(producer(k)) for k in range(inflight)]
    await asyncio.sleep(0.5)  # warm-up
    produced, latencies[:] = 0, []
    began = time.perf_counter()
    committing = asyncio.create_task(committer())
    await asyncio.sleep(seconds)
    stop.set()
    elapsed = time.perf_counter() - began
    mb = produced / elapsed / 1e6
    await asyncio.gather(*tasks, committing)
    await log.close()
    ordered = sorted(latencies)
    return {
        "cap": cap, "cap_alone": cap_alone, "mb_per_s": round(mb, 1), "commits": len(ordered),
        "p50_ms": round(ordered[len(ordered) // 2], 2), "p99_ms": round(ordered[int(len(ordered) * 0.99)], 2),
        "max_ms": round(ordered[-1], 2),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--per-batch", type=int, default=16)
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--page-size", type=int, default=4096)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    batch = record_batch(args.size, args.per_batch)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kgc-writer-share-") as work:
        for k in range(args.rounds):
            for i, (cap, alone) in enumerate(SETTINGS):
                path = Path(work) / f"r{k}-{i}.db"
                r = asyncio.run(one_run(path, cap, alone, batch, args.seconds, args.inflight, args.page_size))
                print(json.dumps(r), flush=True)
                runs.append(r)
    for cap, alone in SETTINGS:
        mine = [r for r in runs if (r["cap"], r["cap_alone"]) == (cap, alone)]
        med = {key: statistics.median(r[key] for r in mine) for key in ("mb_per_s", "p50_ms", "p99_ms", "max_ms")}
        print(f"cap {cap:>7} alone {alone:>7}: produce {med['mb_per_s']:.1f} MB/s, commit p50 {med['p50_ms']:.2f}"
              f" p99 {med['p99_ms']:.2f} max {med['max_ms']:.2f} ms")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
