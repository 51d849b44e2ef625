"""Actions: delete a group, reset offsets, remove a static member; bearer token; storage timeouts."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.records import (
    GroupTombstone,
    MemberRemoved,
    OffsetCommitRecord,
    OffsetTombstone,
    RebalanceCause,
    RebalanceStarted,
    RemovalCause,
)

from .conftest import TOKEN
from .world import START_MS, Consumer, World, make_world

Client = TestClient  # type: ignore[type-arg]


async def call(client: Client, method: str, path: str, status: int, json: Any = None, **kw: Any) -> Any:
    r = await client.request(method, path, json=json, **kw)
    body = await r.json()
    assert r.status == status, body
    if status >= 400:
        assert body["status"] == status and body["error"]
    return body


def committed(world: World, group_id: str) -> dict[tuple[str, int], int]:
    return {tp: o.offset for tp, o in world.core.offsets.committed(group_id).items()}


# ------------------------------------------------------------------------------------------------------- delete


async def test_delete_empty_group_writes_a_tombstone(world: World, client: Client) -> None:
    world.commit("simple", {("orders", 0): 3})
    body = await call(client, "DELETE", "/v1/groups/simple", 200)
    assert body == {"group_id": "simple", "deleted": True}
    assert world.core.groups.group("simple") is None and committed(world, "simple") == {}
    (tomb,) = world.log.of_type(GroupTombstone)
    assert tomb.group_id == "simple" and tomb.cause.value == "deleted"  # type: ignore[union-attr]
    assert [(r.topic, r.partition) for r in world.log.of_type(OffsetTombstone)] == [("orders", 0)]  # type: ignore[union-attr]
    await call(client, "DELETE", "/v1/groups/simple", 404)


async def test_delete_refuses_non_empty_and_unknown_groups(world: World, client: Client) -> None:
    world.form_group("busy", [Consumer("c1")])
    body = await call(client, "DELETE", "/v1/groups/busy", 409)
    assert "Stable" in body["error"] and "Empty" in body["error"]
    assert world.core.groups.group("busy") is not None and not world.log.of_type(GroupTombstone)
    await call(client, "DELETE", "/v1/groups/ghost", 404)


async def test_delete_answers_503_when_storage_does_not_answer() -> None:
    world = make_world(auto_commit=False)  # the core is real; only the log holds writes until told
    d = world.core.commit_offsets(OffsetCommitRequest("slow", -1, "", None, [OffsetCommitPartition("orders", 0, 1)], 8))
    world.log.commit()
    assert d.done
    async with TestClient(TestServer(world.app)) as client:
        body = await call(client, "DELETE", "/v1/groups/slow", 503)
        assert "storage" in body["error"]
    assert world.log.pending == 1  # the tombstone is still waiting: nothing was answered as done


# ------------------------------------------------------------------------------------------------------- reset


async def test_reset_is_a_dry_run_by_default(world: World, client: Client) -> None:
    world.commit("g", {("orders", 0): 50, ("orders", 1): 60})
    body = await call(client, "POST", "/v1/groups/g/offsets/reset", 200,
                      {"strategy": "to-earliest", "topics": "all"})  # fmt: skip
    assert body == {
        "group_id": "g",
        "strategy": "to-earliest",
        "dry_run": True,
        "partitions": [
            {"topic": "orders", "partition": 0, "current_offset": 50, "new_offset": 0},
            {"topic": "orders", "partition": 1, "current_offset": 60, "new_offset": 0},
        ],
    }
    assert committed(world, "g") == {("orders", 0): 50, ("orders", 1): 60}


async def test_reset_execute_goes_through_the_core_as_an_admin_commit(world: World, client: Client) -> None:
    for p in range(4):
        world.produce("orders", p, 30)
    world.commit("g", {("orders", 0): 50})
    world.log.take()
    req = {"strategy": "to-offset", "to_offset": 17, "topics": [{"topic": "orders"}], "execute": True}
    body = await call(client, "POST", "/v1/groups/g/offsets/reset", 200, req)
    assert body["dry_run"] is False
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in body["partitions"]] == [
        (0, 50, 17), (1, None, 17), (2, None, 17), (3, None, 17)
    ]  # fmt: skip
    assert committed(world, "g") == {("orders", p): 17 for p in range(4)}
    records = world.log.of_type(OffsetCommitRecord)
    assert len(records) == 4
    assert all(r.generation_id == -1 and r.member_id == "" for r in records)  # type: ignore[union-attr]
    log = await call(client, "GET", "/v1/groups/g/commits", 200)
    assert log["total"] == 5 and all(c["admin"] for c in log["commits"])


async def test_reset_strategies_use_the_partitions_logs(world: World, client: Client) -> None:
    """As kafka-consumer-groups.sh: the log start and end, ListOffsets by timestamp, clamping into the log."""
    t0 = world.clock.now_ms()
    assert world.produce("orders", 0, 40, timestamp_ms=t0) == 0  # offsets 0-39, timestamp t0
    assert world.produce("payments", 1, 5, timestamp_ms=t0) == 0  # offsets 0-4
    assert world.produce("payments", 0, 2, timestamp_ms=t0) == 0  # offsets 0-1
    world.commit("g", {("orders", 0): 10, ("payments", 1): 3})
    world.advance(60_000)
    assert world.produce("orders", 0, 60, timestamp_ms=t0 + 60_000) == 40  # offsets 40-99, timestamp t0 + 60 s
    world.commit("g", {("orders", 0): 90})
    world.advance(20_000)  # now: t0 + 80 s

    async def plan(**req: Any) -> dict[tuple[str, int], int]:
        body = await call(client, "POST", "/v1/groups/g/offsets/reset", 200, req)
        return {(p["topic"], p["partition"]): p["new_offset"] for p in body["partitions"]}

    assert await plan(strategy="to-earliest", topics="all") == {("orders", 0): 0, ("payments", 1): 0}
    assert await plan(strategy="to-latest", topics="all") == {("orders", 0): 100, ("payments", 1): 5}
    assert await plan(strategy="to-current", topics=[{"topic": "payments"}]) == {
        ("payments", 0): 2, ("payments", 1): 3  # no commit: the log end, as Kafka's tool
    }  # fmt: skip
    assert await plan(strategy="to-offset", to_offset=1000, topics="all") == {("orders", 0): 100, ("payments", 1): 5}
    assert await plan(strategy="shift-by", shift_by=-5, topics="all") == {("orders", 0): 85, ("payments", 1): 0}
    assert await plan(strategy="shift-by", shift_by=7, topics=[{"topic": "orders", "partitions": [0]}]) == {
        ("orders", 0): 97
    }
    assert await plan(strategy="shift-by", shift_by=50, topics="all") == {("orders", 0): 100, ("payments", 1): 5}
    at = "2026-01-01T00:00:30Z"  # between the two batches of orders-0; after the only one of payments-1
    assert t0 == START_MS
    assert await plan(strategy="to-datetime", to_datetime=at, topics="all") == {
        ("orders", 0): 40, ("payments", 1): 5  # the first batch at or after the time; none: the log end
    }  # fmt: skip
    assert await plan(strategy="to-datetime", to_datetime="2025-12-31T00:00:00+00:00", topics="all") == {
        ("orders", 0): 0, ("payments", 1): 0
    }  # fmt: skip
    assert await plan(strategy="by-duration", by_duration_ms=10_000, topics="all") == {
        ("orders", 0): 100, ("payments", 1): 5
    }  # fmt: skip
    assert await plan(strategy="by-duration", by_duration_ms=45_000, topics="all") == {
        ("orders", 0): 40, ("payments", 1): 5
    }  # fmt: skip


async def test_reset_errors(world: World, client: Client) -> None:
    world.commit("g", {("orders", 0): 10})
    url = "/v1/groups/g/offsets/reset"
    body = await call(
        client, "POST", url, 409, {"strategy": "shift-by", "shift_by": 1, "topics": [{"topic": "payments"}]}
    )
    assert "no committed offset" in body["error"]
    for bad in (
        {"strategy": "to-offset", "topics": "all"},  # to-offset needs to_offset
        {"strategy": "to-earliest", "to_offset": 3, "topics": "all"},  # to_offset does not apply
        {"strategy": "to-earliest"},  # no topics
        {"strategy": "to-earliest", "topics": []},
        {"strategy": "to-earliest", "topics": "some"},
        {"strategy": "to-nowhere", "topics": "all"},
        {"strategy": "to-datetime", "to_datetime": "2026-01-01T00:00:00", "topics": "all"},  # no time zone
        {"strategy": "to-offset", "to_offset": -1, "topics": "all"},
        {"strategy": "by-duration", "by_duration_ms": -1, "topics": "all"},
    ):
        await call(client, "POST", url, 400, bad)
    await call(client, "POST", "/v1/groups/new/offsets/reset", 404, {"strategy": "to-earliest", "topics": "all"})
    world.form_group("no-offsets", [c := Consumer("x")])
    world.leave("no-offsets", [c])
    body = await call(
        client, "POST", "/v1/groups/no-offsets/offsets/reset", 409, {"strategy": "to-earliest", "topics": "all"}
    )
    assert "no committed offsets" in body["error"]
    body = await call(client, "POST", url, 404, {"strategy": "to-earliest", "topics": [{"topic": "unknown"}]})
    assert "unknown topic" in body["error"]
    body = await call(
        client, "POST", url, 404, {"strategy": "to-earliest", "topics": [{"topic": "orders", "partitions": [4]}]}
    )
    assert "4 partitions" in body["error"]
    assert committed(world, "g") == {("orders", 0): 10}
    # a committed partition the broker has no log for: refused where the log is needed, kept by to-current
    world.commit("gone", {("retired", 0): 4})
    body = await call(client, "POST", "/v1/groups/gone/offsets/reset", 404, {"strategy": "to-latest", "topics": "all"})
    assert "retired-0 does not exist" in body["error"]
    body = await call(client, "POST", "/v1/groups/gone/offsets/reset", 200, {"strategy": "to-current", "topics": "all"})
    assert body["partitions"][0]["new_offset"] == 4


async def test_reset_refused_unless_empty(world: World, client: Client) -> None:
    consumers = [Consumer("c1")]
    generation = world.form_group("live", consumers)
    world.commit("live", {("orders", 0): 5}, consumers[0], generation)
    body = await call(client, "POST", "/v1/groups/live/offsets/reset", 409,
                      {"strategy": "to-earliest", "topics": "all", "execute": True})  # fmt: skip
    assert "Stable" in body["error"]
    assert committed(world, "live") == {("orders", 0): 5}
    world.leave("live", consumers)
    await call(client, "POST", "/v1/groups/live/offsets/reset", 200,
               {"strategy": "to-earliest", "topics": "all", "execute": True})  # fmt: skip
    assert committed(world, "live") == {("orders", 0): 0}


async def test_reset_of_a_new_group_creates_its_offsets(world: World, client: Client) -> None:
    world.produce("payments", 1, 8)
    await call(client, "POST", "/v1/groups/fresh/offsets/reset", 200,
               {"strategy": "to-offset", "to_offset": 5, "topics": [{"topic": "payments", "partitions": [1]}],
                "execute": True})  # fmt: skip
    assert committed(world, "fresh") == {("payments", 1): 5}


# ----------------------------------------------------------------------------------------------- remove member


async def test_remove_static_member_is_recorded_as_admin_action(world: World, client: Client) -> None:
    consumers = [Consumer("c1", "inst-1"), Consumer("c2", "inst-2")]
    world.form_group("g", consumers)
    body = await call(client, "DELETE", "/v1/groups/g/members/inst-2", 200)
    assert body == {"group_id": "g", "group_instance_id": "inst-2", "removed": True}
    group = world.core.groups.group("g")
    assert group is not None and consumers[1].member_id not in group.members
    (removed,) = world.log.of_type(MemberRemoved)
    assert removed.cause is RemovalCause.ADMIN and removed.group_instance_id == "inst-2"  # type: ignore[union-attr]
    started = world.log.of_type(RebalanceStarted)[-1]
    assert started.cause is RebalanceCause.ADMIN_ACTION  # type: ignore[union-attr]
    history = await call(client, "GET", "/v1/groups/g/rebalances", 200)
    assert history["rebalances"][0]["cause"] == "admin_action"
    assert history["rebalances"][0]["members_out"][0]["cause"] == "admin"
    await call(client, "DELETE", "/v1/groups/g/members/inst-2", 404)


async def test_remove_member_errors(world: World, client: Client) -> None:
    world.form_group("g", [Consumer("dyn")])
    body = await call(client, "DELETE", "/v1/groups/g/members/dyn", 404)
    assert "no static member" in body["error"]
    await call(client, "DELETE", "/v1/groups/nope/members/x", 404)


# ------------------------------------------------------------------------------------------------------ tokens


async def test_mutations_need_the_bearer_token(secured: World, secured_client: Client) -> None:
    secured.commit("g", {("orders", 0): 1})
    reset = {"strategy": "to-earliest", "topics": "all", "execute": True}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        r = await secured_client.post("/v1/groups/g/offsets/reset", json=reset, headers=headers)
        assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
        assert (await r.json())["status"] == 401
        r = await secured_client.delete("/v1/groups/g", headers=headers)
        assert r.status == 401
        r = await secured_client.delete("/v1/groups/g/members/x", headers=headers)
        assert r.status == 401
        r = await secured_client.post("/v1/topics", json={"name": "t", "partitions": 1}, headers=headers)
        assert r.status == 401
    assert committed(secured, "g") == {("orders", 0): 1} and secured.topics.get("t") is None
    # reads stay open
    r = await secured_client.get("/v1/groups/g/offsets")
    assert r.status == 200
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = await secured_client.post("/v1/groups/g/offsets/reset", json=reset, headers=auth)
    assert r.status == 200 and committed(secured, "g") == {("orders", 0): 0}
    r = await secured_client.delete("/v1/groups/g", headers=auth)
    assert r.status == 200


# ---------------------------------------------------------------------------------------------------- audit log


def _audit_lines(caplog: Any) -> list[str]:
    from runtime.logging_setup import LogfmtFormatter

    return [LogfmtFormatter().format(r).split(" ", 1)[1] for r in caplog.records if r.name == "servers.http.audit"]


async def test_every_action_is_logged_with_the_group_and_who_asked(world: World, client: Client, caplog: Any) -> None:
    caplog.set_level("INFO", logger="servers.http.audit")
    world.form_group("g", [Consumer("c1", "inst-1"), Consumer("c2", "inst-2")])
    world.commit("simple", {("orders", 0): 3})
    ua = {"User-Agent": "kgc-test/1"}
    await call(client, "DELETE", "/v1/groups/g/members/inst-2", 200, headers=ua)
    reset = {"strategy": "to-offset", "to_offset": 1, "topics": "all", "execute": True}
    await call(client, "POST", "/v1/groups/simple/offsets/reset", 200, json=reset, headers=ua)
    await call(client, "POST", "/v1/groups/simple/offsets/reset", 200, json={**reset, "execute": False}, headers=ua)
    await call(client, "DELETE", "/v1/groups/simple", 200, headers=ua)
    await call(client, "DELETE", "/v1/groups/simple", 404, headers=ua)  # refused: nothing done, no action line
    who = "client_id=kgc-test/1 client_host=127.0.0.1 principal=User:ANONYMOUS"
    assert _audit_lines(caplog) == [
        f'level=info logger=servers.http.audit group=g msg="static member inst-2 removed through the operator API" '
        f"{who}",
        'level=info logger=servers.http.audit group=simple msg="offsets reset (to-offset) on 1 partition(s) through '
        f'the operator API" {who}',
        f'level=info logger=servers.http.audit group=simple msg="group deleted through the operator API" {who}',
    ]


async def test_an_action_with_the_token_names_the_token_as_principal(
    secured: World, secured_client: Client, caplog: Any
) -> None:
    caplog.set_level("INFO", logger="servers.http.audit")
    secured.commit("g", {("orders", 0): 1})
    r = await secured_client.delete("/v1/groups/g", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status == 200
    [line] = _audit_lines(caplog)
    assert " group=g " in line and line.endswith(" client_host=127.0.0.1 principal=token") and "None" not in line
