"""ACLs on the data path and the topic admin APIs, at the adapters against the real broker core: Produce (Write),
Fetch (Read), ListOffsets and Metadata (Describe; auto-creation needs Create), CreateTopics (Create on the cluster
or the topic), DeleteTopics (Delete), FindCoordinator (Describe on the group), InitProducerId (IdempotentWrite on
the cluster or Write on some topic)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from security.acls import AclOperation, Authorizer, PatternType, PermissionType, ResourceType
from tests.api.conftest import Harness
from tests.api.test_acl_adapters import ADMIN, ALICE, BOB, call, creation, grant
from tests.api.test_adapters import _init_producer_id, fetch_fields
from tests.api.test_topics_admin_adapters import TIMEOUT, batch, create_body

T, G = ResourceType.TOPIC, ResourceType.GROUP


@pytest.fixture
def secured(h: Harness) -> Harness:
    h.services.authorizer = Authorizer(enabled=True, super_users=[ADMIN])
    h.topics.add("u", 1)
    return h


def produce_fields(*topics: str) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout": TIMEOUT,
        "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": batch(1)}]} for t in topics],
    }


async def test_produce_needs_write_and_fetch_read(secured: Harness) -> None:
    h = secured
    await grant(h, creation(T, "t", AclOperation.WRITE), creation(T, "u", AclOperation.READ))
    response = await call(h, ALICE, 0, 9, **produce_fields("t", "u", "nope"))
    assert [(r.name, [p.error_code for p in r.partition_responses]) for r in response.responses] == [
        ("t", [ErrorCode.none]),
        ("u", [ErrorCode.topic_authorization_failed]),
        ("nope", [ErrorCode.topic_authorization_failed]),
    ]
    response = await call(h, ALICE, 1, 12, **fetch_fields("t", 0))
    assert [p.error_code for r in response.responses for p in r.partitions] == [ErrorCode.topic_authorization_failed]
    response = await call(h, ALICE, 1, 12, **fetch_fields("u", 0))
    assert [p.error_code for r in response.responses for p in r.partitions] == [ErrorCode.none]
    response = await call(h, ALICE, 2, 7, replica_id=-1, isolation_level=0,
                          topics=[{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}])  # fmt: skip
    assert [p.offset for r in response.topics for p in r.partitions] == [1]  # Write implies Describe
    response = await call(h, BOB, 2, 7, replica_id=-1, isolation_level=0,
                          topics=[{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}])  # fmt: skip
    assert [p.error_code for r in response.topics for p in r.partitions] == [ErrorCode.topic_authorization_failed]


async def test_metadata_describe_and_auto_creation(secured: Harness) -> None:
    h = secured
    h.topics.auto_create = True
    await grant(h, creation(T, "t", AclOperation.DESCRIBE),
                creation(T, "new-", AclOperation.CREATE, pattern=PatternType.PREFIXED),
                creation(T, "new-", AclOperation.DESCRIBE, pattern=PatternType.PREFIXED),
                creation(T, "other", AclOperation.DESCRIBE))  # fmt: skip
    topics = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in ("t", "u", "new-1", "other")]
    response = await call(h, ALICE, 3, 12, topics=topics, allow_auto_topic_creation=True,
                          include_topic_authorized_operations=False)  # fmt: skip
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("t", ErrorCode.none),
        ("u", ErrorCode.topic_authorization_failed),
        ("new-1", ErrorCode.none),  # created: Create on the prefix
        ("other", ErrorCode.topic_authorization_failed),  # missing, and no Create
    ]
    assert h.topics.get("new-1") is not None and h.topics.get("other") is None
    response = await call(h, ALICE, 3, 12, topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)  # fmt: skip
    assert sorted(t.name for t in response.topics) == ["new-1", "t"]


async def test_create_and_delete_topics(secured: Harness) -> None:
    h = secured
    await grant(
        h, creation(T, "a-", AclOperation.CREATE, pattern=PatternType.PREFIXED), creation(T, "u", AclOperation.DELETE)
    )
    r = await call(h, ALICE, ApiKey.CREATE_TOPICS, 7, topics=[create_body("a-1"), create_body("b-1")], timeout=TIMEOUT,
                   validate_only=False)  # fmt: skip
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("a-1", ErrorCode.none),
        ("b-1", ErrorCode.topic_authorization_failed),
    ]
    await grant(h, creation(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CREATE, principal=BOB))
    r = await call(h, BOB, ApiKey.CREATE_TOPICS, 7, topics=[create_body("b-1")], timeout=TIMEOUT, validate_only=False)
    assert [t.error_code for t in r.topics] == [ErrorCode.none]
    r = await call(h, ALICE, ApiKey.DELETE_TOPICS, 5, topic_names=["u", "t"], timeout=TIMEOUT)
    assert [(x.name, x.error_code) for x in r.responses] == [
        ("u", ErrorCode.none),
        ("t", ErrorCode.topic_authorization_failed),
    ]
    assert h.topics.get("u") is None and h.topics.get("t") is not None


async def test_find_coordinator_and_init_producer_id(secured: Harness) -> None:
    h = secured
    await grant(h, creation(G, "g", AclOperation.READ), creation(T, "t", AclOperation.WRITE),
                creation(T, "t", AclOperation.WRITE, principal=BOB, perm=PermissionType.DENY))  # fmt: skip
    r = await call(h, ALICE, 10, 4, key_type=0, coordinator_keys=("g", "h"))
    assert [(c.key, c.error_code) for c in r.coordinators] == [
        ("g", ErrorCode.none),
        ("h", ErrorCode.group_authorization_failed),
    ]
    r = await call(h, BOB, 10, 3, key_type=0, key="g")
    assert r.error_code == ErrorCode.group_authorization_failed
    r = await call(h, ALICE, 22, 4, **_init_producer_id(4))
    assert r.error_code == ErrorCode.none and r.producer_id >= 0
    r = await call(h, BOB, 22, 4, **_init_producer_id(4))
    assert r.error_code == ErrorCode.cluster_authorization_failed
