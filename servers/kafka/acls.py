"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-3; and ``allowed``, the check every adapter makes.

What Kafka does (``AclApis.scala``, ``AclControlManager``): DescribeAcls needs Describe on the Cluster, CreateAcls
and DeleteAcls need Alter on it (else CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured they answer
SECURITY_DISABLED. A creation with an invalid binding (type ANY/UNKNOWN, pattern other than LITERAL/PREFIXED,
operation ANY/UNKNOWN, permission other than ALLOW/DENY) gets INVALID_REQUEST in its own result; creating an ACL
that exists is a success. DeleteAcls answers, per filter, the bindings it removed.

What we do: the same. The change is written to the ACL store (the ``acls`` table) first, then applied to the
authorizer's index, so it holds on every open connection from the next request on, and survives a restart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from protocol.errors import ErrorCode
from security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    invalid_binding,
)
from security.audit import Action

from . import audit
from ._util import response_cls
from .build import build
from .context import RequestContext, Services


def allowed(services: Services, ctx: RequestContext, operation: AclOperation, rtype: ResourceType, name: str) -> bool:
    """Whether ``ctx``'s principal, from its host, may do ``operation`` on the resource (always, authorizer off)."""
    return services.authorizer.authorize(ctx.principal, ctx.client_host, operation, rtype, name)


def group_read_denied(services: Services, ctx: RequestContext, group_id: str) -> bool:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit: Read on the group (checked before anything else)."""
    authorizer = services.authorizer
    return authorizer.enabled and not authorizer.authorize(
        ctx.principal, ctx.client_host, AclOperation.READ, ResourceType.GROUP, group_id
    )


def denied_topics(services: Services, ctx: RequestContext, operation: AclOperation, topics: Iterable[str]) -> set[str]:
    """The topics among ``topics`` on which ``ctx``'s principal may not do ``operation`` (none, authorizer off)."""
    authorizer = services.authorizer
    if not authorizer.enabled:
        return set()
    principal, host = ctx.principal, ctx.client_host
    return {t for t in topics if not authorizer.authorize(principal, host, operation, ResourceType.TOPIC, t)}


def cluster_allowed(services: Services, ctx: RequestContext, operation: AclOperation) -> bool:
    return services.authorizer.authorize_cluster(ctx.principal, ctx.client_host, operation)


def _enum(cls: Any, value: int, unknown: Any) -> Any:
    try:
        return cls(value)
    except ValueError:
        return unknown


def _filter(body: Any) -> AclFilter:
    return AclFilter(
        resource_type=_enum(ResourceType, body.resource_type_filter, ResourceType.UNKNOWN),
        resource_name=body.resource_name_filter,
        pattern_type=_enum(PatternType, getattr(body, "pattern_type_filter", 3), PatternType.UNKNOWN),
        principal=body.principal_filter,
        host=body.host_filter,
        operation=_enum(AclOperation, body.operation, AclOperation.UNKNOWN),
        permission=_enum(PermissionType, body.permission_type, PermissionType.UNKNOWN),
    )


def _invalid_filter(f: AclFilter) -> str | None:
    if f.resource_type == ResourceType.UNKNOWN:
        return "Invalid resource type filter"
    if f.pattern_type == PatternType.UNKNOWN:
        return "Invalid pattern type filter"
    if f.operation == AclOperation.UNKNOWN:
        return "Invalid operation filter"
    if f.permission == PermissionType.UNKNOWN:
        return "Invalid permission type filter"
    return None


def _binding_fields(b: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": int(b.resource_type),
        "resource_name": b.resource_name,
        "pattern_type": int(b.pattern_type),
        "principal": b.principal,
        "host": b.host,
        "operation": int(b.operation),
        "permission_type": int(b.permission),
    }


def _refusal(services: Services, ctx: RequestContext, operation: AclOperation) -> ErrorCode | None:
    if not services.authorizer.enabled:
        return ErrorCode.security_disabled
    if not cluster_allowed(services, ctx, operation):
        return ErrorCode.cluster_authorization_failed
    return None


def handle_describe_acls(services: Services, ctx: RequestContext, body: Any) -> Any:
    error = _refusal(services, ctx, AclOperation.DESCRIBE)
    f = _filter(body)
    message = None if error is not None else _invalid_filter(f)
    if message is not None:
        error = ErrorCode.invalid_request
    if error is not None:
        ctx.error = error.value
        return build(response_cls(ctx), {"error_code": error, "error_message": message or error.name, "resources": []})
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in services.authorizer.index.matching(f):
        resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {
                "principal": b.principal,
                "host": b.host,
                "operation": int(b.operation),
                "permission_type": int(b.permission),
            }
        )
    return build(
        response_cls(ctx),
        {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resources": [
                {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
                for (rt, name, pt), acls in resources.items()
            ],
        },
    )


async def handle_create_acls(services: Services, ctx: RequestContext, body: Any) -> Any:
    error = _refusal(services, ctx, AclOperation.ALTER)
    results: list[dict[str, Any]] = []
    new: dict[AclBinding, None] = {}  # each once, in request order (a set lookup)
    for c in body.creations:
        if error is not None:
            results.append({"error_code": error, "error_message": error.name})
            continue
        b = AclBinding(
            _enum(ResourceType, c.resource_type, ResourceType.UNKNOWN),
            c.resource_name,
            _enum(PatternType, getattr(c, "resource_pattern_type", 3), PatternType.UNKNOWN),
            c.principal,
            c.host,
            _enum(AclOperation, c.operation, AclOperation.UNKNOWN),
            _enum(PermissionType, c.permission_type, PermissionType.UNKNOWN),
        )
        message = invalid_binding(b)
        if message is not None:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": message})
            continue
        if b not in services.authorizer.index and b not in new:
            new[b] = None
        results.append({"error_code": ErrorCode.none, "error_message": None})
    if new:
        if services.acl_store is not None:
            await services.acl_store.create(list(new))
        for b in new:
            services.authorizer.index.add(b)
            audit.admin_action(ctx, None, "ACL created (CreateAcls): %s", _describe(b), services=services,
                               action=Action.ACL_CREATE, resource=_describe(b))  # fmt: skip
    ctx.error = next((int(r["error_code"]) for r in results if r["error_code"] is not ErrorCode.none), 0)
    return build(response_cls(ctx), {"results": results})


async def handle_delete_acls(services: Services, ctx: RequestContext, body: Any) -> Any:
    error = _refusal(services, ctx, AclOperation.ALTER)
    filter_results: list[dict[str, Any]] = []
    doomed: dict[AclBinding, None] = {}  # in match order, each once (a set lookup: DeleteAcls may match 10,000s)
    for raw in body.filters:
        if error is not None:
            filter_results.append({"error_code": error, "error_message": error.name, "matching_acls": []})
            continue
        f = _filter(raw)
        message = _invalid_filter(f)
        if message is not None:
            filter_results.append(
                {"error_code": ErrorCode.invalid_request, "error_message": message, "matching_acls": []}
            )
            continue
        matched = services.authorizer.index.matching(f)
        doomed.update(dict.fromkeys(matched))
        filter_results.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [
                    {"error_code": ErrorCode.none, "error_message": None, **_binding_fields(b)} for b in matched
                ],
            }
        )
    if doomed:
        if services.acl_store is not None:
            await services.acl_store.delete(list(doomed))
        for b in doomed:
            services.authorizer.index.remove(b)
            audit.admin_action(ctx, None, "ACL deleted (DeleteAcls): %s", _describe(b), services=services,
                               action=Action.ACL_DELETE, resource=_describe(b))  # fmt: skip
    ctx.error = next((int(r["error_code"]) for r in filter_results if r["error_code"] is not ErrorCode.none), 0)
    return build(response_cls(ctx), {"filter_results": filter_results})


def _describe(b: AclBinding) -> str:
    return (
        f"{b.permission.name} {b.principal} {b.operation.name} from {b.host} on "
        f"{b.resource_type.name}:{b.pattern_type.name}:{b.resource_name}"
    )
