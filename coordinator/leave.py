"""LeaveGroup (§4.4, L1-L8) and the operator's removal of a static member: answered once the removal is durable."""

from __future__ import annotations

import logging
from functools import partial
from typing import NamedTuple

from protocol.errors import ErrorCode

from . import faults, rebalance
from .classic_groups import ClassicGroups
from .deferred import Deferred, resolved
from .group import ClassicGroup, GroupState, MemberValidationError
from .messages import LeaveGroupRequest, LeaveGroupResult, LeaveMember, LeaveMemberResult
from .records import RebalanceCause, RemovalCause
from .result import Result
from .writes import write

log = logging.getLogger("coordinator.group")

_NONE = ErrorCode.none
_UNKNOWN_MEMBER_ID = ErrorCode.unknown_member_id


class _Trigger(NamedTuple):
    """The removal that names the rebalance a LeaveGroup starts (the history's cause and member)."""

    cause: RebalanceCause
    member_id: str | None
    instance_id: str | None
    reason: str | None


def leave_group(shard: ClassicGroups, req: LeaveGroupRequest) -> Deferred[LeaveGroupResult]:
    out: Result[Deferred[LeaveGroupResult]] = Result()
    try:
        reply = _leave(shard, req, out)
    except Exception as exc:
        faults.contain(shard, req.group_id, None, "LeaveGroup", exc, out)
        return resolved(LeaveGroupResult(error=ErrorCode.unknown_server_error))
    write(shard.log, out)
    return reply


def _leave(
    shard: ClassicGroups, req: LeaveGroupRequest, out: Result[Deferred[LeaveGroupResult]]
) -> Deferred[LeaveGroupResult]:
    if not req.group_id:
        return resolved(LeaveGroupResult(error=ErrorCode.invalid_group_id))
    group = shard.groups.get(req.group_id)
    if group is None:  # L1
        unknown = [LeaveMemberResult(m.member_id, m.group_instance_id, _UNKNOWN_MEMBER_ID) for m in req.members]
        return resolved(LeaveGroupResult(error=_NONE, members=unknown))
    if group.state is GroupState.DEAD:  # L2
        return resolved(LeaveGroupResult(error=ErrorCode.coordinator_not_available))
    results: list[LeaveMemberResult] = []
    trigger: _Trigger | None = None
    for item in req.members:
        error, trigger = _leave_member(shard, group, item, trigger, out)
        results.append(LeaveMemberResult(item.member_id, item.group_instance_id, error))
    if trigger is not None:  # L8
        rebalance.after_removal(
            shard, group, trigger.cause, out, trigger.member_id, trigger.instance_id, trigger.reason
        )
    reply: Deferred[LeaveGroupResult] = Deferred()
    out.reply = reply
    out.on_durable.append(partial(_resolve_leave, reply, LeaveGroupResult(error=_NONE, members=results)))
    return reply


def _leave_member(
    shard: ClassicGroups,
    group: ClassicGroup,
    item: LeaveMember,
    trigger: _Trigger | None,
    out: Result[Deferred[LeaveGroupResult]],
) -> tuple[ErrorCode, _Trigger | None]:
    """One member of a LeaveGroup: its error, and the trigger of the rebalance after this member (a member that
    left names it over a pending id, an admin removal over a pending id)."""
    if not item.member_id:
        holder = group.static_member_id(item.group_instance_id)
        if holder is None:  # L4
            return _UNKNOWN_MEMBER_ID, trigger
        # L3: removal by instance id (admin client)
        rebalance.remove_member(shard, group, group.members[holder], RemovalCause.ADMIN, out, item.reason)
        if trigger is None or trigger.cause is RebalanceCause.PENDING_MEMBER_LEFT:
            trigger = _Trigger(RebalanceCause.ADMIN_ACTION, holder, item.group_instance_id, item.reason)
        return _NONE, trigger
    if item.member_id in group.pending_join_members:  # L5
        rebalance.remove_pending_member(shard, group, item.member_id)
        log.info("pending member left", extra={"group": group.group_id, "member": item.member_id})
        if trigger is None:
            trigger = _Trigger(RebalanceCause.PENDING_MEMBER_LEFT, item.member_id, None, item.reason)
        return _NONE, trigger
    try:  # L6
        member = group.validate_member(item.member_id, item.group_instance_id)
    except MemberValidationError as e:
        return e.error, trigger
    # L7 (by another client: an admin removal, recorded as one, like L3)
    if item.admin:
        rebalance.remove_member(shard, group, member, RemovalCause.ADMIN, out, item.reason)
        if trigger is None or trigger.cause is RebalanceCause.PENDING_MEMBER_LEFT:
            trigger = _Trigger(RebalanceCause.ADMIN_ACTION, member.member_id, member.group_instance_id, item.reason)
        return _NONE, trigger
    rebalance.remove_member(shard, group, member, RemovalCause.LEFT, out, item.reason)
    if trigger is None or trigger.cause is not RebalanceCause.MEMBER_LEFT:
        trigger = _Trigger(RebalanceCause.MEMBER_LEFT, member.member_id, member.group_instance_id, item.reason)
    return _NONE, trigger


def _resolve_leave(reply: Deferred[LeaveGroupResult], result: LeaveGroupResult, error: ErrorCode | None) -> None:
    reply.resolve(result if error is None else LeaveGroupResult(error=error))


def remove_static_member(
    shard: ClassicGroups, group_id: str, group_instance_id: str, reason: str | None
) -> Deferred[ErrorCode]:
    """Operator action: remove the holder of ``group_instance_id`` (like LeaveGroup by instance id)."""
    out: Result[Deferred[ErrorCode]] = Result()
    try:
        reply = _remove_static_member(shard, group_id, group_instance_id, reason, out)
    except Exception as exc:
        faults.contain(shard, group_id, None, "removal of a static member", exc, out)
        return resolved(ErrorCode.unknown_server_error)
    write(shard.log, out)
    return reply


def _remove_static_member(
    shard: ClassicGroups, group_id: str, group_instance_id: str, reason: str | None, out: Result[Deferred[ErrorCode]]
) -> Deferred[ErrorCode]:
    group = shard.groups.get(group_id)
    if group is None or group.state is GroupState.DEAD:
        return resolved(ErrorCode.group_id_not_found)
    holder = group.static_member_id(group_instance_id)
    if holder is None:
        return resolved(_UNKNOWN_MEMBER_ID)
    rebalance.remove_member(shard, group, group.members[holder], RemovalCause.ADMIN, out, reason)
    rebalance.after_removal(shard, group, RebalanceCause.ADMIN_ACTION, out, holder, group_instance_id, reason)
    reply: Deferred[ErrorCode] = Deferred()
    out.reply = reply
    out.on_durable.append(partial(_resolve_error, reply))
    return reply


def _resolve_error(reply: Deferred[ErrorCode], error: ErrorCode | None) -> None:
    reply.resolve(_NONE if error is None else error)
