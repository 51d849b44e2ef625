"""What the daemon needs of its record log beyond ``append``: the ``DurableLog`` protocol.

``SqlRecordLog`` implements it; so does the core's ``MemoryLog`` (``storage.url = "memory"``), trivially: nothing to
load, close, ping, check or prune, and no history queries (the operator API then keeps an in-memory history). The
daemon (``daemon.app``) types its record log with it instead of probing for attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from coordinator.record_log import RecordLog
from coordinator.records import StateRecord

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from .queries import StorageQueries
    from .record_log import WriteHealth


class DurableLog(RecordLog, Protocol):
    async def load(self) -> Sequence[StateRecord]:
        """The state records to replay before the coordinator serves (empty when nothing is stored)."""
        ...

    async def close(self) -> None:
        """Write what is queued, then refuse appends."""
        ...

    @property
    def queries(self) -> StorageQueries | None:
        """The stored history's read APIs; None: none stored."""
        ...

    @property
    def engine(self) -> AsyncEngine | None:
        """The database ``/readyz`` pings; None: no database."""
        ...

    async def check_writes(self) -> WriteHealth | None:
        """Whether writes succeed (probing while they fail); None: nothing to check."""
        ...

    async def run_history_pruning(self, retention_ms: int, interval_s: float) -> None:
        """Prune stored history older than ``retention_ms`` every ``interval_s`` until cancelled (returns at once
        when nothing is stored)."""
        ...
