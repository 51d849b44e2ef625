"""SyncGroup S1-S10: validation, parking, the leader's durable assignment, write failures and races (§4.2)."""

from __future__ import annotations

import pytest

from coordinator.group import GroupState
from coordinator.records import (
    GroupMetadataRecord,
    GroupStabilized,
    MemberMetadata,
    RebalanceCause,
)
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, join, join_new, make_env, sync
from tests.core.expected import group_record, member, stabilized, started

S = GroupState
E = ErrorCode


def completing(env: Env, n: int = 2) -> tuple[str, list[str], int]:
    """n dynamic members past the join phase (CompletingRebalance); returns leader, followers, generation."""
    replies = [join_new(env.gm, "g", client_id=f"c{i}") for i in range(n)]
    env.run_until(lambda: all(r.done for r in replies))
    results = [r.result() for r in replies]
    leader = results[0].leader
    assert env.group().state is S.COMPLETING_REBALANCE
    return leader, [r.member_id for r in results if r.member_id != leader], results[0].generation_id


def two_member_record(
    generation: int, leader: str, follower: str, at: int, *, leader_gets: bytes, follower_gets: bytes
) -> GroupMetadataRecord:
    """What the leader's SyncGroup persists for ``completing(env)``'s group when the join phase ended at ``at``."""
    members = [member(leader, leader_gets, client="c0"), member(follower, follower_gets, client="c1")]
    return group_record(generation, leader, members, at, state_at=at)


# ---------------------------------------------------------------------------------------------- validation
def test_empty_group_id_is_invalid(env: Env) -> None:
    assert sync(env.gm, "", "m", 1).result().error is E.invalid_group_id
    assert env.take() == []


def test_unknown_group(env: Env) -> None:
    assert sync(env.gm, "nope", "m", 1).result().error is E.unknown_member_id
    assert env.take() == []


def test_empty_group(env: Env) -> None:
    join(env.gm, "g", "")  # Empty group with a pending id
    env.take()
    assert sync(env.gm, "g", "m", 0).result().error is E.unknown_member_id
    assert env.take() == []


def test_dead_group(env: Env) -> None:
    sg = form_stable_group(env)
    env.group().transition_to(S.DEAD, 0)
    env.take()
    assert sync(env.gm, "g", sg.leader, sg.generation).result().error is E.coordinator_not_available
    assert env.take() == []


def test_member_validation(env: Env) -> None:
    sg = form_stable_group(env, n=2, instance_ids=["i0", "i1"])
    leader, follower = sg.leader, sg.followers[0]
    env.take()
    assert sync(env.gm, "g", "stranger", sg.generation).result().error is E.unknown_member_id
    assert sync(env.gm, "g", follower, sg.generation, instance_id="i0").result().error is E.fenced_instance_id
    assert sync(env.gm, "g", leader, sg.generation, instance_id="other").result().error is E.unknown_member_id
    assert sync(env.gm, "g", leader, sg.generation, instance_id="i0").result().error is E.none
    assert env.take() == []  # a Stable group answers from memory


def test_pending_member_id_is_unknown(env: Env) -> None:
    form_stable_group(env)
    pending = join(env.gm, "g", "").result().member_id
    env.take()
    assert sync(env.gm, "g", pending, 1).result().error is E.unknown_member_id
    assert env.take() == []


@pytest.mark.parametrize("generation", [0, 2, -1])
def test_wrong_generation(env: Env, generation: int) -> None:
    sg = form_stable_group(env)
    assert sg.generation == 1
    env.take()
    assert sync(env.gm, "g", sg.leader, generation).result().error is E.illegal_generation
    assert env.take() == []


@pytest.mark.parametrize(
    ("protocol_type", "protocol_name", "error"),
    [
        ("connect", None, E.inconsistent_group_protocol),
        (None, "roundrobin", E.inconsistent_group_protocol),
        ("consumer", "range", E.none),
        (None, None, E.none),  # v<5 requests carry neither: no check
    ],
)
def test_protocol_consistency(env: Env, protocol_type: str | None, protocol_name: str | None, error: E) -> None:
    sg = form_stable_group(env)
    env.take()
    reply = sync(env.gm, "g", sg.leader, sg.generation, protocol_type=protocol_type, protocol_name=protocol_name)
    assert reply.result().error is error
    assert env.take() == []  # Stable: even the leader's accepted sync writes nothing again


def test_sync_during_preparing_rebalance(env: Env) -> None:
    sg = form_stable_group(env)
    join(env.gm, "g", sg.leader)
    assert env.group().state is S.PREPARING_REBALANCE
    env.take()
    assert sync(env.gm, "g", sg.followers[0], sg.generation).result().error is E.rebalance_in_progress
    assert env.take() == []


# ------------------------------------------------------------------------------------------ sync phase
def test_follower_parks_until_leader_assignment_is_durable() -> None:
    env = make_env(auto_commit=False)
    leader, (follower,), generation = completing(env)
    env.log.commit()  # the new-group record
    env.take()
    f_reply = sync(env.gm, "g", follower, generation)
    assert not f_reply.done
    assert env.group().pending_sync_members == {leader}
    assert env.timer.is_scheduled("sync-g")
    assert env.log.pending == 0
    at = env.now()
    l_reply = sync(env.gm, "g", leader, generation, {leader: b"L", follower: b"F", "ghost": b"X"})
    assert not l_reply.done and not f_reply.done
    assert env.group().state is S.COMPLETING_REBALANCE
    assert not env.timer.is_scheduled("sync-g")  # everyone synced
    assert env.log.pending == 1
    env.advance(100)
    env.log.commit()
    # the ghost's assignment is not persisted: only members are; the group record is written when the leader synced,
    # the GroupStabilized once it is durable (the group is Stable from then)
    assert env.take() == [
        group_record(
            generation,
            leader,
            [member(leader, b"L", client="c0"), member(follower, b"F", client="c1")],
            at,
            state_at=at,
        ),
        stabilized(generation, at + 100, join_completed_at=at, started_at=0),
    ]
    assert env.group().state is S.STABLE
    assert (l_reply.result().error, l_reply.result().assignment) == (E.none, b"L")
    assert (f_reply.result().error, f_reply.result().assignment) == (E.none, b"F")
    assert (f_reply.result().protocol_type, f_reply.result().protocol_name) == ("consumer", "range")
    # session timers re-armed when the parked syncs were answered
    assert env.timer.deadline(("g", follower)) == env.now() + 10_000


def test_leader_record_has_every_member_with_selected_metadata_and_missing_assignments_empty(env: Env) -> None:
    leader, (f1, f2), generation = completing(env, n=3)
    env.take()
    env.advance(250)
    sync(env.gm, "g", leader, generation, {leader: b"L", f1: b"F1"})
    group = env.group()
    assert group.members[f2].assignment == b""
    assert env.take() == [
        GroupMetadataRecord(
            "g",
            "consumer",
            generation,
            "range",
            leader,
            6_000,  # entered CompletingRebalance
            tuple(
                MemberMetadata(m, None, f"c{i}", "/127.0.0.1", 60_000, 10_000, b"range-meta", a)
                for i, (m, a) in enumerate([(leader, b"L"), (f1, b"F1"), (f2, b"")])
            ),
            6_250,
        ),
        GroupStabilized("g", generation, 250, 6_250, 6_250),
    ]


def test_stable_group_answers_sync_at_once_with_stored_assignment(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    follower = sg.followers[0]
    result = sync(env.gm, "g", follower, sg.generation).result()
    assert (result.error, result.assignment) == (E.none, sg.assignments[follower])
    assert (result.protocol_type, result.protocol_name) == ("consumer", "range")
    assert env.take() == []


def test_follower_syncing_after_stable_gets_its_assignment_and_clears_pending_sync(env: Env) -> None:
    leader, (follower,), generation = completing(env)
    sync(env.gm, "g", leader, generation, {leader: b"L", follower: b"F"})
    assert env.group().state is S.STABLE
    assert env.group().pending_sync_members == {follower}
    assert env.timer.is_scheduled("sync-g")
    env.take()
    assert sync(env.gm, "g", follower, generation).result().assignment == b"F"
    assert env.take() == []
    assert not env.group().pending_sync_members
    assert not env.timer.is_scheduled("sync-g")


def test_leader_write_failure_answers_parked_syncs_with_error_and_rebalances() -> None:
    env = make_env(auto_commit=False)
    leader, (follower,), generation = completing(env)
    env.log.commit()
    env.take()
    f_reply = sync(env.gm, "g", follower, generation)
    l_reply = sync(env.gm, "g", leader, generation, {leader: b"L", follower: b"F"})
    env.log.fail(E.not_coordinator)
    assert f_reply.result().error is E.not_coordinator
    assert l_reply.result().error is E.not_coordinator
    assert (f_reply.result().assignment, f_reply.result().protocol_name) == (b"", None)
    group = env.group()
    assert group.state is S.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    env.log.commit()
    # the failed batch (GroupMetadataRecord + GroupStabilized) never reached the log: only the new rebalance did,
    # with the write's error as its detail
    assert env.take() == [
        started(
            generation,
            RebalanceCause.SYNC_WRITE_FAILED,
            env.now(),
            previous="CompletingRebalance",
            member=leader,
            reason="not_coordinator",
        )
    ]


def test_assignment_written_after_a_rebalance_started_is_ignored() -> None:
    env = make_env(auto_commit=False)
    leader, (follower,), generation = completing(env)
    env.log.commit()
    env.take()
    at = env.now()
    f_reply = sync(env.gm, "g", follower, generation)
    l_reply = sync(env.gm, "g", leader, generation, {leader: b"L", follower: b"F"})
    join(env.gm, "g", follower, protocols=[("range", b"changed")])  # rebalance while the write is in flight
    assert f_reply.result().error is E.rebalance_in_progress
    assert l_reply.result().error is E.rebalance_in_progress
    env.log.commit()
    group = env.group()
    assert group.state is S.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    # the leader's batch is durable (the log cannot take it back), then the rebalance the follower's change started;
    # no GroupStabilized: the group never became Stable at this generation
    assert env.take() == [
        group_record(
            generation,
            leader,
            [member(leader, b"L", client="c0"), member(follower, b"F", client="c1")],
            at,
            state_at=at,
        ),
        started(generation, RebalanceCause.METADATA_CHANGE, at, previous="CompletingRebalance", member=follower),
    ]


def test_assignment_write_failure_after_rebalance_does_not_rebalance_again() -> None:
    env = make_env(auto_commit=False)
    leader, (follower,), generation = completing(env)
    env.log.commit()
    env.take()
    sync(env.gm, "g", leader, generation, {leader: b"L", follower: b"F"})
    join(env.gm, "g", follower, protocols=[("range", b"changed")])
    env.log.fail(count=1)  # the leader's assignment
    env.log.commit()
    # no SYNC_WRITE_FAILED rebalance: the follower's change had already started one
    assert env.take() == [
        started(generation, RebalanceCause.METADATA_CHANGE, env.now(), previous="CompletingRebalance", member=follower)
    ]


def test_duplicate_parked_sync_is_superseded(env: Env) -> None:
    leader, (follower,), generation = completing(env)
    env.take()
    at = env.now()
    first = sync(env.gm, "g", follower, generation)
    second = sync(env.gm, "g", follower, generation)
    assert first.result().error is E.rebalance_in_progress
    assert env.take() == []
    sync(env.gm, "g", leader, generation, {follower: b"F"})
    assert second.result().assignment == b"F"
    assert env.take() == [
        group_record(
            generation, leader, [member(leader, client="c0"), member(follower, b"F", client="c1")], at, state_at=at
        ),
        stabilized(generation, at, join_completed_at=at, started_at=0),
    ]
