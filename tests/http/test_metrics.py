"""/metrics: parses as the Prometheus text format and reflects what the core did."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from protocol.errors import ErrorCode
from runtime.metrics import Metrics

from .world import Consumer, World, make_world

Client = TestClient  # type: ignore[type-arg]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def drive(world: World) -> None:
    a, b = Consumer("a"), Consumer("b")
    generation = world.form_group("g", [a, b])
    world.commit("g", {("orders", 0): 1, ("orders", 1): 2}, a, generation)
    world.commit("simple", {("orders", 0): 5})
    world.leave("g", [b])


async def test_metrics_parse_and_count(world: World, client: Client) -> None:
    drive(world)
    world.metrics.observe_request(11, 0.002)
    world.metrics.observe_request(12, 0.0001, ErrorCode.rebalance_in_progress)
    world.metrics.observe_storage_write(12, 0.003)
    world.metrics.observe_storage_write(3, 0.5, ok=False)
    await client.get("/v1/groups")
    r = await client.get("/metrics")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
    got = samples(await r.text())
    assert got[("kgc_groups", (("state", "PreparingRebalance"),))] == 1
    assert got[("kgc_groups", (("state", "Empty"),))] == 1  # the offsets-only group
    assert got[("kgc_groups", (("state", "Stable"),))] == 0
    assert got[("kgc_members", ())] == 1
    assert got[("kgc_group_members", (("group", "g"),))] == 1
    assert got[("kgc_rebalances_total", (("cause", "new_member"), ("group", "g")))] == 1
    assert got[("kgc_rebalances_total", (("cause", "member_left"), ("group", "g")))] == 1
    assert got[("kgc_member_removals_total", (("cause", "left"), ("group", "g")))] == 1
    assert got[("kgc_rebalance_duration_seconds_count", (("group", "g"),))] == 1
    assert got[("kgc_rebalance_phase_duration_seconds_count", (("phase", "join"),))] == 1
    assert got[("kgc_offset_commits_total", (("group", "g"), ("kind", "member")))] == 2
    assert got[("kgc_offset_commits_total", (("group", "simple"), ("kind", "admin")))] == 1
    assert got[("kgc_request_seconds_count", (("api", "JoinGroup"),))] == 1
    assert got[("kgc_requests_total", (("api", "Heartbeat"), ("error", "rebalance_in_progress")))] == 1
    assert got[("kgc_requests_total", (("api", "JoinGroup"), ("error", "none")))] == 1
    assert got[("kgc_storage_write_batch_records_count", ())] == 2
    assert got[("kgc_storage_write_batch_records_sum", ())] == 15
    assert got[("kgc_storage_write_failures_total", ())] == 1
    assert got[("kgc_http_requests_total", (("route", "/v1/groups"), ("status", "200")))] == 1


async def test_per_group_labels_can_be_switched_off() -> None:
    world = make_world(per_group_labels=False)
    drive(world)
    async with TestClient(TestServer(world.app)) as client:
        got = samples(await (await client.get("/metrics")).text())
    assert all("group" not in dict(labels) for _name, labels in got)
    assert got[("kgc_rebalances_total", (("cause", "new_member"),))] == 1
    assert got[("kgc_offset_commits_total", (("kind", "member"),))] == 2
    assert got[("kgc_members", ())] == 1


async def test_failed_commits_are_not_counted() -> None:
    world = make_world(auto_commit=False)
    from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest

    d = world.core.commit_offsets(OffsetCommitRequest("s", -1, "", None, [OffsetCommitPartition("orders", 0, 1)], 8))
    world.log.fail()
    assert d.done and d.result().partitions[0].error is not ErrorCode.none
    got = samples(world.metrics.render().decode())
    assert not any(name == "kgc_offset_commits_total" for name, _ in got)


async def test_metrics_endpoint_is_404_without_metrics(world: World) -> None:
    from servers.http import create_http_app

    app = create_http_app(world.core)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/metrics")
        assert r.status == 404 and (await r.json())["status"] == 404


def test_unknown_api_keys_and_errors_are_labelled_by_number() -> None:
    m = Metrics()
    m.observe_request(999, 0.001, 32000)
    got = samples(m.render().decode())
    assert got[("kgc_requests_total", (("api", "999"), ("error", "32000")))] == 1
