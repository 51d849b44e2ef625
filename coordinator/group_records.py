"""Building the records a classic group writes: its state (GroupMetadataRecord) and the membership history.

Pure functions of a group (and the time): the handlers add what they return to their ``Result``.
"""

from __future__ import annotations

from .group import ClassicGroup, Member
from .records import (
    GroupMetadataRecord,
    GroupStabilized,
    MemberJoined,
    MemberMetadata,
    MemberRemoved,
    RemovalCause,
    new_group_metadata_record,
)


def group_metadata_record(
    group: ClassicGroup, now: int, assignments: dict[str, bytes] | None = None
) -> GroupMetadataRecord:
    """Kafka's newGroupMetadataRecord: every member with its selected-protocol metadata and an assignment."""
    protocol = group.protocol_name
    # One per member of every generation: built positionally (the fields' order), keywords cost ~1 us more each.
    members = [
        MemberMetadata(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata_or_empty(protocol),  # subscription
            m.assignment if assignments is None else assignments.get(m.member_id, b""),
        )
        for m in group.members.values()
    ]
    return new_group_metadata_record(
        group.group_id,
        protocol_type=group.protocol_type,
        generation_id=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp_ms=group.state_timestamp_ms,
        members=members,
        now_ms=now,
    )


def member_joined(group: ClassicGroup, member: Member, now: int) -> MemberJoined:
    # One per member-adding JoinGroup: built positionally (the fields' order).
    return MemberJoined(
        group.group_id,
        member.member_id,
        member.group_instance_id,
        member.client_id,
        member.client_host,
        tuple([name for name, _ in member.protocols]),
        member.session_timeout_ms,
        member.rebalance_timeout_ms,
        now,
    )


def member_removed(
    group: ClassicGroup, member: Member, cause: RemovalCause, reason: str | None, now: int
) -> MemberRemoved:
    return MemberRemoved(
        group_id=group.group_id,
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        cause=cause,
        reason=reason,
        generation_id=group.generation_id,
        timestamp_ms=now,
    )


def stabilized(group: ClassicGroup, now: int) -> GroupStabilized:
    """The group became Stable at ``now`` (its assignment is durable), and how long the rebalance took.

    Written when the assignment write is durable, not with it: the leader may send SyncGroup again while the first
    write is in flight, and only the latest assignment makes the group Stable, once."""
    join_done = group.join_completed_ms if group.join_completed_ms is not None else now
    started = group.rebalance_started_ms if group.rebalance_started_ms is not None else join_done
    return GroupStabilized(
        group_id=group.group_id,
        generation_id=group.generation_id,
        sync_duration_ms=now - join_done,
        rebalance_duration_ms=now - started,
        timestamp_ms=now,
    )
