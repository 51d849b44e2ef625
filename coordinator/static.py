"""A known static member (group.instance.id) joins with member id "": the new id replaces (fences) the old (§7.2).

In a Stable group whose selected protocol does not change, no rebalance starts: the new member id is written with
the current assignments and the JoinGroup is answered once that is durable; a failed write reverts the replacement.
Otherwise the replacement starts (or joins) a rebalance like any membership change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from protocol.errors import ErrorCode

from . import faults, rebalance
from .classic_groups import ClassicGroups
from .deferred import Deferred
from .group import ClassicGroup, GroupState, IllegalStateTransition, Member
from .group_records import group_metadata_record, member_joined, member_removed
from .messages import JoinGroupRequest, JoinGroupResult
from .records import RebalanceCause, RemovalCause
from .result import Result
from .states import rebalance_event

log = logging.getLogger("coordinator.group")

# First JoinGroup version that supports skipping assignment (KIP-814).
_SKIP_ASSIGNMENT_VERSION = 9


@dataclass(slots=True, frozen=True)
class _Replacement:
    """What the durability callback of a replacement in a Stable group needs to answer or to revert it."""

    shard: ClassicGroups
    group: ClassicGroup
    instance_id: str
    old_member_id: str
    new_member: Member
    saved: tuple[list[tuple[str, bytes]], int, int]  # the old protocols and timeouts
    previous_leader: str | None
    api_version: int
    reply: Deferred[JoinGroupResult]

    def __call__(self, error: ErrorCode | None) -> None:
        try:
            _written(self, error)
        except Exception as exc:
            faults.contain(self.shard, self.group, self.new_member.member_id, "static member write completion", exc)
            error = faults.fault_error(self.shard, self.group.group_id, self.new_member.member_id)
            self.reply.resolve(JoinGroupResult(error=error))


def replace_static_member(
    shard: ClassicGroups,
    group: ClassicGroup,
    req: JoinGroupRequest,
    old_member_id: str,
    new_member_id: str,
    out: Result[Deferred[JoinGroupResult]],
) -> None:
    """N4: the same instance joins under ``new_member_id``; the old member is fenced."""
    instance_id = req.group_instance_id
    reply = out.reply
    assert instance_id is not None and reply is not None
    now = shard.clock.now_ms()
    previous_leader = group.leader_id
    old_member = group.members[old_member_id]
    shard.timer.cancel(old_member.heartbeat_key)
    new_member = group.replace_static_member(instance_id, old_member_id, new_member_id)
    out.records.append(member_removed(group, old_member, RemovalCause.FENCED, req.reason, now))
    rebalance.track(shard, group, new_member)
    rebalance.schedule_session(shard, new_member)
    saved = (new_member.protocols, new_member.rebalance_timeout_ms, new_member.session_timeout_ms)
    *_, rebalance_timeout_ms, session_timeout_ms, protocols = group.shared_fields(
        new_member.client_id, new_member.client_host, new_member.protocol_type, req.rebalance_timeout_ms,
        req.session_timeout_ms, req.protocols,
    )  # fmt: skip
    group.update_member(new_member, protocols, rebalance_timeout_ms, session_timeout_ms, reply)
    out.records.append(member_joined(group, new_member, now))
    log.info(
        "static member replaced %s in %s",
        old_member_id,
        group.state.value,
        extra={"group": group.group_id, "member": new_member_id, "instance": instance_id},
    )
    state = group.state
    if state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
        # No rebalance: persist the new member id with the current assignments, answer once durable.
        out.records.append(group_metadata_record(group, now))
        out.on_durable.append(
            _Replacement(
                shard, group, instance_id, old_member_id, new_member, saved, previous_leader, req.api_version, reply
            )
        )
    elif group.accepts(rebalance_event(RebalanceCause.STATIC_MEMBER_REPLACED)):
        # Stable with another protocol now, or CompletingRebalance: the leader may be assigning to the old id.
        rebalance.prepare_rebalance(shard, group, RebalanceCause.STATIC_MEMBER_REPLACED, out, new_member, req.reason)
    elif state is GroupState.PREPARING_REBALANCE:
        rebalance.maybe_complete_join_phase(shard, group, out)
    else:
        raise IllegalStateTransition(f"group {group.group_id}: static member replaced in {state.value}")


def _written(r: _Replacement, error: ErrorCode | None) -> None:
    group, new_member = r.group, r.new_member
    new_member_id = new_member.member_id
    live = r.shard.is_current(group) and group.members.get(new_member_id) is new_member
    if error is not None:
        _revert(r, error, live)
        return
    if not live or new_member.join_reply is not r.reply or group.state is not GroupState.STABLE:
        return  # removed, superseded, or a rebalance started meanwhile: that rebalance answers it
    if r.api_version >= _SKIP_ASSIGNMENT_VERSION:
        # v9+: a replaced leader is told it is the leader but must not compute a new assignment.
        is_leader = group.is_leader(new_member_id)
        result = group.current_generation_result(new_member_id, with_members=is_leader)
        result.skip_assignment = is_leader
    else:
        # v<9: report the leader from before the replacement so a replaced leader does not reassign.
        result = group.current_generation_result(new_member_id, with_members=False)
        result.leader = r.previous_leader or ""
    group.complete_join_reply(new_member, result)


def _revert(r: _Replacement, error: ErrorCode, live: bool) -> None:
    """The new member id could not be written: the old member comes back, the JoinGroup gets the error."""
    group, new_member = r.group, r.new_member
    new_member_id = new_member.member_id
    log.warning(
        "failed to persist the static member: %s; reverting",
        error.name,
        extra={
            "group": group.group_id,
            "member": new_member_id,
            "instance": r.instance_id,
            "throttle": ("write-failed", "static member"),
        },
    )
    if live and group.static_members.get(r.instance_id) == new_member_id:
        protocols, rebalance_timeout_ms, session_timeout_ms = r.saved
        group.update_member(new_member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
        r.shard.timer.cancel(new_member.heartbeat_key)
        old_member = group.replace_static_member(r.instance_id, new_member_id, r.old_member_id)
        rebalance.track(r.shard, group, old_member)
        rebalance.schedule_session(r.shard, old_member)
    r.reply.resolve(
        JoinGroupResult(
            error=error,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=r.previous_leader or "",
            member_id="",
        )
    )
