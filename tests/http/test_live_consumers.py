"""The operator API of a running daemon (``daemon.app.App`` + ``Operator`` wiring, one event loop) while real
aiokafka consumers join, commit and leave: the API, the metrics and the CLI's view of real client bytes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer
from prometheus_client.parser import text_string_to_metric_families

from coordinator.record_log import MemoryLog
from daemon.app import App
from daemon.settings import load_settings
from servers.http import HttpServer, ReadyState, start_http
from servers.http.wiring import Operator

pytestmark = pytest.mark.e2e

TOPIC = "live4"
GROUP = "live-group"


class Daemon:
    def __init__(self, app: App, http: HttpServer, operator: Operator) -> None:
        self.app = app
        self.http = http
        self.operator = operator

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.app.port}"


@pytest.fixture
async def daemon() -> AsyncIterator[Daemon]:
    settings = load_settings(
        None,
        kafka={"host": "127.0.0.1", "port": 0},
        http={"listen": ""},  # the test serves its own HTTP app below, on a free port
        group={"initial_rebalance_delay_ms": 100, "min_session_timeout_ms": 1000},
        topics={"initial": {TOPIC: 4}},
    )
    app = App(settings, record_log=MemoryLog(auto_commit=True, keep=False))
    operator = app.operator
    loaded = False

    async def probe() -> ReadyState:
        return ReadyState(loaded, "loaded" if loaded else "loading")

    http_app = operator.http_app(app.coordinator, clock=app.clock, topics=app.topics, readiness=probe)
    await app.start()
    loaded = True
    http = await start_http(http_app, "127.0.0.1:0")
    try:
        yield Daemon(app, http, operator)
    finally:
        await http.stop()
        await app.stop()


async def wait_until(check: Callable[[], Awaitable[Any]], within_s: float, what: str) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def consumer(d: Daemon, client_id: str, instance: str | None = None) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=d.bootstrap,
        group_id=GROUP,
        client_id=client_id,
        group_instance_id=instance,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
        fetch_max_wait_ms=100,
        enable_auto_commit=False,
    )


async def test_real_consumers_seen_through_the_api(daemon: Daemon) -> None:
    base = daemon.http.url
    a, b = consumer(daemon, "live-a", "inst-a"), consumer(daemon, "live-b")
    async with aiohttp.ClientSession() as http:

        async def get(path: str) -> Any:
            async with http.get(base + path) as r:
                return r.status, await r.json()

        assert (await get("/readyz"))[0] == 200
        await a.start()
        await b.start()
        try:

            async def stable_with_two() -> Any:
                status, body = await get(f"/v1/groups/{GROUP}")
                members = body.get("members", [])
                if status == 200 and body["state"] == "Stable" and len(members) == 2:
                    return body if all(m["assignment"] for m in members) else None
                return None

            group = await wait_until(stable_with_two, 30, "a Stable group of two with assignments")
            assert group["protocol_type"] == "consumer"
            by_client = {m["client_id"]: m for m in group["members"]}
            assert by_client["live-a"]["group_instance_id"] == "inst-a"
            assert all(m["subscription"] == [TOPIC] for m in group["members"])
            owned = sorted(p for m in group["members"] for p in m["assignment"].get(TOPIC, []))
            assert owned == [0, 1, 2, 3]  # the real client's assignment bytes, decoded

            await wait_until(lambda: _assigned(a), 10, "consumer a assigned")
            tp = next(iter(a.assignment()))
            await a.commit({tp: 42})
            status, offsets = await get(f"/v1/groups/{GROUP}/offsets")
            assert status == 200
            assert [(o["topic"], o["partition"], o["offset"]) for o in offsets["offsets"]] == [
                (tp.topic, tp.partition, 42)
            ]
            _, commits = await get(f"/v1/groups/{GROUP}/commits")
            assert commits["commits"][0]["member_id"] == by_client["live-a"]["member_id"]
            assert commits["commits"][0]["admin"] is False
        finally:
            await b.stop()  # LeaveGroup: a rebalance caused by a member leaving

        async def left() -> Any:
            _, body = await get(f"/v1/groups/{GROUP}/rebalances")
            done = [r for r in body["rebalances"] if r["cause"] == "member_left" and r["outcome"] == "stable"]
            return done[0] if done else None

        try:
            rebalance = await wait_until(left, 30, "the member_left rebalance to complete")
        finally:
            await a.stop()
        assert [m["cause"] for m in rebalance["members_out"]] == ["left"]
        assert rebalance["partitions_moved"] and rebalance["duration_ms"] is not None

        async with http.get(base + "/metrics") as r:
            text = await r.text()
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert samples[("kgc_rebalances_total", (("cause", "member_left"), ("group", GROUP)))] >= 1
        assert samples[("kgc_offset_commits_total", (("group", GROUP), ("kind", "member")))] == 1


async def _assigned(c: AIOKafkaConsumer) -> bool:
    return bool(c.assignment())
