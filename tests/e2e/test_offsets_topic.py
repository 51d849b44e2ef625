"""``__consumer_offsets`` end to end: a real kafka-python group commits, leaves, has offsets deleted and is deleted;
another kafka-python consumer reads the internal topic over TCP (its record reader is the independent batch
decoder) and the keys and values are parsed here by hand with the documented layouts (tests/core/test_offsets_topic
has the parsers and an independent Java String.hashCode). A restart rebuilds the topic from the stored state."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.core.test_offsets_topic import kafka_partition, parse_group_value, parse_key, parse_offset_value

from .daemon import Daemon

pytestmark = pytest.mark.e2e

OFFSETS = "__consumer_offsets"
TOPIC = "ot3"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("offsets-topic"), topics=(f"{TOPIC}:3",)).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"


def read_partition(bootstrap: str, partition: int, until: Any, timeout: float = 20) -> list[tuple[int, Any, Any]]:
    """(offset, parsed key, value bytes or None) of the partition from its beginning, read until ``until(rows)``."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(OFFSETS, partition)
    rows: list[tuple[int, Any, Any]] = []
    try:
        reader.assign([tp])
        reader.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while not until(rows) and time.monotonic() < deadline:
            for msgs in reader.poll(timeout_ms=300).values():
                rows += [(m.offset, parse_key(m.key), m.value) for m in msgs]
    finally:
        reader.close()
    return rows


class Tail:
    """A consumer of one partition of the internal topic from its beginning, keeping the records of ``group``."""

    def __init__(self, bootstrap: str, partition: int, group: str) -> None:
        self.group = group
        self.reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        tp = TopicPartition(OFFSETS, partition)
        self.reader.assign([tp])
        self.reader.seek_to_beginning(tp)
        self.rows: list[tuple[int, Any, Any]] = []

    def until(self, done: Any, timeout: float = 20) -> list[tuple[int, Any, Any]]:
        deadline = time.monotonic() + timeout
        while not done(self.rows):
            assert time.monotonic() < deadline, self.rows
            for msgs in self.reader.poll(timeout_ms=200).values():
                rows = [(m.offset, parse_key(m.key), m.value) for m in msgs]
                self.rows += [r for r in rows if r[1][1] == self.group]
        return self.rows

    def close(self) -> None:
        self.reader.close()


def end_offsets(bootstrap: str) -> dict[int, int]:
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        ends = reader.end_offsets([TopicPartition(OFFSETS, p) for p in range(50)])
    finally:
        reader.close()
    return {tp.partition: end for tp, end in ends.items()}


def join_and_commit(bootstrap: str, group: str) -> tuple[KafkaConsumer, str]:
    """A member of ``group`` subscribed to TOPIC, with offsets 11, 12, 13 committed; returns it and its member id."""
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, client_id="ot-client",
        heartbeat_interval_ms=300, session_timeout_ms=6000,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    assert len(consumer.assignment()) == 3
    consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(11 + p, f"meta-{p}", -1) for p in range(3)})
    return consumer, consumer._coordinator._generation.member_id  # only to compare with the record


def test_a_groups_life_in_its_partition(daemon: Daemon) -> None:
    group = f"ot-{uuid.uuid4().hex[:8]}"
    partition = kafka_partition(group)
    before = end_offsets(daemon.bootstrap)
    # A tailing reader (as Burrow is) sees every step: records nobody reads are only held back, so a key changed
    # twice between two reads would show only its newest record (as if compaction had run).
    tail = Tail(daemon.bootstrap, partition, group)
    try:
        consumer, member_id = join_and_commit(daemon.bootstrap, group)
        tail.until(
            lambda rows: sum(k[0] == "offset" for _, k, _ in rows) == 3 and any(k[0] == "group" for _, k, _ in rows)
        )
        consumer.close()  # LeaveGroup: the group is Empty
        tail.until(lambda rows: any(k[0] == "group" and v and not parse_group_value(v)["members"] for _, k, v in rows))
        admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
        try:
            errors = admin.delete_group_offsets(group, [TopicPartition(TOPIC, 2)])
            assert [e.__name__ for e in errors.values()] == ["NoError"]
            tail.until(lambda rows: any(k[0] == "offset" and v is None for _, k, v in rows))
            assert admin.delete_groups([group]) == {group: "OK"}
        finally:
            admin.close()
        rows = tail.until(lambda rows: any(k == ("group", group) and v is None for _, k, v in rows))
    finally:
        tail.close()
    groups = [(k, v) for _, k, v in rows if k[0] == "group"]
    stable = [parse_group_value(v) for _, v in groups if v is not None and parse_group_value(v)["members"]]
    assert stable, rows
    assert stable[-1]["protocol_type"] == "consumer"
    assert stable[-1]["leader"] == member_id
    (member,) = stable[-1]["members"]
    assert (member["member_id"], member["client_id"], member["session_timeout"]) == (member_id, "ot-client", 6000)
    assert member["subscription"] and member["assignment"]  # the selected protocol's metadata and the assignment
    empty = parse_group_value(groups[-2][1])  # left: Empty, no protocol, no leader, the next generation
    assert (empty["protocol"], empty["leader"], empty["members"]) == (None, None, [])
    assert empty["generation"] == stable[-1]["generation"] + 1
    assert groups[-1][1] is None  # the group tombstone, last
    commits = {k[2:]: parse_offset_value(v) for _, k, v in rows if k[0] == "offset" and v is not None}
    assert {tp: (c["offset"], c["metadata"]) for tp, c in commits.items()} == {
        (TOPIC, p): (11 + p, f"meta-{p}") for p in range(3)
    }
    tombstones = [k[2:] for _, k, v in rows if k[0] == "offset" and v is None]
    assert tombstones == [(TOPIC, 2), (TOPIC, 0), (TOPIC, 1)]  # OffsetDelete first, then DeleteGroups' offsets
    offsets = [o for o, _, _ in rows]
    assert offsets == sorted(offsets)
    after = end_offsets(daemon.bootstrap)
    assert {p for p in range(50) if after[p] != before[p]} == {partition}


def test_the_internal_topic_is_listed_internal_and_refuses_producers(daemon: Daemon) -> None:
    consumer = KafkaConsumer(bootstrap_servers=daemon.bootstrap)
    try:
        assert OFFSETS not in consumer.topics() and TOPIC in consumer.topics()  # what it does with internal topics
        cluster = consumer._client.cluster  # the parsed Metadata, is_internal flags
        assert cluster.internal_topics == {OFFSETS}
        assert cluster.partitions_for_topic(OFFSETS) == set(range(50))
    finally:
        consumer.close()
    # kafka-python's producer refuses an internal topic itself; librdkafka sends the Produce
    errors: list[Any] = []
    producer = ConfluentProducer({"bootstrap.servers": daemon.bootstrap, "message.send.max.retries": 0})
    producer.produce(OFFSETS, b"v", b"k", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(15) == 0
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]  # INVALID_TOPIC_EXCEPTION (17)


def test_a_restart_rebuilds_one_record_per_live_key(daemon: Daemon) -> None:
    group = f"live-{uuid.uuid4().hex[:8]}"
    consumer, _member = join_and_commit(daemon.bootstrap, group)
    for offset in (20, 30, 40):  # superseded commits of partition 0
        consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(offset, "again", -1)})
    consumer.close()
    partition = kafka_partition(group)
    before = read_partition(daemon.bootstrap, partition, lambda rows: False, timeout=3)  # everything there is
    daemon.stop()
    daemon.start()
    rows = read_partition(daemon.bootstrap, partition, lambda rows: False, timeout=3)
    assert rows[0][0] >= before[-1][0] + 1  # offsets only grow: a reader at the old end is not out of range
    mine = [(k, v) for _, k, v in rows if k[1] == group]
    keys = [k for k, _ in mine]
    assert sorted(keys) == sorted([("group", group)] + [("offset", group, TOPIC, p) for p in range(3)])
    values = {k: v for k, v in mine}
    assert parse_offset_value(values[("offset", group, TOPIC, 0)])["offset"] == 40
    assert parse_group_value(values[("group", group)])["members"] == []  # the group is Empty after the close
    assert all(k[1].startswith("live-") for _, k, _ in rows)  # deleted groups left nothing behind
