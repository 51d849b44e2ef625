"""Read APIs over the stored history, for the operator HTTP API. Async, paged (``limit``/``offset``, newest first,
with the total before paging), and bounded: each call reads a position window of ONE group, never the whole log.

* ``rebalance_history`` — one ``Rebalance`` per rebalance start: cause, state transitions with times (started ->
  join completed -> stable/empty/restarted), phase durations, members in/out, leader, protocol, and for protocol
  type ``consumer`` the partitions whose owner changed against the assignment in force when it started.
* ``commit_log`` — every offset commit of a group in a time range.
* ``latest_offsets`` — the current committed offsets of a group (the snapshot table).
* ``committed_as_of`` — a group's committed offsets as they stood at a time (offset reset "to datetime").
* ``group_records`` — a group's history and group-metadata records rebuilt in log order (for callers that fold
  records themselves, e.g. ``servers.http.history.assemble_rebalances``).

History older than the retention is pruned (see ``SqlRecordLog.prune_history``); these APIs see what is left.
Field names follow ``servers.http.models`` so the HTTP layer can convert one to one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, Table, and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from coordinator.records import (
    GroupMetadataRecord,
    GroupRemovalCause,
    GroupStabilized,
    GroupTombstone,
    JoinPhaseCompleted,
    MemberJoined,
    MemberMetadata,
    MemberRemoved,
    RebalanceCause,
    RebalanceStarted,
    Record,
    RemovalCause,
)

from . import models as m
from .errors import StorageError, describe
from .models import table

TopicPartition = tuple[str, int]

STABLE, EMPTY, RESTARTED, IN_PROGRESS, DELETED = "stable", "empty", "restarted", "in_progress", "deleted"


@dataclass(frozen=True, slots=True)
class MemberIn:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberOut:
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


@dataclass(slots=True)
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
    to_generation: int | None = None
    join_completed_ms: int | None = None
    stabilized_ms: int | None = None
    join_duration_ms: int | None = None
    sync_duration_ms: int | None = None
    duration_ms: int | None = None  # start to Stable (or to the end of the join phase when Empty)
    outcome: str = IN_PROGRESS  # stable, empty, restarted, in_progress, deleted
    protocol: str | None = None
    leader: str | None = None
    members: list[str] = field(default_factory=list)
    members_in: list[MemberIn] = field(default_factory=list)
    members_out: list[MemberOut] = field(default_factory=list)
    partitions_moved: list[PartitionMove] | None = None  # consumer protocol only, once Stable
    # Positions of the group metadata records in force at the start and of the new generation (internal).
    _before_position: int | None = field(default=None, compare=False, repr=False)
    _after_position: int | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class CommitEntry:
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
        return self.generation_id < 0 and not self.member_id


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None
    position: int


class StorageQueries:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def _run(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            async with self.engine.connect() as conn:
                return await fn(conn, *args)
        except StorageError:
            raise
        except Exception as e:
            raise StorageError(f"{what}: {describe(e)}") from e

    # ------------------------------------------------------------------------------------------------ offsets

    async def latest_offsets(
        self, group_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[CommittedOffset]:
        """The group's committed offsets in (topic, partition) order; ``limit``/``offset`` page through them."""
        return list(await self._run("latest offsets", _latest_offsets, group_id, limit, offset))

    async def commit_log(
        self,
        group_id: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
        offset: int = 0,
        topic: str | None = None,
    ) -> tuple[list[CommitEntry], int]:
        """Commits with ``since_ms <= commit time < until_ms``, newest first, paged; and the total count."""
        result: tuple[list[CommitEntry], int] = await self._run(
            "commit log", _commit_log, group_id, since_ms, until_ms, limit, offset, topic
        )
        return result

    async def committed_as_of(self, group_id: str, at_ms: int) -> dict[TopicPartition, int]:
        """Replay of the group's stored offset history up to ``at_ms`` (inclusive)."""
        result: dict[TopicPartition, int] = await self._run("offsets as of", _committed_as_of, group_id, at_ms)
        return result

    # ------------------------------------------------------------------------------------------------ rebalances

    async def rebalance_history(
        self,
        group_id: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[Rebalance], int]:
        """Rebalances started in ``[since_ms, until_ms)``, newest first, paged; and the total count."""
        result: tuple[list[Rebalance], int] = await self._run(
            "rebalance history", _rebalance_history, group_id, since_ms, until_ms, limit, offset
        )
        return result

    async def group_records(
        self, group_id: str, *, from_position: int = 0, to_position: int | None = None
    ) -> list[tuple[int, Record]]:
        """The group's history records, group metadata records and group tombstones with
        ``from_position <= position < to_position``, rebuilt as (position, record) in log order."""
        result: list[tuple[int, Record]] = await self._run(
            "group records", _group_records, group_id, from_position, to_position
        )
        return result


# ---------------------------------------------------------------------------------------------------- offsets


async def _latest_offsets(
    conn: AsyncConnection, group_id: str, limit: int | None, offset: int
) -> list[CommittedOffset]:
    o = table(m.CurrentOffset)
    query = select(o).where(o.c.group_id == group_id).order_by(o.c.topic, o.c.partition_index).offset(offset)
    rows = await conn.execute(query.limit(limit) if limit is not None else query)
    return [
        CommittedOffset(
            topic=r.topic,
            partition=r.partition_index,
            offset=r.committed_offset,
            leader_epoch=r.leader_epoch,
            metadata=r.commit_metadata,
            commit_timestamp_ms=r.commit_timestamp_ms,
            expire_timestamp_ms=r.expire_timestamp_ms,
            position=r.position,
        )
        for r in rows
    ]


async def _commit_log(
    conn: AsyncConnection,
    group_id: str,
    since_ms: int | None,
    until_ms: int | None,
    limit: int,
    offset: int,
    topic: str | None,
) -> tuple[list[CommitEntry], int]:
    c = table(m.OffsetCommit)
    where = [c.c.group_id == group_id]
    if since_ms is not None:
        where.append(c.c.commit_timestamp_ms >= since_ms)
    if until_ms is not None:
        where.append(c.c.commit_timestamp_ms < until_ms)
    if topic is not None:
        where.append(c.c.topic == topic)
    total = (await conn.execute(select(func.count()).select_from(c).where(*where))).scalar_one()
    rows = await conn.execute(
        select(c)
        .where(*where)
        .order_by(c.c.commit_timestamp_ms.desc(), c.c.position.desc())
        .limit(limit)
        .offset(offset)
    )
    entries = [
        CommitEntry(
            position=r.position,
            topic=r.topic,
            partition=r.partition_index,
            offset=r.committed_offset,
            leader_epoch=r.leader_epoch,
            metadata=r.commit_metadata,
            commit_timestamp_ms=r.commit_timestamp_ms,
            expire_timestamp_ms=r.expire_timestamp_ms,
            member_id=r.member_id,
            generation_id=r.generation_id,
        )
        for r in rows
    ]
    return entries, int(total)


async def _committed_as_of(conn: AsyncConnection, group_id: str, at_ms: int) -> dict[TopicPartition, int]:
    c, r, g = table(m.OffsetCommit), table(m.OffsetRemoval), table(m.GroupRemoval)
    # (position, kind, topic, partition, offset) of every offset event up to at_ms, replayed in log order.
    events: list[tuple[int, int, str, int, int]] = []
    for row in await conn.execute(
        select(c.c.position, c.c.topic, c.c.partition_index, c.c.committed_offset).where(
            c.c.group_id == group_id, c.c.commit_timestamp_ms <= at_ms
        )
    ):
        events.append((row.position, 0, row.topic, row.partition_index, row.committed_offset))
    for removal in await conn.execute(
        select(r.c.position, r.c.topic, r.c.partition_index).where(r.c.group_id == group_id, r.c.timestamp_ms <= at_ms)
    ):
        events.append((removal.position, 1, removal.topic, removal.partition_index, 0))
    for (position,) in await conn.execute(
        select(g.c.position).where(g.c.group_id == group_id, g.c.timestamp_ms <= at_ms)
    ):
        events.append((position, 2, "", 0, 0))
    out: dict[TopicPartition, int] = {}
    for _position, kind, topic, partition, offset in sorted(events):
        if kind == 0:
            out[(topic, partition)] = offset
        elif kind == 1:
            out.pop((topic, partition), None)
        else:
            out.clear()
    return out


# ---------------------------------------------------------------------------------------------------- rebalances


def _window(t: Table, group_id: str, lo: int, hi: int | None) -> list[Any]:
    where = [t.c.group_id == group_id, t.c.position >= lo]
    if hi is not None:
        where.append(t.c.position < hi)
    return where


async def _rebalance_history(
    conn: AsyncConnection, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
) -> tuple[list[Rebalance], int]:
    rs = table(m.RebalanceStartedRow)
    where = [rs.c.group_id == group_id]
    if since_ms is not None:
        where.append(rs.c.timestamp_ms >= since_ms)
    if until_ms is not None:
        where.append(rs.c.timestamp_ms < until_ms)
    total = int((await conn.execute(select(func.count()).select_from(rs).where(*where))).scalar_one())
    page = [
        p
        for (p,) in await conn.execute(
            select(rs.c.position).where(*where).order_by(rs.c.position.desc()).limit(limit).offset(offset)
        )
    ]
    if not page:
        return [], total
    # Window: from the start before the oldest one on the page (so that members who joined before "their" start
    # are attributed like a full fold would), to the start after the newest one.
    lo = (
        await conn.execute(select(func.max(rs.c.position)).where(rs.c.group_id == group_id, rs.c.position < page[-1]))
    ).scalar()
    hi = (
        await conn.execute(select(func.min(rs.c.position)).where(rs.c.group_id == group_id, rs.c.position > page[0]))
    ).scalar()
    records = await _group_records(conn, group_id, int(lo) if lo is not None else 0, hi, with_members=False)
    wanted = set(page)
    views = [v for v in fold_rebalances(records) if v.position in wanted]
    await _attach_moves(conn, group_id, views, records)
    views.sort(key=lambda v: v.position, reverse=True)
    return views, total


def fold_rebalances(records: Iterable[tuple[int, Record]]) -> list[Rebalance]:
    """(position, record) pairs of one group in log order -> one ``Rebalance`` per RebalanceStarted, oldest first.
    Events after a rebalance ended and before the next start (e.g. the member whose join causes it) count for the
    next one."""
    done: list[Rebalance] = []
    current: Rebalance | None = None
    pending_in: list[MemberIn] = []
    pending_out: list[MemberOut] = []
    last_metadata: int | None = None  # position of the group metadata record in force

    def close(outcome: str) -> None:
        nonlocal current
        if current is not None:
            current.outcome = outcome
            done.append(current)
            current = None

    for position, rec in records:
        if isinstance(rec, RebalanceStarted):
            close(RESTARTED)
            current = Rebalance(
                group_id=rec.group_id,
                position=position,
                cause=str(rec.cause),
                reason=rec.reason,
                member_id=rec.member_id,
                group_instance_id=rec.group_instance_id,
                previous_state=rec.previous_state,
                from_generation=rec.generation_id,
                started_ms=rec.timestamp_ms,
                members_in=pending_in,
                members_out=pending_out,
                _before_position=last_metadata,
            )
            pending_in, pending_out = [], []
        elif isinstance(rec, MemberJoined):
            entry = MemberIn(rec.member_id, rec.group_instance_id, rec.client_id, rec.client_host, rec.timestamp_ms)
            (current.members_in if current is not None else pending_in).append(entry)
        elif isinstance(rec, MemberRemoved):
            out = MemberOut(rec.member_id, rec.group_instance_id, str(rec.cause), rec.reason, rec.timestamp_ms)
            (current.members_out if current is not None else pending_out).append(out)
        elif isinstance(rec, JoinPhaseCompleted):
            if current is not None:
                current.to_generation = rec.generation_id
                current.join_completed_ms = rec.timestamp_ms
                current.join_duration_ms = rec.join_duration_ms
                current.protocol = rec.protocol
                current.leader = rec.leader
                current.members = list(rec.members)
                if rec.state == "Empty":
                    current.duration_ms = rec.join_duration_ms
                    close(EMPTY)
        elif isinstance(rec, GroupMetadataRecord):
            last_metadata = position
            if current is not None and rec.generation_id == current.to_generation:
                current._after_position = position
        elif isinstance(rec, GroupStabilized):
            if current is not None:
                current.stabilized_ms = rec.timestamp_ms
                current.sync_duration_ms = rec.sync_duration_ms
                current.duration_ms = rec.rebalance_duration_ms
                close(STABLE)
        elif isinstance(rec, GroupTombstone):
            close(DELETED)
            last_metadata = None
            pending_in, pending_out = [], []
    if current is not None:
        done.append(current)
    return done


async def _attach_moves(conn: AsyncConnection, group_id: str, views: list[Rebalance], records: Any) -> None:
    """Partitions whose owner changed between the assignment in force at the start and the new generation's."""
    stable = [v for v in views if v.outcome == STABLE and v._after_position is not None]
    if not stable:
        return
    first = min(v.position for v in stable)
    gl = table(m.GroupMetadataLog)
    if any(v._before_position is None for v in stable):
        # The metadata record in force may precede the window: the latest one before the oldest start.
        before = (
            await conn.execute(select(func.max(gl.c.position)).where(gl.c.group_id == group_id, gl.c.position < first))
        ).scalar()
        for v in stable:
            if v._before_position is None and before is not None and not _tombstone_between(records, before, v):
                v._before_position = int(before)
    positions = {v._after_position for v in stable} | {v._before_position for v in stable}
    positions.discard(None)
    owners = await _assignments(conn, group_id, sorted(p for p in positions if p is not None))
    for v in stable:
        after = owners.get(v._after_position) if v._after_position is not None else None
        before_owners = owners.get(v._before_position, None) if v._before_position is not None else {}
        if after is None or before_owners is None:
            continue
        v.partitions_moved = [
            PartitionMove(tp[0], tp[1], before_owners.get(tp), after.get(tp))
            for tp in sorted(before_owners.keys() | after.keys())
            if before_owners.get(tp) != after.get(tp)
        ]


def _tombstone_between(records: Iterable[tuple[int, Record]], before: int, v: Rebalance) -> bool:
    return any(isinstance(r, GroupTombstone) and before < p < v.position for p, r in records)


async def _assignments(
    conn: AsyncConnection, group_id: str, positions: Sequence[int]
) -> dict[int, dict[TopicPartition, str] | None]:
    """Owner per partition of each group metadata record; None when not ``consumer`` or not decodable."""
    if not positions:
        return {}
    gl, gm, ap = table(m.GroupMetadataLog), table(m.GenerationMember), table(m.AssignedPartition)
    out: dict[int, dict[TopicPartition, str] | None] = {}
    for row in await conn.execute(
        select(gl.c.position, gl.c.protocol_type, gl.c.member_count).where(gl.c.position.in_(positions))
    ):
        out[row.position] = {} if row.protocol_type == "consumer" or row.member_count == 0 else None
    for (position,) in await conn.execute(
        select(gm.c.position).where(gm.c.position.in_(positions), gm.c.assignment_decoded.is_(False)).distinct()
    ):
        out[position] = None
    for owned in await conn.execute(
        select(ap.c.position, ap.c.member_id, ap.c.topic, ap.c.partition_index).where(
            and_(ap.c.position.in_(positions), ap.c.group_id == group_id)
        )
    ):
        owners = out.get(owned.position)
        if owners is not None:
            owners[(owned.topic, owned.partition_index)] = owned.member_id
    return out


# ---------------------------------------------------------------------------------------------------- records


async def _group_records(
    conn: AsyncConnection, group_id: str, lo: int, hi: int | None, *, with_members: bool = True
) -> list[tuple[int, Record]]:
    out: list[tuple[int, Record]] = []
    t = table(m.RebalanceStartedRow)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        out.append(
            (
                r.position,
                RebalanceStarted(
                    group_id=r.group_id,
                    generation_id=r.generation_id,
                    cause=_enum(RebalanceCause, r.cause),
                    member_id=r.member_id,
                    group_instance_id=r.group_instance_id,
                    reason=r.reason,
                    previous_state=r.previous_state,
                    timestamp_ms=r.timestamp_ms,
                ),
            )
        )
    jm = table(m.JoinPhaseMember)
    join_members: dict[int, list[tuple[str, bool]]] = {}
    for r in await conn.execute(_sel(jm, group_id, lo, hi).order_by(jm.c.position)):
        join_members.setdefault(r.position, []).append((r.member_id, r.is_static))
    t = table(m.JoinPhaseCompletedRow)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        joined = join_members.get(r.position, [])
        out.append(
            (
                r.position,
                JoinPhaseCompleted(
                    group_id=r.group_id,
                    generation_id=r.generation_id,
                    state=r.state,
                    protocol_type=r.protocol_type,
                    protocol=r.protocol,
                    leader=r.leader,
                    members=tuple(mid for mid, _ in joined),
                    static_members=tuple(mid for mid, static in joined if static),
                    join_duration_ms=r.join_duration_ms,
                    timestamp_ms=r.timestamp_ms,
                ),
            )
        )
    t = table(m.GroupStabilizedRow)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        out.append(
            (
                r.position,
                GroupStabilized(
                    group_id=r.group_id,
                    generation_id=r.generation_id,
                    sync_duration_ms=r.sync_duration_ms,
                    rebalance_duration_ms=r.rebalance_duration_ms,
                    timestamp_ms=r.timestamp_ms,
                ),
            )
        )
    t = table(m.MemberJoinedRow)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        out.append(
            (
                r.position,
                MemberJoined(
                    group_id=r.group_id,
                    member_id=r.member_id,
                    group_instance_id=r.group_instance_id,
                    client_id=r.client_id,
                    client_host=r.client_host,
                    protocols=tuple(r.protocols or ()),
                    session_timeout_ms=r.session_timeout_ms,
                    rebalance_timeout_ms=r.rebalance_timeout_ms,
                    timestamp_ms=r.timestamp_ms,
                ),
            )
        )
    t = table(m.MemberRemovedRow)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        out.append(
            (
                r.position,
                MemberRemoved(
                    group_id=r.group_id,
                    member_id=r.member_id,
                    group_instance_id=r.group_instance_id,
                    cause=_enum(RemovalCause, r.cause),
                    reason=r.reason,
                    generation_id=r.generation_id,
                    timestamp_ms=r.timestamp_ms,
                ),
            )
        )
    t = table(m.GroupRemoval)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        out.append(
            (
                r.position,
                GroupTombstone(
                    group_id=r.group_id, cause=_enum(GroupRemovalCause, r.cause), timestamp_ms=r.timestamp_ms
                ),
            )
        )
    metadata_members: dict[int, list[MemberMetadata]] = {}
    if with_members:
        gm = table(m.GenerationMember)
        for r in await conn.execute(_sel(gm, group_id, lo, hi).order_by(gm.c.position, gm.c.member_index)):
            metadata_members.setdefault(r.position, []).append(
                MemberMetadata(
                    member_id=r.member_id,
                    group_instance_id=r.group_instance_id,
                    client_id=r.client_id,
                    client_host=r.client_host,
                    rebalance_timeout_ms=r.rebalance_timeout_ms,
                    session_timeout_ms=r.session_timeout_ms,
                    subscription=bytes(r.subscription),
                    assignment=bytes(r.assignment),
                )
            )
    t = table(m.GroupMetadataLog)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        out.append(
            (
                r.position,
                GroupMetadataRecord(
                    group_id=r.group_id,
                    protocol_type=r.protocol_type,
                    generation_id=r.generation_id,
                    protocol=r.protocol,
                    leader=r.leader,
                    current_state_timestamp_ms=r.current_state_timestamp_ms,
                    members=tuple(metadata_members.get(r.position, ())),
                    timestamp_ms=r.timestamp_ms,
                ),
            )
        )
    out.sort(key=lambda pr: pr[0])
    return out


def _sel(t: Table, group_id: str, lo: int, hi: int | None) -> Select[Any]:
    return select(t).where(*_window(t, group_id, lo, hi))


def _enum(kind: Any, value: str) -> Any:
    try:
        return kind(value)
    except ValueError:  # written by a newer version: keep the text
        return value
