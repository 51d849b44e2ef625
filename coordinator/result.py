"""What every core operation produces: the records to append, the reply, and what to do once they are durable.

A handler (JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, DeleteGroups, ...), a timer operation (session expiry,
the join and sync timers, the retention pass) and a durability callback each build ONE ``Result`` and hand it to
``coordinator.writes.write``, which appends its records as one batch; none of them calls the record log itself.
Helpers an operation calls add their records and callbacks to the operation's ``Result`` (passed down as ``out``),
so the records of one operation reach the log together and in the order memory changed.

``reply`` is the answer now (a resolved ``Deferred`` or a plain value), a pending ``Deferred`` (a parked reply:
the join phase, the sync phase or a durable write completes it), or None (timer operations answer nobody).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from protocol.errors import ErrorCode

from .records import Record

T = TypeVar("T")

# Called once the records of the operation are durable (None) or could not be written (the Kafka error to answer).
Durable = Callable[[ErrorCode | None], None]


class Result(Generic[T]):
    __slots__ = ("on_durable", "records", "reply")

    def __init__(self, reply: T | None = None) -> None:
        self.records: list[Record] = []
        self.reply = reply
        self.on_durable: list[Durable] = []

    def __repr__(self) -> str:
        return f"Result(records={self.records!r}, reply={self.reply!r}, on_durable={len(self.on_durable)})"


# What helpers of an operation take as ``out``: the operation's result, whatever its reply type.
Out = Result[Any]
