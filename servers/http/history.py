"""Rebalance history and the commit log, as the operator API shows them.

``HistorySource`` is what the HTTP handlers read. Two implement it: ``MemoryHistory`` here, a listener of the record
stream (``runtime.record_stream``) that keeps each group's last records in memory, for tests and for a daemon
without a history-capable store; and ``storage_history.StorageHistory`` over the durable store's queries. Both fold
with ``coordinator.history`` and convert its dataclasses into the API's models here, in ``rebalance_view``,
``event_view`` and ``commit_view``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Protocol

from coordinator import history as core
from coordinator.history import TopicPartition
from coordinator.records import OffsetCommitRecord, Record

from .models import CommitEntry, GroupEventKind, GroupEventSource, GroupEventView, RebalanceView


class HistoryUnavailable(Exception):
    """The history store could not be read (the API answers 503)."""


class HistorySource(Protocol):
    async def rebalances(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[RebalanceView], int]:
        """Newest first, filtered on the start time, then paged; with the total before paging."""
        ...

    async def commits(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[CommitEntry], int]:
        """Newest first, filtered on the commit time, then paged; with the total before paging."""
        ...

    async def committed_as_of(self, group_id: str, at_ms: int) -> dict[TopicPartition, int]:
        """The group's committed offsets as they stood at ``at_ms`` (for reset to-datetime)."""
        ...

    async def events(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[GroupEventView], int]:
        """The events of ``coordinator.history.fold_history`` (static replacements, deletions, re-creations), newest
        first, filtered on their time, then paged; with the total before paging."""
        ...


# ------------------------------------------------------------------------------------------------ conversion


def rebalance_view(r: core.Rebalance) -> RebalanceView:
    """The API's shape of a rebalance (with its members in and out and partition moves), field for field."""
    return RebalanceView.model_validate(r, from_attributes=True)


def event_view(e: core.HistoryEvent) -> GroupEventView:
    """The API's shape of a stored event, with a line for a human."""
    if e.kind is core.HistoryEventKind.STATIC_REPLACEMENT:
        detail = f"static member {e.group_instance_id} replaced by a new instance"
    elif e.kind is core.HistoryEventKind.GROUP_DELETED:
        detail = f"the group was deleted ({e.cause})"
    else:
        detail = "the group was created again after its deletion"
    return GroupEventView(
        kind=GroupEventKind(e.kind.value), source=GroupEventSource.HISTORY, group_id=e.group_id,
        timestamp_ms=e.timestamp_ms, detail=detail, member_id=e.member_id, previous_member_id=e.previous_member_id,
        group_instance_id=e.group_instance_id, client_id=e.client_id, client_host=e.client_host, error=None,
        cause=e.cause,
    )  # fmt: skip


def commit_view(c: core.CommitEntry) -> CommitEntry:
    return CommitEntry.model_validate(c, from_attributes=True)


def in_range(ts: int, since_ms: int | None, until_ms: int | None) -> bool:
    return (since_ms is None or ts >= since_ms) and (until_ms is None or ts < until_ms)


# ------------------------------------------------------------------------------------------------ memory source


class MemoryHistory:
    """A ``HistorySource`` that listens to the record stream (a ``runtime.record_stream.RecordListener``): the last
    ``max_records`` history records and ``max_commits`` offset records of each group, in memory. History records are
    kept at append, offset records once durable."""

    durable_types: frozenset[type] = frozenset(core.OFFSET_RECORDS)

    def __init__(self, *, max_records: int = 5_000, max_commits: int = 20_000) -> None:
        self._max_records = max_records
        self._max_commits = max_commits
        self._records: dict[str, deque[Record]] = {}
        self._commits: dict[str, deque[Record]] = {}

    def on_append(self, records: Sequence[Record]) -> None:
        for rec in records:
            if isinstance(rec, core.REBALANCE_RECORDS):
                q = self._records.get(rec.group_id)
                if q is None:
                    q = self._records[rec.group_id] = deque(maxlen=self._max_records)
                q.append(rec)

    def on_durable(self, records: Sequence[Record]) -> None:
        for rec in records:
            if isinstance(rec, core.OFFSET_RECORDS):
                q = self._commits.get(rec.group_id)
                if q is None:
                    q = self._commits[rec.group_id] = deque(maxlen=self._max_commits)
                q.append(rec)

    async def rebalances(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[RebalanceView], int]:
        folded = core.rebalances_of(enumerate(self._records.get(group_id, ())))
        kept = [r for r in reversed(folded) if in_range(r.started_ms, since_ms, until_ms)]
        return [rebalance_view(r) for r in kept[offset : offset + limit]], len(kept)

    async def events(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[GroupEventView], int]:
        folded = core.fold_history(enumerate(self._records.get(group_id, ())))
        kept = [e for e in reversed(folded.events) if in_range(e.timestamp_ms, since_ms, until_ms)]
        return [event_view(e) for e in kept[offset : offset + limit]], len(kept)

    async def commits(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[CommitEntry], int]:
        kept = [
            (position, r)
            for position, r in enumerate(self._commits.get(group_id, ()))
            if isinstance(r, OffsetCommitRecord) and in_range(r.commit_timestamp_ms, since_ms, until_ms)
        ]
        page = kept[::-1][offset : offset + limit]
        return [commit_view(core.commit_entry(position, r)) for position, r in page], len(kept)

    async def committed_as_of(self, group_id: str, at_ms: int) -> dict[TopicPartition, int]:
        return core.committed_as_of(self._commits.get(group_id, ()), at_ms)
