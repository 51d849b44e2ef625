"""Retention and DeleteRecords costs: the pure pass over many partitions, and the storage transaction that deletes
the batches below the new log starts (SQLite, or PostgreSQL with ``--pg URL``).

    python -m benchmarks.retention [--partitions 10000] [--batches 100] [--pg postgresql://postgres@127.0.0.1/test]

Prints: the time of a retention pass that deletes nothing (the steady state: it runs every
``log.retention.check.interval.ms``), of one that deletes half of every partition, and of the storage write that
deletes those rows (one transaction for the pass)."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import text

from broker.partitions import Broker, MemoryDataLog
from broker.records import BatchAppended, TopicCreated
from broker.retention import retention_moves, run_retention
from broker.topics import TopicRegistry
from storage import SqlRecordLog, create_engine


def pure(partitions: int, batches: int) -> None:
    now = [10_000_000]
    topics = TopicRegistry(auto_create=False)
    broker = Broker(topics, MemoryDataLog(), lambda: now[0], defaults={"retention.ms": "5000000"})
    topics.add("t", partitions)
    for i in range(partitions):
        p = broker.partition("t", i)
        assert p is not None
        for b in range(batches):
            p.add(b * 10, b * 10 + 9, 1_000_000 + b * 100_000, 1_000)  # max timestamps 1.0e6 .. 1.0e6 + 1e5 * batches
        p.next_offset = p.high_watermark
    start = time.perf_counter()
    moves = retention_moves(broker, 1_000_000 + 5_000_000)  # nothing older than 5e6 ms: nothing moves
    idle = time.perf_counter() - start
    assert not moves
    now[0] = 1_000_000 + 5_000_000 + batches * 50_000  # half the batches are older than retention
    start = time.perf_counter()
    moved = run_retention(broker)
    busy = time.perf_counter() - start
    deleted = moved * batches // 2
    print(f"pure pass, {partitions} partitions x {batches} batches: nothing to delete {idle * 1000:.1f} ms; "
          f"half of each partition ({moved} partitions, {deleted} batches) {busy * 1000:.1f} ms")  # fmt: skip


async def stored(url: str, partitions: int, batches: int, data_dir: str) -> None:
    schema = None
    if url.startswith("postgresql"):  # a schema of its own, dropped at the end
        schema = f"bench_retention_{uuid.uuid4().hex[:8]}"
        engine = create_engine(url)
        async with engine.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        await engine.dispose()
    log = await SqlRecordLog.open(url, data_dir=data_dir, schema=schema)
    try:
        data = b"x" * 1_000
        records: list[object] = [TopicCreated("bench", partitions, (), 0)]
        for i in range(partitions):
            records += [BatchAppended("bench", i, b * 10, b * 10 + 9, 0, 0, data, 0) for b in range(batches)]
        done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        log.append(records, done.set_result)  # type: ignore[arg-type]
        assert await done is None
        topics = TopicRegistry(auto_create=False)
        broker = Broker(topics, log, lambda: 0)
        broker.load(*await log.load_data())
        moves = [(p, batches // 2 * 10) for p in broker.partitions()]
        done = asyncio.get_running_loop().create_future()
        start = time.perf_counter()
        broker.advance_log_start(moves, done.set_result)
        assert await done is None
        took = time.perf_counter() - start
        print(f"{url.split(':')[0]}: one transaction moving {len(moves)} log starts and deleting "
              f"{len(moves) * (batches // 2)} batch rows: {took * 1000:.0f} ms")  # fmt: skip
    finally:
        await log.close()
        if schema is not None:
            engine = create_engine(url)
            async with engine.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--stored-partitions", type=int, default=1_000)
    parser.add_argument("--stored-batches", type=int, default=20)
    parser.add_argument("--pg", default=None)
    args = parser.parse_args()
    pure(args.partitions, args.batches)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        asyncio.run(stored(url, args.stored_partitions, args.stored_batches, tmp))
        if args.pg:  # an empty database (the benchmark's topic must not exist there)
            asyncio.run(stored(args.pg, args.stored_partitions, args.stored_batches, tmp))


if __name__ == "__main__":
    main()
