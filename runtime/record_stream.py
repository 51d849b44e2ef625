"""The record stream: the ``RecordLog`` the core appends to, which also shows each batch to its listeners.

    stream = RecordStream(record_log, metrics)      # the durable (or in-memory) log; the metrics listen
    stream.listen(memory_history)                   # only when the log has no history queries of its own
    core = GroupCoordinator(config, clock, timer, stream)

Listeners see every batch as it is appended (history records: nobody waits for them) and, once durable, the batches
holding a record of one of their ``durable_types`` (offset commits are counted when written, not when attempted).
A batch of none of those types is handed to the log with the caller's ``on_done`` as it is: no wrapper, no closure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from coordinator.record_log import OnDone, RecordLog, WriteFailure
from coordinator.records import Record


class RecordListener(Protocol):
    @property
    def durable_types(self) -> frozenset[type]:
        """Record classes whose batches ``on_durable`` wants to see (it is shown whole batches)."""
        ...

    def on_append(self, records: Sequence[Record]) -> None:
        """A batch as it is appended (before it is durable; it may still fail)."""
        ...

    def on_durable(self, records: Sequence[Record]) -> None:
        """A batch holding a record of ``durable_types``, once it is durable."""
        ...


class RecordStream:
    """Appends to ``log`` and tells the listeners. Listeners run on the caller's (the core's) thread and must not
    raise; ``on_durable`` runs before the caller's ``on_done``."""

    def __init__(self, log: RecordLog, *listeners: RecordListener) -> None:
        self.log = log
        self._listeners: tuple[RecordListener, ...] = ()
        self._durable_types: frozenset[type] = frozenset()
        for listener in listeners:
            self.listen(listener)

    def listen(self, listener: RecordListener) -> None:
        self._listeners = (*self._listeners, listener)
        self._durable_types = self._durable_types | listener.durable_types

    def append(self, records: Sequence[Record], on_done: OnDone | None = None) -> None:
        listeners = self._listeners
        for listener in listeners:
            listener.on_append(records)
        wanted = self._durable_types
        for rec in records:
            if rec.__class__ in wanted:
                break
        else:
            self.log.append(records, on_done)
            return

        def done(error: WriteFailure | None) -> None:
            if error is None:
                for listener in listeners:
                    listener.on_durable(records)
            if on_done is not None:
                on_done(error)

        self.log.append(records, done)
