"""Property tests of the pure core: generated request sequences never leave a group in a state it cannot leave.

Hypothesis (fixed seed: ``derandomize=True``) drives a ``GroupCoordinator`` on the manual clock and timer with
sequences of steps over two groups and a handful of clients: JoinGroup (no id, own id, another client's id, a bogus
id; static or dynamic; v0-v9; protocol lists with duplicates, empty names, other types; timeouts 0, negative,
2^31-1), SyncGroup (any generation, assignments naming unknown or duplicate members, huge ones), Heartbeat,
LeaveGroup (by id, by instance id), OffsetCommit, time passing, a client that vanishes (stops sending), a client
that behaves well for one step, and the operator's DeleteGroups and static-member removal.

After every step the invariants below hold (``check_invariants``), among them: no entry point raised (the guard's
fault counter is 0: a contained fault is still a bug to find), every reply handed out is completed or parked on a
member of a live phase, the group's bookkeeping matches its members, generations never go back, and a Stable or
Empty group replays from its records into the same state. At the end, the clients that did not vanish behave well
and time runs past every timeout: each group must reach Stable with exactly them, or Empty without any.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.deferred import Deferred
from coordinator.group import VALID_PREVIOUS_STATES, ClassicGroup, GroupState
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import (
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitPartition,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from coordinator.record_log import MemoryLog
from coordinator.records import GroupMetadataRecord, GroupTombstone
from protocol.errors import ErrorCode
from tests.core.clients import Client, is_settled, settle
from tests.core.conftest import Env, heartbeat, make_env

S = GroupState
E = ErrorCode
GROUPS = ("g", "h")
N_CLIENTS = 4
INT32_MAX = 2**31 - 1

# ------------------------------------------------------------------------------------------------ strategies
protocol_names = st.sampled_from(["range", "roundrobin", "sticky", "", "x" * 300])
protocol_lists = st.one_of(
    st.just([("range", b"range-meta"), ("roundrobin", b"rr-meta")]),
    st.lists(st.tuples(protocol_names, st.sampled_from([b"", b"m", b"\x00" * 1000])), max_size=4),
    st.just([("range", b"evil"), ("range", b"evil")]),  # the 115-byte JoinGroup
)
timeouts = st.sampled_from([0, -1, 1, 6_000, 10_000, 60_000, 300_000, INT32_MAX])
clients = st.integers(0, N_CLIENTS - 1)

join_step = st.tuples(
    st.just("join"),
    clients,
    st.sampled_from(["own", "none", "other", "bogus"]),
    st.sampled_from([None, "i0", "i1", ""]),  # the group.instance.id sent (may collide with a client's)
    protocol_lists,
    st.sampled_from(["consumer", "connect", ""]),
    timeouts,  # session timeout
    timeouts,  # rebalance timeout
    st.sampled_from([0, 3, 4, 5, 9]),
)
sync_step = st.tuples(
    st.just("sync"),
    clients,
    st.sampled_from([0, -1, 1]),  # generation offset from the client's own
    st.sampled_from(["none", "good", "unknown", "duplicate", "huge", "empty-id"]),
    st.sampled_from(["own", "other", "bogus"]),
)
heartbeat_step = st.tuples(st.just("heartbeat"), clients, st.sampled_from([0, -1, 1]))
leave_step = st.tuples(st.just("leave"), clients, st.sampled_from(["member", "instance", "both", "bogus"]))
commit_step = st.tuples(st.just("commit"), clients, st.sampled_from([0, -1, 1]))
advance_step = st.tuples(st.just("advance"), st.sampled_from([1, 500, 3_000, 6_000, 10_001, 60_000, 300_001]))
vanish_step = st.tuples(st.just("vanish"), clients)
behave_step = st.tuples(st.just("behave"), clients)
tick_step = st.tuples(st.just("tick"), st.sampled_from([1, 1_000, 3_000]))  # every live client steps, time passes
delete_step = st.tuples(st.just("delete"), st.sampled_from(GROUPS))
remove_static_step = st.tuples(st.just("remove_static"), st.sampled_from(GROUPS), st.sampled_from(["i0", "i1"]))
log_step = st.tuples(st.just("log"), st.sampled_from(["commit", "commit", "fail"]))  # when writes are not instant

steps = st.lists(
    st.one_of(
        join_step,
        sync_step,
        heartbeat_step,
        leave_step,
        commit_step,
        advance_step,
        vanish_step,
        behave_step,
        tick_step,
        tick_step,
        tick_step,
        delete_step,
        remove_static_step,
        log_step,
    ),
    min_size=10,
    max_size=80,
)
client_setups = st.lists(
    st.tuples(st.sampled_from(GROUPS), st.sampled_from([None, "i0", "i1"])), min_size=1, max_size=N_CLIENTS
)


# ------------------------------------------------------------------------------------------------ the world
@dataclass
class World:
    env: Env
    coord: GroupCoordinator
    clients: list[Client]
    vanished: set[int] = field(default_factory=set)
    writes_failed: bool = False
    replies: list[Deferred[Any]] = field(default_factory=list)
    generations: dict[str, tuple[ClassicGroup, int]] = field(default_factory=dict)  # group id -> (object, highest)

    def client(self, i: int) -> Client:
        return self.clients[i % len(self.clients)]

    def alive(self, i: int) -> bool:
        return i % len(self.clients) not in self.vanished

    def keep(self, reply: Deferred[Any]) -> Deferred[Any]:
        self.replies.append(reply)
        return reply


def make_world(setups: list[tuple[str, str | None]], instant_writes: bool = True) -> World:
    env = make_env(auto_commit=instant_writes)
    coord = GroupCoordinator(env.config, env.clock, env.timer, env.log, groups=env.gm)
    seen: set[tuple[str, str]] = set()
    cs = []
    for n, (group_id, instance_id) in enumerate(setups):
        if instance_id is not None and (group_id, instance_id) in seen:
            instance_id = None  # two well-behaved clients never share an instance id (they would fence each other)
        if instance_id is not None:
            seen.add((group_id, instance_id))
        cs.append(Client(env, group_id, f"c{n}", instance_id=instance_id))
    return World(env, coord, cs)


def run_step(w: World, step: tuple[Any, ...]) -> None:
    kind = step[0]
    gm = w.env.gm
    if kind == "advance":
        w.env.advance(step[1])
        return
    if kind == "tick":
        for n, c in enumerate(w.clients):
            if n not in w.vanished:
                c.step()
                for reply in (c.join_reply, c.sync_reply):
                    if reply is not None:
                        w.keep(reply)
        w.env.advance(step[1])
        return
    if kind == "log":
        if step[1] == "fail" and w.env.log.pending:
            w.writes_failed = True
            w.env.log.fail()
        elif not w.env.log.auto_commit:
            w.env.log.commit()
        return
    if kind == "delete":
        w.keep(w.coord.delete_groups([step[1]]))
        return
    if kind == "remove_static":
        w.keep(gm.remove_static_member(step[1], step[2], "operator"))
        return
    i = step[1] % len(w.clients)
    c = w.clients[i]
    if kind == "vanish":
        w.vanished.add(i)
        return
    if i in w.vanished:
        return  # a vanished client sends nothing more
    if kind == "behave":
        c.step()
        for reply in (c.join_reply, c.sync_reply):
            if reply is not None:
                w.keep(reply)
        return
    other = w.clients[(i + 1) % len(w.clients)]
    if kind == "join":
        _, _, id_choice, instance_id, protocols, protocol_type, session, rebalance, version = step
        member_id = {"own": c.member_id, "none": "", "other": other.member_id, "bogus": "nobody"}[id_choice]
        req = JoinGroupRequest(
            group_id=c.group_id,
            member_id=member_id,
            group_instance_id=instance_id if version >= 5 else None,
            protocol_type=protocol_type,
            protocols=list(protocols),
            session_timeout_ms=session,
            rebalance_timeout_ms=session if version == 0 else rebalance,
            client_id="hostile",
            client_host="/10.0.0.66",
            api_version=version,
        )
        w.keep(gm.join_group(req))  # fire and forget: the client's own loop is not told
    elif kind == "sync":
        _, _, gen_offset, shape, who = step
        sender = c if who == "own" else other
        member_id = "nobody" if who == "bogus" else sender.member_id
        group = gm.group(sender.group_id)
        members = list(group.members) if group is not None else []
        assignments: list[tuple[str, bytes]] = {
            "none": [],
            "good": [(m, b"a") for m in members],
            "unknown": [("ghost", b"a"), *((m, b"a") for m in members[:1])],
            "duplicate": [(m, b"a") for m in members] + [(m, b"b") for m in members],
            "huge": [(m, b"\x00" * 100_000) for m in members],
            "empty-id": [("", b"a")],
        }[shape]
        req = SyncGroupRequest(
            sender.group_id,
            sender.generation + gen_offset,
            member_id,
            sender.instance_id,
            "consumer",
            None,
            assignments,
            5,
        )
        w.keep(gm.sync_group(req))
    elif kind == "heartbeat":
        heartbeat(gm, c.group_id, c.member_id, c.generation + step[2], c.instance_id)
    elif kind == "leave":
        item = {
            "member": LeaveMember(c.member_id),
            "instance": LeaveMember("", c.instance_id),
            "both": LeaveMember(c.member_id, c.instance_id),
            "bogus": LeaveMember("nobody", "nobody"),
        }[step[2]]
        w.keep(gm.leave_group(LeaveGroupRequest(c.group_id, [item, item])))
    elif kind == "commit":
        parts = [OffsetCommitPartition("t", 0, 42)]
        req = OffsetCommitRequest(c.group_id, c.generation + step[2], c.member_id, c.instance_id, parts, 8)
        w.keep(w.coord.commit_offsets(req))
    else:  # pragma: no cover
        raise AssertionError(kind)


# ------------------------------------------------------------------------------------------------ invariants
def parked_replies(group: ClassicGroup) -> set[int]:
    out = set()
    for m in group.members.values():
        if m.join_reply is not None:
            out.add(id(m.join_reply))
        if m.sync_reply is not None:
            out.add(id(m.sync_reply))
    return out


def check_group(w: World, group: ClassicGroup) -> None:
    gid = group.group_id
    members = group.members
    assert group.state in VALID_PREVIOUS_STATES, group.state
    assert group.previous_state in VALID_PREVIOUS_STATES[group.state] or group.previous_state is S.DEAD, (
        gid,
        group.previous_state,
        group.state,
    )
    # bookkeeping derived from the members
    expected: Counter[str] = Counter()
    for m in members.values():
        expected.update({name for name, _ in m.protocols})
    assert group.supported_protocols == expected, (gid, group.supported_protocols, expected)
    assert group.num_members_awaiting_join == sum(m.join_reply is not None for m in members.values()), gid
    assert group.static_members == {
        m.group_instance_id: mid for mid, m in members.items() if m.group_instance_id is not None
    }, gid
    assert not (group.pending_join_members & members.keys()), gid
    assert group.pending_sync_members <= members.keys(), gid
    # leader, state and members
    if members:
        assert group.leader_id in members, (gid, group.leader_id)
        assert group.state is not S.EMPTY, gid
    else:
        assert group.leader_id is None, gid
        assert group.state in (S.EMPTY, S.PREPARING_REBALANCE), (gid, group.state)
    if group.state in (S.COMPLETING_REBALANCE, S.STABLE):
        assert group.protocol_name is not None and group.protocol_name in group.candidate_protocols(), gid
    # parked replies: pending, and only in the phase that answers them
    for m in members.values():
        if m.join_reply is not None:
            assert not m.join_reply.done, (gid, m.member_id)
            assert group.state is S.PREPARING_REBALANCE, (gid, group.state, "parked JoinGroup")
        if m.sync_reply is not None:
            assert not m.sync_reply.done, (gid, m.member_id)
            assert group.state is S.COMPLETING_REBALANCE, (gid, group.state, "parked SyncGroup")
        # a session timer, except for a member parked in a phase (Kafka: hasSatisfiedHeartbeat; its timer is armed
        # again when the phase answers it, and the phase itself is bounded by its timer or a write)
        parked = (m.join_reply is not None or m.sync_reply is not None) and not m.is_new
        assert parked or w.env.timer.is_scheduled(m.heartbeat_key), (gid, m.member_id, "no session timer")
    # a phase that waits has a timer that ends the wait
    if group.state is S.PREPARING_REBALANCE:
        assert w.env.timer.is_scheduled(f"join-{gid}"), (gid, "PreparingRebalance without a join timer")
    if group.state is S.COMPLETING_REBALANCE:  # the sync timer, or (the leader synced) the assignment write
        assert w.env.timer.is_scheduled(f"sync-{gid}") or group.assignment_write is not None, gid
    # generations never go back on one group object
    seen, last = w.generations.get(gid, (group, -1))
    if seen is group:  # a deleted group comes back as a new object, from generation 0
        assert group.generation_id >= last, (gid, last, group.generation_id)
    w.generations[gid] = (group, group.generation_id)


def check_replay(w: World) -> None:
    """A Stable or Empty group reloads from the records written so far into the same state."""
    if w.env.log.pending or w.writes_failed:
        # Records still in flight; or a write failed: then memory may be ahead of the log (e.g. a group that went
        # Empty while its Empty record failed) until a later write catches up, as before this work.
        return
    fresh = make_env()
    for record in w.env.records(GroupMetadataRecord, GroupTombstone):
        fresh.gm.replay(record)
    for gid in GROUPS:
        group = w.env.gm.group(gid)
        if group is None or group.state not in (S.STABLE, S.EMPTY):
            continue
        again = fresh.gm.group(gid)
        if again is None:
            # only a group never written (an offsets-only "simple" group) has no record
            assert group.state is S.EMPTY and group.generation_id == 0 and group.protocol_type is None, gid
            continue
        assert (again.state, again.generation_id, again.leader_id, again.protocol_name) == (
            group.state,
            group.generation_id,
            group.leader_id,
            group.protocol_name,
        ), gid
        assert {m: x.assignment for m, x in again.members.items()} == {
            m: x.assignment for m, x in group.members.items()
        }, gid
        assert again.static_members == group.static_members, gid
    # offsets, and whether each group exists at all: deletions (group at once, offsets once durable) included
    reloaded = GroupCoordinator(fresh.config, fresh.clock, fresh.timer, MemoryLog())
    for record in w.env.records():
        reloaded.replay(record)
    for gid in GROUPS:
        assert dict(reloaded.offsets.committed(gid)) == dict(w.coord.offsets.committed(gid)), gid
        assert (reloaded.groups.group(gid) is None) == (w.env.gm.group(gid) is None), gid


def check_invariants(w: World) -> None:
    assert w.env.gm.faults == 0, "an entry point raised (see the WARNING logged with the group id)"
    parked: set[int] = set()
    for gid in GROUPS:
        group = w.env.gm.group(gid)
        if group is not None:
            check_group(w, group)
            parked |= parked_replies(group)
    if not w.env.log.pending:  # (a reply may wait for a write in flight)
        for reply in w.replies:
            assert reply.done or id(reply) in parked, f"a reply neither completed nor parked on a member: {reply}"
        w.replies = [r for r in w.replies if not r.done]
    check_replay(w)


def settle_all(w: World) -> None:
    """The clients that did not vanish behave well and time passes: every group ends Stable or Empty."""
    for gid in GROUPS:
        survivors = [c for n, c in enumerate(w.clients) if c.group_id == gid and n not in w.vanished]
        for c in survivors:
            if c.join_reply is None and c.sync_reply is None and not c.synced:
                c.rejoin()
        settle(w.env, gid, survivors, limit_ms=3_600_000)
    # the vanished clients' sessions are long over: nothing but the survivors is left
    w.env.advance(INT32_MAX)
    for gid in GROUPS:
        survivors = [c for n, c in enumerate(w.clients) if c.group_id == gid and n not in w.vanished]
        settle(w.env, gid, survivors, limit_ms=3_600_000)
        assert is_settled(w.env, gid, survivors)
    check_invariants(w)


@settings(
    derandomize=True,
    deadline=None,
    max_examples=1_000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(setups=client_setups, start_stable=st.booleans(), instant_writes=st.booleans(), sequence=steps)
def test_generated_request_sequences_never_wedge_a_group(
    setups: list[tuple[str, str | None]], start_stable: bool, instant_writes: bool, sequence: list[tuple[Any, ...]]
) -> None:
    w = make_world(setups, instant_writes)
    if start_stable:  # most disruption worth finding happens to a group that is already serving
        for gid in GROUPS:
            settle(w.env, gid, [c for c in w.clients if c.group_id == gid])
    for step in sequence:
        run_step(w, step)
        check_invariants(w)
    settle_all(w)
