"""The CLI against the real HTTP API on a real socket (the blocking client runs in a worker thread)."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from collections.abc import AsyncIterator

import pytest

from daemon.cli import add_groups_subcommands, cmd_client, parse_duration_ms
from servers.http import HttpServer, start_http

from .conftest import TOKEN
from .world import Consumer, World, make_world


@pytest.fixture
async def served() -> AsyncIterator[tuple[World, HttpServer]]:
    world = make_world(token=TOKEN)
    server = await start_http(world.app, "127.0.0.1:0")
    try:
        yield world, server
    finally:
        await server.stop()


async def kgc(server: HttpServer, *argv: str, token: str | None = TOKEN) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kgc")
    add_groups_subcommands(parser.add_subparsers(dest="command", required=True))
    extra = ["--url", server.url] + (["--token", token] if token else [])
    args = parser.parse_args([*argv, *extra])
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(cmd_client, args, out, err)
    return code, out.getvalue(), err.getvalue()


async def test_list_describe_and_json(served: tuple[World, HttpServer]) -> None:
    world, server = served
    consumers = [Consumer("alpha", "inst-a"), Consumer("beta")]
    world.form_group("orders-app", consumers)
    world.commit("simple", {("orders", 1): 12})

    code, out, _ = await kgc(server, "groups", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["GROUP", "STATE", "TYPE", "PROTOCOL", "GENERATION", "MEMBERS"]
    assert lines[1].split() == ["orders-app", "Stable", "consumer", "range", "1", "2"]
    assert lines[2].split()[:2] == ["simple", "Empty"]

    code, out, _ = await kgc(server, "groups", "list", "--state", "Empty", "--json")
    assert code == 0 and [g["group_id"] for g in json.loads(out)["groups"]] == ["simple"]

    code, out, _ = await kgc(server, "groups", "describe", "orders-app")
    assert code == 0 and "State:      Stable" in out
    assert consumers[0].member_id in out and "inst-a" in out and "orders:" in out

    code, out, _ = await kgc(server, "groups", "offsets", "simple")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["orders", "1", "12"]

    code, out, _ = await kgc(server, "groups", "commits", "simple", "--since", "2026-01-01T00:00:00Z")
    assert code == 0 and "admin" in out and "(1 of 1)" in out

    code, out, _ = await kgc(server, "groups", "rebalances", "orders-app")
    assert code == 0 and "new_member" in out and "stable" in out and "(1 of 1)" in out


async def test_actions_and_errors(served: tuple[World, HttpServer]) -> None:
    world, server = served
    world.produce("orders", 1, 20)
    world.commit("g", {("orders", 0): 40, ("orders", 1): 50})

    code, out, _ = await kgc(server, "groups", "reset-offsets", "g", "--all-topics", "--shift-by", "-10")
    assert code == 0 and "Dry run" in out
    assert {tp: o.offset for tp, o in world.core.offsets.committed("g").items()} == {
        ("orders", 0): 40,
        ("orders", 1): 50,
    }
    code, out, _ = await kgc(server, "groups", "reset-offsets", "g", "--topic", "orders:1", "--to-offset", "7",
                             "--execute")  # fmt: skip
    assert code == 0 and "reset (to-offset)" in out
    assert world.core.offsets.committed("g")[("orders", 1)].offset == 7

    code, _, err = await kgc(server, "groups", "delete", "g", token=None)
    assert code == 1 and "bearer token" in err and "HTTP 401" in err
    code, out, _ = await kgc(server, "groups", "delete", "g")
    assert code == 0 and "deleted" in out and world.core.groups.group("g") is None
    code, _, err = await kgc(server, "groups", "describe", "g")
    assert code == 1 and "unknown group" in err and "HTTP 404" in err

    world.form_group("static", [Consumer("s", "inst-s")])
    code, out, _ = await kgc(server, "groups", "remove-member", "static", "inst-s")
    assert code == 0 and "inst-s removed" in out

    code, out, _ = await kgc(server, "topics", "create", "clicks", "3")
    assert code == 0 and world.topics.get("clicks") is not None
    code, out, _ = await kgc(server, "topics", "list")
    assert code == 0 and "clicks" in out and "orders" in out


async def test_unreachable_api_exits_3() -> None:
    server = HttpServer(runner=None, site=None, host="127.0.0.1", port=1)  # type: ignore[arg-type]
    code, _, err = await kgc(server, "groups", "list")
    assert code == 3 and "cannot reach" in err


def test_durations() -> None:
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("PT1H30M") == 5_400_000
    assert parse_duration_ms("P1DT2S") == 86_402_000
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration_ms("soon")


async def test_events_and_attention_tables(served: tuple[World, HttpServer]) -> None:
    world, server = served
    static = Consumer("st", "inst-1")
    world.form_group("g", [static, Consumer("other", topics=("payments", "orders"))])
    world._join("g", Consumer("st-new", "inst-1"))  # a new instance replaces inst-1
    code, out, _ = await kgc(server, "groups", "events", "g")
    assert code == 0
    header, row, footer = out.splitlines()
    assert header.split() == ["TIME", "KIND", "MEMBER", "CLIENT", "ERROR", "SOURCE", "DETAIL"]
    # the member keeps its client id (as Kafka's)
    assert row.split()[2:7] == ["static_replacement", "inst-1", "st", "-", "history"]
    assert footer.startswith("(1 of 1 events; static replacements, deletions and re-creations come from the stored")
    code, out, _ = await kgc(server, "groups", "events", "g", "--until", "2000-01-01T00:00:00Z")
    assert code == 0 and out.splitlines()[-1].startswith("(0 of 0 events;")
    code, out, _ = await kgc(server, "groups", "attention", "--flapping-per-hour", "1", "--json")
    assert code == 0
    body = json.loads(out)
    assert body["thresholds"]["flapping_per_hour"] == 1 and [i["kind"] for i in body["items"]] == ["flapping"]
    code, out, _ = await kgc(server, "groups", "attention", "--flapping-per-hour", "1")
    assert code == 0 and out.splitlines()[0].split() == ["KIND", "GROUP", "MEMBER", "DETAIL", "SINCE"]
    assert out.splitlines()[1].split()[:2] == ["flapping", "g"] and out.splitlines()[-1] == "(1 items in 1 groups)"
    code, _, err = await kgc(server, "groups", "events", "nope")
    assert code == 1 and "HTTP 404" in err
