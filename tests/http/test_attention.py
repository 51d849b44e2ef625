"""``/v1/attention`` and ``/v1/groups/{group}/events`` on the real core (manual clock): each check of the "needs
attention" list fires on the state that should fire it and not before."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from coordinator.messages import JoinGroupRequest
from protocol.errors import ErrorCode

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
    assert [e["kind"] for e in events] == ["static_replacement", "join_refused"]
    assert events[0]["previous_member_id"] == old and events[0]["group_instance_id"] == "inst-1"
    assert events[1]["error"] == "INCONSISTENT_GROUP_PROTOCOL" and events[1]["client_id"] == "odd-one"
    assert health(await attention(client), "s")["refused_joins_last_hour"] == 1
    # Delete (once Empty) and create again.
    world.leave("s", [b])
    assert (await client.delete("/v1/groups/s")).status == 200
    world.form_group("s", [Consumer("again")])
    events = (await (await client.get("/v1/groups/s/events")).json())["events"]
    assert [e["kind"] for e in events[:2]] == ["group_recreated", "group_deleted"]
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
    for i in range(3):
        activity.on_append([GroupTombstone("c", GroupRemovalCause.DELETED, now[0] + i)])
    assert [e.timestamp_ms for e in activity.events("c")] == [now[0] + 2, now[0] + 1]  # max_events, newest first
    for group in ("d", "e", "f"):
        activity.on_append([GroupTombstone(group, GroupRemovalCause.DELETED, now[0])])
    assert activity.events("c") == [] and len(activity.events("f")) == 1  # at most max_groups with events
