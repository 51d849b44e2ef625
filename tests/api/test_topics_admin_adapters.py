"""The topic admin adapters, every advertised version, against the real broker core (in memory): each answer
encodes in its version and carries what the version has (v5+ CreateTopics configs, v7 topic ids, DeleteTopics by
id in v6, DescribeConfigs synonyms when asked and config types from v3)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.topics import topic_id_for
from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.errors import ErrorCode

from .conftest import Harness

TIMEOUT = timedelta(seconds=5)


def versions(key: ApiKey) -> list[int]:
    lo, hi = SUPPORTED_VERSIONS[key]
    return list(range(lo, hi + 1))


def batch(n: int) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_000, key=None, value=b"v", headers=[])
    return bytes(b.build())


def create_body(name: str, partitions: int = 2, configs: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    return {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": -1,
        "assignments": (),
        "configs": [{"name": k, "value": v} for k, v in configs],
    }


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
async def test_create_topics_every_version(h: Harness, version: int) -> None:
    topics = [create_body("new", 3, (("retention.ms", "1000"),)), create_body("t"), create_body("bad name")]
    r = await h.respond(ApiKey.CREATE_TOPICS, version, topics=topics, timeout=TIMEOUT, validate_only=False)
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("new", ErrorCode.none),
        ("t", ErrorCode.topic_already_exists),
        ("bad name", ErrorCode.invalid_topic_exception),
    ]
    new = r.topics[0]
    if version >= 5:
        assert (new.num_partitions, new.replication_factor) == (3, 1)
        assert {c.name: (c.value, c.config_source) for c in new.configs}["retention.ms"] == ("1000", 1)
    if version >= 7:
        assert new.topic_id == topic_id_for("new") and r.topics[1].topic_id == uuid.UUID(int=0)
    assert h.topics.get("new").partitions == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_TOPICS))
async def test_delete_topics_every_version(h: Harness, version: int) -> None:
    h.topics.add("gone", 1)
    h.topics.add("gone2", 1)
    if version >= 6:
        fields: dict[str, Any] = {
            "topics": [
                {"name": "gone", "topic_id": uuid.UUID(int=0)},
                {"name": None, "topic_id": topic_id_for("gone2")},
                {"name": None, "topic_id": uuid.uuid4()},
            ]
        }
    else:
        fields = {"topic_names": ["gone", "gone2", "nope"]}
    r = await h.respond(ApiKey.DELETE_TOPICS, version, timeout=TIMEOUT, **fields)
    unknown = ErrorCode.unknown_topic_id if version >= 6 else ErrorCode.unknown_topic_or_partition
    assert [x.error_code for x in r.responses] == [ErrorCode.none, ErrorCode.none, unknown]
    assert [x.name for x in r.responses][:2] == ["gone", "gone2"]
    assert h.topics.get("gone") is None and h.topics.get("gone2") is None


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_PARTITIONS))
async def test_create_partitions_every_version(h: Harness, version: int) -> None:
    topics = [{"name": "t", "count": 5, "assignments": None}, {"name": "nope", "count": 2, "assignments": None}]
    r = await h.respond(ApiKey.CREATE_PARTITIONS, version, topics=topics, timeout=TIMEOUT, validate_only=False)
    assert [(x.name, x.error_code) for x in r.results] == [("t", 0), ("nope", ErrorCode.unknown_topic_or_partition)]
    assert h.topics.get("t").partitions == 5  # type: ignore[union-attr]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CONFIGS))
async def test_describe_configs_every_version(h: Harness, version: int) -> None:
    resources = [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": ["retention.ms"]},
        {"resource_type": 2, "resource_name": "nope", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
    ]
    r = await h.respond(
        ApiKey.DESCRIBE_CONFIGS, version, resources=resources, include_synonyms=True, include_documentation=False
    )
    assert [x.error_code for x in r.results] == [0, ErrorCode.unknown_topic_or_partition, 0]
    [retention] = r.results[0].configs
    assert (retention.name, retention.value, retention.config_source) == ("retention.ms", "604800000", 5)
    assert [(s.name, s.source) for s in retention.synonyms] == [("log.retention.ms", 5)]
    if version >= 3:
        assert retention.config_type == 5  # LONG
    assert "log.retention.ms" in {c.name for c in r.results[2].configs}


@pytest.mark.parametrize(
    ("key", "version"),
    [(ApiKey.INCREMENTAL_ALTER_CONFIGS, v) for v in versions(ApiKey.INCREMENTAL_ALTER_CONFIGS)]
    + [(ApiKey.ALTER_CONFIGS, v) for v in versions(ApiKey.ALTER_CONFIGS)],
)
async def test_alter_configs_every_version(h: Harness, key: ApiKey, version: int) -> None:
    op = {"config_operation": 0} if key == ApiKey.INCREMENTAL_ALTER_CONFIGS else {}
    resources = [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "5", **op}]},
        {"resource_type": 2, "resource_name": "t2", "configs": [{"name": "retention.ms", "value": "5", **op}]},
        {"resource_type": 2, "resource_name": "__consumer_offsets", "configs": []},
    ]
    r = await h.respond(key, version, resources=resources, validate_only=False)
    assert [x.error_code for x in r.responses] == [
        0,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.topic_authorization_failed,
    ]
    assert h.broker.config("t").retention_ms == 5


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_RECORDS))
async def test_delete_records_every_version(h: Harness, version: int) -> None:
    got: list[Any] = []
    h.broker.produce([("t", 1, batch(4))], got.append)
    topics = [{"name": "t", "partitions": [{"partition_index": 1, "offset": 2}, {"partition_index": 0, "offset": 1}]}]
    r = await h.respond(ApiKey.DELETE_RECORDS, version, topics=topics, timeout=TIMEOUT)
    [t] = r.topics
    assert [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions] == [
        (1, 2, 0),
        (0, -1, ErrorCode.offset_out_of_range),
    ]


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
async def test_offset_for_leader_epoch_every_version(h: Harness, version: int) -> None:
    got: list[Any] = []
    h.broker.produce([("t", 0, batch(3))], got.append)
    parts = [
        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
        {"partition": 9, "current_leader_epoch": -1, "leader_epoch": 0},
    ]
    r = await h.respond(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, version, replica_id=-1, topics=[{"topic": "t", "partitions": parts}]
    )
    [t] = r.topics
    assert [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions] == [
        (0, 0, 0, 3),
        (9, ErrorCode.unknown_topic_or_partition, -1, -1),
    ]
