"""What idempotence costs: the broker core's Produce per batch (plain, idempotent, duplicate), and the start-up load of
the producer state from SQLite.

    .venv/bin/python -m benchmarks.bench_idempotence [--batches 20000] [--stored 100000] [--producers 200]
    .venv/bin/python -m benchmarks.bench_idempotence --clients 20000   # real clients against the real daemon

Prints one line per measurement (numbers go to docs/performance.md, "Idempotent producers").
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.partitions import Broker, MemoryDataLog
from broker.topics import TopicRegistry


def _batch(pid: int, seq: int) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, pid, 0 if pid >= 0 else -1, seq if pid >= 0 else -1, 1 << 20)
    for i in range(10):
        b.append(i, timestamp=1_000 + i, key=b"k", value=b"x" * 100, headers=[])
    return bytes(b.build())


def core(batches: int, rounds: int = 5) -> None:
    """Broker.produce of one 10-record batch per call, with a log that is durable at once (no storage); the best
    of ``rounds`` rounds on a fresh broker each (the host is shared: the best round is the least disturbed)."""
    plain = _batch(-1, -1)
    idem = [_batch(0, seq * 10) for seq in range(batches)]
    best: dict[str, float] = {}
    for _ in range(rounds):
        topics = TopicRegistry(auto_create=False)
        topics.add("t", 1)
        broker = Broker(topics, MemoryDataLog(), lambda: 0)
        broker.start()
        done: list[object] = []
        for label, datas in (
            ("plain", [plain] * batches),
            ("idempotent", idem),
            ("duplicate (of the last 5)", [idem[-1 - (i % 5)] for i in range(batches)]),
        ):
            started = time.perf_counter()
            for data in datas:
                broker.produce([("t", 0, data)], done.append)
            per_batch = (time.perf_counter() - started) / len(datas)
            best[label] = min(best.get(label, per_batch), per_batch)
    for label, seconds in best.items():
        print(f"core {label}: {seconds * 1e6:.1f} us/batch (best of {rounds} rounds of {batches})")


async def load(stored: int, producers: int) -> None:
    """Write ``stored`` plain then ``stored`` idempotent batches (``producers`` producers over 4 partitions) to SQLite
    through the broker and the storage writer; then load_data with the producer state and without it (the window
    excludes every producer)."""
    from storage import SqlRecordLog

    with tempfile.TemporaryDirectory() as directory:
        log = await SqlRecordLog.open(data_dir=directory)
        topics = TopicRegistry(auto_create=False)
        broker = Broker(topics, log, lambda: int(time.time() * 1000))
        broker.start()
        topics.add("t", 4)
        seqs = [0] * producers
        loop = asyncio.get_running_loop()
        plain = _batch(-1, -1)
        built = []  # built before the clock starts: kafka-python's builder is slower than the broker
        for i in range(stored):
            pid = i % producers
            built.append(_batch(pid, seqs[pid]))
            seqs[pid] += 10
        for idempotent in (False, True):
            pending: list[asyncio.Future[object]] = []
            started = time.perf_counter()
            for i in range(stored):
                pid = i % producers
                future: asyncio.Future[object] = loop.create_future()
                broker.produce([("t", pid % 4, built[i] if idempotent else plain)], future.set_result)
                pending.append(future)
                if len(pending) >= 500:  # 500 produces in flight, as many clients would have
                    await asyncio.gather(*pending)
                    pending.clear()
            await asyncio.gather(*pending)
            rate = stored / (time.perf_counter() - started)
            label = "idempotent" if idempotent else "plain"
            print(f"durable produce ({label}, SQLite, 500 in flight): {rate:,.0f} batches/s")
        await log.close()
        log = await SqlRecordLog.open(data_dir=directory)
        try:
            for label, since in (("with producers", 0), ("without producers", int(time.time() * 1000) + 1)):
                started = time.perf_counter()
                _, partitions = await log.load_data(producers_since_ms=since)
                seconds = time.perf_counter() - started
                rows = sum(len(p.producers) for p in partitions)
                print(f"load_data {label}: {stored} stored batches, {rows} producer rows, {seconds * 1000:.0f} ms")
            started = time.perf_counter()
            fresh = Broker(TopicRegistry(auto_create=False), log, lambda: int(time.time() * 1000))
            fresh.load(*await log.load_data())
            print(
                f"load_data + Broker.load: {fresh.producer_count()} producer states, "
                f"{(time.perf_counter() - started) * 1000:.0f} ms"
            )
        finally:
            await log.close()


def clients(count: int) -> None:
    """Produce ``count`` 100-byte messages with each client, idempotence off and on, against the real daemon
    (SQLite, acks=all), and print messages per second (producer created, every message acknowledged)."""
    from pathlib import Path

    from confluent_kafka import Producer as ConfluentProducer
    from kafka import KafkaProducer

    from tests.e2e.daemon import Daemon

    value = b"x" * 100
    with tempfile.TemporaryDirectory() as directory:
        daemon = Daemon(Path(directory), topics=("bench:1",)).start()
        try:
            for idempotent in (False, True):
                started = time.perf_counter()
                kp = KafkaProducer(bootstrap_servers=daemon.bootstrap, enable_idempotence=idempotent, acks="all")
                for _ in range(count):
                    kp.send("bench", value=value)
                kp.flush()
                kp.close()
                rate = count / (time.perf_counter() - started)
                print(f"kafka-python idempotence={idempotent}: {rate:,.0f} msg/s")
                started = time.perf_counter()
                ck = ConfluentProducer(
                    {"bootstrap.servers": daemon.bootstrap, "enable.idempotence": idempotent, "acks": "all"}
                )
                for _ in range(count):
                    ck.produce("bench", value=value)
                    ck.poll(0)
                assert ck.flush(60) == 0
                rate = count / (time.perf_counter() - started)
                print(f"confluent-kafka idempotence={idempotent}: {rate:,.0f} msg/s")
        finally:
            daemon.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=0, help="messages per client run (0: skip the client runs)")
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--producers", type=int, default=200)
    args = parser.parse_args()
    if args.clients:
        clients(args.clients)
        return
    core(args.batches)
    asyncio.run(load(args.stored, args.producers))


if __name__ == "__main__":
    main()
