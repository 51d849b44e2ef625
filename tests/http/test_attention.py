"""``/v1/attention`` and ``/v1/groups/{group}/events`` on the real core (manual clock): each check of the "needs
attention" list fires on the state that should fire it and not before."""

from __future__ import annotations

import dataclasses
from typing import Any

from aiohttp.test_utils import TestClient

from coordinator.messages import JoinGroupRequest
from protocol.errors import ErrorCode
from tests.storage.records_gen import commit

from .world import SESSION_MS, Consumer, World, encode_subscription

Client = TestClient  # type: ignore[type-arg]


async def attention(client: Client, **query: Any) -> Any:
    resp = await client.get("/v1/attention", params={k: str(v) for k, v in query.items()})
    assert resp.status == 200, await resp.text()
    return await resp.json()


def kinds(body: Any, group: str) -> list[tuple[str, str | None]]:
    return [(i["kind"], i["member_id"]) for i in body["items"] if i["group_id"] == group]


def health(body: Any, group: str) -> Any:
    return next(g for g in body["groups"] if g["group_id"] == group)


async def test_members_without_partitions_flapping_and_commit_age(world: World, client: Client) -> None:
    a, b, c = (Consumer(f"pay-{i}", topics=("payments",)) for i in range(3))  # payments has 2 partitions
    world.form_group("pay", [a, b])
    body = await attention(client)
    assert kinds(body, "pay") == [] and health(body, "pay")["rebalances_last_hour"] == 1
    generation = world.form_group("pay", [a, b, c])
    body = await attention(client, flapping_per_hour=2)
    idle = health(body, "pay")["members_without_partitions"]
    assert len(idle) == 1 and idle[0] in {a.member_id, b.member_id, c.member_id}
    assert kinds(body, "pay") == [("flapping", None), ("no_partitions", idle[0])]
    assert health(body, "pay")["flapping"] is True and health(body, "pay")["last_commit_ms"] is None
    world.commit("pay", {("payments", 0): 7}, a, generation)
    world.advance(1_000)
    g = health(await attention(client), "pay")
    assert g["last_commit_ms"] == world.clock.now_ms() - 1_000 and g["last_commit_age_ms"] == 1_000
    # An hour later the rebalances have left the window; disabled checks stay silent.
    world.clock.set(world.clock.now_ms() + 3_600_001)
    body = await attention(client, flapping_per_hour=2, stale_heartbeat_pct=0, quiet_commits_ms=0)
    assert health(body, "pay")["rebalances_last_hour"] == 0
    assert kinds(body, "pay") == [("no_partitions", idle[0])]


async def test_stale_heartbeats_quiet_commits_and_stuck_groups(world: World, client: Client) -> None:
    a, b = Consumer("a"), Consumer("b")
    world.form_group("g", [a, b])
    world.advance(SESSION_MS // 2 - 100)
    assert kinds(await attention(client), "g") == []
    world.advance(200)  # past half the session timeout without a heartbeat
    body = await attention(client, quiet_commits_ms=1_000)
    assert sorted(kinds(body, "g")) == sorted([("stale_heartbeat", a.member_id), ("stale_heartbeat", b.member_id),
                                               ("quiet_commits", None)])  # fmt: skip
    assert "no commit" in next(i["detail"] for i in body["items"] if i["kind"] == "quiet_commits")
    # A third member starts a rebalance the others never answer: stuck once past the threshold.
    world._join("g", Consumer("c"))
    body = await attention(client, stuck_ms=1_000)
    assert ("stuck", None) not in kinds(body, "g")
    world.clock.set(world.clock.now_ms() + 1_500)
    body = await attention(client, stuck_ms=1_000)
    assert kinds(body, "g")[0] == ("stuck", None) and body["items"][0]["kind"] == "stuck"
    assert (await client.get("/v1/attention", params={"stuck_ms": "-1"})).status == 400


async def test_events_refused_join_static_replacement_delete_and_recreate(world: World, client: Client) -> None:
    a = Consumer("static-1", instance_id="inst-1")
    world.form_group("s", [a])
    old = a.member_id
    # The refusal as the Kafka listener reports it: the core's answer to an inconsistent protocol.
    req = JoinGroupRequest("s", "", None, "consumer", [("roundrobin", encode_subscription(["orders"]))],
                           SESSION_MS, 30_000, "odd-one", "/10.0.0.9", 9)  # fmt: skip
    d = world.core.join_group(req)
    assert d.done and d.result().error is ErrorCode.inconsistent_group_protocol
    world.activity.join_refused(req, d.result().error)
    # A new instance of the static member (member id "") replaces it.
    b = Consumer("static-1b", instance_id="inst-1")
    world._join("s", b)
    resp = await client.get("/v1/groups/s/events")
    events = (await resp.json())["events"]
    assert [(e["kind"], e["source"]) for e in events] == [("static_replacement", "history"), ("join_refused", "memory")]
    assert events[0]["previous_member_id"] == old and events[0]["group_instance_id"] == "inst-1"
    new_id = events[0]["member_id"]
    assert new_id not in ("", old) and new_id in world.core.groups.group("s").members
    assert events[1]["error"] == "INCONSISTENT_GROUP_PROTOCOL" and events[1]["client_id"] == "odd-one"
    assert health(await attention(client), "s")["refused_joins_last_hour"] == 1
    # The replacement in Stable is no rebalance's, and not the next one's either.
    rebalances = (await (await client.get("/v1/groups/s/rebalances")).json())["rebalances"]
    assert all(new_id not in {i["member_id"] for i in r["members_in"]} for r in rebalances)
    # Delete (once Empty) and create again.
    world.clock.set(world.clock.now_ms() + 1_000)
    world.leave("s", [b])
    assert (await client.delete("/v1/groups/s")).status == 200
    world.clock.set(world.clock.now_ms() + 1_000)
    world.form_group("s", [Consumer("again")])
    body = await (await client.get("/v1/groups/s/events")).json()
    assert [(e["kind"], e["cause"]) for e in body["events"]] == [
        ("group_recreated", None), ("group_deleted", "deleted"), ("static_replacement", None), ("join_refused", None)
    ]  # fmt: skip
    assert body["total"] == 4 and "survive a restart" in body["note"]
    # Filtered on the time, then paged (the merge of both sources is paged as one list).
    deleted_at = body["events"][1]["timestamp_ms"]
    page = await (await client.get("/v1/groups/s/events", params={"limit": "2", "offset": "1"})).json()
    assert page["events"] == body["events"][1:3] and page["total"] == 4
    page = await (await client.get("/v1/groups/s/events", params={"until": str(deleted_at)})).json()
    assert page["events"] == body["events"][2:] and page["total"] == 2
    assert (await client.get("/v1/groups/nope/events")).status == 404


def test_activity_is_bounded() -> None:
    from coordinator.records import GroupRemovalCause, GroupTombstone, RebalanceCause, RebalanceStarted
    from runtime.activity import GroupActivity

    now = [1_000_000_000]
    activity = GroupActivity(lambda: now[0], max_starts=3, max_events=2, max_groups=2)

    def start(group: str, ts: int) -> RebalanceStarted:
        return RebalanceStarted(group, 0, RebalanceCause.NEW_MEMBER, None, None, None, "Empty", ts)

    activity.on_append([start("a", now[0] - 10 * i) for i in range(5)])
    assert activity.rebalances_in_window("a") == 3  # at most max_starts per group
    activity.on_append([start("b", now[0]), start("c", now[0])])
    assert activity.rebalances_in_window("a") == 0  # the oldest group went when the third came (max_groups)
    assert activity.rebalances_in_window("c") == 1
    now[0] += activity.window_ms + 1
    assert activity.rebalances_in_window("c") == 0  # out of the window
    req = JoinGroupRequest("c", "", None, "consumer", [], SESSION_MS, 30_000, "x", "/h", 9)
    for _ in range(3):
        now[0] += 1
        activity.join_refused(req, ErrorCode.inconsistent_group_protocol)
    assert [e.timestamp_ms for e in activity.refusals("c")] == [now[0], now[0] - 1]  # max_events, newest first
    assert activity.refused_since("c", 0) == 2
    for group in ("d", "e", "f"):
        activity.join_refused(dataclasses.replace(req, group_id=group), ErrorCode.group_max_size_reached)
    assert activity.refusals("c") == [] and len(activity.refusals("f")) == 1  # at most max_groups with refusals
    # a tombstone drops the group's last commit, not its rebalance count
    activity.on_durable([commit("b", "t", 0, 1, now[0])])
    assert activity.last_commit_ms("b") == now[0]
    activity.on_append([GroupTombstone("b", GroupRemovalCause.DELETED, now[0])])
    assert activity.last_commit_ms("b") is None
