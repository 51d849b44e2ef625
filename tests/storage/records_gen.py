"""Record builders for the storage tests and an independent reference fold of state records."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable

from coordinator.records import (
    GroupMetadataRecord,
    GroupRemovalCause,
    GroupTombstone,
    MemberMetadata,
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
    Record,
    StateRecord,
    new_group_metadata_record,
    new_group_tombstone,
    new_offset_commit_record,
    new_offset_tombstone,
)


def consumer_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """ConsumerProtocolAssignment bytes (written here by hand, independent of protocol.consumer_protocol)."""
    out = struct.pack(">hi", version, len(partitions))
    for topic, numbers in partitions.items():
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(numbers))
        out += b"".join(struct.pack(">i", n) for n in numbers)
    if version >= 1:
        out += struct.pack(">i", -1)  # user data: null
    return out


def member(member_id: str, assignment: bytes = b"", instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(
        member_id=member_id,
        group_instance_id=instance,
        client_id=f"client-{member_id}",
        client_host=f"/10.0.0.{len(member_id)}",
        rebalance_timeout_ms=60_000,
        session_timeout_ms=45_000,
        subscription=b"\x00\x00sub-" + member_id.encode(),
        assignment=assignment,
    )


def group_record(
    group_id: str, generation: int, members: Iterable[MemberMetadata], now_ms: int, protocol_type: str = "consumer"
) -> GroupMetadataRecord:
    members = tuple(members)
    return new_group_metadata_record(
        group_id,
        protocol_type=protocol_type,
        generation_id=generation,
        protocol="range" if members else None,
        leader=members[0].member_id if members else None,
        current_state_timestamp_ms=now_ms,
        members=members,
        now_ms=now_ms,
    )


def commit(
    group_id: str,
    topic: str,
    partition: int,
    offset: int,
    now_ms: int,
    *,
    member_id: str = "m-1",
    generation: int = 1,
    expire_ms: int | None = None,
    epoch: int = 3,
    metadata: str = "",
) -> OffsetCommitRecord:
    return new_offset_commit_record(
        group_id,
        topic,
        partition,
        offset=offset,
        leader_epoch=epoch,
        metadata=metadata,
        commit_timestamp_ms=now_ms,
        expire_timestamp_ms=expire_ms,
        member_id=member_id,
        generation_id=generation,
    )


def random_state_records(
    seed: int, count: int, *, groups: int = 6, topics: int = 3, partitions: int = 4
) -> list[Record]:
    """A random mix of commits, offset tombstones, group metadata and group tombstones with many repeated keys."""
    rng = random.Random(seed)
    out: list[Record] = []
    now = 1_700_000_000_000
    generation: dict[str, int] = {}
    for _ in range(count):
        now += rng.randint(0, 50)
        g = f"group-{rng.randrange(groups)}"
        t = f"topic-{rng.randrange(topics)}"
        p = rng.randrange(partitions)
        roll = rng.random()
        if roll < 0.6:
            out.append(
                commit(
                    g,
                    t,
                    p,
                    rng.randrange(1 << 40),
                    now,
                    member_id=rng.choice(["", "m-1", "m-2"]),
                    generation=rng.choice([-1, 1, 2]),
                    expire_ms=rng.choice([None, now + 1000]),
                    epoch=rng.choice([-1, 0, 7]),
                    metadata=rng.choice(["", "meta", "ünïcode"]),
                )
            )
        elif roll < 0.75:
            out.append(new_offset_tombstone(g, t, p, cause=rng.choice(list(OffsetRemovalCause)), now_ms=now))
        elif roll < 0.93:
            generation[g] = generation.get(g, 0) + 1
            n = rng.randrange(0, 4)
            members = [
                member(f"{g}-m{i}", consumer_assignment({t: [i, i + partitions]}), instance=rng.choice([None, f"i{i}"]))
                for i in range(n)
            ]
            out.append(
                group_record(g, generation[g], members, now, protocol_type=rng.choice(["consumer", "", "connect"]))
            )
        else:
            out.append(new_group_tombstone(g, cause=rng.choice(list(GroupRemovalCause)), now_ms=now))
    return out


def fold_state(
    records: Iterable[Record],
) -> tuple[dict[str, GroupMetadataRecord], dict[tuple[str, str, int], OffsetCommitRecord]]:
    """What replaying the state records leaves: the last metadata per live group, the last commit per partition."""
    groups: dict[str, GroupMetadataRecord] = {}
    offsets: dict[tuple[str, str, int], OffsetCommitRecord] = {}
    for r in records:
        if isinstance(r, GroupMetadataRecord):
            groups[r.group_id] = r
        elif isinstance(r, GroupTombstone):
            groups.pop(r.group_id, None)
        elif isinstance(r, OffsetCommitRecord):
            offsets[(r.group_id, r.topic, r.partition)] = r
        elif isinstance(r, OffsetTombstone):
            offsets.pop((r.group_id, r.topic, r.partition), None)
    return groups, offsets


def split_loaded(
    loaded: list[StateRecord],
) -> tuple[dict[str, GroupMetadataRecord], dict[tuple[str, str, int], OffsetCommitRecord]]:
    groups: dict[str, GroupMetadataRecord] = {}
    offsets: dict[tuple[str, str, int], OffsetCommitRecord] = {}
    for r in loaded:
        if isinstance(r, GroupMetadataRecord):
            assert r.group_id not in groups
            groups[r.group_id] = r
        else:
            assert isinstance(r, OffsetCommitRecord)
            key = (r.group_id, r.topic, r.partition)
            assert key not in offsets
            offsets[key] = r
    return groups, offsets
