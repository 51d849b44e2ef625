"""``HistorySource`` over the durable store (``storage.queries.StorageQueries``): what the daemon uses.

The store pages and folds in SQL (bounded per group); this adapter only converts its dataclasses into the API's
pydantic models, field for field, and turns a ``StorageError`` into ``HistoryUnavailable`` (answered 503).
"""

from __future__ import annotations

from typing import Any

from .history import HistoryUnavailable, TopicPartition
from .models import CommitEntry, RebalanceView


class StorageHistory:
    def __init__(self, queries: Any) -> None:
        """``queries``: ``storage.queries.StorageQueries`` (``SqlRecordLog.queries``)."""
        self._queries = queries

    async def rebalances(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[RebalanceView], int]:
        rows, total = await self._call(
            self._queries.rebalance_history(group_id, since_ms=since_ms, until_ms=until_ms, limit=limit, offset=offset)
        )
        return [RebalanceView.model_validate(r, from_attributes=True) for r in rows], total

    async def commits(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[CommitEntry], int]:
        rows, total = await self._call(
            self._queries.commit_log(group_id, since_ms=since_ms, until_ms=until_ms, limit=limit, offset=offset)
        )
        return [CommitEntry.model_validate(r, from_attributes=True) for r in rows], total

    async def committed_as_of(self, group_id: str, at_ms: int) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = await self._call(self._queries.committed_as_of(group_id, at_ms))
        return result

    @staticmethod
    async def _call(awaitable: Any) -> Any:
        from storage import StorageError

        try:
            return await awaitable
        except StorageError as e:
            raise HistoryUnavailable(str(e)) from e
