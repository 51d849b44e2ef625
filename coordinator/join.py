"""JoinGroup (§4.1): a new member (N1-N7), an existing member (E1-E11), the group.max.size rule (R6).

``join_group`` is the entry point: it validates what needs no group, builds the operation's ``Result`` (the parked
or immediate reply and the records: MemberJoined, RebalanceStarted, ...), contains a fault, and writes the result.
JoinGroup never waits on the log: its records are appended without waiting, and the reply is completed by the end
of the join phase (``coordinator.rebalance``) or at once. A known static member coming back under a new id is
``coordinator.static``.
"""

from __future__ import annotations

import logging
from functools import partial

from protocol.errors import ErrorCode

from . import faults, rebalance, static
from .classic_groups import ClassicGroups
from .deferred import Deferred
from .group import ClassicGroup, Member, MemberValidationError
from .group_records import member_joined
from .messages import JoinGroupRequest, JoinGroupResult
from .records import GroupMetadataRecord, RebalanceCause, RemovalCause, new_empty_group_record
from .result import Result
from .states import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from .writes import write

log = logging.getLogger("coordinator.group")


# First JoinGroup version that requires a known member id (KIP-394).
_MEMBER_ID_REQUIRED_VERSION = 4

JoinOut = Result[Deferred[JoinGroupResult]]


def join_group(shard: ClassicGroups, req: JoinGroupRequest) -> Deferred[JoinGroupResult]:
    reply: Deferred[JoinGroupResult] = Deferred()
    if not req.group_id:
        reply.resolve(JoinGroupResult(error=ErrorCode.invalid_group_id, member_id=req.member_id))
        return reply
    cfg = shard.config
    if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
        log_join_refused(
            req,
            ErrorCode.invalid_session_timeout,
            f"session timeout {req.session_timeout_ms} ms outside group.min/max.session.timeout.ms "
            f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}]",
        )
        reply.resolve(JoinGroupResult(error=ErrorCode.invalid_session_timeout, member_id=req.member_id))
        return reply
    out: JoinOut = Result(reply)
    try:
        _join(shard, req, out)
    except Exception as exc:
        subject = _subject_of(shard, req.group_id, req.member_id, reply)
        faults.contain(shard, req.group_id, subject, "JoinGroup", exc, out)
        error = faults.fault_error(shard, req.group_id, req.member_id)
        reply.resolve(JoinGroupResult(error=error, member_id=req.member_id))
        return reply
    write(shard.log, out)
    return reply


def log_join_refused(req: JoinGroupRequest, error: ErrorCode, detail: str) -> None:
    """A JoinGroup turned away for the client's configuration: logged with its group, throttled per peer and cause,
    so the refusal leaves a trace besides kgc_join_refused_total. (Keyed by group, a client naming a new group id in
    every request wrote a line per request: 2,836 of a 1,000,000-frame fuzz run's 4,593 warnings.)"""
    log.warning(
        "JoinGroup refused: %s: %s",
        error.name.upper(),
        detail,
        extra={
            "group": req.group_id,
            "member": req.member_id or None,
            "client_id": req.client_id,
            "client_host": req.client_host or None,
            "throttle": ("join-refused", req.client_host, error),
        },
    )


def _protocols_refused(group: ClassicGroup, req: JoinGroupRequest) -> str:
    names = ",".join(name for name, _ in req.protocols) or "(none)"
    offered = f"protocol type {req.protocol_type or '(empty)'} with protocols {names}"
    if not group.members:
        return f"{offered}: a group needs a protocol type and at least one protocol"
    common = ",".join(sorted(group.candidate_protocols())) or "(none)"
    return f"{offered}: the group has type {group.protocol_type or '(empty)'} and protocols {common}"


def _subject_of(shard: ClassicGroups, group_id: str, member_id: str, reply: Deferred[JoinGroupResult]) -> str | None:
    """The member a failed JoinGroup was about: its id, or the new member the request had just added."""
    if member_id:
        return member_id
    group = shard.groups.get(group_id)
    if group is not None:
        for member in group.members.values():
            if member.join_reply is reply:
                return member.member_id
    return None


def _join(shard: ClassicGroups, req: JoinGroupRequest, out: JoinOut) -> None:
    reply = out.reply
    assert reply is not None
    now = shard.clock.now_ms()
    group = shard.groups.get(req.group_id)
    created = False
    if group is None:
        if req.member_id:  # R5: a member id for a group that does not exist
            reply.resolve(JoinGroupResult(error=ErrorCode.unknown_member_id, member_id=req.member_id))
            return
        group = shard.new_group(req.group_id, now)  # R4
        created = True
    if not _accept_joining_member(shard, group, req.member_id):  # R6
        _evict(shard, group, req.member_id, out)
        log_join_refused(req, ErrorCode.group_max_size_reached, f"group.max.size {shard.config.max_size} reached")
        reply.resolve(JoinGroupResult(error=ErrorCode.group_max_size_reached))
    elif not req.member_id:
        _join_new_member(shard, group, req, out)
    else:
        _join_existing_member(shard, group, req, out)
    if created and not any(isinstance(r, GroupMetadataRecord) for r in out.records):
        # The new coordinator commits a brand-new group with an "empty group" record; nobody waits for it.
        out.records.insert(0, new_empty_group_record(group.group_id, now_ms=now))
        out.on_durable.append(partial(rebalance.warn_on_failure, group.group_id, "new group metadata"))


def _accept_joining_member(shard: ClassicGroups, group: ClassicGroup, member_id: str) -> bool:
    """Kafka's acceptJoiningMember (group.max.size)."""
    state = group.state
    if state is EMPTY or state is DEAD:
        return True
    max_size = shard.config.max_size
    if state is PREPARING_REBALANCE:
        member = group.members.get(member_id)
        # The awaiting count is used: the last rejoiners of an over-sized group are the ones turned away.
        return (member is not None and member.is_awaiting_join) or group.num_members_awaiting_join < max_size
    return member_id in group.members or len(group.members) < max_size


def _evict(shard: ClassicGroups, group: ClassicGroup, member_id: str, out: JoinOut) -> None:
    member = group.members.get(member_id)
    if member is not None:
        log.info(
            "member evicted: group.max.size %d reached",
            shard.config.max_size,
            extra={"group": group.group_id, "member": member_id},
        )
        rebalance.remove_member(shard, group, member, RemovalCause.GROUP_MAX_SIZE, out)
    elif member_id in group.pending_join_members:
        rebalance.remove_pending_member(shard, group, member_id)


def _join_new_member(shard: ClassicGroups, group: ClassicGroup, req: JoinGroupRequest, out: JoinOut) -> None:
    """§4.1.2: JoinGroup with member id ""."""
    reply = out.reply
    assert reply is not None
    if group.state is DEAD:  # N1
        reply.resolve(JoinGroupResult(error=ErrorCode.coordinator_not_available))
        return
    if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):  # N2
        log_join_refused(req, ErrorCode.inconsistent_group_protocol, _protocols_refused(group, req))
        reply.resolve(JoinGroupResult(error=ErrorCode.inconsistent_group_protocol))
        return
    instance_id = req.group_instance_id
    new_member_id = f"{req.client_id if instance_id is None else instance_id}-{shard.new_uuid()}"  # N3
    if instance_id is not None:
        old_member_id = group.static_members.get(instance_id)
        if old_member_id is not None:  # N4
            static.replace_static_member(shard, group, req, old_member_id, new_member_id, out)
        else:  # N5: static members never get MEMBER_ID_REQUIRED
            add_member(shard, group, member_from(req, new_member_id, group), out, req.reason)
    elif req.api_version >= _MEMBER_ID_REQUIRED_VERSION:  # N6
        group.pending_join_members.add(new_member_id)
        shard.timer.schedule(
            rebalance.heartbeat_key(group.group_id, new_member_id),
            req.session_timeout_ms,
            partial(rebalance.expire_member, shard, group, new_member_id),
        )
        reply.resolve(JoinGroupResult(error=ErrorCode.member_id_required, member_id=new_member_id))
    else:  # N7
        add_member(shard, group, member_from(req, new_member_id, group), out, req.reason)


def member_from(req: JoinGroupRequest, member_id: str, group: ClassicGroup) -> Member:
    """The member a JoinGroup adds, its fields the group leader's objects where equal (``shared_fields``). Built
    positionally (Member's first fields, in order; keywords cost ~0.8 us)."""
    client_id, client_host, protocol_type, rebalance_timeout_ms, session_timeout_ms, protocols = group.shared_fields(
        req.client_id, req.client_host, req.protocol_type, req.rebalance_timeout_ms, req.session_timeout_ms,
        req.protocols,
    )  # fmt: skip
    return Member(
        member_id,
        req.group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        protocol_type,
        protocols,
    )


def add_member(
    shard: ClassicGroups,
    group: ClassicGroup,
    member: Member,
    out: JoinOut,
    reason: str | None,
    key: tuple[str, str] | None = None,
) -> None:
    """Kafka's addMemberThenRebalanceOrCompleteJoin (§4.1.4); the member's JoinGroup is parked in ``out.reply``.
    ``key``: the session timer key its pending id was scheduled under (``rebalance.track``)."""
    now = shard.clock.now_ms()
    member.is_new = True
    member.joined_at_ms = now
    member.last_heartbeat_monotonic_ms = shard.clock.monotonic_ms()
    if group.state is PREPARING_REBALANCE and group.previous_state is EMPTY:
        group.new_member_added = True  # extends the initial rebalance delay (§5.2)
    group.add(member, out.reply)
    rebalance.track(shard, group, member, key)
    # A new member cannot heartbeat while its JoinGroup is parked: it gets the new-member join timeout.
    rebalance.schedule_session(shard, member, shard.config.new_member_join_timeout_ms)
    out.records.append(member_joined(group, member, now))
    log.info(
        "member joined",
        extra={"group": group.group_id, "member": member.member_id, "instance": member.group_instance_id},
    )
    rebalance.maybe_prepare_rebalance_or_complete_join(shard, group, RebalanceCause.NEW_MEMBER, out, member, reason)


def _join_existing_member(shard: ClassicGroups, group: ClassicGroup, req: JoinGroupRequest, out: JoinOut) -> None:
    """§4.1.3: JoinGroup with a member id (E1-E4 here, E5-E11 by state in ``_rejoin``)."""
    reply = out.reply
    assert reply is not None
    member_id = req.member_id
    if group.state is DEAD:  # E1
        reply.resolve(JoinGroupResult(error=ErrorCode.coordinator_not_available, member_id=member_id))
        return
    if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):  # E2
        log_join_refused(req, ErrorCode.inconsistent_group_protocol, _protocols_refused(group, req))
        reply.resolve(JoinGroupResult(error=ErrorCode.inconsistent_group_protocol, member_id=member_id))
        return
    if member_id in group.pending_join_members:  # E3
        if req.group_instance_id is not None:
            # Kafka: IllegalStateException (a pending id is never static) -> UNKNOWN_SERVER_ERROR on the wire.
            reply.resolve(JoinGroupResult(error=ErrorCode.unknown_server_error, member_id=member_id))
            return
        # The member keeps the pending id's own string (its session timer's key and the connection hold it), not the
        # equal one this request decoded: one copy a member, not two (~95 bytes).
        held = shard.timer.held_key((group.group_id, member_id))  # rebalance.heartbeat_key
        key = None
        if isinstance(held, tuple):
            key, member_id = held, held[1]
        add_member(shard, group, member_from(req, member_id, group), out, req.reason, key)
        return
    try:  # E4
        member = group.validate_member(member_id, req.group_instance_id)
    except MemberValidationError as e:
        reply.resolve(JoinGroupResult(error=e.error, member_id=member_id))
        return
    _rejoin(shard, group, member, req, out)


def _rejoin(shard: ClassicGroups, group: ClassicGroup, member: Member, req: JoinGroupRequest, out: JoinOut) -> None:
    """A known member rejoins: the answer depends on the state, and the event it causes (if any) on what changed."""
    reply = out.reply
    assert reply is not None
    member_id = member.member_id
    state = group.state
    if state is PREPARING_REBALANCE:  # E5 (no new rebalance starts, so the cause is never recorded)
        _update_member_then_rebalance_or_complete_join(shard, group, member, req, out, RebalanceCause.METADATA_CHANGE)
    elif state is COMPLETING_REBALANCE:
        if member.matches(req.protocols):  # E6: e.g. the client missed its JoinGroup response
            reply.resolve(group.current_generation_result(member_id, with_members=group.is_leader(member_id)))
        else:  # E7
            _update_member_then_rebalance_or_complete_join(
                shard, group, member, req, out, RebalanceCause.METADATA_CHANGE
            )
    elif state is STABLE:
        if group.is_leader(member_id):  # E8: the leader may force a rebalance (e.g. topic metadata change)
            _update_member_then_rebalance_or_complete_join(shard, group, member, req, out, RebalanceCause.LEADER_REJOIN)
        elif not member.matches(req.protocols):  # E9
            _update_member_then_rebalance_or_complete_join(
                shard, group, member, req, out, RebalanceCause.METADATA_CHANGE
            )
        else:  # E10: unchanged follower, answer at once with the current generation
            reply.resolve(group.current_generation_result(member_id, with_members=False))
    else:  # E11: Empty
        reply.resolve(JoinGroupResult(error=ErrorCode.unknown_member_id, member_id=member_id))


def _update_member_then_rebalance_or_complete_join(
    shard: ClassicGroups,
    group: ClassicGroup,
    member: Member,
    req: JoinGroupRequest,
    out: JoinOut,
    cause: RebalanceCause,
) -> None:
    if member.join_reply is not None:
        # A second JoinGroup replaces a parked one; answer the old one instead of leaving it dangling.
        member.join_reply.resolve(JoinGroupResult(error=ErrorCode.rebalance_in_progress, member_id=member.member_id))
    *_, rebalance_timeout_ms, session_timeout_ms, protocols = group.shared_fields(
        member.client_id, member.client_host, member.protocol_type, req.rebalance_timeout_ms, req.session_timeout_ms,
        req.protocols,
    )  # fmt: skip
    group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, out.reply)
    rebalance.maybe_prepare_rebalance_or_complete_join(shard, group, cause, out, member, req.reason)
