"""The classic group's five states and, as data, which event moves a group from which states to which.

``TRANSITIONS`` is the table: one row per event, with the states the event may occur in and the state it leads to.
``ClassicGroup.apply`` validates a transition against it; the handlers name the event (``group.accepts(event)``
asks whether the event moves the group from its current state) instead of spelling state chains. The row ids
(R4, N6, E10, ...) of docs/semantics.md stay where the handlers decide which event happened.

``VALID_PREVIOUS_STATES`` (target -> states it may be entered from, Kafka's ClassicGroupState table) is derived from
``TRANSITIONS``, so the two cannot disagree.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from .records import RebalanceCause


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def display(self) -> str:
        return self.value

    @property
    def lower(self) -> str:
        return self.value.lower()


class GroupEvent(Enum):
    """What happens to a group. The first twelve start a rebalance; each is named after its ``RebalanceCause``
    (the cause the RebalanceStarted history record carries)."""

    NEW_MEMBER = "a new member joined (or a MEMBER_ID_REQUIRED id came back)"
    METADATA_CHANGE = "a member rejoined with changed protocols"
    LEADER_REJOIN = "the leader rejoined a Stable group"
    STATIC_MEMBER_REPLACED = "a static member came back under a new id while an assignment is pending or changes"
    MEMBER_LEFT = "a member left (LeaveGroup)"
    PENDING_MEMBER_LEFT = "a MEMBER_ID_REQUIRED id left (LeaveGroup)"
    ADMIN_ACTION = "an operator or admin client removed a member"
    SESSION_TIMEOUT = "a member's session expired"
    SYNC_TIMEOUT = "members did not send SyncGroup within the rebalance timeout"
    SYNC_WRITE_FAILED = "the leader's assignment could not be written"
    GROUP_TOO_LARGE = "the group was loaded with more members than group.max.size"
    INTERNAL_ERROR = "an operation on the group raised and was contained"
    JOIN_COMPLETED = "the join phase ended with members: a new generation, waiting for the assignment"
    ALL_MEMBERS_GONE = "the join phase ended with no member left: a new, empty generation"
    ASSIGNMENT_DURABLE = "the leader's assignment is durable: every member gets its share"
    DROPPED = "the group was deleted, expired or unloaded"


class Transition(NamedTuple):
    sources: frozenset[GroupState]
    target: GroupState


_E = GroupState.EMPTY
_P = GroupState.PREPARING_REBALANCE
_C = GroupState.COMPLETING_REBALANCE
_S = GroupState.STABLE
_D = GroupState.DEAD

_MEMBERSHIP_CHANGED = frozenset({_S, _C})  # an assignment exists or is being computed: it is void now

TRANSITIONS: dict[GroupEvent, Transition] = {
    GroupEvent.NEW_MEMBER: Transition(frozenset({_E, _S, _C}), _P),  # from Empty: the initial (delayed) rebalance
    GroupEvent.METADATA_CHANGE: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.LEADER_REJOIN: Transition(frozenset({_S}), _P),
    GroupEvent.STATIC_MEMBER_REPLACED: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.MEMBER_LEFT: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.PENDING_MEMBER_LEFT: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.ADMIN_ACTION: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.SESSION_TIMEOUT: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.SYNC_TIMEOUT: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.SYNC_WRITE_FAILED: Transition(frozenset({_C}), _P),
    GroupEvent.GROUP_TOO_LARGE: Transition(_MEMBERSHIP_CHANGED, _P),
    GroupEvent.INTERNAL_ERROR: Transition(frozenset({_E, _S, _C}), _P),
    GroupEvent.JOIN_COMPLETED: Transition(frozenset({_P}), _C),
    GroupEvent.ALL_MEMBERS_GONE: Transition(frozenset({_P}), _E),
    GroupEvent.ASSIGNMENT_DURABLE: Transition(frozenset({_C}), _S),
    # Kafka allows Dead -> Dead (its testDeadToDeadIllegalTransition asserts that it succeeds).
    GroupEvent.DROPPED: Transition(frozenset({_E, _P, _C, _S, _D}), _D),
}


def _previous_states() -> dict[GroupState, frozenset[GroupState]]:
    previous: dict[GroupState, frozenset[GroupState]] = {state: frozenset() for state in GroupState}
    for sources, target in TRANSITIONS.values():
        previous[target] = previous[target] | sources
    return previous


# target state -> states it may be entered from (Kafka's ClassicGroupState), derived from TRANSITIONS
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = _previous_states()


# The event each rebalance cause names (same member name); a dict, since joins look it up per request.
REBALANCE_EVENT: dict[RebalanceCause, GroupEvent] = {cause: GroupEvent[cause.name] for cause in RebalanceCause}


def rebalance_event(cause: RebalanceCause) -> GroupEvent:
    return REBALANCE_EVENT[cause]


# The states as module constants: the handlers import these (a global load is cheaper than an Enum class attribute
# on the JoinGroup/SyncGroup/Heartbeat paths).
EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


class IllegalStateTransition(RuntimeError):
    """An internal error: the coordinator tried a transition the table forbids."""
