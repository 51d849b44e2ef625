"""Timers: session expiry (§5.4), new-member join timeout, join timer (§5.3), pending-sync timeout (§5.5),
and re-validation of stale timers (§5.7)."""

from __future__ import annotations

from coordinator.group import GroupState
from coordinator.rebalance import heartbeat_key
from coordinator.records import (
    MemberRemoved,
    RebalanceCause,
    RebalanceStarted,
    RemovalCause,
)
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, heartbeat, join, join_new, leave, sync
from tests.core.expected import completed, empty_group_record, removed, started

S = GroupState
E = ErrorCode


def test_session_expiry_in_stable_removes_member_and_rebalances(env: Env) -> None:
    sg = form_stable_group(env)
    follower = sg.followers[0]
    env.take()
    env.advance(5_000)
    heartbeat(env.gm, "g", sg.leader, sg.generation)
    env.advance(5_000)  # follower's session (armed at t=6000 by its sync) expires at t=16000
    assert follower not in env.group().members
    assert env.group().state is S.PREPARING_REBALANCE
    assert env.take() == [
        MemberRemoved("g", follower, None, RemovalCause.SESSION_TIMEOUT, None, sg.generation, 16_000),
        RebalanceStarted("g", sg.generation, RebalanceCause.SESSION_TIMEOUT, follower, None, None, "Stable", 16_000),
    ]


def test_a_heartbeat_moves_the_session_end_past_the_armed_timer(env: Env) -> None:
    """A heartbeat only moves the member's deadline; the session timer armed for the old one finds it moved when it
    fires and waits for the new one: the member lives exactly session.timeout.ms after its last heartbeat."""
    sg = form_stable_group(env, n=1)
    member = sg.leader
    armed = env.timer.deadline(("g", member))
    assert armed == env.now() + 10_000
    env.advance(9_999)
    assert heartbeat(env.gm, "g", member, sg.generation) is E.none  # 1 ms before the armed timer fires
    last = env.now()
    env.take()
    env.advance(1)  # the armed timer fires: not expired, re-armed for last + 10_000
    assert member in env.group().members and env.timer.deadline(("g", member)) == last + 10_000
    env.advance(9_998)
    assert member in env.group().members and env.records() == []
    env.advance(1)
    assert member not in env.group().members
    end = last + 10_000
    assert env.take() == [
        MemberRemoved("g", member, None, RemovalCause.SESSION_TIMEOUT, None, 1, end),
        started(1, RebalanceCause.SESSION_TIMEOUT, end, previous="Stable", member=member),
        completed(2, [], end, started_at=end),
        empty_group_record(end, generation=2, protocol_type="consumer"),
    ]


def test_new_member_parked_in_long_rebalance_expires_after_new_member_join_timeout(env: Env) -> None:
    sg = form_stable_group(env, rebalance_timeout_ms=600_000, session_timeout_ms=30_000)
    leader, follower = sg.leader, sg.followers[0]
    join(env.gm, "g", leader, rebalance_timeout_ms=600_000, session_timeout_ms=30_000)
    new_reply = join_new(env.gm, "g", client_id="newcomer", session_timeout_ms=30_000)
    (newcomer,) = env.group().members.keys() - {leader, follower}
    start = env.now()
    env.take()
    for _ in range(29):  # the follower stays alive without rejoining
        env.advance(10_000)
        heartbeat(env.gm, "g", follower, sg.generation)
    env.advance(start + 299_999 - env.now())
    assert not new_reply.done
    env.advance(1)
    result = new_reply.result()
    assert (result.error, result.member_id) == (E.unknown_member_id, "")
    assert newcomer not in env.group().members
    # the leader, parked and not new, is never expired while parked
    assert leader in env.group().members and env.group().state is S.PREPARING_REBALANCE
    assert env.take() == [removed(newcomer, RemovalCause.SESSION_TIMEOUT, sg.generation, start + 300_000)]


def test_heartbeat_of_a_parked_new_member_brings_its_expiry_in_to_the_session_timeout(env: Env) -> None:
    """H6 re-arms the session timer with session.timeout.ms, also for a new member whose timer was armed for the
    new-member join timeout; a new member's parked join does not satisfy the heartbeat (§5.4), so it expires
    session.timeout.ms after that heartbeat, not 5 minutes after it joined."""
    sg = form_stable_group(env, rebalance_timeout_ms=600_000, session_timeout_ms=30_000)
    leader, follower = sg.leader, sg.followers[0]
    join(env.gm, "g", leader, rebalance_timeout_ms=600_000, session_timeout_ms=30_000)
    new_reply = join_new(env.gm, "g", client_id="newcomer", session_timeout_ms=30_000)
    (newcomer,) = env.group().members.keys() - {leader, follower}
    env.take()
    env.advance(1_000)
    assert heartbeat(env.gm, "g", newcomer, sg.generation) is E.rebalance_in_progress
    beat = env.now()
    assert env.timer.deadline(("g", newcomer)) == beat + 30_000
    env.advance(20_000)
    heartbeat(env.gm, "g", follower, sg.generation)  # the follower stays alive without rejoining
    env.advance(9_999)
    assert not new_reply.done and newcomer in env.group().members
    env.advance(1)
    result = new_reply.result()
    assert (result.error, result.member_id) == (E.unknown_member_id, "")
    assert newcomer not in env.group().members
    assert env.take() == [removed(newcomer, RemovalCause.SESSION_TIMEOUT, sg.generation, beat + 30_000)]


def test_member_expiry_during_rebalance_completes_join_phase(env: Env) -> None:
    sg = form_stable_group(env)
    t0 = env.now()
    leader_reply = join(env.gm, "g", sg.leader)
    env.take()
    env.advance(10_000)  # the follower never rejoins nor heartbeats: its session expires first
    assert leader_reply.result().error is E.none
    assert set(env.group().members) == {sg.leader}
    assert env.group().state is S.COMPLETING_REBALANCE
    end = t0 + 10_000
    assert env.take() == [
        removed(sg.followers[0], RemovalCause.SESSION_TIMEOUT, sg.generation, end),
        completed(sg.generation + 1, [sg.leader], end, started_at=t0),
    ]


def test_join_timer_is_max_rebalance_timeout_of_members(env: Env) -> None:
    sg = form_stable_group(env, rebalance_timeout_ms=20_000)
    env.take()
    join(env.gm, "g", sg.followers[0], rebalance_timeout_ms=45_000, protocols=[("range", b"x")])
    assert env.timer.deadline("join-g") == env.now() + 45_000
    assert env.take() == [
        started(sg.generation, RebalanceCause.METADATA_CHANGE, env.now(), previous="Stable", member=sg.followers[0])
    ]


def test_pending_sync_timeout_removes_leader_that_never_syncs(env: Env) -> None:
    replies = [join_new(env.gm, "g", client_id=f"c{i}", rebalance_timeout_ms=8_000) for i in range(3)]
    env.run_until(lambda: all(r.done for r in replies))
    results = [r.result() for r in replies]
    leader, generation = results[0].leader, results[0].generation_id
    followers = [r.member_id for r in results if r.member_id != leader]
    parked = [sync(env.gm, "g", f, generation) for f in followers]
    env.take()
    env.advance(7_999)
    assert env.group().state is S.COMPLETING_REBALANCE
    env.advance(1)
    group = env.group()
    assert set(group.members) == set(followers)
    assert all(p.result().error is E.rebalance_in_progress for p in parked)
    assert group.state is S.PREPARING_REBALANCE
    end = env.now()
    assert env.take() == [
        removed(leader, RemovalCause.SYNC_TIMEOUT, generation, end),
        started(generation, RebalanceCause.SYNC_TIMEOUT, end, previous="CompletingRebalance", member=leader),
    ]


def test_pending_sync_timeout_with_nobody_synced_empties_group(env: Env) -> None:
    replies = [join_new(env.gm, "g", client_id=f"c{i}", rebalance_timeout_ms=5_000) for i in range(2)]
    env.run_until(lambda: all(r.done for r in replies))
    ids = [r.result().member_id for r in replies]
    env.take()
    t0 = env.now()
    env.advance(5_000)
    group = env.group()
    assert group.state is S.EMPTY and not group.members
    assert group.generation_id == 2
    end = t0 + 5_000
    assert env.take() == [  # the late ones in id order, then one rebalance named after the first
        removed(ids[0], RemovalCause.SYNC_TIMEOUT, 1, end),
        removed(ids[1], RemovalCause.SYNC_TIMEOUT, 1, end),
        started(1, RebalanceCause.SYNC_TIMEOUT, end, previous="CompletingRebalance", member=ids[0]),
        completed(2, [], end, started_at=end),
        empty_group_record(end, generation=2, protocol_type="consumer"),
    ]


def test_pending_sync_timer_cancelled_once_everyone_synced(env: Env) -> None:
    sg = form_stable_group(env, rebalance_timeout_ms=8_000)
    assert not env.timer.is_scheduled("sync-g")
    env.take()
    for _ in range(5):
        env.advance(3_000)
        for m in sg.member_ids:
            heartbeat(env.gm, "g", m, sg.generation)
    assert env.group().state is S.STABLE and env.group().generation_id == sg.generation
    assert env.take() == []


def test_pending_sync_timeout_applies_in_stable_too(env: Env) -> None:
    """The leader synced (group Stable) but a follower never did: it is removed at the sync timeout."""
    replies = [join_new(env.gm, "g", client_id=f"c{i}", rebalance_timeout_ms=8_000) for i in range(2)]
    env.run_until(lambda: all(r.done for r in replies))
    leader = replies[0].result().leader
    follower = next(r.result().member_id for r in replies if r.result().member_id != leader)
    sync(env.gm, "g", leader, 1, {leader: b"L", follower: b"F"})
    assert env.group().state is S.STABLE
    env.take()
    t0 = env.now()
    env.advance(8_000)
    assert set(env.group().members) == {leader}
    assert env.group().state is S.PREPARING_REBALANCE  # waits for the leader to rejoin
    assert env.timer.deadline("join-g") == env.now() + 8_000
    end = t0 + 8_000
    assert env.take() == [
        removed(follower, RemovalCause.SYNC_TIMEOUT, 1, end),
        started(1, RebalanceCause.SYNC_TIMEOUT, end, previous="Stable", member=follower),
    ]


def test_stale_sync_timer_of_old_generation_is_ignored(env: Env) -> None:
    replies = [join_new(env.gm, "g", client_id=f"c{i}") for i in range(2)]
    env.run_until(lambda: all(r.done for r in replies))
    stale_op = env.timer._live["sync-g"][1]  # captured before the next generation replaces it
    leader = replies[0].result().leader
    join(env.gm, "g", leader, protocols=[("range", b"changed")])
    follower = next(r.result().member_id for r in replies if r.result().member_id != leader)
    join(env.gm, "g", follower)
    assert env.group().generation_id == 2 and env.group().state is S.COMPLETING_REBALANCE
    env.take()
    stale_op()
    assert env.group().state is S.COMPLETING_REBALANCE and len(env.group().members) == 2
    assert env.take() == []


def test_stale_session_timer_of_removed_member_is_ignored(env: Env) -> None:
    sg = form_stable_group(env)
    stale_op = env.timer._live[("g", sg.followers[0])][1]
    leave(env.gm, "g", sg.followers[0])
    state, generation = env.group().state, env.group().generation_id
    env.take()
    stale_op()
    assert (env.group().state, env.group().generation_id) == (state, generation)
    assert env.take() == []


def test_timers_of_dropped_group_do_not_fire(env: Env) -> None:
    sg = form_stable_group(env, n=1)
    leave(env.gm, "g", sg.leader)
    pending = join(env.gm, "g", "").result().member_id
    assert env.timer.is_scheduled(heartbeat_key("g", pending))
    env.gm.drop_group("g")
    assert env.gm.group("g") is None
    scheduled = env.timer.keys()
    assert not [k for k in scheduled if (k[0] == "g" if isinstance(k, tuple) else k.endswith("-g"))]
