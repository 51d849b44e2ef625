"""One ``KafkaServer`` per configured listener (``daemon.listener_settings``), with its TLS context and SASL settings.

Every listener serves the same ``Services``; each server's ``node`` (that listener's advertised address) goes into
the ``RequestContext`` of its requests, so Metadata, FindCoordinator and DescribeCluster answer with the address of
the listener the request came in on. Each listener's TLS and SASL settings are the broker-wide ones with its
``listener.name.<name>.*`` overrides; listeners with the same TLS settings share one ``TlsContext``, and
``App.reload_tls`` (SIGHUP) re-reads the files of each. All listeners count their connections in one
``servers.kafka.quotas.ConnectionQuotas`` (``max.connections``, ``max.connections.per.ip``), each its own
``listener.name.<name>.max.connections``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from daemon.listener_settings import ListenerSpec, ListenersSettings
from daemon.settings import Settings
from runtime.metrics import ConnectionStats
from security.credentials import CredentialLookup, ScramCredential
from security.principals import parse_rules
from security.sasl import PlainCache
from servers.kafka import Node, Services
from servers.kafka.listener import KafkaServer
from servers.kafka.quotas import UNLIMITED, ConnectionQuotas
from servers.kafka.sasl import SaslConfig
from servers.kafka.tls import TlsConfig, TlsContext

log = logging.getLogger("daemon.listeners")


class NoCredentials:
    """A SASL listener without a credential store: nobody authenticates."""

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return None


def tls_config(s: ListenersSettings) -> TlsConfig:
    """The TLS settings of one listener (``ListenersSettings.for_listener``)."""
    return TlsConfig(
        keystore_location=s.ssl_keystore_location,
        keystore_certificate_chain=s.ssl_keystore_certificate_chain,
        keystore_key=s.ssl_keystore_key,
        key_password=s.ssl_key_password,
        truststore_location=s.ssl_truststore_location,
        truststore_certificates=s.ssl_truststore_certificates,
        client_auth=s.ssl_client_auth,
        enabled_protocols=tuple(p.strip() for p in s.ssl_enabled_protocols.split(",") if p.strip()),
        cipher_suites=s.ssl_cipher_suites,
    )


def listener_specs(settings: Settings) -> list[ListenerSpec]:
    k = settings.kafka
    return settings.listeners.specs(k.host, k.port, (k.advertised_host, k.advertised_port))


def build_servers(
    settings: Settings, services: Services, credentials: CredentialLookup | None
) -> tuple[list[tuple[ListenerSpec, KafkaServer]], list[TlsContext]]:
    """The listeners' servers (not started) and their TLS contexts (one per distinct TLS configuration: listeners
    without ``listener.name.<name>.ssl.*`` overrides share one). Raises ``ValueError``
    (``servers.kafka.tls.TlsConfigError``) on unusable settings or files."""
    k = settings.kafka
    specs = listener_specs(settings)
    quotas = ConnectionQuotas(k.max_connections, k.max_connections_per_ip, k.max_connections_per_ip_overrides)
    lookup = credentials if credentials is not None else NoCredentials()
    plain_cache = PlainCache()  # PLAIN logins verified lately, shared by the SASL listeners
    contexts: dict[tuple[TlsConfig, str], TlsContext] = {}
    servers = []
    for spec in specs:
        s = settings.listeners.for_listener(spec.name)
        tls = None
        if spec.tls:
            key = (tls_config(s), s.ssl_principal_mapping_rules)
            tls = contexts.get(key)
            if tls is None:
                try:
                    tls = contexts[key] = TlsContext(key[0], parse_rules(key[1]))
                except ValueError as exc:
                    raise type(exc)(f"listener {spec.name}: {exc}") from None
        sasl = SaslConfig(s.mechanisms, lookup, s.connections_max_reauth_ms, plain_cache) if spec.sasl else None
        server = KafkaServer(
            services,
            host=spec.host,
            port=spec.port,
            max_frame_size=k.max_frame_size,
            max_inflight=k.max_inflight,
            queued_max_request_bytes=k.queued_max_request_bytes,
            connections_max_idle_ms=k.connections_max_idle_ms,
            name=spec.name,
            tls=tls,
            sasl=sasl,
            quotas=quotas,
            listener_max_connections=spec.max_connections if spec.max_connections is not None else UNLIMITED,
        )
        servers.append((spec, server))
    if any(spec.sasl for spec in specs) and not settings.authorizer.enabled:
        # Kafka's behaviour too, but rarely what is meant: authentication without authorization.
        log.warning(
            "SASL listeners without authorizer.enabled: every authenticated principal (and any client of a PLAINTEXT "
            "listener) may do everything, including AlterUserScramCredentials on any user and CreateAcls "
            "(docs/security.md §8)"
        )
    return servers, list(contexts.values())


def advertise(spec: ListenerSpec, server: KafkaServer, settings: Settings) -> tuple[str, int]:
    """Once bound: the listener's node is its advertised address (the bound port for port 0)."""
    k = settings.kafka
    host, port = spec.advertised(server.bound_port)
    server.node = Node(k.node_id, host, port, k.cluster_id)
    return host, port


def merged_stats(servers: list[KafkaServer]) -> Callable[[], ConnectionStats]:
    """The connection figures of every listener summed (``kgc_connections``, refusals, closes), for /metrics; the
    limits are the broker-wide ones (shared by all listeners)."""

    def stats() -> ConnectionStats:
        parts = [server.stats() for server in servers]
        total = parts[0]
        for part in parts[1:]:
            total.open += part.open
            total.inflight += part.inflight
            total.queued_bytes += part.queued_bytes
            total.muted += part.muted
            total.muted_total += part.muted_total
            total.accept_waits += part.accept_waits
            for cause, count in part.refused.items():
                total.refused[cause] = total.refused.get(cause, 0) + count
            for cause, count in part.closed.items():
                total.closed[cause] = total.closed.get(cause, 0) + count
        return total

    return stats
