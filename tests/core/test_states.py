"""The five states, the transition table, and the group model's predicates (§1, §2, §6)."""

from __future__ import annotations

import pytest

from coordinator.deferred import Deferred
from coordinator.group import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    GroupState,
    IllegalStateTransition,
    Member,
    MemberValidationError,
)
from coordinator.messages import JoinGroupResult, SyncGroupResult
from protocol.errors import ErrorCode

S = GroupState

LEGAL = [
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.STABLE, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.EMPTY, S.DEAD),
    (S.DEAD, S.DEAD),  # Kafka's testDeadToDeadIllegalTransition asserts that this succeeds
]
ILLEGAL = [
    (S.EMPTY, S.STABLE),
    (S.EMPTY, S.COMPLETING_REBALANCE),
    (S.EMPTY, S.EMPTY),
    (S.STABLE, S.STABLE),
    (S.STABLE, S.EMPTY),
    (S.STABLE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.EMPTY),
    (S.DEAD, S.STABLE),
    (S.DEAD, S.PREPARING_REBALANCE),
    (S.DEAD, S.COMPLETING_REBALANCE),
    (S.DEAD, S.EMPTY),
]


def group_in(state: GroupState) -> ClassicGroup:
    g = ClassicGroup(group_id="g", created_ms=0)
    g.state = state
    return g


def test_table_covers_every_pair_exactly_once() -> None:
    pairs = {(a, b) for a in S for b in S}
    assert set(LEGAL) | set(ILLEGAL) == pairs
    assert not set(LEGAL) & set(ILLEGAL)


@pytest.mark.parametrize(("source", "target"), LEGAL)
def test_legal_transition(source: GroupState, target: GroupState) -> None:
    g = group_in(source)
    g.transition_to(target, 1234)
    assert g.state is target
    assert g.previous_state is source
    assert g.state_timestamp_ms == 1234


@pytest.mark.parametrize(("source", "target"), ILLEGAL)
def test_illegal_transition_raises(source: GroupState, target: GroupState) -> None:
    g = group_in(source)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(target, 1)
    assert g.state is source


def test_new_group_defaults() -> None:
    g = ClassicGroup(group_id="g", created_ms=42)
    assert (g.state, g.previous_state, g.generation_id) == (S.EMPTY, S.DEAD, 0)
    assert g.protocol_type is None and g.protocol_name is None and g.leader_id is None
    assert g.state_timestamp_ms == 42
    assert g.is_simple_group()


@pytest.mark.parametrize("state", list(S))
def test_can_rebalance(state: GroupState) -> None:
    assert group_in(state).can_rebalance() == (state in VALID_PREVIOUS_STATES[S.PREPARING_REBALANCE])
    assert group_in(state).can_rebalance() == (state in {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY})


@pytest.mark.parametrize(
    ("state", "display", "lower"),
    [
        (S.EMPTY, "Empty", "empty"),
        (S.PREPARING_REBALANCE, "PreparingRebalance", "preparingrebalance"),
        (S.COMPLETING_REBALANCE, "CompletingRebalance", "completingrebalance"),
        (S.STABLE, "Stable", "stable"),
        (S.DEAD, "Dead", "dead"),
    ],
)
def test_state_names(state: GroupState, display: str, lower: str) -> None:
    assert (state.display, state.lower) == (display, lower)


# ------------------------------------------------------------------------------------------------------ members
def member(mid: str, protocols: list[tuple[str, bytes]], instance: str | None = None) -> Member:
    return Member(mid, instance, "client", "host", 60_000, 10_000, "consumer", protocols)


def test_has_satisfied_heartbeat() -> None:
    m = member("m", [("range", b"")])
    m.join_reply = Deferred()
    assert not m.has_satisfied_heartbeat()  # new members never do (5-minute new-member timeout applies)
    m.is_new = False
    assert m.has_satisfied_heartbeat()
    m.join_reply = None
    assert not m.has_satisfied_heartbeat()
    m.sync_reply = Deferred()
    assert m.has_satisfied_heartbeat()


def test_matches_is_ordered_list_equality() -> None:
    m = member("m", [("range", b"a"), ("rr", b"b")])
    assert m.matches([("range", b"a"), ("rr", b"b")])
    assert not m.matches([("rr", b"b"), ("range", b"a")])
    assert not m.matches([("range", b"x"), ("rr", b"b")])


def test_select_protocol_majority_and_compatibility() -> None:
    g = ClassicGroup(group_id="g", created_ms=0)
    g.add(member("m1", [("range", b""), ("roundrobin", b"")]))
    g.add(member("m2", [("roundrobin", b""), ("range", b"")]))
    assert g.select_protocol() in {"range", "roundrobin"}  # 1-1 tie: either is Kafka-legal
    g.add(member("m3", [("roundrobin", b""), ("range", b"")]))
    assert g.select_protocol() == "roundrobin"

    h = ClassicGroup(group_id="h", created_ms=0)
    h.add(member("m1", [("range", b""), ("roundrobin", b"")]))
    h.add(member("m2", [("roundrobin", b""), ("foo", b"")]))
    assert h.select_protocol() == "roundrobin"  # the only protocol every member supports


def test_select_protocol_tie_is_deterministic() -> None:
    def build() -> ClassicGroup:
        g = ClassicGroup(group_id="g", created_ms=0)
        g.add(member("m1", [("range", b""), ("roundrobin", b"")]))
        g.add(member("m2", [("roundrobin", b""), ("range", b"")]))
        return g

    assert len({build().select_protocol() for _ in range(5)}) == 1


def test_select_protocol_on_empty_group_is_an_internal_error() -> None:
    with pytest.raises(IllegalStateTransition):
        ClassicGroup(group_id="g", created_ms=0).select_protocol()


def test_supports_protocols() -> None:
    g = ClassicGroup(group_id="g", created_ms=0)
    assert not g.supports_protocols("", ["range"])
    assert not g.supports_protocols("consumer", [])
    assert g.supports_protocols("consumer", ["range"])
    g.add(member("m1", [("range", b""), ("roundrobin", b"")]))
    g.add(member("m2", [("roundrobin", b"")]))
    assert g.supports_protocols("consumer", ["roundrobin"])
    assert g.supports_protocols("consumer", ["sticky", "roundrobin"])
    assert not g.supports_protocols("consumer", ["range"])  # not supported by every member
    assert not g.supports_protocols("connect", ["roundrobin"])  # other protocol type


def test_validate_member() -> None:
    g = ClassicGroup(group_id="g", created_ms=0)
    g.add(member("m1", [("range", b"")], instance="i1"))
    g.add(member("m2", [("range", b"")]))
    assert g.validate_member("m1", "i1").member_id == "m1"
    assert g.validate_member("m2", None).member_id == "m2"
    for mid, inst, code in [
        ("m1", "unknown-instance", ErrorCode.unknown_member_id),
        ("other", "i1", ErrorCode.fenced_instance_id),
        ("m2", "i1", ErrorCode.fenced_instance_id),
        ("nobody", None, ErrorCode.unknown_member_id),
    ]:
        with pytest.raises(MemberValidationError) as exc:
            g.validate_member(mid, inst)
        assert exc.value.error is code


def test_leader_and_counts_follow_add_and_remove() -> None:
    g = ClassicGroup(group_id="g", created_ms=0)
    g.add(member("m1", [("range", b"")]))
    g.add(member("m2", [("range", b"")]))
    assert g.leader_id == "m1" and g.protocol_type == "consumer"
    g.remove("m1")
    assert g.leader_id == "m2"
    assert g.supported_protocols["range"] == 1
    g.remove("m2")
    assert g.leader_id is None and not g.supported_protocols


def test_replace_static_member_moves_identity_and_fences_old_replies() -> None:
    g = ClassicGroup(group_id="g", created_ms=0)
    old = member("old", [("range", b"x")], instance="i")
    old.assignment = b"assigned"
    join_reply: Deferred[JoinGroupResult] = Deferred()
    g.add(old, join_reply)
    sync_reply: Deferred[SyncGroupResult] = Deferred()
    old.sync_reply = sync_reply
    g.pending_sync_members.add("old")
    new = g.replace_static_member("i", "old", "new")
    assert join_reply.result().error is ErrorCode.fenced_instance_id
    assert join_reply.result().member_id == "old"
    assert sync_reply.result().error is ErrorCode.fenced_instance_id
    assert g.num_members_awaiting_join == 0
    assert (g.leader_id, g.static_members, list(g.members)) == ("new", {"i": "new"}, ["new"])
    assert (new.assignment, new.protocols, new.is_new) == (b"assigned", [("range", b"x")], False)
    assert g.pending_sync_members == {"new"}
