"""ACLs at the adapters, against the real core: CreateAcls / DescribeAcls / DeleteAcls, and Kafka's checks and
errors in the group, offset and admin APIs for principals allowed and denied (``security.acls``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kio.index import load_request_schema

from protocol.codec import decode_response_frame, encode_response
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from security.acls import AclBinding, AclOperation, Authorizer, PatternType, PermissionType, ResourceType
from servers.kafka import HANDLERS, RequestContext
from servers.kafka.build import build
from tests.api.conftest import Harness
from tests.api.test_adapters import commit_fields

ADMIN, ALICE, BOB = "User:admin", "User:alice", "User:bob"


async def call(h: Harness, principal: str, api_key: int, version: int, **fields: Any) -> Any:
    body = build(load_request_schema(api_key, version), fields)
    ctx = RequestContext(api_key, version, 1, "cid", "/10.0.0.1", principal=principal)
    result = HANDLERS[api_key](h.services, ctx, body)
    if hasattr(result, "__await__"):
        result = await result
    if isinstance(result, bytes):
        _, result = decode_response_frame(api_key, version, result)
    encode_response(RequestHeader(api_key, version, 1, "cid"), result)
    return result


def creation(
    rt: ResourceType,
    name: str,
    op: AclOperation,
    principal: str = ALICE,
    perm: PermissionType = PermissionType.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> dict[str, Any]:
    return {
        "resource_type": rt,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": op,
        "permission_type": perm,
    }


ANY_FILTER = {
    "resource_type_filter": ResourceType.ANY,
    "resource_name_filter": None,
    "pattern_type_filter": PatternType.ANY,
    "principal_filter": None,
    "host_filter": None,
    "operation": AclOperation.ANY,
    "permission_type": PermissionType.ANY,
}


@pytest.fixture
def secured(h: Harness) -> Harness:
    h.services.authorizer = Authorizer(enabled=True, super_users=[ADMIN])
    return h


async def grant(h: Harness, *creations: dict[str, Any]) -> None:
    response = await call(h, ADMIN, 30, 3, creations=list(creations))
    assert [r.error_code for r in response.results] == [ErrorCode.none] * len(creations)


async def test_acl_apis_answer_security_disabled_without_an_authorizer(h: Harness) -> None:
    response = await call(h, ALICE, 29, 1, **ANY_FILTER)
    assert response.error_code == ErrorCode.security_disabled
    response = await call(h, ALICE, 30, 2, creations=[creation(ResourceType.GROUP, "g", AclOperation.READ)])
    assert [r.error_code for r in response.results] == [ErrorCode.security_disabled]


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_create_describe_delete_every_version(secured: Harness, version: int) -> None:
    h = secured
    response = await call(
        h,
        ADMIN,
        30,
        version,
        creations=[
            creation(ResourceType.GROUP, "g", AclOperation.READ),
            creation(ResourceType.TOPIC, "pay.", AclOperation.WRITE, pattern=PatternType.PREFIXED),
            creation(ResourceType.ANY, "x", AclOperation.READ),  # invalid
            creation(ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER, principal=BOB),
        ],
    )
    assert [r.error_code for r in response.results] == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.invalid_request,
        ErrorCode.none,
    ]
    assert len(h.services.authorizer.index) == 3
    described = await call(h, ADMIN, 29, version, **ANY_FILTER)
    assert described.error_code == ErrorCode.none
    found = {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation)
        for r in described.resources
        for a in r.acls
    }
    assert found == {
        (ResourceType.GROUP, "g", PatternType.LITERAL, ALICE, AclOperation.READ),
        (ResourceType.TOPIC, "pay.", PatternType.PREFIXED, ALICE, AclOperation.WRITE),
        (ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, BOB, AclOperation.ALTER),
    }
    # MATCH: the ACLs that apply to topic pay.eu
    match = {**ANY_FILTER, "resource_type_filter": ResourceType.TOPIC, "resource_name_filter": "pay.eu",
             "pattern_type_filter": PatternType.MATCH}  # fmt: skip
    described = await call(h, ADMIN, 29, version, **match)
    assert [(r.resource_name, r.pattern_type) for r in described.resources] == [("pay.", PatternType.PREFIXED)]
    # bob may alter the cluster: he deletes alice's group ACL
    deleted = await call(h, BOB, 31, version, filters=[{**ANY_FILTER, "resource_type_filter": ResourceType.GROUP}])
    [result] = deleted.filter_results
    assert result.error_code == ErrorCode.none
    assert [(a.resource_name, a.principal) for a in result.matching_acls] == [("g", ALICE)]
    assert len(h.services.authorizer.index) == 2


async def test_acl_apis_need_cluster_describe_and_alter(secured: Harness) -> None:
    h = secured
    response = await call(h, ALICE, 29, 3, **ANY_FILTER)
    assert response.error_code == ErrorCode.cluster_authorization_failed
    response = await call(h, ALICE, 30, 3, creations=[creation(ResourceType.GROUP, "g", AclOperation.READ)])
    assert [r.error_code for r in response.results] == [ErrorCode.cluster_authorization_failed]
    response = await call(h, ALICE, 31, 3, filters=[ANY_FILTER])
    assert [r.error_code for r in response.filter_results] == [ErrorCode.cluster_authorization_failed]
    assert len(h.services.authorizer.index) == 0


async def test_group_apis_need_read_on_the_group(secured: Harness) -> None:
    h = secured
    await grant(h, creation(ResourceType.GROUP, "g", AclOperation.READ))
    ten_s = timedelta(seconds=10)
    join = {
        "group_id": "other",
        "session_timeout": ten_s,
        "rebalance_timeout": ten_s,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m"}],
    }
    response = await call(h, ALICE, 11, 9, **join)
    assert response.error_code == ErrorCode.group_authorization_failed
    response = await call(h, ALICE, 11, 9, **{**join, "group_id": "g"})
    assert response.error_code == ErrorCode.member_id_required  # allowed: the core answers
    response = await call(h, BOB, 11, 9, **{**join, "group_id": "g"})
    assert response.error_code == ErrorCode.group_authorization_failed
    for key, version, fields in (
        (14, 5, {"generation_id": 1, "member_id": "m", "protocol_type": "consumer", "protocol_name": "range",
                 "assignments": []}),
        (12, 4, {"generation_id": 1, "member_id": "m"}),
        (13, 5, {"members": [{"member_id": "m"}]}),
        (13, 1, {"member_id": "m"}),
    ):  # fmt: skip
        response = await call(h, BOB, key, version, group_id="g", **fields)
        assert response.error_code == ErrorCode.group_authorization_failed, key
        response = await call(h, ALICE, key, version, group_id="g", **fields)
        assert response.error_code != ErrorCode.group_authorization_failed, key


async def test_commit_needs_read_on_group_and_topic(secured: Harness) -> None:
    h = secured
    h.topics.add("u", 1)
    await grant(
        h, creation(ResourceType.GROUP, "g", AclOperation.READ), creation(ResourceType.TOPIC, "t", AclOperation.READ)
    )
    fields = commit_fields([("t", [(0, 5)]), ("u", [(0, 6)]), ("nope", [(0, 1)])], group="g")
    response = await call(h, ALICE, 8, 9, **fields)
    errors = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    assert errors == {
        ("t", 0): ErrorCode.none,
        ("u", 0): ErrorCode.topic_authorization_failed,
        ("nope", 0): ErrorCode.topic_authorization_failed,  # before the existence check: nothing disclosed
    }
    response = await call(h, BOB, 8, 9, **fields)
    assert {p.error_code for t in response.topics for p in t.partitions} == {ErrorCode.group_authorization_failed}
    # OffsetFetch: Describe on the group (implied by Read) and on each topic
    response = await call(h, ALICE, 9, 7, group_id="g", topics=None)
    assert response.error_code == ErrorCode.none
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in response.topics] == [("t", [5])]
    response = await call(
        h,
        ALICE,
        9,
        7,
        group_id="g",
        topics=[{"name": "t", "partition_indexes": [0]}, {"name": "u", "partition_indexes": [0]}],
    )
    assert [(t.name, p.committed_offset, p.error_code) for t in response.topics for p in t.partitions] == [
        ("t", 5, ErrorCode.none),
        ("u", -1, ErrorCode.topic_authorization_failed),
    ]
    response = await call(h, BOB, 9, 7, group_id="g", topics=None)
    assert response.error_code == ErrorCode.group_authorization_failed
    response = await call(h, ALICE, 9, 8, groups=[{"group_id": "g", "topics": None}, {"group_id": "x", "topics": None}])
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("g", ErrorCode.none),
        ("x", ErrorCode.group_authorization_failed),
    ]


async def test_describe_list_delete_groups(secured: Harness) -> None:
    h = secured
    await grant(
        h,
        creation(ResourceType.GROUP, "team-", AclOperation.DESCRIBE, pattern=PatternType.PREFIXED),
        creation(ResourceType.GROUP, "team-a", AclOperation.DELETE),
        creation(ResourceType.GROUP, "team-b", AclOperation.DELETE, perm=PermissionType.DENY),
        creation(ResourceType.GROUP, "team-b", AclOperation.ALL),
    )
    for g in ("team-a", "team-b", "other"):  # three groups with offsets (Empty)
        await call(h, ADMIN, 8, 9, **commit_fields([("t", [(0, 1)])], group=g))
    listed = await call(h, ALICE, 16, 4, states_filter=[])
    assert sorted(g.group_id for g in listed.groups) == ["team-a", "team-b"]
    listed = await call(h, ADMIN, 16, 4, states_filter=[])
    assert sorted(g.group_id for g in listed.groups) == ["other", "team-a", "team-b"]
    described = await call(h, ALICE, 15, 5, groups=["team-a", "other"], include_authorized_operations=False)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("team-a", ErrorCode.none),
        ("other", ErrorCode.group_authorization_failed),
    ]
    deleted = await call(h, ALICE, 42, 2, groups_names=["team-a", "team-b", "other"])
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("team-a", ErrorCode.none),
        ("team-b", ErrorCode.group_authorization_failed),  # DENY Delete wins over ALLOW All
        ("other", ErrorCode.group_authorization_failed),
    ]
    response = await call(
        h, ALICE, 47, 0, group_id="team-b", topics=[{"name": "t", "partitions": [{"partition_index": 0}]}]
    )
    assert response.error_code == ErrorCode.group_authorization_failed


async def test_everything_allowed_with_the_authorizer_off(h: Harness) -> None:
    h.services.authorizer.index.add(
        AclBinding(ResourceType.GROUP, "*", PatternType.LITERAL, "User:*", "*", AclOperation.ALL, PermissionType.DENY)
    )
    await call(h, ALICE, 8, 9, **commit_fields([("t", [(0, 1)])], group="g"))
    listed = await call(h, ALICE, 16, 4, states_filter=[])
    assert [g.group_id for g in listed.groups] == ["g"]


async def test_describe_groups_authorized_operations_are_the_principals(secured: Harness) -> None:
    h = secured
    await grant(h, creation(ResourceType.GROUP, "g", AclOperation.READ))
    await call(h, ADMIN, 8, 9, **commit_fields([("t", [(0, 1)])], group="g"))
    described = await call(h, ALICE, 15, 5, groups=["g"], include_authorized_operations=True)
    [g] = described.groups
    assert g.authorized_operations == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)


@pytest.mark.parametrize("seed", range(5))
async def test_acl_apis_survive_any_enum_values(secured: Harness, seed: int) -> None:
    """Any int8 in the enum fields, names and filters null or not: a per-entry error or success, never an exception."""
    import random

    rnd = random.Random(seed)

    def i8() -> int:
        return rnd.choice([rnd.randint(-128, 127), rnd.randint(0, 8)])

    def text() -> str:
        return rnd.choice(["", "*", "g", "kafka-cluster", "User:x", "x" * 300, "é"])

    h = secured
    for _ in range(40):
        version = rnd.randint(1, 3)
        creations = [
            {"resource_type": i8(), "resource_name": text(), "resource_pattern_type": i8(), "principal": text(),
             "host": text(), "operation": i8(), "permission_type": i8()}
            for _ in range(rnd.randint(0, 4))
        ]  # fmt: skip
        response = await call(h, ADMIN, 30, version, creations=creations)
        assert len(response.results) == len(creations)
        flt = {"resource_type_filter": i8(), "resource_name_filter": rnd.choice([None, text()]),
               "pattern_type_filter": i8(), "principal_filter": rnd.choice([None, text()]),
               "host_filter": rnd.choice([None, text()]), "operation": i8(), "permission_type": i8()}  # fmt: skip
        await call(h, ADMIN, 29, version, **flt)
        response = await call(h, ADMIN, 31, version, filters=[flt])
        assert len(response.filter_results) == 1


async def test_describe_configs_checks_each_resource_type_as_kafka(secured: Harness) -> None:
    """A group's configs (type 32) need DescribeConfigs on the group, a broker logger's (8) on the cluster - not an
    ACL on a topic of the same name (they were checked as topics)."""
    await grant(secured, creation(ResourceType.TOPIC, "g", AclOperation.DESCRIBE_CONFIGS),
                creation(ResourceType.TOPIC, "0", AclOperation.DESCRIBE_CONFIGS))  # fmt: skip
    resources = [{"resource_type": t, "resource_name": n, "configuration_keys": None} for t, n in ((32, "g"), (8, "0"))]
    response = await call(secured, ALICE, 32, 4, resources=resources, include_synonyms=False,
                          include_documentation=False)  # fmt: skip
    assert [r.error_code for r in response.results] == [
        ErrorCode.group_authorization_failed,
        ErrorCode.cluster_authorization_failed,
    ]
    await grant(secured, creation(ResourceType.GROUP, "g", AclOperation.DESCRIBE_CONFIGS))
    response = await call(secured, ALICE, 32, 4, resources=resources[:1], include_synonyms=False,
                          include_documentation=False)  # fmt: skip
    assert [r.error_code for r in response.results] == [ErrorCode.invalid_request]  # allowed; no group configs here
