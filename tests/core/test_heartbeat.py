"""Heartbeat H1-H8 (§4.3): answers per state, session re-arming, never touching the log."""

from __future__ import annotations

import pytest

from coordinator.group import GroupState
from coordinator.records import RebalanceCause, RemovalCause
from protocol.errors import ErrorCode
from tests.core.conftest import (
    Env,
    form_stable_group,
    heartbeat,
    join,
    join_new,
    leave,
    make_env,
    session_end,
    sync,
)
from tests.core.expected import completed, empty_group_record, removed, started

S = GroupState
E = ErrorCode


def test_empty_group_id_is_invalid(env: Env) -> None:
    assert heartbeat(env.gm, "", "m", 1) is E.invalid_group_id
    assert env.take() == []


def test_unknown_group(env: Env) -> None:
    assert heartbeat(env.gm, "nope", "m", 1) is E.unknown_member_id
    assert env.take() == [] and env.gm.group("nope") is None


def test_dead_group(env: Env) -> None:
    sg = form_stable_group(env)
    env.group().transition_to(S.DEAD, 0)
    env.take()
    assert heartbeat(env.gm, "g", sg.leader, sg.generation) is E.coordinator_not_available
    assert env.take() == []


def test_member_validation(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    leader, follower = sg.leader, sg.followers[0]
    env.take()
    assert heartbeat(env.gm, "g", "stranger", sg.generation) is E.unknown_member_id
    assert heartbeat(env.gm, "g", leader, sg.generation, "unmapped") is E.unknown_member_id
    assert heartbeat(env.gm, "g", follower, sg.generation, "i0") is E.fenced_instance_id
    assert heartbeat(env.gm, "g", leader, sg.generation, "i0") is E.none
    assert heartbeat(env.gm, "g", leader, sg.generation) is E.none  # instance id is optional
    assert env.take() == []


def test_pending_member_id_is_unknown(env: Env) -> None:
    pending = join(env.gm, "g", "").result().member_id
    env.take()
    assert heartbeat(env.gm, "g", pending, 0) is E.unknown_member_id
    assert env.take() == []


@pytest.mark.parametrize("generation", [0, 2, -1])
def test_illegal_generation(env: Env, generation: int) -> None:
    sg = form_stable_group(env)
    env.take()
    assert heartbeat(env.gm, "g", sg.leader, generation) is E.illegal_generation
    assert env.take() == []


def test_stable_rearms_session(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    env.advance(4_000)
    assert heartbeat(env.gm, "g", sg.followers[0], sg.generation) is E.none
    assert session_end(env, sg.followers[0]) == env.now() + 10_000
    assert env.take() == []
    assert env.group().members[sg.followers[0]].last_heartbeat_monotonic_ms == env.now()


def test_preparing_rebalance_answers_rebalance_in_progress_and_rearms(env: Env) -> None:
    sg = form_stable_group(env)
    join(env.gm, "g", sg.leader)
    env.advance(1_000)
    env.take()
    assert heartbeat(env.gm, "g", sg.followers[0], sg.generation) is E.rebalance_in_progress
    assert session_end(env, sg.followers[0]) == env.now() + 10_000
    assert env.take() == []


def test_completing_rebalance_answers_none(env: Env) -> None:
    replies = [join_new(env.gm, "g", client_id=f"c{i}") for i in range(2)]
    env.run_until(lambda: all(r.done for r in replies))
    assert env.group().state is S.COMPLETING_REBALANCE
    env.advance(1_000)
    env.take()
    member = replies[1].result().member_id
    assert heartbeat(env.gm, "g", member, replies[1].result().generation_id) is E.none
    assert session_end(env, member) == env.now() + 10_000
    assert env.take() == []


def test_heartbeats_keep_a_member_alive_and_missing_ones_expire_it(env: Env) -> None:
    sg = form_stable_group(env)
    follower = sg.followers[0]
    env.take()
    for _ in range(20):
        env.advance(3_000)
        assert heartbeat(env.gm, "g", follower, sg.generation) is E.none
        assert heartbeat(env.gm, "g", sg.leader, sg.generation) is E.none
    last = env.now()
    env.advance(9_999)
    assert follower in env.group().members
    assert env.take() == []
    env.advance(1)
    assert env.now() == last + 10_000
    assert follower not in env.group().members
    # both stopped heartbeating: the leader's session (armed first) ends first and starts the rebalance; the
    # follower's then leaves nobody, so the join phase completes with an Empty group at once
    end = last + 10_000
    gen = sg.generation
    assert env.take() == [
        removed(sg.leader, RemovalCause.SESSION_TIMEOUT, gen, end),
        started(gen, RebalanceCause.SESSION_TIMEOUT, end, previous="Stable", member=sg.leader),
        removed(follower, RemovalCause.SESSION_TIMEOUT, gen, end),
        completed(gen + 1, [], end, started_at=end),
        empty_group_record(end, generation=gen + 1, protocol_type="consumer"),
    ]


def test_heartbeat_never_touches_the_log() -> None:
    env = make_env(auto_commit=False)
    sg = form_stable_group(env)
    written = len(env.log.records)
    for state_change in (False, True):
        if state_change:
            join(env.gm, "g", sg.leader)  # PreparingRebalance (this join appends history, flushed now)
            env.log.commit()
            written = len(env.log.records)
        for m in sg.member_ids:
            heartbeat(env.gm, "g", m, sg.generation)
        assert env.log.pending == 0
        assert len(env.log.records) == written


def test_empty_group_id_is_invalid_even_if_a_simple_group_has_it(env: Env) -> None:
    env.gm.get_or_create_simple_group("")  # OffsetCommit accepts the empty group id (backward compatibility)
    env.take()
    assert heartbeat(env.gm, "", "m", -1) is E.invalid_group_id
    assert join(env.gm, "", "").result().error is E.invalid_group_id
    assert sync(env.gm, "", "m", -1).result().error is E.invalid_group_id
    assert leave(env.gm, "", "m").result().error is E.invalid_group_id
    assert env.take() == []
