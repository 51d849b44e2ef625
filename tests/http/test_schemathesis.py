"""Property-based run of schemathesis against /openapi.json: no 500s, no response that violates the schema.

The app runs on a real socket in a background thread with its own event loop (a real core with a few groups in
it); schemathesis drives it through HTTP. Kept small: a handful of examples per operation.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from servers.http import start_http

from .conftest import TOKEN
from .world import Consumer, make_world

WORLD = make_world(token=TOKEN)
WORLD.form_group("stable-g", [Consumer("c1", "inst-1"), Consumer("c2")])
WORLD.commit("simple-g", {("orders", 0): 5, ("payments", 1): 9})
schema = schemathesis.openapi.from_dict(WORLD.app[__import__("servers.http.keys").http.keys.OPENAPI])


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, object] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(start_http(WORLD.app, "127.0.0.1:0"))
        holder["server"] = server
        started.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    yield holder["server"].url  # type: ignore[attr-defined]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_to_its_schema(case: schemathesis.Case, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, headers={"Authorization": f"Bearer {TOKEN}"})
