"""Listeners, TLS and SASL settings (section ``[listeners]``, Kafka's names; ``docs/security.md``).

``listeners`` is Kafka's list of ``NAME://HOST:PORT`` (``PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094``); each
name's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) comes from ``listener.security.protocol.map``
(default: each of the four names is its own protocol). ``advertised.listeners`` gives, per listener name, the
address clients are told (Metadata, FindCoordinator, DescribeCluster answer with the one of the listener the client
came in on); a listener not in it advertises its own address (this machine's name for a wildcard host, the bound
port for port 0). When ``listeners`` is empty the daemon has the one PLAINTEXT listener of ``[kafka] host/port``
(``--kafka-listen``, the shorthand) advertised as ``[kafka] advertised_host/port`` (``--advertise``), as before.

Per-listener overrides, Kafka's ``listener.name.<name>.<setting>`` with the listener name in lower case
(``listener.name.internal.ssl.client.auth=required``): for the names in ``PER_LISTENER_NAMES`` (the TLS settings,
``sasl.enabled.mechanisms``, ``connections.max.reauth.ms``, ``max.connections``) the listener's own value wins, the
broker-wide one is the default. They are kept in ``ListenersSettings.overrides`` (listener -> Kafka name -> value;
``[listeners.overrides.internal]`` in TOML, ``KGC_LISTENERS__OVERRIDES`` as JSON) and each listener's effective
settings are ``ListenersSettings.for_listener``.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from security.principals import parse_rules
from security.sasl import MECHANISMS

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:\[\]]*):(\d+)$")

# Kafka name -> field of the ``listeners`` section (merged into ``daemon.settings.KAFKA_NAMES``).
LISTENER_KAFKA_NAMES: dict[str, tuple[str, str]] = {
    "listeners": ("listeners", "listeners"),
    "advertised.listeners": ("listeners", "advertised_listeners"),
    "listener.security.protocol.map": ("listeners", "security_protocol_map"),
    "sasl.enabled.mechanisms": ("listeners", "sasl_enabled_mechanisms"),
    "connections.max.reauth.ms": ("listeners", "connections_max_reauth_ms"),
    "ssl.keystore.type": ("listeners", "ssl_keystore_type"),
    "ssl.keystore.location": ("listeners", "ssl_keystore_location"),
    "ssl.keystore.certificate.chain": ("listeners", "ssl_keystore_certificate_chain"),
    "ssl.keystore.key": ("listeners", "ssl_keystore_key"),
    "ssl.key.password": ("listeners", "ssl_key_password"),
    "ssl.truststore.type": ("listeners", "ssl_truststore_type"),
    "ssl.truststore.location": ("listeners", "ssl_truststore_location"),
    "ssl.truststore.certificates": ("listeners", "ssl_truststore_certificates"),
    "ssl.client.auth": ("listeners", "ssl_client_auth"),
    "ssl.enabled.protocols": ("listeners", "ssl_enabled_protocols"),
    "ssl.cipher.suites": ("listeners", "ssl_cipher_suites"),
    "ssl.principal.mapping.rules": ("listeners", "ssl_principal_mapping_rules"),
}


# Kafka names a listener may override with listener.name.<name>.<setting>: the TLS and SASL ones, and its own
# max.connections (the broker-wide one is in [kafka]).
PER_LISTENER_NAMES = frozenset(
    [name for name in LISTENER_KAFKA_NAMES if name.startswith("ssl.")]
    + ["sasl.enabled.mechanisms", "connections.max.reauth.ms", "max.connections"]
)
_OVERRIDE_PREFIX = "listener.name."


def parse_override_name(name: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<setting>`` -> (listener in lower case, setting); None for any other name.
    Raises ``ValueError`` for a listener-prefixed name whose setting cannot be overridden."""
    if not name.startswith(_OVERRIDE_PREFIX):
        return None
    listener, _, setting = name[len(_OVERRIDE_PREFIX) :].partition(".")
    if not listener or setting not in PER_LISTENER_NAMES:
        raise ValueError(
            f"{name!r}: expected listener.name.<listener>.<setting>, the setting one of "
            f"{', '.join(sorted(PER_LISTENER_NAMES))}"
        )
    return listener.lower(), setting


class ListenerConfigError(ValueError):
    """``listeners`` and its companions do not fit together (the message names the setting)."""


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str
    protocol: str  # one of SECURITY_PROTOCOLS
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    max_connections: int | None = None  # listener.name.<name>.max.connections (None: only the broker-wide limit)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def advertised(self, bound_port: int) -> tuple[str, int]:
        host = self.advertised_host
        if not host:
            host = self.host if self.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
        return host, self.advertised_port or bound_port


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def parse_endpoints(value: str, what: str) -> list[tuple[str, str, int]]:
    """``NAME://HOST:PORT,...`` -> [(NAME, host, port)]; raises ``ValueError`` naming ``what``."""
    endpoints = []
    for item in _split(value):
        match = _LISTENER.match(item)
        if match is None:
            raise ValueError(f"{what}: expected NAME://HOST:PORT, got {item!r}")
        port = int(match.group(3))
        if port > 65535:
            raise ValueError(f"{what}: port out of range in {item!r}")
        endpoints.append((match.group(1).upper(), match.group(2).strip("[]"), port))
    return endpoints


def parse_protocol_map(value: str) -> dict[str, str]:
    mapping = {}
    for item in _split(value):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"listener.security.protocol.map: expected NAME:{'|'.join(SECURITY_PROTOCOLS)}, got {item!r}"
            )
        mapping[name.strip().upper()] = protocol
    return mapping


class ListenersSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    listeners: str = ""  # empty: one PLAINTEXT listener on [kafka] host:port
    advertised_listeners: str = ""
    security_protocol_map: str = DEFAULT_PROTOCOL_MAP
    # SASL (SASL_PLAINTEXT, SASL_SSL listeners). Kafka's default is GSSAPI, which is not served; PLAIN sends the
    # password itself, so it must be enabled explicitly (and belongs on SASL_SSL).
    sasl_enabled_mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512"
    connections_max_reauth_ms: int = Field(default=0, ge=0)  # KIP-368; 0: sessions do not expire
    # TLS (SSL, SASL_SSL listeners), PEM only.
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str | None = None
    ssl_keystore_certificate_chain: str | None = None
    ssl_keystore_key: str | None = None
    ssl_key_password: str | None = None
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str | None = None
    ssl_truststore_certificates: str | None = None
    ssl_client_auth: str = "none"  # required | requested | none
    ssl_enabled_protocols: str = "TLSv1.2,TLSv1.3"
    ssl_cipher_suites: str | None = None
    ssl_principal_mapping_rules: str = "DEFAULT"
    # listener.name.<name>.<setting>: lower-case listener name -> Kafka name (PER_LISTENER_NAMES) -> value
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("ssl_keystore_type", "ssl_truststore_type")
    @classmethod
    def _pem_only(cls, value: str) -> str:
        if value.upper() != "PEM":
            raise ValueError("only PEM is supported (ssl.keystore.type / ssl.truststore.type)")
        return "PEM"

    @field_validator("ssl_client_auth")
    @classmethod
    def _client_auth(cls, value: str) -> str:
        if value.lower() not in ("required", "requested", "none"):
            raise ValueError("ssl.client.auth must be required, requested or none")
        return value.lower()

    @field_validator("sasl_enabled_mechanisms")
    @classmethod
    def _mechanisms(cls, value: str) -> str:
        for mechanism in _split(value):
            if mechanism not in MECHANISMS:
                raise ValueError(f"sasl.enabled.mechanisms: {mechanism!r} is not supported ({', '.join(MECHANISMS)})")
        return value

    @field_validator("ssl_principal_mapping_rules")
    @classmethod
    def _rules(cls, value: str) -> str:
        parse_rules(value)
        return value

    @field_validator("security_protocol_map")
    @classmethod
    def _protocol_map(cls, value: str) -> str:
        parse_protocol_map(value)
        return value

    @field_validator("listeners", "advertised_listeners")
    @classmethod
    def _endpoints(cls, value: str) -> str:
        parse_endpoints(value, "listeners")
        return value

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        normalised: dict[str, dict[str, Any]] = {}
        for listener, settings in value.items():
            if not isinstance(settings, dict):
                raise ValueError(f"listener.name.{listener}: expected a table of settings")
            for setting in settings:
                if setting not in PER_LISTENER_NAMES:
                    raise ValueError(
                        f"listener.name.{listener.lower()}.{setting} cannot be set per listener "
                        f"(these can: {', '.join(sorted(PER_LISTENER_NAMES))})"
                    )
            normalised.setdefault(listener.lower(), {}).update(settings)
        return normalised

    @model_validator(mode="after")
    def _valid_overrides(self) -> ListenersSettings:
        for listener in self.overrides:
            try:
                self.for_listener(listener)
                self.listener_max_connections(listener)
            except ValueError as exc:
                raise ValueError(f"listener.name.{listener}: {exc}") from None
        return self

    def for_listener(self, name: str) -> ListenersSettings:
        """The TLS and SASL settings of listener ``name``: its ``listener.name.<name>.*`` values over the
        broker-wide ones."""
        own = self.overrides.get(name.lower())
        if not own:
            return self
        fields = {LISTENER_KAFKA_NAMES[k][1]: v for k, v in own.items() if k in LISTENER_KAFKA_NAMES}
        data = self.model_dump(exclude={"overrides"})
        data.update(fields)
        return ListenersSettings.model_validate(data)

    def listener_max_connections(self, name: str) -> int | None:
        value = self.overrides.get(name.lower(), {}).get("max.connections")
        if value is None:
            return None
        try:
            count = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"max.connections must be an integer, not {value!r}") from None
        if count < 0:
            raise ValueError("max.connections must be >= 0")
        return count

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return tuple(_split(self.sasl_enabled_mechanisms))

    def specs(
        self, default_host: str, default_port: int, default_advertised: tuple[str | None, int | None]
    ) -> list[ListenerSpec]:
        """The listeners to open, first the one ``App.port`` reports. Raises ``ValueError`` on an inconsistent
        configuration (unknown name, duplicate name or port, advertised name that is not a listener)."""
        if not self.listeners:
            self._known_overrides(["PLAINTEXT"])
            return [
                ListenerSpec(
                    "PLAINTEXT",
                    "PLAINTEXT",
                    default_host,
                    default_port,
                    *default_advertised,
                    max_connections=self.listener_max_connections("PLAINTEXT"),
                )
            ]
        protocols = parse_protocol_map(self.security_protocol_map)
        advertised = {name: (host, port) for name, host, port in parse_endpoints(self.advertised_listeners, "x")}
        specs: list[ListenerSpec] = []
        for name, host, port in parse_endpoints(self.listeners, "listeners"):
            protocol = protocols.get(name)
            if protocol is None:
                raise ListenerConfigError(f"listeners: {name} is not in listener.security.protocol.map")
            if any(s.name == name for s in specs):
                raise ListenerConfigError(f"listeners: {name} is given twice")
            if port and any(s.port == port and s.host == host for s in specs):
                raise ListenerConfigError(f"listeners: port {port} is given twice")
            adv_host, adv_port = advertised.pop(name, (None, None))
            specs.append(
                ListenerSpec(
                    name,
                    protocol,
                    host,
                    port,
                    adv_host or None,
                    adv_port or None,
                    max_connections=self.listener_max_connections(name),
                )
            )
        if advertised:
            raise ListenerConfigError(f"advertised.listeners: {', '.join(advertised)} not in listeners")
        self._known_overrides([s.name for s in specs])
        return specs

    def _known_overrides(self, names: list[str]) -> None:
        """An override of a listener that does not exist is a mistake (Kafka ignores it silently)."""
        known = {name.lower() for name in names}
        unknown = sorted(set(self.overrides) - known)
        if unknown:
            raise ListenerConfigError(
                f"listener.name.{unknown[0]}.*: there is no listener {unknown[0].upper()} (listeners: "
                f"{', '.join(sorted(known))})"
            )
