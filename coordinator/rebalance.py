"""The rebalance machinery shared by every classic-group request: timers, join/sync phases, member removal, records.

``RebalanceEngine`` is the base of ``coordinator.groups.GroupManager``; it holds the groups, the injected
clock/timer/log and Kafka's internal operations (``GroupMetadataManager``): ``prepareRebalance``,
``maybeCompleteJoinPhase``, ``completeClassicGroupJoin``, the initial rebalance delay, session expiry, pending-sync
expiry and assignment propagation. The request handlers live in ``groups.py``.

Rules of this module:

* One operation = one batch of records. Every entry point (request, timer expiry, log callback) collects the
  records it produces with ``_emit`` and ends with ``_flush()``, which appends them as one batch. Callbacks that
  must wait for durability register with ``_on_durable`` and ride on that batch. ``RecordLog.append`` may call
  back synchronously, so ``_flush`` swaps the buffer out before appending and callbacks flush their own records.
* Timers (keys ``heartbeat-<group>-<member>``, ``join-<group>``, ``sync-<group>``) capture the group object and
  re-validate when they fire (the group is still the registered one, not Dead, same generation for ``sync-``,
  member still present): stale timers are normal (docs/semantics.md §5.7).
* Nothing here reads the wall clock or sleeps; logging is lazy (%-style arguments).
* A fault stays in its group. Every entry point (request handler, timer operation, log callback) catches what it
  raises and hands it to ``_contain``: the records already emitted are flushed (they describe changes already made
  in memory), the member the operation was about is removed, the group's derived bookkeeping is rebuilt from its
  members and a fresh rebalance starts; if even that raises, the group is reset to Empty (every member answered
  UNKNOWN_MEMBER_ID so that it rejoins, an Empty GroupMetadataRecord written so that a replay agrees). The fault is
  logged once, with the group id, at WARNING (throttled per group): the input came from a client. The try blocks
  cost nothing when nothing raises (CPython 3.11 zero-cost exceptions).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial

from protocol.errors import ErrorCode

from .clock import Clock, Timer
from .config import GroupConfig
from .deferred import Deferred
from .group import ClassicGroup, GroupState, Member
from .messages import JoinGroupResult, SyncGroupResult
from .record_log import OnDone, RecordLog
from .records import (
    GroupMetadataRecord,
    GroupStabilized,
    JoinPhaseCompleted,
    MemberJoined,
    MemberMetadata,
    MemberRemoved,
    RebalanceCause,
    RebalanceStarted,
    Record,
    RemovalCause,
    new_group_metadata_record,
)

log = logging.getLogger("coordinator.group")

EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


# The RFC 4122 variant bits (10xx) of a v4 UUID's 17th hex digit, from any random digit.
_VARIANT_DIGIT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def random_uuid() -> str:
    """``str(uuid.uuid4())``: 122 random bits from ``os.urandom`` in the version-4 text form, without the ``UUID``
    object (every JoinGroup without a member id needs one: 4x cheaper, ~22,000 -> ~5,000 instructions)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT_DIGIT[h[16]]}{h[17:20]}-{h[20:]}"


class RebalanceEngine:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        timer: Timer,
        log: RecordLog,
        *,
        new_uuid: Callable[[], str] = random_uuid,
    ) -> None:
        self._config = config
        self._clock = clock
        self._timer = timer
        self._log = log
        self._new_uuid = new_uuid
        self._groups: dict[str, ClassicGroup] = {}
        # Groups removed by a deletion whose tombstone is not durable yet, per id in removal order (groups.py).
        self._removing: dict[str, list[GroupMetadataRecord]] = {}
        self._batch: list[Record] = []
        self._batch_done: list[OnDone] = []
        self.faults = 0  # operations that raised and were contained (tests assert none happen)

    # ------------------------------------------------------------------------------------------- record batches
    def _emit(self, record: Record) -> None:
        self._batch.append(record)

    def _on_durable(self, callback: OnDone) -> None:
        """Call ``callback`` once the records of the current operation are durable (or failed)."""
        self._batch_done.append(callback)

    def _flush(self) -> None:
        if not self._batch and not self._batch_done:
            return
        records, self._batch = self._batch, []
        callbacks, self._batch_done = self._batch_done, []
        if not records:
            # Nothing was written by this operation, so there is nothing to wait for.
            for cb in callbacks:
                cb(None)
        elif not callbacks:
            self._log.append(records)
        elif len(callbacks) == 1:
            self._log.append(records, callbacks[0])
        else:

            def on_done(error: ErrorCode | None) -> None:
                for cb in callbacks:
                    cb(error)

            self._log.append(records, on_done)

    def _group_metadata_record(
        self, group: ClassicGroup, now: int, assignments: dict[str, bytes] | None = None
    ) -> GroupMetadataRecord:
        """Kafka's newGroupMetadataRecord: every member with its selected-protocol metadata and an assignment."""
        protocol = group.protocol_name
        members = [
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata_or_empty(protocol),
                assignment=m.assignment if assignments is None else assignments.get(m.member_id, b""),
            )
            for m in group.members.values()
        ]
        return new_group_metadata_record(
            group.group_id,
            protocol_type=group.protocol_type,
            generation_id=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp_ms=group.state_timestamp_ms,
            members=members,
            now_ms=now,
        )

    # ------------------------------------------------------------------------------------------------ lookups
    def _is_current(self, group: ClassicGroup) -> bool:
        """A timer or log callback still concerns a live group (not dropped, replaced or Dead)."""
        return self._groups.get(group.group_id) is group and group.state is not DEAD

    def _new_group(self, group_id: str, now: int) -> ClassicGroup:
        group = ClassicGroup(group_id=group_id, created_ms=now)
        self._groups[group_id] = group
        return group

    # ------------------------------------------------------------------------------------------ session timers
    def _track(self, group: ClassicGroup, member: Member) -> None:
        """Build the member's timer key and expiry operation once, so heartbeats allocate nothing."""
        member.heartbeat_key = heartbeat_key(group.group_id, member.member_id)
        member.expire_op = partial(self._expire_member, group, member.member_id)

    def _schedule_session(self, member: Member, timeout_ms: int | None = None) -> None:
        op = member.expire_op
        if op is None:  # every member the manager adds or replays is tracked; anything else is a bug
            raise RuntimeError(f"member {member.member_id} has no session timer plumbing")
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        deadline = self._clock.monotonic_ms() + timeout
        member.session_deadline_monotonic_ms = member.session_timer_monotonic_ms = deadline
        self._timer.schedule(member.heartbeat_key, timeout, op)

    def _expire_member(self, group: ClassicGroup, member_id: str) -> None:
        """Session (heartbeat) expiry of a member or a pending MEMBER_ID_REQUIRED id (§5.4)."""
        try:
            self._expire_member_now(group, member_id)
        except Exception as exc:
            self._contain(group, member_id, "session expiry", exc)

    def _expire_member_now(self, group: ClassicGroup, member_id: str) -> None:
        if not self._is_current(group):
            return
        if member_id in group.pending_join_members:
            group.pending_join_members.discard(member_id)
            log.info("[group=%s] pending member %s expired before rejoining", group.group_id, member_id)
            # NEW coordinator: may complete the join phase even during the initial delay.
            if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group)
            self._flush()
            return
        member = group.members.get(member_id)
        if member is None:
            return
        remaining = member.session_deadline_monotonic_ms - self._clock.monotonic_ms()
        if remaining > 0:  # heartbeats moved the deadline since this timer was armed: wait for it
            self._schedule_session(member, remaining)
            return
        if member.has_satisfied_heartbeat():
            return
        log.info("[group=%s] member %s session expired (generation %d)", group.group_id, member_id, group.generation_id)
        self._remove_member(group, member, RemovalCause.SESSION_TIMEOUT)
        if group.state is STABLE or group.state is COMPLETING_REBALANCE:
            self._prepare_rebalance(group, RebalanceCause.SESSION_TIMEOUT, member)
        elif group.state is PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group)
        self._flush()

    # ---------------------------------------------------------------------------------------- adding/removing
    def _add_member(
        self,
        group: ClassicGroup,
        member: Member,
        join_reply: Deferred[JoinGroupResult] | None,
        reason: str | None,
    ) -> None:
        """Kafka's addMemberThenRebalanceOrCompleteJoin (§4.1.4)."""
        now = self._clock.now_ms()
        member.is_new = True
        member.joined_at_ms = now
        member.last_heartbeat_monotonic_ms = self._clock.monotonic_ms()
        if group.state is PREPARING_REBALANCE and group.previous_state is EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay (§5.2)
        group.add(member, join_reply)
        self._track(group, member)
        # A new member cannot heartbeat while its JoinGroup is parked: it gets the new-member join timeout.
        self._schedule_session(member, self._config.new_member_join_timeout_ms)
        self._emit_member_joined(group, member, now)
        log.info(
            "[group=%s] member %s joined (instance %s)", group.group_id, member.member_id, member.group_instance_id
        )
        self._maybe_prepare_rebalance_or_complete_join(group, RebalanceCause.NEW_MEMBER, member, reason)

    def _remove_member(
        self,
        group: ClassicGroup,
        member: Member,
        cause: RemovalCause,
        reason: str | None = None,
    ) -> None:
        """Remove a member: cancel its session timer, answer its parked requests, record why."""
        self._timer.cancel(member.heartbeat_key)
        # A parked JoinGroup (new member expiring, member leaving mid-rebalance) is answered UNKNOWN_MEMBER_ID so
        # that a still-running client rejoins. Kafka leaves a parked SyncGroup of a leaving member unanswered; we
        # answer it the same way rather than leak it.
        group.complete_join_reply(member, JoinGroupResult(error=ErrorCode.unknown_member_id))
        group.complete_sync_reply(member, SyncGroupResult(error=ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        self._emit_member_removed(group, member, cause, reason, self._clock.now_ms())
        log.info("[group=%s] member %s removed: %s", group.group_id, member.member_id, cause.value)

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_join_members.discard(member_id)
        self._timer.cancel(heartbeat_key(group.group_id, member_id))

    # -------------------------------------------------------------------------------------- rebalance phases
    def _maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, cause: RebalanceCause, member: Member | None = None, reason: str | None = None
    ) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, cause, member, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(
        self,
        group: ClassicGroup,
        cause: RebalanceCause,
        member: Member | None = None,
        reason: str | None = None,
        *,
        member_id: str | None = None,
        group_instance_id: str | None = None,
    ) -> None:
        """Kafka's prepareRebalance (§4.1.5). ``member`` (or the ids) name who caused it, for the history."""
        now = self._clock.now_ms()
        if group.state is COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._cancel_pending_sync(group)
        initial = group.state is EMPTY
        if member is not None:
            member_id, group_instance_id = member.member_id, member.group_instance_id
        self._emit(
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
            "[group=%s] preparing rebalance from %s because %s (member %s, reason %s, generation %d)",
            group.group_id,
            group.state.value,
            cause.value,
            member_id,
            reason,
            group.generation_id,
        )
        if initial:
            # Kafka never clears this flag between initial rebalances; a stale True would extend the next one.
            group.new_member_added = False
            delay = self._config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._timer.schedule(
                join_key(group.group_id), delay, partial(self._on_initial_join_timer, group, delay, remaining)
            )
        group.transition_to(PREPARING_REBALANCE, now)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _on_initial_join_timer(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        """The initial rebalance delay (§5.2): extend while new members keep arriving, up to the rebalance timeout."""
        try:
            self._initial_join_timer_now(group, delay, remaining)
        except Exception as exc:
            self._contain(group, None, "initial join timer", exc)

    def _initial_join_timer_now(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if not self._is_current(group) or group.state is not PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self._config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)  # Kafka subtracts the previous delay
            self._timer.schedule(
                join_key(group.group_id),
                new_delay,
                partial(self._on_initial_join_timer, group, new_delay, new_remaining),
            )
            return
        self._complete_join(group)
        self._flush()

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            self._schedule_join_timer(group)

    def _schedule_join_timer(self, group: ClassicGroup, floor_ms: int = 0) -> None:
        op = partial(self._on_join_timer, group)
        self._timer.schedule(join_key(group.group_id), max(group.rebalance_timeout_ms(), floor_ms), op)

    def _on_join_timer(self, group: ClassicGroup) -> None:
        try:
            if not self._is_current(group) or group.state is not PREPARING_REBALANCE:
                return
            self._complete_join(group)
            self._flush()
        except Exception as exc:
            self._contain(group, None, "join timer", exc)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        """Complete now only outside the initial rebalance and once every member rejoined."""
        if group.state is PREPARING_REBALANCE and group.previous_state is not EMPTY and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """Kafka's completeClassicGroupJoin (§4.1.5)."""
        self._timer.cancel(join_key(group.group_id))
        # Dynamic members that did not rejoin are dropped; static ones stay (only a session timeout or a
        # LeaveGroup removes them).
        absent = [m for m in group.members.values() if not m.is_awaiting_join and not m.is_static]
        for member in absent:
            self._remove_member(group, member, RemovalCause.JOIN_TIMEOUT)
        if group.state is DEAD:
            return
        if group.members and not group.maybe_elect_new_joined_leader():
            # Nobody rejoined (e.g. only static absentees): wait another rebalance timeout, but never less than the
            # shortest session: a member's rebalance timeout of 0 (or less) would re-arm this timer with no delay,
            # a busy loop until the absentees' sessions end.
            log.warning(
                "[group=%s] no member rejoined; extending the join phase",
                group.group_id,
                extra={"throttle": ("no-rejoin", group.group_id)},
            )
            self._schedule_join_timer(group, floor_ms=self._config.min_session_timeout_ms)
            return
        now = self._clock.now_ms()
        group.init_next_generation(now)
        started = group.rebalance_started_ms if group.rebalance_started_ms is not None else now
        group.join_completed_ms = now
        self._emit(
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
                "[group=%s] join phase completed with no members: Empty (generation %d)",
                group.group_id,
                group.generation_id,
            )
            self._emit(self._group_metadata_record(group, now))
            self._on_durable(partial(self._warn_on_failure, group.group_id, "empty group metadata"))
            return
        log.info(
            "[group=%s] join phase completed: generation %d, protocol %s, leader %s, %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            len(group.members),
        )
        leader_members = group.current_members()
        for member in group.members.values():
            is_leader = member.member_id == group.leader_id
            group.complete_join_reply(
                member,
                JoinGroupResult(
                    error=ErrorCode.none,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=group.leader_id or "",
                    member_id=member.member_id,
                    members=leader_members if is_leader else [],
                ),
            )
            self._schedule_session(member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._timer.schedule(
            sync_key(group.group_id),
            group.rebalance_timeout_ms(),
            partial(self._on_sync_timer, group, group.generation_id),
        )

    # ------------------------------------------------------------------------------------------- sync phase
    def _cancel_pending_sync(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self._timer.cancel(sync_key(group.group_id))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (DEAD, EMPTY, PREPARING_REBALANCE) or not group.pending_sync_members:
            self._timer.cancel(sync_key(group.group_id))

    def _on_sync_timer(self, group: ClassicGroup, generation_id: int) -> None:
        """Members that got their JoinGroup response but never sent SyncGroup are removed (§5.5)."""
        try:
            self._sync_timer_now(group, generation_id)
        except Exception as exc:
            self._contain(group, None, "sync timer", exc)

    def _sync_timer_now(self, group: ClassicGroup, generation_id: int) -> None:
        if not self._is_current(group) or group.generation_id != generation_id:
            return
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync_members:
            return
        late = [group.members[mid] for mid in sorted(group.pending_sync_members) if mid in group.members]
        for member in late:
            self._remove_member(group, member, RemovalCause.SYNC_TIMEOUT)
        group.pending_sync_members.clear()
        first = late[0] if late else None
        self._prepare_rebalance(group, RebalanceCause.SYNC_TIMEOUT, first)
        self._flush()

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        """Answer every parked SyncGroup and re-arm the session timer of each member answered."""
        ok = error is ErrorCode.none
        protocol_type = group.protocol_type if ok else None
        protocol_name = group.protocol_name if ok else None
        for member in group.members.values():
            if member.sync_reply is not None:
                group.complete_sync_reply(
                    member, SyncGroupResult(error, protocol_type, protocol_name, member.assignment)
                )
                self._schedule_session(member)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _stabilized_records(self, group: ClassicGroup, assignments: dict[str, bytes], now: int) -> list[Record]:
        join_done = group.join_completed_ms if group.join_completed_ms is not None else now
        started = group.rebalance_started_ms if group.rebalance_started_ms is not None else join_done
        return [
            self._group_metadata_record(group, now, assignments),
            GroupStabilized(
                group_id=group.group_id,
                generation_id=group.generation_id,
                sync_duration_ms=now - join_done,
                rebalance_duration_ms=now - started,
                timestamp_ms=now,
            ),
        ]

    # ---------------------------------------------------------------------------------------------- history
    def _emit_member_joined(self, group: ClassicGroup, member: Member, now: int) -> None:
        self._emit(
            MemberJoined(
                group_id=group.group_id,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                protocols=tuple(member.protocol_names()),
                session_timeout_ms=member.session_timeout_ms,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                timestamp_ms=now,
            )
        )

    def _emit_member_removed(
        self, group: ClassicGroup, member: Member, cause: RemovalCause, reason: str | None, now: int
    ) -> None:
        self._emit(
            MemberRemoved(
                group_id=group.group_id,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                cause=cause,
                reason=reason,
                generation_id=group.generation_id,
                timestamp_ms=now,
            )
        )

    # -------------------------------------------------------------------------------------------- fault isolation
    def _contain(self, group: ClassicGroup | str, member_id: str | None, what: str, exc: Exception) -> None:
        """An entry point of ``group`` raised ``exc``: leave the group in a state it can leave (see the module rules).

        ``member_id`` names the member the operation was about (None for a group timer); it is removed. Never
        raises: a fault must not reach the listener, the timer or the log that called us.
        """
        self.faults += 1
        group_id = group if isinstance(group, str) else group.group_id
        log.warning(
            "[group=%s] %s failed (%s: %s); removing member %s and restarting the rebalance",
            group_id,
            what,
            type(exc).__name__,
            exc,
            member_id,
            exc_info=exc,
            extra={"throttle": ("group-fault", group_id)},
        )
        try:
            # The records so far describe changes already made in memory: write them, so memory and log agree.
            self._flush()
        except Exception:
            self._batch, self._batch_done = [], []
        live = self._groups.get(group_id)
        if live is None or live.state is DEAD or (not isinstance(group, str) and live is not group):
            return
        try:
            self._repair(live, member_id)
            self._flush()
        except Exception as again:
            log.warning(
                "[group=%s] recovery failed (%s: %s); resetting the group to Empty",
                group_id,
                type(again).__name__,
                again,
                extra={"throttle": ("group-fault", group_id)},
            )
            self._batch, self._batch_done = [], []
            self._reset_to_empty(live)
            try:
                self._flush()
            except Exception:
                self._batch, self._batch_done = [], []

    def _repair(self, group: ClassicGroup, member_id: str | None) -> None:
        """Remove the offender, rebuild the derived bookkeeping from the members, and rebalance."""
        if member_id:
            offender = group.members.get(member_id)
            if offender is not None:
                self._remove_member(group, offender, RemovalCause.INTERNAL_ERROR)
            elif member_id in group.pending_join_members:
                self._remove_pending_member(group, member_id)
        # Members that could never take part in a protocol selection go too (no protocol, another protocol type).
        unfit = [
            m for m in group.members.values() if not m.protocols or (m.protocol_type or None) != group.protocol_type
        ]
        for member in unfit:
            self._remove_member(group, member, RemovalCause.INTERNAL_ERROR)
        _rebuild_bookkeeping(group)
        if group.members and not group.candidate_protocols():
            raise RuntimeError("the remaining members share no protocol")
        if not group.members and group.state is not PREPARING_REBALANCE:
            if group.state is not EMPTY:
                self._prepare_rebalance(group, RebalanceCause.INTERNAL_ERROR)
            return
        if group.state is not PREPARING_REBALANCE:
            self._prepare_rebalance(group, RebalanceCause.INTERNAL_ERROR)
            return
        self._cancel_pending_sync(group)
        if group.has_all_members_joined():
            self._complete_join(group)
        else:
            self._schedule_join_timer(group)

    def _reset_to_empty(self, group: ClassicGroup) -> None:
        """The last resort: every member out (answered UNKNOWN_MEMBER_ID, so it rejoins), Empty, a new generation.

        Written without the transition table or any helper that could raise again.
        """
        now = self._clock.now_ms()
        for key in (join_key(group.group_id), sync_key(group.group_id)):
            self._timer.cancel(key)
        for member_id in list(group.members) + list(group.pending_join_members):
            self._timer.cancel(heartbeat_key(group.group_id, member_id))
        for member in group.members.values():
            join_reply, sync_reply = member.join_reply, member.sync_reply
            member.join_reply = member.sync_reply = None
            try:
                if join_reply is not None:
                    join_reply.resolve(JoinGroupResult(error=ErrorCode.unknown_member_id))
                if sync_reply is not None:
                    sync_reply.resolve(SyncGroupResult(error=ErrorCode.unknown_member_id))
            except Exception:
                log.warning("[group=%s] a parked reply raised when answered", group.group_id, exc_info=True)
            self._emit_member_removed(group, member, RemovalCause.INTERNAL_ERROR, None, now)
        group.members.clear()
        group.static_members.clear()
        group.pending_join_members.clear()
        group.pending_sync_members.clear()
        group.supported_protocols.clear()
        group.num_members_awaiting_join = 0
        group.leader_id = None
        group.protocol_name = None
        group.subscribed_topics = None
        group.new_member_added = False
        group.generation_id += 1
        group.previous_state, group.state, group.state_timestamp_ms = group.state, EMPTY, now
        self._emit(self._group_metadata_record(group, now))
        self._on_durable(partial(self._warn_on_failure, group.group_id, "reset group metadata"))

    # ---------------------------------------------------------------------------------------------- helpers
    @staticmethod
    def _warn_on_failure(group_id: str, what: str, error: ErrorCode | None) -> None:
        if error is not None:
            log.warning(
                "[group=%s] failed to write %s: %s",
                group_id,
                what,
                error.name,
                extra={"throttle": ("write-failed", what)},
            )


def _rebuild_bookkeeping(group: ClassicGroup) -> None:
    """Recompute what ``ClassicGroup`` derives from its members (counts, static map, leader, pending syncs)."""
    group.supported_protocols.clear()
    for member in group.members.values():
        for name in dict.fromkeys(name for name, _ in member.protocols):
            group.supported_protocols[name] += 1
    group.num_members_awaiting_join = sum(1 for m in group.members.values() if m.join_reply is not None)
    group.static_members = {
        m.group_instance_id: m.member_id for m in group.members.values() if m.group_instance_id is not None
    }
    group.pending_join_members -= group.members.keys()
    group.pending_sync_members &= group.members.keys()
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
