"""KIP-430 authorized operations at the adapters: Metadata (v8-12, topics and cluster), DescribeCluster and
DescribeGroups answer the principal's bitfield when asked, -2^31 when not, as Kafka's
``AuthHelper.authorizedOperations`` fills them (``servers.kafka.authorized``). The Metadata answers are the
hand-encoded ones (``servers.kafka.metadata``): each is decoded with kio here, so the patched bytes are checked to be a
well-formed answer."""

from __future__ import annotations

from typing import Any

import pytest

from security.acls import AclBinding, AclIndex, AclOperation, Authorizer, PatternType, PermissionType, ResourceType
from servers.kafka.authorized import (
    CLUSTER_OPERATIONS,
    GROUP_OPERATIONS,
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    authorized_operations,
)
from tests.api.conftest import Harness
from tests.api.test_acl_adapters import ADMIN, ALICE, BOB, call, creation, grant
from tests.api.test_adapters import commit_fields

O = AclOperation  # noqa: E741


def ops(*operations: AclOperation) -> int:
    value = 0
    for op in operations:
        value |= 1 << op
    return value


def test_the_supported_operations_are_kafkas() -> None:
    # AclEntry.supportedOperations, as bits of the AclOperation codes (READ 3 ... IDEMPOTENT_WRITE 12)
    assert TOPIC_OPERATIONS == ops(O.READ, O.WRITE, O.CREATE, O.DELETE, O.ALTER, O.DESCRIBE, O.DESCRIBE_CONFIGS,
                                   O.ALTER_CONFIGS) == 0b1101_1111_1000  # fmt: skip
    assert ops(O.READ, O.DESCRIBE, O.DELETE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS) == GROUP_OPERATIONS
    assert CLUSTER_OPERATIONS == 0b1_1111_1010_0000
    assert NOT_REQUESTED == -(2**31)


@pytest.fixture
def secured(h: Harness) -> Harness:
    h.services.authorizer = Authorizer(enabled=True, super_users=[ADMIN])
    return h


def _metadata_fields(version: int, topics: list[str] | None, topic_ops: bool, cluster_ops: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": topic_ops,
    }
    if version <= 10:
        fields["include_cluster_authorized_operations"] = cluster_ops
    return fields


@pytest.mark.parametrize("version", range(8, 13))
@pytest.mark.parametrize("every_topic", [False, True])
async def test_metadata_without_an_authorizer_answers_every_supported_operation(
    h: Harness, version: int, every_topic: bool
) -> None:
    topics = None if every_topic else ["t", "missing"]
    for asked in (False, True):
        response = await call(h, ALICE, 3, version, **_metadata_fields(version, topics, asked, asked))
        expected = TOPIC_OPERATIONS if asked else NOT_REQUESTED
        answered = {t.name: (t.error_code, t.topic_authorized_operations) for t in response.topics}
        if every_topic:
            assert answered == {"t": (0, expected)}
        else:  # a topic that does not exist still has the operations (Kafka sets them on every described topic)
            assert answered == {"t": (0, expected), "missing": (3, expected)}
        if version <= 10:
            assert response.cluster_authorized_operations == (CLUSTER_OPERATIONS if asked else NOT_REQUESTED)
    # asked for neither: the shared answer is unchanged afterwards
    response = await call(h, ALICE, 3, version, **_metadata_fields(version, topics, False, False))
    assert {t.topic_authorized_operations for t in response.topics} == {NOT_REQUESTED}


@pytest.mark.parametrize("version", range(8, 13))
async def test_metadata_answers_the_principals_topic_and_cluster_operations(secured: Harness, version: int) -> None:
    h = secured
    h.topics.add("a-one", 1)
    h.topics.add("a-two", 1)
    await grant(
        h,
        creation(ResourceType.TOPIC, "a-", O.READ, pattern=PatternType.PREFIXED),
        creation(ResourceType.TOPIC, "a-two", O.WRITE),
        creation(ResourceType.TOPIC, "a-two", O.ALTER_CONFIGS),
        creation(ResourceType.TOPIC, "a-two", O.DESCRIBE, perm=PermissionType.DENY, host="10.0.0.9"),  # not this host
        creation(ResourceType.TOPIC, "a-one", O.WRITE, perm=PermissionType.DENY),
        creation(ResourceType.CLUSTER, "kafka-cluster", O.IDEMPOTENT_WRITE),
        creation(ResourceType.CLUSTER, "kafka-cluster", O.CREATE, principal=BOB),
    )
    response = await call(h, ALICE, 3, version, **_metadata_fields(version, ["a-one", "a-two", "t"], True, True))
    answered = {t.name: (t.error_code, t.topic_authorized_operations) for t in response.topics}
    assert answered == {
        "a-one": (0, ops(O.READ, O.DESCRIBE)),  # Read implies Describe; the DENY on Write removes nothing granted
        "a-two": (0, ops(O.READ, O.WRITE, O.DESCRIBE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS)),  # AlterConfigs implies
        "t": (29, NOT_REQUESTED),  # TOPIC_AUTHORIZATION_FAILED: no bits for a topic it may not describe
    }
    if version <= 10:  # IdempotentWrite alone does not allow Describe on the cluster: Kafka answers 0
        assert response.cluster_authorized_operations == 0
    # Bob may Create on the cluster, which implies nothing else; granting Describe makes the bits appear
    await grant(h, creation(ResourceType.CLUSTER, "kafka-cluster", O.DESCRIBE, principal=BOB))
    response = await call(h, BOB, 3, version, **_metadata_fields(version, None, True, True))
    assert [t.name for t in response.topics] == []  # Bob may describe no topic
    if version <= 10:
        assert response.cluster_authorized_operations == ops(O.CREATE, O.DESCRIBE)
    # the super user: everything, for every topic listed
    response = await call(h, ADMIN, 3, version, **_metadata_fields(version, None, True, True))
    assert {t.name: t.topic_authorized_operations for t in response.topics} == {
        "t": TOPIC_OPERATIONS, "a-one": TOPIC_OPERATIONS, "a-two": TOPIC_OPERATIONS,
    }  # fmt: skip
    if version <= 10:
        assert response.cluster_authorized_operations == CLUSTER_OPERATIONS


async def test_metadata_by_topic_id_has_the_operations_of_known_ids(secured: Harness) -> None:
    import uuid

    h = secured
    await grant(h, creation(ResourceType.TOPIC, "t", O.ALL))
    known = h.topics.get("t")
    assert known is not None
    unknown = uuid.uuid4()
    response = await call(
        h, ALICE, 3, 12, topics=[{"name": None, "topic_id": known.topic_id}, {"name": None, "topic_id": unknown}],
        allow_auto_topic_creation=False, include_topic_authorized_operations=True,
    )  # fmt: skip
    answered = {t.topic_id: (t.error_code, t.topic_authorized_operations) for t in response.topics}
    assert answered == {known.topic_id: (0, TOPIC_OPERATIONS), unknown: (100, NOT_REQUESTED)}


@pytest.mark.parametrize("version", range(0, 3))
async def test_describe_cluster_answers_the_principals_cluster_operations(secured: Harness, version: int) -> None:
    h = secured
    extra: dict[str, Any] = {"endpoint_type": 1} if version >= 1 else {}
    if version >= 2:
        extra["include_fenced_brokers"] = False
    await grant(h, creation(ResourceType.CLUSTER, "kafka-cluster", O.ALTER))  # Alter implies Describe
    response = await call(h, ALICE, 60, version, include_cluster_authorized_operations=True, **extra)
    assert response.cluster_authorized_operations == ops(O.ALTER, O.DESCRIBE)
    response = await call(h, BOB, 60, version, include_cluster_authorized_operations=True, **extra)
    assert response.cluster_authorized_operations == 0  # no Describe on the cluster
    response = await call(h, ALICE, 60, version, include_cluster_authorized_operations=False, **extra)
    assert response.cluster_authorized_operations == NOT_REQUESTED


@pytest.mark.parametrize("version", range(3, 6))
async def test_describe_groups_bits_per_group_and_none_for_refused_groups(secured: Harness, version: int) -> None:
    h = secured
    await grant(
        h,
        creation(ResourceType.GROUP, "g-", O.ALL, pattern=PatternType.PREFIXED),
        creation(ResourceType.GROUP, "g-locked", O.DELETE, perm=PermissionType.DENY),
        creation(ResourceType.GROUP, "h", O.DESCRIBE),
    )
    for g in ("g-open", "g-locked", "h"):
        await call(h, ADMIN, 8, 9, **commit_fields([("t", [(0, 1)])], group=g))
    described = await call(h, ALICE, 15, version, groups=["g-open", "g-locked", "h", "other", "g-absent"],
                           include_authorized_operations=True)  # fmt: skip
    assert [(g.group_id, g.error_code, g.authorized_operations) for g in described.groups] == [
        ("g-open", 0, GROUP_OPERATIONS),
        ("g-locked", 0, GROUP_OPERATIONS & ~ops(O.DELETE)),
        ("h", 0, ops(O.DESCRIBE)),
        ("other", 30, NOT_REQUESTED),  # GROUP_AUTHORIZATION_FAILED: no bits
        ("g-absent", 0, GROUP_OPERATIONS),  # Dead, no error: Kafka fills it too
    ]
    described = await call(h, ALICE, 15, version, groups=["g-open"], include_authorized_operations=False)
    assert described.groups[0].authorized_operations == NOT_REQUESTED


async def test_describe_groups_without_an_authorizer_answers_every_group_operation(h: Harness) -> None:
    await call(h, ALICE, 8, 9, **commit_fields([("t", [(0, 1)])], group="g"))
    described = await call(h, ALICE, 15, 5, groups=["g"], include_authorized_operations=True)
    assert described.groups[0].authorized_operations == GROUP_OPERATIONS


def test_the_bitfield_costs_the_same_with_ten_thousand_acls_elsewhere() -> None:
    """The check looks only at the bindings matching the resource, and its decisions are cached: 10,000 ACLs on
    other topics and groups leave the bindings examined for one resource's bitfield unchanged (counted, not timed)."""

    class Counting(AclIndex):
        examined = 0

        def applicable(self, resource_type: ResourceType, name: str) -> Any:
            for b in super().applicable(resource_type, name):
                Counting.examined += 1
                yield b

    def examined(extra: int) -> tuple[int, int]:
        index = Counting()
        index.add(AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, ALICE, "*", O.READ, PermissionType.ALLOW))
        for i in range(extra):
            rt = ResourceType.TOPIC if i % 2 else ResourceType.GROUP
            index.add(AclBinding(rt, f"r{i}", PatternType.LITERAL, ALICE, "*", O.READ, PermissionType.ALLOW))
        authorizer = Authorizer(index, enabled=True)
        Counting.examined = 0
        first = authorized_operations(authorizer, ALICE, "/10.0.0.1", ResourceType.TOPIC, "t")
        cold = Counting.examined
        assert first == ops(O.READ, O.DESCRIBE)
        for _ in range(100):
            assert authorized_operations(authorizer, ALICE, "/10.0.0.1", ResourceType.TOPIC, "t") == first
        return cold, Counting.examined - cold

    assert examined(0) == examined(10_000) == (8, 0)  # one binding per supported operation, then the cache


async def test_the_kept_bitfields_follow_an_acl_change_at_once(secured: Harness) -> None:
    h = secured
    await call(h, ADMIN, 8, 9, **commit_fields([("t", [(0, 1)])], group="g"))
    await grant(h, creation(ResourceType.GROUP, "g", O.DESCRIBE))

    async def bits() -> int:
        described = await call(h, ALICE, 15, 5, groups=["g"], include_authorized_operations=True)
        return int(described.groups[0].authorized_operations)

    assert await bits() == await bits() == ops(O.DESCRIBE)
    await grant(h, creation(ResourceType.GROUP, "g", O.DELETE))
    assert await bits() == ops(O.DESCRIBE, O.DELETE)
    await grant(h, creation(ResourceType.GROUP, "g", O.DELETE, perm=PermissionType.DENY))
    assert await bits() == ops(O.DESCRIBE)
