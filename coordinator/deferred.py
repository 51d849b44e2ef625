"""A minimal, loop-free future for parked responses (JoinGroup, SyncGroup) and durable writes.

The pure core cannot use asyncio futures (no event loop in core tests). The asyncio layer bridges a ``Deferred``
to an ``asyncio.Future`` with ``add_callback``.

A callback that raises is logged and skipped: replies are completed in the middle of the core's operations (the end
of a join phase answers every member in turn), and the caller's mistake must not leave a group half-updated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_UNSET: object = object()

log = logging.getLogger(__name__)


class Deferred(Generic[T]):
    __slots__ = ("_callbacks", "_value")

    def __init__(self) -> None:
        self._value: object = _UNSET
        self._callbacks: list[Callable[[T], None]] = []

    @property
    def done(self) -> bool:
        return self._value is not _UNSET

    def result(self) -> T:
        if self._value is _UNSET:
            raise RuntimeError("Deferred has no result yet")
        return self._value  # type: ignore[return-value]

    def resolve(self, value: T) -> bool:
        """Complete with ``value``. Returns False (and does nothing) if already completed."""
        if self._value is not _UNSET:
            return False
        self._value = value
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            try:
                cb(value)
            except Exception:
                log.warning("a callback of a completed reply raised", exc_info=True, extra={"throttle": ("reply-cb",)})
        return True

    def add_callback(self, cb: Callable[[T], None]) -> None:
        if self._value is not _UNSET:
            cb(self._value)  # type: ignore[arg-type]
        else:
            self._callbacks.append(cb)

    def __repr__(self) -> str:
        return f"Deferred({'pending' if self._value is _UNSET else repr(self._value)})"


def resolved(value: T) -> Deferred[T]:
    d: Deferred[T] = Deferred()
    d.resolve(value)
    return d
