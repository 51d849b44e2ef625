"""Headless Chromium for the dashboard tests, and the daemon's HTTP app served from a background thread.

``chromium`` is ``tests.chromium.ensure_chromium()`` (installs Debian's package when missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from servers.http import HttpServer, start_http
from tests.chromium import ensure_chromium
from tests.http.world import Consumer, World, make_world

T = TypeVar("T")


@pytest.fixture(scope="session")
def chromium() -> str:
    return ensure_chromium()


def run_chromium(binary: str, profile: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def populated_world(token: str | None = None) -> World:
    world = make_world(token=token)
    world.produce("orders", 0, 150)  # the logs the lag is measured against: orders-0 ends at 150, orders-1 at 100
    world.produce("orders", 1, 100)
    a, b, c = Consumer("checkout-1", "checkout-a"), Consumer("checkout-2"), Consumer("checkout-3")
    world.form_group("checkout", [a, b])
    world.advance(4_000)
    world.form_group("checkout", [c, a, b])
    world.advance(2_000)
    world.leave("checkout", [b], reason="scaling down")
    world.form_group("checkout", [a, c])
    world.commit("checkout", {("orders", 0): 120, ("orders", 1): 98}, a, 3)
    world.form_group("billing", [Consumer("billing-1", topics=("payments",))])
    world.commit("reports", {("orders", 0): 5})
    return world


@contextlib.contextmanager
def serve(world: World) -> Iterator[HttpServer]:
    """The world's HTTP app on a background event loop; ``on_loop`` runs a change of the world on that loop."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, HttpServer] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = loop.run_until_complete(start_http(world.app, "127.0.0.1:0"))
        holder["server"] = server
        started.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    world.loop = loop  # type: ignore[attr-defined]
    try:
        yield holder["server"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def on_loop(world: World, fn: Callable[[], T]) -> T:
    """Run ``fn`` (a change of the world's core) on the loop that serves it: the core is single-threaded."""

    async def call() -> T:
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), world.loop).result(10)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[World, HttpServer]]:
    world = populated_world()
    with serve(world) as server:
        yield world, server
