"""Version-independent requests and results of the core.

The API adapters (``servers.kafka``) turn each kio request, whatever its version, into one of these and turn the
results back into the version's response. Sentinels follow Kafka: unknown member id ``""``, unknown generation
``-1``, no leader epoch ``-1``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

# ------------------------------------------------------------------------------------------------------- JoinGroup


@dataclass(slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # ordered by the member's preference
    session_timeout_ms: int
    rebalance_timeout_ms: int  # the adapter sets it to the session timeout for v0
    client_id: str
    client_host: str
    api_version: int
    reason: str | None = None


@dataclass(slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinGroupResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinGroupMember] = field(default_factory=list)
    skip_assignment: bool = False


# ------------------------------------------------------------------------------------------------------- SyncGroup


@dataclass(slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: list[tuple[str, bytes]]  # (member id, assignment) - only the leader sends them
    api_version: int


@dataclass(slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# ------------------------------------------------------------------------------------------------ Heartbeat/Leave


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None
    # Removed by another client (an admin), not leaving itself: its removal is RemovalCause.ADMIN and the rebalance's
    # cause ADMIN_ACTION (the adapter decides: servers.kafka.membership). A member named by its group.instance.id
    # alone is always an admin removal.
    admin: bool = False


@dataclass(slots=True)
class LeaveGroupRequest:
    group_id: str
    members: list[LeaveMember]


@dataclass(slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: list[LeaveMemberResult] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------------- Offsets


@dataclass(slots=True)
class OffsetCommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1  # only OffsetCommit v1 carried it


@dataclass(slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    partitions: list[OffsetCommitPartition]
    api_version: int
    retention_time_ms: int = -1  # v2-4 only


@dataclass(slots=True)
class PartitionError:
    topic: str
    partition: int
    error: ErrorCode


@dataclass(slots=True)
class OffsetCommitResult:
    partitions: list[PartitionError]  # in request order


@dataclass(slots=True)
class OffsetFetchRequest:
    group_id: str
    topics: list[tuple[str, list[int]]] | None  # None = every committed offset of the group
    require_stable: bool = False


@dataclass(slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


@dataclass(slots=True)
class OffsetFetchResult:
    group_id: str
    error: ErrorCode
    # A list, or for a fetch of every offset a lazy collection that builds each entry as it is read (see
    # ``coordinator.offsets.AllOffsets``), so a group with 200,000 offsets is not converted in one loop step.
    partitions: Collection[FetchedOffset] = field(default_factory=list)


@dataclass(slots=True)
class OffsetDeleteRequest:
    group_id: str
    partitions: list[tuple[str, int]]


@dataclass(slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: list[PartitionError] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ Admin / describe


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str  # display form, e.g. "Stable"
    group_type: str = "classic"


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # only in Stable (selected protocol's metadata), else b""
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str = ""
    protocol_data: str = ""  # the selected protocol name, only in Stable
    members: list[DescribedMember] = field(default_factory=list)


@dataclass(slots=True)
class DeleteGroupResult:
    group_id: str
    error: ErrorCode
