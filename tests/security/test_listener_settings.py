"""The listener settings: Kafka's names from --set, the listeners they describe, and the mistakes refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from daemon.listeners import listener_specs
from daemon.settings import load_settings, parse_set_options


def settings(*options: str):  # type: ignore[no-untyped-def]
    return load_settings(None, **parse_set_options(list(options)))


def test_default_is_one_plaintext_listener_from_kafka_listen() -> None:
    [spec] = listener_specs(load_settings(None, kafka={"host": "10.0.0.1", "port": 9099, "advertised_host": "kgc"}))
    assert (spec.name, spec.protocol, spec.host, spec.port, spec.advertised_host) == (
        "PLAINTEXT", "PLAINTEXT", "10.0.0.1", 9099, "kgc"
    )  # fmt: skip


def test_kafka_names_describe_listeners() -> None:
    s = settings(
        "listeners=PLAINTEXT://127.0.0.1:9092,INTERNAL://[::1]:9094,SASL_SSL://0.0.0.0:9095",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "advertised.listeners=SASL_SSL://kafka.example.com:443",
        "ssl.client.auth=REQUIRED",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "connections.max.reauth.ms=3600000",
        "ssl.principal.mapping.rules=RULE:^CN=(.*)$/$1/L,DEFAULT",
    )
    specs = listener_specs(s)
    assert [(x.name, x.protocol, x.host, x.port) for x in specs] == [
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),
        ("INTERNAL", "SASL_PLAINTEXT", "::1", 9094),
        ("SASL_SSL", "SASL_SSL", "0.0.0.0", 9095),
    ]
    assert specs[2].advertised(9095) == ("kafka.example.com", 443)
    assert specs[0].advertised(9092) == ("127.0.0.1", 9092)
    assert s.listeners.ssl_client_auth == "required"
    assert s.listeners.mechanisms == ("SCRAM-SHA-512",)
    assert s.listeners.connections_max_reauth_ms == 3_600_000


@pytest.mark.parametrize(
    "option",
    [
        "listeners=PLAINTEXT:9092",
        "listener.security.protocol.map=X:KERBEROS",
        "sasl.enabled.mechanisms=GSSAPI",
        "ssl.client.auth=sometimes",
        "ssl.keystore.type=JKS",
        "ssl.principal.mapping.rules=RULE:broken",
    ],
)
def test_bad_values_are_refused(option: str) -> None:
    with pytest.raises((ValidationError, ValueError)):
        settings(option)


@pytest.mark.parametrize(
    "options",
    [
        ("listeners=UNMAPPED://127.0.0.1:1",),
        ("listeners=PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",),
        ("listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1",),
        ("listeners=PLAINTEXT://127.0.0.1:1", "advertised.listeners=SSL://x:1"),
    ],
)
def test_inconsistent_listeners_are_refused(options: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        listener_specs(settings(*options))


def test_an_ssl_listener_needs_a_keystore() -> None:
    from daemon.app import App

    with pytest.raises(ValueError, match=r"ssl\.keystore"):
        App(settings("listeners=SSL://127.0.0.1:0"))


def test_toml_kafka_names_and_the_listeners_section(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "kgc.toml"
    config.write_text(
        'listeners = "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"\n'
        'advertised.listeners = "SSL://tls.example.com:443"\n'
        '"ssl.client.auth" = "required"\n'
    )
    s = load_settings(config)
    assert [x.name for x in listener_specs(s)] == ["PLAINTEXT", "SSL"]
    assert s.listeners.ssl_client_auth == "required"
    assert listener_specs(s)[1].advertised(9093) == ("tls.example.com", 443)
    section = tmp_path / "section.toml"
    section.write_text('[listeners]\nlisteners = "SASL_SSL://127.0.0.1:9094"\nssl_client_auth = "requested"\n')
    s = load_settings(section)
    assert [x.protocol for x in listener_specs(s)] == ["SASL_SSL"]
    assert s.listeners.ssl_client_auth == "requested"


def test_sasl_without_the_authorizer_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """Authentication without authorization lets any principal alter any user's credentials (as in Kafka): logged."""
    import asyncio
    import logging

    from daemon.listeners import build_servers
    from servers.kafka import Services

    async def build(*options: str) -> None:
        build_servers(settings(*options), Services(None, None, None), None)  # type: ignore[arg-type]

    caplog.set_level(logging.WARNING, logger="daemon.listeners")
    asyncio.run(build("listeners=SASL_PLAINTEXT://127.0.0.1:0"))
    assert any("without authorizer.enabled" in r.getMessage() for r in caplog.records)
    caplog.clear()
    asyncio.run(build("listeners=SASL_PLAINTEXT://127.0.0.1:0", "authorizer.enabled=true"))
    asyncio.run(build("listeners=PLAINTEXT://127.0.0.1:0"))
    assert not caplog.records
