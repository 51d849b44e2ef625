"""Deletions survive a crash, through the real daemon on SQLite and PostgreSQL: retention moves a log start,
DeleteRecords another, DeleteTopics removes a topic; after SIGKILL and a restart the log starts, the remaining
records and the topic list are as before (each was answered or applied only once durable)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from tests.e2e.helpers import wait_for

from .conftest import Backend, make_daemon

pytestmark = pytest.mark.e2e


def produce(bootstrap: str, topic: str, count: int, partition: int, timestamp_ms: int | None = None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all")
    try:
        for i in range(count):
            producer.send(topic, b"%d" % i, partition=partition, timestamp_ms=timestamp_ms)
            producer.flush()
    finally:
        producer.close()


def offsets(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        first, last = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        return [(first[tp], last[tp]) for tp in tps]
    finally:
        consumer.close()


def values(bootstrap: str, topic: str, partition: int, expected: int) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 10
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(300).values():
                got.extend((r.offset, r.value) for r in records)
        return got
    finally:
        consumer.close()


def test_deletions_survive_a_crash(tmp_path: Path, backend: Backend) -> None:
    daemon = make_daemon(tmp_path, backend, "--set", "log.retention.check.interval.ms=200", topics=())
    daemon.start()
    try:
        topic, gone = f"keep-{uuid.uuid4().hex[:6]}", f"gone-{uuid.uuid4().hex[:6]}"
        admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
        try:
            admin.create_topics({topic: {"num_partitions": 2, "configs": {"retention.ms": "60000"}}, gone: {}})
            old = int(time.time() * 1000) - 600_000
            produce(daemon.bootstrap, topic, 4, 0, timestamp_ms=old)  # retention takes these
            produce(daemon.bootstrap, topic, 2, 0)
            produce(daemon.bootstrap, topic, 5, 1)
            produce(daemon.bootstrap, gone, 3, 0)
            wait_for(lambda: offsets(daemon.bootstrap, topic, 2)[0][0] == 4, 10, "retention moved the log start")
            admin.delete_records({TopicPartition(topic, 1): 3})
            admin.delete_topics([gone])
        finally:
            admin.close()
        before = offsets(daemon.bootstrap, topic, 2)
        assert before == [(4, 6), (3, 5)]
        daemon.kill()  # no flush, no goodbye: what was answered must be durable
        daemon.start()
        assert offsets(daemon.bootstrap, topic, 2) == before
        admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
        try:
            listed = admin.list_topics()
            assert topic in listed and gone not in listed
        finally:
            admin.close()
        assert values(daemon.bootstrap, topic, 0, 2) == [(4, b"0"), (5, b"1")]
        assert values(daemon.bootstrap, topic, 1, 2) == [(3, b"3"), (4, b"4")]
    finally:
        daemon.stop()
    log = daemon.log_text()
    assert "level=ERROR" not in log and " ERROR " not in log
