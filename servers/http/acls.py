"""The operator API's ACLs: ``GET /v1/acls``, ``POST /v1/acls``, ``DELETE /v1/acls``.

The same ACLs as Kafka's DescribeAcls / CreateAcls / DeleteAcls (``security.acls``, docs/semantics.md §14), with
Kafka's names for the enums (``TOPIC``, ``PREFIXED``, ``READ``, ``ALLOW``, ...). A creation or deletion is made
durable in the ACL store first (the ``acls`` table), then applied to the authorizer's index: it holds on every open
Kafka connection from its next request on. Listing is a viewer's read; creating and deleting need the admin role and
are admin actions (audit ``acl.create`` / ``acl.delete``, one per binding, with who asked). With
``authorizer.enabled`` false the writes answer 409, as Kafka's APIs answer SECURITY_DISABLED; the listing answers
``enabled: false`` and the stored ACLs (none are checked).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from aiohttp import web
from pydantic import BaseModel, Field

from security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    Authorizer,
    PatternType,
    PermissionType,
    ResourceType,
    invalid_binding,
)
from security.audit import Action

from . import audit
from .access import Role
from .models import ErrorBody
from .openapi import Endpoint
from .routes import json_error, parse_body, parse_query, respond


class AclStore(Protocol):
    """Where the changes are made durable before they apply (``storage.acls.SqlAclStore``)."""

    async def create(self, bindings: Sequence[AclBinding]) -> None: ...

    async def delete(self, bindings: Sequence[AclBinding]) -> None: ...


@dataclass
class AclAccess:
    """The daemon's authorizer and, when storage is durable, its ACL store (read when a change is made: the daemon
    opens the store after the HTTP app is built)."""

    authorizer: Authorizer
    store: Callable[[], AclStore | None] = lambda: None


ResourceName = Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"]
PatternName = Literal["LITERAL", "PREFIXED"]
Operation = Literal[
    "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
]  # fmt: skip
Permission = Literal["ALLOW", "DENY"]


class AclView(BaseModel):
    """One ACL binding: a resource pattern and an entry, in Kafka's terms."""

    model_config = {"extra": "forbid"}
    resource_type: ResourceName
    resource_name: str = Field(min_length=1, description="``*`` (LITERAL) is every resource of the type.")
    pattern_type: PatternName = "LITERAL"
    principal: str = Field(description="``User:alice``, or ``User:*`` for everyone.")
    host: str = "*"
    operation: Operation
    permission: Permission = "ALLOW"


class AclList(BaseModel):
    enabled: bool = Field(description="Whether the ACLs are checked (``authorizer.enabled``).")
    acls: list[AclView]


class AclCreate(BaseModel):
    model_config = {"extra": "forbid"}
    acls: list[AclView] = Field(min_length=1, max_length=1000)


class AclChanged(BaseModel):
    acls: list[AclView] = Field(description="The bindings created (new ones only) or deleted.")


class AclQuery(BaseModel):
    """A filter, as DescribeAcls / DeleteAcls take it: every field left out matches anything; ``pattern_type``
    MATCH is every binding that applies to the literal ``resource_name`` (itself, ``*`` and its prefixes)."""

    resource_type: ResourceName | Literal["ANY"] = "ANY"
    resource_name: str | None = None
    pattern_type: PatternName | Literal["ANY", "MATCH"] = "ANY"
    principal: str | None = None
    host: str | None = None
    operation: Operation | Literal["ANY"] = "ANY"
    permission: Permission | Literal["ANY"] = "ANY"

    def filter(self) -> AclFilter:
        return AclFilter(
            ResourceType[self.resource_type], self.resource_name, PatternType[self.pattern_type], self.principal,
            self.host, AclOperation[self.operation], PermissionType[self.permission],
        )  # fmt: skip


def _binding(v: AclView) -> AclBinding:
    return AclBinding(
        ResourceType[v.resource_type], v.resource_name, PatternType[v.pattern_type], v.principal, v.host,
        AclOperation[v.operation], PermissionType[v.permission],
    )  # fmt: skip


def _view(b: AclBinding) -> AclView:
    return AclView(
        resource_type=b.resource_type.name, resource_name=b.resource_name, pattern_type=b.pattern_type.name,  # type: ignore[arg-type]
        principal=b.principal, host=b.host, operation=b.operation.name, permission=b.permission.name,  # type: ignore[arg-type]
    )  # fmt: skip


def _describe(b: AclBinding) -> str:
    return (
        f"{b.permission.name} {b.principal} {b.operation.name} from {b.host} on "
        f"{b.resource_type.name}:{b.pattern_type.name}:{b.resource_name}"
    )


ACLS = web.AppKey("acls", AclAccess)


def _access(request: web.Request, writing: bool) -> AclAccess:
    access = request.app.get(ACLS)
    if access is None or (writing and not access.authorizer.enabled):
        raise json_error(409, "ACLs are disabled (authorizer.enabled is false)")
    return access


async def list_acls(request: web.Request) -> web.Response:
    query = parse_query(request, AclQuery)
    access = request.app.get(ACLS)
    if access is None:
        return respond(AclList(enabled=False, acls=[]))
    found = access.authorizer.index.matching(query.filter())
    return respond(AclList(enabled=access.authorizer.enabled, acls=[_view(b) for b in found]))


async def create_acls(request: web.Request) -> web.Response:
    access = _access(request, writing=True)
    body = await parse_body(request, AclCreate)
    new: dict[AclBinding, None] = {}  # each once, in request order (a set lookup)
    for v in body.acls:
        b = _binding(v)
        message = invalid_binding(b)
        if message is not None:
            raise json_error(400, message)
        if b not in access.authorizer.index and b not in new:
            new[b] = None
    if new:
        store = access.store()
        if store is not None:
            await store.create(list(new))
        for b in new:
            access.authorizer.index.add(b)
            audit.admin_action(request, None, "ACL created through the operator API: %s", _describe(b),
                               action=Action.ACL_CREATE, resource=_describe(b))  # fmt: skip
    return respond(AclChanged(acls=[_view(b) for b in new]), 201 if new else 200)


async def delete_acls(request: web.Request) -> web.Response:
    access = _access(request, writing=True)
    query = parse_query(request, AclQuery)
    doomed = access.authorizer.index.matching(query.filter())
    if doomed:
        store = access.store()
        if store is not None:
            await store.delete(doomed)
        for b in doomed:
            access.authorizer.index.remove(b)
            audit.admin_action(request, None, "ACL deleted through the operator API: %s", _describe(b),
                               action=Action.ACL_DELETE, resource=_describe(b))  # fmt: skip
    return respond(AclChanged(acls=[_view(b) for b in doomed]))


ACL_ENDPOINTS: list[Endpoint] = [
    Endpoint("GET", "/v1/acls", list_acls, "ACLs", "acls", {200: AclList, 400: ErrorBody}, query=AclQuery,
             description="Kafka's DescribeAcls: the bindings the filter matches (every one without a filter)."),
    Endpoint("POST", "/v1/acls", create_acls, "Create ACLs", "acls",
             {200: AclChanged, 201: AclChanged, 400: ErrorBody, 409: ErrorBody}, body=AclCreate, mutating=True,
             role=Role.ADMIN,
             description="Kafka's CreateAcls: durable, then effective at once. 201 with the new bindings; 200 when "
             "all existed already. 409 when the authorizer is disabled."),
    Endpoint("DELETE", "/v1/acls", delete_acls, "Delete ACLs", "acls",
             {200: AclChanged, 400: ErrorBody, 409: ErrorBody}, query=AclQuery, mutating=True, role=Role.ADMIN,
             description="Kafka's DeleteAcls with one filter: removes every binding it matches (without a filter: "
             "every ACL) and answers them."),
]  # fmt: skip
