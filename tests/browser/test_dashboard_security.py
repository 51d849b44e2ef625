"""The dashboard in a browser: a page on another origin cannot make the API change state (CSRF), even when the API
has no token at all, and the audit page shows each admin action with its actor. Headless Chromium, real servers."""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from aiohttp import web

from servers.http.access import Access, Role, TokenEntry, new_token, token_digest
from tests.http.world import World

from .conftest import on_loop, populated_world, serve
from .test_dashboard import dump_dom

EVIL_PAGE = """<!doctype html><html><body><p id="out">running</p>
<iframe name="sink" style="display:none"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink" action="{api}/v1/groups/reports/offsets/reset">
  <input name='{{"strategy":"to-earliest","topics":"all","execute":true,"x":"' value='"}}'>
</form>
<script>
const api = "{api}";
const reset = JSON.stringify({{strategy: "to-earliest", topics: "all", execute: true}});
const results = [];
async function attempt(name, fn) {{
  try {{ const r = await fn(); results.push(name + ":" + (r.type === "opaque" ? "opaque" : r.status)); }}
  catch (e) {{ results.push(name + ":blocked"); }}
}}
(async () => {{
  await attempt("delete", () => fetch(api + "/v1/groups/reports", {{method: "DELETE"}}));
  await attempt("json", () => fetch(api + "/v1/groups/reports/offsets/reset",
    {{method: "POST", headers: {{"Content-Type": "application/json"}}, body: reset}}));
  await attempt("no-cors", () => fetch(api + "/v1/groups/reports/offsets/reset",
    {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body: reset}}));
  await attempt("no-cors-json", () => fetch(api + "/v1/groups/reports/offsets/reset",
    {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "application/json"}}, body: reset}}));
  document.getElementById("f").submit();
  await new Promise((ok) => setTimeout(ok, 500));
  document.getElementById("out").textContent = "done " + results.join(" ");
}})();
</script></body></html>"""


@contextlib.contextmanager
def evil_site(api_url: str) -> Iterator[str]:
    """Another origin (another port) serving the attacking page."""
    app = web.Application()
    page = EVIL_PAGE.format(api=api_url)

    async def index(_request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    app.router.add_get("/", index)
    world = World.__new__(World)  # only its app is served
    world.app = app
    with serve(world) as server:
        yield server.url


def reset_refusals(world: World) -> dict[str, float]:
    text = world.metrics.render().decode()
    route = re.escape("/v1/groups/{group}/offsets/reset")
    return {
        m[0]: float(m[1]) for m in re.findall(rf'kgc_http_requests_total{{route="{route}",status="(\d+)"}} (\S+)', text)
    }


def test_a_page_on_another_origin_cannot_change_state(chromium: str, tmp_path: Path) -> None:
    world = populated_world()  # no token at all: the Origin check and the browser's CORS rules are what protect it
    with serve(world) as server, evil_site(server.url) as evil:
        before = {tp: o.offset for tp, o in world.core.offsets.committed("reports").items()}
        dom = dump_dom(chromium, tmp_path, evil + "/")
        assert "done " in dom, dom[-2000:]
        outcome = dict(item.split(":") for item in re.search(r"done ([^<]*)", dom).group(1).split())  # type: ignore[union-attr]
        # DELETE and a JSON POST need a CORS preflight the API never grants: the browser does not send them.
        assert outcome["delete"] == "blocked" and outcome["json"] == "blocked", outcome
        # A no-cors POST is sent (its answer hidden from the page): the Origin check refuses it, as it refuses the
        # form's POST; the group and its offsets are untouched.
        assert outcome["no-cors"] == "opaque", outcome
        after = on_loop(world, lambda: {tp: o.offset for tp, o in world.core.offsets.committed("reports").items()})
        assert after == before == {("orders", 0): 5}
        refusals = reset_refusals(world)
        assert refusals.get("403", 0) >= 2 and "200" not in refusals, refusals  # the no-cors fetch and the form
        # The same reset from a client that is not a browser on another origin goes through (the test can fail).
        req = urllib.request.Request(server.url + "/v1/groups/reports/offsets/reset", method="POST",
                                     data=json.dumps({"strategy": "to-earliest", "topics": "all", "execute": True})
                                     .encode(), headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200
        assert on_loop(world, lambda: world.core.offsets.committed("reports")[("orders", 0)].offset) == 0


def test_the_audit_page_shows_each_action_with_its_actor(chromium: str, tmp_path: Path) -> None:
    tokens = {"ada": new_token(), "otto": new_token()}
    world = populated_world()
    world.app = None  # type: ignore[assignment]
    world.access = Access([TokenEntry("ada", Role.ADMIN, token_digest(tokens["ada"])),
                           TokenEntry("otto", Role.OPERATOR, token_digest(tokens["otto"]))])  # fmt: skip
    world.__post_init__()  # the app again, with the principals
    with serve(world) as server:

        def call(method: str, path: str, who: str, body: object = None) -> int:
            headers = {"Authorization": f"Bearer {tokens[who]}", "User-Agent": f"browser-test-{who}"}
            data = None
            if body is not None:
                headers["Content-Type"] = "application/json"
                data = json.dumps(body).encode()
            req = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status

        assert call("POST", "/v1/groups/reports/offsets/reset", "otto",
                    {"strategy": "to-earliest", "topics": "all", "execute": True}) == 200  # fmt: skip
        assert call("DELETE", "/v1/groups/checkout/members/checkout-a", "otto") == 200
        assert call("DELETE", "/v1/groups/reports", "ada") == 200
        dom = dump_dom(chromium, tmp_path, server.url + "/#/audit")
        rows = re.findall(r'<tr data-action="([^"]+)" data-principal="([^"]+)">(.*?)</tr>', dom, re.S)
        assert [(a, p) for a, p, _ in rows] == [
            ("group.delete", "User:ada"), ("member.remove", "User:otto"), ("offsets.reset", "User:otto"),
        ]  # fmt: skip
        assert all("127.0.0.1" in body for _, _, body in rows)
        assert "browser-test-ada" in rows[0][2] and "browser-test-otto" in rows[2][2]
        group_dom = dump_dom(chromium, tmp_path, server.url + "/#/group/checkout")
        own = re.findall(r'<tr data-action="([^"]+)" data-principal="([^"]+)">', group_dom)
        assert own == [("member.remove", "User:otto")]


def test_the_header_token_opens_a_dashboard_that_refuses_anonymous_reads(chromium: str, tmp_path: Path) -> None:
    from tests.cdp import Browser

    token = new_token()
    world = populated_world()
    world.app = None  # type: ignore[assignment]
    world.access = Access([TokenEntry("vera", Role.VIEWER, token_digest(token))], anonymous_role=Role.NONE)
    world.__post_init__()
    with serve(world) as server, Browser(chromium, tmp_path / "profile") as page:
        page.navigate(server.url + "/?refresh=300")
        page.wait_for("document.getElementById('status').textContent.includes('role viewer')", what="the 401")
        assert page.evaluate("document.querySelector('tr[data-group]') === null")
        page.type("#header-token", token)
        page.wait_for("document.querySelector('tr[data-group=\"checkout\"]') !== null", what="the groups, read")
        page.wait_for("document.getElementById('status').textContent.startsWith('updated')", what="a clean refresh")


def test_the_acl_and_user_pages_list_create_and_delete_with_the_header_token(chromium: str, tmp_path: Path) -> None:
    """#/acls and #/users list what the daemon holds; their forms create and delete through /v1/acls and /v1/users
    with the token typed into the header (the admin's; a viewer's is refused), each change confirmed first, and
    each is on #/audit with its actor."""
    from security.acls import AclBinding, AclOperation, Authorizer, PatternType, PermissionType, ResourceType
    from servers.http import keys
    from servers.http.acls import AclAccess
    from tests.cdp import Browser

    tokens = {"ada": new_token(), "vera": new_token()}
    world = populated_world()
    world.app = None  # type: ignore[assignment]
    world.access = Access([TokenEntry("ada", Role.ADMIN, token_digest(tokens["ada"])),
                           TokenEntry("vera", Role.VIEWER, token_digest(tokens["vera"]))])  # fmt: skip
    authorizer = Authorizer(enabled=True)
    existing = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:carol", "*", AclOperation.WRITE,
                          PermissionType.ALLOW)  # fmt: skip
    authorizer.index.add(existing)
    world.acls = AclAccess(authorizer)
    world.__post_init__()
    with serve(world) as server, Browser(chromium, tmp_path / "profile") as page:
        req = urllib.request.Request(server.url + "/v1/users/dave", method="PUT", data=b'{"password": "dave-pw"}',
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {tokens['ada']}"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 201
        users = world.app[keys.USERS]

        page.navigate(server.url + "/?refresh=300#/acls")
        page.wait_for("document.querySelector('#acls-body tr[data-acl]') !== null", what="the ACL listed")
        assert "ALLOW User:carol WRITE from * on TOPIC:LITERAL:orders" in page.evaluate(
            "[...document.querySelectorAll('#acls-body tr[data-acl]')].map((tr) => tr.dataset.acl).join('|')"
        )
        assert "authorizer is on" in page.text("#acls-state")

        def create_acl() -> None:
            page.choose("#acl-resource_type", "GROUP")
            page.choose("#acl-pattern_type", "PREFIXED")
            page.type("#acl-resource_name", "payments-")
            page.type("#acl-principal", "User:bob")
            page.choose("#acl-operation", "READ")
            page.choose("#acl-permission", "DENY")
            page.click("#acl-create-btn")
            page.wait_for("document.querySelector('#acl-create-plan .confirm') !== null", what="the plan")
            assert "DENY User:bob READ from * on GROUP:PREFIXED:payments-" in page.text("#acl-create-plan")
            page.click("#acl-create-plan .confirm")

        # A viewer's token: the page reads, the creation is refused (403) and nothing changes.
        page.type("#header-token", tokens["vera"])
        create_acl()
        page.wait_for("document.querySelector('#acl-create-plan .error[data-status=\"403\"]') !== null",
                      what="the viewer refused")  # fmt: skip
        assert on_loop(world, lambda: len(authorizer.index)) == 1
        # The admin's token: created, listed, then the older ACL deleted from its row.
        page.type("#header-token", tokens["ada"])
        create_acl()
        page.wait_for("document.querySelector('#acl-create-plan [data-done=\"create-acl\"]') !== null",
                      what="the ACL created")  # fmt: skip
        bob = AclBinding(ResourceType.GROUP, "payments-", PatternType.PREFIXED, "User:bob", "*", AclOperation.READ,
                         PermissionType.DENY)  # fmt: skip
        assert on_loop(world, lambda: bob in authorizer.index)
        page.wait_for("document.querySelectorAll('#acls-body tr[data-acl]').length === 2", what="two ACLs listed")
        page.click('#acls-body tr[data-acl^="ALLOW User:carol"] button')
        page.wait_for("document.querySelector('#acl-delete-plan .confirm') !== null", what="the deletion plan")
        page.click("#acl-delete-plan .confirm")
        page.wait_for("document.querySelector('#acl-delete-plan [data-done=\"delete-acl\"]') !== null",
                      what="the ACL deleted")  # fmt: skip
        assert on_loop(world, lambda: existing not in authorizer.index and bob in authorizer.index)

        page.navigate(server.url + "/?refresh=300#/users")
        page.wait_for("document.querySelector('#users-body tr[data-user=\"dave\"]') !== null", what="dave listed")
        assert "SCRAM-SHA-512 (8192)" in page.text('#users-body tr[data-user="dave"]')
        page.type("#user-name", "erin")
        page.choose("#user-mechanism", "SCRAM-SHA-256")
        page.type("#user-password", "erin-secret")
        page.click("#user-set-btn")
        page.wait_for("document.querySelector('#user-set-plan .confirm') !== null", what="the plan")
        page.click("#user-set-plan .confirm")
        page.wait_for("document.querySelector('#user-set-plan [data-done=\"set-user\"]') !== null",
                      what="erin created")  # fmt: skip
        assert on_loop(world, lambda: list(users.mechanisms("erin"))) == ["SCRAM-SHA-256"]
        page.wait_for("document.querySelector('#users-body tr[data-user=\"erin\"]') !== null", what="erin listed")
        page.click('#users-body tr[data-user="dave"] button')
        page.wait_for("document.querySelector('#user-delete-plan .confirm') !== null", what="the deletion plan")
        page.click("#user-delete-plan .confirm")
        page.wait_for("document.querySelector('#user-delete-plan [data-done=\"delete-user\"]') !== null",
                      what="dave deleted")  # fmt: skip
        assert on_loop(world, lambda: not users.mechanisms("dave"))
        assert "erin-secret" not in page.evaluate("document.documentElement.outerHTML")

        page.navigate(server.url + "/?refresh=300#/audit")
        page.wait_for("document.querySelectorAll('#audit-body tr[data-action]').length === 5", what="the audit")
        shown = page.evaluate("[...document.querySelectorAll('#audit-body tr[data-action]')]"
                              ".map((tr) => tr.dataset.action + ' ' + tr.dataset.principal).join('|')")  # fmt: skip
        assert shown.split("|") == ["user.delete User:ada", "user.alter User:ada", "acl.delete User:ada",
                                    "acl.create User:ada", "user.alter User:ada"]  # fmt: skip
