"""JoinGroup: pre-checks, group resolution (R4-R6), new members (N1-N7), existing members (E1-E11), completion."""

from __future__ import annotations

import re
import sys
import uuid

import pytest

from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.group import GroupState
from coordinator.groups import GroupManager
from coordinator.messages import JoinGroupMember
from coordinator.rebalance import random_uuid
from coordinator.record_log import MemoryLog
from coordinator.records import (
    GroupMetadataRecord,
    GroupStabilized,
    JoinPhaseCompleted,
    MemberJoined,
    MemberMetadata,
    RebalanceCause,
    RebalanceStarted,
    RemovalCause,
)
from protocol.errors import ErrorCode
from runtime.logging_setup import LogfmtFormatter
from tests.core.conftest import (
    DEFAULT_PROTOCOLS,
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    Env,
    form_stable_group,
    heartbeat,
    join,
    join_new,
    leave,
    make_env,
    sync,
)
from tests.core.expected import completed, empty_group_record, joined, removed, started

S = GroupState
E = ErrorCode


# ------------------------------------------------------------------------------------------------- pre-checks
def test_empty_group_id_is_invalid(env: Env) -> None:
    reply = join(env.gm, "", "m-1")
    assert reply.result().error is E.invalid_group_id
    assert reply.result().member_id == "m-1"
    assert list(env.gm.all_groups()) == [] and env.records() == []


@pytest.mark.parametrize(("timeout", "ok"), [(5_999, False), (6_000, True), (1_800_000, True), (1_800_001, False)])
def test_session_timeout_bounds_are_inclusive(env: Env, timeout: int, ok: bool) -> None:
    reply = join(env.gm, "g", "", session_timeout_ms=timeout)
    if ok:
        assert reply.result().error is E.member_id_required
        assert env.take() == [empty_group_record(0)]
    else:
        assert reply.result().error is E.invalid_session_timeout
        assert env.gm.group("g") is None
        assert env.take() == []


def test_invalid_session_timeout_echoes_member_id(env: Env) -> None:
    assert join(env.gm, "g", "m-1", session_timeout_ms=1).result().member_id == "m-1"
    assert env.take() == []


# ------------------------------------------------------------------------------------------ group resolution
def test_new_group_writes_empty_group_record_without_waiting() -> None:
    env = make_env(auto_commit=False)
    env.clock.set(500)
    reply = join(env.gm, "g", "", api_version=3)  # v3: added at once and parked
    assert not reply.done
    assert env.group().state is S.PREPARING_REBALANCE
    assert env.log.pending == 1  # appended, nobody waits for it
    env.log.commit()
    (member_id,) = env.group().members
    assert env.take() == [
        empty_group_record(500),
        joined(member_id, 500),
        started(0, RebalanceCause.NEW_MEMBER, 500, previous="Empty", member=member_id),
    ]


def test_member_id_required_on_new_group_writes_only_the_empty_group_record(env: Env) -> None:
    reply = join(env.gm, "g", "")
    assert reply.result().error is E.member_id_required
    assert env.records() == [GroupMetadataRecord("g", "", 0, None, None, 0, (), 0)]
    assert env.group().state is S.EMPTY


def test_empty_group_record_failure_does_not_change_sent_response() -> None:
    env = make_env(auto_commit=False)
    reply = join(env.gm, "g", "")
    assert reply.result().error is E.member_id_required
    env.log.fail()
    assert reply.result().error is E.member_id_required
    assert env.gm.group("g") is not None
    assert env.take() == []  # the failed write never reached the log


def test_existing_group_join_writes_no_group_record(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    join_new(env.gm, "g", client_id="late")
    (late,) = env.group().members.keys() - set(sg.member_ids)
    now = env.now()
    assert env.take() == [
        joined(late, now, client="late"),
        started(sg.generation, RebalanceCause.NEW_MEMBER, now, previous="Stable", member=late),
    ]


@pytest.mark.parametrize("instance_id", [None, "inst"])
def test_member_id_for_absent_group_is_unknown(env: Env, instance_id: str | None) -> None:
    reply = join(env.gm, "nope", "m-1", instance_id=instance_id)
    assert reply.result().error is E.unknown_member_id
    assert reply.result().member_id == "m-1"
    assert env.gm.group("nope") is None
    assert env.take() == []


def test_group_max_size_rejects_new_member_in_stable_group() -> None:
    env = make_env(max_size=2)
    form_stable_group(env, n=2)
    env.take()
    reply = join(env.gm, "g", "")
    assert (reply.result().error, reply.result().member_id) == (E.group_max_size_reached, "")
    assert env.group().state is S.STABLE
    assert env.take() == []


def test_group_max_size_does_not_limit_member_id_required_in_empty_group() -> None:
    env = make_env(max_size=1)
    ids = [join(env.gm, "g", "").result() for _ in range(3)]
    assert all(r.error is E.member_id_required for r in ids)
    assert len(env.group().pending_join_members) == 3
    assert env.take() == [empty_group_record(0)]  # the first join created the group; pending ids are not written


def test_group_max_size_evicts_existing_member_rejoining_too_late() -> None:
    env = make_env(max_size=2)
    sg = form_stable_group(env, n=2)
    a, b = sg.leader, sg.followers[0]
    rebalance_at = env.now()
    join(env.gm, "g", a)  # leader rejoin: PreparingRebalance, 1 awaiting
    c_reply = join_new(env.gm, "g", client_id="c")  # accepted: 1 awaiting < 2
    (c,) = env.group().members.keys() - {a, b}
    env.take()
    late = join(env.gm, "g", b)  # not awaiting and 2 awaiting already: evicted
    assert (late.result().error, late.result().member_id) == (E.group_max_size_reached, "")
    assert b not in env.group().members
    assert env.take() == [removed(b, RemovalCause.GROUP_MAX_SIZE, sg.generation, env.now())]
    env.advance(60_000)  # the join timer completes the phase
    assert env.group().state is S.COMPLETING_REBALANCE
    assert set(env.group().members) == {a, c}
    assert c_reply.result().error is E.none
    assert env.take() == [completed(sg.generation + 1, [a, c], rebalance_at + 60_000, started_at=rebalance_at)]


# ------------------------------------------------------------------------------------------------ new members
UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def real_uuid_manager() -> GroupManager:
    clock = ManualClock()
    return GroupManager(GroupConfig(), clock, ManualTimer(clock), MemoryLog())


@pytest.mark.parametrize(
    ("client_id", "instance_id", "prefix"),
    [("my-client", None, "my-client"), ("", None, ""), ("my-client", "inst-1", "inst-1")],
)
def test_member_id_format(client_id: str, instance_id: str | None, prefix: str) -> None:
    gm = real_uuid_manager()
    reply = join(gm, "g", "", client_id=client_id, instance_id=instance_id, api_version=4)
    if instance_id is None:  # dynamic: the id comes back with MEMBER_ID_REQUIRED
        member_id = reply.result().member_id
    else:  # static: added (and parked) at once
        group = gm.group("g")
        assert group is not None
        member_id = group.static_members[instance_id]
    assert re.fullmatch(re.escape(prefix) + "-" + UUID4, member_id), member_id


def test_random_uuid_is_a_version_4_uuid_text() -> None:
    ids = [random_uuid() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text  # lower-case, hyphenated: the same text as str(uuid.uuid4())
    # The random digits really vary: every hex digit shows up in a free position, each variant digit 8-b appears.
    assert {text[0] for text in ids} == set("0123456789abcdef")
    assert {text[19] for text in ids} == set("89ab")


def test_static_member_gets_new_id_on_every_rejoin_with_empty_id() -> None:
    gm = real_uuid_manager()
    r1 = join(gm, "g", "", instance_id="i")
    first_id = next(iter(gm.group("g").members))  # type: ignore[union-attr]
    r2 = join(gm, "g", "", instance_id="i")  # replaces the first id while PreparingRebalance
    assert r1.result().error is E.fenced_instance_id
    assert r1.result().member_id == first_id
    group = gm.group("g")
    assert group is not None
    second_id = group.static_members["i"]
    assert second_id != first_id and list(group.members) == [second_id]
    assert not r2.done


def test_dead_group_rejects_new_member(env: Env) -> None:
    join(env.gm, "g", "")
    env.group().transition_to(S.DEAD, 0)
    env.take()
    assert join(env.gm, "g", "").result().error is E.coordinator_not_available
    assert env.take() == []


@pytest.mark.parametrize(
    ("protocol_type", "protocols"),
    [("", DEFAULT_PROTOCOLS), ("consumer", ())],
)
def test_first_member_needs_protocol_type_and_protocols(env: Env, protocol_type: str, protocols: tuple) -> None:
    reply = join(env.gm, "g", "", protocol_type=protocol_type, protocols=protocols)
    assert (reply.result().error, reply.result().member_id) == (E.inconsistent_group_protocol, "")
    assert env.take() == [empty_group_record(0)]  # R4: the group exists even though its first join was refused


def test_join_with_other_protocol_type_or_no_common_protocol_is_inconsistent(env: Env) -> None:
    form_stable_group(env)
    env.take()
    assert join(env.gm, "g", "", protocol_type="connect").result().error is E.inconsistent_group_protocol
    assert join(env.gm, "g", "", protocols=[("sticky", b"")]).result().error is E.inconsistent_group_protocol
    assert join(env.gm, "g", "", protocols=[("sticky", b""), ("range", b"")]).result().error is E.member_id_required
    assert env.take() == []


def test_protocol_type_of_emptied_group_can_change(env: Env) -> None:
    sg = form_stable_group(env, n=1)
    leave(env.gm, "g", sg.leader)
    assert env.group().state is S.EMPTY and env.group().protocol_type == "consumer"
    env.take()
    t0 = env.now()
    reply = join_new(env.gm, "g", protocol_type="connect", protocols=[("v1", b"")])
    env.advance(3_000)
    assert reply.result().error is E.none
    assert env.group().protocol_type == "connect"
    new = reply.result().member_id
    assert env.take() == [
        joined(new, t0, protocols=["v1"]),
        started(sg.generation + 1, RebalanceCause.NEW_MEMBER, t0, previous="Empty", member=new),
        completed(sg.generation + 2, [new], t0 + 3_000, started_at=t0, protocol="v1", protocol_type="connect"),
    ]


def test_member_id_required_for_dynamic_v4_plus(env: Env) -> None:
    reply = join(env.gm, "g", "", api_version=4, session_timeout_ms=7_000)
    result = reply.result()
    assert result.error is E.member_id_required
    assert env.take() == [empty_group_record(0)]
    group = env.group()
    assert group.state is S.EMPTY and not group.members
    assert group.pending_join_members == {result.member_id}
    assert env.timer.deadline(("g", result.member_id)) == 7_000


def test_dynamic_v3_member_is_added_at_once(env: Env) -> None:
    reply = join(env.gm, "g", "", api_version=3)
    assert not reply.done
    group = env.group()
    assert group.state is S.PREPARING_REBALANCE and len(group.members) == 1
    assert not group.pending_join_members
    (member_id,) = group.members
    assert env.take() == [
        empty_group_record(0),
        joined(member_id, 0),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=member_id),
    ]


def test_static_member_never_gets_member_id_required(env: Env) -> None:
    reply = join(env.gm, "g", "", instance_id="i", api_version=9)
    assert not reply.done
    assert list(env.group().static_members) == ["i"]
    member_id = env.group().static_members["i"]
    assert env.take() == [
        empty_group_record(0),
        joined(member_id, 0, instance="i"),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=member_id, instance="i"),
    ]


def test_pending_member_rejoins_and_becomes_member(env: Env) -> None:
    pending = join(env.gm, "g", "").result().member_id
    assert env.take() == [empty_group_record(0)]
    reply = join(env.gm, "g", pending)
    group = env.group()
    assert pending in group.members and not group.pending_join_members
    assert env.take() == [
        joined(pending, 0),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=pending),
    ]
    env.advance(3_000)
    result = reply.result()
    assert (result.error, result.member_id, result.leader, result.generation_id) == (E.none, pending, pending, 1)
    assert env.take() == [completed(1, [pending], 3_000, started_at=0)]


def test_pending_member_expires_after_its_session_timeout(env: Env) -> None:
    pending = join(env.gm, "g", "", session_timeout_ms=6_000).result().member_id
    env.take()
    env.advance(5_999)
    assert env.group().pending_join_members == {pending}
    env.advance(1)
    assert not env.group().pending_join_members
    assert join(env.gm, "g", pending).result().error is E.unknown_member_id
    assert env.take() == []  # a pending id was never a member: no history either


def test_second_join_of_pending_member_is_validated_again(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    pending = join(env.gm, "g", "").result().member_id
    reply = join(env.gm, "g", pending, protocols=[("sticky", b"")])
    assert reply.result().error is E.inconsistent_group_protocol
    assert env.take() == []
    assert pending in env.group().pending_join_members
    assert sg.generation == env.group().generation_id


def test_pending_member_with_instance_id_is_an_internal_error(env: Env) -> None:
    pending = join(env.gm, "g", "").result().member_id
    env.take()
    assert join(env.gm, "g", pending, instance_id="i").result().error is E.unknown_server_error
    assert env.take() == []


def test_pending_members_block_join_completion_until_they_expire(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    t0 = env.now()
    leader_reply = join(env.gm, "g", sg.leader)
    pending = join(env.gm, "g", "", session_timeout_ms=6_000).result().member_id
    follower_reply = join(env.gm, "g", sg.followers[0])
    assert env.group().state is S.PREPARING_REBALANCE  # everyone joined but an id is pending
    env.advance(5_999)
    assert not leader_reply.done
    assert env.take() == [started(sg.generation, RebalanceCause.LEADER_REJOIN, t0, previous="Stable", member=sg.leader)]
    env.advance(1)
    assert env.group().state is S.COMPLETING_REBALANCE
    assert leader_reply.result().generation_id == follower_reply.result().generation_id == sg.generation + 1
    assert pending not in env.group().pending_join_members
    assert env.take() == [completed(sg.generation + 1, sg.member_ids, t0 + 6_000, started_at=t0)]


# ------------------------------------------------------------------------------------------ existing members
def test_existing_member_of_dead_group(env: Env) -> None:
    sg = form_stable_group(env)
    env.group().transition_to(S.DEAD, 0)
    env.take()
    result = join(env.gm, "g", sg.leader).result()
    assert (result.error, result.member_id) == (E.coordinator_not_available, sg.leader)
    assert env.take() == []


def test_existing_member_inconsistent_protocol(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    result = join(env.gm, "g", sg.followers[0], protocols=[("sticky", b"")]).result()
    assert (result.error, result.member_id) == (E.inconsistent_group_protocol, sg.followers[0])
    assert env.take() == []


def test_unknown_member_id_on_existing_group(env: Env) -> None:
    form_stable_group(env)
    env.take()
    result = join(env.gm, "g", "not-a-member").result()
    assert env.take() == []
    assert (result.error, result.member_id, result.protocol_type, result.protocol_name) == (
        E.unknown_member_id,
        "not-a-member",
        None,
        None,
    )


def test_existing_member_in_empty_group_is_unknown(env: Env) -> None:
    join(env.gm, "g", "")  # creates the Empty group
    env.take()
    result = join(env.gm, "g", "someone").result()
    assert (result.error, result.member_id, result.generation_id) == (E.unknown_member_id, "someone", -1)
    assert env.take() == []


def test_rejoin_during_preparing_rebalance_parks_until_all_joined(env: Env) -> None:
    sg = form_stable_group(env, n=3)
    env.take()
    now = env.now()
    replies = {sg.leader: join(env.gm, "g", sg.leader)}
    assert env.group().state is S.PREPARING_REBALANCE
    replies[sg.followers[0]] = join(env.gm, "g", sg.followers[0])
    assert not any(r.done for r in replies.values())
    assert env.take() == [
        started(sg.generation, RebalanceCause.LEADER_REJOIN, now, previous="Stable", member=sg.leader)
    ]
    replies[sg.followers[1]] = join(env.gm, "g", sg.followers[1])
    assert all(r.done for r in replies.values())
    assert {r.result().generation_id for r in replies.values()} == {sg.generation + 1}
    assert env.take() == [completed(sg.generation + 1, sg.member_ids, now, started_at=now)]


def test_acceptance_unchanged_follower_in_stable_answered_at_once(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    follower = sg.followers[0]
    result = join(env.gm, "g", follower).result()
    assert result.error is E.none
    assert (result.generation_id, result.leader, result.member_id, result.members) == (
        sg.generation,
        sg.leader,
        follower,
        [],
    )
    assert (result.protocol_type, result.protocol_name, result.skip_assignment) == ("consumer", "range", False)
    assert env.group().state is S.STABLE
    assert env.take() == []


def test_acceptance_unchanged_leader_in_stable_forces_rebalance(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    reply = join(env.gm, "g", sg.leader, reason="topic metadata changed")
    assert not reply.done
    assert env.group().state is S.PREPARING_REBALANCE
    assert env.take() == [
        RebalanceStarted(
            "g",
            sg.generation,
            RebalanceCause.LEADER_REJOIN,
            sg.leader,
            None,
            "topic metadata changed",
            "Stable",
            env.now(),
        )
    ]


def test_changed_follower_in_stable_triggers_rebalance(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    join(env.gm, "g", sg.followers[0], protocols=[("range", b"new-subscription")])
    assert env.group().state is S.PREPARING_REBALANCE
    assert env.take() == [
        started(sg.generation, RebalanceCause.METADATA_CHANGE, env.now(), previous="Stable", member=sg.followers[0])
    ]


def completing_group(env: Env) -> tuple[list[str], str, int]:
    """Two dynamic members in CompletingRebalance (join phase done, nobody synced yet)."""
    replies = [join_new(env.gm, "g", client_id=f"c{i}") for i in range(2)]
    env.run_until(lambda: all(r.done for r in replies))
    results = [r.result() for r in replies]
    assert env.group().state is S.COMPLETING_REBALANCE
    return [r.member_id for r in results], results[0].leader, results[0].generation_id


def test_matching_rejoin_in_completing_rebalance_is_answered_at_once(env: Env) -> None:
    members, leader, generation = completing_group(env)
    follower = next(m for m in members if m != leader)
    env.take()
    leader_result = join(env.gm, "g", leader).result()
    follower_result = join(env.gm, "g", follower).result()
    assert leader_result.error is E.none and follower_result.error is E.none
    assert [m.member_id for m in leader_result.members] == members
    assert follower_result.members == []
    assert leader_result.generation_id == follower_result.generation_id == generation
    assert env.group().state is S.COMPLETING_REBALANCE
    assert env.take() == []


def test_changed_rejoin_in_completing_rebalance_rebalances_and_answers_parked_syncs(env: Env) -> None:
    members, leader, generation = completing_group(env)
    follower = next(m for m in members if m != leader)
    parked = sync(env.gm, "g", follower, generation)
    assert not parked.done
    env.take()
    join(env.gm, "g", leader, protocols=[("range", b"changed")])
    assert env.group().state is S.PREPARING_REBALANCE
    assert parked.result().error is E.rebalance_in_progress
    assert (parked.result().protocol_type, parked.result().protocol_name) == (None, None)
    assert env.take() == [
        started(generation, RebalanceCause.METADATA_CHANGE, env.now(), previous="CompletingRebalance", member=leader)
    ]


def test_duplicate_join_supersedes_parked_one(env: Env) -> None:
    sg = form_stable_group(env, n=2)
    env.take()
    now = env.now()
    first = join(env.gm, "g", sg.leader)
    assert env.take() == [
        started(sg.generation, RebalanceCause.LEADER_REJOIN, now, previous="Stable", member=sg.leader)
    ]
    second = join(env.gm, "g", sg.leader)
    assert first.result().error is E.rebalance_in_progress
    assert env.group().num_members_awaiting_join == 1
    assert env.take() == []  # the duplicate neither rebalances again nor changes the member
    join(env.gm, "g", sg.followers[0])
    assert second.result().error is E.none
    assert env.take() == [completed(sg.generation + 1, sg.member_ids, now, started_at=now)]


# ----------------------------------------------------------------------------------------- join completion
def test_join_completion_answers_everyone_and_leader_gets_members(env: Env) -> None:
    a = join_new(env.gm, "g", client_id="a", protocols=[("range", b"ra"), ("roundrobin", b"rra")])
    b = join_new(env.gm, "g", client_id="b", protocols=[("roundrobin", b"rrb"), ("range", b"rb")])
    c = join_new(env.gm, "g", client_id="c", protocols=[("roundrobin", b"rrc")])
    env.run_until(lambda: a.done)
    ra, rb, rc = a.result(), b.result(), c.result()
    assert {r.protocol_name for r in (ra, rb, rc)} == {"roundrobin"}  # the only common protocol
    assert ra.leader == rb.leader == rc.leader == ra.member_id  # first member added leads
    assert ra.members == [
        JoinGroupMember(ra.member_id, None, b"rra"),
        JoinGroupMember(rb.member_id, None, b"rrb"),
        JoinGroupMember(rc.member_id, None, b"rrc"),
    ]
    assert rb.members == [] and rc.members == []
    group = env.group()
    assert group.pending_sync_members == {ra.member_id, rb.member_id, rc.member_id}
    assert not any(m.is_new for m in group.members.values())
    assert env.timer.deadline(("g", rb.member_id)) == env.now() + 10_000
    assert env.timer.deadline("sync-g") == env.now() + 60_000
    ids = [ra.member_id, rb.member_id, rc.member_id]
    assert env.take() == [
        empty_group_record(0),
        joined(ids[0], 0, client="a"),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=ids[0]),
        joined(ids[1], 0, client="b", protocols=["roundrobin", "range"]),
        joined(ids[2], 0, client="c", protocols=["roundrobin"]),
        # members arrived during the initial delay (3 s): extended once, completes at 6 s
        completed(1, ids, 6_000, started_at=0, protocol="roundrobin"),
    ]


def test_majority_vote_selects_protocol(env: Env) -> None:
    replies = [
        join_new(env.gm, "g", client_id="a", protocols=[("range", b""), ("roundrobin", b"")]),
        join_new(env.gm, "g", client_id="b", protocols=[("roundrobin", b""), ("range", b"")]),
        join_new(env.gm, "g", client_id="c", protocols=[("roundrobin", b""), ("range", b"")]),
    ]
    env.run_until(lambda: replies[0].done)
    assert env.group().protocol_name == "roundrobin"
    ids = [r.result().member_id for r in replies]
    assert env.take() == [
        empty_group_record(0),
        joined(ids[0], 0, client="a"),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=ids[0]),
        joined(ids[1], 0, client="b", protocols=["roundrobin", "range"]),
        joined(ids[2], 0, client="c", protocols=["roundrobin", "range"]),
        completed(1, ids, 6_000, started_at=0, protocol="roundrobin"),  # 2 votes to 1
    ]


def test_dynamic_members_that_do_not_rejoin_are_removed_and_leader_reelected(env: Env) -> None:
    sg = form_stable_group(env, n=3)
    follower, absent = sg.followers
    env.take()
    t0 = env.now()
    # A follower's metadata change starts the rebalance; the leader never rejoins.
    f_reply = join(env.gm, "g", follower, protocols=[("range", b"changed")])
    absent_reply = join(env.gm, "g", absent)
    assert env.take() == [
        started(sg.generation, RebalanceCause.METADATA_CHANGE, t0, previous="Stable", member=follower)
    ]
    for _ in range(11):  # the leader stays alive (heartbeats) but never rejoins
        env.advance(5_000)
        assert heartbeat(env.gm, "g", sg.leader, sg.generation) is E.rebalance_in_progress
    env.advance(4_999)
    assert env.group().state is S.PREPARING_REBALANCE
    env.advance(1)  # rebalance timeout
    group = env.group()
    assert set(group.members) == {follower, absent}
    assert group.leader_id == follower
    assert f_reply.result().leader == follower and len(f_reply.result().members) == 2
    assert absent_reply.result().members == []
    end = t0 + 60_000
    assert env.take() == [
        removed(sg.leader, RemovalCause.JOIN_TIMEOUT, sg.generation, end),
        completed(sg.generation + 1, [follower, absent], end, started_at=t0),
    ]
    assert env.timer.is_scheduled(("g", sg.leader)) is False


def test_join_phase_with_nobody_left_makes_group_empty_and_writes_record(env: Env) -> None:
    sg = form_stable_group(env, n=1)
    env.take()
    env.clock.set(env.now() + 5)
    leave(env.gm, "g", sg.leader)
    group = env.group()
    assert group.state is S.EMPTY
    assert group.generation_id == sg.generation + 1
    assert group.protocol_name is None and group.protocol_type == "consumer" and group.leader_id is None
    now = env.now()
    assert env.take() == [
        removed(sg.leader, RemovalCause.LEFT, sg.generation, now),
        started(sg.generation, RebalanceCause.MEMBER_LEFT, now, previous="Stable", member=sg.leader),
        completed(sg.generation + 1, [], now, started_at=now),
        GroupMetadataRecord("g", "consumer", sg.generation + 1, None, None, now, (), now),
    ]


def test_history_records_for_join_of_two_members(env: Env) -> None:
    m1 = join(env.gm, "g", "").result().member_id
    r1 = join(env.gm, "g", m1)
    env.clock.set(100)
    m2 = join(env.gm, "g", "", client_id="client2").result().member_id
    r2 = join(env.gm, "g", m2, client_id="client2")
    env.advance(5_900)  # initial delay 3000, extended once for m2: completes at 6000
    assert r1.result().generation_id == r2.result().generation_id == 1
    env.advance(500)
    sync(env.gm, "g", m2, 1)
    sync(env.gm, "g", m1, 1, {m1: b"a1", m2: b"a2"})
    protocols = ("range", "roundrobin")
    assert env.take() == [
        GroupMetadataRecord("g", "", 0, None, None, 0, (), 0),
        MemberJoined("g", m1, None, "client", "/127.0.0.1", protocols, 10_000, 60_000, 0),
        RebalanceStarted("g", 0, RebalanceCause.NEW_MEMBER, m1, None, None, "Empty", 0),
        MemberJoined("g", m2, None, "client2", "/127.0.0.1", protocols, 10_000, 60_000, 100),
        JoinPhaseCompleted("g", 1, "CompletingRebalance", "consumer", "range", m1, (m1, m2), (), 6_000, 6_000),
        GroupMetadataRecord(
            "g",
            "consumer",
            1,
            "range",
            m1,
            6_000,
            (
                MemberMetadata(m1, None, "client", "/127.0.0.1", 60_000, 10_000, b"range-meta", b"a1"),
                MemberMetadata(m2, None, "client2", "/127.0.0.1", 60_000, 10_000, b"range-meta", b"a2"),
            ),
            6_500,
        ),
        GroupStabilized("g", 1, 500, 6_500, 6_500),
    ]


def test_new_member_in_stable_group_triggers_rebalance_with_cause(env: Env) -> None:
    sg = form_stable_group(env)
    env.take()
    pending = join(env.gm, "g", "", reason="startup").result().member_id
    assert env.take() == []  # MEMBER_ID_REQUIRED: a pending id is not a member yet
    join(env.gm, "g", pending, client_id="c9", reason="startup")
    now = env.now()
    assert env.take() == [
        joined(pending, now, client="c9"),
        started(sg.generation, RebalanceCause.NEW_MEMBER, now, previous="Stable", member=pending, reason="startup"),
    ]
    assert env.timer.deadline(("g", pending)) == env.now() + 300_000  # new-member join timeout
    assert env.timer.deadline("join-g") == env.now() + 60_000


# ----------------------------------------------------------------------------------- initial rebalance delay
def test_initial_delay_no_early_completion_even_if_everyone_joined(env: Env) -> None:
    reply = join_new(env.gm, "g")
    assert env.group().has_all_members_joined()
    env.take()
    env.advance(2_999)
    assert not reply.done
    assert env.take() == []
    env.advance(1)
    assert reply.result().error is E.none
    assert env.take() == [completed(1, [reply.result().member_id], 3_000, started_at=0)]


def test_acceptance_initial_delay_extension(env: Env) -> None:
    """D=3000, big rebalance timeout: a member arriving during the delay extends it by one more delay period."""
    first = join_new(env.gm, "g", rebalance_timeout_ms=300_000)
    env.advance(2_999)
    second = join_new(env.gm, "g", client_id="c2", rebalance_timeout_ms=300_000)
    env.advance(1)  # t=3000: new member seen -> extended to t=6000
    assert not first.done and env.timer.deadline("join-g") == 6_000
    env.advance(2_999)
    assert not first.done
    env.advance(1)  # t=6000: nobody new since -> complete
    assert first.result().error is E.none and second.result().error is E.none
    assert first.result().generation_id == 1
    ids = [first.result().member_id, second.result().member_id]
    assert env.take() == [
        empty_group_record(0),
        joined(ids[0], 0, rebalance=300_000),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=ids[0]),
        joined(ids[1], 2_999, client="c2", rebalance=300_000),
        completed(1, ids, 6_000, started_at=0),
    ]


def test_acceptance_initial_delay_worked_example_capped_by_rebalance_timeout(env: Env) -> None:
    """§5.2 worked example: D=3000, R=6000; members at t=0, a third at t=3001; completes at t=6000."""
    a = join_new(env.gm, "g", client_id="a", rebalance_timeout_ms=6_000)
    b = join_new(env.gm, "g", client_id="b", rebalance_timeout_ms=6_000)
    env.advance(3_001)  # first expiry at 3000: remaining 3000 -> re-armed for 3000 with remaining 0
    assert env.timer.deadline("join-g") == 6_000
    c = join_new(env.gm, "g", client_id="c", rebalance_timeout_ms=6_000)  # would extend, but nothing remains
    env.advance(2_998)
    assert not a.done
    env.advance(1)
    assert env.now() == 6_000
    assert a.result().error is b.result().error is c.result().error is E.none
    assert len(a.result().members) == 3
    ids = [r.result().member_id for r in (a, b, c)]
    assert env.take() == [
        empty_group_record(0),
        joined(ids[0], 0, client="a", rebalance=6_000),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=ids[0]),
        joined(ids[1], 0, client="b", rebalance=6_000),
        joined(ids[2], 3_001, client="c", rebalance=6_000),
        completed(1, ids, 6_000, started_at=0),
    ]


def test_initial_delay_extensions_never_exceed_rebalance_timeout(env: Env) -> None:
    """D=3000, R=10000 with a new member in every period: 3000 -> 6000 -> 9000 -> 10000 (cap), then complete."""
    first = join_new(env.gm, "g", rebalance_timeout_ms=10_000)
    deadlines = [env.timer.deadline("join-g")]
    late = []
    for step in range(1, 40):
        env.advance(500)
        if first.done:
            break
        if step % 5 == 0:  # a new member every 2.5 s, so every delay period sees one
            late.append(join_new(env.gm, "g", client_id=f"late{step}", rebalance_timeout_ms=10_000))
        deadlines.append(env.timer.deadline("join-g"))
    assert first.done
    assert sorted(set(d for d in deadlines if d is not None)) == [3_000, 6_000, 9_000, 10_000]
    ids = [r.result().member_id for r in (first, *late)]
    assert len(ids) == 4  # late members at 2.5, 5 and 7.5 s
    assert env.take() == [
        empty_group_record(0),
        joined(ids[0], 0, rebalance=10_000),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=ids[0]),
        joined(ids[1], 2_500, client="late5", rebalance=10_000),
        joined(ids[2], 5_000, client="late10", rebalance=10_000),
        joined(ids[3], 7_500, client="late15", rebalance=10_000),
        completed(1, ids, 10_000, started_at=0),  # capped by the rebalance timeout
    ]


def test_initial_delay_remaining_uses_rebalance_timeout_at_start(env: Env) -> None:
    """R is taken when the rebalance starts; a later member with a larger timeout does not lengthen the cap."""
    first = join_new(env.gm, "g", rebalance_timeout_ms=3_000)  # remaining = 0
    second = join_new(env.gm, "g", client_id="c2", rebalance_timeout_ms=100_000)
    env.advance(3_000)
    assert first.done
    ids = [first.result().member_id, second.result().member_id]
    assert env.take() == [
        empty_group_record(0),
        joined(ids[0], 0, rebalance=3_000),
        started(0, RebalanceCause.NEW_MEMBER, 0, previous="Empty", member=ids[0]),
        joined(ids[1], 0, client="c2", rebalance=100_000),
        completed(1, ids, 3_000, started_at=0),  # not extended for the second member
    ]


# ------------------------------------------------------------------------------------------------------ logging
def test_log_lines_carry_the_group_as_a_field_and_name_the_cause(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="coordinator.group")
    sg = form_stable_group(env)
    join(env.gm, "g", sg.leader)
    records = [r for r in caplog.records if r.name == "coordinator.group"]
    assert records and all(getattr(r, "group", None) == "g" for r in records)
    assert not any("group=" in r.getMessage() for r in records)  # the group is a field, not in the text
    lines = [LogfmtFormatter().format(r) for r in records]
    assert not any("None" in line for line in lines)  # no instance id, no reason: left out, not written as None
    assert all(" group=g " in line for line in lines)
    lines = [r.getMessage() for r in records]
    assert any("because leader_rejoin" in line and f"generation {sg.generation}" in line for line in lines)


def test_members_sending_equal_protocols_share_one_copy_and_a_change_replaces_only_its_own(env: Env) -> None:
    """The members of a group hold the leader's protocol list, strings and timeouts when theirs are equal (memory: one
    copy a group, not a member); a member that rejoins with other metadata gets its own list, the others keep theirs."""

    def fresh(metadata: bytes) -> list[tuple[str, bytes]]:  # equal values, distinct objects, as decoded per request
        return [("".join(["ran", "ge"]), bytes(bytearray(metadata)))]

    for metadata in (b"sub", b"sub", b"sub", b"other"):
        pending = join(env.gm, "g", "", protocols=fresh(metadata)).result().member_id
        fresh_ms = int(str(SESSION_TIMEOUT_MS))  # not a cached small int: a new object a request, as decoded
        join(env.gm, "g", pending, protocols=fresh(metadata), client_id="".join(["cli", "ent"]),
             session_timeout_ms=fresh_ms, rebalance_timeout_ms=int(str(REBALANCE_TIMEOUT_MS)))  # fmt: skip
    members = list(env.group().members.values())
    assert [m.protocols for m in members] == [fresh(b"sub")] * 3 + [fresh(b"other")]
    assert members[1].protocols is members[0].protocols and members[2].protocols is members[0].protocols
    assert members[3].protocols is not members[0].protocols
    assert all(m.client_id is members[0].client_id and m.protocol_type is members[0].protocol_type for m in members)
    assert all(m.session_timeout_ms is members[0].session_timeout_ms for m in members)
    assert all(m.rebalance_timeout_ms is members[0].rebalance_timeout_ms for m in members)
    join(env.gm, "g", members[1].member_id, protocols=fresh(b"changed"))  # E5: rejoins while the join phase runs
    assert [m.protocols for m in members] == [fresh(b"sub"), fresh(b"changed"), fresh(b"sub"), fresh(b"other")]
    join(env.gm, "g", members[3].member_id, protocols=fresh(b"sub"))
    assert members[3].protocols is members[0].protocols


def test_a_member_added_from_a_pending_id_keeps_the_pending_ids_string_and_timer_key(env: Env) -> None:
    """One member id string and one session timer key a member: the pending id's, which the timer already holds,
    not the equal copies decoded from the rejoin (memory: ~150 bytes a member)."""
    pending = join(env.gm, "g", "").result().member_id
    join(env.gm, "g", "".join(list(pending)))  # the rejoin's id: an equal, distinct string
    (member,) = env.group().members.values()
    assert member.member_id is pending
    assert env.timer.held_key(("g", pending)) is member.heartbeat_key


def test_a_formed_group_does_not_keep_the_tables_its_pending_sets_grew_to(env: Env) -> None:
    """A set emptied by discards keeps the table it grew to; the pending join and sync sets are emptied once per
    rebalance, so a formed group keeps none (memory: ~1 KB a group of 10). The ten first JoinGroups arrive before
    any rejoin, as when real consumers start together: all ten pending ids are held at once."""
    firsts = [join(env.gm, "g", "", client_id=f"c{i}") for i in range(10)]
    replies = [join(env.gm, "g", first.result().member_id, client_id=f"c{i}") for i, first in enumerate(firsts)]
    env.run_until(lambda: all(r.done for r in replies))
    leader, generation = replies[0].result().leader, replies[0].result().generation_id
    members = [r.result().member_id for r in replies]
    syncs = [sync(env.gm, "g", m, generation, {m: b"a" for m in members} if m == leader else None) for m in members]
    env.run_until(lambda: all(s.done for s in syncs))
    group = env.group()
    assert not group.pending_join_members and not group.pending_sync_members
    assert (
        sys.getsizeof(group.pending_join_members) == sys.getsizeof(group.pending_sync_members) == sys.getsizeof(set())
    )
