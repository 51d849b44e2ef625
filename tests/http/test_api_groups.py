"""Read endpoints: groups, members, offsets, commit log, rebalance history, topics, health."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from coordinator.messages import JoinGroupRequest
from protocol.errors import ErrorCode

from .world import REBALANCE_MS, SESSION_MS, START_MS, Consumer, World

Client = TestClient  # type: ignore[type-arg]


async def get_json(client: Client, path: str, status: int = 200, **params: Any) -> Any:
    r = await client.get(path, params=params or None)
    body = await r.json()
    assert r.status == status, body
    assert r.content_type == "application/json"
    if status >= 400:
        assert body["status"] == status and body["error"]
    return body


def three_groups(world: World) -> tuple[list[Consumer], int]:
    """g-stable (2 consumers, Stable), g-empty (offsets only), g-prep (a member left: PreparingRebalance)."""
    stable = [Consumer("c1"), Consumer("c2", "inst-2", ("orders", "payments"))]
    generation = world.form_group("g-stable", stable)
    world.commit("g-empty", {("orders", 0): 7})
    prep = [Consumer("p1"), Consumer("p2")]
    world.form_group("g-prep", prep)
    world.leave("g-prep", [prep[0]])
    return stable, generation


# ------------------------------------------------------------------------------------------------------- groups


async def test_list_groups_filters_and_pages(world: World, client: Client) -> None:
    three_groups(world)
    body = await get_json(client, "/v1/groups")
    assert [g["group_id"] for g in body["groups"]] == ["g-empty", "g-prep", "g-stable"]
    assert body["total"] == 3
    by_id = {g["group_id"]: g for g in body["groups"]}
    assert by_id["g-stable"] == {
        "group_id": "g-stable",
        "state": "Stable",
        "protocol_type": "consumer",
        "protocol": "range",
        "generation_id": 1,
        "members": 2,
        "status": None,  # no evaluator in this world's record stream (tests/http/test_group_status.py)
    }
    assert by_id["g-empty"]["state"] == "Empty" and by_id["g-empty"]["protocol_type"] == ""
    assert by_id["g-prep"]["state"] == "PreparingRebalance" and by_id["g-prep"]["members"] == 1

    body = await get_json(client, "/v1/groups", state="Stable")
    assert [g["group_id"] for g in body["groups"]] == ["g-stable"]
    body = await get_json(client, "/v1/groups", state="Stable,Empty")
    assert [g["group_id"] for g in body["groups"]] == ["g-empty", "g-stable"]
    r = await client.get("/v1/groups?state=Stable&state=PreparingRebalance")
    assert [g["group_id"] for g in (await r.json())["groups"]] == ["g-prep", "g-stable"]
    body = await get_json(client, "/v1/groups", protocol_type="")
    assert [g["group_id"] for g in body["groups"]] == ["g-empty"]
    body = await get_json(client, "/v1/groups", protocol_type="consumer", limit=1, offset=1)
    assert [g["group_id"] for g in body["groups"]] == ["g-stable"]
    assert (body["total"], body["limit"], body["offset"]) == (2, 1, 1)


async def test_list_groups_rejects_bad_queries(client: Client) -> None:
    body = await get_json(client, "/v1/groups", 400, state="Sleeping")
    assert body["details"][0]["loc"][0] == "state"
    await get_json(client, "/v1/groups", 400, limit=0)
    await get_json(client, "/v1/groups", 400, limit="many")
    await get_json(client, "/v1/groups", 400, offset=-1)


async def test_describe_consumer_group_decodes_subscriptions_and_assignments(world: World, client: Client) -> None:
    stable, generation = three_groups(world)
    world.advance(1_500)
    group = world.core.groups.group("g-stable")
    assert group is not None
    body = await get_json(client, "/v1/groups/g-stable")
    assert body["state"] == "Stable" and body["generation_id"] == generation
    assert body["leader"] == group.leader_id and body["protocol"] == "range"
    assert body["state_since_ms"] == group.state_timestamp_ms
    members = {m["client_id"]: m for m in body["members"]}
    c1, c2 = members["c1"], members["c2"]
    assert c1["member_id"] == stable[0].member_id and c1["group_instance_id"] is None
    assert c2["group_instance_id"] == "inst-2" and c2["client_host"] == "/10.0.0.1"
    assert (c1["session_timeout_ms"], c1["rebalance_timeout_ms"]) == (SESSION_MS, REBALANCE_MS)
    assert (
        c1["since_last_heartbeat_ms"]
        == world.clock.monotonic_ms() - group.members[c1["member_id"]].last_heartbeat_monotonic_ms
    )
    assert c1["since_last_heartbeat_ms"] >= 1_500
    assert c1["subscription"] == ["orders"] and c2["subscription"] == ["orders", "payments"]
    # range_assign deals partitions round-robin over the sorted member ids
    first, second = sorted([stable[0].member_id, stable[1].member_id])
    expected = {first: {"orders": [0, 2], "payments": [0]}, second: {"orders": [1, 3], "payments": [1]}}
    assert {m["member_id"]: m["assignment"] for m in body["members"]} == expected


async def test_describe_non_consumer_group_has_no_decoded_fields(world: World, client: Client) -> None:
    req = JoinGroupRequest("connect-g", "", "w1", "connect", [("sessioned", b"\x00\x01opaque")], SESSION_MS,
                           REBALANCE_MS, "worker", "/10.0.0.9", 9)  # fmt: skip
    world.core.join_group(req)
    body = await get_json(client, "/v1/groups/connect-g")
    assert body["protocol_type"] == "connect"
    (member,) = body["members"]
    assert member["subscription"] is None and member["assignment"] is None and member["protocols"] == ["sessioned"]


async def test_describe_reports_undecodable_consumer_metadata(world: World, client: Client) -> None:
    req = JoinGroupRequest("bad-g", "", "b1", "consumer", [("range", b"\x00")], SESSION_MS, REBALANCE_MS,
                           "broken", "/10.0.0.9", 9)  # fmt: skip
    world.core.join_group(req)
    body = await get_json(client, "/v1/groups/bad-g")
    (member,) = body["members"]
    assert member["decode_error"] and member["subscription"] is None


async def test_unknown_group_is_404_everywhere(client: Client) -> None:
    for path in ("", "/offsets", "/commits", "/rebalances"):
        body = await get_json(client, f"/v1/groups/nope{path}", 404)
        assert "nope" in body["error"]


# ------------------------------------------------------------------------------------------------------ offsets


async def test_offsets_of_a_consumer_group_and_of_a_simple_group(world: World, client: Client) -> None:
    stable, generation = three_groups(world)
    world.commit("g-stable", {("orders", 2): 42, ("orders", 0): 10}, stable[0], generation)
    body = await get_json(client, "/v1/groups/g-stable/offsets")
    assert body["group_id"] == "g-stable"
    assert [(o["topic"], o["partition"], o["offset"]) for o in body["offsets"]] == [
        ("orders", 0, 10),
        ("orders", 2, 42),
    ]
    assert (
        body["offsets"][0]["metadata"] == "meta" and body["offsets"][0]["commit_timestamp_ms"] == world.clock.now_ms()
    )
    body = await get_json(client, "/v1/groups/g-empty/offsets")
    assert [(o["topic"], o["partition"], o["offset"]) for o in body["offsets"]] == [("orders", 0, 7)]


async def test_commit_log_time_range_and_paging(world: World, client: Client) -> None:
    stable, generation = three_groups(world)
    t0 = world.clock.now_ms()
    for i in range(5):
        world.commit("g-stable", {("orders", 0): 100 + i}, stable[0], generation)
        world.advance(1_000)
    body = await get_json(client, "/v1/groups/g-stable/commits")
    assert [c["offset"] for c in body["commits"]] == [104, 103, 102, 101, 100]  # newest first
    assert body["commits"][0]["member_id"] == stable[0].member_id and body["commits"][0]["admin"] is False
    assert body["commits"][0]["generation_id"] == generation
    body = await get_json(client, "/v1/groups/g-stable/commits", since=t0 + 1_000, until=t0 + 3_000)
    assert [c["offset"] for c in body["commits"]] == [102, 101]
    assert body["total"] == 2
    body = await get_json(client, "/v1/groups/g-stable/commits", since="2026-01-01T00:00:00Z", limit=2, offset=1)
    assert [c["offset"] for c in body["commits"]] == [103, 102] and body["total"] == 5
    body = await get_json(client, "/v1/groups/g-empty/commits")
    assert body["commits"][0]["admin"] is True and body["commits"][0]["generation_id"] == -1
    await get_json(client, "/v1/groups/g-stable/commits", 400, since="yesterday")
    await get_json(client, "/v1/groups/g-stable/commits", 400, limit=5000)


# ---------------------------------------------------------------------------------------------------- rebalances


async def test_rebalance_history_has_causes_members_durations_and_moves(world: World, client: Client) -> None:
    a, b = Consumer("a"), Consumer("b")
    world.form_group("g", [a, b])
    t_start = world.clock.now_ms()
    world.advance(2_000)
    c = Consumer("c")
    world.form_group("g", [c, a, b])  # c joins first: a rebalance caused by a new member, a and b rejoin
    world.advance(2_000)
    world.leave("g", [b], reason="scaling down")
    world.form_group("g", [a, c])

    body = await get_json(client, "/v1/groups/g/rebalances")
    assert body["total"] == 3
    left, joined, initial = body["rebalances"]  # newest first
    assert initial["cause"] == "new_member" and initial["previous_state"] == "Empty"
    assert initial["outcome"] == "stable" and initial["from_generation"] == 0 and initial["to_generation"] == 1
    assert initial["started_ms"] == START_MS
    assert initial["join_completed_ms"] - initial["started_ms"] == initial["join_duration_ms"] >= 3_000
    assert initial["stabilized_ms"] - initial["started_ms"] == initial["duration_ms"]
    assert initial["duration_ms"] == initial["join_duration_ms"] + initial["sync_duration_ms"]
    assert {m["client_id"] for m in initial["members_in"]} == {"a", "b"}
    assert {(m["topic"], m["partition"]) for m in initial["partitions_moved"]} == {("orders", p) for p in range(4)}
    assert all(m["from_member"] is None for m in initial["partitions_moved"])

    assert joined["cause"] == "new_member" and joined["previous_state"] == "Stable"
    assert joined["started_ms"] >= t_start + 2_000
    assert [m["client_id"] for m in joined["members_in"]] == ["c"]
    assert sorted(joined["members"]) == sorted([a.member_id, b.member_id, c.member_id])
    assert (joined["from_generation"], joined["to_generation"]) == (1, 2)
    # orders has 4 partitions dealt round-robin over sorted ids: adding a member moves some of them
    moves = joined["partitions_moved"]
    assert moves and all(m["from_member"] != m["to_member"] for m in moves)
    assert all(m["to_member"] in (a.member_id, b.member_id, c.member_id) for m in moves)

    assert left["cause"] == "member_left" and left["reason"] == "scaling down" and left["member_id"] == b.member_id
    assert [(m["member_id"], m["cause"], m["reason"]) for m in left["members_out"]] == [
        (b.member_id, "left", "scaling down")
    ]
    assert left["outcome"] == "stable" and left["members_in"] == []
    assert not any(m["to_member"] == b.member_id for m in left["partitions_moved"])
    assert {m["from_member"] for m in left["partitions_moved"]} >= {b.member_id}

    page = await get_json(client, "/v1/groups/g/rebalances", limit=1, offset=2)
    assert page["rebalances"] == [initial] and page["total"] == 3
    ranged = await get_json(client, "/v1/groups/g/rebalances", since=t_start + 1)
    assert [r["cause"] for r in ranged["rebalances"]] == ["member_left", "new_member"]


async def test_rebalance_in_progress_and_session_timeout(world: World, client: Client) -> None:
    a, b = Consumer("a"), Consumer("b")
    generation = world.form_group("g", [a, b])
    # only a heartbeats; b's session expires
    from coordinator.messages import HeartbeatRequest

    for _ in range(12):
        world.advance(1_000)
        assert world.core.heartbeat(HeartbeatRequest("g", generation, a.member_id)) in (
            ErrorCode.none,
            ErrorCode.rebalance_in_progress,
        )
    body = await get_json(client, "/v1/groups/g/rebalances")
    latest = body["rebalances"][0]
    assert latest["cause"] == "session_timeout" and latest["outcome"] == "in_progress"
    assert [(m["member_id"], m["cause"]) for m in latest["members_out"]] == [(b.member_id, "session_timeout")]
    assert latest["duration_ms"] is None and latest["to_generation"] is None


# ------------------------------------------------------------------------------------------------ topics, health


async def test_topics_list_register_grow_and_errors(world: World, client: Client) -> None:
    body = await get_json(client, "/v1/topics")
    assert [(t["name"], t["partitions"], t["internal"], t["log"]) for t in body["topics"]] == [
        ("orders", 4, False, []),  # no broker in this world: no offsets
        ("payments", 2, False, []),
    ]
    r = await client.post("/v1/topics", json={"name": "clicks", "partitions": 3})
    created = await r.json()
    assert r.status == 201 and (created["name"], created["partitions"]) == ("clicks", 3)
    g = world.topics.get("clicks")
    assert g is not None and g.partitions == 3
    r = await client.post("/v1/topics", json={"name": "clicks", "partitions": 3})
    assert r.status == 200
    r = await client.post("/v1/topics", json={"name": "clicks", "partitions": 6})
    assert r.status == 200 and (await r.json())["partitions"] == 6
    r = await client.post("/v1/topics", json={"name": "clicks", "partitions": 2})
    assert r.status == 409 and "shrink" in (await r.json())["error"]
    for bad in ({"name": "no spaces", "partitions": 1}, {"name": "x", "partitions": 0}, {"name": "x"},
                {"name": "x", "partitions": 1, "extra": True}, [1, 2]):  # fmt: skip
        r = await client.post("/v1/topics", json=bad)
        assert r.status == 400, bad
    r = await client.post("/v1/topics", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status == 400 and (await r.json())["error"] == "invalid request body"
    r = await client.post("/v1/topics", data=b"", headers={"Content-Type": "application/json"})
    assert r.status == 400 and (await r.json())["error"] == "a JSON body is required"
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded"):
        headers = {"Content-Type": content_type} if content_type else {}
        r = await client.post("/v1/topics", data=b'{"name": "cross", "partitions": 1}', headers=headers)
        assert r.status == 415 and (await r.json())["status"] == 415, content_type
    assert world.topics.get("cross") is None
    r = await client.post("/v1/topics", json={"name": "..", "partitions": 1})
    assert r.status == 400
    world.topics.add("__consumer_offsets", 50)  # as the daemon has it
    r = await client.post("/v1/topics", json={"name": "__consumer_offsets", "partitions": 60})
    assert r.status == 400 and "internal" in (await r.json())["error"]
    world.topics.add("cross", 1)
    body = await get_json(client, "/v1/topics")
    assert [t["name"] for t in body["topics"]] == ["clicks", "cross", "orders", "payments"]  # no internal topic


async def test_health_and_readiness(world: World, client: Client) -> None:
    assert await get_json(client, "/healthz") == {"status": "ok"}
    assert await get_json(client, "/readyz") == {"ready": True, "detail": "loaded"}
    from servers.http import ReadyState

    world.ready = ReadyState(False, "loading records: 10%")
    r = await client.get("/readyz")
    assert r.status == 503 and await r.json() == {"ready": False, "detail": "loading records: 10%"}


async def test_unknown_paths_and_methods_answer_json(client: Client) -> None:
    r = await client.get("/v2/nothing")
    assert r.status == 404 and (await r.json())["status"] == 404
    r = await client.put("/v1/groups")
    assert r.status == 405 and (await r.json())["status"] == 405


async def test_openapi_document_lists_every_route(client: Client) -> None:
    doc = await get_json(client, "/openapi.json")
    assert doc["openapi"].startswith("3.")
    ops = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert ops == {
        ("/v1/groups", "get"),
        ("/v1/groups/{group}/status", "get"),
        ("/v1/groups/{group}", "get"),
        ("/v1/groups/{group}", "delete"),
        ("/v1/groups/{group}/offsets", "get"),
        ("/v1/groups/{group}/offsets", "delete"),
        ("/v1/groups/{group}/offsets/reset", "post"),
        ("/v1/groups/{group}/events", "get"),
        ("/v1/attention", "get"),
        ("/v1/groups/{group}/lag", "get"),
        ("/v1/lag", "get"),
        ("/v1/groups/{group}/commits", "get"),
        ("/v1/groups/{group}/rebalances", "get"),
        ("/v1/groups/{group}/members/{instance}", "delete"),
        ("/v1/topics", "get"),
        ("/v1/topics", "post"),
        ("/v1/topics/{topic}", "delete"),
        ("/v1/topics/{topic}/configs", "patch"),
        ("/v1/audit", "get"),
        ("/v1/users", "get"),
        ("/v1/users/{user}", "get"),
        ("/v1/users/{user}", "put"),
        ("/v1/users/{user}", "delete"),
        ("/v1/acls", "get"),
        ("/v1/acls", "post"),
        ("/v1/acls", "delete"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
    }
    schemas = doc["components"]["schemas"]
    assert {"GroupDetail", "OffsetResetRequest", "RebalanceView", "ErrorBody"} <= schemas.keys()
    reset = doc["paths"]["/v1/groups/{group}/offsets/reset"]["post"]
    assert reset["security"] == [{"bearer": []}] and {"400", "401", "404", "409"} <= reset["responses"].keys()
