"""The asyncio side of the core's injected time: a keyed timer on the running loop, and Deferred -> Future.

Timer rules are the core's (``coordinator.core.clock``): scheduling a key again replaces it, cancelling an unknown
key is a no-op, and an expiry runs as a plain operation on the loop - the same single thread as every request, so
the core needs no locks. An exception in a timer operation is a bug; it is logged and the loop carries on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TypeVar

from coordinator.core.clock import TimerOp
from coordinator.core.deferred import Deferred

log = logging.getLogger("coordinator.runtime")

T = TypeVar("T")


class AsyncioTimer:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._handles: dict[str, asyncio.TimerHandle] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def schedule(self, key: str, delay_ms: int, op: TimerOp) -> None:
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()
        self._handles[key] = self.loop.call_later(max(0, delay_ms) / 1000.0, self._fire, key, op)

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._handles

    def __len__(self) -> int:
        return len(self._handles)

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _fire(self, key: str, op: TimerOp) -> None:
        # The handle fired, so it is this key's current one (a replaced handle was cancelled): forget it before the
        # op runs, because the op may schedule the same key again.
        self._handles.pop(key, None)
        try:
            op()
        except Exception:
            log.exception("timer operation %s failed", key)


def deferred_to_future(deferred: Deferred[T], loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Future[T]:
    """An asyncio future completed with the deferred's value (at once if it is already done).

    The future may be cancelled (its connection closed) before the core resolves the deferred; that is not an error.
    """
    future: asyncio.Future[T] = (loop or asyncio.get_running_loop()).create_future()

    def _resolve(value: T) -> None:
        if not future.done():
            future.set_result(value)

    deferred.add_callback(_resolve)
    return future
