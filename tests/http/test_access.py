"""The operator API's principals and roles, hashed tokens, the CSRF guards and the security headers."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from daemon.app import http_access
from daemon.settings import HttpSettings
from servers.http.access import CSP, Access, Role, TokenEntry, new_token, token_digest
from servers.http.routes import ENDPOINTS

from .test_api_actions import _audit_lines, committed
from .world import Consumer, make_world

Client = TestClient  # type: ignore[type-arg]

TOKENS = {role: new_token() for role in (Role.VIEWER, Role.OPERATOR, Role.ADMIN)}
NAMES = {Role.VIEWER: "vera", Role.OPERATOR: "otto", Role.ADMIN: "ada"}


def access(**kw: Any) -> Access:
    entries = [TokenEntry(NAMES[r], r, token_digest(t)) for r, t in TOKENS.items()]
    return Access(entries, **kw)


def bearer(role: Role) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


MUTATING = [ep for ep in ENDPOINTS if ep.mutating]
BODIES: dict[str, Any] = {
    "reset_offsets": {"strategy": "to-earliest", "topics": "all", "execute": True},
    "delete_offsets": {"topics": [{"topic": "orders", "partitions": [0]}]},
    "create_topic": {"name": "fresh", "partitions": 1},
    "change_topic_configs": {"configs": {"retention.ms": "1000"}},
}


def _path(path: str) -> str:
    return path.replace("{group}", "g").replace("{instance}", "inst-1").replace("{topic}", "orders")


# ------------------------------------------------------------------------------------------------------- unit


def test_a_token_is_found_by_its_digest_and_the_configuration_keeps_no_token() -> None:
    a = access()
    p = a.authenticate(f"Bearer {TOKENS[Role.OPERATOR]}")
    assert p is not None and p.name == "User:otto" and p.role is Role.OPERATOR
    assert a.authenticate(f"bearer  {TOKENS[Role.ADMIN]} ") is not None  # scheme case-insensitive, spaces trimmed
    assert a.authenticate("Bearer " + TOKENS[Role.ADMIN][:-1]) is None
    assert a.authenticate(f"Basic {TOKENS[Role.ADMIN]}") is None
    assert a.authenticate("Bearer ") is None
    anonymous = a.authenticate(None)
    assert anonymous is not None and anonymous.name == "User:ANONYMOUS" and anonymous.role is Role.VIEWER
    assert access(anonymous_role=Role.NONE).anonymous.role is Role.NONE
    assert Access().authenticate(None) == Access.open().anonymous and Access().anonymous.role is Role.ADMIN
    legacy = Access(legacy_token="t0k").authenticate("Bearer t0k")
    assert legacy is not None and legacy.name == "token" and legacy.role is Role.ADMIN
    with pytest.raises(ValueError, match="64 hex"):
        Access([TokenEntry("x", Role.ADMIN, "abc")])
    with pytest.raises(ValueError, match="same token"):
        Access([TokenEntry("x", Role.ADMIN, token_digest("t")), TokenEntry("y", Role.VIEWER, token_digest("t"))])


def test_origin_checks() -> None:
    a = access(allowed_origins=["https://ops.example.com/"])
    assert a.origin_allowed({}, "http", "127.0.0.1:8080")  # no Origin: no browser's cross-origin request
    assert a.origin_allowed({"Origin": "http://127.0.0.1:8080"}, "http", "127.0.0.1:8080")
    assert a.origin_allowed({"Origin": "https://OPS.example.com"}, "http", "127.0.0.1:8080")
    assert not a.origin_allowed({"Origin": "http://evil.example"}, "http", "127.0.0.1:8080")
    assert not a.origin_allowed({"Origin": "null"}, "http", "127.0.0.1:8080")  # sandboxed frames, file: pages
    assert not a.origin_allowed({"Origin": "https://127.0.0.1:8080"}, "http", "127.0.0.1:8080")  # other scheme
    assert not a.origin_allowed({"Sec-Fetch-Site": "cross-site"}, "http", "127.0.0.1:8080")


def test_settings_make_the_principals(tmp_path: Any) -> None:
    digest = token_digest(TOKENS[Role.ADMIN])
    http = HttpSettings.model_validate(
        {"principals": [{"name": "ada", "role": "admin", "token_sha256": digest}], "anonymous_role": "none"}
    )
    a = http_access(http)
    p = a.authenticate(f"Bearer {TOKENS[Role.ADMIN]}")
    assert p is not None and p.name == "User:ada" and p.role is Role.ADMIN
    assert a.anonymous.role is Role.NONE
    with pytest.raises(ValueError):
        HttpSettings.model_validate({"principals": [{"name": "a b", "role": "admin", "token_sha256": digest}]})
    with pytest.raises(ValueError):
        HttpSettings.model_validate({"principals": [{"name": "ada", "role": "root", "token_sha256": digest}]})


def test_every_mutating_endpoint_needs_operator_or_more() -> None:
    roles = {ep.operation_id(): ep.role for ep in MUTATING}
    assert roles == {
        "delete_group": Role.ADMIN,
        "reset_offsets": Role.OPERATOR,
        "delete_offsets": Role.ADMIN,
        "remove_member": Role.OPERATOR,
        "create_topic": Role.ADMIN,
        "delete_topic": Role.ADMIN,
        "change_topic_configs": Role.ADMIN,
    }
    assert all(not ep.mutating for ep in ENDPOINTS if ep.role is Role.VIEWER)


# ------------------------------------------------------------------------------------------------- role matrix


@pytest.mark.parametrize("ep", MUTATING, ids=lambda ep: ep.operation_id())
async def test_role_matrix_of_every_mutating_endpoint(ep: Any) -> None:
    """Anonymous: 401; a role below the endpoint's: 403 and nothing changes; the endpoint's role and above: served
    (whatever the action answers: 200, or 404/409 for what does not exist here - never 401/403)."""
    world = make_world(access=access())
    world.commit("g", {("orders", 0): 5})
    async with TestClient(TestServer(world.app)) as client:
        body = BODIES.get(ep.operation_id())
        path = _path(ep.path)
        r = await client.request(ep.method, path, json=body)
        assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
        for role in Role:
            if role is Role.NONE:
                continue
            r = await client.request(ep.method, path, json=body, headers=bearer(role))
            if role < ep.role:
                assert r.status == 403, (role, await r.text())
                assert f"has role {role.label}" in (await r.json())["error"]
            else:
                assert r.status not in (401, 403), (role, await r.text())
        assert world.topics.get("fresh") is None or ep.operation_id() == "create_topic"


async def test_a_viewer_reads_and_an_operator_cannot_delete() -> None:
    world = make_world(access=access())
    world.commit("g", {("orders", 0): 5})
    async with TestClient(TestServer(world.app)) as client:
        for role in (None, Role.VIEWER):
            r = await client.get("/v1/groups/g/offsets", headers=bearer(role) if role else {})
            assert r.status == 200
        r = await client.delete("/v1/groups/g", headers=bearer(Role.OPERATOR))
        assert r.status == 403 and committed(world, "g") == {("orders", 0): 5}
        reset = {"strategy": "to-earliest", "topics": "all", "execute": True}
        r = await client.post("/v1/groups/g/offsets/reset", json=reset, headers=bearer(Role.OPERATOR))
        assert r.status == 200 and committed(world, "g") == {("orders", 0): 0}


async def test_anonymous_role_none_leaves_only_the_probes_and_the_dashboard_files() -> None:
    world = make_world(access=access(anonymous_role=Role.NONE))
    async with TestClient(TestServer(world.app)) as client:
        for path in ("/v1/groups", "/v1/topics", "/metrics", "/openapi.json"):
            r = await client.get(path)
            assert r.status == 401, path
            r = await client.get(path, headers=bearer(Role.VIEWER))
            assert r.status == 200, path
        for path in ("/healthz", "/readyz", "/", "/ui/app.js"):
            r = await client.get(path)
            assert r.status == 200, path


# ------------------------------------------------------------------------------------------------------- CSRF


async def test_cross_origin_state_changes_are_refused_even_with_a_token() -> None:
    world = make_world(access=access(allowed_origins=["https://ops.example.com"]))
    world.commit("g", {("orders", 0): 5})
    async with TestClient(TestServer(world.app)) as client:
        admin = bearer(Role.ADMIN)
        for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}):
            r = await client.delete("/v1/groups/g", headers={**admin, **headers})
            assert r.status == 403 and "cross-origin" in (await r.json())["error"]
        assert committed(world, "g") == {("orders", 0): 5}
        # a cross-origin read is answered (the browser keeps it from the other page: no CORS header is sent)
        r = await client.get("/v1/groups", headers={"Origin": "http://evil.example"})
        assert r.status == 200 and "Access-Control-Allow-Origin" not in r.headers
        own = f"http://{client.server.host}:{client.server.port}"
        r = await client.delete("/v1/groups/g", headers={**admin, "Origin": own, "Sec-Fetch-Site": "same-origin"})
        assert r.status == 200


async def test_an_open_api_still_checks_the_origin() -> None:
    world = make_world()
    world.commit("g", {("orders", 0): 5})
    async with TestClient(TestServer(world.app)) as client:
        r = await client.delete("/v1/groups/g", headers={"Origin": "http://evil.example"})
        assert r.status == 403
        r = await client.delete("/v1/groups/g")
        assert r.status == 200


async def test_the_dashboard_and_the_api_carry_a_content_security_policy() -> None:
    world = make_world(access=access())
    async with TestClient(TestServer(world.app)) as client:
        for path in ("/", "/ui/app.js", "/v1/groups", "/v1/groups/nope"):
            r = await client.get(path)
            assert r.headers["Content-Security-Policy"] == CSP, path
            assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Frame-Options"] == "DENY"
        r = await client.delete("/v1/groups/g")  # a 401 carries them too
        assert r.status == 401 and "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
        index = await (await client.get("/")).text()
    assert "script-src 'self'" in CSP and "'unsafe-eval'" not in CSP
    assert not re.search(r"<script(?![^>]*\bsrc=)", index), "an inline script would be blocked by the CSP"


# ------------------------------------------------------------------------------------------------------- audit


async def test_the_audit_names_the_principal_of_each_action(caplog: Any) -> None:
    caplog.set_level("INFO", logger="servers.http.audit")
    world = make_world(access=access())
    world.form_group("live", [Consumer("c1", "inst-1"), Consumer("c2", "inst-2")])
    world.commit("g", {("orders", 0): 5, ("orders", 1): 3})
    async with TestClient(TestServer(world.app)) as client:
        ua = {"User-Agent": "ops-console/2"}
        r = await client.delete("/v1/groups/live/members/inst-2", headers={**bearer(Role.OPERATOR), **ua})
        assert r.status == 200
        body = {"topics": [{"topic": "orders", "partitions": [1]}]}
        r = await client.delete("/v1/groups/g/offsets", json=body, headers={**bearer(Role.ADMIN), **ua})
        assert r.status == 200
    lines = _audit_lines(caplog)
    assert len(lines) == 2, lines
    assert "inst-2 removed" in lines[0] and lines[0].endswith("client_id=ops-console/2 client_host=127.0.0.1 "
                                                              "principal=User:otto")  # fmt: skip
    assert " group=g " in lines[1] and "offsets of 1 partition(s) deleted" in lines[1]
    assert lines[1].endswith("principal=User:ada")


async def test_the_audit_trail_lists_each_action_with_its_actor() -> None:
    world = make_world(access=access())
    world.form_group("live", [Consumer("c1", "inst-1"), Consumer("c2", "inst-2")])
    world.commit("g", {("orders", 0): 5, ("orders", 1): 3})
    async with TestClient(TestServer(world.app)) as client:
        ua = {"User-Agent": "ops-console/2"}
        r = await client.delete("/v1/groups/live/members/inst-2", headers={**bearer(Role.OPERATOR), **ua})
        assert r.status == 200
        reset = {"strategy": "to-earliest", "topics": "all", "execute": True}
        r = await client.post("/v1/groups/g/offsets/reset", json=reset, headers={**bearer(Role.OPERATOR), **ua})
        assert r.status == 200
        r = await client.post(
            "/v1/groups/g/offsets/reset", json={**reset, "execute": False}, headers=bearer(Role.ADMIN)
        )
        assert r.status == 200  # a dry run changes nothing: no entry
        r = await client.delete("/v1/groups/g", headers=bearer(Role.ADMIN))
        assert r.status == 200
        r = await client.post("/v1/topics", json={"name": "fresh", "partitions": 2}, headers=bearer(Role.ADMIN))
        assert r.status == 201
        r = await client.delete("/v1/groups/nope", headers=bearer(Role.ADMIN))
        assert r.status == 404  # refused: no entry
        body = await (await client.get("/v1/audit")).json()
        of_g = await (await client.get("/v1/audit", params={"group": "g"})).json()
    assert body["total"] == 4
    seen = [(a["action"], a["resource"], a["group_id"], a["principal"], a["client_id"]) for a in body["actions"]]
    assert seen == [
        ("topic.create", "fresh", None, "User:ada", seen[0][4]),
        ("group.delete", "g", "g", "User:ada", seen[1][4]),
        ("offsets.reset", "g", "g", "User:otto", "ops-console/2"),
        ("member.remove", "live", "live", "User:otto", "ops-console/2"),
    ]
    assert all(a["via"] == "http" and a["client_host"] == "127.0.0.1" for a in body["actions"])
    assert "to-earliest" in body["actions"][2]["detail"]
    assert [a["action"] for a in of_g["actions"]] == ["group.delete", "offsets.reset"] and of_g["total"] == 2


def test_kgc_http_token_prints_a_token_and_the_entry_that_accepts_it(capsys: Any) -> None:
    import tomllib

    from daemon.__main__ import main

    assert main(["http-token", "carol", "operator"]) == 0
    out = capsys.readouterr().out
    token = re.search(r"^# (\S{40,})$", out, re.M).group(1)  # type: ignore[union-attr]
    entry = tomllib.loads(out)["http"]["principals"][0]
    assert entry["name"] == "carol" and entry["role"] == "operator" and token not in entry["token_sha256"]
    p = http_access(HttpSettings.model_validate({"principals": [entry]})).authenticate(f"Bearer {token}")
    assert p is not None and p.name == "User:carol" and p.role is Role.OPERATOR
    assert main(["http-token", "bad name", "admin"]) == 2


async def test_kgc_groups_audit_lists_the_actions_with_their_actor() -> None:
    import argparse
    import asyncio
    import io

    from daemon.cli import add_groups_subcommands, cmd_client
    from servers.http import start_http

    world = make_world(access=access())
    world.commit("g", {("orders", 0): 5})
    server = await start_http(world.app, "127.0.0.1:0")
    try:
        async with TestClient(TestServer(world.app)) as client:
            r = await client.delete("/v1/groups/g", headers=bearer(Role.ADMIN))
            assert r.status == 200
        parser = argparse.ArgumentParser(prog="kgc")
        add_groups_subcommands(parser.add_subparsers(dest="command", required=True))
        for argv in (["groups", "audit"], ["groups", "audit", "g"]):
            args = parser.parse_args([*argv, "--url", server.url, "--token", TOKENS[Role.VIEWER]])
            out, err = io.StringIO(), io.StringIO()
            assert await asyncio.to_thread(cmd_client, args, out, err) == 0, err.getvalue()
            text = out.getvalue()
            assert "group.delete" in text and "User:ada" in text and "(1 of 1 admin actions)" in text
        args = parser.parse_args(["groups", "audit", "other", "--url", server.url, "--token", TOKENS[Role.VIEWER]])
        out = io.StringIO()
        assert await asyncio.to_thread(cmd_client, args, out, io.StringIO()) == 0
        assert "(0 of 0 admin actions)" in out.getvalue()
    finally:
        await server.stop()
