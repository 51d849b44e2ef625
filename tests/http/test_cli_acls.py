"""``kgc acls`` as an operator runs it (its own process) against the real HTTP API on a real socket and the real
authorizer: create (ALLOW, DENY), list with a filter, delete with a filter; a refused one exits 1 with the message."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from security.acls import AclOperation, Authorizer, ResourceType
from servers.http import HttpServer, start_http
from servers.http.acls import AclAccess
from servers.http.app import create_http_app

from .conftest import TOKEN
from .world import make_world

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def served() -> AsyncIterator[tuple[Authorizer, HttpServer]]:
    world = make_world(token=TOKEN)
    authorizer = Authorizer(enabled=True)
    app = create_http_app(world.core, clock=world.clock, topics=world.topics, token=TOKEN,
                          acls=AclAccess(authorizer))  # fmt: skip
    server = await start_http(app, "127.0.0.1:0")
    try:
        yield authorizer, server
    finally:
        await server.stop()


def kgc(server: HttpServer, *argv: str) -> tuple[int, str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")}
    cmd = [sys.executable, "-m", "daemon", *argv, "--url", server.url, "--token", TOKEN]
    done = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout, done.stderr


async def test_kgc_acls_create_list_delete(served: tuple[Authorizer, HttpServer]) -> None:
    authorizer, server = served

    def run(*argv: str) -> tuple[int, str, str]:
        return kgc(server, "acls", *argv)

    code, out, err = await asyncio.to_thread(run, "create", "--resource-type", "group", "--resource-name", "team-a-",
                                             "--pattern-type", "prefixed", "--principal", "User:alice",
                                             "--operation", "read")  # fmt: skip
    assert code == 0, err
    assert "ALLOW" in out and "User:alice" in out and "team-a-" in out
    assert authorizer.authorize("User:alice", "h", AclOperation.READ, ResourceType.GROUP, "team-a-1")
    code, _, err = await asyncio.to_thread(run, "create", "--resource-type", "TOPIC", "--resource-name", "orders",
                                           "--principal", "User:bob", "--operation", "WRITE", "--deny")  # fmt: skip
    assert code == 0, err
    code, out, _ = await asyncio.to_thread(run, "list", "--principal", "User:bob", "--json")
    assert [(a["permission"], a["resource_name"]) for a in json.loads(out)["acls"]] == [("DENY", "orders")]
    code, out, _ = await asyncio.to_thread(run, "list")
    assert code == 0 and "orders" in out and "team-a-" in out
    # refused by the API: exit 1 with its message
    code, _, err = await asyncio.to_thread(run, "create", "--resource-type", "GROUP", "--resource-name", "g",
                                           "--principal", "alice", "--operation", "READ")  # fmt: skip
    assert code == 1 and "principal" in err
    code, out, _ = await asyncio.to_thread(run, "delete", "--resource-type", "GROUP")
    assert code == 0 and "team-a-" in out and "orders" not in out
    assert not authorizer.authorize("User:alice", "h", AclOperation.READ, ResourceType.GROUP, "team-a-1")
    assert [b.resource_name for b in authorizer.index] == ["orders"]
