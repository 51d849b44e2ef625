"""Replaying the record log rebuilds the same groups and offsets (the load path), and skips what it does not know."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from coordinator.group import GroupState
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import OffsetCommitPartition, OffsetDeleteRequest
from coordinator.records import (
    GroupRemovalCause,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
    RebalanceStarted,
    Record,
    is_state_record,
    new_empty_group_record,
)
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, join, join_new, leave, sync
from tests.core.test_coordinator import commit, commit_request, make_coordinator, subscription

RETENTION = 100_000


def snapshot(coord: GroupCoordinator) -> tuple[dict[str, Any], dict[str, Any]]:
    """Everything Kafka persists about groups and offsets, as plain values."""
    groups: dict[str, Any] = {}
    for g in coord.groups.all_groups():
        groups[g.group_id] = {
            "state": g.state,
            # a simple group's timestamp is its creation time in memory (unused: its offsets expire by commit time)
            "state_timestamp": g.state_timestamp_ms if g.protocol_type is not None else None,
            "generation": g.generation_id,
            "protocol_type": g.protocol_type,
            "protocol": g.protocol_name,
            "leader": g.leader_id,
            "static": dict(g.static_members),
            "subscribed": g.subscribed_topics,
            "members": {
                m.member_id: (
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout_ms,
                    m.rebalance_timeout_ms,
                    m.assignment,
                    m.metadata_or_empty(g.protocol_name),
                )
                for m in g.members.values()
            },
        }
    offsets = {gid: dict(coord.offsets.committed(gid)) for gid in set(groups) | set(coord.offsets.group_ids())}
    return groups, {k: v for k, v in offsets.items() if v}


def replayed(records: list[Record | object], start_ms: int) -> GroupCoordinator:
    _, fresh = make_coordinator(start_ms=start_ms)
    for record in records:
        fresh.replay(record)
    fresh.on_loaded()
    return fresh


def test_replay_of_the_log_rebuilds_the_same_groups_and_offsets() -> None:
    env, coord = make_coordinator(offsets_retention_ms=RETENTION)
    protocols = [("range", subscription("t"))]
    # a Stable consumer group with member commits, one static member
    g = form_stable_group(env, "stable", 2, protocols=protocols, instance_ids=["i-0", None])
    commit(coord, "stable", ("t", 0, 10), ("t", 1, 11), generation=g.generation, member_id=g.leader)
    # a group that emptied (GroupMetadataRecord without members) but keeps its offsets
    e = form_stable_group(env, "emptied", 1, protocols=protocols)
    commit(coord, "emptied", ("t", 0, 5), generation=e.generation, member_id=e.leader)
    leave(env.gm, "emptied", e.leader)
    # a simple group: admin commits, one overwritten, one deleted
    commit(coord, "simple", ("a", 0, 1), ("a", 1, 2), ("b", 0, 3))
    commit(coord, "simple", ("a", 0, 4), version=2, retention_ms=1_000_000)
    assert coord.delete_offsets(OffsetDeleteRequest("simple", [("b", 0)])).result().partitions[0].error.value == 0
    # a deleted group and an expired one
    commit(coord, "deleted", ("a", 0, 1))
    coord.delete_groups(["deleted"]).result()
    commit(coord, "expired", ("a", 0, 1), version=2, retention_ms=1_000)  # explicit expiry
    env.clock.set(env.now() + 1_000)
    assert [type(r) for r in coord.retention.run_once()] == [OffsetTombstone, GroupTombstone]

    records = list(env.log.records)
    assert any(not is_state_record(r) for r in records)  # history records ride along and must be ignored
    live = snapshot(coord)
    assert set(live[0]) == {"stable", "emptied", "simple"}
    assert live[1]["simple"].keys() == {("a", 0), ("a", 1)}

    fresh = replayed(records, env.now())
    assert snapshot(fresh) == live
    assert fresh.groups.group("stable") is not None
    assert fresh.groups.group("stable").state is GroupState.STABLE  # type: ignore[union-attr]


def test_loading_offset_rows_rebuilds_what_replaying_their_records_does() -> None:
    """Start-up reads the current offsets as rows per group (``GroupCoordinator.load_offsets``): with the group
    records replayed, the rows of the live offsets rebuild the same groups and offsets, simple groups included (each
    group's built when first read)."""
    env, coord = make_coordinator()
    g = form_stable_group(env, "consumers", 2, protocols=[("range", subscription("t"))])
    commit(coord, "consumers", ("t", 0, 10), ("t", 1, 11), generation=g.generation, member_id=g.leader)
    commit(coord, "simple", ("a", 0, 1), ("a", 1, 2))
    commit(coord, "simple", ("a", 0, 4), version=2, retention_ms=1_000_000)
    with_epoch = replace(commit_request("other"), partitions=[OffsetCommitPartition("b", 3, 7, 5, "meta")])
    assert coord.commit_offsets(with_epoch).done  # a leader epoch and metadata, which the rows carry too
    live = snapshot(coord)
    rows = [
        (gid, [
            (topic, partition, o.offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms, o.expire_timestamp_ms)
            for (topic, partition), o in sorted(coord.offsets.committed(gid).items())
        ])
        for gid in sorted(coord.offsets.group_ids())
    ]  # fmt: skip
    assert sum(len(group_rows) for _, group_rows in rows) == 5
    _, fresh = make_coordinator(start_ms=env.now())
    for record in env.log.records:
        if not isinstance(record, OffsetCommitRecord | OffsetTombstone):
            fresh.replay(record)
    fresh.load_offsets(rows)
    fresh.on_loaded()
    assert snapshot(fresh) == live
    assert fresh.groups.group("simple") is not None and fresh.groups.group("other") is not None


def test_rebalance_in_progress_is_not_persisted() -> None:
    """After a reload a group reverts to its last persisted generation (§10.3)."""
    env, _ = make_coordinator()
    join_new(env.gm, "joining", client_id="c")
    assert env.group("joining").state is GroupState.PREPARING_REBALANCE
    fresh = replayed(list(env.log.records), env.now())
    group = fresh.groups.group("joining")
    assert group is not None
    assert (group.state, group.generation_id, group.members) == (GroupState.EMPTY, 0, {})


@dataclass(frozen=True)
class FutureRecord:
    """A record type written by a newer version."""

    group_id: str


def test_unknown_record_type_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    records: list[Record | object] = [
        OffsetCommitRecord("g", "t", 0, 5, -1, "", 100, None, "", -1),
        FutureRecord("g"),
        OffsetCommitRecord("g", "t", 1, 6, -1, "", 100, None, "", -1),
    ]
    with caplog.at_level(logging.WARNING):
        fresh = replayed(records, 1_000)
    assert sorted(fresh.offsets.committed("g")) == [("t", 0), ("t", 1)]
    assert "FutureRecord" in caplog.text


def test_history_records_do_not_create_groups() -> None:
    fresh = replayed([RebalanceStarted("h", 0, "new_member", None, None, None, "Empty", 5)], 1_000)  # type: ignore[arg-type]
    assert fresh.groups.group("h") is None
    assert list(fresh.offsets.group_ids()) == []


def test_offsets_after_a_group_tombstone_recreate_a_simple_group() -> None:
    records: list[Record | object] = [
        new_empty_group_record("g", now_ms=10, protocol_type="consumer", generation_id=3),
        OffsetCommitRecord("g", "t", 0, 5, -1, "", 20, None, "", -1),
        OffsetTombstone("g", "t", 0, OffsetRemovalCause.GROUP_DELETED, 30),
        GroupTombstone("g", GroupRemovalCause.DELETED, 30),
        OffsetCommitRecord("g", "t", 1, 7, -1, "", 40, None, "", -1),
    ]
    fresh = replayed(records, 1_000)
    group = fresh.groups.group("g")
    assert group is not None and group.is_simple_group() and group.generation_id == 0
    assert sorted(fresh.offsets.committed("g")) == [("t", 1)]


def test_group_tombstone_alone_removes_the_group() -> None:
    records: list[Record | object] = [
        new_empty_group_record("g", now_ms=10, protocol_type="consumer", generation_id=1),
        GroupTombstone("g", GroupRemovalCause.EXPIRED, 30),
    ]
    assert replayed(records, 1_000).groups.group("g") is None


# ------------------------------------------------------------------------------- live versus replay, per family
# Each family builds state live through the facade and the harness and returns the groups it must leave behind
# (id -> state) and the groups that must have offsets; the test then replays the whole log into a fresh coordinator
# and compares everything Kafka persists. The expectations make sure a family really built what it names (a
# family whose groups vanished would compare two empty snapshots).
Built = tuple[dict[str, GroupState], set[str]]


def family_new_empty_group(env: Env, coord: GroupCoordinator) -> Built:
    join(env.gm, "new", "")  # MEMBER_ID_REQUIRED: only the "empty group" record of a brand-new group
    return {"new": GroupState.EMPTY}, set()


def family_stable(env: Env, coord: GroupCoordinator) -> Built:
    protocols = [("roundrobin", subscription("t", "u")), ("range", subscription("t"))]
    form_stable_group(
        env,
        "stable",
        3,
        protocols=protocols,
        instance_ids=[None, "i-1", None],
        session_timeout_ms=20_000,
        rebalance_timeout_ms=45_000,
    )
    return {"stable": GroupState.STABLE}, set()


def family_stable_after_rebalance(env: Env, coord: GroupCoordinator) -> Built:
    """Generation 2 after a member left: the second group record replaces the first."""
    sg = form_stable_group(env, "again", 3)
    leave(env.gm, "again", sg.followers[1])
    replies = [join(env.gm, "again", m) for m in sg.member_ids[:2]]
    assert all(r.result().generation_id == sg.generation + 1 for r in replies)
    sync(env.gm, "again", sg.followers[0], sg.generation + 1)
    sync(env.gm, "again", sg.leader, sg.generation + 1, {sg.leader: b"L2", sg.followers[0]: b"F2"})
    return {"again": GroupState.STABLE}, set()


def family_emptied(env: Env, coord: GroupCoordinator) -> Built:
    """Every member left: Empty with a generation and a protocol type, offsets kept."""
    sg = form_stable_group(env, "emptied", 2)
    commit(coord, "emptied", ("t", 0, 5), generation=sg.generation, member_id=sg.leader)
    leave(env.gm, "emptied", *sg.member_ids)
    return {"emptied": GroupState.EMPTY}, {"emptied"}


def family_static_replaced(env: Env, coord: GroupCoordinator) -> Built:
    """A static member restarted with a new member id: the group record is rewritten in place."""
    form_stable_group(env, "static", 2, instance_ids=["i-0", "i-1"])
    env.advance(1_000)
    assert join(env.gm, "static", "", instance_id="i-1", session_timeout_ms=30_000).result().error is ErrorCode.none
    return {"static": GroupState.STABLE}, set()


def family_member_offsets(env: Env, coord: GroupCoordinator) -> Built:
    """Commits of a member of a Stable group, one overwritten, with leader epochs and metadata."""
    sg = form_stable_group(env, "committed", 2)
    request = commit_request("committed", ("t", 0, 1), ("t", 1, 2), generation=sg.generation, member_id=sg.leader)
    request.partitions[0] = OffsetCommitPartition("t", 0, 10, leader_epoch=4, metadata="meta")
    assert coord.commit_offsets(request).result().partitions[0].error is ErrorCode.none
    env.advance(500)
    commit(coord, "committed", ("t", 1, 20), generation=sg.generation, member_id=sg.followers[0])
    return {"committed": GroupState.STABLE}, {"committed"}


def family_simple_group(env: Env, coord: GroupCoordinator) -> Built:
    """Admin commits to a group that never had members (a simple group: no group record at all)."""
    commit(coord, "simple", ("a", 0, 1), ("a", 1, 2))
    return {"simple": GroupState.EMPTY}, {"simple"}


def family_offset_tombstone(env: Env, coord: GroupCoordinator) -> Built:
    commit(coord, "pruned", ("a", 0, 1), ("a", 1, 2), ("b", 0, 3))
    result = coord.delete_offsets(OffsetDeleteRequest("pruned", [("a", 1), ("b", 0)])).result()
    assert [p.error for p in result.partitions] == [ErrorCode.none, ErrorCode.none]
    return {"pruned": GroupState.EMPTY}, {"pruned"}


def family_explicit_expiry(env: Env, coord: GroupCoordinator) -> Built:
    """OffsetCommit v2 with a retention time keeps its expiry timestamp; a later v8 commit drops it."""
    commit(coord, "explicit", ("a", 0, 1), ("a", 1, 2), version=2, retention_ms=5_000_000)
    commit(coord, "explicit", ("a", 1, 3))
    assert coord.offsets.committed("explicit")[("a", 0)].expire_timestamp_ms is not None
    return {"explicit": GroupState.EMPTY}, {"explicit"}


def family_deleted_group(env: Env, coord: GroupCoordinator) -> Built:
    """DeleteGroups of an emptied consumer group with offsets: offset tombstones then the group tombstone."""
    sg = form_stable_group(env, "deleted", 1)
    commit(coord, "deleted", ("t", 0, 5), generation=sg.generation, member_id=sg.leader)
    leave(env.gm, "deleted", sg.leader)
    assert coord.delete_groups(["deleted"]).result()[0].error is ErrorCode.none
    commit(coord, "kept", ("a", 0, 1))  # a neighbour, so the log has something to rebuild
    return {"kept": GroupState.EMPTY}, {"kept"}


def family_retention_expiry(env: Env, coord: GroupCoordinator) -> Built:
    """A cleanup pass expires an explicit-expiry offset and a whole idle group, and keeps a fresh offset."""
    commit(coord, "idle", ("a", 0, 1))
    commit(coord, "partial", ("a", 0, 1), version=2, retention_ms=1_000)  # expires by its own timestamp
    env.advance(RETENTION - 1_000)
    commit(coord, "partial", ("a", 1, 2))  # fresh: kept
    env.advance(1_000)
    records = coord.retention.run_once()
    assert {type(r) for r in records} == {OffsetTombstone, GroupTombstone}
    return {"partial": GroupState.EMPTY}, {"partial"}


FAMILIES = [
    family_new_empty_group,
    family_stable,
    family_stable_after_rebalance,
    family_emptied,
    family_static_replaced,
    family_member_offsets,
    family_simple_group,
    family_offset_tombstone,
    family_explicit_expiry,
    family_deleted_group,
    family_retention_expiry,
]


@pytest.mark.parametrize("family", FAMILIES, ids=[f.__name__.removeprefix("family_") for f in FAMILIES])
def test_live_state_equals_replayed_state_per_record_family(family: Callable[[Env, GroupCoordinator], Built]) -> None:
    env, coord = make_coordinator(offsets_retention_ms=RETENTION)
    states, with_offsets = family(env, coord)
    groups, offsets = live = snapshot(coord)
    assert {gid: g["state"] for gid, g in groups.items()} == states
    assert set(offsets) == with_offsets
    fresh = replayed(list(env.log.records), env.now())
    assert snapshot(fresh) == live
