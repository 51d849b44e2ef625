"""KafkaJS (tests/kafkajs, pinned) over the SASL listeners: a consumer group member that creates its topic, produces,
joins, consumes and commits, then reads its committed offset back, over SASL_PLAINTEXT with PLAIN and over SASL_SSL
(the trustme CA as KafkaJS's ``ssl.ca``) with SCRAM-SHA-256 and SCRAM-SHA-512. KafkaJS authenticates with SaslHandshake
v1 and SaslAuthenticate v1, and re-authenticates (KIP-368) on its open connections when the session lifetime the
daemon answers (``connections.max.reauth.ms``) comes within its ``reauthenticationThreshold`` (10 s): the listeners
here answer 12 s, so each connection re-authenticates every 2 s while the member stays in the group committing. A wrong
password fails with KafkaJS's SASL authentication error and the member gets nowhere."""

from __future__ import annotations

import logging
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from security.sasl import StaticCredentials
from tests.kafkajs import ensure_kafkajs, run_member

from .conftest import Pki, SecureApp, secure_app
from .test_acl_matrix import Errors

pytestmark = pytest.mark.e2e

REAUTH_MS = 12_000  # KafkaJS re-authenticates once less than 10 s of the session is left: here after 2 s


@pytest.fixture(scope="module")
def node() -> str:
    return ensure_kafkajs()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("kafkajs-pki"))


@pytest.fixture(scope="module")
def app(pki: Pki) -> Iterator[SecureApp]:
    errors = Errors()
    logging.getLogger().addHandler(errors)
    credentials = StaticCredentials()
    credentials.add("alice", "alice-secret")
    credentials.add("bob", "bob-secret")
    running = secure_app(pki, credentials, listeners="SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                         connections_max_reauth_ms=REAUTH_MS).start()  # fmt: skip
    try:
        yield running
    finally:
        running.stop()
        logging.getLogger().removeHandler(errors)
    assert [r.getMessage() for r in errors.records] == []  # nothing KafkaJS sent is an error of the daemon's


def member_config(app: SecureApp, pki: Pki, listener: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    suffix = uuid.uuid4().hex[:8]
    return {
        "brokers": [f"127.0.0.1:{app.port_of(listener)}"],
        "clientId": f"kafkajs-{suffix}",
        "sasl": {"mechanism": mechanism, "username": user, "password": password},
        "ca": str(pki.ca_pem) if listener == "SASL_SSL" else None,
        "topic": f"js-{suffix}",
        "group": f"js-group-{suffix}",
        "messages": 5,
        "holdMs": 5000,
    }


def sasl_sessions(app: SecureApp) -> tuple[int, int]:
    """(successful SaslHandshakes, connections closed) so far, from the daemon's /metrics: once the client's
    connections are all closed, more handshakes than connections means some connection authenticated again."""
    with urllib.request.urlopen(f"http://127.0.0.1:{app.app.http_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    handshakes = closed = 0
    for line in text.splitlines():
        if line.startswith('kgc_requests_total{api="SaslHandshake"') and 'error="none"' in line:
            handshakes += int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("kgc_connections_closed_total{"):
            closed += int(float(line.rsplit(" ", 1)[1]))
    return handshakes, closed


def wait_until_no_connection(app: SecureApp) -> None:
    deadline = time.monotonic() + 10
    while app.call(lambda: sum(len(s.open_connections) for _, s in app.app.listeners)):
        assert time.monotonic() < deadline, "the client's connections stayed open"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("listener", "mechanism", "user"),
    [("SASL_PLAINTEXT", "plain", "alice"), ("SASL_SSL", "scram-sha-256", "bob"),
     ("SASL_SSL", "scram-sha-512", "alice")],
)  # fmt: skip
def test_kafkajs_group_joins_and_commits(app: SecureApp, pki: Pki, node: str, listener: str, mechanism: str,
                                         user: str) -> None:  # fmt: skip
    config = member_config(app, pki, listener, mechanism, user, f"{user}-secret")
    wait_until_no_connection(app)
    handshakes_before, closed_before = sasl_sessions(app)
    answer = run_member(node, config)
    assert answer == {"ok": True, "consumed": 5, "committed": 5}, answer
    wait_until_no_connection(app)
    handshakes, closed = sasl_sessions(app)
    connections = closed - closed_before
    assert connections > 0
    # KIP-368: KafkaJS re-authenticated on connections it kept open
    assert handshakes - handshakes_before > connections, (handshakes - handshakes_before, connections)
    # the group and its offset, as the daemon has them
    offsets = app.call(lambda: app.app.coordinator.offsets.committed(config["group"]))
    assert {tp: o.offset for tp, o in offsets.items()} == {(config["topic"], 0): 5}
    closed = app.call(lambda: {c for _, s in app.app.listeners for c in s.closed_by_cause})
    assert "reauth" not in closed and "sasl" not in closed  # no session expired, no SASL request refused


@pytest.mark.parametrize(
    ("listener", "mechanism"), [("SASL_PLAINTEXT", "plain"), ("SASL_SSL", "scram-sha-256"),
                                ("SASL_SSL", "scram-sha-512")],
)  # fmt: skip
def test_kafkajs_wrong_password_is_a_sasl_authentication_error(app: SecureApp, pki: Pki, node: str, listener: str,
                                                              mechanism: str) -> None:  # fmt: skip
    config = {**member_config(app, pki, listener, mechanism, "alice", "wrong"), "retries": 0}
    answer = run_member(node, config)
    assert answer["ok"] is False
    assert answer["name"] == "KafkaJSSASLAuthenticationError", answer
    assert "authentication failed" in answer["message"].lower(), answer
    groups = app.call(lambda: [g.group_id for g in app.app.coordinator.list_groups([], [])])
    assert config["group"] not in groups
