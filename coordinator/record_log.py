"""The record log the core writes to, and an in-memory implementation.

Contract of ``RecordLog.append(records, on_done)``:

* records of successive calls are persisted in call order (a batch may merge several calls into one transaction);
* ``on_done(None)`` is called once all of them are durable, ``on_done(failure)`` with a ``WriteFailure`` (what went
  wrong, in storage terms) if they could not be written; never both, never twice. The core maps a failure to the
  Kafka error its client gets in one place (``coordinator.writes``);
* ``on_done`` MAY run synchronously inside ``append`` (the in-memory log does), so callers call ``append`` as the
  last step of an operation, after every in-memory change it depends on;
* ``on_done`` is optional: history records are appended without waiting (joins and heartbeats never wait on
  storage).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Protocol

from protocol.errors import ErrorCode

from .records import Record


class WriteFailure(Enum):
    """Why records could not be written. Each value names the Kafka log-append errors it stands for (the errors
    Kafka's coordinator runtime sees from its partition), which is how ``MemoryLog.fail`` takes them in tests."""

    # Storage is unreachable or the write did not commit (database down, connection lost, lock timeout, disk full,
    # another process moved the log, the log is closed). Kafka: NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...
    UNAVAILABLE = (
        ErrorCode.coordinator_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    )
    # This process no longer owns the log (Kafka: the partition moved, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR).
    NOT_OWNER = (ErrorCode.not_coordinator, ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error)
    # The records can never be written as they are (the database refuses the data; Kafka: MESSAGE_TOO_LARGE,
    # RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE): retrying cannot help.
    REFUSED = (
        ErrorCode.unknown_server_error,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    )
    # Storage is still loading (Kafka: NETWORK_EXCEPTION while the partition loads).
    LOADING = (ErrorCode.coordinator_load_in_progress, ErrorCode.network_exception)

    @classmethod
    def of(cls, error: ErrorCode) -> WriteFailure:
        """The failure a Kafka log-append error stands for (tests describe storage failures in Kafka's terms)."""
        for failure in cls:
            if error in failure.value:
                return failure
        raise ValueError(f"{error.name} is not a log-append error")


OnDone = Callable[[WriteFailure | None], None]


class RecordLog(Protocol):
    def append(self, records: Sequence[Record], on_done: OnDone | None = None) -> None: ...


class MemoryLog:
    """In-memory log. ``auto_commit`` completes writes at once; otherwise tests call ``commit()`` / ``fail()``."""

    def __init__(self, *, auto_commit: bool = True, keep: bool = True) -> None:
        self.auto_commit = auto_commit
        self.keep = keep
        self.records: list[Record] = []
        self._pending: list[tuple[Sequence[Record], OnDone | None]] = []

    def append(self, records: Sequence[Record], on_done: OnDone | None = None) -> None:
        if self.auto_commit:
            if self.keep:
                self.records.extend(records)
            if on_done is not None:
                on_done(None)
        else:
            self._pending.append((records, on_done))

    @property
    def pending(self) -> int:
        return len(self._pending)

    def commit(self, count: int | None = None) -> None:
        """Make the first ``count`` pending writes durable, in order. By default every one, including the writes
        that durability callbacks append meanwhile (a stabilized group's history record), as a database that stays
        up would."""
        n = len(self._pending) if count is None else count
        pending, self._pending = self._pending[:n], self._pending[n:]
        for records, on_done in pending:
            if self.keep:
                self.records.extend(records)
            if on_done is not None:
                on_done(None)
        if count is None and self._pending:
            self.commit()

    def fail(self, error: WriteFailure | ErrorCode = WriteFailure.UNAVAILABLE, count: int | None = None) -> None:
        """Fail the first ``count`` pending writes (default: every one) with ``error``: a ``WriteFailure``, or the
        Kafka log-append error it stands for (``WriteFailure.of``)."""
        failure = error if isinstance(error, WriteFailure) else WriteFailure.of(error)
        n = len(self._pending) if count is None else count
        pending, self._pending = self._pending[:n], self._pending[n:]
        for _records, on_done in pending:
            if on_done is not None:
                on_done(failure)

    def take(self) -> list[Record]:
        """Return and forget the records written so far (tests assert exact record lists)."""
        out, self.records = self.records, []
        return out

    def of_type(self, *types: type) -> list[Record]:
        return [r for r in self.records if isinstance(r, types)]

    # ------------------------------------------------------------------ storage.durable_log.DurableLog, trivially
    # What a daemon asks of a durable log (load, close, readiness, history): an in-memory log stores nothing.
    queries = None  # no stored history: the operator API keeps its own
    engine = None  # no database to ping

    async def load(self) -> tuple[()]:
        return ()

    async def close(self) -> None:
        return None

    async def check_writes(self) -> None:
        return None

    async def run_history_pruning(self, retention_ms: int, interval_s: float) -> None:
        return None
