"""``HistorySource`` over the durable store (``storage.queries.StorageQueries``): what the daemon uses.

The store pages and folds (with ``coordinator.history``) over a bounded window per group; this adapter converts the
results into the API's models (``history.rebalance_view``/``event_view``/``commit_view``) and turns a
``StorageError`` into ``HistoryUnavailable`` (answered 503).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from coordinator.history import TopicPartition

from .history import HistoryUnavailable, commit_view, event_view, rebalance_view
from .models import CommitEntry, GroupEventView, RebalanceView

if TYPE_CHECKING:  # storage is imported only by a daemon that has a database
    from storage.queries import StorageQueries

T = TypeVar("T")


class StorageHistory:
    def __init__(self, queries: StorageQueries) -> None:
        """``queries``: ``SqlRecordLog.queries``."""
        self._queries = queries

    async def rebalances(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[RebalanceView], int]:
        rows, total = await _read(
            self._queries.rebalance_history(group_id, since_ms=since_ms, until_ms=until_ms, limit=limit, offset=offset)
        )
        return [rebalance_view(r) for r in rows], total

    async def commits(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[CommitEntry], int]:
        rows, total = await _read(
            self._queries.commit_log(group_id, since_ms=since_ms, until_ms=until_ms, limit=limit, offset=offset)
        )
        return [commit_view(c) for c in rows], total

    async def committed_as_of(self, group_id: str, at_ms: int) -> dict[TopicPartition, int]:
        return await _read(self._queries.committed_as_of(group_id, at_ms))

    async def events(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[GroupEventView], int]:
        rows, total = await _read(
            self._queries.history_events(group_id, since_ms=since_ms, until_ms=until_ms, limit=limit, offset=offset)
        )
        return [event_view(e) for e in rows], total


async def _read(awaitable: Awaitable[T]) -> T:
    from storage import StorageError

    try:
        return await awaitable
    except StorageError as e:
        raise HistoryUnavailable(str(e)) from e
