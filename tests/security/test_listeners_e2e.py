"""Real clients (kafka-python, aiokafka, confluent-kafka) over each listener type against the daemon: SASL_PLAINTEXT
with PLAIN, SASL_SSL with SCRAM-SHA-512, SSL with a client certificate; wrong passwords; what a listener advertises."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError

from protocol.errors import ErrorCode
from tests.server.wire import WireClient, build_request

from .conftest import SecureApp

TOPIC = "t"


def kp_config(secure: SecureApp, listener: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap_servers": f"127.0.0.1:{secure.port_of(listener)}", "security_protocol": listener, **extra}


def kafka_python_round_trip(config: dict[str, Any]) -> int:
    """Produce one record, join a group, consume it and commit; the committed offset."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**config)
    producer.send(TOPIC, b"hello", partition=0).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(
        **config, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=15_000
    )
    consumer.subscribe([TOPIC])
    for message in consumer:
        if message.partition == 0:
            break
    consumer.commit()
    committed = consumer.committed(KpTopicPartition(TOPIC, 0))
    consumer.close()
    assert committed is not None
    return int(committed)


def test_kafka_python_sasl_plaintext_plain(secure: SecureApp) -> None:
    config = kp_config(secure, "SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="alice",
                       sasl_plain_password="alice-secret")  # fmt: skip
    assert kafka_python_round_trip(config) >= 1


def test_kafka_python_sasl_ssl_scram_sha512(secure: SecureApp, pki: Any) -> None:
    config = kp_config(secure, "SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                       sasl_plain_password="bob-secret", ssl_cafile=str(pki.ca_pem))  # fmt: skip
    assert kafka_python_round_trip(config) >= 1


def test_kafka_python_ssl_mtls_principal(secure: SecureApp, pki: Any) -> None:
    config = kp_config(secure, "SSL", ssl_cafile=str(pki.ca_pem), ssl_certfile=str(pki.client_cert),
                       ssl_keyfile=str(pki.client_key))  # fmt: skip
    consumer = KafkaConsumer(**config)
    assert TOPIC in consumer.topics()
    assert secure.principals("SSL") == ["User:CN=alice,OU=eng,O=Acme"]
    consumer.close()
    assert kafka_python_round_trip(config) >= 1


def test_kafka_python_wrong_password_gets_no_access(secure: SecureApp) -> None:
    config = kp_config(secure, "SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                       sasl_plain_password="wrong", request_timeout_ms=5000)  # fmt: skip
    with pytest.raises(KafkaError):
        KafkaConsumer(**config, group_id="denied").topics()
    assert secure.principals("SASL_PLAINTEXT") == []


def confluent_round_trip(config: dict[str, Any]) -> int:
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    producer.produce(TOPIC, b"hi", partition=1)
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    try:
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None and message.partition() == 1:
                consumer.commit(message, asynchronous=False)
                break
        committed = consumer.committed([TopicPartition(TOPIC, 1)], timeout=10)
    finally:
        consumer.close()
    return int(committed[0].offset)


def test_confluent_sasl_ssl_scram_sha512(secure: SecureApp, pki: Any) -> None:
    config = {
        "bootstrap.servers": f"127.0.0.1:{secure.port_of('SASL_SSL')}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(pki.ca_pem),
    }
    assert confluent_round_trip(config) >= 1


def test_confluent_sasl_plaintext_plain_and_wrong_password(secure: SecureApp) -> None:
    config = {
        "bootstrap.servers": f"127.0.0.1:{secure.port_of('SASL_PLAINTEXT')}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": "bob-secret",
    }
    assert confluent_round_trip(config) >= 1
    errors: list[Any] = []
    bad = Consumer({**config, "sasl.password": "wrong", "group.id": "denied", "error_cb": errors.append})
    with pytest.raises(KafkaException):
        bad.list_topics(timeout=5)
    bad.close()
    assert any("Authentication failed" in str(e) or "SASL" in str(e) for e in errors)


def test_confluent_ssl_mtls(secure: SecureApp, pki: Any) -> None:
    config = {
        "bootstrap.servers": f"127.0.0.1:{secure.port_of('SSL')}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca_pem),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
    }
    assert confluent_round_trip(config) >= 1


def aiokafka_options(secure: SecureApp, pki: Any, kind: str) -> dict[str, Any]:
    if kind == "SASL_SSL/SCRAM-SHA-512":
        return {
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(pki.ca_pem)),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
            "bootstrap_servers": f"127.0.0.1:{secure.port_of('SASL_SSL')}",
        }
    if kind == "SASL_PLAINTEXT/PLAIN":
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "bob",
            "sasl_plain_password": "bob-secret",
            "bootstrap_servers": f"127.0.0.1:{secure.port_of('SASL_PLAINTEXT')}",
        }
    context = create_ssl_context(cafile=str(pki.ca_pem), certfile=str(pki.client_cert), keyfile=str(pki.client_key))
    return {"security_protocol": "SSL", "ssl_context": context,
            "bootstrap_servers": f"127.0.0.1:{secure.port_of('SSL')}"}  # fmt: skip


@pytest.mark.parametrize("kind", ["SASL_SSL/SCRAM-SHA-512", "SASL_PLAINTEXT/PLAIN", "SSL/mTLS"])
def test_aiokafka_group_and_commit(secure: SecureApp, pki: Any, kind: str) -> None:
    from aiokafka.structs import TopicPartition as AioTp

    async def run() -> int:
        common = aiokafka_options(secure, pki, kind)
        producer = AIOKafkaProducer(**common)
        await producer.start()
        await producer.send_and_wait(TOPIC, b"x", partition=2)
        await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, **common, group_id=f"g-{uuid.uuid4().hex[:8]}",
                                    auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
        await consumer.start()
        try:
            while True:
                message = await asyncio.wait_for(consumer.getone(), 20)
                if message.partition == 2:
                    break
            await consumer.commit()
            committed = await consumer.committed(AioTp(TOPIC, 2))
        finally:
            await consumer.stop()
        return int(committed or 0)

    assert asyncio.run(run()) >= 1


# --------------------------------------------------------------------------------------------- over the wire


def sasl_plain(client: WireClient, user: str, password: str) -> Any:
    assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == ErrorCode.none
    return client.call(build_request(36, 2, auth_bytes=f"\0{user}\0{password}".encode()))


def metadata_request() -> Any:
    return build_request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_wrong_password_answers_sasl_authentication_failed_then_closes(secure: SecureApp) -> None:
    client = WireClient("127.0.0.1", secure.port_of("SASL_PLAINTEXT"))
    response = sasl_plain(client, "alice", "wrong")
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert client.is_closed_by_peer()
    client.close()


def test_only_api_versions_before_authentication(secure: SecureApp) -> None:
    client = WireClient("127.0.0.1", secure.port_of("SASL_PLAINTEXT"))
    versions = client.call(build_request(18, 3, client_software_name="wire", client_software_version="1"))
    assert versions.error_code == ErrorCode.none
    client.send(metadata_request())
    assert client.is_closed_by_peer()  # no answer: the connection is closed, as Kafka closes it
    client.close()


def test_sasl_apis_on_a_plaintext_listener_are_illegal_state(secure: SecureApp) -> None:
    client = WireClient("127.0.0.1", secure.port_of("PLAINTEXT"))
    assert client.call(build_request(17, 1, mechanism="PLAIN")).error_code == ErrorCode.illegal_sasl_state
    assert client.call(metadata_request()).brokers  # still served
    client.close()


def test_each_listener_advertises_its_own_address_in_metadata_find_coordinator_and_describe_cluster(
    pki: Any, credentials: Any
) -> None:
    from .conftest import secure_app

    app = secure_app(
        pki, credentials, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        advertised_listeners="SASL_PLAINTEXT://sasl.example.com:19094",
    ).start()  # fmt: skip
    try:
        plain = WireClient("127.0.0.1", app.port_of("PLAINTEXT"))
        brokers = plain.call(metadata_request()).brokers
        assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", app.port_of("PLAINTEXT"))]
        coordinator = plain.call(build_request(10, 3, key="g", key_type=0))
        assert (coordinator.host, coordinator.port) == ("127.0.0.1", app.port_of("PLAINTEXT"))
        sasl = WireClient("127.0.0.1", app.port_of("SASL_PLAINTEXT"))
        assert sasl_plain(sasl, "alice", "alice-secret").error_code == ErrorCode.none
        brokers = sasl.call(metadata_request()).brokers
        assert [(b.host, b.port) for b in brokers] == [("sasl.example.com", 19094)]
        coordinator = sasl.call(build_request(10, 3, key="g", key_type=0))
        assert (coordinator.host, coordinator.port) == ("sasl.example.com", 19094)
        cluster = sasl.call(build_request(60, 0, include_cluster_authorized_operations=False))
        assert [(b.host, b.port) for b in cluster.brokers] == [("sasl.example.com", 19094)]
        cluster = plain.call(build_request(60, 0, include_cluster_authorized_operations=False))
        assert [(b.host, b.port) for b in cluster.brokers] == [("127.0.0.1", app.port_of("PLAINTEXT"))]
        plain.close()
        sasl.close()
    finally:
        app.stop()


def tls_client(port: int, pki: Any, cert: bool = True, **context_options: Any) -> WireClient:
    context = ssl.create_default_context(cafile=str(pki.ca_pem))
    for name, value in context_options.items():
        setattr(context, name, value)
    if cert:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    client = WireClient("127.0.0.1", port)
    client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
    return client


def test_ssl_client_auth_required_refuses_a_client_without_certificate(pki: Any, credentials: Any) -> None:
    from .conftest import secure_app

    app = secure_app(pki, credentials, ssl_client_auth="required").start()
    try:
        client = tls_client(app.port_of("SSL"), pki, cert=True)
        assert client.call(metadata_request()).brokers
        client.close()
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            anonymous = tls_client(app.port_of("SSL"), pki, cert=False)
            anonymous.call(metadata_request())
    finally:
        app.stop()


def test_tls_below_1_2_is_refused(secure: SecureApp, pki: Any) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        old = tls_client(secure.port_of("SSL"), pki, minimum_version=ssl.TLSVersion.TLSv1,
                         maximum_version=ssl.TLSVersion.TLSv1_1)  # fmt: skip
        old.call(metadata_request())
    modern = tls_client(secure.port_of("SSL"), pki, maximum_version=ssl.TLSVersion.TLSv1_2)
    assert modern.sock.version() == "TLSv1.2"  # type: ignore[attr-defined]
    modern.close()


def test_principal_mapping_rule(pki: Any, credentials: Any) -> None:
    from .conftest import secure_app

    app = secure_app(pki, credentials, ssl_principal_mapping_rules="RULE:^CN=([^,]*),OU=eng,.*$/$1/U,DEFAULT").start()
    try:
        client = tls_client(app.port_of("SSL"), pki)
        assert client.call(metadata_request()).brokers
        assert app.principals("SSL") == ["User:ALICE"]
        client.close()
    finally:
        app.stop()


def test_sighup_reload_serves_the_new_certificate_and_keeps_open_connections(secure: SecureApp, pki: Any) -> None:
    import trustme

    before = tls_client(secure.port_of("SSL"), pki)
    assert before.call(metadata_request()).brokers
    new_ca = trustme.CA()
    new_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pki.server_pem))
    with pki.ca_pem.open("ab") as f:  # clients of both CAs are trusted from now on
        f.write(new_ca.cert_pem.bytes())
    secure.call(secure.app.reload_tls)
    assert secure.app.tls is not None and secure.app.tls.reloads == 1
    old_only = ssl.create_default_context(cadata=pki.ca.cert_pem.bytes().decode())
    with pytest.raises(ssl.SSLError):  # the old CA no longer vouches for the server's certificate
        old_only.wrap_socket(WireClient("127.0.0.1", secure.port_of("SSL")).sock, server_hostname="127.0.0.1")
    context = ssl.create_default_context(cadata=new_ca.cert_pem.bytes().decode())
    client = WireClient("127.0.0.1", secure.port_of("SSL"))
    client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
    assert client.call(metadata_request()).brokers
    assert before.call(metadata_request()).brokers  # the connection opened before the reload is still served
    client.close()
    before.close()


def test_confluent_reauthenticates_on_the_same_connection(pki: Any, credentials: Any) -> None:
    """KIP-368: librdkafka re-authenticates before connections.max.reauth.ms ends; its connections stay open and the
    group keeps committing."""
    import time

    from .conftest import secure_app

    app = secure_app(pki, credentials, listeners="SASL_PLAINTEXT://127.0.0.1:0", connections_max_reauth_ms=1500).start()
    try:
        config = {
            "bootstrap.servers": f"127.0.0.1:{app.port_of('SASL_PLAINTEXT')}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        producer = Producer(config)
        producer.produce(TOPIC, b"r", partition=0)
        assert producer.flush(20) == 0
        consumer = Consumer({**config, "group.id": "reauth", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": 6000})  # fmt: skip
        consumer.subscribe([TOPIC])

        def sessions() -> dict[int, float]:
            server = app.app.listeners[0][1]
            return {id(c): c.sasl.expires for c in server.open_connections if c.sasl is not None and c.sasl.expires}

        for _ in range(60):  # joined once the first record arrives
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        first = app.call(sessions)
        end = time.monotonic() + 4
        commits = 0
        while time.monotonic() < end:
            consumer.poll(0.2)
            commits += 1
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, commits)], asynchronous=False)
        later = app.call(sessions)
        closed = app.call(lambda: dict(app.app.listeners[0][1].closed_by_cause))
        consumer.close()
        # the same connections, their sessions renewed by re-authentication (not new connections)
        renewed = [key for key in first if key in later and later[key] > first[key] + 1.5]
        assert renewed
        assert "reauth" not in closed  # no connection had to be closed for an expired session
    finally:
        app.stop()


def test_bad_tls_and_sasl_clients_log_nothing_at_error(
    secure: SecureApp, pki: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import os

    caplog.set_level(logging.INFO)
    for _ in range(3):
        garbage = WireClient("127.0.0.1", secure.port_of("SSL"))
        garbage.send_raw(os.urandom(512))
        garbage.is_closed_by_peer()
        garbage.close()
        plain_over_tls = WireClient("127.0.0.1", secure.port_of("SASL_SSL"))
        plain_over_tls.send(metadata_request())
        plain_over_tls.is_closed_by_peer()
        plain_over_tls.close()
        bad = WireClient("127.0.0.1", secure.port_of("SASL_PLAINTEXT"))
        assert bad.call(build_request(17, 1, mechanism="GSSAPI")).error_code == ErrorCode.unsupported_sasl_mechanism
        assert bad.is_closed_by_peer()
        bad.close()
        scram = WireClient("127.0.0.1", secure.port_of("SASL_PLAINTEXT"))
        assert scram.call(build_request(17, 1, mechanism="SCRAM-SHA-256")).error_code == ErrorCode.none
        answer = scram.call(build_request(36, 0, auth_bytes=b"n,,n=nobody,r=abc"))
        assert answer.error_code == ErrorCode.none  # an unknown user fails at the final message, like a wrong password
        answer = scram.call(
            build_request(36, 0, auth_bytes=b"c=biws,r=" + answer.auth_bytes[2:].split(b",")[0] + b",p=AAAA")
        )
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        scram.close()
    assert any("authentication failed" in r.getMessage() for r in caplog.records)  # the daemon's log is captured
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    client = tls_client(secure.port_of("SSL"), pki)  # and the TLS listener still serves
    assert client.call(metadata_request()).brokers
    client.close()


def test_metrics_count_the_connections_of_every_listener(secure: SecureApp, pki: Any) -> None:
    import urllib.request

    clients = [WireClient("127.0.0.1", secure.port_of("PLAINTEXT")), tls_client(secure.port_of("SSL"), pki)]
    for client in clients:
        assert client.call(metadata_request()).brokers
    url = f"http://127.0.0.1:{secure.app.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    assert "kgc_connections 2.0" in text.splitlines()
    bad = WireClient("127.0.0.1", secure.port_of("SASL_PLAINTEXT"))
    assert sasl_plain(bad, "alice", "wrong").error_code == ErrorCode.sasl_authentication_failed
    bad.close()
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    assert 'kgc_requests_total{api="SaslAuthenticate",error="sasl_authentication_failed"} 1.0' in text.splitlines()
    assert 'kgc_requests_total{api="SaslHandshake",error="none"} 1.0' in text.splitlines()
    for client in clients:
        client.close()


def test_frames_before_authentication_are_limited_like_sasl_server_max_receive_size(secure: SecureApp) -> None:
    big = build_request(18, 3, client_software_name="x" * 600_000, client_software_version="1")
    before = WireClient("127.0.0.1", secure.port_of("SASL_PLAINTEXT"))
    before.send(big)
    assert before.is_closed_by_peer()  # 600 KB > 512 KB before authentication: closed
    before.close()
    after = WireClient("127.0.0.1", secure.port_of("SASL_PLAINTEXT"))
    assert sasl_plain(after, "alice", "alice-secret").error_code == ErrorCode.none
    assert after.call(big) is not None  # once authenticated, socket.request.max.bytes applies
    after.close()
