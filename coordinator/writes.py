"""Appending one operation's ``Result``: one batch per operation, durability callbacks, storage failures mapped once.

Every write of the core goes through ``write``: the classic group handlers and timers, offsets, DeleteGroups and the
retention pass. ``write`` appends the records of a ``Result`` as ONE ``RecordLog.append`` call (the storage layer
then merges concurrent appends into one transaction: group commit), and calls the result's ``on_durable`` callbacks
once, in order, with None or with the Kafka error the failure maps to.

Mapping (``KAFKA_ERRORS``): Kafka's coordinator runtime maps its log-append errors the same way (new group
coordinator): a log that is unreachable -> COORDINATOR_NOT_AVAILABLE (the client retries), a log this process no
longer owns -> NOT_COORDINATOR (the client looks the coordinator up again), records that can never be written ->
UNKNOWN_SERVER_ERROR (the client stops retrying), a log still loading -> COORDINATOR_LOAD_IN_PROGRESS.

``RecordLog.append`` may call back synchronously: callers build every in-memory change of the operation before they
call ``write``, and a callback that changes memory builds and writes its own ``Result``.
"""

from __future__ import annotations

from typing import TypeVar

from protocol.errors import ErrorCode

from .record_log import RecordLog, WriteFailure
from .result import Durable, Result

T = TypeVar("T")

KAFKA_ERRORS: dict[WriteFailure, ErrorCode] = {
    WriteFailure.UNAVAILABLE: ErrorCode.coordinator_not_available,
    WriteFailure.NOT_OWNER: ErrorCode.not_coordinator,
    WriteFailure.REFUSED: ErrorCode.unknown_server_error,
    WriteFailure.LOADING: ErrorCode.coordinator_load_in_progress,
}


def kafka_error(failure: WriteFailure) -> ErrorCode:
    """The error a client gets when the records of its request could not be written."""
    return KAFKA_ERRORS[failure]


def write(log: RecordLog, result: Result[T]) -> None:
    """Append ``result.records`` as one batch and run ``result.on_durable`` once they are durable (or failed).

    A result without records runs its callbacks at once (nothing to wait for); one without callbacks is appended
    without waiting (history records: joins and heartbeats never wait on storage)."""
    records, callbacks = result.records, result.on_durable
    if not records:
        for callback in callbacks:
            callback(None)
    elif not callbacks:
        log.append(records)
    else:
        log.append(records, _Completion(callbacks))


class _Completion:
    """The log's ``on_done`` for one batch: maps a failure once and tells every callback of the operation."""

    __slots__ = ("callbacks",)

    def __init__(self, callbacks: list[Durable]) -> None:
        self.callbacks = callbacks

    def __call__(self, failure: WriteFailure | None) -> None:
        error = None if failure is None else KAFKA_ERRORS[failure]
        for callback in self.callbacks:
            callback(error)
