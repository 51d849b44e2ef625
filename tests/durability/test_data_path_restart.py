"""Issue #17, the data path on each backend (SQLite and PostgreSQL) across a clean restart.

confluent-kafka and aiokafka produce keyed messages with headers (several codecs) into a configured topic and an
auto-created one; a kafka-python group reads part of them and commits; the daemon is stopped (SIGTERM) and started on
the same database. Afterwards the auto-created topic is still there with its partitions, the group goes on from its
committed offsets (nothing below them again, nothing missing), a new group reads every message back at the offset
its producer was told, and new messages get the offsets after the stored ones.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.e2e.helpers import wait_for

from .clients import ready
from .conftest import Backend, make_daemon

pytestmark = pytest.mark.e2e

CONFIGURED = "dur6"  # 6 partitions (conftest.DAEMON_TOPICS)
AUTO = "auto-made"  # auto-created with num.partitions=3
GROUP = "restart-reader"

Placed = tuple[str, int, int, bytes, bytes, list[tuple[str, bytes]]]  # topic, partition, offset, key, value, headers


def produce_confluent(bootstrap: str, topic: str, codec: str, tag: str, n: int) -> list[Placed]:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "acks": "all", "compression.codec": codec})
    out: list[Placed] = []
    errors: list[Any] = []
    for i in range(n):
        key, value, headers = b"k%d" % (i % 13), b"%s-%d" % (tag.encode(), i), [("i", b"%d" % i), ("tag", b"x")]

        def report(err: Any, msg: Any, headers: list[tuple[str, bytes]] = headers) -> None:
            if err is not None:
                errors.append(err)
            else:
                out.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), headers))

        producer.produce(topic, key=key, value=value, headers=headers, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0 and not errors, errors[:3]
    return out


def produce_aiokafka(bootstrap: str, topic: str, codec: str, tag: str, n: int) -> list[Placed]:
    from aiokafka import AIOKafkaProducer

    async def main() -> list[Placed]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=codec)
        await producer.start()
        try:
            sent = []
            for i in range(n):
                key, value, headers = b"a%d" % (i % 5), b"%s-%d" % (tag.encode(), i), [("i", b"%d" % i)]
                sent.append((key, value, headers, await producer.send(topic, key=key, value=value, headers=headers)))
            out: list[Placed] = []
            for key, value, headers, future in sent:
                meta = await future
                out.append((meta.topic, meta.partition, meta.offset, key, value, headers))
            return out
        finally:
            await producer.stop()

    return asyncio.run(main())


def read(consumer: KafkaConsumer, until: int, commit: bool) -> list[Placed]:
    got: list[Placed] = []
    deadline = time.monotonic() + 30
    while len(got) < until and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=200, max_records=500)
        for tp, msgs in batch.items():
            got += [
                (tp.topic, tp.partition, m.offset, m.key, m.value, [(k, bytes(v)) for k, v in m.headers]) for m in msgs
            ]
        if commit and batch:
            consumer.commit({tp: OffsetAndMetadata(msgs[-1].offset + 1, "", -1) for tp, msgs in batch.items()})
    return got


def group_consumer(bootstrap: str, group: str | None) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        fetch_max_wait_ms=100, session_timeout_ms=6000, heartbeat_interval_ms=300,
    )  # fmt: skip
    consumer.subscribe([CONFIGURED, AUTO])
    return consumer


def test_produce_consume_restart(tmp_path: Path, backend: Backend) -> None:
    daemon = make_daemon(tmp_path, backend, "--set", "num.partitions=3").start()
    try:
        produced = (
            produce_confluent(daemon.bootstrap, CONFIGURED, "zstd", "ck-zstd", 1500)
            + produce_confluent(daemon.bootstrap, AUTO, "lz4", "ck-lz4", 1500)
            + produce_aiokafka(daemon.bootstrap, CONFIGURED, "snappy", "aio-snappy", 1000)
            + produce_aiokafka(daemon.bootstrap, AUTO, "gzip", "aio-gzip", 1000)
        )
        by_offset = {(t, p, o): tuple(rest) for t, p, o, *rest in produced}
        assert len(by_offset) == len(produced)

        consumer = group_consumer(daemon.bootstrap, GROUP)
        try:
            first = read(consumer, len(produced) // 2, commit=True)
            committed = {tp: consumer.committed(tp) for tp in consumer.assignment()}
        finally:
            consumer.close()
        assert len(first) >= len(produced) // 2

        assert daemon.stop() == 0
        daemon.start()
        wait_for(lambda: ready(daemon.http_url), 30, "restarted daemon ready")

        probe = KafkaConsumer(bootstrap_servers=daemon.bootstrap)
        try:
            assert probe.partitions_for_topic(AUTO) == {0, 1, 2}
            assert probe.partitions_for_topic(CONFIGURED) == set(range(6))
        finally:
            probe.close()

        consumer = group_consumer(daemon.bootstrap, GROUP)
        try:
            rest = read(consumer, len(produced) - len(first), commit=True)
        finally:
            consumer.close()
        for topic, partition, offset, *_ in rest:
            floor = committed.get(TopicPartition(topic, partition)) or 0
            assert offset >= floor, f"{topic}:{partition}:{offset} read again below the committed {floor}"
        assert {(t, p, o) for t, p, o, *_ in first + rest} == set(by_offset)

        everything = group_consumer(daemon.bootstrap, None)
        try:
            again = read(everything, len(produced), commit=False)
        finally:
            everything.close()
        assert {(t, p, o): tuple(rest) for t, p, o, *rest in again} == by_offset

        after = produce_confluent(daemon.bootstrap, AUTO, "gzip", "after", 300)
        ends: dict[tuple[str, int], int] = {}
        for t, p, o, *_ in produced:
            ends[(t, p)] = max(ends.get((t, p), -1), o)
        for t, p, o, *_ in sorted(after, key=lambda r: r[2]):
            assert o == ends[(t, p)] + 1, f"{t}:{p}: {o} does not follow the stored {ends[(t, p)]}"
            ends[(t, p)] = o
    finally:
        assert daemon.stop() == 0, daemon.log_text()[-3000:]
    assert "level=error" not in daemon.log_text(), daemon.log_text()[-3000:]
