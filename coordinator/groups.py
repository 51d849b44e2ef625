"""The classic group state machine: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static membership, load.

``GroupManager`` is the entry point (the other helpers code against it). It follows Kafka's new group coordinator
(``GroupMetadataManager``) rule by rule; the section numbers (§) and row ids (R4, N6, E10, S9, H6, L3 ...) refer to
``docs/semantics.md``. The shared rebalance machinery (timers, join completion, removal, record batches) is
in ``coordinator.rebalance``.

What is durable and who waits for it:

* JoinGroup and Heartbeat never wait on the log. Joins append history records (and, for a brand-new group, the
  "empty group" GroupMetadataRecord) without waiting.
* The leader's SyncGroup appends the GroupMetadataRecord with every assignment; the group becomes Stable and the
  parked SyncGroups are answered only once it is durable.
* A static member replacing itself in a Stable group waits for its GroupMetadataRecord and is reverted on failure.
* LeaveGroup (and ``remove_static_member``) resolve once the records of that leave are durable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import fields
from functools import partial

from protocol.errors import ErrorCode

from .deferred import Deferred, resolved
from .group import ClassicGroup, GroupState, IllegalStateTransition, Member, MemberValidationError
from .messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResult,
    LeaveGroupRequest,
    LeaveGroupResult,
    LeaveMemberResult,
    SyncGroupRequest,
    SyncGroupResult,
)
from .rebalance import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    RebalanceEngine,
    heartbeat_key,
    join_key,
    sync_key,
)
from .records import (
    GroupMetadataRecord,
    GroupTombstone,
    RebalanceCause,
    Record,
    RemovalCause,
    new_empty_group_record,
)

log = logging.getLogger("coordinator.group")

_NONE = ErrorCode.none
_UNKNOWN_MEMBER_ID = ErrorCode.unknown_member_id
_FENCED_INSTANCE_ID = ErrorCode.fenced_instance_id
_ILLEGAL_GENERATION = ErrorCode.illegal_generation
_REBALANCE_IN_PROGRESS = ErrorCode.rebalance_in_progress
_COORDINATOR_NOT_AVAILABLE = ErrorCode.coordinator_not_available
_INVALID_GROUP_ID = ErrorCode.invalid_group_id
_INCONSISTENT_GROUP_PROTOCOL = ErrorCode.inconsistent_group_protocol

# First JoinGroup version that requires a known member id (KIP-394) and that supports skipping assignment.
_MEMBER_ID_REQUIRED_VERSION = 4
_SKIP_ASSIGNMENT_VERSION = 9


class GroupManager(RebalanceEngine):
    """Kafka's classic group coordinator for one set of groups (one coordinator shard), pure and single-threaded."""

    # __init__(config, clock, timer, log, *, new_uuid=...) is RebalanceEngine's; ``new_uuid`` makes ids testable.

    # ============================================================================================== JoinGroup
    def join_group(self, req: JoinGroupRequest) -> Deferred[JoinGroupResult]:
        reply: Deferred[JoinGroupResult] = Deferred()
        if not req.group_id:
            reply.resolve(JoinGroupResult(error=_INVALID_GROUP_ID, member_id=req.member_id))
            return reply
        cfg = self._config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            self._log_join_refused(
                req,
                ErrorCode.invalid_session_timeout,
                f"session timeout {req.session_timeout_ms} ms outside group.min/max.session.timeout.ms "
                f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}]",
            )
            reply.resolve(JoinGroupResult(error=ErrorCode.invalid_session_timeout, member_id=req.member_id))
            return reply
        try:
            self._join(req, reply)
            self._flush()
        except Exception as exc:
            self._contain(req.group_id, self._subject_of(req.group_id, req.member_id, reply), "JoinGroup", exc)
            reply.resolve(
                JoinGroupResult(error=self._fault_error(req.group_id, req.member_id), member_id=req.member_id)
            )
        return reply

    @staticmethod
    def _log_join_refused(req: JoinGroupRequest, error: ErrorCode, detail: str) -> None:
        """A JoinGroup turned away for the client's configuration: logged once per group and cause (throttled), so
        the refusal leaves a trace besides kgc_join_refused_total."""
        log.warning(
            "[group=%s] JoinGroup refused: %s: %s; member %s client_id %s client_host %s",
            req.group_id,
            error.name.upper(),
            detail,
            req.member_id or "(new)",
            req.client_id or "(none)",
            req.client_host or "(unknown)",
            extra={"throttle": ("join-refused", req.group_id, error)},
        )

    @staticmethod
    def _protocols_refused(group: ClassicGroup, req: JoinGroupRequest) -> str:
        names = ",".join(name for name, _ in req.protocols) or "(none)"
        offered = f"protocol type {req.protocol_type or '(empty)'} with protocols {names}"
        if not group.members:
            return f"{offered}: a group needs a protocol type and at least one protocol"
        common = ",".join(sorted(group.candidate_protocols())) or "(none)"
        return f"{offered}: the group has type {group.protocol_type or '(empty)'} and protocols {common}"

    def _subject_of(self, group_id: str, member_id: str, reply: Deferred[JoinGroupResult]) -> str | None:
        """The member a failed JoinGroup was about: its id, or the new member the request had just added."""
        if member_id:
            return member_id
        group = self._groups.get(group_id)
        if group is not None:
            for member in group.members.values():
                if member.join_reply is reply:
                    return member.member_id
        return None

    def _fault_error(self, group_id: str, member_id: str) -> ErrorCode:
        """What a request that raised is answered: errors on which a real client rejoins rather than gives up
        (the Java consumer treats UNKNOWN_SERVER_ERROR in Join/Sync/Heartbeat as fatal to its poll)."""
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return _UNKNOWN_MEMBER_ID
        return _REBALANCE_IN_PROGRESS

    def _join(self, req: JoinGroupRequest, reply: Deferred[JoinGroupResult]) -> None:
        now = self._clock.now_ms()
        group = self._groups.get(req.group_id)
        created = False
        if group is None:
            if req.member_id:  # R5: a member id for a group that does not exist
                reply.resolve(JoinGroupResult(error=_UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = self._new_group(req.group_id, now)  # R4
            created = True
        mark = len(self._batch)
        if not self._accept_joining_member(group, req.member_id):  # R6
            self._evict(group, req.member_id)
            self._log_join_refused(
                req, ErrorCode.group_max_size_reached, f"group.max.size {self._config.max_size} reached"
            )
            reply.resolve(JoinGroupResult(error=ErrorCode.group_max_size_reached))
        elif not req.member_id:
            self._join_new_member(group, req, reply)
        else:
            self._join_existing_member(group, req, reply)
        if created and not any(isinstance(r, GroupMetadataRecord) for r in self._batch[mark:]):
            # The new coordinator commits a brand-new group with an "empty group" record; nobody waits for it.
            self._batch.insert(mark, new_empty_group_record(group.group_id, now_ms=now))
            self._on_durable(partial(self._warn_on_failure, group.group_id, "new group metadata"))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka's acceptJoiningMember (group.max.size)."""
        state = group.state
        if state is EMPTY or state is DEAD:
            return True
        max_size = self._config.max_size
        if state is PREPARING_REBALANCE:
            member = group.members.get(member_id)
            # The awaiting count is used: the last rejoiners of an over-sized group are the ones turned away.
            return (member is not None and member.is_awaiting_join) or group.num_members_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _evict(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is not None:
            log.info(
                "[group=%s] member %s evicted: group.max.size %d reached",
                group.group_id,
                member_id,
                self._config.max_size,
            )
            self._remove_member(group, member, RemovalCause.GROUP_MAX_SIZE)
        elif member_id in group.pending_join_members:
            self._remove_pending_member(group, member_id)

    def _join_new_member(self, group: ClassicGroup, req: JoinGroupRequest, reply: Deferred[JoinGroupResult]) -> None:
        """§4.1.2: JoinGroup with member id ""."""
        if group.state is DEAD:  # N1
            reply.resolve(JoinGroupResult(error=_COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):  # N2
            self._log_join_refused(req, _INCONSISTENT_GROUP_PROTOCOL, self._protocols_refused(group, req))
            reply.resolve(JoinGroupResult(error=_INCONSISTENT_GROUP_PROTOCOL))
            return
        instance_id = req.group_instance_id
        new_member_id = f"{req.client_id if instance_id is None else instance_id}-{self._new_uuid()}"  # N3
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:  # N4
                self._replace_static_member(group, req, old_member_id, new_member_id, reply)
            else:  # N5: static members never get MEMBER_ID_REQUIRED
                self._add_member(group, self._member_from(req, new_member_id), reply, req.reason)
        elif req.api_version >= _MEMBER_ID_REQUIRED_VERSION:  # N6
            group.pending_join_members.add(new_member_id)
            self._timer.schedule(
                heartbeat_key(group.group_id, new_member_id),
                req.session_timeout_ms,
                partial(self._expire_member, group, new_member_id),
            )
            reply.resolve(JoinGroupResult(error=ErrorCode.member_id_required, member_id=new_member_id))
        else:  # N7
            self._add_member(group, self._member_from(req, new_member_id), reply, req.reason)

    @staticmethod
    def _member_from(req: JoinGroupRequest, member_id: str) -> Member:
        return Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
        )

    def _join_existing_member(
        self, group: ClassicGroup, req: JoinGroupRequest, reply: Deferred[JoinGroupResult]
    ) -> None:
        """§4.1.3: JoinGroup with a member id."""
        member_id = req.member_id
        if group.state is DEAD:  # E1
            reply.resolve(JoinGroupResult(error=_COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):  # E2
            self._log_join_refused(req, _INCONSISTENT_GROUP_PROTOCOL, self._protocols_refused(group, req))
            reply.resolve(JoinGroupResult(error=_INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if member_id in group.pending_join_members:  # E3
            if req.group_instance_id is not None:
                # Kafka: IllegalStateException (a pending id is never static) -> UNKNOWN_SERVER_ERROR on the wire.
                reply.resolve(JoinGroupResult(error=ErrorCode.unknown_server_error, member_id=member_id))
                return
            self._add_member(group, self._member_from(req, member_id), reply, req.reason)
            return
        try:  # E4
            member = group.validate_member(member_id, req.group_instance_id)
        except MemberValidationError as e:
            reply.resolve(JoinGroupResult(error=e.error, member_id=member_id))
            return
        state = group.state
        if state is PREPARING_REBALANCE:  # E5 (no new rebalance starts, so the cause is never recorded)
            self._update_member_then_rebalance_or_complete_join(
                group, member, req, reply, RebalanceCause.METADATA_CHANGE
            )
        elif state is COMPLETING_REBALANCE:
            if member.matches(req.protocols):  # E6: e.g. the client missed its JoinGroup response
                is_leader = group.is_leader(member_id)
                reply.resolve(self._current_generation_result(group, member_id, with_members=is_leader))
            else:  # E7
                self._update_member_then_rebalance_or_complete_join(
                    group, member, req, reply, RebalanceCause.METADATA_CHANGE
                )
        elif state is STABLE:
            if group.is_leader(member_id):  # E8: the leader may force a rebalance (e.g. topic metadata change)
                self._update_member_then_rebalance_or_complete_join(
                    group, member, req, reply, RebalanceCause.LEADER_REJOIN
                )
            elif not member.matches(req.protocols):  # E9
                self._update_member_then_rebalance_or_complete_join(
                    group, member, req, reply, RebalanceCause.METADATA_CHANGE
                )
            else:  # E10: unchanged follower, answer at once with the current generation
                reply.resolve(self._current_generation_result(group, member_id, with_members=False))
        else:  # E11: Empty
            reply.resolve(JoinGroupResult(error=_UNKNOWN_MEMBER_ID, member_id=member_id))

    @staticmethod
    def _current_generation_result(group: ClassicGroup, member_id: str, *, with_members: bool) -> JoinGroupResult:
        return JoinGroupResult(
            error=_NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member_id,
            members=group.current_members() if with_members else [],
        )

    def _update_member_then_rebalance_or_complete_join(
        self,
        group: ClassicGroup,
        member: Member,
        req: JoinGroupRequest,
        reply: Deferred[JoinGroupResult],
        cause: RebalanceCause,
    ) -> None:
        self._supersede_join(member)
        group.update_member(member, list(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms, reply)
        self._maybe_prepare_rebalance_or_complete_join(group, cause, member, req.reason)

    @staticmethod
    def _supersede_join(member: Member) -> None:
        """A second JoinGroup replaces a parked one; answer the old one instead of leaving it dangling."""
        if member.join_reply is not None:
            member.join_reply.resolve(JoinGroupResult(error=_REBALANCE_IN_PROGRESS, member_id=member.member_id))

    # ------------------------------------------------------------------------------------- static membership
    def _replace_static_member(
        self,
        group: ClassicGroup,
        req: JoinGroupRequest,
        old_member_id: str,
        new_member_id: str,
        reply: Deferred[JoinGroupResult],
    ) -> None:
        """§7.2: a known group.instance.id joins with member id "": the new id replaces (fences) the old one."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        now = self._clock.now_ms()
        previous_leader = group.leader_id
        old_member = group.members[old_member_id]
        self._timer.cancel(old_member.heartbeat_key)
        new_member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._emit_member_removed(group, old_member, RemovalCause.FENCED, req.reason, now)
        self._track(group, new_member)
        self._schedule_session(new_member)
        saved = (new_member.protocols, new_member.rebalance_timeout_ms, new_member.session_timeout_ms)
        group.update_member(new_member, list(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms, reply)
        self._emit_member_joined(group, new_member, now)
        log.info(
            "[group=%s] static member %s replaced %s (instance %s) in %s",
            group.group_id,
            new_member_id,
            old_member_id,
            instance_id,
            group.state.value,
        )
        state = group.state
        if state is STABLE:
            if group.select_protocol() == group.protocol_name:
                # No rebalance: persist the new member id with the current assignments, answer once durable.
                self._emit(self._group_metadata_record(group, now))
                self._on_durable(
                    partial(
                        self._on_static_member_written,
                        group,
                        instance_id,
                        old_member_id,
                        new_member,
                        saved,
                        previous_leader,
                        req.api_version,
                        reply,
                    )
                )
            else:
                self._prepare_rebalance(group, RebalanceCause.STATIC_MEMBER_REPLACED, new_member, req.reason)
        elif state is COMPLETING_REBALANCE:
            # The leader may already be computing an assignment for the old id.
            self._prepare_rebalance(group, RebalanceCause.STATIC_MEMBER_REPLACED, new_member, req.reason)
        elif state is PREPARING_REBALANCE:
            self._maybe_complete_join_phase(group)
        else:
            raise IllegalStateTransition(f"group {group.group_id}: static member replaced in {state.value}")

    def _on_static_member_written(
        self,
        group: ClassicGroup,
        instance_id: str,
        old_member_id: str,
        new_member: Member,
        saved: tuple[list[tuple[str, bytes]], int, int],
        previous_leader: str | None,
        api_version: int,
        reply: Deferred[JoinGroupResult],
        error: ErrorCode | None,
    ) -> None:
        try:
            self._static_member_written(
                group, instance_id, old_member_id, new_member, saved, previous_leader, api_version, reply, error
            )
        except Exception as exc:
            self._contain(group, new_member.member_id, "static member write completion", exc)
            reply.resolve(JoinGroupResult(error=self._fault_error(group.group_id, new_member.member_id)))

    def _static_member_written(
        self,
        group: ClassicGroup,
        instance_id: str,
        old_member_id: str,
        new_member: Member,
        saved: tuple[list[tuple[str, bytes]], int, int],
        previous_leader: str | None,
        api_version: int,
        reply: Deferred[JoinGroupResult],
        error: ErrorCode | None,
    ) -> None:
        new_member_id = new_member.member_id
        live = self._is_current(group) and group.members.get(new_member_id) is new_member
        if error is not None:
            log.warning(
                "[group=%s] failed to persist static member %s (instance %s): %s; reverting",
                group.group_id,
                new_member_id,
                instance_id,
                error.name,
                extra={"throttle": ("write-failed", "static member")},
            )
            if live and group.static_members.get(instance_id) == new_member_id:
                protocols, rebalance_timeout_ms, session_timeout_ms = saved
                group.update_member(new_member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
                self._timer.cancel(new_member.heartbeat_key)
                old_member = group.replace_static_member(instance_id, new_member_id, old_member_id)
                self._track(group, old_member)
                self._schedule_session(old_member)
            reply.resolve(
                JoinGroupResult(
                    error=error,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=previous_leader or "",
                    member_id="",
                )
            )
            self._flush()
            return
        if not live or new_member.join_reply is not reply or group.state is not STABLE:
            return  # removed, superseded, or a rebalance started meanwhile: that rebalance answers it
        if api_version >= _SKIP_ASSIGNMENT_VERSION:
            # v9+: a replaced leader is told it is the leader but must not compute a new assignment.
            is_leader = group.is_leader(new_member_id)
            result = self._current_generation_result(group, new_member_id, with_members=is_leader)
            result.skip_assignment = is_leader
        else:
            # v<9: report the leader from before the replacement so a replaced leader does not reassign.
            result = self._current_generation_result(group, new_member_id, with_members=False)
            result.leader = previous_leader or ""
        group.complete_join_reply(new_member, result)

    # ============================================================================================== SyncGroup
    def sync_group(self, req: SyncGroupRequest) -> Deferred[SyncGroupResult]:
        try:
            return self._sync(req)
        except Exception as exc:
            self._contain(req.group_id, req.member_id, "SyncGroup", exc)
            return resolved(SyncGroupResult(error=self._fault_error(req.group_id, req.member_id)))

    def _sync(self, req: SyncGroupRequest) -> Deferred[SyncGroupResult]:
        if not req.group_id:
            return resolved(SyncGroupResult(error=_INVALID_GROUP_ID))
        group = self._groups.get(req.group_id)
        if group is None or group.state is EMPTY:  # S1, S2
            return resolved(SyncGroupResult(error=_UNKNOWN_MEMBER_ID))
        if group.state is DEAD:  # S3
            return resolved(SyncGroupResult(error=_COORDINATOR_NOT_AVAILABLE))
        try:  # S4
            member = group.validate_member(req.member_id, req.group_instance_id)
        except MemberValidationError as e:
            return resolved(SyncGroupResult(error=e.error))
        if req.generation_id != group.generation_id:  # S5
            return resolved(SyncGroupResult(error=_ILLEGAL_GENERATION))
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):  # S6
            return resolved(SyncGroupResult(error=_INCONSISTENT_GROUP_PROTOCOL))
        if group.state is PREPARING_REBALANCE:  # S7
            return resolved(SyncGroupResult(error=_REBALANCE_IN_PROGRESS))
        if group.state is STABLE:  # S10
            self._remove_pending_sync_member(group, member.member_id)
            return resolved(SyncGroupResult(_NONE, group.protocol_type, group.protocol_name, member.assignment))
        # S8/S9: CompletingRebalance - park until the leader's assignment is durable.
        reply: Deferred[SyncGroupResult] = Deferred()
        if member.sync_reply is not None:
            member.sync_reply.resolve(SyncGroupResult(error=_REBALANCE_IN_PROGRESS))  # superseded duplicate
        member.sync_reply = reply
        self._remove_pending_sync_member(group, member.member_id)
        if group.is_leader(member.member_id):
            now = self._clock.now_ms()
            given = dict(req.assignments)
            unknown = [mid for mid in given if mid not in group.members]
            if unknown:
                log.debug("[group=%s] leader assigned unknown members %s (ignored)", group.group_id, unknown)
            assignments = {mid: given.get(mid, b"") for mid in group.members}
            log.info(
                "[group=%s] leader %s sent the assignment for generation %d",
                group.group_id,
                member.member_id,
                group.generation_id,
            )
            for record in self._stabilized_records(group, assignments, now):
                self._emit(record)
            write = group.assignment_write = object()
            self._on_durable(
                partial(self._on_assignment_written, group, group.generation_id, assignments, member, write)
            )
            self._flush()
        return reply

    def _on_assignment_written(
        self,
        group: ClassicGroup,
        generation_id: int,
        assignments: dict[str, bytes],
        leader: Member,
        write: object,
        error: ErrorCode | None,
    ) -> None:
        try:
            self._assignment_written(group, generation_id, assignments, leader, write, error)
        except Exception as exc:
            self._contain(group, None, "assignment write completion", exc)

    def _assignment_written(
        self,
        group: ClassicGroup,
        generation_id: int,
        assignments: dict[str, bytes],
        leader: Member,
        write: object,
        error: ErrorCode | None,
    ) -> None:
        # Another member may have joined (or left) while the write was in flight: only act on the same
        # generation still waiting for its assignment, and on the leader's latest assignment of it.
        if not self._is_current(group) or group.state is not COMPLETING_REBALANCE:
            return
        if group.generation_id != generation_id or group.assignment_write is not write:
            return
        group.assignment_write = None
        if error is None:
            for member in group.members.values():
                member.assignment = assignments.get(member.member_id, b"")
            self._propagate_assignment(group, _NONE)
            group.transition_to(STABLE, self._clock.now_ms())
            log.info("[group=%s] stable at generation %d", group.group_id, group.generation_id)
        else:
            log.warning(
                "[group=%s] failed to persist the assignment of generation %d: %s",
                group.group_id,
                generation_id,
                error.name,
                extra={"throttle": ("write-failed", "assignment")},
            )
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance_or_complete_join(group, RebalanceCause.SYNC_WRITE_FAILED, leader, error.name)
        self._flush()

    # ============================================================================================== Heartbeat
    def heartbeat(self, req: HeartbeatRequest) -> ErrorCode:
        """H1-H8. The hot path: a few dict lookups and the member's new session deadline; no timer call, no log."""
        return self.heartbeat_fields(req.group_id, req.generation_id, req.member_id, req.group_instance_id)

    def heartbeat_fields(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """``heartbeat`` without the request object (the server's Heartbeat path builds none)."""
        try:  # free unless it raises (zero-cost exceptions); the hot path stays as it was
            if not group_id:  # checked first: OffsetCommit may create a simple group with the empty id
                return _INVALID_GROUP_ID
            group = self._groups.get(group_id)
            if group is None:  # H1
                return _UNKNOWN_MEMBER_ID
            state = group.state
            if state is DEAD:  # H2
                return _COORDINATOR_NOT_AVAILABLE
            if instance_id is not None:  # H3 (validateMember, inlined)
                mapped = group.static_members.get(instance_id)
                if mapped is None:
                    return _UNKNOWN_MEMBER_ID
                if mapped != member_id:
                    return _FENCED_INSTANCE_ID
            member = group.members.get(member_id)
            if member is None:
                return _UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:  # H4
                return _ILLEGAL_GENERATION
            if state is EMPTY:  # H5 (unreachable: an Empty group has no members)
                return _UNKNOWN_MEMBER_ID
            # No timer call: the member's armed session timer finds the later deadline when it fires (_expire_member).
            now = self._clock.monotonic_ms()
            member.last_heartbeat_monotonic_ms = now
            deadline = member.session_deadline_monotonic_ms = now + member.session_timeout_ms
            if deadline < member.session_timer_monotonic_ms:  # armed for longer (new-member join timeout): bring it in
                self._schedule_session(member)
            return _REBALANCE_IN_PROGRESS if state is PREPARING_REBALANCE else _NONE  # H6 / H7, H8
        except Exception as exc:
            self._contain(group_id, member_id, "Heartbeat", exc)
            return self._fault_error(group_id, member_id)

    # ============================================================================================= LeaveGroup
    def leave_group(self, req: LeaveGroupRequest) -> Deferred[LeaveGroupResult]:
        try:
            return self._leave(req)
        except Exception as exc:
            self._contain(req.group_id, None, "LeaveGroup", exc)
            return resolved(LeaveGroupResult(error=ErrorCode.unknown_server_error))

    def _leave(self, req: LeaveGroupRequest) -> Deferred[LeaveGroupResult]:
        if not req.group_id:
            return resolved(LeaveGroupResult(error=_INVALID_GROUP_ID))
        group = self._groups.get(req.group_id)
        if group is None:  # L1
            unknown = [LeaveMemberResult(m.member_id, m.group_instance_id, _UNKNOWN_MEMBER_ID) for m in req.members]
            return resolved(LeaveGroupResult(error=_NONE, members=unknown))
        if group.state is DEAD:  # L2
            return resolved(LeaveGroupResult(error=_COORDINATOR_NOT_AVAILABLE))
        results: list[LeaveMemberResult] = []
        trigger: tuple[RebalanceCause, str | None, str | None, str | None] | None = None  # cause, member, inst, reason
        for item in req.members:
            error = _NONE
            if not item.member_id:
                holder = group.static_member_id(item.group_instance_id)
                if holder is not None:  # L3: removal by instance id (admin client)
                    self._remove_member(group, group.members[holder], RemovalCause.ADMIN, item.reason)
                    if trigger is None or trigger[0] is RebalanceCause.PENDING_MEMBER_LEFT:
                        trigger = (RebalanceCause.ADMIN_ACTION, holder, item.group_instance_id, item.reason)
                else:  # L4
                    error = _UNKNOWN_MEMBER_ID
            elif item.member_id in group.pending_join_members:  # L5
                self._remove_pending_member(group, item.member_id)
                log.info("[group=%s] pending member %s left", group.group_id, item.member_id)
                if trigger is None:
                    trigger = (RebalanceCause.PENDING_MEMBER_LEFT, item.member_id, None, item.reason)
            else:
                try:  # L6
                    member = group.validate_member(item.member_id, item.group_instance_id)
                except MemberValidationError as e:
                    error = e.error
                else:  # L7
                    self._remove_member(group, member, RemovalCause.LEFT, item.reason)
                    if trigger is None or trigger[0] is not RebalanceCause.MEMBER_LEFT:
                        trigger = (RebalanceCause.MEMBER_LEFT, member.member_id, member.group_instance_id, item.reason)
            results.append(LeaveMemberResult(item.member_id, item.group_instance_id, error))
        if trigger is not None:  # L8
            self._after_removal(group, *trigger)
        result = LeaveGroupResult(error=_NONE, members=results)
        reply: Deferred[LeaveGroupResult] = Deferred()
        self._on_durable(partial(_resolve_leave, reply, result))
        self._flush()
        return reply

    def _after_removal(
        self,
        group: ClassicGroup,
        cause: RebalanceCause,
        member_id: str | None,
        instance_id: str | None,
        reason: str | None,
    ) -> None:
        if group.state is STABLE or group.state is COMPLETING_REBALANCE:
            self._prepare_rebalance(group, cause, None, reason, member_id=member_id, group_instance_id=instance_id)
        elif group.state is PREPARING_REBALANCE:
            self._maybe_complete_join_phase(group)

    def remove_static_member(self, group_id: str, group_instance_id: str, reason: str | None) -> Deferred[ErrorCode]:
        """Operator action: remove the holder of ``group_instance_id`` (like LeaveGroup by instance id)."""
        try:
            return self._remove_static_member(group_id, group_instance_id, reason)
        except Exception as exc:
            self._contain(group_id, None, "removal of a static member", exc)
            return resolved(ErrorCode.unknown_server_error)

    def _remove_static_member(self, group_id: str, group_instance_id: str, reason: str | None) -> Deferred[ErrorCode]:
        group = self._groups.get(group_id)
        if group is None or group.state is DEAD:
            return resolved(ErrorCode.group_id_not_found)
        holder = group.static_member_id(group_instance_id)
        if holder is None:
            return resolved(_UNKNOWN_MEMBER_ID)
        self._remove_member(group, group.members[holder], RemovalCause.ADMIN, reason)
        self._after_removal(group, RebalanceCause.ADMIN_ACTION, holder, group_instance_id, reason)
        reply: Deferred[ErrorCode] = Deferred()
        self._on_durable(partial(_resolve_error, reply))
        self._flush()
        return reply

    # ======================================================================================= used by offsets
    def group(self, group_id: str) -> ClassicGroup | None:
        return self._groups.get(group_id)

    def all_groups(self) -> Iterable[ClassicGroup]:
        return self._groups.values()

    def get_or_create_simple_group(self, group_id: str) -> ClassicGroup:
        """An offsets-only group: Empty, no protocol type, no record written (Kafka writes none either)."""
        group = self._groups.get(group_id)
        if group is None:
            group = self._new_group(group_id, self._clock.now_ms())
        return group

    def rearm_session(self, group: ClassicGroup, member: Member) -> None:
        """A member's OffsetCommit (Stable/PreparingRebalance) keeps its session alive."""
        self._schedule_session(member)

    def remove_group(self, group_id: str) -> GroupMetadataRecord | None:
        """Remove a group at once, as the replay of its tombstone would (DeleteGroups, retention expiry), and
        return its state as a record; ``finish_removal`` is told whether the tombstone was written.

        Deletions follow the rule of every other group change: memory changes when the record is produced, not
        when it is durable. So a request that arrives after the deletion sees the group id as unknown (a JoinGroup
        creates a new group), and the tombstone, appended before anything that request writes, cannot remove the
        new group when it lands. Only Empty groups are removed this way, so no member is answered; a pending
        (MEMBER_ID_REQUIRED) id loses its timer and must join again.
        """
        group = self._groups.get(group_id)
        if group is None:
            return None
        state = self._group_metadata_record(group, self._clock.now_ms())
        self.drop_group(group_id)
        self._removing.setdefault(group_id, []).append(state)
        return state

    def finish_removal(self, state: GroupMetadataRecord, *, written: bool) -> None:
        """The tombstone of ``remove_group`` was written, or not: then the removed group comes back (its state is
        replayed), unless a later request created a group under the id, which is still there or is being removed
        itself. Either way that later group's records follow the old group's in the log, so the log replays to
        what memory holds."""
        removing = self._removing.get(state.group_id, [])
        at = next((i for i, s in enumerate(removing) if s is state), None)  # by identity: equal records may repeat
        if at is None:
            return
        later = at < len(removing) - 1
        del removing[at]
        if not removing:
            del self._removing[state.group_id]
        if not written and not later and state.group_id not in self._groups:
            self.replay(state)
            log.info("[group=%s] restored: its tombstone could not be written", state.group_id)

    def drop_group(self, group_id: str) -> None:
        """Forget a group: its timers too, and answer its parked requests."""
        group = self._groups.pop(group_id, None)
        if group is None:
            return
        self._cancel_group_timers(group)
        for member in group.members.values():
            group.complete_join_reply(member, JoinGroupResult(error=_COORDINATOR_NOT_AVAILABLE))
            group.complete_sync_reply(member, SyncGroupResult(error=_COORDINATOR_NOT_AVAILABLE))
        group.transition_to(DEAD, self._clock.now_ms())  # anyone still holding it sees Dead
        log.info("[group=%s] dropped", group_id)

    def _cancel_group_timers(self, group: ClassicGroup) -> None:
        self._timer.cancel(join_key(group.group_id))
        self._timer.cancel(sync_key(group.group_id))
        for member_id in group.members:
            self._timer.cancel(heartbeat_key(group.group_id, member_id))
        for member_id in group.pending_join_members:
            self._timer.cancel(heartbeat_key(group.group_id, member_id))

    # ================================================================================================ loading
    def replay(self, record: Record) -> None:
        """Rebuild a group from its latest GroupMetadataRecord as Kafka's load does (§10.4); a tombstone drops it.

        Other record types (offsets, history) are ignored here.

        The group is Stable if the record has members, else Empty; each member knows only the selected protocol
        (with its stored subscription). An existing ClassicGroup object (e.g. a simple group the offsets replay
        created) is updated in place so that references held elsewhere stay valid.
        """
        if isinstance(record, GroupTombstone):
            existing = self._groups.pop(record.group_id, None)
            if existing is not None:
                self._cancel_group_timers(existing)
            return
        if not isinstance(record, GroupMetadataRecord):
            return
        protocol_type = record.protocol_type or None
        group = ClassicGroup(
            group_id=record.group_id,
            created_ms=self._clock.now_ms(),
            state=STABLE if record.members else EMPTY,
            state_timestamp_ms=record.current_state_timestamp_ms,
            generation_id=record.generation_id,
            protocol_type=protocol_type,
            protocol_name=record.protocol,
            leader_id=record.leader,
        )
        for m in record.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout_ms if m.rebalance_timeout_ms == -1 else m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=record.protocol_type,
                protocols=[(record.protocol, m.subscription)] if record.protocol is not None else [],
                assignment=m.assignment,
                is_new=False,
            )
            group.add(member)
            self._track(group, member)
        group.protocol_type = protocol_type  # add() copies the member's "" for an untyped group
        group.compute_subscribed_topics()
        existing = self._groups.get(record.group_id)
        if existing is not None:
            self._cancel_group_timers(existing)
            for f in fields(ClassicGroup):
                setattr(existing, f.name, getattr(group, f.name))
            for member in existing.members.values():
                self._track(existing, member)  # bind expiry to the surviving object
        else:
            self._groups[record.group_id] = group

    def on_loaded(self) -> None:
        """After replay: arm every member's session; rebalance groups larger than group.max.size."""
        for group in list(self._groups.values()):
            for member in group.members.values():
                self._schedule_session(member)
            if len(group.members) > self._config.max_size and group.can_rebalance():
                log.info(
                    "[group=%s] loaded with %d members, over group.max.size %d: rebalancing",
                    group.group_id,
                    len(group.members),
                    self._config.max_size,
                )
                self._prepare_rebalance(group, RebalanceCause.GROUP_TOO_LARGE, None, None)
        self._flush()


def _inconsistent(requested: str | None, current: str | None) -> bool:
    """Kafka's isProtocolInconsistent: only a value given on both sides can disagree."""
    return requested is not None and current is not None and requested != current


def _resolve_error(reply: Deferred[ErrorCode], error: ErrorCode | None) -> None:
    reply.resolve(_NONE if error is None else error)


def _resolve_leave(reply: Deferred[LeaveGroupResult], result: LeaveGroupResult, error: ErrorCode | None) -> None:
    reply.resolve(result if error is None else LeaveGroupResult(error=error))


__all__ = ["GroupManager", "GroupState"]
