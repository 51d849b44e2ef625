"""The asyncio side of the core's injected time: a keyed timer on the running loop, and Deferred -> Future.

Timer rules are the core's (``coordinator.clock``): scheduling a key again replaces it, cancelling an unknown
key is a no-op, and an expiry runs as a plain operation on the loop - the same single thread as every request, so
the core needs no locks. An exception in a timer operation is a bug; it is logged and the loop carries on.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from heapq import heapify, heappop, heappush
from itertools import count
from typing import TypeVar

from coordinator.clock import TimerKey, TimerOp
from coordinator.deferred import Deferred

log = logging.getLogger("runtime.loop")

T = TypeVar("T")


class _Entry:
    """One scheduled key: the op and its deadline, and the deadline its heap item is armed for (<= deadline; ``inf``
    once fired: its op is on its way, ``AsyncioTimer._fire``)."""

    __slots__ = ("armed_at", "deadline", "key", "op")

    def __init__(self, key: TimerKey, deadline: float, op: TimerOp) -> None:
        self.key = key  # the key object the entries dict holds (``AsyncioTimer.held_key``)
        self.deadline = deadline
        self.armed_at = deadline
        self.op = op


_FIRED = float("inf")


class AsyncioTimer:
    """The core's keyed timer on the running loop, with lazy deadlines, on one loop timer.

    The keys wait in a heap of ``(armed deadline, sequence, key, entry)``; one loop handle is armed for the earliest
    and fires every key that is due. (A loop handle per key cost ~700 bytes per group member for its session timer:
    uvloop's handle, its libuv timer, its arguments; a heap item is a 4-tuple.) Re-scheduling a key to a later
    deadline (a session re-armed by an OffsetCommit or a completed sync) only stores the new deadline and op: its heap
    item stays, and when it comes up it sees the deadline moved and goes back in once for it. An earlier deadline
    pushes a new item at once; the older item, like that of a cancelled key, is skipped when it comes up (and the
    heap is rebuilt when such items outnumber the live ones). (Heartbeats do not call the timer at all: the core
    moves the member's session deadline and its session timer re-schedules itself when it fires early,
    ``GroupManager._expire_member``.) Observable behaviour: the op of the last ``schedule`` runs at its deadline,
    never an old op.
    """

    _EARLY_S = 0.001

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._entries: dict[TimerKey, _Entry] = {}
        self._heap: list[tuple[float, int, TimerKey, _Entry]] = []
        self._sequence = count()
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = _FIRED  # when the loop handle fires (inf: none armed)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def schedule(self, key: TimerKey, delay_ms: int, op: TimerOp) -> None:
        loop = self._loop or self.loop
        deadline = loop.time() + (delay_ms if delay_ms > 0 else 0) / 1000.0
        entry = self._entries.get(key)
        if entry is not None:
            entry.op = op
            entry.deadline = deadline
            if deadline >= entry.armed_at:
                return  # its heap item comes up first and goes back in for the new deadline
        else:
            entry = self._entries[key] = _Entry(key, deadline, op)
        entry.armed_at = deadline
        heappush(self._heap, (deadline, next(self._sequence), key, entry))
        if deadline < self._handle_at:
            self._arm(deadline)

    def cancel(self, key: TimerKey) -> None:
        self._entries.pop(key, None)  # its heap item is skipped when it comes up

    def is_scheduled(self, key: TimerKey) -> bool:
        return key in self._entries

    def held_key(self, key: TimerKey) -> TimerKey | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.key

    def __len__(self) -> int:
        return len(self._entries)

    def cancel_all(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._handle_at = None, _FIRED
        self._entries.clear()
        self._heap.clear()

    def _arm(self, at: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle_at = at
        self._handle = self.loop.call_at(at, self._fire)

    def _fire(self) -> None:
        """Every key that is due: a pushed-back one goes back in for its deadline, the others' ops are deferred."""
        self._handle, self._handle_at = None, _FIRED
        loop = self.loop
        heap, entries = self._heap, self._entries
        due = loop.time() + self._EARLY_S
        while heap and heap[0][0] <= due:
            at, _, key, entry = heappop(heap)
            if entries.get(key) is not entry or entry.armed_at != at:
                continue  # cancelled, replaced, or re-armed for an earlier deadline (its newer item ran or runs)
            if entry.deadline > due:
                entry.armed_at = entry.deadline
                heappush(heap, (entry.deadline, next(self._sequence), key, entry))
                continue
            # The op runs only after the loop has polled for I/O once more, so a heartbeat that arrived while the
            # loop was busy (it sits unread in the socket buffer) is read - and moves the session deadline - before
            # the session op decides. uvloop (libuv) runs due timers *before* it polls, then the call_soon callbacks
            # (idle phase), then polls: one call_soon hop would still run before the poll, so the op is deferred
            # twice (a callback queued while the ready queue runs waits for the next iteration, after its poll;
            # asyncio polls before it runs timers, so there the hops only cost two iterations). The op re-validates
            # on arrival.
            entry.armed_at = _FIRED  # a schedule() meanwhile must push a new item
            loop.call_soon(self._defer, key, entry)
        if len(heap) > 2 * len(entries) + 1024:  # mostly stale items (cancelled keys): keep the live ones
            heap[:] = [item for item in heap if entries.get(item[2]) is item[3] and item[3].armed_at == item[0]]
            heapify(heap)
        if heap:
            self._arm(heap[0][0])

    def _defer(self, key: TimerKey, entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            self.loop.call_soon(self._run, key, entry)

    def _run(self, key: TimerKey, entry: _Entry) -> None:
        if self._entries.get(key) is not entry or entry.armed_at != _FIRED:
            return  # cancelled, replaced, or re-armed for an earlier deadline meanwhile (that item runs it)
        loop = self.loop
        if entry.deadline - loop.time() > self._EARLY_S:  # pushed back while deferred
            entry.armed_at = entry.deadline
            heappush(self._heap, (entry.deadline, next(self._sequence), key, entry))
            if entry.deadline < self._handle_at:
                self._arm(entry.deadline)
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


def tune_gc(gen0_threshold: int, *, collect: bool = True) -> None:
    """Set up the cyclic garbage collector for a long-running server, once start-up is done.

    Everything alive now (modules, kio's classes, the loaded groups and offsets) is moved to the permanent generation
    (``gc.freeze``), so no collection scans it again, and the youngest generation is collected every
    ``gen0_threshold`` allocations (Python's default is 700; the older generations keep their ratios of 10). The hot
    paths allocate short-lived objects (requests, records, parked answers) at a high rate: with the defaults, the
    collections triggered by them cost ~45% of the daemon's CPU on the commit benchmark. 0 changes nothing.

    ``collect=False``: freeze without a full collection first (``kgc serve``, which collected before loading the
    state and kept the collector off since: a full collection over 1,000,000 loaded offsets costs 0.4-0.6 s; what
    the load left as cyclic garbage, a few hundred objects, stays frozen)."""
    if gen0_threshold <= 0:
        return
    if collect:
        gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
