"""``kgc users`` as an operator runs it (its own process) against the real HTTP API on a real socket: set a user
(password from the environment or stdin, never an argument), list, describe, delete; the store checks the password."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from security.users import UserStore
from servers.http import HttpServer, keys, start_http

from .conftest import TOKEN
from .world import World, make_world

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def served() -> AsyncIterator[tuple[World, HttpServer]]:
    world = make_world(token=TOKEN)
    server = await start_http(world.app, "127.0.0.1:0")
    try:
        yield world, server
    finally:
        await server.stop()


def kgc(server: HttpServer, *argv: str, stdin: str = "", env: dict[str, str] | None = None) -> tuple[int, str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KGC_")} | (env or {})
    cmd = [sys.executable, "-m", "daemon", *argv, "--url", server.url, "--token", TOKEN]
    done = subprocess.run(cmd, cwd=ROOT, env=environ, input=stdin, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


async def test_kgc_users_set_list_describe_delete(served: tuple[World, HttpServer]) -> None:
    import asyncio

    world, server = served
    store: UserStore = world.app[keys.USERS]

    def run(*argv: str, **kw: object) -> tuple[int, str, str]:
        return kgc(server, *argv, **kw)  # type: ignore[arg-type]

    code, out, err = await asyncio.to_thread(run, "users", "set", "alice", "--password-stdin", stdin="alice pw\n")
    assert code == 0, err
    assert "alice" in out and "SCRAM-SHA-512" in out and store.verify_plain("alice", "alice pw")
    code, out, err = await asyncio.to_thread(
        run, "users", "set", "bob", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096",
        env={"KGC_USER_PASSWORD": "bob-pw"},
    )  # fmt: skip
    assert code == 0, err
    assert store.verify_plain("bob", "bob-pw")
    code, out, _ = await asyncio.to_thread(run, "users", "list", "--json")
    assert [u["name"] for u in json.loads(out)["users"]] == ["alice", "bob"]
    assert "pw" not in out
    code, out, _ = await asyncio.to_thread(run, "users", "describe", "bob")
    assert code == 0 and "SCRAM-SHA-256" in out and "4096" in out
    # no password given and stdin is not a terminal: a usage error, nothing changed
    code, _, err = await asyncio.to_thread(run, "users", "set", "carol")
    assert code == 2 and "KGC_USER_PASSWORD" in err and store.mechanisms("carol") == {}
    code, _, err = await asyncio.to_thread(run, "users", "set", "carol", "--iterations", "10", stdin="x\n",
                                           env={"KGC_USER_PASSWORD": "x"})  # fmt: skip
    assert code == 1 and "iterations" in err
    code, out, _ = await asyncio.to_thread(run, "users", "delete", "alice")
    assert code == 0 and "deleted" in out and not store.verify_plain("alice", "alice pw")
    code, _, _ = await asyncio.to_thread(run, "users", "delete", "alice")
    assert code == 1
