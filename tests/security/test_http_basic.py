"""The operator API over TLS (trustme certificates) with HTTP Basic checked against the daemon's SCRAM users: roles
from ``[http] user_roles``, 401 with a Basic challenge for a wrong password or an unknown user (both pay the PBKDF2),
verified logins cached, the actor in the audit trail, refused without TLS, certificates reloaded on SIGHUP."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from pydantic import ValidationError

from daemon.settings import load_settings
from protocol.errors import ErrorCode
from tests.server.conftest import RunningApp
from tests.server.wire import WireClient, build_request

from .conftest import Pki

USERS = [
    "SCRAM-SHA-512=[name=alice,password=alice-secret]",
    "SCRAM-SHA-256=[name=bob,password=bob-secret]",
    "SCRAM-SHA-512=[name=carol,password=carol-secret]",
]


def https_app(pki: Pki, **http: Any) -> RunningApp:
    return RunningApp(
        http={
            "listen": "127.0.0.1:0",
            "ssl_keystore_location": str(pki.server_pem),
            "basic_auth": True,
            "user_roles": {"User:alice": "operator", "User:bob": "viewer"},
            "anonymous_role": "none",
            **http,
        },
        users={"bootstrap": USERS},
    ).start()


@pytest.fixture
def api(pki: Pki) -> Iterator[RunningApp]:
    app = https_app(pki)
    yield app
    app.stop()


def call(
    app: RunningApp,
    method: str,
    path: str,
    user: str | None = None,
    password: str = "",
    body: Any = None,
    ca: trustme.CA | None = None,
    pki: Pki | None = None,
) -> tuple[int, dict[str, str], Any]:
    assert app.app.http is not None
    url = f"{app.app.http.url}{path}"
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(url, method=method, headers=headers, data=None if body is None else
                                     json.dumps(body).encode())  # fmt: skip
    context = None
    if url.startswith("https"):
        assert ca is not None or pki is not None
        context = ssl.create_default_context(cadata=(ca or pki.ca).cert_pem.bytes().decode())  # type: ignore[union-attr]
    try:
        with urllib.request.urlopen(request, context=context, timeout=20) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read() or b"null")


def test_basic_users_get_their_configured_roles(api: RunningApp, pki: Pki) -> None:
    assert api.app.http is not None and api.app.http.url.startswith("https://")
    status, _, groups = call(api, "GET", "/v1/groups", "bob", "bob-secret", pki=pki)  # SCRAM-SHA-256 only
    assert status == 200 and "groups" in groups
    reset = {"strategy": "to-earliest", "topics": [{"topic": "t"}]}
    assert call(api, "POST", "/v1/groups/nope/offsets/reset", "bob", "bob-secret", reset, pki=pki)[0] == 403
    status, _, body = call(api, "POST", "/v1/groups/nope/offsets/reset", "alice", "alice-secret", reset, pki=pki)
    assert status == 200 and body["dry_run"], body  # past the role check: operator
    status, _, body = call(api, "DELETE", "/v1/groups/nope", "alice", "alice-secret", pki=pki)
    assert status == 403 and "User:alice has role operator" in body["error"]
    status, _, body = call(api, "GET", "/v1/groups", "carol", "carol-secret", pki=pki)  # no role configured
    assert status == 403 and "User:carol has role none" in body["error"]
    assert call(api, "GET", "/v1/groups", pki=pki)[0] == 401  # anonymous_role = none


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret"), ("alice", "")])
def test_failed_logins_get_401_with_a_basic_challenge_and_pay_the_pbkdf2(
    api: RunningApp, pki: Pki, user: str, password: str
) -> None:
    basic = api.app.basic_auth
    assert basic is not None
    before = basic.verifications
    status, headers, body = call(api, "GET", "/v1/groups", user, password, pki=pki)
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Basic realm="kgc", charset="UTF-8"'
    if password:  # a well-formed credential: an unknown user costs the same PBKDF2 as a wrong password
        assert body["error"] == "invalid user name or password"
        assert basic.verifications == before + 1


def test_a_verified_login_is_cached_until_the_credential_changes(api: RunningApp, pki: Pki) -> None:
    basic = api.app.basic_auth
    assert basic is not None
    assert call(api, "GET", "/v1/groups", "alice", "alice-secret", pki=pki)[0] == 200
    checked = basic.verifications
    for _ in range(3):
        assert call(api, "GET", "/v1/groups", "alice", "alice-secret", pki=pki)[0] == 200
    assert basic.verifications == checked  # one HMAC per request, no PBKDF2
    assert call(api, "GET", "/v1/groups", "alice", "alice-wrong", pki=pki)[0] == 401
    assert basic.verifications == checked + 1


def test_the_basic_user_is_the_actor_of_its_admin_action(api: RunningApp, pki: Pki) -> None:
    client = WireClient("127.0.0.1", api.port)
    commit = build_request(8, 2, group_id="g-basic", generation_id_or_member_epoch=-1, member_id="",
                           retention_time_ms=-1,
                           topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                                  "committed_metadata": ""}]}])  # fmt: skip
    answer = client.call(commit)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.none
    client.close()
    reset = {"strategy": "to-latest", "topics": [{"topic": "t"}], "execute": True}
    status, _, body = call(api, "POST", "/v1/groups/g-basic/offsets/reset", "alice", "alice-secret", reset, pki=pki)
    assert status == 200, body
    status, _, audit = call(api, "GET", "/v1/audit", "bob", "bob-secret", pki=pki)
    assert status == 200
    assert any(a["principal"] == "User:alice" and a["group_id"] == "g-basic" for a in audit["actions"]), audit


def test_basic_is_refused_without_tls() -> None:
    with pytest.raises(ValidationError, match="needs TLS"):
        load_settings(None, http={"basic_auth": True})
    app = RunningApp(http={"listen": "127.0.0.1:0", "token": "t0ken"}, users={"bootstrap": USERS}).start()
    try:
        status, headers, body = call(app, "GET", "/v1/groups", "alice", "alice-secret")
        assert status == 401 and "not enabled" in body["error"]
        assert headers["WWW-Authenticate"].startswith("Bearer")
    finally:
        app.stop()


def test_sighup_reloads_the_http_certificate(api: RunningApp, pki: Pki) -> None:
    rotated = trustme.CA()
    rotated.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pki.server_pem))
    api.call(api.app.reload_tls)
    assert api.app.http_tls is not None and api.app.http_tls.reloads == 1
    with pytest.raises(urllib.error.URLError):
        call(api, "GET", "/v1/groups", "bob", "bob-secret", pki=pki)
    assert call(api, "GET", "/v1/groups", "bob", "bob-secret", ca=rotated)[0] == 200


def test_a_basic_header_on_a_plain_connection_is_refused_unchecked() -> None:
    """The settings refuse basic_auth without TLS; an API built with Basic but served plain refuses it anyway."""
    import asyncio

    from broker.topics import TopicRegistry
    from coordinator.clock import SystemClock
    from coordinator.group_coordinator import GroupCoordinator
    from coordinator.record_log import MemoryLog
    from runtime.loop import AsyncioTimer
    from security.sasl import StaticCredentials
    from servers.http.access import Access, Role
    from servers.http.app import create_http_app, start_http
    from servers.http.basic_auth import BasicAuth

    async def scenario() -> tuple[int, int]:
        credentials = StaticCredentials()
        credentials.add("alice", "alice-secret")
        basic = BasicAuth(credentials, {"User:alice": Role.ADMIN})
        settings = load_settings(None)
        core = GroupCoordinator(settings.group_config(), SystemClock(), AsyncioTimer(), MemoryLog(auto_commit=True))
        app = create_http_app(core, topics=TopicRegistry(auto_create=False), access=Access(basic=True), basic=basic)
        server = await start_http(app, "127.0.0.1:0")
        try:
            loop = asyncio.get_running_loop()
            url = f"{server.url}/v1/groups"

            def get() -> int:
                auth = "Basic " + base64.b64encode(b"alice:alice-secret").decode()
                try:
                    with urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": auth})) as r:
                        return int(r.status)
                except urllib.error.HTTPError as error:
                    return error.code

            status = await loop.run_in_executor(None, get)
            return status, basic.verifications
        finally:
            await server.stop()

    status, verifications = asyncio.run(scenario())
    assert status == 403
    assert verifications == 0  # the password was not even checked
