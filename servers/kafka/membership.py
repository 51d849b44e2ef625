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
    ctx.error = result.error.value
    if ctx.api_version < 7:
        protocol_name: str | None = result.protocol_name or ""
    else:
        protocol_name = result.protocol_name or None
    return join_group_response_frame(
        ctx.api_version,
        ctx.correlation_id,
        result.error.value,
        result.generation_id,
        result.protocol_type,
        protocol_name,
        result.leader,
        result.skip_assignment,
        result.member_id,
        [(x.member_id, x.group_instance_id, x.metadata) for x in result.members],
    )


def handle_join_group(services: Services, ctx: RequestContext, body: Any) -> Any:
    if group_read_denied(services, ctx, body.group_id):
        return join_response(ctx, m.JoinGroupResult(ErrorCode.group_authorization_failed))
    request = join_request(ctx, body)
    refused = services.on_join_refused
    if refused is None:
        return then(services.coordinator.join_group(request), lambda r: join_response(ctx, r))

    def answer(result: m.JoinGroupResult) -> bytes:
        if result.error in JOIN_REFUSALS:
            refused(request, result.error)
        return join_response(ctx, result)

    return then(services.coordinator.join_group(request), answer)


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
    ctx.error = result.error.value
    return sync_group_response_frame(
        ctx.api_version,
        ctx.correlation_id,
        result.error.value,
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
    if ctx.api_version < 3:
        members = [m.LeaveMember(member_id=body.member_id)]
    else:
        members = [
            m.LeaveMember(
                member_id=x.member_id, group_instance_id=x.group_instance_id, reason=getattr(x, "reason", None)
            )
            for x in body.members
        ]
    return m.LeaveGroupRequest(group_id=body.group_id, members=members)


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
    return then(services.coordinator.leave_group(request), lambda r: leave_response(ctx, r))
