"""/metrics: parses as the Prometheus text format and reflects what the core did."""

from __future__ import annotations

from typing import Any

import pytest
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


# ------------------------------------------------------------------------------ per-partition offsets (real daemon)


def _daemon_with_offsets(per_group_metrics: bool) -> tuple[Any, str, float]:
    """A running daemon (tests.server's RunningApp) where a consumer group ``app`` has a member assigned t-0 and t-1
    that committed t-0 at 42, and a group without members ``tool`` has a commit of t-2 at 7 stamped an hour ago
    (OffsetCommit v1's client commit timestamp). Returns (the running app, the member id, the stamp's age in s)."""
    import time
    from datetime import timedelta

    from protocol.legacy import OffsetCommitRequestV1
    from servers.kafka.build import build
    from tests.server.conftest import RunningApp
    from tests.server.wire import WireClient, build_request

    from .world import encode_assignment, encode_subscription

    running = RunningApp(http={"listen": "127.0.0.1:0", "per_group_metrics": per_group_metrics}).start()
    client = WireClient("127.0.0.1", running.port)
    try:
        joined = client.call(build_request(
            11, 3, group_id="app", session_timeout=timedelta(seconds=30), rebalance_timeout=timedelta(seconds=30),
            member_id="", protocol_type="consumer",
            protocols=[{"name": "range", "metadata": encode_subscription(["t"])}],
        ))  # fmt: skip
        member = joined.member_id
        synced = client.call(build_request(
            14, 3, group_id="app", generation_id=joined.generation_id, member_id=member, group_instance_id=None,
            assignments=[{"member_id": member, "assignment": encode_assignment({"t": [0, 1]})}],
        ))  # fmt: skip
        assert synced.error_code == ErrorCode.none
        answer = client.call(build_request(
            8, 8, group_id="app", generation_id_or_member_epoch=joined.generation_id, member_id=member,
            group_instance_id=None, topics=[{"name": "t", "partitions": [{
                "partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1, "committed_metadata": ""
            }]}],
        ))  # fmt: skip
        assert answer.topics[0].partitions[0].error_code == ErrorCode.none
        stamped = time.time() - 3600
        client.send(build(OffsetCommitRequestV1, {
            "group_id": "tool", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [{"name": "t",
            "partitions": [{"partition_index": 2, "committed_offset": 7, "commit_timestamp": int(stamped * 1000),
                            "committed_metadata": ""}]}],
        }))  # fmt: skip
        client.read_frame()
    except BaseException:
        running.stop()
        raise
    finally:
        client.close()
    return running, member, time.time() - stamped


def _scrape(running: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{running.app.http_port}/metrics", timeout=5) as response:
        return samples(response.read().decode())


def test_committed_offsets_and_commit_ages_per_partition_under_kafka_lag_exporters_names() -> None:
    running, member, stamp_age = _daemon_with_offsets(per_group_metrics=True)
    try:
        got = _scrape(running)
    finally:
        running.stop()

    def labels(group: str, partition: int, host: str = "", consumer: str = "", client: str = "") -> Any:
        return tuple(sorted({"cluster_name": "kgc-cluster", "group": group, "topic": "t", "partition": str(partition),
                             "member_host": host, "consumer_id": consumer, "client_id": client}.items()))  # fmt: skip

    app_t0 = labels("app", 0, "/127.0.0.1", member, "wire-test")
    tool_t2 = labels("tool", 2)
    offsets = {k: v for k, v in got.items() if k[0] == "kafka_consumergroup_group_offset"}
    name = "kafka_consumergroup_group_offset"
    assert offsets == {(name, app_t0): 42, (name, tool_t2): 7}
    ages = {k[1]: v for k, v in got.items() if k[0] == "kgc_consumergroup_last_commit_age_seconds"}
    assert set(ages) == {app_t0, tool_t2}
    assert 0 <= ages[app_t0] < 30
    assert stamp_age - 30 < ages[tool_t2] <= stamp_age + 1  # an hour: the commit's own timestamp, not the scrape's


def test_per_partition_offset_series_are_off_with_per_group_metrics_off() -> None:
    running, _, _ = _daemon_with_offsets(per_group_metrics=False)
    try:
        got = _scrape(running)
    finally:
        running.stop()
    names = {name for name, _ in got}
    assert "kafka_consumergroup_group_offset" not in names
    assert "kgc_consumergroup_last_commit_age_seconds" not in names
    assert all("group" not in dict(labels) for _, labels in got)
    assert got[("kgc_offset_commits_total", (("kind", "member"),))] == 1  # the totals stay
    assert got[("kgc_offset_commits_total", (("kind", "admin"),))] == 1


def _family(text: str, name: str) -> str:
    """One family's lines (HELP, TYPE, samples) of a text exposition."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# HELP {name} "))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("# HELP ")), len(lines))
    return "\n".join(lines[start:end])


@pytest.mark.parametrize("per_group", [True, False])
def test_per_group_series_expose_what_prometheus_client_counters_and_histograms_expose(per_group: bool) -> None:
    """The rebalance and removal series are plain numbers rendered at scrape time: their exposition is, byte for
    byte, that of the prometheus_client Counter and Histogram they replaced, fed the same observations (bucket
    bounds included: a duration on a bound counts in that bound's bucket)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from coordinator.records import GroupStabilized, MemberRemoved, RebalanceCause, RebalanceStarted, RemovalCause
    from runtime.metrics import _REBALANCE_BUCKETS

    metrics = Metrics(per_group_labels=per_group)
    g = ["group"] if per_group else []
    registry = CollectorRegistry(auto_describe=False)
    rebalances = Counter("kgc_rebalances", "Rebalances started, by cause.", ["cause", *g], registry=registry)
    seconds = Histogram("kgc_rebalance_duration_seconds", "Rebalance duration from PreparingRebalance to Stable.", g,
                        buckets=_REBALANCE_BUCKETS, registry=registry)  # fmt: skip
    removals = Counter(
        "kgc_member_removals", "Members removed from groups, by cause.", ["cause", *g], registry=registry
    )
    before = generate_latest(registry).decode()
    durations_ms = [0, 5, 7, 10, 100, 999, 1_000, 2_500, 600_000, 700_000, 123_456]
    records: list[Any] = []
    for i in range(300):
        group = f"g{(i * 7919) % 23}"
        if i % 3 == 0:
            cause = list(RebalanceCause)[i % len(RebalanceCause)]
            records.append(RebalanceStarted(group, 1, cause, None, None, None, "Stable", 0))
            rebalances.labels(cause.value, *([group] if per_group else [])).inc()
        elif i % 3 == 1:
            ms = durations_ms[i % len(durations_ms)]
            records.append(GroupStabilized(group, 1, 0, ms, 0))
            (seconds.labels(group) if per_group else seconds).observe(ms / 1000)
        else:
            removal = list(RemovalCause)[i % len(RemovalCause)]
            records.append(MemberRemoved(group, "m", None, removal, None, 1, 0))
            removals.labels(removal.value, *([group] if per_group else [])).inc()
    if not per_group:  # before any observation: an unlabelled histogram exposes its zeros
        assert _family(metrics.render().decode(), "kgc_rebalance_duration_seconds") == _family(
            before, "kgc_rebalance_duration_seconds"
        )
    metrics.on_append(records)
    ours, theirs = metrics.render().decode(), generate_latest(registry).decode()
    for name in ("kgc_rebalances_total", "kgc_rebalance_duration_seconds", "kgc_member_removals_total"):
        assert _family(ours, name) == _family(theirs, name)
