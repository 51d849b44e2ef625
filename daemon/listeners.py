"""One ``KafkaServer`` per configured listener (``daemon.listener_settings``), with its TLS context and SASL settings.

Every listener serves the same ``Services``; each server's ``node`` (that listener's advertised address) goes into
the ``RequestContext`` of its requests, so Metadata, FindCoordinator and DescribeCluster answer with the address of
the listener the request came in on. The SSL and SASL_SSL listeners share one ``TlsContext``; ``App.reload_tls``
(SIGHUP) re-reads its files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from daemon.listener_settings import ListenerSpec
from daemon.settings import Settings
from runtime.metrics import ConnectionStats
from security.credentials import CredentialLookup, ScramCredential
from security.principals import parse_rules
from servers.kafka import Node, Services
from servers.kafka.listener import KafkaServer
from servers.kafka.sasl import SaslConfig
from servers.kafka.tls import TlsConfig, TlsContext

log = logging.getLogger("daemon.listeners")


class NoCredentials:
    """A SASL listener without a credential store: nobody authenticates."""

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return None


def tls_config(settings: Settings) -> TlsConfig:
    s = settings.listeners
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
) -> tuple[list[tuple[ListenerSpec, KafkaServer]], TlsContext | None]:
    """The listeners' servers (not started) and the shared TLS context (None without SSL listeners). Raises
    ``ValueError`` (``servers.kafka.tls.TlsConfigError``) on unusable settings or files."""
    k = settings.kafka
    s = settings.listeners
    specs = listener_specs(settings)
    tls = (
        TlsContext(tls_config(settings), parse_rules(s.ssl_principal_mapping_rules))
        if any(x.tls for x in specs)
        else None
    )
    sasl = SaslConfig(
        s.mechanisms, credentials if credentials is not None else NoCredentials(), s.connections_max_reauth_ms
    )
    servers = []
    for spec in specs:
        server = KafkaServer(
            services,
            host=spec.host,
            port=spec.port,
            max_frame_size=k.max_frame_size,
            max_inflight=k.max_inflight,
            queued_max_request_bytes=k.queued_max_request_bytes,
            connections_max_idle_ms=k.connections_max_idle_ms,
            max_connections=k.max_connections,
            max_connections_per_ip=k.max_connections_per_ip,
            max_connections_per_ip_overrides=k.max_connections_per_ip_overrides,
            name=spec.name,
            tls=tls if spec.tls else None,
            sasl=sasl if spec.sasl else None,
        )
        servers.append((spec, server))
    if any(spec.sasl for spec in specs) and not settings.authorizer.enabled:
        # Kafka's behaviour too, but rarely what is meant: authentication without authorization.
        log.warning(
            "SASL listeners without authorizer.enabled: every authenticated principal (and any client of a PLAINTEXT "
            "listener) may do everything, including AlterUserScramCredentials on any user and CreateAcls "
            "(docs/security.md §8)"
        )
    return servers, tls


def advertise(spec: ListenerSpec, server: KafkaServer, settings: Settings) -> tuple[str, int]:
    """Once bound: the listener's node is its advertised address (the bound port for port 0)."""
    k = settings.kafka
    host, port = spec.advertised(server.bound_port)
    server.node = Node(k.node_id, host, port, k.cluster_id)
    return host, port


def merged_stats(servers: list[KafkaServer]) -> Callable[[], ConnectionStats]:
    """The connection figures of every listener summed (``kgc_connections``, refusals, closes), for /metrics; the
    limits are the first listener's (all listeners share the same settings)."""

    def stats() -> ConnectionStats:
        parts = [server.stats() for server in servers]
        total = parts[0]
        for part in parts[1:]:
            total.open += part.open
            total.inflight += part.inflight
            total.queued_bytes += part.queued_bytes
            total.muted += part.muted
            total.muted_total += part.muted_total
            for cause, count in part.refused.items():
                total.refused[cause] = total.refused.get(cause, 0) + count
            for cause, count in part.closed.items():
                total.closed[cause] = total.closed.get(cause, 0) + count
        return total

    return stats
