"""The operator API's SCRAM users (servers/http/users.py) over a real aiohttp server and the real credential store:
set (create, rotate), list, get and delete; the bearer token on every change; no password, salt or key in any
answer; and an unavailable store changing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from broker.partitions import MemoryDataLog
from security.credentials import SCRAM_SHA_256, SCRAM_SHA_512
from security.users import UserStore
from servers.http.app import create_http_app

from .conftest import TOKEN
from .world import make_world

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class SwitchableLog(MemoryDataLog):
    """Durable at once, or failing every write while ``down``."""

    down = False

    def append(self, records: Sequence[Any], on_done: Callable[[Any], None] | None = None) -> None:
        if self.down:
            if on_done is not None:
                on_done("unavailable")
            return
        super().append(records, on_done)


@pytest.fixture
def store() -> UserStore:
    return UserStore(SwitchableLog(keep=True), lambda: 1)


@pytest.fixture
async def client(store: UserStore) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    world = make_world(token=TOKEN)
    app = create_http_app(world.core, clock=world.clock, topics=world.topics, token=TOKEN, users=store)
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_set_rotate_list_get_delete(client: TestClient, store: UserStore) -> None:  # type: ignore[type-arg]
    r = await client.put("/v1/users/alice", json={"password": "pw-1"}, headers=AUTH)
    assert r.status == 201
    assert await r.json() == {"name": "alice", "credentials": [{"mechanism": SCRAM_SHA_512, "iterations": 8192}]}
    assert store.verify_plain("alice", "pw-1")
    r = await client.put("/v1/users/alice", json={"password": "pw-2", "mechanism": SCRAM_SHA_256,
                                                  "iterations": 4096}, headers=AUTH)  # fmt: skip
    assert r.status == 200
    r = await client.put("/v1/users/alice", json={"password": "pw-3"}, headers=AUTH)  # rotation of SHA-512
    assert r.status == 200 and not store.verify_plain("alice", "pw-1") and store.verify_plain("alice", "pw-3")
    r = await client.get("/v1/users")
    listed = await r.json()
    assert listed == {
        "users": [
            {
                "name": "alice",
                "credentials": [
                    {"mechanism": SCRAM_SHA_256, "iterations": 4096},
                    {"mechanism": SCRAM_SHA_512, "iterations": 8192},
                ],
            }
        ]
    }
    assert "pw-" not in await r.text()
    assert (await client.get("/v1/users/alice")).status == 200
    assert (await client.get("/v1/users/bob")).status == 404
    r = await client.delete("/v1/users/alice", params={"mechanism": SCRAM_SHA_256}, headers=AUTH)
    assert await r.json() == {"name": "alice", "deleted": [SCRAM_SHA_256]}
    assert not store.verify_plain("alice", "pw-2") and store.verify_plain("alice", "pw-3")
    r = await client.delete("/v1/users/alice", headers=AUTH)
    assert r.status == 200 and store.users() == []
    assert (await client.delete("/v1/users/alice", headers=AUTH)).status == 404


async def test_changes_need_the_token_and_valid_input(client: TestClient, store: UserStore) -> None:  # type: ignore[type-arg]
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        assert (await client.put("/v1/users/eve", json={"password": "x"}, headers=headers)).status == 401
    assert store.users() == []
    for body in ({"password": ""}, {"password": "x", "iterations": 100}, {"password": "x", "mechanism": "MD5"},
                 {"password": "x", "salt": "y"}):  # fmt: skip
        r = await client.put("/v1/users/eve", json=body, headers=AUTH)
        assert r.status == 400, body
        assert '"x"' not in await r.text()
    r = await client.put("/v1/users/eve", data="password=x", headers=AUTH)
    assert r.status == 415
    assert (await client.delete("/v1/users/eve", params={"mechanism": "MD5"}, headers=AUTH)).status == 400
    assert store.users() == []


async def test_a_failed_write_changes_nothing(client: TestClient, store: UserStore) -> None:  # type: ignore[type-arg]
    assert isinstance(store.log, SwitchableLog)
    store.log.down = True
    r = await client.put("/v1/users/frank", json={"password": "pw"}, headers=AUTH)
    assert r.status == 503 and store.users() == []
    store.log.down = False
    assert (await client.put("/v1/users/frank", json={"password": "pw"}, headers=AUTH)).status == 201
    store.log.down = True
    assert (await client.delete("/v1/users/frank", headers=AUTH)).status == 503
    assert store.verify_plain("frank", "pw")
