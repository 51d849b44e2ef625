"""Fault isolation per group (issue #15, point 2): what a client sends can never leave a group stuck.

The duplicate-protocol JoinGroup, and the guard at the core's entry points: a handler or timer operation that
raises is answered (or dropped) cleanly, the offending member is removed, the group goes on and can still reach
Stable or Empty, and the records written agree with memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from coordinator import faults, rebalance
from coordinator.group import ClassicGroup, GroupState
from coordinator.groups import GroupManager
from coordinator.records import GroupMetadataRecord, GroupTombstone, RebalanceCause, Record, RemovalCause
from protocol.errors import ErrorCode
from tests.core.clients import Client, settle
from tests.core.conftest import Env, form_stable_group, join, join_new, leave, make_env, session_end, sync, uuid_counter
from tests.core.expected import (
    completed,
    empty_group_record,
    group_record,
    joined,
    member,
    removed,
    stabilized,
    started,
)

S = GroupState
E = ErrorCode
DUPLICATE = [("range", b"evil"), ("range", b"evil")]


def test_duplicate_protocol_names_count_once_and_the_group_goes_on(env: Env) -> None:
    """Kafka keys a member's protocols by name (``mapKey``): a name listed twice is one supported protocol."""
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    generation = env.group().generation_id
    ids = [c.member_id for c in clients]
    env.take()
    t = env.now()
    evil = join_new(env.gm, "g", client_id="evil", protocols=DUPLICATE)  # and then it vanishes
    group = env.group()
    assert group.state is S.PREPARING_REBALANCE and group.supported_protocols["range"] == 3
    (evil_id,) = group.members.keys() - set(ids)
    assert env.take() == [
        joined(evil_id, t, client="evil", protocols=["range", "range"]),  # the list it sent
        started(generation, RebalanceCause.NEW_MEMBER, t, previous="Stable", member=evil_id),
    ]
    # the real members rejoin, are never told INCONSISTENT_GROUP_PROTOCOL, and end Stable without the attacker
    clients[0].step()
    clients[1].step()
    assert env.take() == [completed(generation + 1, [*ids, evil_id], t, started_at=t)]
    env.advance(1)
    assert evil.done and evil.result().error is E.none and evil.result().protocol_name == "range"
    settle(env, "g", clients)
    assert len(env.group().members) == 2
    # settle ticks every second from t + 1: the leader assigns all three; the attacker never heartbeats, its
    # session ends at t + 10 s, the real members rejoin at the next tick and the leader syncs one tick later
    c0, c1 = (member(m, b"a", client=f"c{i}") for i, m in enumerate(ids))
    gone, back, done = t + 10_000, t + 10_001, t + 11_001
    assert env.take() == [
        group_record(
            generation + 1,
            ids[0],
            [c0, c1, member(evil_id, b"a", client="evil", subscription=b"evil")],
            t + 1,
            state_at=t,
        ),
        stabilized(generation + 1, t + 1, join_completed_at=t, started_at=t),
        removed(evil_id, RemovalCause.SESSION_TIMEOUT, generation + 1, gone),
        started(generation + 1, RebalanceCause.SESSION_TIMEOUT, gone, previous="Stable", member=evil_id),
        completed(generation + 2, ids, back, started_at=gone),
        group_record(generation + 2, ids[0], [c0, c1], done, state_at=back),
        stabilized(generation + 2, done, join_completed_at=back, started_at=gone),
    ]


def test_duplicate_protocol_names_alone_in_a_group(env: Env) -> None:
    """The 115-byte JoinGroup on a fresh group id: the join phase completes with ``range`` selected."""
    reply = join_new(env.gm, "squat", client_id="evil", protocols=DUPLICATE)
    env.advance(3_000)  # the initial rebalance delay
    assert reply.result().error is E.none and reply.result().protocol_name == "range"
    evil = reply.result().member_id
    env.advance(60_000)  # never syncs, then never heartbeats
    env.advance(10_000)
    assert env.group("squat").state is S.EMPTY
    end = 3_000 + 10_000  # its session, armed when the join phase completed (no SyncGroup parked keeps it alive)
    assert env.take() == [
        empty_group_record(0, group="squat"),
        joined(evil, 0, group="squat", client="evil", protocols=["range", "range"]),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=evil, group="squat"),
        completed(1, [evil], 3_000, started_at=0, group="squat"),
        removed(evil, RemovalCause.SESSION_TIMEOUT, 1, end, group="squat"),
        started(1, RebalanceCause.SESSION_TIMEOUT, end, previous="CompletingRebalance", member=evil, group="squat"),
        completed(2, [], end, started_at=end, group="squat"),
        empty_group_record(end, generation=2, protocol_type="consumer", group="squat"),
    ]
    # the group's real consumers can now have it
    form_stable_group(env, "squat")


# ------------------------------------------------------------------------------------------------ the guard
class FaultyGroupManager(GroupManager):
    """A GroupManager with a planted bug, to check the guard at the entry points (the guard is under test).

    The handlers are plain functions over the manager's ``shard``: the ``_planted_faults`` fixture wraps the three
    functions below so that they raise for a FaultyGroupManager's shard when its flags say so."""

    fail_join_of: str | None = None  # client id whose JoinGroup raises once its MemberJoined record is written
    fail_complete_join = 0  # how many join-phase completions raise
    fail_repair = False


_FAULTY: dict[int, FaultyGroupManager] = {}  # id(shard) -> its manager, for the planted functions


@pytest.fixture(autouse=True)
def _planted_faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_maybe_prepare = rebalance.maybe_prepare_rebalance_or_complete_join
    real_complete_join = rebalance.complete_join
    real_repair = faults.repair

    def maybe_prepare(shard, group, cause, out, member=None, reason=None):  # type: ignore[no-untyped-def]
        # The step right after a new member's MemberJoined record is added to the operation's result.
        gm = _FAULTY.get(id(shard))
        if gm is not None and member is not None and member.client_id == gm.fail_join_of:
            raise ValueError("planted fault in JoinGroup")
        real_maybe_prepare(shard, group, cause, out, member, reason)

    def complete_join(shard, group, out):  # type: ignore[no-untyped-def]
        gm = _FAULTY.get(id(shard))
        if gm is not None and gm.fail_complete_join:
            gm.fail_complete_join -= 1
            raise ValueError("planted fault at the end of the join phase")
        real_complete_join(shard, group, out)

    def repair(shard, group, member_id, out):  # type: ignore[no-untyped-def]
        gm = _FAULTY.get(id(shard))
        if gm is not None and gm.fail_repair:
            raise ValueError("planted fault in the repair")
        real_repair(shard, group, member_id, out)

    monkeypatch.setattr(rebalance, "maybe_prepare_rebalance_or_complete_join", maybe_prepare)
    monkeypatch.setattr(rebalance, "complete_join", complete_join)
    monkeypatch.setattr(faults, "repair", repair)
    yield
    _FAULTY.clear()


def faulty_env(**config: int) -> tuple[Env, FaultyGroupManager]:
    env = make_env(**config)
    gm = FaultyGroupManager(env.config, env.clock, env.timer, env.log, new_uuid=uuid_counter())
    _FAULTY[id(gm.shard)] = gm
    env.gm = gm
    return env, gm


def replayed(written: list[Record], group_id: str = "g") -> ClassicGroup | None:
    """The group as a reload of ``written`` (every record the test took from the log, in order) rebuilds it."""
    fresh = make_env()
    for record in written:
        if isinstance(record, (GroupMetadataRecord, GroupTombstone)):
            fresh.gm.replay(record)
    return fresh.gm.group(group_id)


def test_a_join_that_raises_removes_that_member_and_the_group_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    env, gm = faulty_env()
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    generation = env.group().generation_id
    ids = [c.member_id for c in clients]
    gm.fail_join_of = "evil"
    written = env.take()
    t = env.now()
    with caplog.at_level(logging.WARNING, logger="coordinator.group"):
        evil = join(gm, "g", client_id="evil").result().member_id  # MEMBER_ID_REQUIRED
        reply = join(gm, "g", evil, client_id="evil")
    assert reply.result().error is E.unknown_member_id  # a real client would rejoin, not give up
    assert gm.faults == 1
    assert not any(m.client_id == "evil" for m in env.group().members.values())
    assert env.group().state is S.PREPARING_REBALANCE
    (line,) = [r for r in caplog.records if "failed" in r.getMessage()]
    assert line.levelno == logging.WARNING and line.getMessage().startswith("JoinGroup failed")
    assert (line.group, line.member) == ("g", evil)  # type: ignore[attr-defined]
    # what was done before the fault is written, then the offender is removed and a rebalance starts
    written += (taken := env.take())
    assert taken == [
        joined(evil, t, client="evil"),
        removed(evil, RemovalCause.INTERNAL_ERROR, generation, t),
        started(generation, RebalanceCause.INTERNAL_ERROR, t, previous="Stable"),
    ]
    settle(env, "g", clients)
    assert gm.faults == 1
    # both rejoin at once (t), the leader syncs at the next tick
    c0, c1 = (member(m, b"a", client=f"c{i}") for i, m in enumerate(ids))
    written += (taken := env.take())
    assert taken == [
        completed(generation + 1, ids, t, started_at=t),
        group_record(generation + 1, ids[0], [c0, c1], t + 1_000, state_at=t),
        stabilized(generation + 1, t + 1_000, join_completed_at=t, started_at=t),
    ]
    group = replayed(written)
    assert group is not None and set(group.members) == set(env.group().members)


def test_a_join_phase_that_raises_restarts_the_rebalance() -> None:
    env, gm = faulty_env()
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    generation = env.group().generation_id
    leader, follower = (c.member_id for c in clients)
    gm.fail_complete_join = 1
    env.take()
    t = env.now()
    clients[0].rejoin()  # the leader forces a rebalance; the join phase raises when the follower rejoins
    assert env.take() == [started(generation, RebalanceCause.LEADER_REJOIN, t, previous="Stable", member=leader)]
    settle(env, "g", clients)
    assert gm.faults == 1 and env.group().state is S.STABLE
    again = clients[1].member_id  # the follower, removed as the member concerned, came back under a new id
    assert again != follower
    c0 = member(leader, b"a", client="c0")
    # settle ticks every second from t: the follower's join raises and removes it, which completes the phase with
    # the leader alone; it syncs at t + 1 s; the follower gets a new id (t + 1 s), rejoins (t + 2 s), the leader
    # rejoins (t + 3 s) and syncs (t + 4 s)
    assert env.take() == [
        removed(follower, RemovalCause.INTERNAL_ERROR, generation, t),
        completed(generation + 1, [leader], t, started_at=t),
        group_record(generation + 1, leader, [c0], t + 1_000, state_at=t),
        stabilized(generation + 1, t + 1_000, join_completed_at=t, started_at=t),
        joined(again, t + 2_000, client="c1"),
        started(generation + 1, RebalanceCause.NEW_MEMBER, t + 2_000, previous="Stable", member=again),
        completed(generation + 2, [leader, again], t + 3_000, started_at=t + 2_000),
        group_record(generation + 2, leader, [c0, member(again, b"a", client="c1")], t + 4_000, state_at=t + 3_000),
        stabilized(generation + 2, t + 4_000, join_completed_at=t + 3_000, started_at=t + 2_000),
    ]


def test_a_group_whose_repair_also_raises_is_reset_to_empty_and_refilled() -> None:
    env, gm = faulty_env()
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    generation = env.group().generation_id
    old_ids = [c.member_id for c in clients]
    gm.fail_complete_join = 1
    gm.fail_repair = True
    written = env.take()
    t = env.now()
    parked = join(gm, "g", clients[0].member_id)
    clients[0].join_reply = parked
    follower = join(gm, "g", clients[1].member_id)  # everyone rejoined: the join phase completes and raises
    assert gm.faults == 1
    assert parked.result().error is E.unknown_member_id and follower.result().error is E.unknown_member_id
    group = env.group()
    assert group.state is S.EMPTY and not group.members and group.generation_id == generation + 1
    written += (taken := env.take())
    assert taken == [
        started(generation, RebalanceCause.LEADER_REJOIN, t, previous="Stable", member=old_ids[0]),
        removed(old_ids[0], RemovalCause.INTERNAL_ERROR, generation, t),
        removed(old_ids[1], RemovalCause.INTERNAL_ERROR, generation, t),
        empty_group_record(t, generation=generation + 1, protocol_type="consumer"),
    ]
    again = replayed(written)
    assert again is not None and again.state is S.EMPTY and again.generation_id == group.generation_id
    gm.fail_repair = False
    clients[1].join_reply = follower
    settle(env, "g", clients)
    assert gm.faults == 1
    # both get new ids at t, rejoin at t + 1 s (an initial rebalance: extended once for the second member, so it
    # completes at t + 7 s) and the leader syncs at once
    ids = [c.member_id for c in clients]
    back, done = t + 1_000, t + 7_000
    assert env.take() == [
        joined(ids[0], back, client="c0"),
        started(generation + 1, RebalanceCause.NEW_MEMBER, back, previous="Empty", member=ids[0]),
        joined(ids[1], back, client="c1"),
        completed(generation + 2, ids, done, started_at=back),
        group_record(
            generation + 2,
            ids[0],
            [member(m, b"a", client=f"c{i}") for i, m in enumerate(ids)],
            done,
            state_at=done,
        ),
        stabilized(generation + 2, done, join_completed_at=done, started_at=back),
    ]


def test_a_timer_fault_does_not_escape_to_the_timer() -> None:
    env, gm = faulty_env()
    reply = join_new(gm, "g", client_id="c0")
    gm.fail_complete_join = 1
    env.take()
    env.advance(3_000)  # the initial delay ends: its operation raises inside the timer
    assert gm.faults == 1
    assert reply.result().error is E.none  # the repair completed the join phase: everyone had joined
    assert env.group().state is S.COMPLETING_REBALANCE
    lone = reply.result().member_id
    assert env.take() == [completed(1, [lone], 3_000, started_at=0)]
    settle(env, "g", [])  # the lone member never comes back
    end = 3_000 + 10_000  # its session
    assert env.take() == [
        removed(lone, RemovalCause.SESSION_TIMEOUT, 1, end),
        started(1, RebalanceCause.SESSION_TIMEOUT, end, previous="CompletingRebalance", member=lone),
        completed(2, [], end, started_at=end),
        empty_group_record(end, generation=2, protocol_type="consumer"),
    ]


def test_a_rebalance_timeout_of_zero_does_not_spin_the_join_timer(caplog: pytest.LogCaptureFixture) -> None:
    """Found by the property tests: a static member with rebalance timeout 0 that does not rejoin made the
    "nobody rejoined, extend the join phase" timer re-arm itself with no delay: a busy loop (and a WARNING per turn)
    until the member's session ended. The extension now waits at least group.min.session.timeout.ms."""
    env = make_env()
    static = Client(env, "g", "s", instance_id="i0", rebalance_timeout_ms=0)
    dynamic = Client(env, "g", "d")
    settle(env, "g", [static, dynamic])
    generation = env.group().generation_id
    session_ends = session_end(env, static.member_id)
    env.take()
    t = env.now()
    with caplog.at_level(logging.WARNING, logger="coordinator.group"):
        leave(env.gm, "g", dynamic.member_id)  # PreparingRebalance; the static member does not rejoin
        env.advance(20_000)  # its session (10 s) ends meanwhile
    assert len([r for r in caplog.records if "no member rejoined" in r.getMessage()]) <= 2
    assert env.group().state is S.EMPTY  # the absent static member's session ended the join phase
    assert t < session_ends <= t + 20_000
    assert env.take() == [  # the extensions of the join phase write nothing
        removed(dynamic.member_id, RemovalCause.LEFT, generation, t),
        started(generation, RebalanceCause.MEMBER_LEFT, t, previous="Stable", member=dynamic.member_id),
        removed(static.member_id, RemovalCause.SESSION_TIMEOUT, generation, session_ends, instance="i0"),
        completed(generation + 1, [], session_ends, started_at=t),
        empty_group_record(session_ends, generation=generation + 1, protocol_type="consumer"),
    ]
    # (with a rebalance timeout of 0 it could never sync in time, in Kafka too: it comes back configured sanely)
    static.rebalance_timeout_ms = 60_000
    settle(env, "g", [static])


def test_a_leader_that_sends_its_sync_twice_during_the_write_gets_what_was_written() -> None:
    """Found by the property tests: a leader's second SyncGroup while its first assignment was still being written
    wrote a second GroupMetadataRecord, but the first write's completion made the group Stable with the first
    assignment: memory and the log disagreed (a reload handed out the second). The last write requested wins."""
    env = make_env(auto_commit=False)
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    for c in clients:
        c.rejoin()
    env.advance(1)
    results = [c.join_reply.result() for c in clients if c.join_reply is not None]
    leader = next(r for r in results if r.leader == r.member_id)
    follower = next(r for r in results if r.leader != r.member_id)
    ids = [leader.member_id, follower.member_id]
    first = sync(env.gm, "g", leader.member_id, leader.generation_id, {m: b"first" for m in ids})
    second = sync(env.gm, "g", leader.member_id, leader.generation_id, {m: b"second" for m in ids})
    other = sync(env.gm, "g", follower.member_id, follower.generation_id)
    assert first.result().error is E.rebalance_in_progress  # superseded by the second
    env.log.commit()
    assert second.result().assignment == b"second" and other.result().assignment == b"second"
    assert {m: x.assignment for m, x in env.group().members.items()} == {m: b"second" for m in ids}
    group = replayed(env.records())
    assert group is not None and {m: x.assignment for m, x in group.members.items()} == {m: b"second" for m in ids}


def test_a_superseded_assignment_write_does_not_record_a_second_stabilization() -> None:
    """The records of the leader's two SyncGroups above: both assignments are written (log order makes the second
    win), but the group became Stable once, with the second: one GroupStabilized."""
    env = make_env(auto_commit=False)
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    generation = env.group().generation_id
    ids = [c.member_id for c in clients]
    t = env.now()
    for c in clients:
        c.rejoin()  # the leader (c0) first: the follower's rejoin completes the join phase at t
    env.advance(1)
    env.log.commit()
    env.take()
    leader, follower = ids
    sync(env.gm, "g", leader, generation + 1, {m: b"first" for m in ids})
    sync(env.gm, "g", leader, generation + 1, {m: b"second" for m in ids})
    sync(env.gm, "g", follower, generation + 1)
    env.log.commit()

    def record(assignment: bytes) -> GroupMetadataRecord:
        members = [member(m, assignment, client=f"c{i}") for i, m in enumerate(ids)]
        return group_record(generation + 1, leader, members, t + 1, state_at=t)

    assert env.take() == [
        record(b"first"),
        record(b"second"),
        stabilized(generation + 1, t + 1, join_completed_at=t, started_at=t),
    ]


def test_a_reply_callback_that_raises_does_not_stop_the_join_phase_half_way() -> None:
    """The end of a join phase answers every member in turn; a listener's callback that raises on the first answer
    must not leave the others unanswered (and the group half-updated)."""
    env = make_env()
    replies = [join_new(env.gm, "g", client_id=f"c{i}") for i in range(2)]

    def broken(_: object) -> None:
        raise RuntimeError("listener bug")

    replies[0].add_callback(broken)
    env.take()
    env.advance(6_000)  # the initial delay, extended once for the second member
    assert all(r.result().error is E.none for r in replies)
    assert env.take() == [completed(1, [r.result().member_id for r in replies], 6_000, started_at=0)]
    assert env.gm.faults == 0 and env.group().state is S.COMPLETING_REBALANCE
    assert all(env.timer.is_scheduled(m.heartbeat_key) for m in env.group().members.values())
