"""JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13): kio requests of any version <-> core messages.

Version rules handled here (the core is version-free except for ``api_version`` where Kafka's semantics depend on
it, e.g. MEMBER_ID_REQUIRED from JoinGroup v4):

* JoinGroup v0 has no rebalance timeout: it is the session timeout. v<7 responses cannot carry a null protocol
  name, so null is sent as "" (Kafka's JoinGroupResponse.apply); v7+ send "" as null.
* SyncGroup v5+ must name protocol type and name: a null one is INCONSISTENT_GROUP_PROTOCOL before the core
  (Kafka's KafkaApis check).
* LeaveGroup v0-2 carry one member and answer with a top-level error only: the first non-NONE member error, or the
  top-level error.
* ``client_host`` comes from the peer address (Kafka shows "/1.2.3.4"), ``client_id`` from the request header.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from coordinator import messages as m
from protocol.errors import ErrorCode
from protocol.hot_responses import join_group_response_frame, sync_group_response_frame
from runtime.activity import JOIN_REFUSALS
from security.audit import Action

from . import audit
from ._util import response_cls, then
from .acls import group_read_denied
from .build import build
from .context import RequestContext, Services

# ----------------------------------------------------------------------------------------------------- JoinGroup


def join_request(ctx: RequestContext, body: Any) -> m.JoinGroupRequest:
    # Every JoinGroup of a rebalance storm comes through here: fields read by version instead of getattr, kio's
    # timedelta timeouts divided by one millisecond, and the request built positionally (its fields' order).
    version = ctx.api_version
    session_timeout_ms: int = body.session_timeout // _ONE_MS
    return m.JoinGroupRequest(
        body.group_id,
        body.member_id,
        body.group_instance_id if version >= 5 else None,
        body.protocol_type,
        [(p.name, p.metadata) for p in body.protocols],
        session_timeout_ms,
        body.rebalance_timeout // _ONE_MS if version >= 1 else session_timeout_ms,  # v0: the session timeout
        ctx.client_id,
        ctx.client_host,
        version,
        body.reason if version >= 8 else None,
    )


_ONE_MS = timedelta(milliseconds=1)


def join_response(ctx: RequestContext, result: m.JoinGroupResult) -> bytes:
    # Answered to every joining member (the leader's answer with every member's subscription): the finished frame
    # (protocol.hot_responses), no kio entity.
    # (``int(error)``, not ``error.value``: an Enum's ``value`` is a Python-level property, ~4x the cost.)
    ctx.error = error = int(result.error)
    if ctx.api_version < 7:
        protocol_name: str | None = result.protocol_name or ""
    else:
        protocol_name = result.protocol_name or None
    members = result.members
    return join_group_response_frame(
        ctx.api_version,
        ctx.correlation_id,
        error,
        result.generation_id,
        result.protocol_type,
        protocol_name,
        result.leader,
        result.skip_assignment,
        result.member_id,
        [(x.member_id, x.group_instance_id, x.metadata) for x in members] if members else (),
    )


def handle_join_group(services: Services, ctx: RequestContext, body: Any) -> Any:
    if group_read_denied(services, ctx, body.group_id):
        return join_response(ctx, m.JoinGroupResult(ErrorCode.group_authorization_failed))
    request = join_request(ctx, body)
    refused = services.on_join_refused
    joined = ctx.joined
    group_id: str = body.group_id

    def answer(result: m.JoinGroupResult) -> bytes:
        if joined is not None and result.member_id and len(joined) < MAX_JOINED:
            joined.add((group_id, result.member_id))  # this connection is that member (its LeaveGroup is its own)
        if refused is not None and result.error in JOIN_REFUSALS:
            refused(request, result.error)
        return join_response(ctx, result)

    return then(services.coordinator.join_group(request), answer)


# Member ids one connection is known to hold: a client has one member per group, so only a client multiplexing many
# members over one connection reaches it; the leaves of the members past it are taken as admin removals (audited).
MAX_JOINED = 256


# ----------------------------------------------------------------------------------------------------- SyncGroup


def sync_request(ctx: RequestContext, body: Any) -> m.SyncGroupRequest:
    # Every member of every rebalance comes through here: fields read by version, the request built positionally.
    version = ctx.api_version
    return m.SyncGroupRequest(
        body.group_id,
        body.generation_id,
        body.member_id,
        body.group_instance_id if version >= 3 else None,
        body.protocol_type if version >= 5 else None,
        body.protocol_name if version >= 5 else None,
        [(a.member_id, a.assignment) for a in body.assignments],
        version,
    )


def sync_response(ctx: RequestContext, result: m.SyncGroupResult) -> bytes:
    # Answered to every member of every rebalance: the finished frame (protocol.hot_responses), no kio entity.
    ctx.error = error = int(result.error)
    return sync_group_response_frame(
        ctx.api_version,
        ctx.correlation_id,
        error,
        result.protocol_type,
        result.protocol_name,
        result.assignment,
    )


def handle_sync_group(services: Services, ctx: RequestContext, body: Any) -> Any:
    if group_read_denied(services, ctx, body.group_id):
        return sync_response(ctx, m.SyncGroupResult(ErrorCode.group_authorization_failed))
    request = sync_request(ctx, body)
    if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return sync_response(ctx, m.SyncGroupResult(ErrorCode.inconsistent_group_protocol))
    return then(services.coordinator.sync_group(request), lambda r: sync_response(ctx, r))


# ----------------------------------------------------------------------------------------------------- Heartbeat


def handle_heartbeat(services: Services, ctx: RequestContext, body: Any) -> Any:
    if group_read_denied(services, ctx, body.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error = services.coordinator.heartbeat(
            m.HeartbeatRequest(
                group_id=body.group_id,
                generation_id=body.generation_id,
                member_id=body.member_id,
                group_instance_id=getattr(body, "group_instance_id", None),
            )
        )
    cls = response_cls(ctx)
    response = _heartbeat_responses.get((cls, error))
    if response is None:  # kio bodies are frozen: one per (version, error) serves every heartbeat (hot path)
        response = _heartbeat_responses[(cls, error)] = build(cls, {"error_code": error})
    return response


_heartbeat_responses: dict[tuple[type, ErrorCode], Any] = {}


# ---------------------------------------------------------------------------------------------------- LeaveGroup


def leave_request(ctx: RequestContext, body: Any) -> m.LeaveGroupRequest:
    """The core's request; each member flagged ``admin`` unless it is the connection's own (``is_admin_removal``)."""
    group_id: str = body.group_id
    if ctx.api_version < 3:
        member_id: str = body.member_id
        members = [m.LeaveMember(member_id=member_id, admin=is_admin_removal(ctx, group_id, member_id))]
    else:
        members = [
            m.LeaveMember(
                member_id=x.member_id,
                group_instance_id=x.group_instance_id,
                reason=getattr(x, "reason", None),
                admin=is_admin_removal(ctx, group_id, x.member_id),
            )
            for x in body.members
        ]
    return m.LeaveGroupRequest(group_id=group_id, members=members)


def is_admin_removal(ctx: RequestContext, group_id: str, member_id: str) -> bool:
    """Whether a LeaveGroup entry removes a member other than the sender: an admin client's removal
    (``AdminClient.removeMembersFromConsumerGroup``, kafka-python's ``remove_group_members``), not a member leaving.

    * Named by ``group.instance.id`` alone (member id ""): always. That is how Kafka's admin client names the members
      to remove; a member leaving itself knows its member id (and a static member sends no LeaveGroup at all).
    * Named by member id (Kafka's admin client with ``removeAll()``, kafka-python's ``MemberToRemove(member_id=..)``):
      unless this connection was given that member id by JoinGroup (``RequestContext.joined``). Neither the client
      id nor the host tells the member's own client from an admin's (kafka-python's admin and consumer share a
      default client id), nor does the reason (free text); the connection does, and cannot be borrowed. A member
      whose connection broke and that leaves over a new one before joining again is recorded as an admin removal
      by its own client id: an extra audit entry, never a missing one.
    """
    if not member_id:
        return True
    joined = ctx.joined
    return joined is not None and (group_id, member_id) not in joined


def leave_response(ctx: RequestContext, result: m.LeaveGroupResult) -> Any:
    cls = response_cls(ctx)
    if ctx.api_version < 3:
        error = result.error
        if error is ErrorCode.none:
            error = next((x.error for x in result.members if x.error is not ErrorCode.none), ErrorCode.none)
        return build(cls, {"error_code": error})
    ctx.error = next((x.error.value for x in result.members if x.error is not ErrorCode.none), 0)
    return build(
        cls,
        {
            "error_code": result.error,
            "members": [
                {"member_id": x.member_id, "group_instance_id": x.group_instance_id, "error_code": x.error}
                for x in result.members
            ],
        },
    )


def handle_leave_group(services: Services, ctx: RequestContext, body: Any) -> Any:
    if group_read_denied(services, ctx, body.group_id):
        ctx.error = ErrorCode.group_authorization_failed.value
        return build(response_cls(ctx), {"error_code": ErrorCode.group_authorization_failed, "members": []})
    request = leave_request(ctx, body)

    def answer(result: m.LeaveGroupResult) -> Any:
        if result.error is ErrorCode.none:
            _after_leave(services, ctx, request, result)
        return leave_response(ctx, result)

    return then(services.coordinator.leave_group(request), answer)


def _after_leave(
    services: Services, ctx: RequestContext, request: m.LeaveGroupRequest, result: m.LeaveGroupResult
) -> None:
    """Once the removals are durable: each admin removal audited with its actor; the connection forgets the members
    that left."""
    joined = ctx.joined
    for asked, done in zip(request.members, result.members, strict=False):
        if done.error is not ErrorCode.none:
            continue
        if asked.admin:
            who = f"static member {asked.group_instance_id}" if not asked.member_id else f"member {asked.member_id}"
            if asked.member_id and asked.group_instance_id:
                who += f" ({asked.group_instance_id})"
            why = f": {asked.reason}" if asked.reason else ""
            audit.admin_action(
                ctx, request.group_id, "%s removed (LeaveGroup from another client%s)", who, why,
                services=services, action=Action.MEMBER_REMOVE,
            )  # fmt: skip
        elif joined is not None:
            joined.discard((request.group_id, asked.member_id))
