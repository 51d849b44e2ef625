"""Read APIs over the stored history, for the operator HTTP API. Async, paged (``limit``/``offset``, newest first,
with the total before paging), and bounded: each call reads a position window of ONE group, never the whole log.

* ``rebalance_history`` — one ``Rebalance`` per rebalance start: cause, state transitions with times (started ->
  join completed -> stable/empty/restarted), phase durations, members in/out, leader, protocol, and for protocol
  type ``consumer`` the partitions whose owner changed against the assignment in force when it started.
* ``commit_log`` — every offset commit of a group in a time range.
* ``latest_offsets`` — the current committed offsets of a group (the snapshot table).
* ``committed_as_of`` — a group's committed offsets as they stood at a time (offset reset "to datetime").
* ``history_events`` — a group's events that are no rebalance (static replacements, deletions, re-creations).
* ``group_records`` — a group's history and group-metadata records rebuilt in log order (for callers that fold
  records themselves).

The rebalances are folded by ``coordinator.history`` (the same fold the in-memory history uses) over the records
rebuilt from a window of positions; the owners of the assignments it compares come from the decoded-assignment
table. History older than the retention is pruned (see ``SqlRecordLog.prune_history``); these APIs see what is left.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, Table, and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from coordinator.history import (
    CommitEntry,
    HistoryEvent,
    Owners,
    Rebalance,
    RebalanceOutcome,
    TopicPartition,
    fold_history,
    fold_rebalances,
    with_moves,
)
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
from security.audit import Action, AdminAction, Via

from . import models as m
from .errors import StorageError, describe
from .models import table


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

    async def admin_actions(
        self,
        group_id: str | None = None,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[AdminAction], int]:
        """Admin actions (of one group, or all) with ``since_ms <= time < until_ms``, newest first, paged; and the
        total count."""
        result: tuple[list[AdminAction], int] = await self._run(
            "admin actions", _admin_actions, group_id, since_ms, until_ms, limit, offset
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

    async def history_events(
        self,
        group_id: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[HistoryEvent], int]:
        """The group's events (``coordinator.history.fold_history``: static replacements, deletions, re-creations)
        at ``since_ms <= time < until_ms``, newest first, paged; and the total count."""
        result: tuple[list[HistoryEvent], int] = await self._run(
            "history events", _history_events, group_id, since_ms, until_ms, limit, offset
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


async def _admin_actions(
    conn: AsyncConnection, group_id: str | None, since_ms: int | None, until_ms: int | None, limit: int, offset: int
) -> tuple[list[AdminAction], int]:
    a = table(m.AdminActionRow)
    where = []
    if group_id is not None:
        where.append(a.c.group_id == group_id)
    if since_ms is not None:
        where.append(a.c.timestamp_ms >= since_ms)
    if until_ms is not None:
        where.append(a.c.timestamp_ms < until_ms)
    total = (await conn.execute(select(func.count()).select_from(a).where(*where))).scalar_one()
    rows = await conn.execute(select(a).where(*where).order_by(a.c.position.desc()).limit(limit).offset(offset))
    actions = [
        AdminAction(
            timestamp_ms=r.timestamp_ms, via=Via(r.via), action=Action(r.action), resource=r.resource,
            group_id=r.group_id, principal=r.principal, client_id=r.client_id, client_host=r.client_host,
            detail=r.detail,
        )
        for r in rows
    ]  # fmt: skip
    return actions, int(total)


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
    views = await _with_metadata_before_window(conn, group_id, views, records)
    stable = [v for v in views if v.outcome is RebalanceOutcome.STABLE]
    positions = {p for v in stable for p in (v.before_metadata, v.after_metadata) if p is not None}
    views = with_moves(views, await _assignments(conn, group_id, sorted(positions)))
    views.sort(key=lambda v: v.position, reverse=True)
    return views, total


async def _with_metadata_before_window(
    conn: AsyncConnection, group_id: str, views: list[Rebalance], records: list[tuple[int, Record]]
) -> list[Rebalance]:
    """A Stable rebalance with no group metadata record before it in the window: the record in force at its start
    is the latest one before the window, unless a tombstone in the window came between."""
    missing = {
        v.position
        for v in views
        if v.outcome is RebalanceOutcome.STABLE and v.after_metadata is not None and v.before_metadata is None
    }
    if not missing:
        return views
    gl = table(m.GroupMetadataLog)
    before = (
        await conn.execute(
            select(func.max(gl.c.position)).where(gl.c.group_id == group_id, gl.c.position < min(missing))
        )
    ).scalar()
    if before is None:
        return views
    return [
        dataclasses.replace(v, before_metadata=int(before))
        if v.position in missing and not _tombstone_between(records, before, v)
        else v
        for v in views
    ]


def _tombstone_between(records: Iterable[tuple[int, Record]], before: int, v: Rebalance) -> bool:
    return any(isinstance(r, GroupTombstone) and before < p < v.position for p, r in records)


async def _assignments(conn: AsyncConnection, group_id: str, positions: Sequence[int]) -> dict[int, Owners | None]:
    """Owner per partition of each group metadata record, as ``coordinator.history.assignment_owners`` tells them
    from the record: {} without members; None when not ``consumer`` or not decodable."""
    if not positions:
        return {}
    gl, gm, ap = table(m.GroupMetadataLog), table(m.GenerationMember), table(m.AssignedPartition)
    out: dict[int, Owners | None] = {}
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


# ---------------------------------------------------------------------------------------------------- events

# The tables whose rows are the fold's records (``_group_records``): the first of them after a tombstone starts a
# new life.
_HISTORY_TABLES = (
    m.RebalanceStartedRow, m.JoinPhaseCompletedRow, m.GroupStabilizedRow, m.MemberJoinedRow, m.MemberRemovedRow,
    m.GroupRemoval, m.GroupMetadataLog,
)  # fmt: skip


async def _history_events(
    conn: AsyncConnection, group_id: str, since_ms: int | None, until_ms: int | None, limit: int, offset: int
) -> tuple[list[HistoryEvent], int]:
    """Folds only the records the events depend on (``fold_history``'s docstring): the fenced removals and the joins
    of static members in the time range (a replacement writes both at the same instant), the tombstones in it and the
    last one before it, and the first record after each of those tombstones."""

    def timed(t: Table) -> list[Any]:
        where = [t.c.group_id == group_id]
        if since_ms is not None:
            where.append(t.c.timestamp_ms >= since_ms)
        if until_ms is not None:
            where.append(t.c.timestamp_ms < until_ms)
        return where

    rm, mj, gr = table(m.MemberRemovedRow), table(m.MemberJoinedRow), table(m.GroupRemoval)
    records: dict[int, Record] = {}
    fenced = await conn.execute(
        select(rm).where(*timed(rm), rm.c.cause == RemovalCause.FENCED.value, rm.c.group_instance_id.is_not(None))
    )
    for r in fenced:
        records[r.position] = _member_removed(r)
    if records:
        for r in await conn.execute(select(mj).where(*timed(mj), mj.c.group_instance_id.is_not(None))):
            records[r.position] = _member_joined(r)
    tombstones = [r for r in await conn.execute(select(gr).where(*timed(gr)))]
    if since_ms is not None:  # a life that ended before the range may start again in it
        last = await conn.execute(
            select(gr).where(gr.c.group_id == group_id, gr.c.timestamp_ms < since_ms).order_by(gr.c.position.desc())
            .limit(1)
        )  # fmt: skip
        tombstones.extend(last)
    for r in tombstones:
        records[r.position] = _group_tombstone(r)
        first = await _first_after(conn, group_id, r.position)
        if first is not None:
            records.update(await _group_records(conn, group_id, first, first + 1, with_members=False))
    events = [
        e
        for e in fold_history(sorted(records.items())).events
        if (since_ms is None or e.timestamp_ms >= since_ms) and (until_ms is None or e.timestamp_ms < until_ms)
    ]
    events.reverse()
    return events[offset : offset + limit], len(events)


async def _first_after(conn: AsyncConnection, group_id: str, position: int) -> int | None:
    """The position of the group's first record after ``position``, if any."""
    firsts = []
    for t in map(table, _HISTORY_TABLES):
        first = (
            await conn.execute(select(func.min(t.c.position)).where(t.c.group_id == group_id, t.c.position > position))
        ).scalar()
        if first is not None:
            firsts.append(int(first))
    return min(firsts, default=None)


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
    for r in await conn.execute(_sel(table(m.MemberJoinedRow), group_id, lo, hi)):
        out.append((r.position, _member_joined(r)))
    for r in await conn.execute(_sel(table(m.MemberRemovedRow), group_id, lo, hi)):
        out.append((r.position, _member_removed(r)))
    for r in await conn.execute(_sel(table(m.GroupRemoval), group_id, lo, hi)):
        out.append((r.position, _group_tombstone(r)))
    metadata_members: dict[int, list[MemberMetadata]] = {}
    if with_members:
        gm = table(m.GenerationMember)
        for r in await conn.execute(_sel(gm, group_id, lo, hi).order_by(gm.c.position, gm.c.member_index)):
            metadata_members.setdefault(r.position, []).append(member_from_row(r))
    t = table(m.GroupMetadataLog)
    for r in await conn.execute(_sel(t, group_id, lo, hi)):
        out.append(
            (
                r.position,
                group_record_from_row(r, metadata_members.get(r.position, ())),
            )
        )
    out.sort(key=lambda pr: pr[0])
    return out


def _member_joined(r: Any) -> MemberJoined:
    return MemberJoined(
        group_id=r.group_id,
        member_id=r.member_id,
        group_instance_id=r.group_instance_id,
        client_id=r.client_id,
        client_host=r.client_host,
        protocols=tuple(r.protocols or ()),
        session_timeout_ms=r.session_timeout_ms,
        rebalance_timeout_ms=r.rebalance_timeout_ms,
        timestamp_ms=r.timestamp_ms,
    )


def _member_removed(r: Any) -> MemberRemoved:
    return MemberRemoved(
        group_id=r.group_id,
        member_id=r.member_id,
        group_instance_id=r.group_instance_id,
        cause=_enum(RemovalCause, r.cause),
        reason=r.reason,
        generation_id=r.generation_id,
        timestamp_ms=r.timestamp_ms,
    )


def _group_tombstone(r: Any) -> GroupTombstone:
    return GroupTombstone(group_id=r.group_id, cause=_enum(GroupRemovalCause, r.cause), timestamp_ms=r.timestamp_ms)


def group_record_from_row(row: Any, members: Iterable[MemberMetadata]) -> GroupMetadataRecord:
    """A group metadata record from its row (a generation's ``GroupMetadataLog`` or the current ``CurrentGroup``:
    the same columns) and its members' rows."""
    return GroupMetadataRecord(
        group_id=row.group_id,
        protocol_type=row.protocol_type,
        generation_id=row.generation_id,
        protocol=row.protocol,
        leader=row.leader,
        current_state_timestamp_ms=row.current_state_timestamp_ms,
        members=tuple(members),
        timestamp_ms=row.timestamp_ms,
    )


def member_from_row(row: Any) -> MemberMetadata:
    """A group metadata record's member from its row (a generation's ``GenerationMember`` or the current
    ``CurrentGroupMember``: the same columns)."""
    return MemberMetadata(
        member_id=row.member_id,
        group_instance_id=row.group_instance_id,
        client_id=row.client_id,
        client_host=row.client_host,
        rebalance_timeout_ms=row.rebalance_timeout_ms,
        session_timeout_ms=row.session_timeout_ms,
        subscription=bytes(row.subscription),
        assignment=bytes(row.assignment),
    )


def _sel(t: Table, group_id: str, lo: int, hi: int | None) -> Select[Any]:
    return select(t).where(*_window(t, group_id, lo, hi))


def _enum(kind: Any, value: str) -> Any:
    try:
        return kind(value)
    except ValueError:  # written by a newer version: keep the text
        return value
