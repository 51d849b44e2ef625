"""Log lines about who asked: refused group requests and admin actions, with the client's id, host and principal.

Why here and not in the core: a refused request's answer, its group and its peer (client id, host) are all known only
in this layer - the core sees the group and the request but not always the connection (a Heartbeat or an
OffsetCommit carries no client id), and it must not log per request on the hot path anyway. The listener calls
``refused`` for every answered group request whose answer carries an error (``ctx.error``, the same code the
``kgc_requests_total`` ``error`` label shows); the adapters call ``admin_action`` once an admin change is durable.

* **Refused requests** change nothing, so one line per cause and peer is enough: the throttle key is
  ``("request-refused", api, error, client_host)`` (see ``runtime.logging_setup``). Answers that are ordinary
  rebalance traffic (a Heartbeat answered REBALANCE_IN_PROGRESS, a commit with a stale generation) are INFO; the
  rest (a fenced static member, a delete of a group that still has members, ...) are WARNING. A JoinGroup refused
  for the client's configuration is logged by the core with the reason (``coordinator.join.log_join_refused``), and
  MEMBER_ID_REQUIRED is the first step of every JoinGroup: neither is logged again here. An internal error is
  logged at ERROR by ``errors.error_body``.
* **Admin actions** (DeleteGroups, OffsetDelete, an OffsetCommit with generation -1 and no member id) are INFO with
  the connection's principal (``RequestContext.principal``: ``User:ANONYMOUS``, Kafka's name for an unauthenticated
  client, until the connection authenticates). Admin commits are also what a consumer without group management
  (``assign()``) sends on every commit, so their line is throttled per group and host.
"""

from __future__ import annotations

import logging
from typing import Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from runtime.metrics import api_name
from security.audit import Action, Via

from .context import RequestContext, Services

log = logging.getLogger("servers.kafka.audit")

PRINCIPAL = "User:ANONYMOUS"  # Kafka's principal for a client that did not authenticate

# Group APIs whose errors are refusals worth a line (the others' errors are logged where they arise, if at all).
GROUP_APIS = frozenset(
    int(k)
    for k in (
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.JOIN_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
    )
)

_DELETE_GROUPS = int(ApiKey.DELETE_GROUPS)

# Answers that a healthy group gives during a rebalance or a coordinator move: INFO. Anything else: WARNING.
_ROUTINE = frozenset(
    int(e)
    for e in (
        ErrorCode.rebalance_in_progress,
        ErrorCode.illegal_generation,
        ErrorCode.unknown_member_id,
        ErrorCode.unstable_offset_commit,
        ErrorCode.group_id_not_found,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
    )
)

# (api, error) pairs logged elsewhere or not refusals at all.
_NOT_HERE = frozenset(
    (int(ApiKey.JOIN_GROUP), int(e))
    for e in (
        ErrorCode.member_id_required,  # step one of every JoinGroup from v4
        ErrorCode.inconsistent_group_protocol,  # the core logs the three refusals with their reason
        ErrorCode.invalid_session_timeout,
        ErrorCode.group_max_size_reached,
    )
)
_UNKNOWN_SERVER_ERROR = int(ErrorCode.unknown_server_error)  # logged at ERROR by errors.error_body, or by storage


def _error_name(code: int) -> str:
    try:
        return str(ErrorCode(code).name).upper()
    except ValueError:
        return str(code)


def refused(
    api_key: int,
    error: int,
    group: str | None,
    client_id: str | None,
    client_host: str | None,
    member: str | None = None,
) -> None:
    """One group request answered with ``error``: a line at INFO or WARNING, throttled per cause and peer."""
    if api_key not in GROUP_APIS or (api_key, error) in _NOT_HERE or error == _UNKNOWN_SERVER_ERROR:
        return
    api = api_name(api_key)
    name = _error_name(error)
    log.log(
        logging.INFO if error in _ROUTINE else logging.WARNING,
        "%s refused: %s",
        api,
        name,
        extra={
            "group": group,
            "member": member or None,
            "client_id": client_id,
            "client_host": client_host or None,
            "throttle": ("request-refused", api_key, error, client_host),
        },
    )


def refused_request(ctx: RequestContext, body: Any) -> None:
    """``refused`` for a request answered through an adapter; the group and member are read from its body."""
    api_key, error = ctx.api_key, ctx.error
    # DeleteGroups: per group, by its adapter. The pairs logged elsewhere return here, before the body is read: a
    # MEMBER_ID_REQUIRED answer is the first step of every JoinGroup.
    if api_key not in GROUP_APIS or api_key == _DELETE_GROUPS or (api_key, error) in _NOT_HERE:
        return
    try:  # runs before the answer is queued: a surprise in a client's body must not keep the answer back
        group = getattr(body, "group_id", None)
        if group is None:  # DescribeGroups, OffsetFetch v8+: the group when there is one
            groups: Any = getattr(body, "groups", None) or ()
            group = groups[0] if len(groups) == 1 and isinstance(groups[0], str) else None
        member = getattr(body, "member_id", None)
        member = member if isinstance(member, str) else None
        refused(ctx.api_key, ctx.error, group, ctx.client_id, ctx.client_host, member)
    except Exception:
        log.debug("cannot log a refused request", exc_info=True)


def admin_action(
    ctx: RequestContext,
    group: str | None,
    what: str,
    *args: object,
    throttle: bool = False,
    services: Services | None = None,
    action: Action | None = None,
    resource: str | None = None,
) -> None:
    """An admin change made through the Kafka protocol, once durable: ``what % args`` with who asked; also one
    entry of the audit trail (``services.audit``) when ``services`` and ``action`` are given."""
    trail = services.audit if services is not None else None
    if trail is not None and action is not None:
        trail.record(
            Via.KAFKA, action, resource if resource is not None else (group or ""), group_id=group,
            principal=ctx.principal, client_id=ctx.client_id, client_host=ctx.client_host,
            detail=what % args if args else what,
        )  # fmt: skip
    extra: dict[str, Any] = {
        "group": group,
        "client_id": ctx.client_id,
        "client_host": ctx.client_host or None,
        "principal": ctx.principal,
    }
    if throttle:
        extra["throttle"] = ("admin-action", ctx.api_key, group, ctx.client_host)
    log.info(what, *args, extra=extra)
