"""Fault containment: an operation of a classic group that raises leaves the group in a state it can leave.

Every entry point (request handler, timer operation, durability callback) catches what it raises and hands it to
``contain``: the records already produced are written (they describe changes already made in memory), the member
the operation was about is removed, the group's derived bookkeeping is rebuilt from its members and a fresh
rebalance starts; if even that raises, the group is reset to Empty (every member answered UNKNOWN_MEMBER_ID so that
it rejoins, an Empty GroupMetadataRecord written so that a replay agrees). The fault is logged once, with the group
id, at WARNING (throttled per group): the input came from a client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from protocol.errors import ErrorCode

from . import rebalance
from .classic_groups import ClassicGroups
from .group import ClassicGroup, GroupState
from .group_records import group_metadata_record, member_removed
from .messages import JoinGroupResult, SyncGroupResult
from .records import RebalanceCause, RemovalCause
from .result import Out, Result
from .writes import write

log = logging.getLogger("coordinator.group")

_DEAD = GroupState.DEAD
_EMPTY = GroupState.EMPTY
_PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE


def fault_error(shard: ClassicGroups, group_id: str, member_id: str) -> ErrorCode:
    """What a request that raised is answered: errors on which a real client rejoins rather than gives up
    (the Java consumer treats UNKNOWN_SERVER_ERROR in Join/Sync/Heartbeat as fatal to its poll)."""
    group = shard.groups.get(group_id)
    if group is None or member_id not in group.members:
        return ErrorCode.unknown_member_id
    return ErrorCode.rebalance_in_progress


def contain(
    shard: ClassicGroups,
    group: ClassicGroup | str,
    member_id: str | None,
    what: str,
    exc: Exception,
    out: Out | None = None,
) -> None:
    """An operation of ``group`` raised ``exc`` after producing ``out`` so far: write that, then repair the group.

    ``member_id`` names the member the operation was about (None for a group timer); it is removed. Never
    raises: a fault must not reach the listener, the timer or the log that called us.
    """
    shard.faults += 1
    group_id = group if isinstance(group, str) else group.group_id
    log.warning(
        "%s failed (%s: %s); removing the member and restarting the rebalance",
        what,
        type(exc).__name__,
        exc,
        exc_info=exc,
        extra={"group": group_id, "member": member_id, "throttle": ("group-fault", group_id)},
    )
    if out is not None:
        _write_quietly(shard, out)
    live = shard.groups.get(group_id)
    if live is None or live.state is _DEAD or (not isinstance(group, str) and live is not group):
        return
    repaired: Result[None] = Result()
    try:
        repair(shard, live, member_id, repaired)
    except Exception as again:
        log.warning(
            "recovery failed (%s: %s); resetting the group to Empty",
            type(again).__name__,
            again,
            extra={"group": group_id, "throttle": ("group-fault", group_id)},
        )
        repaired = Result()
        reset_to_empty(shard, live, repaired)
    _write_quietly(shard, repaired)


def run_guarded(
    shard: ClassicGroups, group: ClassicGroup, member_id: str | None, what: str, operation: Callable[[Out], None]
) -> None:
    """Run a timer operation or durability callback of ``group`` as one operation: its own ``Result``, written once
    at the end; a fault is contained (``member_id``: the member the operation is about, if any)."""
    out: Result[None] = Result()
    try:
        operation(out)
    except Exception as exc:
        contain(shard, group, member_id, what, exc, out)
        return
    write(shard.log, out)


def _write_quietly(shard: ClassicGroups, out: Out) -> None:
    try:
        write(shard.log, out)
    except Exception:
        log.warning("a write after a contained fault raised", exc_info=True)


def repair(shard: ClassicGroups, group: ClassicGroup, member_id: str | None, out: Out) -> None:
    """Remove the offender, rebuild the derived bookkeeping from the members, and rebalance."""
    if member_id:
        offender = group.members.get(member_id)
        if offender is not None:
            rebalance.remove_member(shard, group, offender, RemovalCause.INTERNAL_ERROR, out)
        elif member_id in group.pending_join_members:
            rebalance.remove_pending_member(shard, group, member_id)
    # Members that could never take part in a protocol selection go too (no protocol, another protocol type).
    unfit = [m for m in group.members.values() if not m.protocols or (m.protocol_type or None) != group.protocol_type]
    for member in unfit:
        rebalance.remove_member(shard, group, member, RemovalCause.INTERNAL_ERROR, out)
    rebuild_bookkeeping(group)
    if group.members and not group.candidate_protocols():
        raise RuntimeError("the remaining members share no protocol")
    if not group.members and group.state is not _PREPARING_REBALANCE:
        if group.state is not _EMPTY:
            rebalance.prepare_rebalance(shard, group, RebalanceCause.INTERNAL_ERROR, out)
        return
    if group.state is not _PREPARING_REBALANCE:
        rebalance.prepare_rebalance(shard, group, RebalanceCause.INTERNAL_ERROR, out)
        return
    rebalance.cancel_pending_sync(shard, group)
    if group.has_all_members_joined():
        rebalance.complete_join(shard, group, out)
    else:
        rebalance.schedule_join_timer(shard, group)


def reset_to_empty(shard: ClassicGroups, group: ClassicGroup, out: Out) -> None:
    """The last resort: every member out (answered UNKNOWN_MEMBER_ID, so it rejoins), Empty, a new generation.

    Written without the transition table or any helper that could raise again.
    """
    now = shard.clock.now_ms()
    _cancel_timers(shard, group)
    for member in group.members.values():
        join_reply, sync_reply = member.join_reply, member.sync_reply
        member.join_reply = member.sync_reply = None
        try:
            if join_reply is not None:
                join_reply.resolve(JoinGroupResult(error=ErrorCode.unknown_member_id))
            if sync_reply is not None:
                sync_reply.resolve(SyncGroupResult(error=ErrorCode.unknown_member_id))
        except Exception:
            log.warning("a parked reply raised when answered", exc_info=True, extra={"group": group.group_id})
        out.records.append(member_removed(group, member, RemovalCause.INTERNAL_ERROR, None, now))
    group.members.clear()
    group.static_members.clear()
    group.pending_join_members.clear()
    group.pending_sync_members.clear()
    group.supported_protocols.clear()
    group.num_members_awaiting_join = 0
    group.leader_id = None
    group.protocol_name = None
    group.subscribed_topics = None
    group.new_member_added = False
    group.generation_id += 1
    group.previous_state, group.state, group.state_timestamp_ms = group.state, _EMPTY, now
    out.records.append(group_metadata_record(group, now))
    out.on_durable.append(partial(rebalance.warn_on_failure, group.group_id, "reset group metadata"))


def _cancel_timers(shard: ClassicGroups, group: ClassicGroup) -> None:
    for key in (rebalance.join_key(group.group_id), rebalance.sync_key(group.group_id)):
        shard.timer.cancel(key)
    for member_id in list(group.members) + list(group.pending_join_members):
        shard.timer.cancel(rebalance.heartbeat_key(group.group_id, member_id))


def rebuild_bookkeeping(group: ClassicGroup) -> None:
    """Recompute what ``ClassicGroup`` derives from its members (counts, static map, leader, pending syncs)."""
    group.supported_protocols.clear()
    for member in group.members.values():
        for name in dict.fromkeys(name for name, _ in member.protocols):
            group.supported_protocols[name] += 1
    group.num_members_awaiting_join = sum(1 for m in group.members.values() if m.join_reply is not None)
    group.static_members = {
        m.group_instance_id: m.member_id for m in group.members.values() if m.group_instance_id is not None
    }
    group.pending_join_members -= group.members.keys()
    group.pending_sync_members &= group.members.keys()
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
