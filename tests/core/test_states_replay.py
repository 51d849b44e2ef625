"""Loading: replay of GroupMetadataRecord / GroupTombstone and on_loaded (§10.4)."""

from __future__ import annotations

import struct

from coordinator.group import GroupState
from coordinator.records import (
    GroupMetadataRecord,
    GroupRemovalCause,
    GroupTombstone,
    MemberMetadata,
    RebalanceCause,
    RebalanceStarted,
    RemovalCause,
    new_group_tombstone,
)
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, heartbeat, join, make_env, sync
from tests.core.expected import completed, empty_group_record, removed, started

S = GroupState
E = ErrorCode


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)  # null user data


def member_meta(mid: str, instance: str | None = None, *, topics: tuple[str, ...] = ("t1",), rebalance: int = 60_000):
    return MemberMetadata(
        mid, instance, f"client-{mid}", "/10.0.0.1", rebalance, 10_000, subscription(*topics), b"A-" + mid.encode()
    )


def stable_record(*members: MemberMetadata, generation: int = 5, leader: str = "m1") -> GroupMetadataRecord:
    return GroupMetadataRecord("g", "consumer", generation, "range", leader, 1_000, tuple(members), 1_000)


def test_replay_group_with_members_is_stable_with_selected_protocol_only(env: Env) -> None:
    env.gm.replay(stable_record(member_meta("m1"), member_meta("m2", "i2", topics=("t2", "t3"), rebalance=-1)))
    group = env.group()
    assert (group.state, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id) == (
        S.STABLE,
        5,
        "consumer",
        "range",
        "m1",
    )
    assert group.state_timestamp_ms == 1_000
    assert group.static_members == {"i2": "m2"}
    m2 = group.members["m2"]
    assert m2.protocols == [("range", subscription("t2", "t3"))]
    assert (m2.assignment, m2.rebalance_timeout_ms, m2.session_timeout_ms, m2.is_new) == (
        b"A-m2",
        10_000,
        10_000,
        False,
    )
    assert (m2.client_id, m2.client_host) == ("client-m2", "/10.0.0.1")
    assert group.subscribed_topics == frozenset({"t1", "t2", "t3"})
    assert not group.pending_sync_members and group.num_members_awaiting_join == 0
    assert env.take() == []  # replay rebuilds memory from the log; it never writes to it


def test_replay_empty_record_gives_empty_group_without_protocol(env: Env) -> None:
    env.gm.replay(GroupMetadataRecord("g", "", 0, None, None, 7, (), 7))
    group = env.group()
    assert (group.state, group.protocol_type, group.protocol_name, group.leader_id) == (S.EMPTY, None, None, None)
    assert group.is_simple_group()
    assert env.take() == []


def test_later_record_replaces_earlier_and_tombstone_removes(env: Env) -> None:
    env.gm.replay(stable_record(member_meta("m1"), member_meta("m2")))
    env.gm.replay(GroupMetadataRecord("g", "consumer", 6, None, None, 2_000, (), 2_000))
    assert env.group().state is S.EMPTY and not env.group().members and env.group().generation_id == 6
    env.gm.replay(new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=3_000))
    assert env.gm.group("g") is None
    assert env.take() == []


def test_replay_updates_existing_group_object_in_place(env: Env) -> None:
    simple = env.gm.get_or_create_simple_group("g")  # e.g. created by an offset record replayed earlier
    env.gm.replay(stable_record(member_meta("m1")))
    assert env.gm.group("g") is simple
    assert simple.state is S.STABLE and list(simple.members) == ["m1"]
    assert env.take() == []


def test_on_loaded_arms_sessions_and_expiry_rebalances(env: Env) -> None:
    env.gm.replay(stable_record(member_meta("m1"), member_meta("m2")))
    env.gm.on_loaded()
    assert env.timer.deadline(("g", "m1")) == 10_000
    assert env.take() == []  # arming the sessions writes nothing
    for _ in range(3):
        env.advance(3_000)
        assert heartbeat(env.gm, "g", "m1", 5) is E.none
    assert env.take() == []
    env.advance(1_000)  # m2 never heartbeats after the load
    assert set(env.group().members) == {"m1"}
    assert env.group().state is S.PREPARING_REBALANCE
    assert env.take() == [
        removed("m2", RemovalCause.SESSION_TIMEOUT, 5, 10_000),
        started(5, RebalanceCause.SESSION_TIMEOUT, 10_000, previous="Stable", member="m2"),
    ]


def test_on_loaded_rebalances_groups_over_max_size() -> None:
    env = make_env(max_size=2)
    env.gm.replay(stable_record(member_meta("m1"), member_meta("m2"), member_meta("m3")))
    env.gm.replay(GroupMetadataRecord("small", "consumer", 1, "range", "x", 0, (member_meta("x"),), 0))
    env.gm.on_loaded()
    assert env.group().state is S.PREPARING_REBALANCE
    assert env.group("small").state is S.STABLE
    assert env.take() == [started(5, RebalanceCause.GROUP_TOO_LARGE, 0, previous="Stable")]  # "small" untouched
    # the over-sized group shrinks to max size: the last rejoiner is turned away
    replies = [join(env.gm, "g", m, protocols=[("range", subscription("t1"))]) for m in ("m1", "m2", "m3")]
    assert replies[2].result().error is E.group_max_size_reached
    assert env.take() == [removed("m3", RemovalCause.GROUP_MAX_SIZE, 5, 0)]
    env.advance(60_000)  # as in Kafka an eviction does not complete the join phase; its timer does
    assert replies[0].result().error is E.none and len(replies[0].result().members) == 2
    assert env.take() == [
        # meanwhile the small group's member, which never heartbeats after the load, loses its session
        removed("x", RemovalCause.SESSION_TIMEOUT, 1, 10_000, group="small"),
        started(1, RebalanceCause.SESSION_TIMEOUT, 10_000, previous="Stable", member="x", group="small"),
        completed(2, [], 10_000, started_at=10_000, group="small"),
        empty_group_record(10_000, generation=2, protocol_type="consumer", group="small"),
        completed(6, ["m1", "m2"], 60_000, started_at=0),
    ]


def test_reloaded_follower_rejoining_with_full_protocol_list_rebalances(env: Env) -> None:
    """After a reload members know only the selected protocol, so a full-list rejoin no longer 'matches'."""
    sg = form_stable_group(env)
    fresh = make_env()
    for record in env.records(GroupMetadataRecord, GroupTombstone):
        fresh.gm.replay(record)
    fresh.gm.on_loaded()
    group = fresh.group()
    assert group.state is S.STABLE and group.generation_id == sg.generation
    assert {m: group.members[m].assignment for m in group.members} == sg.assignments
    assert group.leader_id == sg.leader
    assert fresh.take() == []
    reply = join(fresh.gm, "g", sg.followers[0])
    assert not reply.done and group.state is S.PREPARING_REBALANCE
    assert fresh.take() == [  # the fresh environment's clock starts at 0
        started(sg.generation, RebalanceCause.METADATA_CHANGE, 0, previous="Stable", member=sg.followers[0])
    ]
    # and before that, a synced member of the reloaded generation still gets its assignment
    other = make_env()
    for record in env.records(GroupMetadataRecord):
        other.gm.replay(record)
    other.gm.on_loaded()
    result = sync(other.gm, "g", sg.followers[0], sg.generation).result()
    assert (result.error, result.assignment) == (E.none, sg.assignments[sg.followers[0]])
    assert other.take() == []  # a sync in Stable writes nothing


def test_other_record_types_are_ignored(env: Env) -> None:
    env.gm.replay(RebalanceStarted("g", 0, RebalanceCause.NEW_MEMBER, None, None, None, "Empty", 0))
    assert env.gm.group("g") is None
    assert env.take() == []
