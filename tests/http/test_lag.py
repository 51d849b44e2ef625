"""Consumer lag (``runtime.lag``): the pure computation over the real core and the real broker on a manual clock, and
the views built from it - ``GET /v1/groups/{group}/lag``, the group detail, ``GET /v1/lag`` and kafka-lag-exporter's
series on ``/metrics`` - which must show the same numbers."""

from __future__ import annotations

import math
from typing import Any

from aiohttp.test_utils import TestClient

from broker.partitions import Broker, MemoryDataLog, PartitionSnapshot
from broker.records import TopicCreated
from broker.topics import TopicRegistry
from coordinator.offsets import OffsetAndMetadata
from runtime.lag import PartitionLag, group_lag

from .test_metrics import samples
from .world import Consumer, World

Client = TestClient  # type: ignore[type-arg]
DAY_MS = 86_400_000


def lag_world(world: World) -> tuple[int, int, Consumer, Consumer]:
    """orders-0: three batches of 10 appended at t1, t2, t3 (CreateTime a day earlier: lag in time counts from the
    broker's append time); orders-1: one batch of 5; a group of two members owning orders 0-3 between them."""
    t1 = world.clock.now_ms()
    world.produce("orders", 0, 10, timestamp_ms=t1 - DAY_MS)  # offsets 0-9
    world.advance(1_000)
    t2 = world.clock.now_ms()
    world.produce("orders", 0, 10, timestamp_ms=t1 - DAY_MS)  # offsets 10-19
    world.advance(1_000)
    world.produce("orders", 0, 10, timestamp_ms=t1 - DAY_MS)  # offsets 20-29
    world.produce("orders", 1, 5)
    a, b = Consumer("alpha"), Consumer("beta")
    world.form_group("app", [a, b])
    return t1, t2, a, b


def view(world: World, group_id: str) -> Any:
    return group_lag(
        group_id,
        world.core.offsets.committed(group_id),
        world.core.groups.group(group_id),
        world.broker,
        world.clock.now_ms(),
    )


def test_lag_in_messages_and_in_time_from_the_first_unconsumed_batch(world: World) -> None:
    t1, t2, a, b = lag_world(world)
    group = world.core.groups.group("app")
    assert group is not None
    world.commit("app", {("orders", 0): 15, ("orders", 1): 5}, a, group.generation_id)
    world.advance(7_000)
    now = world.clock.now_ms()
    first, second = sorted([a, b], key=lambda c: c.member_id)  # the world's assignor deals partitions round-robin
    lag = view(world, "app")
    assert lag.partitions == (
        PartitionLag("orders", 0, 15, 0, 30, 15, now - t2, first.member_id, first.client_id, "/10.0.0.1"),
        PartitionLag("orders", 1, 5, 0, 5, 0, 0, second.member_id, second.client_id, "/10.0.0.1"),
        PartitionLag("orders", 2, None, 0, 0, None, None, first.member_id, first.client_id, "/10.0.0.1"),
        PartitionLag("orders", 3, None, 0, 0, None, None, second.member_id, second.client_id, "/10.0.0.1"),
    )
    assert (lag.total_lag, lag.max_lag, lag.max_lag_ms, lag.topic_lags()) == (15, 15, now - t2, {"orders": 15})
    assert lag.state == "Stable" and lag.now_ms == now

    # The first unconsumed offset decides the batch: its base, inside it, the one before; caught up and beyond: 0.
    for committed, lag_ms in ((10, now - t2), (19, now - t2), (9, now - t1), (0, now - t1), (30, 0), (45, 0)):
        world.commit("app", {("orders", 0): committed}, a, group.generation_id)
        (p0,) = [p for p in view(world, "app").partitions if p.partition == 0]
        assert (p0.lag, p0.lag_ms) == (max(0, 30 - committed), lag_ms), committed


def test_offsets_without_a_live_group_and_partitions_the_broker_lacks(world: World) -> None:
    world.produce("payments", 1, 4)
    world.commit("simple", {("payments", 1): 1, ("retired", 0): 3})
    lag = view(world, "simple")
    assert lag.partitions == (
        PartitionLag("payments", 1, 1, 0, 4, 3, 0),  # appended now: 0 ms behind, no owner
        PartitionLag("retired", 0, 3, None, None, None, None),  # no such partition: nothing to measure
    )
    assert (lag.total_lag, lag.max_lag, lag.max_lag_ms) == (3, 3, 0)
    world.advance(2_500)
    assert view(world, "simple").max_lag_ms == 2_500


def test_a_committed_offset_below_the_log_start_counts_from_the_first_kept_batch() -> None:
    broker = Broker(TopicRegistry(auto_create=False), MemoryDataLog(), lambda: 10_000)
    broker.load(
        [TopicCreated("t", 1, (), 0)],
        [PartitionSnapshot("t", 0, 0, 5, 20, [(5, 9, 0, 100, 1_000), (10, 19, 0, 100, 2_000)])],
    )
    committed = {("t", 0): OffsetAndMetadata(2, -1, "", 0, None)}
    (p,) = group_lag("g", committed, None, broker, 10_000).partitions
    assert p == PartitionLag("t", 0, 2, 5, 20, 18, 9_000)
    committed = {("t", 0): OffsetAndMetadata(12, -1, "", 0, None)}
    (p,) = group_lag("g", committed, None, broker, 10_000).partitions
    assert (p.lag, p.lag_ms) == (8, 8_000)


async def test_http_views_show_the_same_lag(world: World, client: Client) -> None:
    t1, t2, a, b = lag_world(world)
    group = world.core.groups.group("app")
    assert group is not None
    world.commit("app", {("orders", 0): 15}, a, group.generation_id)
    world.commit("simple", {("orders", 1): 2})
    world.advance(3_000)
    now = world.clock.now_ms()

    r = await client.get("/v1/groups/app/lag")
    assert r.status == 200
    body = await r.json()
    assert (body["group"], body["now_ms"], body["total_lag"], body["max_lag_ms"]) == ("app", now, 15, now - t2)
    rows = {p["partition"]: p for p in body["partitions"]}
    assert set(rows) == {0, 1, 2, 3} and {p["topic"] for p in body["partitions"]} == {"orders"}
    assert {k: rows[0][k] for k in ("committed_offset", "log_start_offset", "log_end_offset", "lag", "lag_ms")} == {
        "committed_offset": 15, "log_start_offset": 0, "log_end_offset": 30, "lag": 15, "lag_ms": now - t2,
    }  # fmt: skip
    assert {k: rows[1][k] for k in ("committed_offset", "log_end_offset", "lag", "lag_ms")} == {
        "committed_offset": None, "log_end_offset": 5, "lag": None, "lag_ms": None,
    }  # fmt: skip
    members = {a.member_id: a, b.member_id: b}
    for p in body["partitions"]:
        assert p["client_id"] == members[p["member_id"]].client_id and p["host"] == "/10.0.0.1"

    detail = await (await client.get("/v1/groups/app")).json()
    assert detail["lag"] == body  # the same computation, the same instant (manual clock)

    listed = await (await client.get("/v1/lag")).json()
    assert listed == {
        "now_ms": now,
        "groups": [
            {"group": "app", "state": "Stable", "total_lag": 15, "max_lag": 15, "max_lag_ms": now - t2,
             "partitions": 4},
            {"group": "simple", "state": "Empty", "total_lag": 3, "max_lag": 3, "max_lag_ms": now - t1 - 2_000,
             "partitions": 1},
        ],
    }  # fmt: skip
    assert (await client.get("/v1/groups/nobody/lag")).status == 404


def test_metrics_report_kafka_lag_exporters_series_with_the_same_numbers(world: World) -> None:
    t1, t2, a, b = lag_world(world)
    group = world.core.groups.group("app")
    assert group is not None
    world.commit("app", {("orders", 0): 15, ("orders", 1): 5}, a, group.generation_id)
    world.advance(4_000)
    now = world.clock.now_ms()
    got = samples(world.metrics.render().decode())
    members = {m.member_id: m for m in (a, b)}
    owners = {p.partition: p.member_id for p in view(world, "app").partitions}

    def labels(partition: int) -> tuple[tuple[str, str], ...]:
        m = members[owners[partition]]
        return tuple(sorted({"cluster_name": "test-cluster", "group": "app", "topic": "orders",
                             "partition": str(partition), "member_host": "/10.0.0.1", "consumer_id": m.member_id,
                             "client_id": m.client_id}.items()))  # fmt: skip

    assert got[("kafka_consumergroup_group_lag", labels(0))] == 15
    assert got[("kafka_consumergroup_group_lag_seconds", labels(0))] == (now - t2) / 1000
    assert got[("kafka_consumergroup_group_lag", labels(1))] == 0
    assert got[("kafka_consumergroup_group_lag_seconds", labels(1))] == 0
    assert math.isnan(got[("kafka_consumergroup_group_lag", labels(2))])  # no commit: NaN, as kafka-lag-exporter
    assert math.isnan(got[("kafka_consumergroup_group_lag_seconds", labels(3))])
    group_labels = (("cluster_name", "test-cluster"), ("group", "app"))
    assert got[("kafka_consumergroup_group_max_lag", group_labels)] == 15
    assert got[("kafka_consumergroup_group_max_lag_seconds", group_labels)] == (now - t2) / 1000
    assert got[("kafka_consumergroup_group_sum_lag", group_labels)] == 15
    assert got[("kafka_consumergroup_group_topic_sum_lag", (*group_labels, ("topic", "orders")))] == 15
    tp = (("cluster_name", "test-cluster"), ("partition", "0"), ("topic", "orders"))
    assert got[("kafka_partition_latest_offset", tp)] == 30
    assert got[("kafka_partition_earliest_offset", tp)] == 0
    assert {dict(k[1])["partition"] for k in got if k[0] == "kafka_partition_latest_offset"} == {"0", "1", "2", "3"}
    assert t1 < t2
