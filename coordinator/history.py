"""Rebalance and commit history as operators read it: the ONE fold of a group's records into views.

Pure: no I/O. Both readers use it - the in-memory history of the operator API (``servers.http.history``, over the
records it was shown) and the durable store (``storage.queries``, over the records it rebuilds from a window of its
tables) - so both answer the same for the same records.

* ``fold_rebalances`` turns (position, record) pairs of one group, in log order, into one ``Rebalance`` per
  ``RebalanceStarted``: cause, phase times and durations, outcome, members in and out. Positions only need to grow
  with the log (the store's log positions; the in-memory history numbers its records).
  ``fold_history`` also yields the group's events that are no rebalance: static members replaced, the group
  deleted and created again (``HistoryEvent``); ``fold_rebalances`` is its rebalances.
* ``with_moves`` adds the partitions whose owner changed to each Stable rebalance, from the owners of the group
  metadata record in force when it started and of the one its new generation wrote. The owners come from
  ``assignment_owners`` (in memory) or from the store's decoded-assignment table, which mirrors it.
* ``committed_as_of`` replays offset records up to an instant (offset reset "to datetime").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from protocol.consumer_protocol import assignment_partitions

from .records import (
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
    RemovalCause,
)

TopicPartition = tuple[str, int]
Owners = dict[TopicPartition, str]  # partition -> member id

# The record types each fold reads: a reader that keeps records for them (the in-memory history) keeps these.
REBALANCE_RECORDS = (
    RebalanceStarted, JoinPhaseCompleted, GroupStabilized, MemberJoined, MemberRemoved, GroupMetadataRecord,
    GroupTombstone,
)  # fmt: skip
OFFSET_RECORDS = (OffsetCommitRecord, OffsetTombstone, GroupTombstone)  # committed_as_of


class RebalanceOutcome(StrEnum):
    STABLE = "stable"  # the leader's assignment was persisted
    EMPTY = "empty"  # the join phase ended with no members
    RESTARTED = "restarted"  # a new rebalance started before this one finished
    IN_PROGRESS = "in_progress"
    DELETED = "deleted"  # the group was deleted


@dataclass(frozen=True, slots=True)
class MemberIn:
    """A member that joined during (or just before, causing) a rebalance."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberOut:
    """A member removed during (or just before, causing) a rebalance; ``cause`` is a ``RemovalCause`` value."""

    member_id: str
    group_instance_id: str | None
    cause: str
    reason: str | None
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class PartitionMove:
    topic: str
    partition: int
    from_member: str | None  # None: not assigned before
    to_member: str | None  # None: no longer assigned


@dataclass(frozen=True, slots=True)
class Rebalance:
    group_id: str
    position: int  # of the RebalanceStarted record
    cause: str
    reason: str | None
    member_id: str | None
    group_instance_id: str | None
    previous_state: str
    from_generation: int
    started_ms: int
    to_generation: int | None
    join_completed_ms: int | None
    stabilized_ms: int | None
    join_duration_ms: int | None
    sync_duration_ms: int | None
    duration_ms: int | None  # start to Stable (or to the end of the join phase when Empty)
    outcome: RebalanceOutcome
    protocol: str | None
    leader: str | None
    members: list[str]  # of the new generation, sorted
    members_in: list[MemberIn]
    members_out: list[MemberOut]
    partitions_moved: list[PartitionMove] | None = None  # consumer protocol only, once Stable (``with_moves``)
    # Positions of the group metadata records in force at the start (None: none seen) and written for the new
    # generation; ``with_moves`` reads their owners. Not part of what a rebalance is (not compared).
    before_metadata: int | None = field(default=None, compare=False, repr=False)
    after_metadata: int | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CommitEntry:
    """One partition of one offset commit, as the commit log keeps it (``position``: where it stands in the log)."""

    position: int
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None
    member_id: str
    generation_id: int

    @property
    def admin(self) -> bool:
        """An admin commit (offset reset, simple group): generation -1 and no member."""
        return self.generation_id < 0 and not self.member_id


def commit_entry(position: int, rec: OffsetCommitRecord) -> CommitEntry:
    return CommitEntry(
        position, rec.topic, rec.partition, rec.offset, rec.leader_epoch, rec.metadata, rec.commit_timestamp_ms,
        rec.expire_timestamp_ms, rec.member_id, rec.generation_id,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------- the fold


@dataclass(slots=True)
class _Open:
    """A rebalance being folded (mutable until it ends, then frozen into a ``Rebalance``)."""

    start: RebalanceStarted
    position: int
    before_metadata: int | None
    members_in: list[MemberIn]
    members_out: list[MemberOut]
    join: JoinPhaseCompleted | None = None
    stable: GroupStabilized | None = None
    after_metadata: int | None = None

    def close(self, outcome: RebalanceOutcome) -> Rebalance:
        s, j, st = self.start, self.join, self.stable
        if st is not None:
            duration: int | None = st.rebalance_duration_ms
        elif j is not None and outcome is RebalanceOutcome.EMPTY:
            duration = j.join_duration_ms
        else:
            duration = None
        return Rebalance(
            group_id=s.group_id,
            position=self.position,
            cause=str(s.cause),  # str: a cause written by a newer version comes back from storage as text
            reason=s.reason,
            member_id=s.member_id,
            group_instance_id=s.group_instance_id,
            previous_state=s.previous_state,
            from_generation=s.generation_id,
            started_ms=s.timestamp_ms,
            to_generation=j.generation_id if j is not None else None,
            join_completed_ms=j.timestamp_ms if j is not None else None,
            stabilized_ms=st.timestamp_ms if st is not None else None,
            join_duration_ms=j.join_duration_ms if j is not None else None,
            sync_duration_ms=st.sync_duration_ms if st is not None else None,
            duration_ms=duration,
            outcome=outcome,
            protocol=j.protocol if j is not None else None,
            leader=j.leader if j is not None else None,
            members=sorted(j.members) if j is not None else [],
            members_in=self.members_in,
            members_out=self.members_out,
            before_metadata=self.before_metadata,
            after_metadata=self.after_metadata,
        )


class HistoryEventKind(StrEnum):
    STATIC_REPLACEMENT = "static_replacement"  # a known group.instance.id joined with a new member id
    GROUP_DELETED = "group_deleted"  # a GroupTombstone
    GROUP_RECREATED = "group_recreated"  # the first record of a new life after a tombstone


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """A notable change of a group that is not a rebalance (or not only one), at ``position`` in the log."""

    kind: HistoryEventKind
    group_id: str
    position: int
    timestamp_ms: int
    member_id: str | None = None  # static_replacement: the new instance's member id
    previous_member_id: str | None = None  # static_replacement: the fenced member id
    group_instance_id: str | None = None
    client_id: str | None = None  # static_replacement: the new instance's
    client_host: str | None = None
    cause: str | None = None  # group_deleted: a ``GroupRemovalCause`` value


@dataclass(frozen=True, slots=True)
class GroupHistory:
    rebalances: list[Rebalance]  # oldest first, without moves (``with_moves``)
    events: list[HistoryEvent]  # in log order


def fold_history(records: Iterable[tuple[int, Record]]) -> GroupHistory:
    """(position, record) pairs of one group in log order -> one ``Rebalance`` per RebalanceStarted, oldest first
    (without moves: see ``with_moves``), and the group's ``HistoryEvent``s in log order.

    Members who joined or left after a rebalance ended and before the next start (e.g. the member whose join causes
    it) count for the next one - except a static member's replacement (its ``MemberRemoved`` cause fenced and the
    ``MemberJoined`` of the same group.instance.id, which the core writes next to each other):

    * while a rebalance is open (PreparingRebalance, CompletingRebalance) it stays in that rebalance's in/out lists;
    * while none is open (Stable), it counts for the rebalance it causes when a ``RebalanceStarted`` follows it (a
      Stable group whose selected protocol changes), and for none when the core wrote it in place (a group metadata
      record follows, no rebalance): it is then only an event.

    Every replacement is a ``static_replacement`` event, wherever it lands. A ``GroupTombstone`` is a
    ``group_deleted`` event; the next record after it (of ``REBALANCE_RECORDS``) a ``group_recreated`` one.

    The events depend only on the fenced removals, the joins of static members, the tombstones and the first record
    after each tombstone: a reader may fold just those records for the events (``storage.queries`` does)."""
    done: list[Rebalance] = []
    events: list[HistoryEvent] = []
    current: _Open | None = None
    pending_in: list[MemberIn] = []
    pending_out: list[MemberOut] = []
    # A replacement while no rebalance is open: its in/out entries, until a start (which it caused) or not.
    held_in: list[MemberIn] = []
    held_out: list[MemberOut] = []
    fenced: dict[str, tuple[MemberRemoved, MemberOut]] = {}  # instance id -> its fenced removal, until its join
    last_metadata: int | None = None  # position of the group metadata record in force
    deleted = False  # the last record was a tombstone

    for position, rec in records:
        if not isinstance(rec, REBALANCE_RECORDS):
            continue
        if deleted and not isinstance(rec, GroupTombstone):
            deleted = False
            events.append(HistoryEvent(HistoryEventKind.GROUP_RECREATED, rec.group_id, position, rec.timestamp_ms))
        if isinstance(rec, RebalanceStarted):
            if current is not None:
                done.append(current.close(RebalanceOutcome.RESTARTED))
            current = _Open(rec, position, last_metadata, pending_in + held_in, pending_out + held_out)
            pending_in, pending_out, held_in, held_out = [], [], [], []
        elif isinstance(rec, MemberJoined):
            entry = MemberIn(rec.member_id, rec.group_instance_id, rec.client_id, rec.client_host, rec.timestamp_ms)
            replaced = fenced.pop(rec.group_instance_id, None) if rec.group_instance_id else None
            if replaced is not None:
                old, out = replaced
                events.append(HistoryEvent(
                    HistoryEventKind.STATIC_REPLACEMENT, rec.group_id, position, rec.timestamp_ms,
                    member_id=rec.member_id, previous_member_id=old.member_id,
                    group_instance_id=rec.group_instance_id, client_id=rec.client_id, client_host=rec.client_host,
                ))  # fmt: skip
                if current is None:
                    kept = [o for o in pending_out if o is not out]
                    if len(kept) < len(pending_out):
                        pending_out = kept
                        held_out.append(out)
                    held_in.append(entry)
                    continue
            (current.members_in if current is not None else pending_in).append(entry)
        elif isinstance(rec, MemberRemoved):
            out = MemberOut(rec.member_id, rec.group_instance_id, str(rec.cause), rec.reason, rec.timestamp_ms)
            (current.members_out if current is not None else pending_out).append(out)
            if rec.cause == RemovalCause.FENCED and rec.group_instance_id:
                fenced[rec.group_instance_id] = (rec, out)
        elif isinstance(rec, JoinPhaseCompleted):
            if current is not None:
                current.join = rec
                if rec.state == "Empty":
                    done.append(current.close(RebalanceOutcome.EMPTY))
                    current = None
        elif isinstance(rec, GroupMetadataRecord):
            last_metadata = position
            if current is not None and current.join is not None and rec.generation_id == current.join.generation_id:
                current.after_metadata = position
            if current is None:
                held_in, held_out = [], []  # written in place: a replacement that is no rebalance's
        elif isinstance(rec, GroupStabilized):
            if current is not None:
                current.stable = rec
                done.append(current.close(RebalanceOutcome.STABLE))
                current = None
        elif isinstance(rec, GroupTombstone):
            if current is not None:
                done.append(current.close(RebalanceOutcome.DELETED))
                current = None
            last_metadata = None
            pending_in, pending_out, held_in, held_out = [], [], [], []
            fenced.clear()
            deleted = True
            events.append(HistoryEvent(
                HistoryEventKind.GROUP_DELETED, rec.group_id, position, rec.timestamp_ms, cause=str(rec.cause)
            ))  # fmt: skip
    if current is not None:
        done.append(current.close(RebalanceOutcome.IN_PROGRESS))
    return GroupHistory(done, events)


def fold_rebalances(records: Iterable[tuple[int, Record]]) -> list[Rebalance]:
    """The rebalances of ``fold_history``."""
    return fold_history(records).rebalances


# ---------------------------------------------------------------------------------------------------- moves


def assignment_owners(record: GroupMetadataRecord) -> Owners | None:
    """Owner of each partition in a group metadata record: {} with no members; None when the group does not use
    the consumer protocol or an assignment does not decode (no moves can be told then)."""
    if not record.members:
        return {}
    if record.protocol_type != "consumer":
        return None
    owners: Owners = {}
    try:
        for m in record.members:
            for topic, partitions in assignment_partitions(m.assignment).items():
                for p in partitions:
                    owners[(topic, p)] = m.member_id
    except ValueError:
        return None
    return owners


def partition_moves(before: Owners, after: Owners) -> list[PartitionMove]:
    """The partitions whose owner differs, in (topic, partition) order."""
    return [
        PartitionMove(tp[0], tp[1], before.get(tp), after.get(tp))
        for tp in sorted(before.keys() | after.keys())
        if before.get(tp) != after.get(tp)
    ]


def with_moves(rebalances: Iterable[Rebalance], owners: Mapping[int, Owners | None]) -> list[Rebalance]:
    """``rebalances`` with ``partitions_moved`` set on each Stable one whose two assignments are known.

    ``owners``: position of a group metadata record -> its ``assignment_owners``. A rebalance with no metadata
    record in force at its start moves partitions from nobody."""
    out = []
    for r in rebalances:
        if r.outcome is RebalanceOutcome.STABLE and r.after_metadata is not None:
            after = owners.get(r.after_metadata)
            before = owners.get(r.before_metadata) if r.before_metadata is not None else {}
            if after is not None and before is not None:
                r = dataclasses.replace(r, partitions_moved=partition_moves(before, after))
        out.append(r)
    return out


def history_of(records: Iterable[tuple[int, Record]]) -> GroupHistory:
    """Fold and moves over ALL of a group's records (those the fold needs: history, metadata, tombstones)."""
    records = list(records)
    owners = {p: assignment_owners(r) for p, r in records if isinstance(r, GroupMetadataRecord)}
    folded = fold_history(records)
    return GroupHistory(with_moves(folded.rebalances, owners), folded.events)


def rebalances_of(records: Iterable[tuple[int, Record]]) -> list[Rebalance]:
    """Fold and moves over ALL of a group's records (those the fold needs: history, metadata, tombstones)."""
    return history_of(records).rebalances


# ---------------------------------------------------------------------------------------------------- offsets


def committed_as_of(records: Iterable[Record], at_ms: int) -> dict[TopicPartition, int]:
    """Replay a group's offset records (log order) up to ``at_ms`` inclusive: its committed offsets at that time."""
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
