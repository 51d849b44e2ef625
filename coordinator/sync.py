"""SyncGroup (§4.2, S1-S10): members wait for the leader's assignment, which the group applies once durable.

The leader's SyncGroup appends the GroupMetadataRecord with every assignment; the group becomes Stable, the parked
SyncGroups are answered and the GroupStabilized history record is written only once that write is durable
(``_assignment_written``; a leader's second SyncGroup supersedes a write still in flight, so one generation is
stabilized once). A failed write answers every parked SyncGroup with the error and starts a new rebalance.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

from protocol.errors import ErrorCode

from . import faults, rebalance
from .classic_groups import ClassicGroups
from .deferred import Deferred, resolved
from .group import ClassicGroup, GroupEvent, Member, MemberValidationError
from .group_records import group_metadata_record, stabilized
from .messages import SyncGroupRequest, SyncGroupResult
from .records import RebalanceCause
from .result import Out, Result
from .states import DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from .writes import write

log = logging.getLogger("coordinator.group")

_UNKNOWN_MEMBER_ID = ErrorCode.unknown_member_id

SyncOut = Result[Deferred[SyncGroupResult]]


def sync_group(shard: ClassicGroups, req: SyncGroupRequest) -> Deferred[SyncGroupResult]:
    """Only the leader's SyncGroup writes: it builds the operation's ``Result`` (``_write_assignment``); a follower's
    returns its (parked or immediate) answer directly, so it allocates no ``Result`` (the hot path)."""
    try:
        return _sync(shard, req)
    except Exception as exc:
        faults.contain(shard, req.group_id, req.member_id, "SyncGroup", exc)
        return resolved(SyncGroupResult(error=faults.fault_error(shard, req.group_id, req.member_id)))


def _inconsistent(requested: str | None, current: str | None) -> bool:
    """Kafka's isProtocolInconsistent: only a value given on both sides can disagree."""
    return requested is not None and current is not None and requested != current


def _sync(shard: ClassicGroups, req: SyncGroupRequest) -> Deferred[SyncGroupResult]:
    if not req.group_id:
        return resolved(SyncGroupResult(error=ErrorCode.invalid_group_id))
    group = shard.groups.get(req.group_id)
    if group is None or group.state is EMPTY:  # S1, S2
        return resolved(SyncGroupResult(error=_UNKNOWN_MEMBER_ID))
    if group.state is DEAD:  # S3
        return resolved(SyncGroupResult(error=ErrorCode.coordinator_not_available))
    try:  # S4
        member = group.validate_member(req.member_id, req.group_instance_id)
    except MemberValidationError as e:
        return resolved(SyncGroupResult(error=e.error))
    if req.generation_id != group.generation_id:  # S5
        return resolved(SyncGroupResult(error=ErrorCode.illegal_generation))
    if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
        req.protocol_name, group.protocol_name
    ):  # S6
        return resolved(SyncGroupResult(error=ErrorCode.inconsistent_group_protocol))
    if group.state is PREPARING_REBALANCE:  # S7
        return resolved(SyncGroupResult(error=ErrorCode.rebalance_in_progress))
    if group.state is STABLE:  # S10
        rebalance.remove_pending_sync_member(shard, group, member.member_id)
        return resolved(SyncGroupResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment))
    # S8/S9: CompletingRebalance - park until the leader's assignment is durable.
    reply: Deferred[SyncGroupResult] = Deferred()
    if member.sync_reply is not None:
        member.sync_reply.resolve(SyncGroupResult(error=ErrorCode.rebalance_in_progress))  # superseded duplicate
    member.sync_reply = reply
    rebalance.remove_pending_sync_member(shard, group, member.member_id)
    if group.is_leader(member.member_id):
        out: SyncOut = Result(reply)
        try:
            _write_assignment(shard, group, member, req, out)
        except Exception as exc:
            faults.contain(shard, group, member.member_id, "SyncGroup", exc, out)
            return resolved(SyncGroupResult(error=faults.fault_error(shard, req.group_id, req.member_id)))
        write(shard.log, out)
    return reply


def _write_assignment(
    shard: ClassicGroups, group: ClassicGroup, leader: Member, req: SyncGroupRequest, out: SyncOut
) -> None:
    """The leader's assignment: every member gets its share (or nothing), applied once the records are durable."""
    now = shard.clock.now_ms()
    given = dict(req.assignments)
    unknown = [mid for mid in given if mid not in group.members]
    if unknown:
        log.debug("leader assigned unknown members %s (ignored)", unknown, extra={"group": group.group_id})
    assignments = {mid: given.get(mid, b"") for mid in group.members}
    log.info(
        "leader sent the assignment for generation %d",
        group.generation_id,
        extra={"group": group.group_id, "member": leader.member_id},
    )
    out.records.append(group_metadata_record(group, now, assignments))
    token = group.assignment_write = object()
    out.on_durable.append(_AssignmentWrite(shard, group, group.generation_id, assignments, leader, token))


@dataclass(slots=True, frozen=True)
class _AssignmentWrite:
    """Durability callback of the leader's assignment: an operation of its own (its own ``Result``)."""

    shard: ClassicGroups
    group: ClassicGroup
    generation_id: int
    assignments: dict[str, bytes]
    leader: Member
    token: object  # ``group.assignment_write`` when this write was made: only the latest write acts

    def __call__(self, error: ErrorCode | None) -> None:
        faults.run_guarded(
            self.shard, self.group, None, "assignment write completion", partial(_assignment_written, self, error)
        )


def _assignment_written(w: _AssignmentWrite, error: ErrorCode | None, out: Out) -> None:
    shard, group = w.shard, w.group
    # Another member may have joined (or left) while the write was in flight: only act on the same
    # generation still waiting for its assignment, and on the leader's latest assignment of it.
    if not shard.is_current(group) or not group.accepts(GroupEvent.ASSIGNMENT_DURABLE):
        return
    if group.generation_id != w.generation_id or group.assignment_write is not w.token:
        return
    group.assignment_write = None
    if error is None:
        for member in group.members.values():
            member.assignment = w.assignments.get(member.member_id, b"")
        rebalance.propagate_assignment(shard, group, ErrorCode.none)
        now = shard.clock.now_ms()
        group.apply(GroupEvent.ASSIGNMENT_DURABLE, now)
        out.records.append(stabilized(group, now))
        log.info("stable at generation %d", group.generation_id, extra={"group": group.group_id})
    else:
        log.warning(
            "failed to persist the assignment of generation %d: %s",
            w.generation_id,
            error.name,
            extra={"group": group.group_id, "throttle": ("write-failed", "assignment")},
        )
        rebalance.reset_and_propagate_assignment_error(shard, group, error)
        rebalance.maybe_prepare_rebalance_or_complete_join(
            shard, group, RebalanceCause.SYNC_WRITE_FAILED, out, w.leader, error.name
        )
