"""The operator API's ACLs (servers/http/acls.py) over a real aiohttp server and the real authorizer: created,
listed with Kafka's filters, deleted; effective on the authorizer at once and written to the store first; the admin
role for changes, the viewer's for the listing; every change audited; refused while the authorizer is off."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from runtime.audit_trail import AuditTrail
from security.acls import AclBinding, AclOperation, Authorizer, ResourceType
from security.audit import Action
from servers.http.access import Access, Role, TokenEntry, new_token, token_digest
from servers.http.acls import AclAccess
from servers.http.app import create_http_app

from .world import make_world

TOKENS = {role: new_token() for role in (Role.VIEWER, Role.OPERATOR, Role.ADMIN)}
NAMES = {Role.VIEWER: "vera", Role.OPERATOR: "otto", Role.ADMIN: "ada"}


def bearer(role: Role) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


class Store:
    """Keeps what was made durable, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[AclBinding]]] = []

    async def create(self, bindings: Sequence[AclBinding]) -> None:
        self.calls.append(("create", list(bindings)))

    async def delete(self, bindings: Sequence[AclBinding]) -> None:
        self.calls.append(("delete", list(bindings)))


class Env:
    def __init__(self, enabled: bool = True) -> None:
        self.authorizer = Authorizer(enabled=enabled)
        self.store = Store()
        world = make_world()
        self.audit = AuditTrail(None, world.clock.now_ms)
        access = Access([TokenEntry(NAMES[r], r, token_digest(t)) for r, t in TOKENS.items()], anonymous_role=Role.NONE)
        self.app = create_http_app(world.core, clock=world.clock, topics=world.topics, access=access, audit=self.audit,
                                   acls=AclAccess(self.authorizer, lambda: self.store))  # fmt: skip


@pytest.fixture
async def env() -> AsyncIterator[tuple[Env, TestClient]]:  # type: ignore[type-arg]
    e = Env()
    async with TestClient(TestServer(e.app)) as c:
        yield e, c


ALICE_READ = {"resource_type": "GROUP", "resource_name": "team-a-", "pattern_type": "PREFIXED",
              "principal": "User:alice", "operation": "READ"}  # fmt: skip
BOB_DENY = {"resource_type": "TOPIC", "resource_name": "orders", "principal": "User:bob", "operation": "WRITE",
            "permission": "DENY", "host": "10.0.0.1"}  # fmt: skip


def full(acl: dict[str, Any]) -> dict[str, Any]:
    return {"pattern_type": "LITERAL", "host": "*", "permission": "ALLOW", **acl}


async def test_create_list_delete(env: tuple[Env, TestClient]) -> None:  # type: ignore[type-arg]
    e, client = env
    assert not e.authorizer.authorize("User:alice", "h", AclOperation.READ, ResourceType.GROUP, "team-a-1")
    r = await client.post("/v1/acls", json={"acls": [ALICE_READ, BOB_DENY]}, headers=bearer(Role.ADMIN))
    assert r.status == 201, await r.text()
    assert (await r.json())["acls"] == [full(ALICE_READ), full(BOB_DENY)]
    assert [op for op, _ in e.store.calls] == ["create"] and len(e.store.calls[0][1]) == 2
    # effective at once: the PREFIXED ALLOW lets alice into every team-a- group
    assert e.authorizer.authorize("User:alice", "h", AclOperation.READ, ResourceType.GROUP, "team-a-1")
    # the same again: nothing new, nothing written
    r = await client.post("/v1/acls", json={"acls": [ALICE_READ]}, headers=bearer(Role.ADMIN))
    assert r.status == 200 and (await r.json())["acls"] == [] and len(e.store.calls) == 1
    # listing: everything, or Kafka's filters (MATCH: what applies to a literal name)
    r = await client.get("/v1/acls", headers=bearer(Role.VIEWER))
    assert await r.json() == {"enabled": True, "acls": [full(BOB_DENY), full(ALICE_READ)]}
    r = await client.get("/v1/acls", params={"resource_type": "GROUP", "resource_name": "team-a-7",
                                             "pattern_type": "MATCH"}, headers=bearer(Role.VIEWER))  # fmt: skip
    assert (await r.json())["acls"] == [full(ALICE_READ)]
    r = await client.get("/v1/acls", params={"principal": "User:carol"}, headers=bearer(Role.VIEWER))
    assert (await r.json())["acls"] == []
    # deleting by filter
    r = await client.delete("/v1/acls", params={"principal": "User:bob"}, headers=bearer(Role.ADMIN))
    assert r.status == 200 and (await r.json())["acls"] == [full(BOB_DENY)]
    assert e.store.calls[-1][0] == "delete" and len(e.authorizer.index) == 1
    actions, total = await e.audit.actions()
    assert total == 3
    assert sorted(a.action for a in actions) == sorted([Action.ACL_CREATE, Action.ACL_CREATE, Action.ACL_DELETE])
    assert {a.principal for a in actions} == {"User:ada"}


async def test_roles(env: tuple[Env, TestClient]) -> None:  # type: ignore[type-arg]
    e, client = env
    for role in (Role.VIEWER, Role.OPERATOR):
        r = await client.post("/v1/acls", json={"acls": [ALICE_READ]}, headers=bearer(role))
        assert r.status == 403
        r = await client.delete("/v1/acls", headers=bearer(role))
        assert r.status == 403
    assert (await client.get("/v1/acls")).status == 401  # anonymous_role none
    assert len(e.authorizer.index) == 0 and e.store.calls == []


async def test_invalid_bindings_change_nothing(env: tuple[Env, TestClient]) -> None:  # type: ignore[type-arg]
    e, client = env
    for bad in ({**ALICE_READ, "principal": "alice"}, {**ALICE_READ, "operation": "ANY"},
                {**ALICE_READ, "pattern_type": "MATCH"}, {**ALICE_READ, "color": "red"}):  # fmt: skip
        r = await client.post("/v1/acls", json={"acls": [ALICE_READ, bad]}, headers=bearer(Role.ADMIN))
        assert r.status == 400, bad
    r = await client.get("/v1/acls", params={"operation": "FLY"}, headers=bearer(Role.VIEWER))
    assert r.status == 400
    assert len(e.authorizer.index) == 0 and e.store.calls == []


async def test_writes_refused_while_the_authorizer_is_off() -> None:
    e = Env(enabled=False)
    async with TestClient(TestServer(e.app)) as client:
        r = await client.post("/v1/acls", json={"acls": [ALICE_READ]}, headers=bearer(Role.ADMIN))
        assert r.status == 409
        r = await client.get("/v1/acls", headers=bearer(Role.VIEWER))
        assert await r.json() == {"enabled": False, "acls": []}
