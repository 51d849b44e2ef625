"""Fault isolation per group (issue #15, point 2): what a client sends can never leave a group stuck.

The duplicate-protocol JoinGroup, and the guard at the core's entry points: a handler or timer operation that
raises is answered (or dropped) cleanly, the offending member is removed, the group goes on and can still reach
Stable or Empty, and the records written agree with memory.
"""

from __future__ import annotations

from coordinator.core.group import GroupState
from protocol.errors import ErrorCode
from tests.core.clients import Client, settle
from tests.core.conftest import Env, form_stable_group, join_new

S = GroupState
E = ErrorCode
DUPLICATE = [("range", b"evil"), ("range", b"evil")]


def test_duplicate_protocol_names_count_once_and_the_group_goes_on(env: Env) -> None:
    """Kafka keys a member's protocols by name (``mapKey``): a name listed twice is one supported protocol."""
    clients = [Client(env, "g", f"c{i}") for i in range(2)]
    settle(env, "g", clients)
    evil = join_new(env.gm, "g", client_id="evil", protocols=DUPLICATE)  # and then it vanishes
    group = env.group()
    assert group.state is S.PREPARING_REBALANCE and group.supported_protocols["range"] == 3
    # the real members rejoin, are never told INCONSISTENT_GROUP_PROTOCOL, and end Stable without the attacker
    clients[0].step()
    clients[1].step()
    env.advance(1)
    assert evil.done and evil.result().error is E.none and evil.result().protocol_name == "range"
    settle(env, "g", clients)
    assert len(env.group().members) == 2


def test_duplicate_protocol_names_alone_in_a_group(env: Env) -> None:
    """The 115-byte JoinGroup on a fresh group id: the join phase completes with ``range`` selected."""
    reply = join_new(env.gm, "squat", client_id="evil", protocols=DUPLICATE)
    env.advance(3_000)  # the initial rebalance delay
    assert reply.result().error is E.none and reply.result().protocol_name == "range"
    env.advance(60_000)  # never syncs, then never heartbeats
    env.advance(10_000)
    assert env.group("squat").state is S.EMPTY
    # the group's real consumers can now have it
    form_stable_group(env, "squat")
