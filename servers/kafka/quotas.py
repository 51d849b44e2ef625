"""Connection limits shared by every listener, as Kafka's ``ConnectionQuotas`` (``SocketServer.scala``) counts them.

* ``max.connections``: connections of all listeners together; ``listener.name.<name>.max.connections``: those of
  one listener. At either limit the listener stops accepting (Kafka's acceptor waits in ``waitForConnectionSlot``):
  new clients wait in the kernel's listen backlog, their TCP handshake done but nothing read, until a connection of
  that listener (listener limit) or of any listener (broker-wide limit) closes; then accepting resumes. A client
  that gives up meanwhile is accepted and finds its peer gone.
* ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, by address, host names resolved once):
  connections from one address over all listeners. Past it the accepted connection is closed at once (Kafka's
  ``TooManyConnectionsException``), before any TLS handshake.

A connection is counted from its ``accept()`` (a TLS handshake in progress holds a slot, as in Kafka) until it
closes. Kafka's protected inter-broker listener and its connection creation rates (``max.connection.creation.rate``)
have no counterpart here. No I/O: the listeners (``servers.kafka.listener.KafkaServer``) pause and resume their
accepting through ``wait_for_slot``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

log = logging.getLogger("servers.kafka.quotas")

UNLIMITED = 2_147_483_647  # Kafka's default for max.connections and max.connections.per.ip


class ListenerCount:
    """One listener's connections and its ``listener.name.<name>.max.connections``."""

    __slots__ = ("count", "max_connections", "name")

    def __init__(self, name: str, max_connections: int = UNLIMITED) -> None:
        self.name = name
        self.max_connections = max_connections
        self.count = 0


def resolve_overrides(overrides: dict[str, int]) -> dict[str, int]:
    """max.connections.per.ip.overrides keyed by address: host names are resolved once, like Kafka's
    ``InetAddress.getByName``."""
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
        except OSError:
            log.warning("max.connections.per.ip.overrides: cannot resolve %r; ignored", host)
            continue
        for address in addresses:
            resolved[str(address)] = count
    return resolved


class ConnectionQuotas:
    """The counts of every listener of one daemon (module docstring). All methods are O(1) but ``release`` while
    listeners wait, which wakes each waiting listener (there are a handful)."""

    def __init__(
        self,
        max_connections: int = UNLIMITED,
        max_connections_per_ip: int = UNLIMITED,
        max_connections_per_ip_overrides: dict[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections  # as configured; KafkaServer.start may cap it at the fd limit
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = resolve_overrides(max_connections_per_ip_overrides or {})
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._waiting: dict[ListenerCount, Callable[[], None]] = {}

    def slot_available(self, listener: ListenerCount) -> bool:
        """Kafka's ``connectionSlotAvailable``: room on the listener and on the broker."""
        return listener.count < listener.max_connections and self.total < self.max_connections

    def wait_for_slot(self, listener: ListenerCount, resume: Callable[[], None]) -> None:
        """``listener`` stopped accepting: call ``resume`` once a slot may be free for it (once)."""
        self._waiting[listener] = resume

    def cancel_wait(self, listener: ListenerCount) -> None:
        self._waiting.pop(listener, None)

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def acquire(self, listener: ListenerCount, ip: str) -> int | None:
        """Count an accepted connection from ``ip``; or, over ``max.connections.per.ip``, count nothing and return
        that address's limit (the connection is to be closed)."""
        count = self.per_ip.get(ip, 0)
        limit = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        if count >= limit:
            return limit
        self.per_ip[ip] = count + 1
        self.total += 1
        listener.count += 1
        return None

    def release(self, listener: ListenerCount, ip: str) -> None:
        count = self.per_ip.get(ip, 0) - 1
        if count > 0:
            self.per_ip[ip] = count
        else:
            self.per_ip.pop(ip, None)
        self.total -= 1
        listener.count -= 1
        if self._waiting:
            for waiting, resume in list(self._waiting.items()):
                if self.slot_available(waiting):
                    del self._waiting[waiting]
                    resume()
