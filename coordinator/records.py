"""Records: the source of truth. Every durable fact the coordinator learns is one small immutable record.

Two families:

* **State records** (Kafka's ``__consumer_offsets`` content): ``GroupMetadataRecord`` / ``GroupTombstone`` and
  ``OffsetCommitRecord`` / ``OffsetTombstone``. Replaying them in log order rebuilds every group and offset, exactly
  as Kafka's coordinator load does (see ``GroupCoordinator.replay`` in ``coordinator.group_coordinator``).
* **History records**, which Kafka does not keep: why and when each rebalance started, how each phase ended, who
  joined and who was removed and why. They are never needed to rebuild state; they feed the operator API and the
  Spark reports.

Records are built only through the ``new_*`` factory functions so that every producer fills them the same way.
Durability: a response that promises durability (leader SyncGroup, OffsetCommit, LeaveGroup, DeleteGroups,
OffsetDelete) waits for its records; history records ride along in the same batches but nobody waits for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class RebalanceCause(StrEnum):
    """Why a group entered PreparingRebalance (or why a join phase was re-entered)."""

    NEW_MEMBER = "new_member"  # a member joined that was not in the group
    MEMBER_LEFT = "member_left"  # LeaveGroup; the KIP-800 reason is kept beside it
    PENDING_MEMBER_LEFT = "pending_member_left"  # LeaveGroup of a MEMBER_ID_REQUIRED id (new coordinator rebalances)
    SESSION_TIMEOUT = "session_timeout"  # a member's heartbeat/session timer expired
    SYNC_TIMEOUT = "sync_timeout"  # members did not send SyncGroup within the rebalance timeout
    LEADER_REJOIN = "leader_rejoin"  # the leader sent JoinGroup in Stable (e.g. topic metadata changed)
    METADATA_CHANGE = "metadata_change"  # a member rejoined with different protocols/subscription
    STATIC_MEMBER_REPLACED = "static_member_replaced"  # static member rejoined with a new id and the protocol changed
    SYNC_WRITE_FAILED = "sync_write_failed"  # the leader's assignment could not be persisted
    GROUP_TOO_LARGE = "group_too_large"  # on load, more members than group.max.size
    ADMIN_ACTION = "admin_action"  # an operator removed a member (Kafka admin client or operator API)
    INTERNAL_ERROR = "internal_error"  # an operation on the group raised and was contained (fault isolation)


class RemovalCause(StrEnum):
    """Why a member left the group."""

    LEFT = "left"  # LeaveGroup from the member itself
    ADMIN = "admin"  # LeaveGroup by instance id or from another client (admin client), or the operator API
    SESSION_TIMEOUT = "session_timeout"
    JOIN_TIMEOUT = "join_timeout"  # dynamic member that did not rejoin before the join phase completed
    SYNC_TIMEOUT = "sync_timeout"
    FENCED = "fenced"  # static member replaced by a new member id with the same group.instance.id
    GROUP_MAX_SIZE = "group_max_size"
    GROUP_DELETED = "group_deleted"
    INTERNAL_ERROR = "internal_error"  # the member's operation raised; it was removed so the group goes on


class OffsetRemovalCause(StrEnum):
    DELETED = "deleted"  # OffsetDelete
    EXPIRED = "expired"  # retention (KIP-211)
    GROUP_DELETED = "group_deleted"  # DeleteGroups / group expiry


class GroupRemovalCause(StrEnum):
    DELETED = "deleted"  # DeleteGroups / operator
    EXPIRED = "expired"  # Empty group with no offsets left at a cleanup pass


# --------------------------------------------------------------------------------------------------- state records


# Never changed once built, but not frozen (hashed and compared by value as the frozen ones): a frozen dataclass's
# __init__ sets every field through object.__setattr__, 3-4x the cost (measured 2.8 -> 0.8 us here), and these two are
# built per member: a MemberJoined per member-adding JoinGroup, a MemberMetadata per member of every generation record.
@dataclass(slots=True, unsafe_hash=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the SELECTED protocol only (as Kafka persists it)
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    group_id: str
    protocol_type: str  # "" when the group has none
    generation_id: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int  # -1 = unknown
    members: tuple[MemberMetadata, ...]
    timestamp_ms: int  # when the record was produced


@dataclass(frozen=True, slots=True)
class GroupTombstone:
    group_id: str
    cause: GroupRemovalCause
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None  # only from OffsetCommit v2-4 with an explicit retention time
    member_id: str  # "" for admin/simple commits; history only, not part of Kafka's value
    generation_id: int  # -1 for admin/simple commits; history only


@dataclass(frozen=True, slots=True)
class OffsetTombstone:
    group_id: str
    topic: str
    partition: int
    cause: OffsetRemovalCause
    timestamp_ms: int


# ------------------------------------------------------------------------------------------------- history records


@dataclass(frozen=True, slots=True)
class RebalanceStarted:
    group_id: str
    generation_id: int  # the generation being left
    cause: RebalanceCause
    member_id: str | None  # the member whose action caused it, when there is one
    group_instance_id: str | None
    reason: str | None  # the client's KIP-800 reason (JoinGroup v8+/LeaveGroup v5+) or a short detail
    previous_state: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class JoinPhaseCompleted:
    """The join phase ended: a new generation exists (CompletingRebalance), or the group became Empty."""

    group_id: str
    generation_id: int  # the new generation
    state: str  # "CompletingRebalance" or "Empty"
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: tuple[str, ...]  # member ids in the new generation
    static_members: tuple[str, ...]  # those of ``members`` that have a group.instance.id
    join_duration_ms: int  # since the rebalance started
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class GroupStabilized:
    """The leader's assignment was persisted; the group is Stable. Assignments are in the GroupMetadataRecord."""

    group_id: str
    generation_id: int
    sync_duration_ms: int  # since the join phase completed
    rebalance_duration_ms: int  # since the rebalance started
    timestamp_ms: int


@dataclass(slots=True, unsafe_hash=True)  # not frozen: built per member-adding JoinGroup (see MemberMetadata)
class MemberJoined:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    protocols: tuple[str, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberRemoved:
    group_id: str
    member_id: str
    group_instance_id: str | None
    cause: RemovalCause
    reason: str | None
    generation_id: int
    timestamp_ms: int


StateRecord = GroupMetadataRecord | GroupTombstone | OffsetCommitRecord | OffsetTombstone
HistoryRecord = RebalanceStarted | JoinPhaseCompleted | GroupStabilized | MemberJoined | MemberRemoved
Record = StateRecord | HistoryRecord

STATE_RECORD_TYPES: tuple[type, ...] = (GroupMetadataRecord, GroupTombstone, OffsetCommitRecord, OffsetTombstone)


def is_state_record(record: Record) -> bool:
    return isinstance(record, STATE_RECORD_TYPES)


# ------------------------------------------------------------------------------------------------------- factories


def new_group_metadata_record(
    group_id: str,
    *,
    protocol_type: str | None,
    generation_id: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp_ms: int,
    members: Iterable[MemberMetadata],
    now_ms: int,
) -> GroupMetadataRecord:
    return GroupMetadataRecord(
        group_id=group_id,
        protocol_type=protocol_type or "",
        generation_id=generation_id,
        protocol=protocol,
        leader=leader,
        current_state_timestamp_ms=current_state_timestamp_ms,
        members=tuple(members),
        timestamp_ms=now_ms,
    )


def new_empty_group_record(
    group_id: str, *, now_ms: int, protocol_type: str | None = None, generation_id: int = 0
) -> GroupMetadataRecord:
    return new_group_metadata_record(
        group_id,
        protocol_type=protocol_type,
        generation_id=generation_id,
        protocol=None,
        leader=None,
        current_state_timestamp_ms=now_ms,
        members=(),
        now_ms=now_ms,
    )


def new_group_tombstone(group_id: str, *, cause: GroupRemovalCause, now_ms: int) -> GroupTombstone:
    return GroupTombstone(group_id=group_id, cause=cause, timestamp_ms=now_ms)


def new_offset_commit_record(
    group_id: str,
    topic: str,
    partition: int,
    *,
    offset: int,
    leader_epoch: int,
    metadata: str | None,
    commit_timestamp_ms: int,
    expire_timestamp_ms: int | None,
    member_id: str,
    generation_id: int,
) -> OffsetCommitRecord:
    return OffsetCommitRecord(
        group_id=group_id,
        topic=topic,
        partition=partition,
        offset=offset,
        leader_epoch=leader_epoch if leader_epoch >= 0 else -1,
        metadata=metadata or "",
        commit_timestamp_ms=commit_timestamp_ms,
        expire_timestamp_ms=expire_timestamp_ms,
        member_id=member_id,
        generation_id=generation_id,
    )


def new_offset_tombstone(
    group_id: str, topic: str, partition: int, *, cause: OffsetRemovalCause, now_ms: int
) -> OffsetTombstone:
    return OffsetTombstone(group_id=group_id, topic=topic, partition=partition, cause=cause, timestamp_ms=now_ms)
