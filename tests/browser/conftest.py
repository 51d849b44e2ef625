"""Headless Chromium for the dashboard tests, and the daemon's HTTP app served from a background thread.

``chromium`` is ``tests.chromium.ensure_chromium()`` (installs Debian's package when missing).
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from servers.http import HttpServer, start_http
from tests.chromium import ensure_chromium
from tests.http.world import Consumer, World, make_world


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


def populated_world() -> World:
    world = make_world()
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


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[World, HttpServer]]:
    world = populated_world()
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
    yield world, holder["server"]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
