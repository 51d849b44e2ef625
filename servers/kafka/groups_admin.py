"""ListGroups (16, v0-5), DescribeGroups (15, v0-5), DeleteGroups (42, v0-2).

ListGroups over every group and DescribeGroups of many ids are the admin answers that grow without bound (a client
can create a group per JoinGroup). Up to ``sliced.SLICE`` groups they are built and encoded at once, as every other
answer; beyond it they are described and encoded a slice at a time between other work (``sliced.sliced_frame``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordinator import messages as m
from protocol.errors import ErrorCode
from security.acls import AclOperation, ResourceType
from security.audit import Action

from . import audit, sliced
from ._util import response_cls, then
from .acls import allowed, cluster_allowed
from .authorized import GROUP_OPERATIONS, NOT_REQUESTED, authorized_operations
from .build import build
from .context import RequestContext, Services


def handle_list_groups(services: Services, ctx: RequestContext, body: Any) -> Any:
    states = list(getattr(body, "states_filter", ()))
    types = list(getattr(body, "types_filter", ()))
    groups = services.coordinator.list_groups(states, types)
    # ACLs (Kafka): Describe on the cluster lists every group; otherwise only the groups the principal may describe.
    if services.authorizer.enabled and not cluster_allowed(services, ctx, AclOperation.DESCRIBE):
        groups = [g for g in groups if allowed(services, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    if len(groups) > sliced.SLICE:
        return sliced.sliced_frame(ctx, {"error_code": ErrorCode.none}, "groups", groups, _listed)
    return build(response_cls(ctx), {"error_code": ErrorCode.none, "groups": [_listed(g) for g in groups]})


def _listed(group: m.ListedGroup) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "protocol_type": group.protocol_type,
        "group_state": group.state,
        "group_type": group.group_type,
    }


def _described(group: m.DescribedGroup, include_operations: bool, operations: int = GROUP_OPERATIONS) -> dict[str, Any]:
    return {
        "error_code": group.error,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol_data,
        "authorized_operations": (
            operations if include_operations and group.error is ErrorCode.none else NOT_REQUESTED
        ),
        "members": [
            {
                "member_id": x.member_id,
                "group_instance_id": x.group_instance_id,
                "client_id": x.client_id,
                "client_host": x.client_host,
                "member_metadata": x.metadata,
                "member_assignment": x.assignment,
            }
            for x in group.members
        ],
    }


def handle_describe_groups(services: Services, ctx: RequestContext, body: Any) -> Any:
    include_operations = bool(getattr(body, "include_authorized_operations", False))
    group_ids = list(body.groups)

    def described(group: m.DescribedGroup) -> dict[str, Any]:
        if group.error is not ErrorCode.none and not ctx.error:
            ctx.error = group.error.value  # the first group error, for the metrics
        if include_operations and services.authorizer.enabled:  # KIP-430: what this principal may do
            operations = authorized_operations(
                services.authorizer, ctx.principal, ctx.client_host, ResourceType.GROUP, group.group_id
            )
            return _described(group, True, operations)
        return _described(group, include_operations)

    describe: Callable[[list[str | None]], list[m.DescribedGroup]] = services.coordinator.describe_groups
    if services.authorizer.enabled:  # ACLs: Describe on each group, else GROUP_AUTHORIZATION_FAILED in its entry

        def describe_permitted(ids: list[str | None]) -> list[m.DescribedGroup]:
            permitted = [g for g in ids if allowed(services, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g or "")]
            found = {g.group_id: g for g in services.coordinator.describe_groups(permitted)}
            return [
                found.get(g or "") or m.DescribedGroup(g or "", ErrorCode.group_authorization_failed, "") for g in ids
            ]

        describe = describe_permitted

    if len(group_ids) > sliced.SLICE:  # described a slice at a time too
        return sliced.sliced_frame(ctx, {}, "groups", group_ids, described, describe)
    groups = describe(group_ids)
    return build(response_cls(ctx), {"groups": [described(g) for g in groups]})


def handle_delete_groups(services: Services, ctx: RequestContext, body: Any) -> Any:
    ids = list(dict.fromkeys(body.groups_names))  # Kafka de-duplicates

    def respond(results: list[m.DeleteGroupResult]) -> Any:
        ctx.error = next((r.error.value for r in results if r.error is not ErrorCode.none), 0)  # for the metrics
        for r in results:  # who deleted what, and each refusal (once per cause and peer)
            if r.error is ErrorCode.none:
                audit.admin_action(ctx, r.group_id, "group deleted (DeleteGroups)", services=services,
                                   action=Action.GROUP_DELETE)  # fmt: skip
            else:
                audit.refused(ctx.api_key, r.error.value, r.group_id, ctx.client_id, ctx.client_host)
        return build(response_cls(ctx), {"results": [{"group_id": r.group_id, "error_code": r.error} for r in results]})

    if not services.authorizer.enabled:
        return then(services.coordinator.delete_groups(ids), respond)
    # ACLs: Delete on each group, else GROUP_AUTHORIZATION_FAILED in its result (the others are deleted).
    permitted = [g for g in ids if allowed(services, ctx, AclOperation.DELETE, ResourceType.GROUP, g or "")]

    def merge(results: list[m.DeleteGroupResult]) -> Any:
        done = {r.group_id: r for r in results}
        return respond(
            [done.get(g or "") or m.DeleteGroupResult(g or "", ErrorCode.group_authorization_failed) for g in ids]
        )

    return then(services.coordinator.delete_groups(permitted), merge)
