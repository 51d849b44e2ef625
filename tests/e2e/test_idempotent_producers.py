"""Idempotent producers end to end (issue #17): the real daemon (SQLite) and each client's idempotent producer -
kafka-python's DEFAULT producer (idempotent unless told otherwise), aiokafka with ``enable_idempotence=True`` and
confluent-kafka with ``enable.idempotence=True`` - produce, and a consumer group reads every message back exactly
once. A transactional producer is refused at once with a clear, fatal error."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaProducer

from .daemon import Daemon
from .test_data_path import N, check, confluent_consume, consume_kafka_python, expected

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("idempotence"), topics=("i3:3",)).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"
        lines = [line for line in d.log_text().splitlines() if line.startswith("ts=")]
        assert not [line for line in lines if "level=error" in line]  # nothing a client sends is an ERROR


def test_kafka_python_default_producer_is_idempotent_and_every_message_arrives_once(daemon: Daemon) -> None:
    topic = "kp-idem"
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap, linger_ms=5)  # the defaults: idempotent, acks=all
    try:
        futures = [producer.send(topic, key=k, value=v, headers=h) for k, v, h in expected(topic)]
        producer.flush()
        metadata = [f.get(timeout=10) for f in futures]
        assert producer._transaction_manager is not None  # it really is the idempotent producer
        assert producer._transaction_manager.producer_id_and_epoch.producer_id >= 0
    finally:
        producer.close()
    assert all(m.offset >= 0 for m in metadata)
    check(consume_kafka_python(daemon.bootstrap, topic, N), topic)


def test_aiokafka_idempotent_producer(daemon: Daemon) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = "aio-idem"

    async def main() -> list[Any]:
        producer = AIOKafkaProducer(bootstrap_servers=daemon.bootstrap, enable_idempotence=True, linger_ms=5)
        await producer.start()
        try:
            sent = [await producer.send(topic, key=k, value=v, headers=h) for k, v, h in expected(topic)]
            offsets = [await s for s in sent]
            assert all(m.offset >= 0 for m in offsets)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=daemon.bootstrap, group_id="aio-idem-g", auto_offset_reset="earliest"
        )
        await consumer.start()
        got: list[Any] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                for tp, msgs in (await consumer.getmany(timeout_ms=500)).items():
                    got += [
                        (tp.partition, m.offset, m.key, m.value, [(k, bytes(v)) for k, v in m.headers]) for m in msgs
                    ]
        finally:
            await consumer.stop()
        return got

    check(asyncio.run(main()), topic)


def test_confluent_kafka_idempotent_producer(daemon: Daemon) -> None:
    topic = "ck-idem"
    producer = ConfluentProducer({"bootstrap.servers": daemon.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    reports: list[Any] = []
    for k, v, h in expected(topic):
        producer.produce(topic, key=k, value=v, headers=h, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(30) == 0
    assert [err for err, _ in reports] == [None] * N
    assert all(msg.offset() >= 0 for _, msg in reports)
    check(confluent_consume(daemon.bootstrap, topic, N), topic)


def test_a_transactional_producer_is_refused_clearly(daemon: Daemon) -> None:
    producer = ConfluentProducer({"bootstrap.servers": daemon.bootstrap, "transactional.id": "tx-1"})
    started = time.monotonic()
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(20)
    error = refused.value.args[0]
    print(f"confluent-kafka init_transactions: {error} after {time.monotonic() - started:.2f} s")
    assert error.name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    assert error.fatal() and not error.retriable()
    del producer  # its threads stop now, not when the daemon is gone
