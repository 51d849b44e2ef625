"""Expected records, built from what a test knows: the harness defaults, the ids it got, the manual clock's time.

Core tests assert the exact list of records an operation wrote (``assert env.take() == [...]``), the way Kafka's
``GroupMetadataManagerTest`` compares ``expectedRecords``. These helpers only fill in the request defaults of
``tests.core.conftest`` (client id ``client``, host ``/127.0.0.1``, protocols ``range`` then ``roundrobin``, session
10 s, rebalance 60 s, group ``g``, protocol type ``consumer``) so that each expected record names only what differs.
They never look at the coordinator: a helper that read the produced records would make the assertion unfailable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from coordinator.records import (
    GroupMetadataRecord,
    GroupRemovalCause,
    GroupStabilized,
    GroupTombstone,
    JoinPhaseCompleted,
    MemberJoined,
    MemberMetadata,
    MemberRemoved,
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
    RebalanceCause,
    RebalanceStarted,
    RemovalCause,
)
from tests.core.conftest import DEFAULT_PROTOCOLS, REBALANCE_TIMEOUT_MS, SESSION_TIMEOUT_MS, StableGroup

HOST = "/127.0.0.1"
PROTOCOL_NAMES: tuple[str, ...] = tuple(name for name, _ in DEFAULT_PROTOCOLS)
RANGE_META = dict(DEFAULT_PROTOCOLS)["range"]  # what a default member persists once "range" is selected


def joined(
    member_id: str,
    at: int,
    *,
    group: str = "g",
    instance: str | None = None,
    client: str = "client",
    host: str = HOST,
    protocols: Sequence[str] = PROTOCOL_NAMES,
    session: int = SESSION_TIMEOUT_MS,
    rebalance: int = REBALANCE_TIMEOUT_MS,
) -> MemberJoined:
    return MemberJoined(group, member_id, instance, client, host, tuple(protocols), session, rebalance, at)


def started(
    generation: int,
    cause: RebalanceCause,
    at: int,
    *,
    previous: str,
    member: str | None = None,
    instance: str | None = None,
    reason: str | None = None,
    group: str = "g",
) -> RebalanceStarted:
    """``generation`` is the one being left; ``previous`` the state the group was in."""
    return RebalanceStarted(group, generation, cause, member, instance, reason, previous, at)


def completed(
    generation: int,
    members: Sequence[str],
    at: int,
    *,
    started_at: int,
    leader: str | None = None,
    static: Sequence[str] = (),
    protocol: str | None = "range",
    protocol_type: str | None = "consumer",
    group: str = "g",
) -> JoinPhaseCompleted:
    """The join phase ended with ``members`` (leader: the first of them unless given); none means Empty."""
    if not members:
        return JoinPhaseCompleted(group, generation, "Empty", protocol_type, None, None, (), (), at - started_at, at)
    return JoinPhaseCompleted(
        group,
        generation,
        "CompletingRebalance",
        protocol_type,
        protocol,
        leader if leader is not None else members[0],
        tuple(members),
        tuple(static),
        at - started_at,
        at,
    )


def stabilized(
    generation: int, at: int, *, join_completed_at: int, started_at: int, group: str = "g"
) -> GroupStabilized:
    return GroupStabilized(group, generation, at - join_completed_at, at - started_at, at)


def removed(
    member_id: str,
    cause: RemovalCause,
    generation: int,
    at: int,
    *,
    instance: str | None = None,
    reason: str | None = None,
    group: str = "g",
) -> MemberRemoved:
    return MemberRemoved(group, member_id, instance, cause, reason, generation, at)


def member(
    member_id: str,
    assignment: bytes = b"",
    *,
    instance: str | None = None,
    client: str = "client",
    host: str = HOST,
    session: int = SESSION_TIMEOUT_MS,
    rebalance: int = REBALANCE_TIMEOUT_MS,
    subscription: bytes = RANGE_META,
) -> MemberMetadata:
    return MemberMetadata(member_id, instance, client, host, rebalance, session, subscription, assignment)


def group_record(
    generation: int,
    leader: str | None,
    members: Iterable[MemberMetadata],
    at: int,
    *,
    state_at: int,
    protocol: str | None = "range",
    protocol_type: str = "consumer",
    group: str = "g",
) -> GroupMetadataRecord:
    """``state_at``: when the group entered its current state; ``at``: when the record was written."""
    return GroupMetadataRecord(group, protocol_type, generation, protocol, leader, state_at, tuple(members), at)


def empty_group_record(
    at: int, *, generation: int = 0, protocol_type: str = "", state_at: int | None = None, group: str = "g"
) -> GroupMetadataRecord:
    """A group with no members: a new group (generation 0, no protocol type) or one that became Empty."""
    state = at if state_at is None else state_at
    return GroupMetadataRecord(group, protocol_type, generation, None, None, state, (), at)


def stable_members(sg: StableGroup, *, assignments: dict[str, bytes] | None = None) -> tuple[MemberMetadata, ...]:
    """The members of a group built by ``form_stable_group`` (client ids c0, c1, ... in join order)."""
    given = sg.assignments if assignments is None else assignments
    return tuple(
        member(m, given.get(m, b""), instance=sg.instance_ids[i], client=f"c{i}") for i, m in enumerate(sg.member_ids)
    )


def stable_group_record(sg: StableGroup, at: int, *, state_at: int) -> GroupMetadataRecord:
    """The record that made a ``form_stable_group`` group Stable (leader's assignment)."""
    return group_record(sg.generation, sg.leader, stable_members(sg), at, state_at=state_at, group=sg.group_id)


def group_tombstone(
    at: int, *, cause: GroupRemovalCause = GroupRemovalCause.DELETED, group: str = "g"
) -> GroupTombstone:
    return GroupTombstone(group, cause, at)


def commit(
    topic: str,
    partition: int,
    offset: int,
    at: int,
    *,
    group: str = "g",
    leader_epoch: int = -1,
    metadata: str = "",
    expire_at: int | None = None,
    member_id: str = "",
    generation: int = -1,
) -> OffsetCommitRecord:
    """An offset commit record; member ``""`` and generation -1 are those of a simple/admin commit."""
    return OffsetCommitRecord(
        group, topic, partition, offset, leader_epoch, metadata, at, expire_at, member_id, generation
    )


def offset_tombstone(
    topic: str, partition: int, at: int, *, cause: OffsetRemovalCause = OffsetRemovalCause.DELETED, group: str = "g"
) -> OffsetTombstone:
    return OffsetTombstone(group, topic, partition, cause, at)
