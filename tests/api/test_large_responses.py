"""Metadata answers encoded by hand (servers.kafka.metadata): the same bytes as kio's for every version, caches
dropped when a topic is created or grows, big answers built in slices that yield to the loop; topic id rules
(KafkaApis.handleTopicMetadataRequest) and the auto-creation limits (broker.topics.AutoCreateLimits)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from broker.topics import AutoCreateLimits, TopicRegistry, topic_id_for
from protocol.codec import decode_response_frame, encode_response
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from servers.kafka import HANDLERS, Node, RequestContext, Services
from servers.kafka import metadata as md
from servers.kafka.build import build

from .conftest import Harness

NODE = Node(7, "coord.example", 19092, "cluster-x")
NULL = uuid.UUID(int=0)


def services(registry: TopicRegistry) -> Services:
    return Services(coordinator=None, topics=registry, node=NODE)  # type: ignore[arg-type]  # Metadata needs no core


def request(version: int, topics: Any, allow: bool = True) -> Any:
    fields: dict[str, Any] = {"topics": topics, "allow_auto_topic_creation": allow}
    fields["include_topic_authorized_operations"] = False
    fields["include_cluster_authorized_operations"] = False
    return build(load_request_schema(3, version), fields)


async def answer(svc: Services, version: int, topics: Any, correlation_id: int = 5, **kw: Any) -> bytes:
    ctx = RequestContext(3, version, correlation_id, "cid", "/10.0.0.1")
    result = HANDLERS[3](svc, ctx, request(version, topics, **kw))
    if not isinstance(result, bytes):
        result = await result
    assert isinstance(result, bytes)
    return result


def kio_frame(
    version: int, correlation_id: int, entries: Sequence[tuple[int, str | None, uuid.UUID | None, int]]
) -> bytes:
    """What kio encodes for a Metadata answer with these (error, name, topic id, partitions) topics: written
    independently of the module under test, as the adapter built it before hand-encoding."""
    topics = [
        {
            "error_code": ErrorCode(error),
            "name": name,
            "topic_id": topic_id or NULL,
            "is_internal": False,
            "partitions": [
                {
                    "error_code": ErrorCode.none,
                    "partition_index": p,
                    "leader_id": NODE.node_id,
                    "leader_epoch": 0,
                    "replica_nodes": (NODE.node_id,),
                    "isr_nodes": (NODE.node_id,),
                    "offline_replicas": (),
                }
                for p in range(partitions)
            ],
        }
        for error, name, topic_id, partitions in entries
    ]
    broker = {"node_id": NODE.node_id, "host": NODE.host, "port": NODE.port, "rack": NODE.rack}
    data = {"brokers": [broker], "cluster_id": NODE.cluster_id, "controller_id": NODE.node_id, "topics": topics}
    body = build(load_response_schema(3, version), data)
    return encode_response(RequestHeader(3, version, correlation_id, "cid"), body)


def ok(registry: TopicRegistry, *names: str) -> list[tuple[int, str | None, uuid.UUID | None, int]]:
    out: list[tuple[int, str | None, uuid.UUID | None, int]] = []
    for name in names:
        topic = registry.get(name)
        assert topic is not None
        out.append((0, name, topic.topic_id, topic.partitions))
    return out


@pytest.fixture
def registry() -> TopicRegistry:
    r = TopicRegistry(auto_create=True, default_partitions=2)
    r.add("orders", 6)
    r.add("a.b_c-d", 1)
    r.add("x" * 249, 3)  # the longest legal name: its compact-string length takes two varint bytes
    return r


@pytest.mark.parametrize("version", range(13))
async def test_every_topic_is_kio_bytes_in_every_version(registry: TopicRegistry, version: int) -> None:
    svc = services(registry)
    every = [] if version == 0 else None
    expected = kio_frame(version, 5, ok(registry, "a.b_c-d", "orders", "x" * 249))
    assert await answer(svc, version, every) == expected
    assert await answer(svc, version, every) == expected  # the kept answer
    assert await answer(svc, version, every, correlation_id=-9) == kio_frame(
        version, -9, ok(registry, "a.b_c-d", "orders", "x" * 249)
    )


@pytest.mark.parametrize("version", range(13))
async def test_named_topics_and_errors_are_kio_bytes_in_every_version(registry: TopicRegistry, version: int) -> None:
    svc = services(registry)
    names = ["orders", "fresh", "bad name!", "orders"]  # asked twice: answered once, as Kafka reads a set
    topics: list[dict[str, Any]] = [{"name": n, "topic_id": NULL} if version >= 10 else {"name": n} for n in names]
    got = await answer(svc, version, topics)
    fresh = registry.get("fresh")
    assert fresh is not None and fresh.partitions == 2  # num.partitions
    invalid = (int(ErrorCode.invalid_topic_exception), "bad name!", None, 0)
    assert got == kio_frame(version, 5, [*ok(registry, "orders", "fresh"), invalid])
    if version >= 4:
        got = await answer(svc, version, [topics[2] | {"name": "not-asked"}], allow=False)
        assert got == kio_frame(version, 5, [(int(ErrorCode.unknown_topic_or_partition), "not-asked", None, 0)])


async def test_answers_follow_topics_created_and_grown(registry: TopicRegistry) -> None:
    svc = services(registry)
    for version in (1, 9, 12):  # entries kept in three families
        await answer(svc, version, None)
    registry.add("orders", 8)  # grows: its kept entries must go
    registry.add("new", 1)
    for version in (1, 9, 12):
        assert await answer(svc, version, None) == kio_frame(
            version, 5, ok(registry, "a.b_c-d", "new", "orders", "x" * 249)
        )
    named = await answer(svc, 9, [{"name": "orders"}])
    assert named == kio_frame(9, 5, ok(registry, "orders"))


async def test_a_large_answer_is_built_in_slices_shared_by_concurrent_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(md, "SLICE_SECONDS", 0.0)  # yield after every 256 topics
    registry = TopicRegistry()
    for i in range(3000):
        registry.add(f"t{i:05d}", 1 + i % 3)
    svc = services(registry)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    probe = asyncio.create_task(ticker())
    ctxs = [RequestContext(3, 12, c, "cid", "/10.0.0.1") for c in (1, 2, 3)]
    results = [HANDLERS[3](svc, ctx, request(12, None)) for ctx in ctxs]
    assert not any(isinstance(r, bytes) for r in results)  # parked: the build goes on between other work
    assert len(md._encoded_for(registry).building) == 1  # one build for the three
    frames = await asyncio.gather(*results)
    probe.cancel()
    assert ticks >= 3000 // 256  # the loop ran other tasks between slices
    expected = ok(registry, *(t.name for t in registry.all()))
    assert frames == [kio_frame(12, c, expected) for c in (1, 2, 3)]
    assert isinstance(HANDLERS[3](svc, ctxs[0], request(12, None)), bytes)  # kept: answered at once now


async def test_a_closed_connection_does_not_cancel_the_shared_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(md, "SLICE_SECONDS", 0.0)
    registry = TopicRegistry()
    for i in range(2000):
        registry.add(f"t{i:05d}", 1)
    svc = services(registry)
    first = asyncio.ensure_future(HANDLERS[3](svc, RequestContext(3, 9, 1, "c", "/h"), request(9, None)))
    second = asyncio.ensure_future(HANDLERS[3](svc, RequestContext(3, 9, 2, "c", "/h"), request(9, None)))
    await asyncio.sleep(0)
    first.cancel()  # what the server does to a parked request of a connection that closes
    assert await second == kio_frame(9, 2, ok(registry, *(t.name for t in registry.all())))


# ---------------------------------------------------------------------------------------------------- topic ids


@pytest.mark.parametrize("version", [10, 11])
async def test_v10_v11_null_name_or_topic_id_is_an_invalid_request(registry: TopicRegistry, version: int) -> None:
    svc = services(registry)
    some_id = topic_id_for("orders")
    got = await answer(svc, version, [{"name": None, "topic_id": some_id}, {"name": "orders", "topic_id": NULL}])
    _, response = decode_response_frame(3, version, got)
    assert [(t.error_code, t.name, t.topic_id or NULL) for t in response.topics] == [  # kio reads the null id as None
        (ErrorCode.invalid_request, "", some_id),
        (ErrorCode.invalid_request, "orders", NULL),
    ]
    assert (response.brokers, response.controller_id) == ((), -1)  # MetadataRequest.getErrorResponse
    body = build(load_response_schema(3, version), {"brokers": [], "cluster_id": None, "controller_id": -1, "topics": [
        {"error_code": ErrorCode.invalid_request, "name": n, "topic_id": i, "is_internal": False, "partitions": []}
        for n, i in (("", some_id), ("orders", NULL))
    ]})  # fmt: skip
    assert got == encode_response(RequestHeader(3, version, 5, "cid"), body)
    got = await answer(svc, version, [{"name": "orders", "topic_id": some_id}])  # an id is not allowed either
    _, response = decode_response_frame(3, version, got)
    assert [t.error_code for t in response.topics] == [ErrorCode.invalid_request]


async def test_v12_topic_ids_answer_by_id_only(registry: TopicRegistry) -> None:
    svc = services(registry)
    unknown = uuid.uuid4()
    topics = [
        {"name": None, "topic_id": topic_id_for("orders")},
        {"name": "ignored-when-ids-are-given", "topic_id": NULL},
        {"name": None, "topic_id": unknown},
    ]
    got = await answer(svc, 12, topics)
    assert got == kio_frame(12, 5, [(int(ErrorCode.unknown_topic_id), None, unknown, 0), *ok(registry, "orders")])
    assert registry.get("ignored-when-ids-are-given") is None
    got = await answer(svc, 12, [{"name": None, "topic_id": NULL}])  # neither: the null id names no topic
    assert got == kio_frame(12, 5, [(int(ErrorCode.unknown_topic_id), None, NULL, 0)])


# ------------------------------------------------------------------------------------------- auto-creation limits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def names_with(got: bytes, version: int, error: ErrorCode) -> list[str]:
    _, response = decode_response_frame(3, version, got)
    return [t.name for t in response.topics if t.error_code == error]


async def test_auto_creation_limits() -> None:
    clock = Clock()
    limits = AutoCreateLimits(max_per_request=3, per_second=2.0, burst=5, max_topics=9)
    registry = TopicRegistry(limits=limits, clock=clock)
    svc = services(registry)
    unknown = ErrorCode.unknown_topic_or_partition
    got = await answer(svc, 9, [{"name": f"a{i}"} for i in range(5)])
    assert names_with(got, 9, ErrorCode.none) == ["a0", "a1", "a2"]
    assert names_with(got, 9, unknown) == ["a3", "a4"]  # per request
    got = await answer(svc, 9, [{"name": f"b{i}"} for i in range(3)])
    assert names_with(got, 9, ErrorCode.none) == ["b0", "b1"]  # the burst of 5 is spent
    assert names_with(got, 9, unknown) == ["b2"]
    clock.now += 1.0  # two more tokens
    got = await answer(svc, 9, [{"name": f"c{i}"} for i in range(3)])
    assert names_with(got, 9, ErrorCode.none) == ["c0", "c1"]
    other = RequestContext(3, 9, 1, "cid", "/10.0.0.2")  # another host has its own bucket
    result = HANDLERS[3](svc, other, request(9, [{"name": f"d{i}"} for i in range(3)]))
    assert isinstance(result, bytes)
    assert names_with(result, 9, ErrorCode.none) == ["d0", "d1"]  # 9 topics now: max_topics
    assert names_with(result, 9, unknown) == ["d2"]
    registry.add("configured", 1)  # configured topics are never refused
    assert registry.refused == {"invalid_name": 0, "max_topics": 1, "per_request": 2, "rate": 2}
    assert registry.auto_created == 9


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "a/b", "bad\n", "ü", "a\x00"])
async def test_illegal_names_are_never_created(name: str) -> None:
    registry = TopicRegistry()
    got = await answer(services(registry), 9, [{"name": name}])
    assert names_with(got, 9, ErrorCode.invalid_topic_exception) == [name]
    assert len(registry) == 0
    assert registry.refused["invalid_name"] == 1


# ------------------------------------------------------------------------------------ ListGroups / DescribeGroups


@pytest.fixture
async def crowd(h: Harness) -> Harness:
    """The api harness with 7 Empty groups (admin commits) and one with a member (CompletingRebalance)."""
    for i in range(7):
        partitions = [{"partition_index": 0, "committed_offset": i, "committed_metadata": ""}]
        await h.respond(8, 9, group_id=f"g{i}", generation_id_or_member_epoch=-1, member_id="",
                        topics=[{"name": "t", "partitions": partitions}])  # fmt: skip
    parked = h.call(11, 3, group_id="joined", session_timeout=timedelta(seconds=10),
                    rebalance_timeout=timedelta(seconds=20), member_id="", protocol_type="consumer",
                    protocols=[{"name": "range", "metadata": b"meta"}])  # fmt: skip
    h.timer.advance(0)
    await parked
    return h


@pytest.mark.parametrize("version", range(6))
async def test_list_and_describe_groups_in_slices_are_kio_bytes(
    crowd: Harness, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers.kafka import sliced

    list_fields: dict[str, Any] = {"states_filter": ()} if version >= 4 else {}
    ids = ("joined", *(f"g{i}" for i in range(7)), "absent", "joined")
    describe_fields: dict[str, Any] = {"groups": ids}
    if version >= 3:
        describe_fields["include_authorized_operations"] = True

    async def answer_of(api_key: int, fields: dict[str, Any]) -> bytes:
        ctx = RequestContext(api_key, version, 3, "cid", "/10.0.0.1")
        result = HANDLERS[api_key](crowd.services, ctx, build(load_request_schema(api_key, version), fields))
        if hasattr(result, "__await__"):
            result = await result
        if isinstance(result, bytes):
            return result
        return encode_response(RequestHeader(api_key, version, 3, "cid"), result)

    whole_list = await answer_of(16, list_fields)
    whole_describe = await answer_of(15, describe_fields)
    monkeypatch.setattr(sliced, "SLICE", 3)
    ctx = RequestContext(16, version, 3, "cid", "/10.0.0.1")
    parked = HANDLERS[16](crowd.services, ctx, build(load_request_schema(16, version), list_fields))
    assert asyncio.iscoroutine(parked)  # more groups than a slice: built between other work
    parked.close()
    assert await answer_of(16, list_fields) == whole_list
    assert await answer_of(15, describe_fields) == whole_describe
    _, listed = decode_response_frame(16, version, whole_list)
    assert len(listed.groups) == 8
    _, described = decode_response_frame(15, version, whole_describe)
    assert [len(g.members) for g in described.groups][:1] == [1]


def test_auto_creation_settings_and_metrics() -> None:
    from daemon.settings import Settings
    from runtime.metrics import Metrics

    settings = Settings(
        topics={"auto_create_max_per_request": 2, "auto_create_per_second": 0.5, "auto_create_burst": 4,
                "auto_create_max_topics": 50, "initial": {"orders": 3}}
    )  # fmt: skip
    registry = TopicRegistry.from_settings(settings.topics)
    assert registry.limits == AutoCreateLimits(max_per_request=2, per_second=0.5, burst=4, max_topics=50)
    assert registry.get("orders") is not None and registry.auto_create
    registry.maybe_auto_create("made", client="/h")
    registry.maybe_auto_create("bad name", client="/h")
    metrics = Metrics()
    metrics.watch_topics(registry)
    text = metrics.render().decode()
    for line in (
        "kgc_topics 2.0",
        "kgc_topics_auto_created_total 1.0",
        'kgc_topics_auto_create_refused_total{reason="invalid_name"} 1.0',
        'kgc_topics_auto_create_refused_total{reason="rate"} 0.0',
        'kgc_topics_auto_create_limit{limit="max_topics"} 50.0',
        'kgc_topics_auto_create_limit{limit="per_second"} 0.5',
        'kgc_topics_auto_create_limit{limit="enabled"} 1.0',
    ):
        assert line in text


@pytest.mark.parametrize("version", [4, 5, 6])
@pytest.mark.parametrize("key_type", [0, 9])
async def test_find_coordinator_with_many_keys_in_slices_is_kio_bytes(
    h: Harness, version: int, key_type: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers.kafka import sliced

    ctx = RequestContext(10, version, 3, "cid", "/10.0.0.1")
    body = build(
        load_request_schema(10, version), {"key_type": key_type, "coordinator_keys": ("a", "b", "a", "c" * 300)}
    )
    whole = encode_response(RequestHeader(10, version, 3, "cid"), HANDLERS[10](h.services, ctx, body))
    monkeypatch.setattr(sliced, "SLICE", 1)
    parked = HANDLERS[10](h.services, ctx, body)
    assert asyncio.iscoroutine(parked)
    assert await parked == whole


async def test_a_request_naming_many_topics_is_resolved_and_encoded_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(md, "SLICE_SECONDS", 0.0)
    registry = TopicRegistry(limits=AutoCreateLimits(max_per_request=0, per_second=0, max_topics=0))
    for i in range(2500):
        registry.add(f"t{i:05d}", 2)
    names = [f"t{i:05d}" for i in range(0, 5000, 2)]  # half exist, half are created (no limits here)
    parked = HANDLERS[3](
        services(registry), RequestContext(3, 9, 4, "c", "/h"), request(9, [{"name": n} for n in names])
    )
    assert asyncio.iscoroutine(parked)
    got = await parked
    assert got == kio_frame(9, 4, ok(registry, *names))


async def test_only_the_last_used_versions_are_kept(registry: TopicRegistry) -> None:
    svc = services(registry)
    for version in (*range(13), *range(13)):
        every = [] if version == 0 else None
        assert await answer(svc, version, every) == kio_frame(version, 5, ok(registry, "a.b_c-d", "orders", "x" * 249))
    cache = md._encoded_for(registry)
    assert [v for v, _ in cache.every_topic] == [10, 11, 12]
    assert [f for f, _ in cache.entries] == [8, 9, 10]
