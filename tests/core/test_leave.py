"""LeaveGroup L1-L8, single and batch (§4.4), its history records and its durability."""

from __future__ import annotations

from coordinator.group import GroupState
from coordinator.messages import LeaveMember, LeaveMemberResult
from coordinator.records import (
    MemberRemoved,
    RebalanceCause,
    RebalanceStarted,
    RemovalCause,
)
from protocol.errors import ErrorCode
from tests.core.conftest import Env, form_stable_group, join, join_new, leave, make_env
from tests.core.expected import completed, empty_group_record, removed, started

S = GroupState
E = ErrorCode
REASON = "the consumer is being closed"


def test_empty_group_id_is_invalid(env: Env) -> None:
    result = leave(env.gm, "", "m").result()
    assert (result.error, result.members) == (E.invalid_group_id, [])
    assert env.take() == []


def test_unknown_group_answers_every_member_unknown(env: Env) -> None:
    result = leave(env.gm, "nope", "m1", LeaveMember("", "i2")).result()
    assert result.error is E.none
    assert result.members == [
        LeaveMemberResult("m1", None, E.unknown_member_id),
        LeaveMemberResult("", "i2", E.unknown_member_id),
    ]
    assert env.take() == []


def test_dead_group(env: Env) -> None:
    sg = form_stable_group(env)
    env.group().transition_to(S.DEAD, 0)
    env.take()
    result = leave(env.gm, "g", sg.leader).result()
    assert (result.error, result.members) == (E.coordinator_not_available, [])
    assert env.take() == []


def test_acceptance_leave_with_reason_records_and_rebalance(env: Env) -> None:
    sg = form_stable_group(env)
    follower = sg.followers[0]
    env.take()
    result = leave(env.gm, "g", LeaveMember(follower, None, REASON)).result()
    assert result.members == [LeaveMemberResult(follower, None, E.none)]
    assert follower not in env.group().members
    assert not env.timer.is_scheduled(("g", follower))
    assert env.group().state is S.PREPARING_REBALANCE
    now = env.now()
    assert env.take() == [
        MemberRemoved("g", follower, None, RemovalCause.LEFT, REASON, sg.generation, now),
        RebalanceStarted("g", sg.generation, RebalanceCause.MEMBER_LEFT, follower, None, REASON, "Stable", now),
    ]


def test_leader_leaving_moves_leadership(env: Env) -> None:
    sg = form_stable_group(env, n=3)
    env.take()
    leave(env.gm, "g", sg.leader)
    assert env.group().leader_id == sg.followers[0]
    now = env.now()
    assert env.take() == [
        removed(sg.leader, RemovalCause.LEFT, sg.generation, now),
        started(sg.generation, RebalanceCause.MEMBER_LEFT, now, previous="Stable", member=sg.leader),
    ]


def test_leave_by_instance_id_with_empty_member_id(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    follower = sg.followers[0]
    env.take()
    result = leave(env.gm, "g", LeaveMember("", "i1", "removed by admin")).result()
    assert result.members == [LeaveMemberResult("", "i1", E.none)]
    assert follower not in env.group().members and "i1" not in env.group().static_members
    now, why = env.now(), "removed by admin"
    assert env.take() == [
        removed(follower, RemovalCause.ADMIN, sg.generation, now, instance="i1", reason=why),
        started(
            sg.generation,
            RebalanceCause.ADMIN_ACTION,
            now,
            previous="Stable",
            member=follower,
            instance="i1",
            reason=why,
        ),
    ]


def test_a_member_removed_by_another_client_is_an_admin_removal(env: Env) -> None:
    """The adapter flags a member named by member id from a connection that did not join as it (``admin``): the
    removal and the rebalance are the admin's, as for a removal by instance id."""
    sg = form_stable_group(env, n=3)
    follower = sg.followers[0]
    env.take()
    why = "member was removed by an admin"
    result = leave(env.gm, "g", LeaveMember(follower, None, why, admin=True)).result()
    assert result.members == [LeaveMemberResult(follower, None, E.none)]
    assert follower not in env.group().members
    now = env.now()
    assert env.take() == [
        removed(follower, RemovalCause.ADMIN, sg.generation, now, reason=why),
        started(sg.generation, RebalanceCause.ADMIN_ACTION, now, previous="Stable", member=follower, reason=why),
    ]


def test_empty_member_id_without_known_instance_is_unknown(env: Env) -> None:
    form_stable_group(env)
    env.take()
    result = leave(env.gm, "g", LeaveMember(""), LeaveMember("", "unmapped")).result()
    assert [m.error for m in result.members] == [E.unknown_member_id, E.unknown_member_id]
    assert env.group().state is S.STABLE
    assert env.take() == []


def test_pending_member_leave_rebalances_stable_group(env: Env) -> None:
    sg = form_stable_group(env)
    pending = join(env.gm, "g", "").result().member_id
    env.take()
    result = leave(env.gm, "g", pending).result()
    assert result.members == [LeaveMemberResult(pending, None, E.none)]
    assert not env.group().pending_join_members
    assert not env.timer.is_scheduled(("g", pending))
    # new coordinator: a pending-member leave counts, so a Stable group rebalances
    assert env.group().state is S.PREPARING_REBALANCE
    # a pending id was never a member: no MemberRemoved
    assert env.take() == [
        started(sg.generation, RebalanceCause.PENDING_MEMBER_LEFT, env.now(), previous="Stable", member=pending)
    ]


def test_per_item_validation_errors(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    env.take()
    result = leave(
        env.gm,
        "g",
        LeaveMember("stranger"),
        LeaveMember(sg.followers[0], "i0"),  # instance held by another member id
        LeaveMember(sg.leader, "unmapped"),
    ).result()
    assert [m.error for m in result.members] == [E.unknown_member_id, E.fenced_instance_id, E.unknown_member_id]
    assert env.group().state is S.STABLE and len(env.group().members) == 2
    assert env.take() == []


def test_batch_is_processed_in_order_and_errors_do_not_stop_others(env: Env) -> None:
    sg = form_stable_group(env, n=3)
    pending = join(env.gm, "g", "").result().member_id
    f1, f2 = sg.followers
    env.take()
    result = leave(env.gm, "g", f1, "unknown-member", pending, f2).result()
    assert result.error is E.none
    assert result.members == [
        LeaveMemberResult(f1, None, E.none),
        LeaveMemberResult("unknown-member", None, E.unknown_member_id),
        LeaveMemberResult(pending, None, E.none),
        LeaveMemberResult(f2, None, E.none),
    ]
    assert set(env.group().members) == {sg.leader}
    now, gen = env.now(), sg.generation
    assert env.take() == [  # L8: after the loop, one rebalance for the whole batch, named after its first removal
        removed(f1, RemovalCause.LEFT, gen, now),
        removed(f2, RemovalCause.LEFT, gen, now),
        started(gen, RebalanceCause.MEMBER_LEFT, now, previous="Stable", member=f1),
    ]


def test_leave_of_parked_member_answers_its_join(env: Env) -> None:
    sg = form_stable_group(env, n=3)
    join(env.gm, "g", sg.leader)  # PreparingRebalance
    parked = join(env.gm, "g", sg.followers[0])
    assert not parked.done
    env.take()
    leave(env.gm, "g", sg.followers[0])
    assert (parked.result().error, parked.result().member_id) == (E.unknown_member_id, "")
    assert env.take() == [removed(sg.followers[0], RemovalCause.LEFT, sg.generation, env.now())]  # no new rebalance


def test_leave_during_preparing_rebalance_may_complete_join(env: Env) -> None:
    sg = form_stable_group(env, n=3)
    t0 = env.now()
    replies = [join(env.gm, "g", m) for m in (sg.leader, sg.followers[0])]
    assert not any(r.done for r in replies)
    env.take()
    env.advance(1_000)
    leave(env.gm, "g", sg.followers[1])  # the only member that had not rejoined
    assert all(r.result().error is E.none for r in replies)
    assert env.group().state is S.COMPLETING_REBALANCE
    now = env.now()
    assert env.take() == [
        removed(sg.followers[1], RemovalCause.LEFT, sg.generation, now),
        completed(sg.generation + 1, [sg.leader, sg.followers[0]], now, started_at=t0),
    ]


def test_leave_during_initial_rebalance_does_not_complete_early(env: Env) -> None:
    a = join_new(env.gm, "g", client_id="a")
    b = join_new(env.gm, "g", client_id="b")
    (b_id,) = [m for m in env.group().members if m.startswith("b-")]
    env.take()
    leave(env.gm, "g", b_id)
    assert not a.done
    assert b.result().error is E.unknown_member_id
    assert env.take() == [removed(b_id, RemovalCause.LEFT, 0, 0)]  # the initial rebalance goes on
    env.run_until(lambda: a.done)
    assert a.result().error is E.none


def test_last_member_leaving_empties_group_with_record(env: Env) -> None:
    sg = form_stable_group(env, n=1)
    env.take()
    leave(env.gm, "g", sg.leader)
    group = env.group()
    assert group.state is S.EMPTY and group.generation_id == sg.generation + 1
    now, gen = env.now(), sg.generation
    assert env.take() == [
        removed(sg.leader, RemovalCause.LEFT, gen, now),
        started(gen, RebalanceCause.MEMBER_LEFT, now, previous="Stable", member=sg.leader),
        completed(gen + 1, [], now, started_at=now),
        empty_group_record(now, generation=gen + 1, protocol_type="consumer"),
    ]


def test_leave_waits_for_its_records_to_be_durable() -> None:
    env = make_env(auto_commit=False)
    sg = form_stable_group(env, n=1)
    env.take()
    reply = leave(env.gm, "g", sg.leader)
    assert not reply.done
    assert env.group().state is S.EMPTY  # in-memory removal is immediate
    assert env.take() == [] and env.log.pending == 1
    env.log.commit()
    assert reply.result().members == [LeaveMemberResult(sg.leader, None, E.none)]
    now, gen = env.now(), sg.generation
    assert env.take() == [
        removed(sg.leader, RemovalCause.LEFT, gen, now),
        started(gen, RebalanceCause.MEMBER_LEFT, now, previous="Stable", member=sg.leader),
        completed(gen + 1, [], now, started_at=now),
        empty_group_record(now, generation=gen + 1, protocol_type="consumer"),
    ]


def test_leave_write_failure_answers_top_level_error() -> None:
    env = make_env(auto_commit=False)
    sg = form_stable_group(env, n=2)
    env.take()
    reply = leave(env.gm, "g", sg.followers[0])
    env.log.fail()
    assert env.take() == []
    result = reply.result()
    assert (result.error, result.members) == (E.coordinator_not_available, [])
    assert sg.followers[0] not in env.group().members  # membership is not durable state


def test_leave_without_any_removal_answers_at_once() -> None:
    env = make_env(auto_commit=False)
    form_stable_group(env)
    env.take()
    reply = leave(env.gm, "g", "stranger")
    assert reply.result().members == [LeaveMemberResult("stranger", None, E.unknown_member_id)]
    assert env.log.pending == 0 and env.take() == []
