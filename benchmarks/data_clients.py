"""The data path through real client libraries: produce-to-consume latency and the consumer fetch pipeline.

Each role runs in a process of its own (``python -m benchmarks.data_clients ROLE ...``, started by
``benchmarks.data_path``) and prints one JSON line:

* ``consume``: assigns the topic's partitions (no group), starts at their end, says ``ready`` on stdout, then reads
  ``--count`` messages. Each value starts with the producer's ``time.monotonic_ns()`` (one clock for every process
  of the host), so the latency of a message is its receive time minus its send call. With ``--work-us`` it also
  sleeps that long per message received (processing that releases the GIL, as I/O does), and reads from the
  beginning: the pipeline runs, msg/s to drain a pre-filled topic.
* ``produce``: sends ``--rate`` messages/s for ``--seconds`` (acks=all, linger 0, paced on the monotonic clock),
  or with ``--rate 0`` ``--count`` messages as fast as the client goes (to fill a topic).

Clients: ``kafka-python`` 3.0.12, ``aiokafka`` 0.14, ``confluent`` (confluent-kafka 2.16, librdkafka). Extra client
settings go in ``--config`` as JSON, with each library's own names.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
from array import array
from typing import Any

from benchmarks.load import percentiles

STAMP = struct.Struct(">q")
CLIENTS = ("kafka-python", "aiokafka", "confluent")


def _value(size: int) -> bytes:
    return STAMP.pack(time.monotonic_ns()) + b"x" * max(size - STAMP.size, 0)


def _latency_us(value: bytes, now_ns: int) -> int:
    return int(now_ns - STAMP.unpack_from(value)[0]) // 1000


def _summary(samples: array[int], started: float, count: int, extra: dict[str, Any]) -> dict[str, Any]:
    seconds = time.monotonic() - started
    return {
        "received": count,
        "seconds": round(seconds, 3),
        "msgs_per_s": count / seconds if seconds else 0.0,
        **percentiles(samples),
        **extra,
    }


def _ready() -> None:
    print("ready", flush=True)


# -- consumers ------------------------------------------------------------------------------------------------------


def consume_kafka_python(a: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, enable_auto_commit=False, **config)
    tps = [TopicPartition(a.topic, p) for p in range(a.partitions)]
    consumer.assign(tps)
    if a.from_beginning:
        consumer.seek_to_beginning(*tps)
    else:
        consumer.seek_to_end(*tps)
    for tp in tps:
        consumer.position(tp)
    samples: array[int] = array("q")
    got = 0
    _ready()
    started = time.monotonic()
    deadline = started + a.timeout
    try:
        while got < a.count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=100).values():
                now = time.monotonic_ns()
                for r in records:
                    samples.append(_latency_us(r.value, now))
                got += len(records)
                if a.work_us:
                    time.sleep(a.work_us * len(records) / 1e6)
    finally:
        consumer.close()
    return _summary(samples, started, got, {})


def consume_aiokafka(a: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> dict[str, Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=a.bootstrap, enable_auto_commit=False, **config)
        await consumer.start()
        tps = [TopicPartition(a.topic, p) for p in range(a.partitions)]
        consumer.assign(tps)
        if a.from_beginning:
            await consumer.seek_to_beginning(*tps)
        else:
            await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        samples: array[int] = array("q")
        got = 0
        _ready()
        started = time.monotonic()
        deadline = started + a.timeout
        try:
            while got < a.count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    now = time.monotonic_ns()
                    for r in records:
                        samples.append(_latency_us(r.value, now))
                    got += len(records)
                    if a.work_us:
                        await asyncio.sleep(a.work_us * len(records) / 1e6)
        finally:
            await consumer.stop()
        return _summary(samples, started, got, {})

    return asyncio.run(run())


def consume_confluent(a: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": a.bootstrap, "group.id": "bench-unused", "enable.auto.commit": False, **config}
    )
    tps = []
    for p in range(a.partitions):
        # Start at an explicit offset: a logical OFFSET_END is resolved in the background, with no way to tell
        # when, and messages produced before it is would be skipped.
        low, high = consumer.get_watermark_offsets(TopicPartition(a.topic, p), timeout=10)
        tps.append(TopicPartition(a.topic, p, low if a.from_beginning else high))
    consumer.assign(tps)
    samples: array[int] = array("q")
    got = 0
    _ready()
    started = time.monotonic()
    deadline = started + a.timeout
    try:
        while got < a.count and time.monotonic() < deadline:
            # consume(n, timeout) waits until it has n messages or the timeout passed: take one with poll(), which
            # returns as soon as a message is there, then what is already queued.
            first = consumer.poll(0.1)
            messages = [first, *consumer.consume(num_messages=999, timeout=0)] if first is not None else []
            now = time.monotonic_ns()
            for m in messages:
                if m.error():
                    continue
                samples.append(_latency_us(m.value() or b"", now))
                got += 1
            if a.work_us and messages:
                time.sleep(a.work_us * len(messages) / 1e6)
    finally:
        consumer.close()
    return _summary(samples, started, got, {})


# -- producers ------------------------------------------------------------------------------------------------------


def _pace(rate: float, started: float, sent: int) -> None:
    """Sleep until message ``sent`` is due (open loop: the schedule does not wait for answers)."""
    if rate:
        ahead = started + sent / rate - time.monotonic()
        if ahead > 0.0005:
            time.sleep(ahead)


def _total(a: argparse.Namespace) -> int:
    return int(a.rate * a.seconds) if a.rate else a.count


def produce_kafka_python(a: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    from kafka import KafkaProducer

    settings = {"acks": "all", "linger_ms": 0, "enable_idempotence": False, **config}
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, **settings)
    producer.partitions_for(a.topic)
    total = _total(a)
    started = time.monotonic()
    for i in range(total):
        _pace(a.rate, started, i)
        producer.send(a.topic, value=_value(a.size), partition=i % a.partitions)
    producer.flush()
    producer.close()
    return {"sent": total, "seconds": round(time.monotonic() - started, 3)}


def produce_aiokafka(a: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    async def run() -> dict[str, Any]:
        settings = {"acks": "all", "linger_ms": 0, "enable_idempotence": False, **config}
        producer = AIOKafkaProducer(bootstrap_servers=a.bootstrap, **settings)
        await producer.start()
        total = _total(a)
        started = time.monotonic()
        try:
            for i in range(total):
                if a.rate:
                    ahead = started + i / a.rate - time.monotonic()
                    if ahead > 0.0005:
                        await asyncio.sleep(ahead)
                await producer.send(a.topic, value=_value(a.size), partition=i % a.partitions)
            await producer.flush()
        finally:
            await producer.stop()
        return {"sent": total, "seconds": round(time.monotonic() - started, 3)}

    return asyncio.run(run())


def produce_confluent(a: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    settings = {"acks": "all", "linger.ms": 0, "enable.idempotence": False, **config}
    producer = Producer({"bootstrap.servers": a.bootstrap, **settings})
    total = _total(a)
    started = time.monotonic()
    for i in range(total):
        _pace(a.rate, started, i)
        while True:
            try:
                producer.produce(a.topic, value=_value(a.size), partition=i % a.partitions)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    return {"sent": total, "seconds": round(time.monotonic() - started, 3)}


ROLES = {
    ("consume", "kafka-python"): consume_kafka_python,
    ("consume", "aiokafka"): consume_aiokafka,
    ("consume", "confluent"): consume_confluent,
    ("produce", "kafka-python"): produce_kafka_python,
    ("produce", "aiokafka"): produce_aiokafka,
    ("produce", "confluent"): produce_confluent,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=("consume", "produce"))
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.0, help="produce: messages/s (0: --count, flat out)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--count", type=int, default=0, help="consume: messages to read; produce with --rate 0")
    parser.add_argument("--size", type=int, default=100, help="produce: value bytes")
    parser.add_argument("--work-us", type=float, default=0.0, help="consume: processing time per message")
    parser.add_argument("--from-beginning", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--config", default="{}", help="client settings, JSON")
    a = parser.parse_args(argv)
    result = ROLES[(a.role, a.client)](a, json.loads(a.config))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
