"""ListGroups, DescribeGroups, DeleteGroups through the coordinator facade and the real GroupManager."""

from __future__ import annotations

from coordinator.group import GroupState
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import (
    DeleteGroupResult,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    ListedGroup,
)
from coordinator.records import (
    GroupRemovalCause,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
)
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, join_new, leave
from tests.core.test_coordinator import commit, commit_request, fetch, make_coordinator


def three_groups() -> tuple[Env, GroupCoordinator]:
    """'stable' (consumer, Stable), 'simple' (offsets only, Empty), 'joining' (new group in PreparingRebalance)."""
    env, coord = make_coordinator()
    form_stable_group(env, "stable", 2)
    commit(coord, "simple", ("t", 0, 1))
    join_new(env.gm, "joining", protocol_type="connect")
    assert env.group("joining").state is GroupState.PREPARING_REBALANCE
    return env, coord


# ------------------------------------------------------------------------------------------------------ ListGroups


def test_list_groups_all() -> None:
    _, coord = three_groups()
    assert coord.list_groups(None, None) == [
        ListedGroup("joining", "connect", "PreparingRebalance", "classic"),
        ListedGroup("simple", "", "Empty", "classic"),
        ListedGroup("stable", "consumer", "Stable", "classic"),
    ]
    assert coord.list_groups([], []) == coord.list_groups(None, None)


def test_list_groups_with_state_filter() -> None:
    _, coord = three_groups()
    assert [g.group_id for g in coord.list_groups(["Stable"], None)] == ["stable"]
    assert [g.group_id for g in coord.list_groups(["  EMPTY ", "preparingrebalance"], None)] == ["joining", "simple"]
    assert coord.list_groups(["NoSuchState"], None) == []
    assert coord.list_groups(["completingrebalance"], None) == []


def test_list_groups_with_type_filter() -> None:
    _, coord = three_groups()
    assert len(coord.list_groups(None, ["Classic"])) == 3
    assert len(coord.list_groups(None, ["consumer", "CLASSIC"])) == 3
    assert coord.list_groups(None, ["consumer"]) == []
    assert coord.list_groups(None, ["bogus"]) == []
    assert coord.list_groups(None, [" classic"]) == []  # type names are not trimmed
    assert [g.group_id for g in coord.list_groups(["stable"], ["classic"])] == ["stable"]


# -------------------------------------------------------------------------------------------------- DescribeGroups


def test_describe_unknown_group_answers_dead() -> None:
    _, coord = make_coordinator()
    assert coord.describe_groups(["nope"]) == [DescribedGroup("nope", ErrorCode.none, "Dead", "", "", [])]


def test_describe_null_group_id_is_invalid() -> None:
    _, coord = make_coordinator()
    [described] = coord.describe_groups([None])
    assert described.error is ErrorCode.invalid_group_id


def test_describe_stable_group_shows_protocol_and_member_metadata() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 2)
    [described] = coord.describe_groups(["g"])
    assert (described.error, described.state, described.protocol_type, described.protocol_data) == (
        ErrorCode.none,
        "Stable",
        "consumer",
        "range",
    )
    assert described.members == [
        DescribedMember(m, None, f"c{i}", "/127.0.0.1", b"range-meta", g.assignments[m])
        for i, m in enumerate(g.member_ids)
    ]


def test_describe_rebalancing_group_has_no_metadata_but_keeps_assignments() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 2)
    join_new(env.gm, "g", client_id="newcomer")
    [described] = coord.describe_groups(["g"])
    assert (described.state, described.protocol_type, described.protocol_data) == ("PreparingRebalance", "consumer", "")
    by_id = {m.member_id: m for m in described.members}
    assert all(by_id[m].metadata == b"" and by_id[m].assignment == g.assignments[m] for m in g.member_ids)
    assert len(by_id) == 3


def test_describe_several_groups_in_request_order() -> None:
    _, coord = three_groups()
    assert [(d.group_id, d.state) for d in coord.describe_groups(["simple", "x", "stable"])] == [
        ("simple", "Empty"),
        ("x", "Dead"),
        ("stable", "Stable"),
    ]


# ---------------------------------------------------------------------------------------------------- DeleteGroups


def test_delete_groups_empty_only_else_non_empty_group() -> None:
    env, coord = three_groups()
    env.take()
    env.clock.set(env.now() + 5)
    now = env.now()
    result = coord.delete_groups(["stable", "simple", "joining", "missing"]).result()
    assert result == [
        DeleteGroupResult("stable", ErrorCode.non_empty_group),
        DeleteGroupResult("simple", ErrorCode.none),
        DeleteGroupResult("joining", ErrorCode.non_empty_group),
        DeleteGroupResult("missing", ErrorCode.group_id_not_found),
    ]
    assert env.take() == [
        OffsetTombstone("simple", "t", 0, OffsetRemovalCause.GROUP_DELETED, now),
        GroupTombstone("simple", GroupRemovalCause.DELETED, now),
    ]
    assert coord.groups.group("simple") is None
    assert not coord.offsets.committed("simple")
    assert fetch(coord, "simple", [("t", [0])]) == [FetchedOffset("t", 0)]
    assert coord.groups.group("stable") is not None and coord.groups.group("joining") is not None


def test_delete_group_that_became_empty_removes_offsets_and_group() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 2)
    commit(coord, "g", ("a", 0, 1), ("b", 1, 2), generation=g.generation, member_id=g.leader)
    leave(env.gm, "g", *g.member_ids)
    assert env.group("g").state is GroupState.EMPTY
    env.take()
    assert coord.delete_groups(["g"]).result() == [DeleteGroupResult("g", ErrorCode.none)]
    now = env.now()
    assert env.take() == [
        OffsetTombstone("g", "a", 0, OffsetRemovalCause.GROUP_DELETED, now),
        OffsetTombstone("g", "b", 1, OffsetRemovalCause.GROUP_DELETED, now),
        GroupTombstone("g", GroupRemovalCause.DELETED, now),
    ]
    assert coord.describe_groups(["g"])[0].state == "Dead"
    assert coord.list_groups(None, None) == []


def test_delete_groups_deduplicates_and_rejects_null() -> None:
    env, coord = make_coordinator()
    commit(coord, "a", ("t", 0, 1))
    env.take()
    result = coord.delete_groups(["a", None, "a", "b", "b"]).result()
    assert result == [
        DeleteGroupResult("a", ErrorCode.none),
        DeleteGroupResult("", ErrorCode.invalid_group_id),
        DeleteGroupResult("b", ErrorCode.group_id_not_found),
    ]
    now = env.now()
    assert env.take() == [  # "a" once
        OffsetTombstone("a", "t", 0, OffsetRemovalCause.GROUP_DELETED, now),
        GroupTombstone("a", GroupRemovalCause.DELETED, now),
    ]


def test_delete_groups_resolves_only_when_durable() -> None:
    env, coord = make_coordinator(auto_commit=False)
    coord.commit_offsets(commit_request("a", ("t", 0, 1)))
    env.log.commit()
    env.take()
    reply = coord.delete_groups(["a"])
    assert not reply.done
    assert coord.groups.group("a") is None  # the group goes at once, as every group change applies at once
    assert coord.offsets.committed("a")  # offsets go once their tombstones are durable, as every offset change
    env.log.commit()
    assert reply.result() == [DeleteGroupResult("a", ErrorCode.none)]
    assert coord.groups.group("a") is None
    assert not coord.offsets.committed("a")
    now = env.now()
    assert env.take() == [
        OffsetTombstone("a", "t", 0, OffsetRemovalCause.GROUP_DELETED, now),
        GroupTombstone("a", GroupRemovalCause.DELETED, now),
    ]


def test_delete_groups_write_failure_keeps_group_and_maps_error() -> None:
    env, coord = make_coordinator(auto_commit=False)
    coord.commit_offsets(commit_request("a", ("t", 0, 1)))
    env.log.commit()
    env.take()
    reply = coord.delete_groups(["a", "missing"])
    env.log.fail(ErrorCode.not_leader_or_follower)
    assert env.take() == []
    assert reply.result() == [
        DeleteGroupResult("a", ErrorCode.not_coordinator),
        DeleteGroupResult("missing", ErrorCode.group_id_not_found),
    ]
    assert coord.groups.group("a") is not None
    assert fetch(coord, "a", None) == [FetchedOffset("t", 0, 1)]


def test_delete_groups_tombstones_in_flight_commits() -> None:
    env, coord = make_coordinator(auto_commit=False)
    coord.commit_offsets(commit_request("a", ("t", 0, 1)))
    env.log.commit()
    env.take()
    in_flight = coord.commit_offsets(commit_request("a", ("t", 1, 2)))
    reply = coord.delete_groups(["a"])
    env.log.commit()
    assert in_flight.result().partitions[0].error is ErrorCode.none
    assert reply.result() == [DeleteGroupResult("a", ErrorCode.none)]
    now = env.now()
    assert env.take() == [
        OffsetCommitRecord("a", "t", 1, 2, -1, "", now, None, "", -1),
        OffsetTombstone("a", "t", 0, OffsetRemovalCause.GROUP_DELETED, now),
        OffsetTombstone("a", "t", 1, OffsetRemovalCause.GROUP_DELETED, now),
        GroupTombstone("a", GroupRemovalCause.DELETED, now),
    ]
    assert coord.groups.group("a") is None
    assert not coord.offsets.committed("a")


def test_deleted_group_can_be_recreated_by_join() -> None:
    env, coord = make_coordinator()
    g = form_stable_group(env, "g", 1)
    leave(env.gm, "g", g.leader)
    assert coord.delete_groups(["g"]).result() == [DeleteGroupResult("g", ErrorCode.none)]
    again = form_stable_group(env, "g", 1)
    assert again.generation == 1
    assert coord.describe_groups(["g"])[0].state == "Stable"
