"""The topics endpoints over a real broker core (in memory): per partition log start, end and bytes, configs and
``internal``; DELETE /v1/topics/{topic}; PATCH /v1/topics/{topic}/configs; and the CLI's ``kgc topics`` on them."""

from __future__ import annotations

import argparse
import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.admin import TopicAdmin
from broker.partitions import Broker, MemoryDataLog
from daemon.cli import add_groups_subcommands, cmd_client
from servers.http import HttpServer, start_http
from servers.http.app import create_http_app

from .world import make_world


def batch(n: int, ts: int) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts, key=None, value=b"v" * 20, headers=[])
    return bytes(b.build())


@pytest.fixture
async def served() -> AsyncIterator[tuple[Broker, HttpServer]]:
    world = make_world()
    broker = Broker(
        world.topics, MemoryDataLog(), world.clock.now_ms, keep_bytes=True, defaults={"retention.ms": "60000"}
    )
    broker.start()
    admin = TopicAdmin(broker, node_id=1)
    app = create_http_app(world.core, clock=world.clock, topics=world.topics, admin=admin)
    server = await start_http(app, "127.0.0.1:0")
    try:
        yield broker, server
    finally:
        await server.stop()


async def kgc(server: HttpServer, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kgc")
    add_groups_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([*argv, "--url", server.url])
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(cmd_client, args, out, err)
    return code, out.getvalue(), err.getvalue()


async def get(server: HttpServer, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.request(method, server.url + path, json=body) as r:
        return r.status, await r.json()


async def test_topics_show_offsets_sizes_and_configs(served: tuple[Broker, HttpServer]) -> None:
    broker, server = served
    got: list[Any] = []
    data = batch(3, 1_000)
    for _ in range(2):
        broker.produce([("orders", 1, data)], got.append)
    status, body = await get(server, "/v1/topics")
    assert status == 200
    orders = {t["name"]: t for t in body["topics"]}["orders"]
    assert orders["log"][1] == {"partition": 1, "log_start_offset": 0, "log_end_offset": 6, "size_bytes": 2 * len(data)}
    assert orders["log"][0] == {"partition": 0, "log_start_offset": 0, "log_end_offset": 0, "size_bytes": 0}
    assert orders["size_bytes"] == 2 * len(data) and orders["internal"] is False
    assert orders["configs"]["retention.ms"] == "60000" and orders["own_configs"] == {}

    status, body = await get(server, "/v1/topics/orders/configs", "PATCH", {"configs": {"retention.bytes": "10"}})
    assert (
        status == 200
        and body["own_configs"] == {"retention.bytes": "10"}
        and broker.config("orders").retention_bytes == 10
    )
    status, body = await get(server, "/v1/topics/orders/configs", "PATCH", {"configs": {"cleanup.policy": "compact"}})
    assert status == 400 and "compact" in body["error"]
    status, body = await get(server, "/v1/topics/orders/configs", "PATCH", {"configs": {"retention.bytes": None}})
    assert status == 200 and body["own_configs"] == {}

    code, out, _ = await kgc(server, "topics", "list")
    assert code == 0
    line = next(row for row in out.splitlines() if row.startswith("orders") and row.split()[2] == "1")
    assert line.split()[3:] == ["0", "6", str(2 * len(data)), "60000", "-1"]
    code, out, _ = await kgc(server, "topics", "config", "orders", "--set", "retention.ms=5000")
    assert code == 0 and "5000*" in out

    status, body = await get(server, "/v1/topics/__consumer_offsets", "DELETE")
    assert status == 403
    status, body = await get(server, "/v1/topics/nope", "DELETE")
    assert status == 404
    code, out, _ = await kgc(server, "topics", "delete", "orders")
    assert code == 0 and "orders deleted" in out
    status, body = await get(server, "/v1/topics")
    assert [t["name"] for t in body["topics"]] == ["payments"]
