"""Connection limits as Kafka's ConnectionQuotas has them, over real sockets and two listeners: ``max.connections``
counts every listener and ``listener.name.<name>.max.connections`` one; at either the listener stops accepting (the
client waits in the listen backlog, then is served once a slot frees: a real client recovers by itself);
``max.connections.per.ip`` counts one address over all listeners and closes the extra connection at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer

from daemon.app import App
from daemon.settings import load_settings
from protocol.errors import ErrorCode
from tests.server.conftest import RunningApp
from tests.server.wire import WireClient, build_request

TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
    "security_protocol_map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
}


def running(kafka: dict[str, Any], overrides: dict[str, dict[str, Any]] | None = None) -> RunningApp:
    app = RunningApp()
    app.app = App(
        load_settings(
            None,
            kafka={"host": "127.0.0.1", "port": 0, **kafka},
            http={"listen": "127.0.0.1:0"},
            listeners={**TWO_LISTENERS, "overrides": overrides or {}},
            topics={"initial": {"t": 1}},
        )
    )
    return app.start()


def port_of(app: RunningApp, name: str) -> int:
    return next(server.bound_port for spec, server in app.app.listeners if spec.name == name)


def api_versions() -> Any:
    return build_request(18, 3, client_software_name="wire", client_software_version="1")


def connect(port: int, source: str = "127.0.0.1") -> WireClient:
    client = WireClient.__new__(WireClient)
    client.sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    client._buf, client._next_id, client._sent = b"", 1, {}
    return client


def served(client: WireClient) -> bool:
    return bool(client.call(api_versions()).error_code == ErrorCode.none)


def waiting(client: WireClient, seconds: float = 0.5) -> bool:
    """The request sent on ``client`` gets no answer for ``seconds`` and the connection is not closed: it waits to
    be accepted."""
    client.send(api_versions())
    client.sock.settimeout(seconds)
    try:
        data = client.sock.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        return True
    finally:
        client.sock.settimeout(10)
    assert data, "the connection was closed instead of waiting"
    return False


def open_connections(app: RunningApp) -> int:
    return int(app.call(lambda: app.app.server.quotas.total))


def until(condition: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.fixture
def broker_wide() -> Iterator[RunningApp]:
    app = running({"max_connections": 2})
    yield app
    app.stop()


def test_max_connections_counts_every_listener_and_a_waiting_client_is_served_once_a_slot_frees(
    broker_wide: RunningApp,
) -> None:
    plain = connect(port_of(broker_wide, "PLAINTEXT"))
    internal = connect(port_of(broker_wide, "INTERNAL"))
    assert served(plain) and served(internal)
    third = connect(port_of(broker_wide, "INTERNAL"))  # the kernel completes the TCP handshake ...
    assert waiting(third)  # ... but the listener does not accept it: no answer, not closed
    fourth = connect(port_of(broker_wide, "PLAINTEXT"))
    assert waiting(fourth)
    assert open_connections(broker_wide) == 2
    plain.close()  # a slot frees: one of the waiting clients is accepted and its request answered
    until(lambda: sum(map(has_answer, (third, fourth))) == 1)
    assert open_connections(broker_wide) == 2
    internal.close()  # and the other one
    until(lambda: all(map(has_answer, (third, fourth))))
    for client in (third, fourth):
        _, answer = client.receive()
        assert answer.error_code == ErrorCode.none
        client.close()
    text = broker_wide.call(lambda: broker_wide.app.metrics.render().decode())
    assert 'kgc_connection_limit{name="max.connections"} 2.0' in text
    waits = next(line for line in text.splitlines() if line.startswith("kgc_connection_accept_waits_total "))
    assert float(waits.split()[1]) >= 2  # each listener stopped at least once


def has_answer(client: WireClient) -> bool:
    client.sock.setblocking(False)
    try:
        return bool(client.sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        client.sock.settimeout(10)


def test_a_real_client_waiting_for_a_slot_recovers_by_itself(broker_wide: RunningApp) -> None:
    held = [connect(port_of(broker_wide, name)) for name in ("PLAINTEXT", "INTERNAL")]
    assert all(served(client) for client in held)
    result: dict[str, Any] = {}

    def consumer() -> None:
        c = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port_of(broker_wide, 'PLAINTEXT')}", request_timeout_ms=20_000)
        try:
            result["topics"] = c.topics()
        finally:
            c.close()

    thread = threading.Thread(target=consumer)
    thread.start()
    time.sleep(1.0)
    assert "topics" not in result and open_connections(broker_wide) == 2  # it waits in the backlog
    held[0].close()
    thread.join(30)
    assert "t" in result["topics"]
    held[1].close()


def test_listener_max_connections_limits_only_that_listener() -> None:
    app = running({}, overrides={"internal": {"max.connections": 1}})
    try:
        first = connect(port_of(app, "INTERNAL"))
        assert served(first)
        second = connect(port_of(app, "INTERNAL"))
        assert waiting(second)
        others = [connect(port_of(app, "PLAINTEXT")) for _ in range(3)]
        assert all(served(client) for client in others)  # the other listener still accepts
        assert waiting(second, 0.1)
        first.close()
        _, answer = second.receive()
        assert answer.error_code == ErrorCode.none
        for client in (second, *others):
            client.close()
    finally:
        app.stop()


def test_max_connections_per_ip_counts_all_listeners_and_closes_at_once() -> None:
    app = running({"max_connections_per_ip": 2, "max_connections_per_ip_overrides": "127.0.0.2:3"})
    try:
        kept = [connect(port_of(app, "PLAINTEXT")), connect(port_of(app, "INTERNAL"))]
        assert all(served(client) for client in kept)
        for name in ("PLAINTEXT", "INTERNAL"):
            extra = connect(port_of(app, name))
            assert extra.is_closed_by_peer(2)  # closed as soon as accepted (TooManyConnectionsException)
            extra.close()
        other = [connect(port_of(app, name), "127.0.0.2") for name in ("PLAINTEXT", "INTERNAL", "INTERNAL")]
        assert all(served(client) for client in other)  # its override: 3
        extra = connect(port_of(app, "PLAINTEXT"), "127.0.0.2")
        assert extra.is_closed_by_peer(2)
        text = app.call(lambda: app.app.metrics.render().decode())
        assert 'kgc_connections_refused_total{limit="max.connections.per.ip"} 3.0' in text
        kept[0].close()
        until(lambda: app.call(lambda: app.app.server.connections_per_ip.get("127.0.0.1")) == 1)
        again = connect(port_of(app, "INTERNAL"))
        assert served(again)
        for client in (again, kept[1], *other, extra):
            client.close()
    finally:
        app.stop()
