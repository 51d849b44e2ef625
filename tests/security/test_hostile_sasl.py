"""Hostile input against a real daemon with SASL_PLAINTEXT and SASL_SSL listeners and the authorizer on, while a real
consumer (kafka-python, SCRAM-SHA-512 over SASL_PLAINTEXT) consumes beside it.

The attacks: hundreds of connections that never authenticate (plain TCP and half-open TLS), junk and truncated TLS
ClientHellos, truncated and oversized SASL frames, malformed SCRAM and PLAIN tokens, SaslAuthenticate without a
handshake, a second handshake, other APIs (unknown, unsupported versions) before authentication, requests pipelined
behind a failing authentication, a flood of wrong PLAIN logins (a PBKDF2 each, budgeted). Afterwards the daemon still
serves, the consumer still receives what is produced, and nothing was logged at ERROR. A second daemon with a short
``connections.max.idle.ms`` shows that a connection which never authenticates is closed (plain TCP, after
ApiVersions, and a TLS handshake that never starts)."""

from __future__ import annotations

import logging
import os
import socket
import ssl
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer

from daemon.app import App
from protocol.errors import ErrorCode
from tests.server.conftest import RunningApp
from tests.server.wire import WireClient, build_request, request_frame

from .conftest import Pki

ADMIN = "admin-secret"
TOPIC = "t"


class Errors(logging.Handler):
    """The daemon's records at ERROR and above (the client libraries' loggers are not the daemon)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(("kafka.", "aiokafka")):
            self.records.append(record)


def daemon(pki: Pki, **kafka: Any) -> RunningApp:
    app = RunningApp(
        listeners={
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl_enabled_mechanisms": "SCRAM-SHA-512,PLAIN",
            "ssl_keystore_location": str(pki.server_pem),
            "ssl_truststore_location": str(pki.ca_pem),
        },
        authorizer={"enabled": True, "super_users": "User:admin"},
        users={"bootstrap": [f"SCRAM-SHA-512=[name=admin,password={ADMIN}]"]},
    )
    if kafka:
        settings = app.app.settings
        app.app = App(settings.model_copy(update={"kafka": settings.kafka.model_copy(update=kafka)}))
    return app


def port_of(app: RunningApp, name: str) -> int:
    return next(s.bound_port for spec, s in app.app.listeners if spec.name == name)  # type: ignore[attr-defined]


def sasl_conf(app: RunningApp) -> dict[str, Any]:
    return {
        "bootstrap_servers": f"127.0.0.1:{port_of(app, 'SASL_PLAINTEXT')}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "admin",
        "sasl_plain_password": ADMIN,
    }


class Beside:
    """A kafka-python consumer in its own thread, polling the topic for the values the test produces."""

    def __init__(self, app: RunningApp) -> None:
        self.consumer = KafkaConsumer(
            **sasl_conf(app), group_id=f"g-{uuid.uuid4().hex[:8]}", auto_offset_reset="latest", enable_auto_commit=True
        )
        self.consumer.subscribe([TOPIC])
        self.values: set[bytes] = set()
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                for records in self.consumer.poll(timeout_ms=200).values():
                    self.values.update(r.value for r in records)
        except BaseException as exc:  # reported by the test
            self.failure = exc

    def wait_for(self, value: bytes, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value in self.values:
                return True
            time.sleep(0.05)
        return False


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(Path(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def hostile(pki: Pki) -> Iterator[tuple[RunningApp, Beside, KafkaProducer, Errors]]:
    errors = Errors()
    logging.getLogger().addHandler(errors)
    app = daemon(pki).start()
    producer = KafkaProducer(**sasl_conf(app))
    beside = Beside(app)
    beside.thread.start()
    try:
        # the consumer has joined and is fetching before the attacks start
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not beside.values:
            producer.send(TOPIC, b"warm-up", partition=0).get(timeout=10)
            time.sleep(0.3)
        assert beside.values, "the consumer beside never received a record"
        yield app, beside, producer, errors
    finally:
        beside.stop.set()
        beside.thread.join(10)
        beside.consumer.close()
        producer.close()
        app.stop()
        logging.getLogger().removeHandler(errors)


def still_serving(app: RunningApp, beside: Beside, producer: KafkaProducer, errors: Errors) -> None:
    """The daemon authenticates a new client, the consumer beside receives a fresh record, nothing at ERROR."""
    client = WireClient("127.0.0.1", port_of(app, "SASL_PLAINTEXT"))
    assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == ErrorCode.none
    assert client.call(build_request(36, 2, auth_bytes=f"\0admin\0{ADMIN}".encode())).error_code == ErrorCode.none
    client.close()
    marker = f"after-{uuid.uuid4().hex}".encode()
    producer.send(TOPIC, marker, partition=0).get(timeout=10)
    assert beside.wait_for(marker), "the consumer beside stopped receiving"
    assert beside.failure is None
    assert [r.getMessage() for r in errors.records] == []


def plaintext(app: RunningApp) -> WireClient:
    return WireClient("127.0.0.1", port_of(app, "SASL_PLAINTEXT"))


def test_hundreds_of_unauthenticated_and_half_open_tls_connections(hostile: Any) -> None:
    app, beside, producer, errors = hostile
    idle: list[socket.socket] = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", port_of(app, "SASL_PLAINTEXT")), timeout=10))
        for _ in range(100):  # TCP open, no ClientHello: the TLS handshake never starts
            idle.append(socket.create_connection(("127.0.0.1", port_of(app, "SASL_SSL")), timeout=10))
        for sock in idle[:100]:  # half a SASL frame each: 40 bytes of a declared 400 KB
            sock.sendall(struct.pack(">i", 400_000) + b"x" * 40)
        still_serving(app, beside, producer, errors)
    finally:
        for sock in idle:
            sock.close()
    still_serving(app, beside, producer, errors)


def test_junk_and_truncated_tls_client_hellos(hostile: Any, pki: Pki) -> None:
    app, beside, producer, errors = hostile
    port = port_of(app, "SASL_SSL")
    for junk in (os.urandom(600), b"\x16\x03\x01\xff\xff" + os.urandom(100), b"\x16\x03\x03\x00\x05\x01\x00\x00"):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(junk)
        sock.close()
    # the first half of a real ClientHello, then silence / close
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context(cafile=str(pki.ca_pem)).wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(hello[: len(hello) // 2])
        sock.close()
    # plaintext Kafka on the TLS port
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(request_frame(build_request(17, 1, mechanism="PLAIN"), 1))
    sock.close()
    still_serving(app, beside, producer, errors)


@pytest.mark.parametrize(
    "token",
    [b"", b"\x00", b"\x00" * 300, b"\x00admin\x00", b"\x00\x00" + ADMIN.encode(), b"admin\x00admin",
     b"\xff\xfe\x00a\x00b", b"bob\x00admin\x00" + ADMIN.encode(), b"\x00admin\x00" + b"p" * 400_000],
)  # fmt: skip
def test_malformed_plain_tokens_fail_and_close(hostile: Any, token: bytes) -> None:
    app = hostile[0]
    client = plaintext(app)
    assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == ErrorCode.none
    assert client.call(build_request(36, 2, auth_bytes=token)).error_code == ErrorCode.sasl_authentication_failed
    assert client.is_closed_by_peer()
    client.close()


@pytest.mark.parametrize(
    "first",
    [b"", b"n", b"n,,", b"y,,n=admin,r=abc", b"p=tls-unique,,n=admin,r=abc", b"n,a=bob,n=admin,r=abc", b"n,,r=abc",
     b"n,,n=admin", b"n,,n=admin,r=", b"n,,n=ad=XXmin,r=abc", os.urandom(64), b"n,,n=" + b"a" * 400_000 + b",r=x"],
)  # fmt: skip
def test_malformed_scram_first_messages_fail_and_close(hostile: Any, first: bytes) -> None:
    app = hostile[0]
    client = plaintext(app)
    assert client.call(build_request(17, 1, mechanism="SCRAM-SHA-512")).error_code == ErrorCode.none
    answer = client.call(build_request(36, 1, auth_bytes=first))
    if answer.error_code == ErrorCode.none:  # a long unknown user name gets a (fake) challenge, then fails at the end
        nonce = answer.auth_bytes.split(b",")[0][2:]
        answer = client.call(build_request(36, 1, auth_bytes=b"c=biws,r=" + nonce + b",p=" + b"A" * 88))
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert client.is_closed_by_peer()
    client.close()


@pytest.mark.parametrize(
    "final",
    [b"", b"c=biws", b"c=biws,r=NONCE", b"c=eSws,r=NONCE,p=AAAA", b"c=biws,r=other,p=AAAA", b"c=biws,r=NONCE,p=!!",
     b"c=biws,r=NONCE,p=" + b"A" * 400_000, b"c=biws,r=NONCE,x,p=AAAA", os.urandom(100)],
)  # fmt: skip
def test_malformed_scram_final_messages_fail_and_close(hostile: Any, final: bytes) -> None:
    app = hostile[0]
    client = plaintext(app)
    assert client.call(build_request(17, 1, mechanism="SCRAM-SHA-512")).error_code == ErrorCode.none
    answer = client.call(build_request(36, 1, auth_bytes=b"n,,n=admin,r=abc"))
    assert answer.error_code == ErrorCode.none
    nonce = answer.auth_bytes.split(b",")[0][2:]
    answer = client.call(build_request(36, 1, auth_bytes=final.replace(b"NONCE", nonce)))
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert client.is_closed_by_peer()
    client.close()


def test_out_of_sequence_sasl_requests_close_the_connection(hostile: Any) -> None:
    app, beside, producer, errors = hostile
    # SaslAuthenticate without a handshake
    client = plaintext(app)
    answer = client.call(build_request(36, 2, auth_bytes=f"\0admin\0{ADMIN}".encode()))
    assert answer.error_code == ErrorCode.illegal_sasl_state
    assert client.is_closed_by_peer()
    client.close()
    # a second handshake in the middle of an exchange
    client = plaintext(app)
    assert client.call(build_request(17, 1, mechanism="SCRAM-SHA-512")).error_code == ErrorCode.none
    assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == ErrorCode.illegal_sasl_state
    assert client.is_closed_by_peer()
    client.close()
    # a heartbeat between the handshake and the token
    client = plaintext(app)
    assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == ErrorCode.none
    client.send(build_request(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None))
    assert client.is_closed_by_peer()
    client.close()
    # an unknown API, an unsupported version, a truncated header: closed unanswered, from the header alone (Kafka)
    for raw in (struct.pack(">hhi", 999, 0, 1) + b"\x00\x00", struct.pack(">hhi", 3, 99, 1) + b"\x00\x00",
                struct.pack(">hhi", 0, 11, 1) + b"\xff\xff", struct.pack(">hhi", 3, 13, 1) + b"\xff\xff",
                struct.pack(">hhi", 12, 0, 1)[:3], struct.pack(">hhi", 3, 12, 1) + b"\xff" * 20):  # fmt: skip
        client = plaintext(app)
        client.send_raw(struct.pack(">i", len(raw)) + raw)
        assert client.sock.recv(1) == b""  # EOF, no answer
        client.close()
    # SaslHandshake v0 (raw tokens follow it in old clients) is not served
    client = plaintext(app)
    assert client.call(build_request(17, 0, mechanism="PLAIN")).error_code == ErrorCode.unsupported_version
    client.close()
    still_serving(app, beside, producer, errors)


def test_requests_pipelined_behind_the_authentication(hostile: Any) -> None:
    """Handshake, token and a Metadata request in one write: served in order when the password is right; with a wrong
    one the failure is answered and nothing after it."""
    app = hostile[0]
    metadata = build_request(
        3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    for password, served in ((ADMIN, True), ("wrong", False)):
        client = plaintext(app)
        frames = [
            build_request(17, 1, mechanism="PLAIN"),
            build_request(36, 2, auth_bytes=f"\0admin\0{password}".encode()),
            metadata,
        ]
        for cid, body in enumerate(frames, 1):
            client._sent[cid] = (int(type(body).__api_key__), int(type(body).__version__))
        client.send_raw(b"".join(request_frame(body, cid) for cid, body in enumerate(frames, 1)))
        assert client.receive()[1].error_code == ErrorCode.none
        auth = client.receive()[1]
        if served:
            assert auth.error_code == ErrorCode.none
            assert client.receive()[1].topics
        else:
            assert auth.error_code == ErrorCode.sasl_authentication_failed
            assert client.is_closed_by_peer()
        client.close()


def test_a_flood_of_wrong_plain_logins_does_not_starve_the_daemon(hostile: Any) -> None:
    """200 connections each trying PLAIN with an unknown user or a wrong password (a PBKDF2 each on the event loop,
    none needing a credential): each fails with SASL_AUTHENTICATION_FAILED - past the PBKDF2 budget without deriving
    - the consumer beside carries on, and a login the daemon has verified before still succeeds."""
    app, beside, producer, errors = hostile
    still_serving(app, beside, producer, errors)  # admin's PLAIN login verified once: remembered from now on
    clients = []
    for i in range(200):
        client = plaintext(app)
        client._sent.update({1: (17, 1), 2: (36, 2)})
        token = f"\0{'admin' if i % 2 else f'nobody-{i}'}\0wrong-{i}".encode()
        client.send_raw(
            request_frame(build_request(17, 1, mechanism="PLAIN"), 1)
            + request_frame(build_request(36, 2, auth_bytes=token), 2)
        )
        clients.append(client)
    for client in clients:
        assert client.receive()[1].error_code == ErrorCode.none
        assert client.receive()[1].error_code == ErrorCode.sasl_authentication_failed
        client.close()
    still_serving(app, beside, producer, errors)  # PLAIN as admin: remembered, no PBKDF2 needed


def test_truncated_and_oversized_frames_before_authentication(hostile: Any) -> None:
    app, beside, producer, errors = hostile
    for data in (b"\x00\x00", struct.pack(">i", 100) + b"y" * 50, struct.pack(">i", -5), struct.pack(">i", 2**31 - 1),
                 struct.pack(">i", 600_000) + b"z" * 1000):  # fmt: skip
        client = plaintext(app)
        client.send_raw(data)
        client.close()
    client = plaintext(app)
    client.send_raw(struct.pack(">i", 600_000) + b"z" * 1000)  # over the 512 KB allowed before authentication
    assert client.is_closed_by_peer()
    client.close()
    # an oversized SaslAuthenticate token (700 KB) after a valid handshake
    client = plaintext(app)
    assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == ErrorCode.none
    client.send_raw(request_frame(build_request(36, 2, auth_bytes=b"\0admin\0" + b"q" * 700_000), 2))
    assert client.is_closed_by_peer()
    client.close()
    still_serving(app, beside, producer, errors)


def test_connections_that_never_authenticate_are_closed_when_idle(pki: Pki) -> None:
    """connections.max.idle.ms closes an unauthenticated connection that sends nothing (or only ApiVersions), and a
    TLS connection whose handshake never starts is dropped by the handshake timeout (the idle time, at least 1 s)."""
    app = daemon(pki, connections_max_idle_ms=1000).start()
    try:
        silent = plaintext(app)
        versions = plaintext(app)
        assert versions.call(build_request(18, 3, client_software_name="x", client_software_version="1")).api_keys
        half_frame = plaintext(app)
        half_frame.send_raw(struct.pack(">i", 1000) + b"h" * 10)
        tls = socket.create_connection(("127.0.0.1", port_of(app, "SASL_SSL")), timeout=10)
        for client in (silent, versions, half_frame):
            assert client.is_closed_by_peer(timeout=15)
            client.close()
        tls.settimeout(15)
        assert tls.recv(1) == b""
        tls.close()
    finally:
        app.stop()


def test_after_the_malformed_tokens_the_daemon_and_the_consumer_carry_on(hostile: Any) -> None:
    still_serving(*hostile)
