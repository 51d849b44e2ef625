"""The topic admin APIs end to end: the real daemon (SQLite), the admin clients of kafka-python 3.0.12
(KafkaAdminClient), aiokafka 0.14 (AIOKafkaAdminClient) and confluent-kafka (AdminClient): create topics (with
configs, validate_only, errors), describe and alter configs, create partitions, delete records, delete topics; and
retention through the daemon: a consumer fetching below the new log start is reset to it."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import kafka.errors as kerrors
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry
from confluent_kafka.admin import ConfigResource as CkConfigResource
from confluent_kafka.admin import NewPartitions as CkNewPartitions
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.structs import TopicPartition

from .daemon import DEFAULT_ARGS, Daemon
from .helpers import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(
        tmp_path_factory.mktemp("admin"),
        topics=(),
        extra_args=(
            *DEFAULT_ARGS,
            "--set",
            "log.retention.check.interval.ms=200",
            "--set",
            "auto.create.topics.enable=false",
        ),
    ).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"
    assert " ERROR " not in d.log_text() and "level=ERROR" not in d.log_text()


def name(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


def produce(daemon: Daemon, topic: str, count: int, *, partition: int = 0, timestamp_ms: int | None = None) -> None:
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap, enable_idempotence=False, acks="all")
    try:
        for i in range(count):
            producer.send(topic, b"v%d" % i, partition=partition, timestamp_ms=timestamp_ms)
            producer.flush()  # one batch each
    finally:
        producer.close()


def http_topics(daemon: Daemon) -> dict[str, Any]:
    with urllib.request.urlopen(f"{daemon.http_url}/v1/topics", timeout=5) as r:
        return {t["name"]: t for t in json.load(r)["topics"]}


def earliest(daemon: Daemon, topic: str, partition: int = 0) -> int:
    consumer = KafkaConsumer(bootstrap_servers=daemon.bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.beginning_offsets([tp])[tp])
    finally:
        consumer.close()


def test_kafka_python_admin(daemon: Daemon) -> None:
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        topic, other = name("kp"), name("kp-other")
        admin.create_topics(
            {topic: {"num_partitions": 2, "replication_factor": 1, "configs": {"retention.ms": "3600000"}}}
        )
        admin.create_topics({other: {}})  # -1 / -1: num.partitions, one replica
        with pytest.raises(kerrors.TopicAlreadyExistsError):
            admin.create_topics({topic: {"num_partitions": 2}})
        with pytest.raises(kerrors.InvalidReplicationFactorError):
            admin.create_topics({name("rf"): {"num_partitions": 1, "replication_factor": 3}})
        with pytest.raises(kerrors.InvalidConfigurationError):
            admin.create_topics({name("cp"): {"num_partitions": 1, "configs": {"cleanup.policy": "compact"}}})
        checked = name("validate")
        admin.create_topics({checked: {"num_partitions": 1}}, validate_only=True)
        assert set(admin.list_topics()) >= {topic, other} and checked not in admin.list_topics()

        def configs() -> dict[str, tuple[str, str]]:
            got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
            return {k: (v["value"], v["config_source"]) for k, v in got["topic"][topic].items()}

        assert configs() == {
            "cleanup.policy": ("delete", "DEFAULT_CONFIG"),
            "max.message.bytes": ("1048588", "DEFAULT_CONFIG"),
            "message.timestamp.type": ("CreateTime", "DEFAULT_CONFIG"),
            "retention.bytes": ("-1", "DEFAULT_CONFIG"),
            "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
        }
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.bytes": (AlterConfigOp.SET, "100000")})],
            raise_on_unknown=False,
        )
        assert configs()["retention.bytes"] == ("100000", "DYNAMIC_TOPIC_CONFIG")
        assert configs()["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")  # incremental: the rest stays

        admin.create_partitions({topic: 4})
        with pytest.raises(kerrors.InvalidPartitionsError):
            admin.create_partitions({topic: 3})
        produce(daemon, topic, 5, partition=3)
        deleted = admin.delete_records({TopicPartition(topic, 3): 2})
        assert deleted[TopicPartition(topic, 3)]["low_watermark"] == 2
        assert earliest(daemon, topic, 3) == 2
        admin.delete_topics([topic, other])
        wait_for(lambda: topic not in admin.list_topics(), 10, "topic gone from Metadata")
        with pytest.raises(kerrors.UnknownTopicOrPartitionError):
            admin.delete_topics([topic])
    finally:
        admin.close()


def test_aiokafka_admin(daemon: Daemon) -> None:
    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=daemon.bootstrap)
        await admin.start()
        try:
            topic = name("aio")
            response = await admin.create_topics([AioNewTopic(topic, 2, 1, topic_configs={"retention.ms": "600000"})])
            assert [e[:2] for e in response.topic_errors] == [(topic, 0)]

            async def configs() -> dict[str, tuple[str, int]]:
                [described] = await admin.describe_configs([AioConfigResource(AioConfigResourceType.TOPIC, topic)])
                [resource] = described.resources
                assert resource[0] == 0
                return {e[0]: (e[1], e[3]) for e in resource[4]}

            assert (await configs())["retention.ms"] == ("600000", 1)
            [altered] = await admin.alter_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, topic, {"retention.bytes": "5000"})]
            )
            assert [r[0] for r in altered.resources] == [0]
            now = await configs()  # AlterConfigs replaces the topic's configs: retention.ms back to its default
            assert now["retention.bytes"] == ("5000", 1) and now["retention.ms"] == ("604800000", 5)
            await admin.create_partitions({topic: NewPartitions(3)})
            produce(daemon, topic, 4, partition=2)
            low = await admin.delete_records({AioTopicPartition(topic, 2): RecordsToDelete(3)})
            assert low == {AioTopicPartition(topic, 2): 3}
            response = await admin.delete_topics([topic])
            assert [e[:2] for e in response.topic_error_codes] == [(topic, 0)]
            assert topic not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(run())


def test_confluent_admin(daemon: Daemon) -> None:
    admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    topic = name("ck")
    for future in admin.create_topics([CkNewTopic(topic, 2, 1, config={"retention.ms": "900000"})]).values():
        future.result(10)
    [future] = admin.create_topics([CkNewTopic(topic, 2, 1)]).values()
    with pytest.raises(KafkaException) as e:
        future.result(10)
    assert e.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    [future] = admin.describe_configs([CkConfigResource("topic", topic)]).values()
    configs = future.result(10)
    assert {k: (v.value, int(v.source)) for k, v in configs.items()} == {
        "cleanup.policy": ("delete", 5),
        "max.message.bytes": ("1048588", 5),
        "message.timestamp.type": ("CreateTime", 5),
        "retention.bytes": ("-1", 5),
        "retention.ms": ("900000", 1),
    }
    resource = CkConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("retention.bytes", "7000", incremental_operation=AlterConfigOpType.SET)],
    )
    [future] = admin.incremental_alter_configs([resource]).values()
    future.result(10)
    [future] = admin.describe_configs([CkConfigResource("topic", topic)]).values()
    configs = future.result(10)
    assert configs["retention.bytes"].value == "7000" and configs["retention.ms"].value == "900000"
    [future] = admin.create_partitions([CkNewPartitions(topic, 3)]).values()
    future.result(10)
    produce(daemon, topic, 3, partition=2)
    [future] = admin.delete_records([CkTopicPartition(topic, 2, 2)]).values()
    assert future.result(10).low_watermark == 2
    [future] = admin.delete_records([CkTopicPartition(topic, 2, 9)]).values()  # beyond the high watermark
    with pytest.raises(KafkaException) as e:
        future.result(10)
    assert e.value.args[0].name() == "OFFSET_OUT_OF_RANGE"
    for future in admin.delete_topics([topic]).values():
        future.result(10)
    assert topic not in admin.list_topics(timeout=10).topics


def test_retention_moves_the_log_start_and_resets_a_consumer(daemon: Daemon) -> None:
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    topic = name("ret")
    try:
        admin.create_topics({topic: {"num_partitions": 1, "configs": {"retention.ms": "60000"}}})
    finally:
        admin.close()
    old = int(time.time() * 1000) - 600_000
    produce(daemon, topic, 5, timestamp_ms=old)  # ten minutes old: beyond retention.ms
    wait_for(lambda: earliest(daemon, topic) == 5, 10, "retention moved the log start")
    [partition] = http_topics(daemon)[topic]["log"]  # the operator API sees the same
    assert (partition["log_start_offset"], partition["log_end_offset"], partition["size_bytes"]) == (5, 5, 0)
    with urllib.request.urlopen(f"{daemon.http_url}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    [deleted] = [line for line in metrics.splitlines() if line.startswith("kgc_log_deleted_batches_total ")]
    assert float(deleted.split()[1]) >= 5
    produce(daemon, topic, 3)
    consumer = KafkaConsumer(bootstrap_servers=daemon.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)  # below the log start: OFFSET_OUT_OF_RANGE, reset to the earliest
        got: list[Any] = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got.extend(records)
        assert [(r.offset, r.value) for r in got] == [(5, b"v0"), (6, b"v1"), (7, b"v2")]
    finally:
        consumer.close()
