"""The group-type seam (``coordinator.group_type``): a second group type served beside the classic one.

The second type here is the test's fixture, not the thing under test: a stub "consumer" group (KIP-848-like state
names, member epochs instead of generations) that only implements the ``Group`` Protocol and registers its groups in
the real coordinator's ``GroupDirectory``. What is under test are the shared services, all real: ListGroups (with
and without filters), DescribeGroups, OffsetCommit / OffsetFetch / OffsetDelete validation, DeleteGroups and the
retention pass, each serving classic and stub groups side by side through the directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coordinator.group_coordinator import GroupCoordinator
from coordinator.group_type import BaseTimestamp, FinishRemoval, commit_time
from coordinator.messages import (
    DeleteGroupResult,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    ListedGroup,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    PartitionError,
)
from coordinator.record_log import WriteFailure
from coordinator.records import GroupRemovalCause, OffsetRemovalCause
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group
from tests.core.expected import commit as commit_record
from tests.core.expected import group_tombstone, offset_tombstone
from tests.core.test_coordinator import commit, commit_request, errors, fetch, make_coordinator

CONSUMER = "consumer"


# ------------------------------------------------------------------------------------ the fixture: a second type


@dataclass(eq=False)
class StubConsumerGroup:
    """A minimal KIP-848-like group: states Empty/Assigning/Reconciling/Stable/Dead, members with epochs."""

    group_id: str
    state: str = "Empty"
    members: dict[str, int] = field(default_factory=dict)  # member id -> member epoch
    subscribed: frozenset[str] = frozenset()
    fetch_error: ErrorCode = ErrorCode.none  # what validate_offset_fetch answers (a stand-in for its own rules)
    protocol_type: str | None = CONSUMER

    @property
    def group_type(self) -> str:
        return CONSUMER

    @property
    def state_name(self) -> str:
        return self.state

    @property
    def state_lower(self) -> str:
        return self.state.lower()

    def is_empty(self) -> bool:
        return self.state == "Empty"

    def validate_delete(self) -> ErrorCode:
        if self.state == "Dead":
            return ErrorCode.group_id_not_found
        return ErrorCode.none if self.is_empty() else ErrorCode.non_empty_group

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, CONSUMER, self.state, CONSUMER)

    def described(self) -> DescribedGroup:
        members = [DescribedMember(m, None, "stub-client", "/10.0.0.1", b"", b"") for m in self.members]
        return DescribedGroup(self.group_id, ErrorCode.none, self.state, CONSUMER, "", members)

    def validate_offset_commit(
        self, member_id: str, generation_or_epoch: int, instance_id: str | None, api_version: int
    ) -> ErrorCode:
        if self.state == "Dead":
            return ErrorCode.coordinator_not_available
        if generation_or_epoch < 0 and not member_id and self.is_empty():
            return ErrorCode.none  # an admin commit
        epoch = self.members.get(member_id)
        if epoch is None:
            return ErrorCode.unknown_member_id
        if generation_or_epoch != epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_offset_fetch(self) -> ErrorCode:
        return ErrorCode.group_id_not_found if self.state == "Dead" else self.fetch_error

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.group_id_not_found if self.state == "Dead" else ErrorCode.none

    def is_subscribed_to(self, topic: str) -> bool:
        return not self.is_empty() and topic in self.subscribed

    def offset_expiration_base(self) -> BaseTimestamp | None:
        return commit_time if self.state in ("Empty", "Stable") else None


class StubConsumerGroups:
    """The stub type's groups, as the directory sees them; removals are recorded and undone on a failed write."""

    def __init__(self) -> None:
        self.groups: dict[str, StubConsumerGroup] = {}
        self.finished: list[tuple[str, bool]] = []

    @property
    def groups_by_id(self) -> Mapping[str, StubConsumerGroup]:
        return self.groups

    def add(self, group: StubConsumerGroup) -> StubConsumerGroup:
        self.groups[group.group_id] = group
        return group

    def remove_group(self, group_id: str) -> FinishRemoval | None:
        group = self.groups.pop(group_id, None)
        if group is None:
            return None

        def finish(written: bool) -> None:
            self.finished.append((group_id, written))
            if not written:
                self.groups.setdefault(group_id, group)

        return finish


def side_by_side(*, auto_commit: bool = True) -> tuple[Env, GroupCoordinator, StubConsumerGroups]:
    """Classic: 'c-stable' (two members, Stable) and 'c-simple' (offsets only, Empty). Stub consumer groups:
    'k-stable' (member m1 at epoch 5, subscribed to 'orders'), 'k-reconciling' and 'k-empty'."""
    env, coord = make_coordinator(auto_commit=auto_commit)
    form_stable_group(env, "c-stable", 2)
    reply = coord.commit_offsets(commit_request("c-simple", ("t", 0, 1)))
    if not auto_commit:
        env.log.commit()
    assert errors(reply.result()) == [ErrorCode.none]
    stubs = StubConsumerGroups()
    coord.directory.register(stubs)
    stubs.add(StubConsumerGroup("k-stable", "Stable", {"m1": 5}, frozenset({"orders"})))
    stubs.add(StubConsumerGroup("k-reconciling", "Reconciling", {"m2": 3, "m3": 4}))
    stubs.add(StubConsumerGroup("k-empty"))
    env.take()
    return env, coord, stubs


# ------------------------------------------------------------------------------------------------------ ListGroups


def test_list_groups_serves_both_types() -> None:
    _, coord, _ = side_by_side()
    everything = [
        ListedGroup("c-simple", "", "Empty", "classic"),
        ListedGroup("c-stable", "consumer", "Stable", "classic"),
        ListedGroup("k-empty", CONSUMER, "Empty", CONSUMER),
        ListedGroup("k-reconciling", CONSUMER, "Reconciling", CONSUMER),
        ListedGroup("k-stable", CONSUMER, "Stable", CONSUMER),
    ]
    assert coord.list_groups(None, None) == everything
    assert coord.list_groups([], []) == everything
    assert coord.list_groups(None, ["Classic", "CONSUMER"]) == everything


def test_list_groups_type_filter_picks_a_type() -> None:
    _, coord, _ = side_by_side()
    assert [g.group_id for g in coord.list_groups(None, ["classic"])] == ["c-simple", "c-stable"]
    assert [g.group_id for g in coord.list_groups(None, ["Consumer"])] == ["k-empty", "k-reconciling", "k-stable"]
    assert coord.list_groups(None, ["share"]) == []


def test_list_groups_state_filter_spans_types_and_uses_each_types_states() -> None:
    _, coord, _ = side_by_side()
    assert [g.group_id for g in coord.list_groups(["stable"], None)] == ["c-stable", "k-stable"]
    assert [g.group_id for g in coord.list_groups([" EMPTY"], None)] == ["c-simple", "k-empty"]
    assert [g.group_id for g in coord.list_groups(["reconciling"], None)] == ["k-reconciling"]
    assert [g.group_id for g in coord.list_groups(["empty"], ["consumer"])] == ["k-empty"]
    assert coord.list_groups(["reconciling"], ["classic"]) == []


# -------------------------------------------------------------------------------------------------- DescribeGroups


def test_describe_groups_serves_both_types() -> None:
    env, coord, _ = side_by_side()
    classic, reconciling, unknown = coord.describe_groups(["c-stable", "k-reconciling", "nope"])
    assert (classic.state, classic.protocol_type, classic.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in classic.members] == list(env.group("c-stable").members)
    assert reconciling == DescribedGroup(
        "k-reconciling",
        ErrorCode.none,
        "Reconciling",
        CONSUMER,
        "",
        [
            DescribedMember("m2", None, "stub-client", "/10.0.0.1", b"", b""),
            DescribedMember("m3", None, "stub-client", "/10.0.0.1", b"", b""),
        ],
    )
    assert unknown == DescribedGroup("nope", ErrorCode.none, "Dead")


# ------------------------------------------------------------------------------------------------------ offsets


def test_offset_commit_is_validated_by_the_groups_type() -> None:
    env, coord, _ = side_by_side()
    stable = form_stable_group(env, "c-stable2", 1)
    env.take()
    at = env.now()
    # The stub type's rules: member epochs.
    assert errors(commit(coord, "k-stable", ("orders", 0, 7), generation=5, member_id="m1")) == [ErrorCode.none]
    assert errors(commit(coord, "k-stable", ("orders", 0, 8), generation=4, member_id="m1")) == [
        ErrorCode.stale_member_epoch
    ]
    assert errors(commit(coord, "k-stable", ("orders", 0, 8), generation=5, member_id="mX")) == [
        ErrorCode.unknown_member_id
    ]
    assert errors(commit(coord, "k-stable", ("orders", 0, 8))) == [ErrorCode.unknown_member_id]  # not empty
    assert errors(commit(coord, "k-empty", ("orders", 1, 2))) == [ErrorCode.none]  # an admin commit
    # The classic rules beside them (C5: a generation, not an epoch).
    leader = stable.leader
    assert errors(commit(coord, "c-stable2", ("t", 0, 9), generation=stable.generation, member_id=leader)) == [
        ErrorCode.none
    ]
    assert errors(commit(coord, "c-stable2", ("t", 0, 9), generation=5, member_id=leader)) == [
        ErrorCode.illegal_generation
    ]
    assert env.take() == [
        commit_record("orders", 0, 7, at, group="k-stable", member_id="m1", generation=5),
        commit_record("orders", 1, 2, at, group="k-empty"),
        commit_record("t", 0, 9, at, group="c-stable2", member_id=leader, generation=stable.generation),
    ]
    assert fetch(coord, "k-stable", None) == [FetchedOffset("orders", 0, 7, -1, "", ErrorCode.none)]
    assert fetch(coord, "k-empty", [("orders", [1, 2])]) == [
        FetchedOffset("orders", 1, 2, -1, "", ErrorCode.none),
        FetchedOffset("orders", 2),
    ]
    assert fetch(coord, "c-stable2", [("t", [0])]) == [FetchedOffset("t", 0, 9, -1, "", ErrorCode.none)]


def test_offset_fetch_is_validated_by_the_groups_type() -> None:
    _, coord, stubs = side_by_side()
    assert errors(commit(coord, "k-empty", ("orders", 0, 3))) == [ErrorCode.none]
    assert fetch(coord, "k-empty", [("orders", [0])]) == [FetchedOffset("orders", 0, 3, -1, "", ErrorCode.none)]
    stubs.groups["k-empty"].fetch_error = ErrorCode.stale_member_epoch  # a group-level refusal of its own
    result = coord.fetch_offsets(OffsetFetchRequest("k-empty", [("orders", [0])]))
    assert (result.error, list(result.partitions)) == (ErrorCode.stale_member_epoch, [])
    stubs.groups["k-empty"].state = "Dead"  # GROUP_ID_NOT_FOUND: answered like an absent group
    assert fetch(coord, "k-empty", [("orders", [0])]) == [FetchedOffset("orders", 0)]
    assert fetch(coord, "c-simple", [("t", [0])]) == [FetchedOffset("t", 0, 1, -1, "", ErrorCode.none)]


def test_offset_delete_asks_the_groups_type_about_subscriptions() -> None:
    env, coord, _ = side_by_side()
    assert errors(commit(coord, "k-stable", ("orders", 0, 7), ("audit", 0, 1), generation=5, member_id="m1")) == [
        ErrorCode.none,
        ErrorCode.none,
    ]
    env.take()
    at = env.now()
    reply = coord.delete_offsets(OffsetDeleteRequest("k-stable", [("orders", 0), ("audit", 0)]))
    assert reply.result().error is ErrorCode.none
    assert reply.result().partitions == [
        PartitionError("orders", 0, ErrorCode.group_subscribed_to_topic),
        PartitionError("audit", 0, ErrorCode.none),
    ]
    assert env.take() == [offset_tombstone("audit", 0, at, group="k-stable")]
    assert fetch(coord, "k-stable", None) == [FetchedOffset("orders", 0, 7, -1, "", ErrorCode.none)]
    # The classic rules beside them: a Stable consumer-protocol group whose subscriptions cannot be read counts as
    # subscribed to every topic.
    classic = coord.delete_offsets(OffsetDeleteRequest("c-stable", [("x", 0)])).result()
    assert (classic.error, classic.partitions) == (
        ErrorCode.none,
        [PartitionError("x", 0, ErrorCode.group_subscribed_to_topic)],
    )
    assert coord.delete_offsets(OffsetDeleteRequest("nope", [("x", 0)])).result().error is ErrorCode.group_id_not_found


# ------------------------------------------------------------------------------------------------ DeleteGroups


def test_delete_groups_serves_both_types() -> None:
    env, coord, stubs = side_by_side()
    assert errors(commit(coord, "k-empty", ("orders", 0, 3))) == [ErrorCode.none]
    env.take()
    at = env.now()
    reply = coord.delete_groups(["k-empty", "k-stable", "c-simple", "c-stable", "nope"])
    assert reply.result() == [
        DeleteGroupResult("k-empty", ErrorCode.none),
        DeleteGroupResult("k-stable", ErrorCode.non_empty_group),
        DeleteGroupResult("c-simple", ErrorCode.none),
        DeleteGroupResult("c-stable", ErrorCode.non_empty_group),
        DeleteGroupResult("nope", ErrorCode.group_id_not_found),
    ]
    assert env.take() == [
        offset_tombstone("orders", 0, at, cause=OffsetRemovalCause.GROUP_DELETED, group="k-empty"),
        group_tombstone(at, group="k-empty"),
        offset_tombstone("t", 0, at, cause=OffsetRemovalCause.GROUP_DELETED, group="c-simple"),
        group_tombstone(at, group="c-simple"),
    ]
    assert stubs.finished == [("k-empty", True)]
    assert coord.directory.group("k-empty") is None and coord.directory.group("c-simple") is None
    assert [g.group_id for g in coord.list_groups(None, None)] == ["c-stable", "k-reconciling", "k-stable"]
    assert fetch(coord, "k-empty", None) == []


def test_failed_delete_restores_groups_of_both_types() -> None:
    env, coord, stubs = side_by_side(auto_commit=False)
    reply = coord.delete_groups(["k-empty", "c-simple"])
    assert coord.directory.group("k-empty") is None and coord.directory.group("c-simple") is None  # at once
    env.log.fail(WriteFailure.UNAVAILABLE)
    assert [r.error for r in reply.result()] == [ErrorCode.coordinator_not_available] * 2
    assert stubs.finished == [("k-empty", False)]
    assert [g.group_id for g in coord.list_groups(["empty"], None)] == ["c-simple", "k-empty"]


# --------------------------------------------------------------------------------------------------- retention


def test_retention_expires_offsets_and_empty_groups_of_both_types() -> None:
    env, coord, stubs = side_by_side()
    assert errors(commit(coord, "k-empty", ("orders", 0, 3))) == [ErrorCode.none]
    assert errors(commit(coord, "k-stable", ("orders", 0, 7), ("audit", 0, 1), generation=5, member_id="m1")) == [
        ErrorCode.none,
        ErrorCode.none,
    ]
    assert errors(commit(coord, "k-reconciling", ("orders", 5, 1), generation=3, member_id="m2")) == [ErrorCode.none]
    env.take()
    now = env.now() + coord.config.offsets_retention_ms
    env.clock.set(now)  # no timer fires: the classic members keep their sessions
    coord.retention.run_once()
    assert env.take() == [
        # classic: the simple group's offset (by commit time), then the group
        offset_tombstone("t", 0, now, cause=OffsetRemovalCause.EXPIRED, group="c-simple"),
        group_tombstone(now, cause=GroupRemovalCause.EXPIRED, group="c-simple"),
        # stub (in registration order): a Stable group keeps its subscribed topic's offsets, a Reconciling one
        # expires nothing (its type says so), an Empty one goes with its offsets
        offset_tombstone("audit", 0, now, cause=OffsetRemovalCause.EXPIRED, group="k-stable"),
        offset_tombstone("orders", 0, now, cause=OffsetRemovalCause.EXPIRED, group="k-empty"),
        group_tombstone(now, cause=GroupRemovalCause.EXPIRED, group="k-empty"),
    ]
    assert stubs.finished == [("k-empty", True)]
    assert sorted(stubs.groups) == ["k-reconciling", "k-stable"]
    assert fetch(coord, "k-stable", None) == [FetchedOffset("orders", 0, 7, -1, "", ErrorCode.none)]
