"""``StorageHistory`` (the durable store's read APIs) answers like ``MemoryHistory`` for the same records.

Both fold with ``coordinator.history``, but over different inputs: the store over records rebuilt from a window of
its tables, with owners from its decoded-assignment table and the metadata record before the window looked up in
SQL; the memory history over the records it was shown. Agreement on a scenario with joins, a leave, a session
timeout, commits and an admin reset, read whole and in pages, is a real check of the store's side.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from coordinator.messages import HeartbeatRequest
from protocol.errors import ErrorCode
from servers.http import create_http_app
from servers.http.storage_history import StorageHistory
from storage import SqlRecordLog, create_engine
from storage.queries import StorageQueries

from .world import Consumer, World, make_world


def scenario() -> World:
    world = make_world()
    a, b, c = Consumer("a", "inst-a"), Consumer("b"), Consumer("c", topics=("orders", "payments"))
    generation = world.form_group("g", [a, b])
    world.commit("g", {("orders", 0): 10, ("orders", 1): 11}, a, generation)
    world.advance(5_000)
    generation = world.form_group("g", [c, a, b])
    world.commit("g", {("orders", 0): 20}, c, generation)
    world.advance(1_000)
    world.leave("g", [b], reason="bye")
    generation = world.form_group("g", [a, c])
    for _ in range(12):  # c stops heartbeating: session timeout
        world.advance(1_000)
        world.core.heartbeat(HeartbeatRequest("g", generation, a.member_id, a.instance_id))
    # s: static member x replaced in place by x2 (Stable, no rebalance), then y joins (a rebalance without them)
    x, y = Consumer("x", "inst-x"), Consumer("y")
    world.form_group("s", [x])
    world.advance(1_000)
    world._join("s", Consumer("x2", "inst-x"))
    world.advance(1_000)
    world._join("s", y)
    # d: deleted once Empty, created again
    d = Consumer("d1")
    world.form_group("d", [d])
    world.leave("d", [d])
    world.advance(1_000)
    assert world.core.delete_groups(["d"]).result()[0].error is ErrorCode.none
    world.advance(1_000)
    world.form_group("d", [Consumer("d2")])
    world.commit("simple", {("payments", 0): 3})
    world.advance(1_000)
    world.commit("simple", {("payments", 0): 4})
    return world


@pytest.fixture
async def stored(tmp_path: Path) -> tuple[World, StorageHistory]:
    world = scenario()
    log = await SqlRecordLog.open(None, data_dir=tmp_path)
    try:
        log.append(list(world.log.records))
        await log.flush()
    except BaseException:
        await log.close()
        raise
    yield world, StorageHistory(log.queries)  # type: ignore[misc]
    await log.close()


async def test_rebalances_agree(stored: tuple[World, StorageHistory]) -> None:
    world, durable = stored
    for since, until, limit, offset in (
        (None, None, 100, 0),
        (None, None, 2, 1),
        (world.clock.now_ms() - 20_000, None, 100, 0),
    ):
        mine = await world.history.rebalances("g", since, until, limit, offset)
        theirs = await durable.rebalances("g", since, until, limit, offset)
        assert theirs == mine
    views, total = await durable.rebalances("g", None, None, 100, 0)
    assert total == 4 and [v.cause for v in views] == ["session_timeout", "member_left", "new_member", "new_member"]


async def test_events_agree(stored: tuple[World, StorageHistory]) -> None:
    world, durable = stored
    now = world.clock.now_ms()
    for group in ("s", "d", "g"):
        for since, until, limit, offset in ((None, None, 100, 0), (None, None, 1, 1), (now - 1_500, now, 100, 0)):
            mine = await world.history.events(group, since, until, limit, offset)
            theirs = await durable.events(group, since, until, limit, offset)
            assert theirs == mine
    events, total = await durable.events("s", None, None, 100, 0)
    assert total == 1 and [(e.kind, e.group_instance_id, e.source) for e in events] == [
        ("static_replacement", "inst-x", "history")
    ]
    (replacement,) = events
    group = world.core.groups.group("s")
    assert group is not None
    (y,) = [m for m, member in group.members.items() if member.group_instance_id is None]
    rebalances, _ = await durable.rebalances("s", None, None, 100, 0)
    assert [[i.member_id for i in r.members_in] for r in rebalances] == [[y], [replacement.previous_member_id]]
    assert replacement.member_id not in (None, replacement.previous_member_id)
    events, total = await durable.events("d", None, None, 100, 0)
    assert [e.kind for e in events] == ["group_recreated", "group_deleted"] and events[1].cause == "deleted"
    assert (await durable.events("g", None, None, 100, 0)) == ([], 0)


async def test_commits_and_offsets_as_of_agree(stored: tuple[World, StorageHistory]) -> None:
    world, durable = stored
    for group in ("g", "simple"):
        assert await durable.commits(group, None, None, 100, 0) == await world.history.commits(
            group, None, None, 100, 0
        )
        assert await durable.commits(group, None, None, 1, 1) == await world.history.commits(group, None, None, 1, 1)
    at = world.clock.now_ms() - 500
    assert await durable.committed_as_of("simple", at) == {("payments", 0): 3}
    assert await durable.committed_as_of("g", at) == await world.history.committed_as_of("g", at)


async def test_unreachable_store_is_a_503(tmp_path: Path) -> None:
    world = make_world()
    world.commit("g", {("orders", 0): 1})
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/missing/dir/db.sqlite", connect_timeout_s=1)
    app = create_http_app(
        world.core, clock=world.clock, topics=world.topics, history=StorageHistory(StorageQueries(engine))
    )
    try:
        async with TestClient(TestServer(app)) as client:
            for path in ("/v1/groups/g/commits", "/v1/groups/g/rebalances"):
                r = await client.get(path)
                body = await r.json()
                assert r.status == 503 and "history unavailable" in body["error"], body
            # a reset by time reads the partitions' logs (ListOffsets), not the stored history: it still answers
            reset = {"strategy": "by-duration", "by_duration_ms": 1000, "topics": "all"}
            r = await client.post("/v1/groups/g/offsets/reset", json=reset)
            assert r.status == 200, await r.json()
    finally:
        await engine.dispose()
