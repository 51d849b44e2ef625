"""Injected time: a clock and a keyed timer.

The state machine never reads the system clock and never sleeps. Production code passes ``SystemClock`` and the
asyncio timer (``runtime.loop``); tests pass ``ManualClock`` + ``ManualTimer`` and call ``advance(ms)``.

Timer rules (Kafka's CoordinatorTimer): scheduling a key that is already scheduled replaces it; ``cancel`` of an
unknown key is a no-op; an expiry is just another operation on the same single thread, so every operation must
re-validate (member still there, same generation) before acting.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

TimerOp = Callable[[], None]
# A timer key: a string (a group's join and sync timers), or the (group id, member id) of a member's session timer:
# a tuple of two strings the group already holds (56 bytes) instead of a new ``heartbeat-<group>-<member>`` string
# per member (~120 bytes; 1,000,000 members hold one each, and the timer one more for a member added from a pending
# id). A tuple never equals a string, so the two kinds never collide.
TimerKey = str | tuple[str, str]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Epoch milliseconds: timestamps that are persisted or shown."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never jumps (any origin): deadlines and durations, such as sessions."""
        ...


class Timer(Protocol):
    def schedule(self, key: TimerKey, delay_ms: int, op: TimerOp) -> None: ...

    def cancel(self, key: TimerKey) -> None: ...

    def is_scheduled(self, key: TimerKey) -> bool: ...

    def held_key(self, key: TimerKey) -> TimerKey | None:
        """The key object the timer holds for a scheduled key equal to ``key`` (None: none scheduled), so that a
        caller keeping the key too can keep that one object rather than a second equal one."""
        ...


class SystemClock:
    """Wall-clock milliseconds (timestamps are persisted and shown to operators, so epoch time, not monotonic)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._now  # one timeline in tests: advance() moves both

    def set(self, now_ms: int) -> None:
        self._now = now_ms


_SAME_INSTANT_LIMIT = 10_000


class ManualTimer:
    """A deterministic timer driven by ``advance``. Ties fire in scheduling order."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._live: dict[TimerKey, tuple[int, TimerOp, TimerKey]] = {}  # key -> (sequence, op, the key object)
        self._seq = itertools.count()

    def schedule(self, key: TimerKey, delay_ms: int, op: TimerOp) -> None:
        seq = next(self._seq)
        deadline = self._clock.now_ms() + max(0, delay_ms)
        self._live[key] = (seq, op, key)
        heapq.heappush(self._heap, (deadline, seq, key))

    def cancel(self, key: TimerKey) -> None:
        self._live.pop(key, None)

    def is_scheduled(self, key: TimerKey) -> bool:
        return key in self._live

    def held_key(self, key: TimerKey) -> TimerKey | None:
        entry = self._live.get(key)
        return None if entry is None else entry[2]

    def deadline(self, key: TimerKey) -> int | None:
        entry = self._live.get(key)
        if entry is None:
            return None
        for deadline, seq, k in self._heap:
            if k == key and seq == entry[0]:
                return deadline
        return None

    def keys(self) -> list[TimerKey]:
        return sorted(self._live, key=repr)

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms``, firing every due timer at its own deadline, in order."""
        target = self._clock.now_ms() + ms
        fired_at, fired = -1, 0
        while self._heap and self._heap[0][0] <= target:
            deadline, seq, key = heapq.heappop(self._heap)
            entry = self._live.get(key)
            if entry is None or entry[0] != seq:
                continue  # cancelled or replaced
            del self._live[key]
            self._clock.set(max(self._clock.now_ms(), deadline))
            fired = fired + 1 if self._clock.now_ms() == fired_at else 1
            fired_at = self._clock.now_ms()
            if fired > _SAME_INSTANT_LIMIT:  # a timer that re-arms itself with no delay: a busy loop in production
                raise RuntimeError(f"timer {key} keeps firing at {fired_at} ms (a timer loop without delay)")
            entry[1]()
        self._clock.set(target)
