"""Version rules of the API adapters (docs/semantics.md §4 and §12)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.topics import topic_id_for
from coordinator import messages as m
from protocol.codec import decode_response_frame
from protocol.errors import ErrorCode
from servers.kafka.membership import join_request
from servers.kafka.offsets import _fetched_topics

from .conftest import Harness


def ms(value: int) -> timedelta:
    return timedelta(milliseconds=value)


def join_fields(**extra: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "group_id": "g",
        "session_timeout": ms(10_000),
        "rebalance_timeout": ms(20_000),
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta"}],
    }
    fields.update(extra)
    return fields


# ------------------------------------------------------------------------------------------------------ JoinGroup


def test_join_v0_rebalance_timeout_is_the_session_timeout(h: Harness) -> None:
    from kio.index import load_request_schema

    from servers.kafka import RequestContext
    from servers.kafka.build import build

    ctx = RequestContext(11, 0, 1, "client-a", "/1.2.3.4")
    body = build(load_request_schema(11, 0), join_fields())
    request = join_request(ctx, body)
    assert (request.session_timeout_ms, request.rebalance_timeout_ms) == (10_000, 10_000)
    assert (request.client_id, request.client_host) == ("client-a", "/1.2.3.4")
    ctx1 = RequestContext(11, 1, 1, "client-a", "/1.2.3.4")
    assert join_request(ctx1, build(load_request_schema(11, 1), join_fields())).rebalance_timeout_ms == 20_000


@pytest.mark.parametrize("version", range(10))
def test_join_request_carries_every_field_its_version_has(version: int) -> None:
    from kio.index import load_request_schema

    from servers.kafka import RequestContext
    from servers.kafka.build import build

    ctx = RequestContext(11, version, 1, "client-a", "/1.2.3.4")
    fields = join_fields(
        member_id="m-1", protocols=[{"name": "range", "metadata": b"r"}, {"name": "rr", "metadata": b""}]
    )
    if version >= 5:
        fields["group_instance_id"] = "instance-1"
    if version >= 8:
        fields["reason"] = "rejoin: metadata changed"
    request = join_request(ctx, build(load_request_schema(11, version), fields))
    assert request == m.JoinGroupRequest(
        group_id="g",
        member_id="m-1",
        group_instance_id="instance-1" if version >= 5 else None,
        protocol_type="consumer",
        protocols=[("range", b"r"), ("rr", b"")],
        session_timeout_ms=10_000,
        rebalance_timeout_ms=20_000 if version >= 1 else 10_000,
        client_id="client-a",
        client_host="/1.2.3.4",
        api_version=version,
        reason="rejoin: metadata changed" if version >= 8 else None,
    )


@pytest.mark.parametrize("version", range(6))
def test_sync_request_carries_every_field_its_version_has(version: int) -> None:
    from kio.index import load_request_schema

    from servers.kafka import RequestContext
    from servers.kafka.build import build
    from servers.kafka.membership import sync_request

    ctx = RequestContext(14, version, 1, "client-a", "/1.2.3.4")
    fields: dict[str, Any] = {
        "group_id": "g",
        "generation_id": 7,
        "member_id": "m-1",
        "assignments": [{"member_id": "m-1", "assignment": b"a1"}, {"member_id": "m-2", "assignment": b""}],
    }
    if version >= 3:
        fields["group_instance_id"] = "instance-1"
    if version >= 5:
        fields.update(protocol_type="consumer", protocol_name="range")
    request = sync_request(ctx, build(load_request_schema(14, version), fields))
    assert request == m.SyncGroupRequest(
        group_id="g",
        generation_id=7,
        member_id="m-1",
        group_instance_id="instance-1" if version >= 3 else None,
        protocol_type="consumer" if version >= 5 else None,
        protocol_name="range" if version >= 5 else None,
        assignments=[("m-1", b"a1"), ("m-2", b"")],
        api_version=version,
    )


@pytest.mark.parametrize(("version", "expected_name"), [(5, ""), (6, ""), (7, None), (9, None)])
async def test_join_error_protocol_name_null_or_empty_by_version(
    h: Harness, version: int, expected_name: str | None
) -> None:
    response = await h.respond(11, version, **join_fields(session_timeout=ms(10)))  # below the minimum
    assert response.error_code == ErrorCode.invalid_session_timeout
    assert response.protocol_name == expected_name
    if version >= 7:
        assert response.protocol_type is None


async def test_join_v4_plus_requires_a_member_id_and_v3_joins_at_once(h: Harness) -> None:
    response = await h.respond(11, 4, **join_fields())
    assert response.error_code == ErrorCode.member_id_required
    assert response.member_id.startswith("cid-")
    parked = h.call(11, 3, **join_fields(group_id="g3"))
    assert hasattr(parked, "__await__")  # parked until the (zero) initial delay fires
    h.timer.advance(0)
    correlation_id, joined = decode_response_frame(11, 3, await parked)  # the answer is a finished frame
    assert correlation_id == 1
    assert joined.error_code == ErrorCode.none
    assert (joined.generation_id, joined.protocol_name, joined.leader) == (1, "range", joined.member_id)
    assert [(x.member_id, x.metadata) for x in joined.members] == [(joined.member_id, b"meta")]


# ------------------------------------------------------------------------------------------------------ SyncGroup


async def test_sync_v5_with_null_protocol_is_inconsistent_before_the_core(h: Harness) -> None:
    for fields in ({"protocol_type": None, "protocol_name": "range"}, {"protocol_type": "consumer"}):
        response = await h.respond(14, 5, group_id="g", generation_id=1, member_id="m", assignments=[], **fields)
        assert response.error_code == ErrorCode.inconsistent_group_protocol
    # v4 has no protocol fields: the core answers (unknown group -> UNKNOWN_MEMBER_ID)
    response = await h.respond(14, 4, group_id="g", generation_id=1, member_id="m", assignments=[])
    assert response.error_code == ErrorCode.unknown_member_id


# ----------------------------------------------------------------------------------------------------- LeaveGroup


async def test_leave_v0_2_top_level_error_and_v3_members(h: Harness) -> None:
    response = await h.respond(13, 1, group_id="nope", member_id="m")
    assert response.error_code == ErrorCode.unknown_member_id
    response = await h.respond(13, 3, group_id="nope", members=[{"member_id": "m1"}, {"member_id": "m2"}])
    assert response.error_code == ErrorCode.none
    assert [(x.member_id, x.error_code) for x in response.members] == [
        ("m1", ErrorCode.unknown_member_id),
        ("m2", ErrorCode.unknown_member_id),
    ]


# ----------------------------------------------------------------------------------------------------- Heartbeat


@pytest.mark.parametrize("version", range(0, 5))
async def test_heartbeat_every_version(h: Harness, version: int) -> None:
    response = await h.respond(12, version, group_id="nope", generation_id=1, member_id="m")
    assert response.error_code == ErrorCode.unknown_member_id


# -------------------------------------------------------------------------------------------------------- Offsets


def commit_fields(topics: list[tuple[str, list[tuple[int, int]]]], group: str = "simple") -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_metadata": "md"} for p, o in parts
                ],
            }
            for name, parts in topics
        ],
    }


@pytest.mark.parametrize("version", [2, 5, 8, 9])
async def test_commit_rejects_unknown_topics_and_partitions_before_the_core(h: Harness, version: int) -> None:
    response = await h.respond(8, version, **commit_fields([("t", [(0, 5), (3, 6)]), ("nope", [(0, 1)])]))
    errors = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    assert errors == {
        ("t", 0): ErrorCode.none,
        ("t", 3): ErrorCode.unknown_topic_or_partition,  # t has partitions 0-2
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert "nope" not in {t.name for t in h.topics.all()}  # OffsetCommit never auto-creates


async def test_commit_of_only_unknown_partitions_does_not_reach_the_core(h: Harness) -> None:
    response = await h.respond(8, 9, **commit_fields([("nope", [(0, 1)])], group="untouched"))
    assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.unknown_topic_or_partition]
    assert h.coordinator.list_groups([], []) == []


@pytest.mark.parametrize("version", range(1, 8))
async def test_fetch_single_group_versions(h: Harness, version: int) -> None:
    await h.respond(8, 7, **commit_fields([("t", [(0, 42)])]))
    response = await h.respond(9, version, group_id="simple", topics=[{"name": "t", "partition_indexes": (0, 1)}])
    got = {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in response.topics for p in t.partitions}
    assert got == {("t", 0): (42, "md"), ("t", 1): (-1, "")}
    if version >= 2:
        assert response.error_code == ErrorCode.none
        everything = await h.respond(9, version, group_id="simple", topics=None)
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in everything.topics] == [("t", [0])]


@pytest.mark.parametrize("version", [8, 9])
async def test_fetch_grouped_versions(h: Harness, version: int) -> None:
    await h.respond(8, 9, **commit_fields([("t", [(1, 7)])], group="a"))
    response = await h.respond(
        9,
        version,
        groups=[
            {"group_id": "a", "topics": None},
            {"group_id": "b", "topics": [{"name": "t", "partition_indexes": (1,)}]},
        ],
    )
    got = {
        g.group_id: [(t.name, p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]
        for g in response.groups
    }
    assert got == {"a": [("t", 1, 7)], "b": [("t", 1, -1)]}


def test_fetch_v1_pushes_the_group_error_into_partitions() -> None:
    result = m.OffsetFetchResult("g", ErrorCode.coordinator_load_in_progress, [m.FetchedOffset("t", 0, 5)])
    [topic] = _fetched_topics(result, push_error=True)
    assert [p["error_code"] for p in topic["partitions"]] == [ErrorCode.coordinator_load_in_progress]
    [topic] = _fetched_topics(result, push_error=False)
    assert [p["error_code"] for p in topic["partitions"]] == [ErrorCode.none]


async def test_offset_delete_unknown_partition_and_group(h: Harness) -> None:
    response = await h.respond(47, 0, group_id="nope", topics=[{"name": "t", "partitions": [{"partition_index": 0}]}])
    assert response.error_code == ErrorCode.group_id_not_found
    await h.respond(8, 9, **commit_fields([("t", [(0, 1)])], group="del"))
    topics = [{"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 9}]}]
    response = await h.respond(47, 0, group_id="del", topics=topics)
    assert response.error_code == ErrorCode.none
    assert [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions] == [
        (0, ErrorCode.none),
        (9, ErrorCode.unknown_topic_or_partition),
    ]


# ------------------------------------------------------------------------------------- FindCoordinator / Metadata


@pytest.mark.parametrize("version", range(0, 4))
async def test_find_coordinator_single_key(h: Harness, version: int) -> None:
    response = await h.respond(10, version, key="g", key_type=0)
    assert (response.error_code, response.node_id, response.host, response.port) == (
        ErrorCode.none,
        7,
        "coord.example",
        19092,
    )


@pytest.mark.parametrize(
    ("version", "key_type", "error"),
    [
        (4, 0, ErrorCode.none),
        (4, 1, ErrorCode.transactional_id_authorization_failed),  # transactions are refused
        (5, 2, ErrorCode.invalid_request),
        (6, 2, ErrorCode.none),
        (6, 9, ErrorCode.invalid_request),
    ],
)
async def test_find_coordinator_batched(h: Harness, version: int, key_type: int, error: ErrorCode) -> None:
    response = await h.respond(10, version, key_type=key_type, coordinator_keys=("a", "b"))
    assert [(c.key, c.error_code) for c in response.coordinators] == [("a", error), ("b", error)]
    expected_node = 7 if error is ErrorCode.none else -1
    assert {c.node_id for c in response.coordinators} == {expected_node}


@pytest.mark.parametrize("version", range(1, 4))  # v0 knows only groups
async def test_find_coordinator_single_key_refuses_transactions(h: Harness, version: int) -> None:
    response = await h.respond(10, version, key="txn-1", key_type=1)
    assert (response.error_code, response.node_id) == (ErrorCode.transactional_id_authorization_failed, -1)


# ------------------------------------------------------------------------------------------------ InitProducerId


def _init_producer_id(version: int, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"transactional_id": None, "transaction_timeout": timedelta(seconds=60)}
    if version >= 3:
        out |= {"producer_id": -1, "producer_epoch": -1}
    return out | fields


@pytest.mark.parametrize("version", range(0, 5))
async def test_init_producer_id_hands_out_fresh_ids_with_epoch_0(h: Harness, version: int) -> None:
    first = await h.respond(22, version, **_init_producer_id(version))
    second = await h.respond(22, version, **_init_producer_id(version))
    assert (first.error_code, first.producer_id, first.producer_epoch) == (ErrorCode.none, 0, 0)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (ErrorCode.none, 1, 0)


@pytest.mark.parametrize("version", [3, 4])
async def test_init_producer_id_bump_of_an_idempotent_producer_gets_a_new_id_as_in_kafka(
    h: Harness, version: int
) -> None:
    first = await h.respond(22, version, **_init_producer_id(version))
    bumped = await h.respond(
        22, version, **_init_producer_id(version, producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    )
    assert (bumped.error_code, bumped.producer_epoch) == (ErrorCode.none, 0)
    assert bumped.producer_id != first.producer_id


@pytest.mark.parametrize(("producer_id", "epoch"), [(5, -1), (-1, 0)])
async def test_init_producer_id_with_half_an_identity_is_an_invalid_request(
    h: Harness, producer_id: int, epoch: int
) -> None:
    response = await h.respond(22, 4, **_init_producer_id(4, producer_id=producer_id, producer_epoch=epoch))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (ErrorCode.invalid_request, -1, -1)


@pytest.mark.parametrize(
    ("transactional_id", "error"),
    [("tx-1", ErrorCode.transactional_id_authorization_failed), ("", ErrorCode.invalid_request)],
)
@pytest.mark.parametrize("version", range(0, 5))
async def test_init_producer_id_refuses_transactional_producers(
    h: Harness, version: int, transactional_id: str, error: ErrorCode
) -> None:
    response = await h.respond(22, version, **_init_producer_id(version, transactional_id=transactional_id))
    assert (response.error_code, response.producer_id, response.producer_epoch) == (error, -1, -1)


@pytest.mark.parametrize("version", range(0, 13))
async def test_metadata_every_version(h: Harness, version: int) -> None:
    topics: Any = [{"name": "t"}]
    extra: dict[str, Any] = {}
    if version >= 8:
        extra["include_topic_authorized_operations"] = False
    if version in (8, 9, 10):
        extra["include_cluster_authorized_operations"] = False
    if version >= 10:
        topics = [{"name": "t", "topic_id": uuid.UUID(int=0)}]
    response = await h.respond(3, version, topics=topics, **extra)
    [broker] = response.brokers
    assert (broker.node_id, broker.host, broker.port) == (7, "coord.example", 19092)
    [topic] = response.topics
    assert topic.error_code == ErrorCode.none
    assert [(p.partition_index, p.leader_id) for p in topic.partitions] == [(0, 7), (1, 7), (2, 7)]
    if version >= 10:
        assert topic.topic_id == topic_id_for("t")


async def test_metadata_auto_create_and_its_refusals(h: Harness) -> None:
    response = await h.respond(3, 12, topics=[{"name": "fresh", "topic_id": uuid.UUID(int=0)}],
                               include_topic_authorized_operations=False)  # fmt: skip
    assert [(t.name, len(t.partitions)) for t in response.topics] == [("fresh", 2)]  # num.partitions
    response = await h.respond(3, 5, topics=[{"name": "bad name!"}], allow_auto_topic_creation=True)
    assert [t.error_code for t in response.topics] == [ErrorCode.invalid_topic_exception]
    response = await h.respond(3, 5, topics=[{"name": "not-asked"}], allow_auto_topic_creation=False)
    assert [t.error_code for t in response.topics] == [ErrorCode.unknown_topic_or_partition]
    h.topics.auto_create = False
    response = await h.respond(3, 1, topics=[{"name": "other"}])
    assert [t.error_code for t in response.topics] == [ErrorCode.unknown_topic_or_partition]
    response = await h.respond(3, 1, topics=None)
    assert [t.name for t in response.topics] == ["fresh", "t"]


async def test_metadata_by_topic_id(h: Harness) -> None:
    extra = {"include_topic_authorized_operations": False}
    response = await h.respond(3, 12, topics=[{"name": None, "topic_id": topic_id_for("t")}], **extra)
    assert [(t.name, t.error_code) for t in response.topics] == [("t", ErrorCode.none)]
    response = await h.respond(3, 12, topics=[{"name": None, "topic_id": uuid.uuid4()}], **extra)
    assert [t.error_code for t in response.topics] == [ErrorCode.unknown_topic_id]


# ------------------------------------------------------------------------------------------ ListOffsets / Fetch


def batch(n: int, ts: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        builder.append(i, timestamp=ts + i, key=b"k", value=b"v", headers=[])
    return bytes(builder.build())


def append(h: Harness, partition: int, data: bytes) -> None:
    h.broker.produce([("t", partition, data)], lambda answers: None)


@pytest.mark.parametrize("version", range(1, 8))
async def test_list_offsets(h: Harness, version: int) -> None:
    append(h, 1, batch(3, 1_700_000_000_000))
    append(h, 1, batch(2, 1_700_000_100_000))
    extra = {"isolation_level": 0} if version >= 2 else {}
    stamps = [(1, -2), (1, -1), (1, 1_700_000_050_000), (2, -1), (2, 1_700_000_000_000), (5, -1)]
    partitions = [{"partition_index": p, "timestamp": ts} for p, ts in stamps]
    response = await h.respond(2, version, replica_id=-1, topics=[{"name": "t", "partitions": partitions}], **extra)
    got = [(p.partition_index, p.error_code, p.offset) for t in response.topics for p in t.partitions]
    assert got == [
        (1, ErrorCode.none, 0),  # earliest
        (1, ErrorCode.none, 5),  # latest: the high watermark
        (1, ErrorCode.none, 3),  # the first batch with a later timestamp
        (2, ErrorCode.none, 0),  # an empty partition
        (2, ErrorCode.none, -1),  # nothing there
        (5, ErrorCode.unknown_topic_or_partition, -1),
    ]
    if version >= 7:
        latest = [{"partition_index": 1, "timestamp": -3}]
        response = await h.respond(2, version, replica_id=-1, topics=[{"name": "t", "partitions": latest}], **extra)
        [p] = response.topics[0].partitions
        assert (p.offset, p.timestamp) == (4, 1_700_000_100_001)


def fetch_fields(topic: str, max_wait_ms: int, offset: int = 0, partition: int = 0) -> dict[str, Any]:
    return {
        "max_wait": ms(max_wait_ms),
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
    }


@pytest.mark.parametrize("version", range(4, 13))
async def test_fetch_is_held_and_empty_at_the_end_of_the_log(h: Harness, version: int) -> None:
    held = h.call(1, version, **fetch_fields("t", 10))
    assert hasattr(held, "__await__")
    response = await held
    [topic] = response.responses
    [p] = topic.partitions
    assert (p.error_code, p.high_watermark, p.records) == (ErrorCode.none, 0, b"")
    assert p.records is not None
    if version >= 7:
        assert response.session_id == 0


@pytest.mark.parametrize("version", range(4, 13))
async def test_fetch_returns_the_batches_from_the_one_holding_the_offset(h: Harness, version: int) -> None:
    first, second = batch(3, 1_000), batch(2, 2_000)
    append(h, 1, first)
    append(h, 1, second)
    response = await h.respond(1, version, **fetch_fields("t", 10, offset=4, partition=1))
    [p] = response.responses[0].partitions
    assert (p.error_code, p.high_watermark, p.last_stable_offset) == (ErrorCode.none, 5, 5)
    assert version < 5 or p.log_start_offset == 0
    assert [r.offset for r in DefaultRecordBatch(bytes(p.records))] == [3, 4]
    assert bytes(p.records)[8:] == second[8:]  # as the producer sent it, with the base offset stamped
    response = await h.respond(1, version, **fetch_fields("t", 10, offset=6, partition=1))
    [p] = response.responses[0].partitions
    assert (p.error_code, p.records) == (ErrorCode.offset_out_of_range, b"")


async def test_a_parked_fetch_is_woken_by_an_append(h: Harness) -> None:
    h.services.max_fetch_wait_ms = 3_600_000
    task = asyncio.ensure_future(h.respond(1, 12, **fetch_fields("t", 3_600_000)))
    await asyncio.sleep(0.01)
    assert not task.done()
    append(h, 0, batch(1, 5))
    response = await asyncio.wait_for(task, 10)  # not the hour it may wait
    assert response.responses[0].partitions[0].high_watermark == 1


async def test_fetch_with_an_error_is_not_held(h: Harness) -> None:
    h.services.max_fetch_wait_ms = 3_600_000
    response = await asyncio.wait_for(h.respond(1, 12, **fetch_fields("nope", 3_600_000)), 10)
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.unknown_topic_or_partition]


@pytest.mark.parametrize("version", range(3, 11))
async def test_produce(h: Harness, version: int) -> None:
    data = [{"index": 0, "records": batch(2, 1)}, {"index": 9, "records": batch(1, 1)}]
    fields = {"transactional_id": None, "acks": -1, "timeout": ms(1000)}
    response = await h.respond(0, version, **fields, topic_data=[{"name": "t", "partition_data": data}])
    got = [(p.index, p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses]
    assert got == [(0, ErrorCode.none, 0), (9, ErrorCode.unknown_topic_or_partition, -1)]
    assert h.call(0, version, **{**fields, "acks": 0}, topic_data=[{"name": "t", "partition_data": data[:1]}]) == b""
    assert h.broker.list_offset("t", 0, -1) == (ErrorCode.none, 4, -1)  # acks=0 appends too, answering nothing


# -------------------------------------------------------------------------------------------- groups admin APIs


@pytest.mark.parametrize("version", range(0, 6))
async def test_list_describe_delete_groups_every_version(h: Harness, version: int) -> None:
    await h.respond(8, 9, **commit_fields([("t", [(0, 1)])], group=f"v{version}"))
    extra: dict[str, Any] = {}
    if version >= 4:
        extra["states_filter"] = ("Empty",)
    listed = await h.respond(16, version, **extra)
    assert [g.group_id for g in listed.groups] == [f"v{version}"]
    describe_extra = {"include_authorized_operations": True} if version >= 3 else {}
    described = await h.respond(15, version, groups=(f"v{version}", "absent"), **describe_extra)
    assert [(g.group_id, g.group_state) for g in described.groups] == [(f"v{version}", "Empty"), ("absent", "Dead")]
    if version <= 2:
        deleted = await h.respond(42, version, groups_names=(f"v{version}", f"v{version}", "absent"))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            (f"v{version}", ErrorCode.none),
            ("absent", ErrorCode.group_id_not_found),
        ]


# ------------------------------------------------------------------------------------------------ DescribeCluster


def _describe_cluster_expected(version: int, include_operations: bool) -> Any:
    """The answer written out with kio's own classes: this node (the harness's Node) as broker and controller."""
    from kio.index import load_response_schema

    cls = load_response_schema(60, version)
    broker_cls = cls.__dataclass_fields__["brokers"].type.__args__[0]
    broker: dict[str, Any] = {"broker_id": 7, "host": "coord.example", "port": 19092, "rack": None}
    if version >= 2:
        broker["is_fenced"] = False
    fields: dict[str, Any] = {
        "throttle_time": timedelta(0),
        "error_code": ErrorCode.none,
        "error_message": None,
        "cluster_id": "cluster-x",
        "controller_id": 7,
        "brokers": (broker_cls(**broker),),
        # KIP-430 bits CREATE(5) ALTER(7) DESCRIBE(8) CLUSTER_ACTION(9) DESCRIBE_CONFIGS(10) ALTER_CONFIGS(11)
        # IDEMPOTENT_WRITE(12): Kafka's answer with authorization off; -2^31 when not asked for.
        "cluster_authorized_operations": 0b1_1111_1010_0000 if include_operations else -(2**31),
    }
    if version >= 1:
        fields["endpoint_type"] = 1
    return cls(**fields)


@pytest.mark.parametrize("include_operations", [False, True])
@pytest.mark.parametrize("version", range(0, 3))
async def test_describe_cluster_every_version_is_this_node(h: Harness, version: int, include_operations: bool) -> None:
    from protocol.codec import encode_response
    from protocol.headers import RequestHeader

    extra: dict[str, Any] = {"include_cluster_authorized_operations": include_operations}
    if version >= 1:
        extra["endpoint_type"] = 1
    if version >= 2:
        extra["include_fenced_brokers"] = True
    response = await h.respond(60, version, **extra)
    expected = _describe_cluster_expected(version, include_operations)
    assert response == expected
    header = RequestHeader(60, version, 5, "cid")
    assert encode_response(header, response) == encode_response(header, expected)  # golden bytes: kio's own


@pytest.mark.parametrize(
    ("endpoint_type", "error"),
    [(2, ErrorCode.mismatched_endpoint_type), (0, ErrorCode.unsupported_endpoint_type),
     (3, ErrorCode.unsupported_endpoint_type), (-1, ErrorCode.unsupported_endpoint_type)],
)  # fmt: skip
@pytest.mark.parametrize("version", [1, 2])
async def test_describe_cluster_answers_brokers_only(
    h: Harness, version: int, endpoint_type: int, error: ErrorCode
) -> None:
    extra: dict[str, Any] = {"include_fenced_brokers": False} if version >= 2 else {}
    response = await h.respond(
        60, version, include_cluster_authorized_operations=True, endpoint_type=endpoint_type, **extra
    )
    assert response.error_code is error and response.error_message
    assert (response.brokers, response.cluster_id, response.controller_id) == ((), "", -1)
    assert (response.endpoint_type, response.cluster_authorized_operations) == (1, -(2**31))
