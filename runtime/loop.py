"""The asyncio side of the core's injected time: a keyed timer on the running loop, and Deferred -> Future.

Timer rules are the core's (``coordinator.clock``): scheduling a key again replaces it, cancelling an unknown
key is a no-op, and an expiry runs as a plain operation on the loop - the same single thread as every request, so
the core needs no locks. An exception in a timer operation is a bug; it is logged and the loop carries on.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import TypeVar

from coordinator.clock import TimerOp
from coordinator.deferred import Deferred

log = logging.getLogger("runtime.loop")

T = TypeVar("T")


class _Entry:
    """One scheduled key: the op and its deadline, and the loop handle armed for ``armed_at`` (<= deadline)."""

    __slots__ = ("armed_at", "deadline", "handle", "op")

    def __init__(self, deadline: float, op: TimerOp) -> None:
        self.deadline = deadline
        self.armed_at = deadline
        self.op = op
        self.handle: asyncio.TimerHandle | None = None


class AsyncioTimer:
    """The core's keyed timer on the running loop, with lazy deadlines.

    Re-scheduling a key to a later deadline (a session re-armed by an OffsetCommit or a completed sync) only stores
    the new deadline and op; the loop handle armed for the earlier deadline stays, and when it fires it sees the
    deadline moved and re-arms once for it, instead of a cancel + ``call_later`` per re-schedule. An earlier
    deadline re-arms at once. (Heartbeats do not call the timer at all: the core moves the member's session
    deadline and its session timer re-schedules itself when it fires early, ``GroupManager._expire_member``.)
    Observable behaviour is unchanged: the op of the last ``schedule`` runs at its deadline, never an old op.
    """

    # A handle may fire up to the loop's clock resolution early; a deadline closer than this counts as due.
    _EARLY_S = 0.001

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._entries: dict[str, _Entry] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def schedule(self, key: str, delay_ms: int, op: TimerOp) -> None:
        loop = self._loop or self.loop
        deadline = loop.time() + (delay_ms if delay_ms > 0 else 0) / 1000.0
        entry = self._entries.get(key)
        if entry is not None:
            entry.op = op
            entry.deadline = deadline
            if deadline >= entry.armed_at:
                return  # the armed handle fires first and re-arms for the new deadline
            if entry.handle is not None:  # None: it fired and its op is deferred (``_fire``); re-arm
                entry.handle.cancel()
        else:
            entry = self._entries[key] = _Entry(deadline, op)
        entry.armed_at = deadline
        entry.handle = loop.call_at(deadline, self._fire, key, entry)

    def cancel(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry.handle is not None:
            entry.handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def cancel_all(self) -> None:
        for entry in self._entries.values():
            if entry.handle is not None:
                entry.handle.cancel()
        self._entries.clear()

    def _fire(self, key: str, entry: _Entry) -> None:
        if self._entries.get(key) is not entry:
            return  # cancelled (or cancelled and scheduled anew) after this handle was armed
        loop = self.loop
        if entry.deadline - loop.time() > self._EARLY_S:
            entry.armed_at = entry.deadline
            entry.handle = loop.call_at(entry.deadline, self._fire, key, entry)
            return
        # The op runs only after the loop has polled for I/O once more, so a heartbeat that arrived while the loop
        # was busy (it sits unread in the socket buffer) is read - and moves the session deadline - before the
        # session op decides. uvloop (libuv) runs due timers *before* it polls, then the call_soon callbacks (idle
        # phase), then polls: one call_soon hop would still run before the poll, so the op is deferred twice (a
        # callback queued while the ready queue runs waits for the next iteration, after its poll; asyncio polls
        # before it runs timers, so there the hops only cost two iterations). The op re-validates on arrival.
        entry.armed_at = float("inf")  # a schedule() meanwhile must re-arm, this handle has fired
        entry.handle = None
        loop.call_soon(self._defer, key, entry)

    def _defer(self, key: str, entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            self.loop.call_soon(self._run, key, entry)

    def _run(self, key: str, entry: _Entry) -> None:
        if self._entries.get(key) is not entry or entry.handle is not None:
            return  # cancelled, replaced, or re-armed for an earlier deadline meanwhile (that handle runs it)
        loop = self.loop
        if entry.deadline - loop.time() > self._EARLY_S:  # pushed back while deferred
            entry.armed_at = entry.deadline
            entry.handle = loop.call_at(entry.deadline, self._fire, key, entry)
            return
        # Forget the key before the op runs, because the op may schedule the same key again.
        del self._entries[key]
        try:
            entry.op()
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


def tune_gc(gen0_threshold: int) -> None:
    """Set up the cyclic garbage collector for a long-running server, once start-up is done.

    Everything alive now (modules, kio's classes, the loaded groups and offsets) is moved to the permanent generation
    (``gc.freeze``), so no collection scans it again, and the youngest generation is collected every
    ``gen0_threshold`` allocations (Python's default is 700; the older generations keep their ratios of 10). The hot
    paths allocate short-lived objects (requests, records, parked answers) at a high rate: with the defaults, the
    collections triggered by them cost ~45% of the daemon's CPU on the commit benchmark. 0 changes nothing."""
    if gen0_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
