"""Per-listener overrides ``listener.name.<name>.<setting>``: parsed from every source, validated, and applied to real
listeners (TLS keystore, client auth and principal rules, SASL mechanisms, re-authentication, max.connections);
SIGHUP reloads every listener's own certificate files."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme
from pydantic import ValidationError

from daemon.listeners import listener_specs
from daemon.settings import SettingsError, load_settings, parse_set_options
from protocol.errors import ErrorCode
from security.sasl import StaticCredentials
from tests.server.wire import WireClient, build_request

from .conftest import Pki, secure_app
from .test_listeners_e2e import metadata_request, sasl_plain

LISTENERS = "SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
PROTOCOLS = "SSL:SSL,INTERNAL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


def settings(*options: str):  # type: ignore[no-untyped-def]
    return load_settings(None, **parse_set_options(list(options)))


def test_set_options_override_per_listener_with_the_broker_wide_value_as_default() -> None:
    s = settings(
        "listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "ssl.client.auth=requested",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.internal.ssl.client.auth=required",
        "listener.name.INTERNAL.sasl.enabled.mechanisms=PLAIN",  # Kafka lower-cases the listener name
        "listener.name.internal.connections.max.reauth.ms=60000",
        "listener.name.internal.max.connections=7",
    )
    internal = s.listeners.for_listener("INTERNAL")
    assert (internal.ssl_client_auth, internal.mechanisms, internal.connections_max_reauth_ms) == (
        "required", ("PLAIN",), 60_000
    )  # fmt: skip
    plain = s.listeners.for_listener("PLAINTEXT")
    assert (plain.ssl_client_auth, plain.mechanisms, plain.connections_max_reauth_ms) == (
        "requested", ("SCRAM-SHA-512",), 0
    )  # fmt: skip
    specs = {spec.name: spec for spec in listener_specs(s)}
    assert (specs["INTERNAL"].max_connections, specs["PLAINTEXT"].max_connections) == (7, None)


def test_toml_and_environment_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "kgc.toml"
    config.write_text(
        '"listener.security.protocol.map" = "SSL:SSL,INTERNAL:SSL"\n'
        'listener.name.internal.ssl.keystore.location = "/etc/kgc/internal.pem"\n'
        '"listener.name.ssl.ssl.principal.mapping.rules" = "RULE:^CN=(.*)$/$1/,DEFAULT"\n'
        "[listeners]\n"
        'listeners = "SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0"\n'
        "[listeners.overrides.internal]\n"
        '"ssl.client.auth" = "required"\n'
    )
    s = load_settings(config)
    assert s.listeners.for_listener("internal").ssl_keystore_location == "/etc/kgc/internal.pem"
    assert s.listeners.for_listener("internal").ssl_client_auth == "required"
    assert s.listeners.for_listener("SSL").ssl_principal_mapping_rules == "RULE:^CN=(.*)$/$1/,DEFAULT"
    assert s.listeners.for_listener("SSL").ssl_keystore_location is None
    monkeypatch.setenv("KGC_LISTENERS__OVERRIDES", '{"ssl": {"max.connections": 3}}')
    s = load_settings(None, listeners={"listeners": "SSL://127.0.0.1:0"})
    assert listener_specs(s)[0].max_connections == 3


@pytest.mark.parametrize(
    "option",
    [
        "listener.name.internal.group.max.size=3",  # not a per-listener setting
        "listener.name.internal.ssl.client.auth=sometimes",  # checked like the broker-wide one
        "listener.name.internal.sasl.enabled.mechanisms=GSSAPI",
        "listener.name.internal.max.connections=-1",
        "listener.name.internal.max.connections=many",
        "listener.name..ssl.client.auth=required",
    ],
)
def test_bad_overrides_are_refused(option: str) -> None:
    with pytest.raises((ValidationError, SettingsError, ValueError)):
        settings("listeners=INTERNAL://127.0.0.1:0", "listener.security.protocol.map=INTERNAL:SSL", option)


def test_an_override_of_a_listener_that_does_not_exist_is_refused() -> None:
    s = settings("listeners=PLAINTEXT://127.0.0.1:0", "listener.name.internl.ssl.client.auth=required")
    with pytest.raises(ValueError, match="no listener INTERNL"):
        listener_specs(s)


# ------------------------------------------------------------------------------------------------- real listeners


class InternalPki:
    """A second CA for the INTERNAL listener: its own server certificate, trusted client certificates from it only."""

    def __init__(self, directory: Path) -> None:
        self.ca = trustme.CA()
        self.server_pem = directory / "internal-server.pem"
        self.ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(self.server_pem))
        self.ca_pem = directory / "internal-ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        client = self.ca.issue_cert("svc", common_name="svc-orders", organization_unit_name="ops")
        self.client_pem = directory / "internal-client.pem"
        client.private_key_and_cert_chain_pem.write_to_path(str(self.client_pem))


def tls(port: int, ca: trustme.CA, client_pem: Path | None = None) -> WireClient:
    context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    if client_pem is not None:
        context.load_cert_chain(str(client_pem))
    client = WireClient("127.0.0.1", port)
    client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
    return client


@pytest.fixture
def internal(tmp_path: Path) -> InternalPki:
    return InternalPki(tmp_path)


def test_listeners_use_their_own_tls_and_sasl_settings(
    pki: Pki, internal: InternalPki, credentials: StaticCredentials
) -> None:
    app = secure_app(
        pki,
        credentials,
        listeners=LISTENERS,
        security_protocol_map=PROTOCOLS,
        ssl_client_auth="none",
        sasl_enabled_mechanisms="SCRAM-SHA-512",
        overrides={
            "internal": {
                "ssl.keystore.location": str(internal.server_pem),
                "ssl.truststore.location": str(internal.ca_pem),
                "ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U",
            },
            "sasl_plaintext": {"sasl.enabled.mechanisms": "PLAIN", "connections.max.reauth.ms": 60_000},
        },
    ).start()
    try:
        # SSL: the broker-wide keystore, no client certificate asked for.
        anonymous = tls(app.port_of("SSL"), pki.ca)
        assert anonymous.call(metadata_request()).brokers
        assert app.principals("SSL") == ["User:ANONYMOUS"]
        # INTERNAL: its own certificate (the broker-wide CA does not vouch for it), its own client CA, required.
        with pytest.raises(ssl.SSLError):
            tls(app.port_of("INTERNAL"), pki.ca)
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            tls(app.port_of("INTERNAL"), internal.ca).call(metadata_request())
        service = tls(app.port_of("INTERNAL"), internal.ca, internal.client_pem)
        assert service.call(metadata_request()).brokers
        assert app.principals("INTERNAL") == ["User:SVC-ORDERS"]  # the listener's own mapping rule
        # SASL_PLAINTEXT enables PLAIN only, SASL_SSL keeps the broker-wide SCRAM-SHA-512.
        plain = WireClient("127.0.0.1", app.port_of("SASL_PLAINTEXT"))
        assert sasl_plain(plain, "alice", "alice-secret").error_code == ErrorCode.none
        assert plain.call(metadata_request()).brokers
        refused = tls(app.port_of("SASL_SSL"), pki.ca)
        answer = refused.call(build_request(17, 1, mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["SCRAM-SHA-512"]
        servers = {spec.name: server for spec, server in app.app.listeners}
        assert servers["SASL_PLAINTEXT"].sasl is not None and servers["SASL_PLAINTEXT"].sasl.max_reauth_ms == 60_000
        assert servers["SASL_SSL"].sasl is not None and servers["SASL_SSL"].sasl.max_reauth_ms == 0
        assert servers["SSL"].tls is servers["SASL_SSL"].tls  # same settings: one context
        assert servers["INTERNAL"].tls is not servers["SSL"].tls
        for client in (anonymous, service, plain, refused):
            client.close()
    finally:
        app.stop()


def test_sighup_reloads_each_listeners_own_certificate(
    pki: Pki, internal: InternalPki, credentials: StaticCredentials
) -> None:
    app = secure_app(
        pki,
        credentials,
        listeners="SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        security_protocol_map=PROTOCOLS,
        ssl_client_auth="none",
        overrides={"internal": {"ssl.keystore.location": str(internal.server_pem)}},
    ).start()
    try:
        before = tls(app.port_of("INTERNAL"), internal.ca)
        rotated = trustme.CA()
        rotated.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(internal.server_pem))
        app.call(app.app.reload_tls)
        assert [context.reloads for context in app.app.tls_contexts] == [1, 1]
        with pytest.raises(ssl.SSLError):  # INTERNAL now serves the rotated certificate ...
            tls(app.port_of("INTERNAL"), internal.ca)
        after = tls(app.port_of("INTERNAL"), rotated)
        assert after.call(metadata_request()).brokers
        assert before.call(metadata_request()).brokers  # ... and keeps the connection opened before
        broker_wide = tls(app.port_of("SSL"), pki.ca)  # SSL keeps the broker-wide one
        assert broker_wide.call(metadata_request()).brokers
        for client in (before, after, broker_wide):
            client.close()
    finally:
        app.stop()
