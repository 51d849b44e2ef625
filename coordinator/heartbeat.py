"""Heartbeat (§4.3, H1-H8): the hot path. A few dict lookups and the member's new session deadline.

No timer call (the armed session timer finds the later deadline when it fires: ``rebalance.expire_member``), no
record, no ``Result``: a heartbeat writes nothing, so it returns its answer directly and allocates nothing.
"""

from __future__ import annotations

from protocol.errors import ErrorCode

from . import faults, rebalance
from .classic_groups import ClassicGroups
from .states import DEAD, EMPTY, PREPARING_REBALANCE

_NONE = ErrorCode.none
_UNKNOWN_MEMBER_ID = ErrorCode.unknown_member_id
_FENCED_INSTANCE_ID = ErrorCode.fenced_instance_id
_ILLEGAL_GENERATION = ErrorCode.illegal_generation
_REBALANCE_IN_PROGRESS = ErrorCode.rebalance_in_progress
_COORDINATOR_NOT_AVAILABLE = ErrorCode.coordinator_not_available
_INVALID_GROUP_ID = ErrorCode.invalid_group_id


def heartbeat_fields(
    shard: ClassicGroups, group_id: str, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """A Heartbeat from its fields (the server's Heartbeat path builds no request object), now."""
    return heartbeat_at(shard, shard.clock.monotonic_ms(), group_id, generation_id, member_id, instance_id)


def heartbeat_at(
    shard: ClassicGroups, now_ms: int, group_id: str, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """A Heartbeat from its fields, received at ``now_ms`` (``shard.clock.monotonic_ms()``, read by the caller: the
    listener reads it once per read of the socket, for every heartbeat in that read)."""
    try:  # free unless it raises (zero-cost exceptions); the hot path stays as it was
        if not group_id:  # checked first: OffsetCommit may create a simple group with the empty id
            return _INVALID_GROUP_ID
        group = shard.groups.get(group_id)
        if group is None:  # H1
            return _UNKNOWN_MEMBER_ID
        state = group.state
        if state is DEAD:  # H2
            return _COORDINATOR_NOT_AVAILABLE
        if instance_id is not None:  # H3 (validateMember, inlined)
            mapped = group.static_members.get(instance_id)
            if mapped is None:
                return _UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return _FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return _UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:  # H4
            return _ILLEGAL_GENERATION
        if state is EMPTY:  # H5 (unreachable: an Empty group has no members)
            return _UNKNOWN_MEMBER_ID
        member.last_heartbeat_monotonic_ms = now_ms
        deadline = member.session_deadline_monotonic_ms = now_ms + member.session_timeout_ms
        if deadline < member.session_timer_monotonic_ms:  # armed for longer (new-member join timeout): bring it in
            rebalance.schedule_session(shard, member)
        return _REBALANCE_IN_PROGRESS if state is PREPARING_REBALANCE else _NONE  # H6 / H7, H8
    except Exception as exc:
        faults.contain(shard, group_id, member_id, "Heartbeat", exc)
        return faults.fault_error(shard, group_id, member_id)
