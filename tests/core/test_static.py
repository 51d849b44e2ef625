"""Static membership (KIP-345, §7): replacement without rebalance, fencing, v9 skip_assignment, revert on write
failure, rebalances it must still cause, absentees surviving join completion, operator removal."""

from __future__ import annotations

from coordinator.group import GroupState
from coordinator.messages import JoinGroupMember
from coordinator.records import (
    GroupMetadataRecord,
    MemberJoined,
    MemberMetadata,
    MemberRemoved,
    RebalanceCause,
    RemovalCause,
)
from protocol.errors import ErrorCode
from tests.core.conftest import (
    DEFAULT_PROTOCOLS,
    Env,
    form_stable_group,
    heartbeat,
    join,
    leave,
    make_env,
    sync,
)
from tests.core.expected import completed, empty_group_record, group_record, joined, member, removed, started

S = GroupState
E = ErrorCode
HOST = "/127.0.0.1"


def test_acceptance_static_restart_with_empty_member_id_keeps_group_stable_and_fences_old_id(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    old = sg.followers[0]
    env.take()
    env.advance(1_000)
    reply = join(env.gm, "g", "", instance_id="i1", client_id="restarted")
    result = reply.result()
    new = result.member_id
    assert new != old and new.startswith("i1-")
    assert (result.error, result.generation_id, result.leader, result.members, result.skip_assignment) == (
        E.none,
        sg.generation,
        sg.leader,
        [],
        False,
    )
    assert (result.protocol_type, result.protocol_name) == ("consumer", "range")
    group = env.group()
    assert group.state is S.STABLE and group.generation_id == sg.generation
    assert group.static_members["i1"] == new and old not in group.members
    # the old id is fenced everywhere
    assert heartbeat(env.gm, "g", old, sg.generation, "i1") is E.fenced_instance_id
    assert sync(env.gm, "g", old, sg.generation, instance_id="i1").result().error is E.fenced_instance_id
    assert join(env.gm, "g", old, instance_id="i1").result().error is E.fenced_instance_id
    assert heartbeat(env.gm, "g", old, sg.generation) is E.unknown_member_id
    # the new id inherits the assignment and a session timer
    assert heartbeat(env.gm, "g", new, sg.generation, "i1") is E.none
    assert sync(env.gm, "g", new, sg.generation, instance_id="i1").result().assignment == sg.assignments[old]
    assert not env.timer.is_scheduled(("g", old))
    now = env.now()
    protocols = tuple(name for name, _ in DEFAULT_PROTOCOLS)
    assert env.take() == [
        MemberRemoved("g", old, "i1", RemovalCause.FENCED, None, sg.generation, now),
        MemberJoined("g", new, "i1", "c1", "/127.0.0.1", protocols, 10_000, 60_000, now),
        GroupMetadataRecord(
            "g",
            "consumer",
            sg.generation,
            "range",
            sg.leader,
            6_000,
            (
                MemberMetadata(sg.leader, "i0", "c0", HOST, 60_000, 10_000, b"range-meta", sg.assignments[sg.leader]),
                MemberMetadata(new, "i1", "c1", HOST, 60_000, 10_000, b"range-meta", sg.assignments[old]),
            ),
            now,
        ),
    ]


def test_static_leader_restart_v9_gets_members_and_skip_assignment(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    formed = env.now()
    env.take()
    result = join(env.gm, "g", "", instance_id="i0", api_version=9).result()
    new = result.member_id
    assert (result.error, result.leader, result.skip_assignment) == (E.none, new, True)
    expected = [JoinGroupMember(new, "i0", b"range-meta"), JoinGroupMember(sg.followers[0], "i1", b"range-meta")]
    assert sorted(result.members, key=lambda m: m.member_id) == sorted(expected, key=lambda m: m.member_id)
    assert env.group().leader_id == new and env.group().state is S.STABLE
    follower = sg.followers[0]
    members = [  # the new id comes last (it was added after the old one's removal)
        member(follower, sg.assignments[follower], instance="i1", client="c1"),
        member(new, sg.assignments[sg.leader], instance="i0", client="c0"),
    ]
    assert env.take() == [  # replaced in place: the new id takes the old one's leadership and assignment
        removed(sg.leader, RemovalCause.FENCED, sg.generation, formed, instance="i0"),
        joined(new, formed, instance="i0", client="c0"),
        group_record(sg.generation, new, members, formed, state_at=formed),
    ]


def test_static_leader_restart_before_v9_is_told_the_old_leader(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    formed = env.now()
    env.take()
    result = join(env.gm, "g", "", instance_id="i0", api_version=8).result()
    assert (result.error, result.leader, result.members, result.skip_assignment) == (E.none, sg.leader, [], False)
    new = result.member_id
    assert new != sg.leader
    assert env.group().leader_id == new
    follower = sg.followers[0]
    members = [  # as from v9: only the answer differs
        member(follower, sg.assignments[follower], instance="i1", client="c1"),
        member(new, sg.assignments[sg.leader], instance="i0", client="c0"),
    ]
    assert env.take() == [
        removed(sg.leader, RemovalCause.FENCED, sg.generation, formed, instance="i0"),
        joined(new, formed, instance="i0", client="c0"),
        group_record(sg.generation, new, members, formed, state_at=formed),
    ]


def test_static_replacement_waits_for_its_record_and_reverts_on_failure() -> None:
    env = make_env(auto_commit=False)
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    old = sg.followers[0]
    reply = join(env.gm, "g", "", instance_id="i1", session_timeout_ms=20_000)
    assert not reply.done and env.log.pending == 1
    new = env.group().static_members["i1"]
    env.take()
    env.log.fail()
    assert env.take() == []  # the replacement's records (history included) failed with it
    result = reply.result()
    assert (result.error, result.member_id, result.leader, result.generation_id) == (
        E.coordinator_not_available,
        "",
        sg.leader,
        sg.generation,
    )
    group = env.group()
    assert group.static_members["i1"] == old and set(group.members) == {sg.leader, old}
    assert group.members[old].session_timeout_ms == 10_000  # request's timeouts reverted
    assert group.members[old].assignment == sg.assignments[old]
    assert heartbeat(env.gm, "g", old, sg.generation, "i1") is E.none
    assert heartbeat(env.gm, "g", new, sg.generation, "i1") is E.fenced_instance_id
    assert env.timer.is_scheduled(("g", old)) and not env.timer.is_scheduled(("g", new))
    assert group.state is S.STABLE and group.num_members_awaiting_join == 0


def test_static_replacement_answered_when_durable() -> None:
    env = make_env(auto_commit=False)
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    formed = env.now()
    env.take()
    reply = join(env.gm, "g", "", instance_id="i1", client_id="restarted")
    assert not reply.done
    assert env.take() == []
    env.log.commit()
    assert reply.result().error is E.none
    assert env.group().num_members_awaiting_join == 0
    old, new = sg.followers[0], reply.result().member_id
    members = [
        member(sg.leader, sg.assignments[sg.leader], instance="i0", client="c0"),
        member(new, sg.assignments[old], instance="i1", client="c1"),  # the replaced member's client id is kept
    ]
    assert env.take() == [
        removed(old, RemovalCause.FENCED, sg.generation, formed, instance="i1"),
        joined(new, formed, instance="i1", client="c1"),
        group_record(sg.generation, sg.leader, members, formed, state_at=formed),
    ]


def test_static_replacement_with_protocol_change_rebalances(env: Env) -> None:
    sg = form_stable_group(env, n=1, instance_ids=["i0"])
    env.take()
    reply = join(env.gm, "g", "", instance_id="i0", protocols=[("roundrobin", b"rr"), ("range", b"r")])
    result = reply.result()  # sole member rejoined: the rebalance completes at once
    assert (result.error, result.generation_id, result.protocol_name) == (E.none, sg.generation + 1, "roundrobin")
    now, new, gen = env.now(), result.member_id, sg.generation
    assert env.take() == [  # no in-place persist when the protocol changes: a rebalance, complete at once
        removed(sg.leader, RemovalCause.FENCED, gen, now, instance="i0"),
        joined(new, now, instance="i0", client="c0", protocols=["roundrobin", "range"]),  # client id kept
        started(gen, RebalanceCause.STATIC_MEMBER_REPLACED, now, previous="Stable", member=new, instance="i0"),
        completed(gen + 1, [new], now, started_at=now, static=[new], protocol="roundrobin"),
    ]


def test_static_replacement_in_completing_rebalance_rebalances_and_fences_parked_sync(env: Env) -> None:
    replies = [join(env.gm, "g", "", instance_id=f"i{i}", client_id=f"c{i}") for i in range(2)]
    env.run_until(lambda: all(r.done for r in replies))
    leader = replies[0].result().leader
    follower = replies[1].result().member_id
    generation = replies[0].result().generation_id
    parked = sync(env.gm, "g", follower, generation, instance_id="i1")
    env.take()
    new_reply = join(env.gm, "g", "", instance_id="i1")
    assert parked.result().error is E.fenced_instance_id
    assert env.group().state is S.PREPARING_REBALANCE
    new, now = env.group().static_members["i1"], env.now()
    assert env.take() == [
        removed(follower, RemovalCause.FENCED, generation, now, instance="i1"),
        joined(new, now, instance="i1", client="c1"),  # the replaced member's client id is kept
        started(
            generation,
            RebalanceCause.STATIC_MEMBER_REPLACED,
            now,
            previous="CompletingRebalance",
            member=new,
            instance="i1",
        ),
    ]
    join(env.gm, "g", leader, instance_id="i0")
    assert new_reply.result().generation_id == generation + 1
    assert env.take() == [completed(generation + 1, [leader, new], now, started_at=now, static=[leader, new])]


def test_static_replacement_in_preparing_rebalance_fences_parked_join_and_may_complete(env: Env) -> None:
    sg = form_stable_group(env, n=3, instance_ids=["i0", "i1", "i2"])
    f1, f2 = sg.followers
    env.take()
    now = env.now()
    leader_reply = join(env.gm, "g", sg.leader, instance_id="i0")
    old_reply = join(env.gm, "g", f1, instance_id="i1")
    assert not old_reply.done
    assert env.take() == [
        started(sg.generation, RebalanceCause.LEADER_REJOIN, now, previous="Stable", member=sg.leader, instance="i0")
    ]
    new1 = join(env.gm, "g", "", instance_id="i1")  # f1 restarted while its old JoinGroup was parked
    assert (old_reply.result().error, old_reply.result().member_id) == (E.fenced_instance_id, f1)
    assert not new1.done and env.group().state is S.PREPARING_REBALANCE  # f2 has not rejoined yet
    id1 = env.group().static_members["i1"]
    assert env.take() == [  # in PreparingRebalance the new id just waits: no group record
        removed(f1, RemovalCause.FENCED, sg.generation, now, instance="i1"),
        joined(id1, now, instance="i1", client="c1"),
    ]
    new2 = join(env.gm, "g", "", instance_id="i2")  # the last one to rejoin, as a replacement: completes
    assert new1.result().error is new2.result().error is E.none
    assert leader_reply.result().generation_id == new2.result().generation_id == sg.generation + 1
    members = {m.member_id for m in leader_reply.result().members}
    assert members == {sg.leader, new1.result().member_id, new2.result().member_id}
    id2 = new2.result().member_id
    assert new1.result().member_id == id1
    assert env.take() == [
        removed(f2, RemovalCause.FENCED, sg.generation, now, instance="i2"),
        joined(id2, now, instance="i2", client="c2"),
        # the replacements come after the members they replaced
        completed(sg.generation + 1, [sg.leader, id1, id2], now, started_at=now, static=[sg.leader, id1, id2]),
    ]


def test_known_static_member_rejoin_follows_existing_member_rules(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    env.take()
    follower = join(env.gm, "g", sg.followers[0], instance_id="i1").result()
    assert (follower.error, follower.generation_id) == (E.none, sg.generation)
    assert env.group().state is S.STABLE
    assert join(env.gm, "g", "made-up-id", instance_id="i1").result().error is E.fenced_instance_id
    assert env.take() == []
    leader = join(env.gm, "g", sg.leader, instance_id="i0")
    assert not leader.done and env.group().state is S.PREPARING_REBALANCE
    assert env.take() == [
        started(
            sg.generation, RebalanceCause.LEADER_REJOIN, env.now(), previous="Stable", member=sg.leader, instance="i0"
        )
    ]


def keep_alive(env: Env, members: list[str], generation: int, ms: int, step: int = 3_000) -> None:
    end = env.now() + ms
    while env.now() + step <= end:
        env.advance(step)
        for m in members:
            heartbeat(env.gm, "g", m, generation)
    env.advance(end - env.now())


def test_static_absentee_survives_join_completion_and_is_in_leader_list(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    absentee = sg.followers[0]
    env.take()
    t0 = env.now()
    reply = join(env.gm, "g", sg.leader, instance_id="i0")
    keep_alive(env, [absentee], sg.generation, 60_000)
    result = reply.result()
    assert result.generation_id == sg.generation + 1
    assert {m.member_id for m in result.members} == {sg.leader, absentee}
    group = env.group()
    assert absentee in group.members and absentee in group.pending_sync_members
    assert env.take() == [  # no MemberRemoved: a static absentee stays
        started(sg.generation, RebalanceCause.LEADER_REJOIN, t0, previous="Stable", member=sg.leader, instance="i0"),
        completed(sg.generation + 1, sg.member_ids, t0 + 60_000, started_at=t0, static=sg.member_ids),
    ]


def test_static_leader_failing_to_rejoin_loses_leadership_not_membership(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    follower = sg.followers[0]
    env.take()
    t0 = env.now()
    reply = join(env.gm, "g", follower, instance_id="i1", protocols=[("range", b"changed")])
    keep_alive(env, [sg.leader], sg.generation, 60_000)
    result = reply.result()
    assert result.leader == follower
    assert {m.member_id for m in result.members} == {sg.leader, follower}
    assert env.group().leader_id == follower and sg.leader in env.group().members
    gen, end = sg.generation, t0 + 60_000
    assert env.take() == [
        started(gen, RebalanceCause.METADATA_CHANGE, t0, previous="Stable", member=follower, instance="i1"),
        completed(gen + 1, sg.member_ids, end, started_at=t0, leader=follower, static=sg.member_ids),
    ]


def test_group_stuck_in_rebalance_while_only_static_absentees_remain(env: Env) -> None:
    sg = form_stable_group(env, n=3, instance_ids=["i0", "i1", None])
    statics = sg.member_ids[:2]
    dynamic = sg.member_ids[2]
    keep_alive(env, statics, sg.generation, 10_000)  # the dynamic member never heartbeats: expires
    assert dynamic not in env.group().members
    assert env.group().state is S.PREPARING_REBALANCE
    keep_alive(env, statics, sg.generation, 60_000)  # nobody rejoins within the rebalance timeout
    group = env.group()
    assert group.state is S.PREPARING_REBALANCE and set(group.members) == set(statics)
    assert env.timer.deadline("join-g") == env.now() + 60_000  # join phase extended
    env.take()
    env.advance(10_000)  # the static members stop heartbeating: both expire, the group empties
    group = env.group()
    assert group.state is S.EMPTY and group.generation_id == sg.generation + 1
    now, gen = env.now(), sg.generation
    expired_at = now - 10_000 - 60_000  # when the dynamic member's session ended and the rebalance started
    assert env.take() == [
        removed(statics[0], RemovalCause.SESSION_TIMEOUT, gen, now, instance="i0"),
        removed(statics[1], RemovalCause.SESSION_TIMEOUT, gen, now, instance="i1"),
        completed(gen + 1, [], now, started_at=expired_at),
        empty_group_record(now, generation=gen + 1, protocol_type="consumer"),
    ]


def test_static_member_session_expiry_rebalances(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    env.take()
    end = env.now() + 10_000
    keep_alive(env, [sg.leader], sg.generation, 10_000)
    assert sg.followers[0] not in env.group().members and "i1" not in env.group().static_members
    assert env.group().state is S.PREPARING_REBALANCE
    follower, gen = sg.followers[0], sg.generation
    assert env.take() == [
        removed(follower, RemovalCause.SESSION_TIMEOUT, gen, end, instance="i1"),
        started(gen, RebalanceCause.SESSION_TIMEOUT, end, previous="Stable", member=follower, instance="i1"),
    ]


def test_remove_static_member_operator_action() -> None:
    env = make_env(auto_commit=False)
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    env.take()
    assert env.gm.remove_static_member("nope", "i1", None).result() is E.group_id_not_found
    assert env.gm.remove_static_member("g", "unknown", None).result() is E.unknown_member_id
    assert env.log.pending == 0
    reply = env.gm.remove_static_member("g", "i1", "decommissioned host")
    assert not reply.done
    env.log.commit()
    assert reply.result() is E.none
    follower, gen, now, why = sg.followers[0], sg.generation, env.now(), "decommissioned host"
    assert env.take() == [
        removed(follower, RemovalCause.ADMIN, gen, now, instance="i1", reason=why),
        started(gen, RebalanceCause.ADMIN_ACTION, now, previous="Stable", member=follower, instance="i1", reason=why),
    ]


def test_remove_static_member_write_failure() -> None:
    env = make_env(auto_commit=False)
    form_stable_group(env, instance_ids=["i0", "i1"])
    env.take()
    reply = env.gm.remove_static_member("g", "i1", None)
    env.log.fail()
    assert reply.result() is E.coordinator_not_available
    assert env.take() == []


def test_static_leave_then_rejoin_gets_a_fresh_member(env: Env) -> None:
    sg = form_stable_group(env, instance_ids=["i0", "i1"])
    leave(env.gm, "g", sg.followers[0])
    env.take()
    reply = join(env.gm, "g", "", instance_id="i1")
    assert not reply.done  # a plain new member: part of the ongoing rebalance
    new = env.group().static_members["i1"]
    assert new != sg.followers[0]
    assert env.take() == [joined(new, env.now(), instance="i1")]  # no second rebalance
