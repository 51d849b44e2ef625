"""The daemon in-process, on its own event loop in a background thread, so tests can use blocking sockets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from daemon.app import App
from daemon.settings import load_settings


class RunningApp:
    """The daemon's ``App`` on its own loop in a thread. Its state is in memory unless ``durable``: then the app is
    opened on the storage the settings name (``App.open``: ``storage.url``, or SQLite under ``storage.data_dir``)."""

    def __init__(self, *, durable: bool = False, **overrides: Any) -> None:
        overrides.setdefault("http", {"listen": "127.0.0.1:0"})  # never the default 8080: tests may run side by side
        settings = load_settings(
            None,
            kafka={"host": "127.0.0.1", "port": 0, "max_inflight": 8},
            group={"initial_rebalance_delay_ms": 500, "min_session_timeout_ms": 100},
            topics={"initial": {"t": 3}},
            **overrides,
        )
        self.durable = durable
        self.app = App(settings) if not durable else None  # type: ignore[assignment]  # opened by start()
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kgc-test-server", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            if self.durable:
                self.app = await App.open(self.settings)
            await self.app.start()
        except BaseException as exc:
            self._error = exc
            self._started.set()
            raise
        self._started.set()
        await self._stop.wait()
        await self.app.stop()

    def start(self) -> RunningApp:
        self._thread.start()
        assert self._started.wait(10), "server did not start"
        if self._error:
            raise self._error
        return self

    def call(self, fn: Any) -> Any:
        """Run ``fn()`` on the server's loop and return its result (for poking at server state)."""
        return asyncio.run_coroutine_threadsafe(_call(fn), self.loop).result(5)

    def stop(self) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        assert not self._thread.is_alive(), "server did not stop"

    @property
    def port(self) -> int:
        return self.app.port


async def _call(fn: Any) -> Any:
    return fn()


@pytest.fixture
def server() -> Iterator[RunningApp]:
    running = RunningApp().start()
    try:
        yield running
    finally:
        running.stop()
