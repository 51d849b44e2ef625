"""OffsetManager: OffsetCommit validation (C1-C7), durability, metadata limit, timestamps, OffsetFetch, OffsetDelete.

The groups here are ClassicGroup objects built directly (plain data) inside a small group type with behaviour,
registered in the real ``GroupDirectory``; ``test_coordinator.py`` drives the same paths through the real
GroupManager.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from functools import partial

import pytest

from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.group import ClassicGroup, GroupState, Member
from coordinator.group_type import GroupDirectory
from coordinator.messages import (
    FetchedOffset,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    PartitionError,
)
from coordinator.offsets import OffsetAndMetadata, OffsetManager, utf16_length
from coordinator.record_log import MemoryLog
from coordinator.records import (
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
    Record,
)
from protocol.errors import ErrorCode
from tests.core.expected import commit, offset_tombstone

T0 = 1_000_000


# ----------------------------------------------------------------------------------------------- test support


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (topics + null user data)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


class Groups:
    """A classic group type with behaviour (a dict of ClassicGroup), standing in for GroupManager in unit tests."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.rearmed: list[tuple[str, str]] = []

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def all_groups(self) -> Iterable[ClassicGroup]:
        return self.groups.values()

    @property
    def groups_by_id(self) -> Mapping[str, ClassicGroup]:
        return self.groups

    def remove_group(self, group_id: str) -> None:
        raise NotImplementedError("the offsets tests delete no group")

    def get_or_create_simple_group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id=group_id, created_ms=self.clock.now_ms())
        return group

    def rearm_session(self, group: ClassicGroup, member: Member) -> None:
        self.rearmed.append((group.group_id, member.member_id))

    def drop_group(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    def replay(self, record: Record) -> None:
        if isinstance(record, GroupTombstone):
            self.groups.pop(record.group_id, None)
        elif isinstance(record, GroupMetadataRecord):
            raise NotImplementedError("unit tests build groups directly")


def member(member_id: str, *topics: str, instance_id: str | None = None, protocol_type: str = "consumer") -> Member:
    return Member(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id="client",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000,
        protocol_type=protocol_type,
        protocols=[("range", subscription(*topics))],
        is_new=False,
    )


def add_group(
    groups: Groups,
    group_id: str,
    state: GroupState,
    *members: Member,
    generation: int = 1,
    now_ms: int = T0,
) -> ClassicGroup:
    """A group in ``state`` reached through legal transitions, with ``members``."""
    group = ClassicGroup(group_id=group_id, created_ms=now_ms)
    for m in members:
        group.add(m)
    path = {
        GroupState.EMPTY: [],
        GroupState.PREPARING_REBALANCE: [GroupState.PREPARING_REBALANCE],
        GroupState.COMPLETING_REBALANCE: [GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE],
        GroupState.STABLE: [GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE],
        GroupState.DEAD: [GroupState.DEAD],
    }[state]
    group.keep_alive = partial(groups.rearm_session, group)  # the shard's session timers, recorded
    for target in path:
        group.transition_to(target, now_ms)
    group.generation_id = generation
    if members:
        group.protocol_name = "range"
    group.compute_subscribed_topics()
    groups.groups[group_id] = group
    return group


class Env:
    def __init__(self, *, auto_commit: bool = True, config: GroupConfig | None = None) -> None:
        self.clock = ManualClock(T0)
        self.timer = ManualTimer(self.clock)
        self.log = MemoryLog(auto_commit=auto_commit)
        self.groups = Groups(self.clock)
        self.config = config or GroupConfig()
        self.directory = GroupDirectory(self.groups.get_or_create_simple_group, self.groups)
        self.offsets = OffsetManager(self.config, self.clock, self.timer, self.log, self.directory)

    def commit(
        self,
        group_id: str,
        *parts: tuple[str, int, int],
        generation: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        version: int = 8,
        metadata: str | None = "",
        retention_ms: int = -1,
    ) -> OffsetCommitResult:
        reply = self.offsets.commit_offsets(
            self.commit_request(
                group_id,
                *parts,
                generation=generation,
                member_id=member_id,
                instance_id=instance_id,
                version=version,
                metadata=metadata,
                retention_ms=retention_ms,
            )
        )
        assert reply.done
        return reply.result()

    @staticmethod
    def commit_request(
        group_id: str,
        *parts: tuple[str, int, int],
        generation: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        version: int = 8,
        metadata: str | None = "",
        retention_ms: int = -1,
    ) -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id=group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            partitions=[OffsetCommitPartition(t, p, o, metadata=metadata) for t, p, o in parts],
            api_version=version,
            retention_time_ms=retention_ms,
        )

    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None) -> list[FetchedOffset]:
        result = self.offsets.fetch_offsets(OffsetFetchRequest(group_id, topics))
        assert result.error is ErrorCode.none
        return list(result.partitions)


def errors(result: OffsetCommitResult) -> list[ErrorCode]:
    return [p.error for p in result.partitions]


@pytest.fixture
def env() -> Env:
    return Env()


# ------------------------------------------------------------------------------------------ simple/admin commits


def test_commit_to_unknown_group_with_generation_minus_one_creates_simple_group(env: Env) -> None:
    result = env.commit("g", ("t", 0, 10), ("t", 1, 20))
    assert result.partitions == [PartitionError("t", 0, ErrorCode.none), PartitionError("t", 1, ErrorCode.none)]
    group = env.groups.group("g")
    assert group is not None and group.is_simple_group() and group.state is GroupState.EMPTY
    assert dict(env.offsets.committed("g")) == {
        ("t", 0): OffsetAndMetadata(10, -1, "", T0, None),
        ("t", 1): OffsetAndMetadata(20, -1, "", T0, None),
    }
    assert env.log.take() == [commit("t", 0, 10, T0), commit("t", 1, 20, T0)]


def test_admin_commit_to_empty_group_is_accepted_and_ignores_member_and_instance(env: Env) -> None:
    add_group(env.groups, "g", GroupState.EMPTY)
    result = env.commit("g", ("t", 0, 5), member_id="whoever", instance_id="inst")
    assert errors(result) == [ErrorCode.none]
    assert env.offsets.committed("g")[("t", 0)].offset == 5
    assert [(r.group_id, r.topic, r.partition) for r in env.log.take() if isinstance(r, OffsetCommitRecord)] == [
        ("g", "t", 0)
    ]  # the exact record: test_admin_commit_record_names_no_member


def test_admin_commit_record_names_no_member(env: Env) -> None:
    add_group(env.groups, "g", GroupState.EMPTY)
    assert errors(env.commit("g", ("t", 0, 5), member_id="whoever", instance_id="inst")) == [ErrorCode.none]
    assert env.log.take() == [commit("t", 0, 5, T0)]  # an admin commit: no member, generation -1


@pytest.mark.parametrize("state", [GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE])
def test_admin_commit_to_non_empty_group_is_unknown_member(env: Env, state: GroupState) -> None:
    add_group(env.groups, "g", state, member("m1", "t"))
    assert errors(env.commit("g", ("t", 0, 5))) == [ErrorCode.unknown_member_id]
    assert env.log.take() == []
    assert not env.offsets.committed("g")


@pytest.mark.parametrize(("version", "error"), [(8, ErrorCode.illegal_generation), (9, ErrorCode.group_id_not_found)])
def test_member_commit_to_unknown_group(env: Env, version: int, error: ErrorCode) -> None:
    result = env.commit("nope", ("t", 0, 1), ("u", 3, 1), generation=3, member_id="m1", version=version)
    assert errors(result) == [error, error]
    assert env.groups.group("nope") is None
    assert env.log.take() == []


def test_commit_to_dead_group_is_coordinator_not_available(env: Env) -> None:
    add_group(env.groups, "g", GroupState.DEAD)
    assert errors(env.commit("g", ("t", 0, 1))) == [ErrorCode.coordinator_not_available]
    assert errors(env.commit("g", ("t", 0, 1), generation=1, member_id="m")) == [ErrorCode.coordinator_not_available]
    assert env.log.take() == []


# ------------------------------------------------------------------------------------------------ member commits


def test_member_commit_accepted_in_stable_and_rearms_session(env: Env) -> None:
    add_group(env.groups, "g", GroupState.STABLE, member("m1", "t"), generation=4)
    result = env.commit("g", ("t", 0, 42), generation=4, member_id="m1")
    assert errors(result) == [ErrorCode.none]
    assert env.groups.rearmed == [("g", "m1")]
    assert env.log.take() == [commit("t", 0, 42, T0, member_id="m1", generation=4)]


def test_member_commit_accepted_in_preparing_rebalance(env: Env) -> None:
    """Commits of the previous generation are allowed while the group collects joins (and keep the member alive)."""
    add_group(env.groups, "g", GroupState.PREPARING_REBALANCE, member("m1", "t"), generation=4)
    assert errors(env.commit("g", ("t", 0, 42), generation=4, member_id="m1")) == [ErrorCode.none]
    assert env.groups.rearmed == [("g", "m1")]
    assert env.offsets.committed("g")[("t", 0)].offset == 42
    assert env.log.take() == [commit("t", 0, 42, T0, member_id="m1", generation=4)]


def test_member_commit_rejected_in_completing_rebalance(env: Env) -> None:
    add_group(env.groups, "g", GroupState.COMPLETING_REBALANCE, member("m1", "t"), generation=5)
    result = env.commit("g", ("t", 0, 42), ("t", 1, 43), generation=5, member_id="m1")
    assert errors(result) == [ErrorCode.rebalance_in_progress, ErrorCode.rebalance_in_progress]
    assert env.groups.rearmed == []
    assert env.log.take() == []


def test_member_commit_validation_order(env: Env) -> None:
    add_group(env.groups, "g", GroupState.STABLE, member("m1", "t"), member("s1", "t", instance_id="i1"), generation=2)
    assert errors(env.commit("g", ("t", 0, 1), generation=2, member_id="ghost")) == [ErrorCode.unknown_member_id]
    assert errors(env.commit("g", ("t", 0, 1), generation=1, member_id="m1")) == [ErrorCode.illegal_generation]
    # a member id without a generation is still validated as a member commit
    assert errors(env.commit("g", ("t", 0, 1), generation=-1, member_id="m1")) == [ErrorCode.illegal_generation]
    # static membership: instance mapped to another member -> fenced; unmapped instance -> unknown member
    assert errors(env.commit("g", ("t", 0, 1), generation=2, member_id="m1", instance_id="i1")) == [
        ErrorCode.fenced_instance_id
    ]
    assert errors(env.commit("g", ("t", 0, 1), generation=2, member_id="s1", instance_id="other")) == [
        ErrorCode.unknown_member_id
    ]
    assert env.log.take() == []  # every refused commit above wrote nothing
    assert errors(env.commit("g", ("t", 0, 1), generation=2, member_id="s1", instance_id="i1")) == [ErrorCode.none]
    assert env.groups.rearmed == [("g", "s1")]
    assert env.log.take() == [commit("t", 0, 1, T0, member_id="s1", generation=2)]


def test_member_commit_to_empty_group_is_unknown_member(env: Env) -> None:
    add_group(env.groups, "g", GroupState.EMPTY, generation=3)
    assert errors(env.commit("g", ("t", 0, 1), generation=3, member_id="m1")) == [ErrorCode.unknown_member_id]
    assert env.log.take() == []


# ------------------------------------------------------------------------------------------ metadata and timestamps


def test_metadata_size_limit_is_per_partition_and_counts_utf16_units() -> None:
    env = Env(config=GroupConfig(offset_metadata_max_bytes=4))
    result = env.offsets.commit_offsets(
        OffsetCommitRequest(
            group_id="g",
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            partitions=[
                OffsetCommitPartition("t", 0, 1, metadata="abcd"),  # 4 units: fits
                OffsetCommitPartition("t", 1, 2, metadata="abcde"),  # 5 units: too large
                OffsetCommitPartition("t", 2, 3, metadata="😀😀"),  # 2 code points but 4 UTF-16 units: fits
                OffsetCommitPartition("t", 3, 4, metadata="é😀😀"),  # 5 UTF-16 units (and 9 UTF-8 bytes)
                OffsetCommitPartition("t", 4, 5, metadata=None),  # null metadata -> ""
            ],
            api_version=8,
        )
    ).result()
    assert errors(result) == [
        ErrorCode.none,
        ErrorCode.offset_metadata_too_large,
        ErrorCode.none,
        ErrorCode.offset_metadata_too_large,
        ErrorCode.none,
    ]
    committed = env.offsets.committed("g")
    assert sorted(committed) == [("t", 0), ("t", 2), ("t", 4)]
    assert committed[("t", 2)].metadata == "😀😀"
    assert committed[("t", 4)].metadata == ""
    assert env.log.take() == [  # the refused partitions are not written; null metadata is written as ""
        commit("t", 0, 1, T0, metadata="abcd"),
        commit("t", 2, 3, T0, metadata="😀😀"),
        commit("t", 4, 5, T0),
    ]


def test_utf16_length() -> None:
    assert utf16_length("") == 0
    assert utf16_length("abc") == 3
    assert utf16_length("été") == 3
    assert utf16_length("😀") == 2


def test_default_metadata_limit_4096(env: Env) -> None:
    assert errors(env.commit("g", ("t", 0, 1), metadata="x" * 4096)) == [ErrorCode.none]
    assert errors(env.commit("g", ("t", 0, 1), metadata="x" * 4097)) == [ErrorCode.offset_metadata_too_large]
    assert env.log.take() == [commit("t", 0, 1, T0, metadata="x" * 4096)]


def test_retention_time_sets_expire_timestamp_only_for_v2_to_v4(env: Env) -> None:
    env.commit("g", ("t", 0, 1), version=2, retention_ms=5_000)
    env.commit("g", ("t", 1, 1), version=3, retention_ms=-1)
    env.commit("g", ("t", 2, 1), version=5, retention_ms=5_000)  # the field does not exist in v5
    committed = env.offsets.committed("g")
    assert committed[("t", 0)].expire_timestamp_ms == T0 + 5_000
    assert committed[("t", 1)].expire_timestamp_ms is None
    assert committed[("t", 2)].expire_timestamp_ms is None
    assert env.log.take() == [
        commit("t", 0, 1, T0, expire_at=T0 + 5_000),
        commit("t", 1, 1, T0),
        commit("t", 2, 1, T0),
    ]


def test_commit_timestamp_from_request_only_in_v1(env: Env) -> None:
    def req(version: int, ts: int) -> OffsetCommitRequest:
        r = env.commit_request("g", ("t", version, 1), version=version)
        r.partitions[0].commit_timestamp_ms = ts
        return r

    env.offsets.commit_offsets(req(1, 777))
    env.offsets.commit_offsets(req(2, 777))
    env.clock.set(T0 + 50)
    env.offsets.commit_offsets(env.commit_request("g", ("t", 9, 1), version=1))
    committed = env.offsets.committed("g")
    assert committed[("t", 1)].commit_timestamp_ms == 777
    assert committed[("t", 2)].commit_timestamp_ms == T0
    assert committed[("t", 9)].commit_timestamp_ms == T0 + 50
    assert env.log.take() == [commit("t", 1, 1, 777), commit("t", 2, 1, T0), commit("t", 9, 1, T0 + 50)]


def test_leader_epoch_is_kept_and_negative_means_none(env: Env) -> None:
    req = env.commit_request("g", ("t", 0, 1), ("t", 1, 2))
    req.partitions[0].leader_epoch = 7
    req.partitions[1].leader_epoch = -5
    env.offsets.commit_offsets(req)
    assert env.fetch("g", [("t", [0, 1])]) == [FetchedOffset("t", 0, 1, 7, ""), FetchedOffset("t", 1, 2, -1, "")]
    assert env.log.take() == [commit("t", 0, 1, T0, leader_epoch=7), commit("t", 1, 2, T0)]


# --------------------------------------------------------------------------------------------------- durability


def test_commit_resolves_and_applies_only_when_durable() -> None:
    env = Env(auto_commit=False)
    reply = env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 10)))
    assert not reply.done
    assert env.log.pending == 1 and env.log.take() == []
    # nothing visible before the write is durable: not the group, not the offset
    assert env.groups.group("g") is None
    assert env.fetch("g", [("t", [0])]) == [FetchedOffset("t", 0)]
    env.log.commit()
    assert reply.done and errors(reply.result()) == [ErrorCode.none]
    assert env.fetch("g", [("t", [0])]) == [FetchedOffset("t", 0, 10)]
    assert env.groups.group("g") is not None
    assert env.log.take() == [commit("t", 0, 10, T0)]


def test_failed_write_maps_error_to_accepted_partitions_and_changes_nothing() -> None:
    env = Env(auto_commit=False, config=GroupConfig(offset_metadata_max_bytes=3))
    env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 1)))
    env.log.commit()
    env.log.take()
    req = env.commit_request("g", ("t", 0, 99), ("t", 1, 99))
    req.partitions[1].metadata = "long"
    reply = env.offsets.commit_offsets(req)
    env.log.fail(ErrorCode.not_enough_replicas)  # an unmapped storage error is mapped as Kafka does
    assert reply.result().partitions == [
        PartitionError("t", 0, ErrorCode.coordinator_not_available),
        PartitionError("t", 1, ErrorCode.offset_metadata_too_large),
    ]
    assert env.offsets.committed("g")[("t", 0)].offset == 1
    assert not env.offsets.pending("g")
    assert env.log.take() == []


def test_failed_write_with_coordinator_not_available() -> None:
    env = Env(auto_commit=False)
    reply = env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 1)))
    env.log.fail()
    assert errors(reply.result()) == [ErrorCode.coordinator_not_available]
    assert env.log.take() == []
    assert env.groups.group("g") is None
    assert not env.offsets.committed("g")


def test_commits_apply_in_log_order() -> None:
    env = Env(auto_commit=False)
    first = env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 1)))
    second = env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 2)))
    assert env.offsets.pending("g") == {("t", 0): 2}.keys()
    env.log.commit()
    assert first.done and second.done
    assert env.offsets.committed("g")[("t", 0)].offset == 2
    assert not env.offsets.pending("g")
    assert env.log.take() == [commit("t", 0, 1, T0), commit("t", 0, 2, T0)]


def test_require_stable_fetch_flags_in_flight_commit() -> None:
    env = Env(auto_commit=False)
    env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 1)))
    env.log.commit()
    env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 2)))
    stable = env.offsets.fetch_offsets(OffsetFetchRequest("g", [("t", [0])], require_stable=True))
    assert stable.partitions == [FetchedOffset("t", 0, -1, -1, "", ErrorCode.unstable_offset_commit)]
    assert env.fetch("g", [("t", [0])]) == [FetchedOffset("t", 0, 1)]
    env.log.commit()
    stable = env.offsets.fetch_offsets(OffsetFetchRequest("g", [("t", [0])], require_stable=True))
    assert stable.partitions == [FetchedOffset("t", 0, 2)]


def test_empty_commit_request_writes_nothing(env: Env) -> None:
    assert env.commit("g").partitions == []
    assert env.log.take() == []


# ------------------------------------------------------------------------------------------------------ OffsetFetch


def test_fetch_unknown_group_answers_minus_one(env: Env) -> None:
    assert env.fetch("unknown", [("t", [0, 1]), ("u", [2])]) == [
        FetchedOffset("t", 0, -1, -1, "", ErrorCode.none),
        FetchedOffset("t", 1, -1, -1, "", ErrorCode.none),
        FetchedOffset("u", 2, -1, -1, "", ErrorCode.none),
    ]
    assert env.fetch("unknown", None) == []


def test_fetch_dead_group_answers_minus_one(env: Env) -> None:
    env.commit("g", ("t", 0, 5))
    group = env.groups.group("g")
    assert group is not None
    group.transition_to(GroupState.DEAD, T0)
    assert env.fetch("g", [("t", [0])]) == [FetchedOffset("t", 0)]
    assert env.fetch("g", None) == []


def test_fetch_single_partitions_and_all(env: Env) -> None:
    req = env.commit_request("g", ("b", 1, 11), ("a", 0, 10), metadata="meta")
    req.partitions[0].leader_epoch = 3
    env.offsets.commit_offsets(req)
    env.commit("other", ("a", 0, 99))
    # explicit partitions: request order, unknown partition -> -1
    assert env.fetch("g", [("a", [0, 5]), ("b", [1])]) == [
        FetchedOffset("a", 0, 10, -1, "meta"),
        FetchedOffset("a", 5, -1, -1, ""),
        FetchedOffset("b", 1, 11, 3, "meta"),
    ]
    # topics None: every committed offset of this group only, in the order first committed (not sorted: the
    # answer is built lazily, in slices; Kafka answers in its map's order too)
    assert env.fetch("g", None) == [FetchedOffset("b", 1, 11, 3, "meta"), FetchedOffset("a", 0, 10, -1, "meta")]


def test_fetch_all_is_a_snapshot_built_as_it_is_read(env: Env) -> None:
    """A fetch of everything copies the group's offsets when it is taken: a commit that lands while the answer is
    being encoded (in slices) does not change it, and nothing is converted until the entries are read."""
    env.commit("g", ("t", 0, 1), ("t", 1, 2))
    result = env.offsets.fetch_offsets(OffsetFetchRequest("g", None))
    assert len(result.partitions) == 2
    env.commit("g", ("t", 0, 100), ("u", 0, 7))
    assert list(result.partitions) == [FetchedOffset("t", 0, 1), FetchedOffset("t", 1, 2)]
    assert env.fetch("g", None) == [FetchedOffset("t", 0, 100), FetchedOffset("t", 1, 2), FetchedOffset("u", 0, 7)]


def test_fetch_grouped_form_is_one_call_per_group(env: Env) -> None:
    """OffsetFetch v8+ carries several groups; the adapter calls the core once per group."""
    env.commit("g1", ("t", 0, 1))
    env.commit("g2", ("t", 0, 2))
    results = [env.offsets.fetch_offsets(OffsetFetchRequest(g, None)) for g in ("g1", "g2", "g3")]
    assert [(r.group_id, r.error, list(r.partitions)) for r in results] == [
        ("g1", ErrorCode.none, [FetchedOffset("t", 0, 1)]),
        ("g2", ErrorCode.none, [FetchedOffset("t", 0, 2)]),
        ("g3", ErrorCode.none, []),
    ]


def test_fetch_returns_offsets_in_any_state(env: Env) -> None:
    group = add_group(env.groups, "g", GroupState.STABLE, member("m1", "t"), generation=1)
    env.commit("g", ("t", 0, 7), generation=1, member_id="m1")
    group.transition_to(GroupState.PREPARING_REBALANCE, T0)
    assert env.fetch("g", [("t", [0])]) == [FetchedOffset("t", 0, 7)]


def test_committed_view_is_read_only(env: Env) -> None:
    env.commit("g", ("t", 0, 1))
    view = env.offsets.committed("g")
    with pytest.raises(TypeError):
        view[("t", 1)] = OffsetAndMetadata(1, -1, "", 0, None)  # type: ignore[index]
    assert dict(env.offsets.committed("missing")) == {}


# ----------------------------------------------------------------------------------------------------- OffsetDelete


def test_offset_delete_unknown_or_dead_group(env: Env) -> None:
    assert env.offsets.delete_offsets(OffsetDeleteRequest("nope", [("t", 0)])).result().error is (
        ErrorCode.group_id_not_found
    )
    add_group(env.groups, "dead", GroupState.DEAD)
    result = env.offsets.delete_offsets(OffsetDeleteRequest("dead", [("t", 0)])).result()
    assert (result.error, result.partitions) == (ErrorCode.group_id_not_found, [])
    assert env.log.take() == []


def test_offset_delete_non_empty_non_consumer_group(env: Env) -> None:
    add_group(env.groups, "g", GroupState.STABLE, member("m1", protocol_type="connect"))
    result = env.offsets.delete_offsets(OffsetDeleteRequest("g", [("t", 0)])).result()
    assert (result.error, result.partitions) == (ErrorCode.non_empty_group, [])
    assert env.log.take() == []


def test_offset_delete_empty_group_deletes_and_writes_tombstones(env: Env) -> None:
    env.commit("g", ("t", 0, 1), ("t", 1, 2), ("u", 0, 3))
    env.log.take()
    env.clock.set(T0 + 10)
    result = env.offsets.delete_offsets(OffsetDeleteRequest("g", [("t", 0), ("t", 5), ("u", 0)])).result()
    assert result.error is ErrorCode.none
    assert result.partitions == [
        PartitionError("t", 0, ErrorCode.none),
        PartitionError("t", 5, ErrorCode.none),  # nothing existed: still NONE, no tombstone
        PartitionError("u", 0, ErrorCode.none),
    ]
    assert env.log.take() == [
        OffsetTombstone("g", "t", 0, OffsetRemovalCause.DELETED, T0 + 10),
        OffsetTombstone("g", "u", 0, OffsetRemovalCause.DELETED, T0 + 10),
    ]
    assert list(env.offsets.committed("g")) == [("t", 1)]


def test_offset_delete_stable_consumer_group_protects_subscribed_topics(env: Env) -> None:
    add_group(env.groups, "g", GroupState.STABLE, member("m1", "subscribed"), generation=1)
    env.commit("g", ("subscribed", 0, 1), ("gone", 0, 2), generation=1, member_id="m1")
    env.log.take()
    result = env.offsets.delete_offsets(OffsetDeleteRequest("g", [("subscribed", 0), ("gone", 0)])).result()
    assert result.partitions == [
        PartitionError("subscribed", 0, ErrorCode.group_subscribed_to_topic),
        PartitionError("gone", 0, ErrorCode.none),
    ]
    assert env.log.take() == [offset_tombstone("gone", 0, T0)]
    assert list(env.offsets.committed("g")) == [("subscribed", 0)]


def test_offset_delete_consumer_group_with_unparsable_subscription_protects_everything(env: Env) -> None:
    m = member("m1", "t")
    m.protocols = [("range", b"\x00")]  # not a ConsumerProtocolSubscription
    add_group(env.groups, "g", GroupState.STABLE, m, generation=1)
    result = env.offsets.delete_offsets(OffsetDeleteRequest("g", [("any", 0)])).result()
    assert result.partitions == [PartitionError("any", 0, ErrorCode.group_subscribed_to_topic)]
    assert env.log.take() == []


def test_offset_delete_waits_for_durability_and_reports_write_failure() -> None:
    env = Env(auto_commit=False)
    env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 1)))
    env.log.commit()
    reply = env.offsets.delete_offsets(OffsetDeleteRequest("g", [("t", 0)]))
    assert not reply.done
    assert list(env.offsets.committed("g")) == [("t", 0)]
    env.log.take()
    env.log.fail()
    assert (reply.result().error, reply.result().partitions) == (ErrorCode.coordinator_not_available, [])
    assert list(env.offsets.committed("g")) == [("t", 0)]
    assert env.log.take() == []
    ok = env.offsets.delete_offsets(OffsetDeleteRequest("g", [("t", 0)]))
    env.log.commit()
    assert ok.result().error is ErrorCode.none
    assert not env.offsets.committed("g")
    assert env.log.take() == [offset_tombstone("t", 0, T0)]


def test_offset_delete_tombstones_in_flight_commit() -> None:
    env = Env(auto_commit=False)
    env.offsets.commit_offsets(env.commit_request("g", ("t", 0, 1)))
    env.log.commit()
    env.log.take()
    env.offsets.commit_offsets(env.commit_request("g", ("t", 1, 5)))  # in flight
    env.offsets.delete_offsets(OffsetDeleteRequest("g", [("t", 1)]))
    env.log.commit()
    # the tombstone was appended after the commit, so the partition ends up deleted, as a replay would
    assert list(env.offsets.committed("g")) == [("t", 0)]
    assert env.log.take() == [commit("t", 1, 5, T0), offset_tombstone("t", 1, T0)]


# ------------------------------------------------------------------------------------------------------------ replay


def test_replay_commit_and_tombstone(env: Env) -> None:
    env.offsets.replay(OffsetCommitRecord("g", "t", 0, 5, 2, "m", 100, 200, "x", 3))
    group = env.groups.group("g")
    assert group is not None and group.is_simple_group()
    assert env.offsets.committed("g")[("t", 0)] == OffsetAndMetadata(5, 2, "m", 100, 200)
    env.offsets.replay(OffsetTombstone("g", "t", 0, OffsetRemovalCause.DELETED, 300))
    assert not env.offsets.committed("g")
    assert "g" not in env.offsets.group_ids()
    env.offsets.replay(OffsetTombstone("g", "t", 0, OffsetRemovalCause.DELETED, 300))  # idempotent
