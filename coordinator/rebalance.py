"""The rebalance machinery shared by every classic-group handler: sessions, join/sync phases, member removal.

Kafka's internal operations of ``GroupMetadataManager``: ``prepareRebalance``, ``maybeCompleteJoinPhase``,
``completeClassicGroupJoin``, the initial rebalance delay, session expiry, pending-sync expiry and assignment
propagation, as plain functions over a shard's ``ClassicGroups``. The request handlers are ``coordinator.join``,
``sync``, ``heartbeat`` and ``leave``.

Rules of this module:

* One operation = one ``Result``. The functions here add their records and durability callbacks to the ``out``
  they are given; only entry points (the timer operations below, the handlers) write a result
  (``coordinator.writes.write``), once, after every in-memory change.
* Timers (keys ``heartbeat-<group>-<member>``, ``join-<group>``, ``sync-<group>``) capture the group object and
  re-validate when they fire (the group is still the registered one, not Dead, same generation for ``sync-``,
  member still present): stale timers are normal (docs/semantics.md §5.7).
* Nothing here reads the wall clock or sleeps; logging is lazy (%-style arguments).
* A timer operation that raises is handed to ``coordinator.faults.contain`` (the fault stays in its group). The try
  blocks cost nothing when nothing raises (CPython 3.11 zero-cost exceptions).
"""

from __future__ import annotations

import logging
from functools import partial

from protocol.errors import ErrorCode

from . import faults
from .classic_groups import ClassicGroups, random_uuid
from .group import ClassicGroup, GroupEvent, Member
from .group_records import group_metadata_record, member_removed
from .messages import JoinGroupResult, SyncGroupResult
from .records import JoinPhaseCompleted, RebalanceCause, RebalanceStarted, RemovalCause
from .result import Out
from .states import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, REBALANCE_EVENT

log = logging.getLogger("coordinator.group")

_NONE = ErrorCode.none

__all__ = ["heartbeat_key", "join_key", "random_uuid", "sync_key"]


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str]:
    """A member's (or a pending member id's) session timer key (``coordinator.clock.TimerKey``)."""
    return (group_id, member_id)


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


# ------------------------------------------------------------------------------------------------ session timers
class _ExpireMember:
    """``expire_member`` bound to one member: 56 bytes, where a ``partial`` takes 208 (itself, its argument tuple and
    an empty keywords dict), once per group member (1,000,000 members: 145 MB)."""

    __slots__ = ("group", "member_id", "shard")

    def __init__(self, shard: ClassicGroups, group: ClassicGroup, member_id: str) -> None:
        self.shard, self.group, self.member_id = shard, group, member_id

    def __call__(self) -> None:
        expire_member(self.shard, self.group, self.member_id)


def track(shard: ClassicGroups, group: ClassicGroup, member: Member, key: tuple[str, str] | None = None) -> None:
    """Build the member's timer key and expiry operation once, so heartbeats allocate nothing. ``key``: the key
    object of the member's pending id, which the timer holds (one tuple a member, not two)."""
    member.heartbeat_key = heartbeat_key(group.group_id, member.member_id) if key is None else key
    member.expire_op = _ExpireMember(shard, group, member.member_id)


def schedule_session(shard: ClassicGroups, member: Member, timeout_ms: int | None = None) -> None:
    op = member.expire_op
    if op is None:  # every member the handlers add or replay is tracked; anything else is a bug
        raise RuntimeError(f"member {member.member_id} has no session timer plumbing")
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    deadline = shard.clock.monotonic_ms() + timeout
    member.session_deadline_monotonic_ms = member.session_timer_monotonic_ms = deadline
    shard.timer.schedule(member.heartbeat_key, timeout, op)


def expire_member(shard: ClassicGroups, group: ClassicGroup, member_id: str) -> None:
    """Timer operation: session (heartbeat) expiry of a member or of a pending MEMBER_ID_REQUIRED id (§5.4)."""
    faults.run_guarded(shard, group, member_id, "session expiry", partial(_expire_member, shard, group, member_id))


def _expire_member(shard: ClassicGroups, group: ClassicGroup, member_id: str, out: Out) -> None:
    if not shard.is_current(group):
        return
    if member_id in group.pending_join_members:
        group.pending_join_members.discard(member_id)
        log.info("pending member expired before rejoining", extra={"group": group.group_id, "member": member_id})
        # NEW coordinator: may complete the join phase even during the initial delay.
        if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
            complete_join(shard, group, out)
        return
    member = group.members.get(member_id)
    if member is None:
        return
    remaining = member.session_deadline_monotonic_ms - shard.clock.monotonic_ms()
    if remaining > 0:  # heartbeats moved the deadline since this timer was armed: wait for it
        schedule_session(shard, member, remaining)
        return
    if member.has_satisfied_heartbeat():
        return
    log.info(
        "member session expired (generation %d)",
        group.generation_id,
        extra={"group": group.group_id, "member": member_id},
    )
    remove_member(shard, group, member, RemovalCause.SESSION_TIMEOUT, out)
    if group.accepts(GroupEvent.SESSION_TIMEOUT):
        prepare_rebalance(shard, group, RebalanceCause.SESSION_TIMEOUT, out, member)
    else:
        maybe_complete_join_now(shard, group, out)


# --------------------------------------------------------------------------------------------- removing members
def remove_member(
    shard: ClassicGroups,
    group: ClassicGroup,
    member: Member,
    cause: RemovalCause,
    out: Out,
    reason: str | None = None,
) -> None:
    """Remove a member: cancel its session timer, answer its parked requests, record why."""
    shard.timer.cancel(member.heartbeat_key)
    # A parked JoinGroup (new member expiring, member leaving mid-rebalance) is answered UNKNOWN_MEMBER_ID so
    # that a still-running client rejoins. Kafka leaves a parked SyncGroup of a leaving member unanswered; we
    # answer it the same way rather than leak it.
    group.complete_join_reply(member, JoinGroupResult(error=ErrorCode.unknown_member_id))
    group.complete_sync_reply(member, SyncGroupResult(error=ErrorCode.unknown_member_id))
    group.remove(member.member_id)
    out.records.append(member_removed(group, member, cause, reason, shard.clock.now_ms()))
    log.info("member removed: %s", cause.value, extra={"group": group.group_id, "member": member.member_id})


def remove_pending_member(shard: ClassicGroups, group: ClassicGroup, member_id: str) -> None:
    group.pending_join_members.discard(member_id)
    shard.timer.cancel(heartbeat_key(group.group_id, member_id))


def after_removal(
    shard: ClassicGroups,
    group: ClassicGroup,
    cause: RebalanceCause,
    out: Out,
    member_id: str | None,
    instance_id: str | None,
    reason: str | None,
) -> None:
    """Members were removed (LeaveGroup, an operator): rebalance, or end a join phase that now has everyone."""
    if group.accepts(REBALANCE_EVENT[cause]):
        prepare_rebalance(shard, group, cause, out, None, reason, member_id=member_id, group_instance_id=instance_id)
    elif group.state is PREPARING_REBALANCE:
        maybe_complete_join_phase(shard, group, out)


# ------------------------------------------------------------------------------------------------ join phase
def maybe_prepare_rebalance_or_complete_join(
    shard: ClassicGroups,
    group: ClassicGroup,
    cause: RebalanceCause,
    out: Out,
    member: Member | None = None,
    reason: str | None = None,
) -> None:
    if group.accepts(REBALANCE_EVENT[cause]):
        prepare_rebalance(shard, group, cause, out, member, reason)
    else:
        maybe_complete_join_phase(shard, group, out)


def prepare_rebalance(
    shard: ClassicGroups,
    group: ClassicGroup,
    cause: RebalanceCause,
    out: Out,
    member: Member | None = None,
    reason: str | None = None,
    *,
    member_id: str | None = None,
    group_instance_id: str | None = None,
) -> None:
    """Kafka's prepareRebalance (§4.1.5). ``member`` (or the ids) name who caused it, for the history."""
    now = shard.clock.now_ms()
    if group.state is COMPLETING_REBALANCE:
        reset_and_propagate_assignment_error(shard, group, ErrorCode.rebalance_in_progress)
    cancel_pending_sync(shard, group)
    initial = group.state is EMPTY
    if member is not None:
        member_id, group_instance_id = member.member_id, member.group_instance_id
    out.records.append(
        RebalanceStarted(
            group_id=group.group_id,
            generation_id=group.generation_id,
            cause=cause,
            member_id=member_id,
            group_instance_id=group_instance_id,
            reason=reason,
            previous_state=group.state.value,
            timestamp_ms=now,
        )
    )
    group.rebalance_started_ms = now
    log.info(
        "preparing rebalance from %s because %s (generation %d)",
        group.state.value,
        cause.value,
        group.generation_id,
        extra={"group": group.group_id, "member": member_id, "reason": reason},
    )
    if initial:
        _schedule_initial_delay(shard, group)
    group.apply(REBALANCE_EVENT[cause], now)
    if not initial:
        if group.has_all_members_joined():
            complete_join(shard, group, out)
        else:
            schedule_join_timer(shard, group)


def _schedule_initial_delay(shard: ClassicGroups, group: ClassicGroup) -> None:
    # Kafka never clears this flag between initial rebalances; a stale True would extend the next one.
    group.new_member_added = False
    delay = shard.config.initial_rebalance_delay_ms
    remaining = max(group.rebalance_timeout_ms() - delay, 0)
    shard.timer.schedule(
        join_key(group.group_id), delay, partial(on_initial_join_timer, shard, group, delay, remaining)
    )


def on_initial_join_timer(shard: ClassicGroups, group: ClassicGroup, delay: int, remaining: int) -> None:
    """Timer operation: the initial rebalance delay (§5.2), extended while new members keep arriving, up to the
    rebalance timeout."""
    operation = partial(_initial_join_timer, shard, group, delay, remaining)
    faults.run_guarded(shard, group, None, "initial join timer", operation)


def _initial_join_timer(shard: ClassicGroups, group: ClassicGroup, delay: int, remaining: int, out: Out) -> None:
    if not shard.is_current(group) or group.state is not PREPARING_REBALANCE:
        return
    if group.new_member_added and remaining != 0:
        group.new_member_added = False
        new_delay = min(shard.config.initial_rebalance_delay_ms, remaining)
        new_remaining = max(remaining - delay, 0)  # Kafka subtracts the previous delay
        op = partial(on_initial_join_timer, shard, group, new_delay, new_remaining)
        shard.timer.schedule(join_key(group.group_id), new_delay, op)
        return
    complete_join(shard, group, out)


def schedule_join_timer(shard: ClassicGroups, group: ClassicGroup, floor_ms: int = 0) -> None:
    op = partial(on_join_timer, shard, group)
    shard.timer.schedule(join_key(group.group_id), max(group.rebalance_timeout_ms(), floor_ms), op)


def on_join_timer(shard: ClassicGroups, group: ClassicGroup) -> None:
    """Timer operation: the join phase ends (members that did not rejoin are dropped)."""
    faults.run_guarded(shard, group, None, "join timer", partial(_join_timer, shard, group))


def _join_timer(shard: ClassicGroups, group: ClassicGroup, out: Out) -> None:
    if shard.is_current(group) and group.state is PREPARING_REBALANCE:
        complete_join(shard, group, out)


def maybe_complete_join_phase(shard: ClassicGroups, group: ClassicGroup, out: Out) -> None:
    """Complete now only outside the initial rebalance and once every member rejoined."""
    if group.state is PREPARING_REBALANCE and group.previous_state is not EMPTY and group.has_all_members_joined():
        complete_join(shard, group, out)


def maybe_complete_join_now(shard: ClassicGroups, group: ClassicGroup, out: Out) -> None:
    """Complete a join phase that now has everyone, the initial one included (a member or pending id is gone)."""
    if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
        complete_join(shard, group, out)


def complete_join(shard: ClassicGroups, group: ClassicGroup, out: Out) -> None:
    """Kafka's completeClassicGroupJoin (§4.1.5)."""
    shard.timer.cancel(join_key(group.group_id))
    # Dynamic members that did not rejoin are dropped; static ones stay (only a session timeout or a
    # LeaveGroup removes them).
    absent = [m for m in group.members.values() if not m.is_awaiting_join and not m.is_static]
    for member in absent:
        remove_member(shard, group, member, RemovalCause.JOIN_TIMEOUT, out)
    if group.state is DEAD:
        return
    if group.members and not group.maybe_elect_new_joined_leader():
        # Nobody rejoined (e.g. only static absentees): wait another rebalance timeout, but never less than the
        # shortest session: a member's rebalance timeout of 0 (or less) would re-arm this timer with no delay,
        # a busy loop until the absentees' sessions end.
        log.warning(
            "no member rejoined; extending the join phase",
            extra={"group": group.group_id, "throttle": ("no-rejoin", group.group_id)},
        )
        schedule_join_timer(shard, group, floor_ms=shard.config.min_session_timeout_ms)
        return
    now = shard.clock.now_ms()
    group.init_next_generation(now)  # JOIN_COMPLETED or ALL_MEMBERS_GONE
    started = group.rebalance_started_ms if group.rebalance_started_ms is not None else now
    group.join_completed_ms = now
    out.records.append(
        JoinPhaseCompleted(
            group_id=group.group_id,
            generation_id=group.generation_id,
            state=group.state.value,
            protocol_type=group.protocol_type,
            protocol=group.protocol_name,
            leader=group.leader_id,
            members=tuple(group.members),
            static_members=tuple(m.member_id for m in group.members.values() if m.is_static),
            join_duration_ms=now - started,
            timestamp_ms=now,
        )
    )
    if group.state is EMPTY:
        log.info(
            "join phase completed with no members: Empty (generation %d)",
            group.generation_id,
            extra={"group": group.group_id},
        )
        out.records.append(group_metadata_record(group, now))
        out.on_durable.append(partial(warn_on_failure, group.group_id, "empty group metadata"))
        return
    _start_sync_phase(shard, group)


def _start_sync_phase(shard: ClassicGroups, group: ClassicGroup) -> None:
    """Answer every parked JoinGroup with the new generation (the leader gets the members) and wait for SyncGroup."""
    log.info(
        "join phase completed: generation %d, protocol %s, leader %s, %d members",
        group.generation_id,
        group.protocol_name or "-",
        group.leader_id or "-",
        len(group.members),
        extra={"group": group.group_id},
    )
    leader_members = group.current_members()
    # Per member: the answer built positionally (JoinGroupResult's fields' order) from what the generation shares.
    generation, protocol_type, protocol_name = group.generation_id, group.protocol_type, group.protocol_name
    leader = group.leader_id or ""
    pending_sync = group.pending_sync_members
    for member in group.members.values():
        member_id = member.member_id
        members = leader_members if member_id == leader else []
        result = JoinGroupResult(_NONE, generation, protocol_type, protocol_name, leader, member_id, members)
        group.complete_join_reply(member, result)
        schedule_session(shard, member)
        member.is_new = False
        pending_sync.add(member_id)
    shard.timer.schedule(
        sync_key(group.group_id),
        group.rebalance_timeout_ms(),
        partial(on_sync_timer, shard, group, group.generation_id),
    )


# ------------------------------------------------------------------------------------------------ sync phase
def cancel_pending_sync(shard: ClassicGroups, group: ClassicGroup) -> None:
    group.pending_sync_members.clear()
    shard.timer.cancel(sync_key(group.group_id))


def remove_pending_sync_member(shard: ClassicGroups, group: ClassicGroup, member_id: str) -> None:
    pending = group.pending_sync_members
    pending.discard(member_id)
    if not pending:
        pending.clear()  # frees the table it grew to (emptied by discards, a set keeps it)
    if group.state in (DEAD, EMPTY, PREPARING_REBALANCE) or not pending:
        shard.timer.cancel(sync_key(group.group_id))


def on_sync_timer(shard: ClassicGroups, group: ClassicGroup, generation_id: int) -> None:
    """Timer operation: members that got their JoinGroup response but never sent SyncGroup are removed (§5.5)."""
    faults.run_guarded(shard, group, None, "sync timer", partial(_sync_timer, shard, group, generation_id))


def _sync_timer(shard: ClassicGroups, group: ClassicGroup, generation_id: int, out: Out) -> None:
    if not shard.is_current(group) or group.generation_id != generation_id:
        return
    if not group.accepts(GroupEvent.SYNC_TIMEOUT) or not group.pending_sync_members:
        return
    late = [group.members[mid] for mid in sorted(group.pending_sync_members) if mid in group.members]
    for member in late:
        remove_member(shard, group, member, RemovalCause.SYNC_TIMEOUT, out)
    group.pending_sync_members.clear()
    first = late[0] if late else None
    prepare_rebalance(shard, group, RebalanceCause.SYNC_TIMEOUT, out, first)


def propagate_assignment(shard: ClassicGroups, group: ClassicGroup, error: ErrorCode) -> None:
    """Answer every parked SyncGroup and re-arm the session timer of each member answered."""
    ok = error is ErrorCode.none
    protocol_type = group.protocol_type if ok else None
    protocol_name = group.protocol_name if ok else None
    for member in group.members.values():
        if member.sync_reply is not None:
            group.complete_sync_reply(member, SyncGroupResult(error, protocol_type, protocol_name, member.assignment))
            schedule_session(shard, member)


def reset_and_propagate_assignment_error(shard: ClassicGroups, group: ClassicGroup, error: ErrorCode) -> None:
    for member in group.members.values():
        member.assignment = b""
    propagate_assignment(shard, group, error)


# ------------------------------------------------------------------------------------------------ helpers
def warn_on_failure(group_id: str, what: str, error: ErrorCode | None) -> None:
    """A durability callback for writes nobody waits for: a failure is only logged."""
    if error is not None:
        log.warning(
            "failed to write %s: %s",
            what,
            error.name,
            extra={"group": group_id, "throttle": ("write-failed", what)},
        )
