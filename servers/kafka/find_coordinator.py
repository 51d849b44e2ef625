"""FindCoordinator (10): single key (v0-3) and batched ``coordinator_keys`` (v4+). This node coordinates everything.

Key types: 0 GROUP -> this node. 1 TRANSACTION -> TRANSACTIONAL_ID_AUTHORIZATION_FAILED: transactions are not
served, and this is Kafka's own answer when a transactional id may not be used (its FindCoordinator checks Describe on
the id first), which kafka-python, the Java client and librdkafka treat as a fatal error at once; Kafka's
COORDINATOR_NOT_AVAILABLE (no transaction coordinator) would make them retry for ever instead of failing clearly
(``init_producer_id`` refuses transactional InitProducerIds the same way). 2 SHARE exists from v6; below v6 (and any
unknown type) is INVALID_REQUEST, like Kafka.
"""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode
from security.acls import AclOperation, ResourceType

from . import sliced
from ._util import response_cls
from .acls import allowed
from .build import build
from .context import RequestContext, Services, node_of

_GROUP, _TRANSACTION, _SHARE = 0, 1, 2


def _key_error(key_type: int, version: int) -> ErrorCode:
    if key_type == _GROUP:
        return ErrorCode.none
    if key_type == _TRANSACTION:
        return ErrorCode.transactional_id_authorization_failed
    if key_type == _SHARE and version >= 6:
        return ErrorCode.none
    return ErrorCode.invalid_request


def _entry(services: Services, ctx: RequestContext, key: str, error: ErrorCode) -> dict[str, Any]:
    node = node_of(services, ctx)
    if error is ErrorCode.none:
        return {
            "key": key,
            "node_id": node.node_id,
            "host": node.host,
            "port": node.port,
            "error_code": error,
            "error_message": None,
        }
    return {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": error,
        "error_message": "transactions are not supported by this broker"
        if error is ErrorCode.transactional_id_authorization_failed
        else "Authorization failed."
        if error is ErrorCode.group_authorization_failed
        else "unknown or unsupported coordinator key type",
    }


def handle_find_coordinator(services: Services, ctx: RequestContext, body: Any) -> Any:
    key_type = int(getattr(body, "key_type", _GROUP))
    error = _key_error(key_type, ctx.api_version)
    cls = response_cls(ctx)
    if ctx.api_version >= 4:
        keys = body.coordinator_keys
        if keys:
            ctx.error = error.value  # every key has the same error (no top-level one from v4), for the metrics

        def entry(key: str) -> dict[str, Any]:
            return _entry(services, ctx, key, _group_denied(services, ctx, key_type, key) or error)

        if len(keys) > sliced.SLICE:  # a frame can carry millions of keys: encoded between other work
            return sliced.sliced_frame(ctx, {}, "coordinators", keys, entry)
        return build(cls, {"coordinators": [entry(key) for key in keys]})
    return build(cls, _entry(services, ctx, body.key, _group_denied(services, ctx, key_type, body.key) or error))


def _group_denied(services: Services, ctx: RequestContext, key_type: int, key: str) -> ErrorCode | None:
    """ACLs: finding a group's coordinator needs Describe on the group (else GROUP_AUTHORIZATION_FAILED)."""
    if key_type != _GROUP or not services.authorizer.enabled:
        return None
    if allowed(services, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return None
    if not ctx.error:
        ctx.error = ErrorCode.group_authorization_failed.value
    return ErrorCode.group_authorization_failed
