"""Rebalance history and the commit log, as the operator API shows them.

``assemble_rebalances`` is pure: it folds one group's records (in log order) into rebalance views - cause, members
in and out, phase durations, partitions moved. ``HistorySource`` is what the HTTP handlers read; ``MemoryHistory``
implements it from the records passing through the record log (``TapLog``), bounded per group, for tests and for a
daemon without a history-capable store. A storage-backed source adapts ``storage.queries`` to the same protocol.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.record_log import OnDone, RecordLog
from coordinator.records import (
    GroupMetadataRecord,
    GroupStabilized,
    GroupTombstone,
    JoinPhaseCompleted,
    MemberJoined,
    MemberRemoved,
    OffsetCommitRecord,
    OffsetTombstone,
    RebalanceStarted,
    Record,
)
from protocol.consumer_protocol import assignment_partitions
from protocol.errors import ErrorCode

from .models import CommitEntry, MemberIn, MemberOut, PartitionMove, RebalanceOutcome, RebalanceView

TopicPartition = tuple[str, int]


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


# ---------------------------------------------------------------------------------------------------- assembly


def consumer_assignment(record: GroupMetadataRecord) -> dict[TopicPartition, str] | None:
    """Owner of each partition in a consumer-protocol group metadata record (None: not decodable)."""
    if record.protocol_type != "consumer":
        return None
    owners: dict[TopicPartition, str] = {}
    try:
        for m in record.members:
            for topic, partitions in assignment_partitions(m.assignment).items():
                for p in partitions:
                    owners[(topic, p)] = m.member_id
    except ValueError:
        return None
    return owners


def partition_moves(before: dict[TopicPartition, str], after: dict[TopicPartition, str]) -> list[PartitionMove]:
    moves = []
    for tp in sorted(before.keys() | after.keys()):
        a, b = before.get(tp), after.get(tp)
        if a != b:
            moves.append(PartitionMove(topic=tp[0], partition=tp[1], from_member=a, to_member=b))
    return moves


@dataclass(slots=True)
class _Open:
    start: RebalanceStarted
    before: dict[TopicPartition, str] | None
    members_in: list[MemberIn] = field(default_factory=list)
    members_out: list[MemberOut] = field(default_factory=list)
    join: JoinPhaseCompleted | None = None
    stable: GroupStabilized | None = None
    outcome: RebalanceOutcome = RebalanceOutcome.IN_PROGRESS


def assemble_rebalances(records: Iterable[Record]) -> list[RebalanceView]:
    """One group's records in log order -> its rebalances, oldest first."""
    records = list(records)
    # Assignments by generation first: the metadata record of a generation may come before or after its
    # GroupStabilized record in the log, and the diff needs both ends.
    by_generation: dict[int, dict[TopicPartition, str] | None] = {}
    for rec in records:
        if isinstance(rec, GroupMetadataRecord) and rec.members:
            by_generation[rec.generation_id] = consumer_assignment(rec)
    done: list[_Open] = []
    current: _Open | None = None
    last_stable: dict[TopicPartition, str] | None = {}
    pending_in: list[MemberIn] = []
    pending_out: list[MemberOut] = []

    def close(outcome: RebalanceOutcome) -> None:
        nonlocal current
        if current is not None:
            current.outcome = outcome
            done.append(current)
            current = None

    for rec in records:
        if isinstance(rec, RebalanceStarted):
            close(RebalanceOutcome.RESTARTED)
            current = _Open(start=rec, before=last_stable, members_in=pending_in, members_out=pending_out)
            pending_in, pending_out = [], []
        elif isinstance(rec, MemberJoined):
            entry = MemberIn(
                member_id=rec.member_id,
                group_instance_id=rec.group_instance_id,
                client_id=rec.client_id,
                client_host=rec.client_host,
                timestamp_ms=rec.timestamp_ms,
            )
            (current.members_in if current is not None else pending_in).append(entry)
        elif isinstance(rec, MemberRemoved):
            out = MemberOut(
                member_id=rec.member_id,
                group_instance_id=rec.group_instance_id,
                cause=rec.cause.value,
                reason=rec.reason,
                timestamp_ms=rec.timestamp_ms,
            )
            (current.members_out if current is not None else pending_out).append(out)
        elif isinstance(rec, JoinPhaseCompleted):
            if current is not None:
                current.join = rec
                if rec.state == "Empty":
                    last_stable = {}
                    close(RebalanceOutcome.EMPTY)
        elif isinstance(rec, GroupStabilized):
            if current is not None:
                current.stable = rec
                close(RebalanceOutcome.STABLE)
            last_stable = by_generation.get(rec.generation_id)
        elif isinstance(rec, GroupTombstone):
            close(RebalanceOutcome.DELETED)
            last_stable = {}
            pending_in, pending_out = [], []
    if current is not None:
        done.append(current)
    return [_view(o, by_generation) for o in done]


def _view(o: _Open, by_generation: dict[int, dict[TopicPartition, str] | None]) -> RebalanceView:
    s, j, st = o.start, o.join, o.stable
    moved: list[PartitionMove] | None = None
    if st is not None and o.before is not None:
        after = by_generation.get(st.generation_id)
        if after is not None:
            moved = partition_moves(o.before, after)
    if st is not None:
        duration: int | None = st.rebalance_duration_ms
    elif j is not None and o.outcome is RebalanceOutcome.EMPTY:
        duration = j.join_duration_ms
    else:
        duration = None
    return RebalanceView(
        group_id=s.group_id,
        cause=s.cause.value,
        reason=s.reason,
        member_id=s.member_id,
        group_instance_id=s.group_instance_id,
        previous_state=s.previous_state,
        from_generation=s.generation_id,
        to_generation=j.generation_id if j is not None else None,
        started_ms=s.timestamp_ms,
        join_completed_ms=j.timestamp_ms if j is not None else None,
        stabilized_ms=st.timestamp_ms if st is not None else None,
        join_duration_ms=j.join_duration_ms if j is not None else None,
        sync_duration_ms=st.sync_duration_ms if st is not None else None,
        duration_ms=duration,
        outcome=o.outcome,
        protocol=j.protocol if j is not None else None,
        leader=j.leader if j is not None else None,
        members=sorted(j.members) if j is not None else [],
        members_in=o.members_in,
        members_out=o.members_out,
        partitions_moved=moved,
    )


def commit_entry(rec: OffsetCommitRecord) -> CommitEntry:
    return CommitEntry(
        topic=rec.topic,
        partition=rec.partition,
        offset=rec.offset,
        leader_epoch=rec.leader_epoch,
        metadata=rec.metadata,
        commit_timestamp_ms=rec.commit_timestamp_ms,
        member_id=rec.member_id,
        generation_id=rec.generation_id,
        admin=rec.generation_id < 0 and not rec.member_id,
    )


def committed_as_of(records: Iterable[Record], at_ms: int) -> dict[TopicPartition, int]:
    """Replay a group's offset records up to ``at_ms`` (inclusive)."""
    out: dict[TopicPartition, int] = {}
    for rec in records:
        if isinstance(rec, OffsetCommitRecord):
            if rec.commit_timestamp_ms <= at_ms:
                out[(rec.topic, rec.partition)] = rec.offset
        elif isinstance(rec, OffsetTombstone):
            if rec.timestamp_ms <= at_ms:
                out.pop((rec.topic, rec.partition), None)
        elif isinstance(rec, GroupTombstone) and rec.timestamp_ms <= at_ms:
            out.clear()
    return out


def in_range(ts: int, since_ms: int | None, until_ms: int | None) -> bool:
    return (since_ms is None or ts >= since_ms) and (until_ms is None or ts < until_ms)


# ------------------------------------------------------------------------------------------------ memory source


_KEPT = (
    RebalanceStarted,
    JoinPhaseCompleted,
    GroupStabilized,
    MemberJoined,
    MemberRemoved,
    GroupMetadataRecord,
    GroupTombstone,
)


class MemoryHistory:
    """A ``HistorySource`` fed by ``TapLog``: the last ``max_records`` history records and ``max_commits`` offset
    records of each group, in memory. Commits are kept once durable; history records at append."""

    def __init__(self, *, max_records: int = 5_000, max_commits: int = 20_000) -> None:
        self._max_records = max_records
        self._max_commits = max_commits
        self._records: dict[str, deque[Record]] = {}
        self._commits: dict[str, deque[OffsetCommitRecord | OffsetTombstone | GroupTombstone]] = {}

    def on_append(self, records: Sequence[Record]) -> None:
        for rec in records:
            if isinstance(rec, _KEPT):
                q = self._records.get(rec.group_id)
                if q is None:
                    q = self._records[rec.group_id] = deque(maxlen=self._max_records)
                q.append(rec)

    def on_durable(self, records: Sequence[Record]) -> None:
        for rec in records:
            if isinstance(rec, OffsetCommitRecord | OffsetTombstone | GroupTombstone):
                q = self._commits.get(rec.group_id)
                if q is None:
                    q = self._commits[rec.group_id] = deque(maxlen=self._max_commits)
                q.append(rec)

    async def rebalances(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[RebalanceView], int]:
        views = assemble_rebalances(self._records.get(group_id, ()))
        views = [v for v in reversed(views) if in_range(v.started_ms, since_ms, until_ms)]
        return views[offset : offset + limit], len(views)

    async def commits(
        self, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
    ) -> tuple[list[CommitEntry], int]:
        recs = [
            r
            for r in reversed(self._commits.get(group_id, ()))
            if isinstance(r, OffsetCommitRecord) and in_range(r.commit_timestamp_ms, since_ms, until_ms)
        ]
        return [commit_entry(r) for r in recs[offset : offset + limit]], len(recs)

    async def committed_as_of(self, group_id: str, at_ms: int) -> dict[TopicPartition, int]:
        return committed_as_of(self._commits.get(group_id, ()), at_ms)


class TapLog:
    """A ``RecordLog`` that shows each batch to ``on_append`` and, once durable, to ``on_durable``."""

    def __init__(
        self,
        inner: RecordLog,
        on_append: Callable[[Sequence[Record]], None] | None = None,
        on_durable: Callable[[Sequence[Record]], None] | None = None,
    ) -> None:
        self.inner = inner
        self._on_append = on_append
        self._on_durable = on_durable

    def append(self, records: Sequence[Record], on_done: OnDone | None = None) -> None:
        if self._on_append is not None:
            self._on_append(records)
        observe = self._on_durable
        if observe is None:
            self.inner.append(records, on_done)
            return

        def done(error: ErrorCode | None) -> None:
            if error is None:
                observe(records)
            if on_done is not None:
                on_done(error)

        self.inner.append(records, done)

    @classmethod
    def for_history(cls, inner: RecordLog, history: MemoryHistory) -> TapLog:
        return cls(inner, history.on_append, history.on_durable)
