"""Connection limits, closing on time and fairness, over real TCP against the in-process daemon.

A connection the daemon decides to close is closed at once, whatever is parked on it; max.connections.per.ip (with
an override), connections.max.idle.ms (idle and slowloris connections), queued.max.request.bytes (a connection
sending a huge frame is muted, small requests still flow) and the limits in /metrics.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from daemon.app import App
from daemon.settings import load_settings
from protocol.errors import ErrorCode

from .conftest import RunningApp
from .wire import WireClient, build_request


def running(**kafka: Any) -> RunningApp:
    """The conftest daemon with extra listener settings."""
    app = RunningApp()
    app.app = App(
        load_settings(
            None,
            kafka={"host": "127.0.0.1", "port": 0, "max_inflight": 8, **kafka},
            http={"listen": "127.0.0.1:0"},
            group={"initial_rebalance_delay_ms": 500, "min_session_timeout_ms": 100},
            topics={"initial": {"t": 3}},
        )
    )
    return app.start()


@pytest.fixture
def limited() -> Iterator[RunningApp]:
    app = running(
        max_connections_per_ip=2,
        max_connections_per_ip_overrides="127.0.0.2:4",
        connections_max_idle_ms=1000,
        queued_max_request_bytes=1_048_576,
        max_frame_size=16_777_216,
    )
    try:
        yield app
    finally:
        app.stop()


def _ms(value: int) -> timedelta:
    return timedelta(milliseconds=value)


def fetch_request(max_wait_ms: int) -> Any:
    return build_request(
        1,
        12,
        max_wait=_ms(max_wait_ms),
        min_bytes=1,
        topics=[{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}],
        forgotten_topics_data=[],
    )


def join_request(group: str) -> Any:
    return build_request(
        11,
        3,  # parks for the initial rebalance delay (500 ms in these tests)
        group_id=group,
        session_timeout=_ms(10_000),
        rebalance_timeout=_ms(10_000),
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\x00\x01"}],
    )


def api_versions() -> Any:
    return build_request(18, 3, client_software_name="wire", client_software_version="1")


def closed_within(client: WireClient, seconds: float) -> bool:
    """True if the daemon closed the connection (EOF or reset) within ``seconds``, reading past any answers."""
    deadline = time.monotonic() + seconds
    client.sock.settimeout(seconds)
    try:
        while time.monotonic() < deadline:
            client.sock.settimeout(max(0.001, deadline - time.monotonic()))
            if client.sock.recv(65536) == b"":
                return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False


def metric(app: RunningApp, name: str) -> float:
    text = app.call(lambda: app.app.metrics.render().decode())
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


# ------------------------------------------------------------------------------------------- closing on time


def test_unsupported_request_behind_a_parked_fetch_closes_the_connection_at_once(server: RunningApp) -> None:
    client = WireClient("127.0.0.1", server.port)
    ready_id = client.send(api_versions())
    client.send(fetch_request(10_000))  # parked for 10 s
    payload = struct.pack(">hhih", 9999, 0, 5, -1)  # an unknown api key: no error response exists, so close
    client.send_raw(struct.pack(">i", len(payload)) + payload)
    started = time.monotonic()
    cid, body = client.receive()  # the answer ready before the parked Fetch is written...
    assert cid == ready_id and body.error_code == ErrorCode.none
    assert closed_within(client, 1.0)  # ...then the connection is closed, the Fetch dropped
    assert time.monotonic() - started < 1.0
    client.close()
    assert server.call(lambda: server.app.server.connections) == 0


def test_eof_behind_a_parked_join_closes_the_connection_at_once(server: RunningApp) -> None:
    client = WireClient("127.0.0.1", server.port)
    client.send(join_request("eof-behind-join"))
    deadline = time.monotonic() + 5
    while not server.call(lambda: server.app.coordinator.list_groups([], [])):  # the join is in: parked
        assert time.monotonic() < deadline
        time.sleep(0.01)
    client.sock.shutdown(socket.SHUT_WR)
    assert closed_within(client, 1.0)
    client.close()


def test_eof_with_answers_ready_writes_them_then_closes(server: RunningApp) -> None:
    client = WireClient("127.0.0.1", server.port)
    ids = [client.send(api_versions()) for _ in range(3)]
    client.sock.shutdown(socket.SHUT_WR)
    assert [client.receive()[0] for _ in ids] == ids
    assert closed_within(client, 1.0)
    client.close()


# ------------------------------------------------------------------------------------------ kgc_connections


def _served_gauge(running: RunningApp, name: str) -> float:
    """A gauge as the daemon's HTTP ``/metrics`` serves it (the App's wiring, not the Metrics object in process)."""
    import urllib.request

    port = running.app.http_port
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def _until_gauge(running: RunningApp, name: str, expected: float) -> None:
    deadline = time.monotonic() + 5
    while (value := _served_gauge(running, name)) != expected:
        assert time.monotonic() < deadline, f"{name} is {value}, expected {expected}"
        time.sleep(0.02)


def test_kgc_connections_counts_the_open_kafka_connections(server: RunningApp) -> None:
    """Reported as always 0: it follows real TCP connections as they open and close (HTTP scrapes are not Kafka
    connections and do not count)."""
    assert _served_gauge(server, "kgc_connections") == 0
    clients = [WireClient("127.0.0.1", server.port) for _ in range(5)]
    for client in clients:  # each connection is admitted and served
        assert client.call(api_versions()).error_code == ErrorCode.none
    assert _served_gauge(server, "kgc_connections") == 5
    for client in clients[:2]:
        client.close()
    _until_gauge(server, "kgc_connections", 3)
    for client in clients[2:]:
        client.close()
    _until_gauge(server, "kgc_connections", 0)


# ------------------------------------------------------------------------------------------- connection limits


def _connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(host, 0))
    return sock


def test_max_connections_per_ip_and_its_override(limited: RunningApp) -> None:
    port = limited.port
    kept = [WireClient.__new__(WireClient) for _ in range(2)]
    for client in kept:
        client.sock, client._buf, client._next_id, client._sent = _connect("127.0.0.1", port), b"", 1, {}
    for client in kept:
        assert client.call(api_versions()).error_code == ErrorCode.none
    third = _connect("127.0.0.1", port)
    third.settimeout(2)
    assert third.recv(1) == b""  # closed as soon as accepted (Kafka: TooManyConnectionsException)
    third.close()
    # 127.0.0.2 (loopback too) has an override of 4.
    others = [_connect("127.0.0.2", port) for _ in range(5)]
    others[-1].settimeout(2)
    assert others[-1].recv(1) == b""
    for sock in others[:4]:
        sock.sendall(struct.pack(">i", 0)[:0])  # still open: nothing to read
        sock.settimeout(0.05)
        with pytest.raises(TimeoutError):
            sock.recv(1)
    text = limited.call(lambda: limited.app.metrics.render().decode())
    assert 'kgc_connections_refused_total{limit="max.connections.per.ip"} 2.0' in text
    assert 'kgc_connection_limit{name="max.connections.per.ip"} 2.0' in text
    assert 'kgc_connection_limit_per_ip_override{ip="127.0.0.2"} 4.0' in text
    assert "kgc_connections 6.0" in text
    # A slot freed is a slot reusable.
    kept[0].close()
    deadline = time.monotonic() + 2
    while limited.call(lambda: limited.app.server.connections_per_ip.get("127.0.0.1")) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    again = WireClient.__new__(WireClient)
    again.sock, again._buf, again._next_id, again._sent = _connect("127.0.0.1", port), b"", 1, {}
    assert again.call(api_versions()).error_code == ErrorCode.none
    for sock in [again.sock, kept[1].sock, *others]:
        sock.close()


def test_idle_and_slowloris_connections_are_closed(limited: RunningApp) -> None:
    port = limited.port
    idle = [_connect("127.0.0.2", port) for _ in range(3)]
    slow = _connect("127.0.0.1", port)
    busy = WireClient.__new__(WireClient)
    busy.sock, busy._buf, busy._next_id, busy._sent = _connect("127.0.0.1", port), b"", 1, {}
    frame = struct.pack(">i", 64) + b"\x00" * 64
    started = time.monotonic()
    # The slow client sends a byte every 50 ms (Kafka's own idle timer would count those bytes); the busy one a
    # request every 50 ms: only the busy one survives connections.max.idle.ms (1 s).
    sent = 0
    while time.monotonic() - started < 2.0:
        if sent < len(frame):
            try:
                slow.send(frame[sent : sent + 1])
                sent += 1
            except OSError:
                break
        assert busy.call(api_versions()).error_code == ErrorCode.none
        time.sleep(0.05)
    for sock in [*idle, slow]:
        sock.settimeout(1)
        with contextlib.suppress(ConnectionError):
            assert sock.recv(1) == b""
        sock.close()
    assert busy.call(api_versions()).error_code == ErrorCode.none
    text = limited.call(lambda: limited.app.metrics.render().decode())
    assert 'kgc_connections_closed_total{cause="idle"} 4.0' in text
    busy.close()


@pytest.fixture
def small_queue() -> Iterator[RunningApp]:
    app = running(queued_max_request_bytes=1_048_576, max_frame_size=16_777_216)
    try:
        yield app
    finally:
        app.stop()


def test_a_huge_frame_is_muted_at_queued_max_request_bytes_and_small_requests_still_flow(
    small_queue: RunningApp,
) -> None:
    limited = small_queue
    port = limited.port
    huge = struct.pack(">i", 8_000_000)  # under socket.request.max.bytes (16 MiB), over queued (1 MiB)
    chunk = b"\x00" * 65_536
    senders = [_connect("127.0.0.2", port) for _ in range(3)]
    for sock in senders:
        sock.setblocking(False)
        sock.send(huge)
    sent = [0, 0, 0]
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # push as much as the daemon reads
        for i, sock in enumerate(senders):
            with contextlib.suppress(BlockingIOError):
                sent[i] += sock.send(chunk[: max(0, 7_999_000 - sent[i])])  # never complete the frame
        time.sleep(0.001)
    used = limited.call(lambda: limited.app.server.memory.used)
    # One sender (granted) may finish its frame over the limit; the others stop being read.
    assert used <= 1_048_576 + 8_000_000 + 2 * (65_536 + 262_144), used
    assert limited.call(lambda: limited.app.server.stats().muted) >= 1
    client = WireClient("127.0.0.1", port)
    assert client.call(api_versions()).error_code == ErrorCode.none  # small requests are still read
    for sock in senders:
        sock.close()
    deadline = time.monotonic() + 10
    while limited.call(lambda: limited.app.server.memory.used) != 0:
        assert time.monotonic() < deadline, limited.call(
            lambda: [(c.held, c.memory_muted, c.reading_paused, c.closing) for c in limited.app.server.open_connections]
        )
        time.sleep(0.01)
    client.close()


def test_kgc_connections_counts_open_connections(server: RunningApp) -> None:
    clients = [WireClient("127.0.0.1", server.port) for _ in range(3)]
    for client in clients:
        client.call(api_versions())
    assert metric(server, "kgc_connections") == 3
    for client in clients:
        client.close()


# ------------------------------------------------------------------------------------------------------ fairness


def test_a_pipelining_connection_takes_turns_with_the_others(server: RunningApp) -> None:
    """3,000 pipelined heartbeats from one connection and one request from another arrive while the loop is busy;
    the other's request is dispatched after at most a turn or two of the flooder's (64 frames each), not after all
    3,000 of them."""
    import asyncio

    order: list[str] = []
    kafka = server.app.server
    handle, answer_heartbeat = kafka.handle, kafka.heartbeat_answer

    def recording_handle(request: Any, client_host: str, principal: str = "User:ANONYMOUS", joined: Any = None) -> Any:
        if request.header.api_key != 12:  # a heartbeat is recorded in recording_heartbeat (handle calls it)
            order.append(client_host)
        return handle(request, client_host, principal, joined)

    # Every heartbeat here is refused (an unknown group), so each is answered by heartbeat_answer, whether read in
    # place (which does not go through handle) or not.
    def recording_heartbeat(*args: Any) -> Any:
        order.append(args[4])  # client_host
        return answer_heartbeat(*args)

    server.call(lambda: setattr(kafka, "handle", recording_handle))
    server.call(lambda: setattr(kafka, "heartbeat_answer", recording_heartbeat))
    flooder = socket.create_connection(("127.0.0.1", server.port), source_address=("127.0.0.2", 0))
    other = WireClient("127.0.0.1", server.port)
    heartbeat = build_request(12, 1, group_id="nope", generation_id=1, member_id="m")
    from .wire import request_frame

    flood = b"".join(request_frame(heartbeat, i) for i in range(3000))
    assert len(flood) < 256 * 1024  # one read of the loop's transport
    busy, busy_peer = socket.socketpair()

    class Blocker(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            time.sleep(0.3)  # both requests arrive meanwhile: they are read in the same poll

    asyncio.run_coroutine_threadsafe(server.loop.connect_accepted_socket(Blocker, busy), server.loop).result(5)
    busy_peer.send(b"x")
    time.sleep(0.05)
    flooder.sendall(flood)
    other_id = other.send(api_versions())
    assert other.receive()[0] == other_id
    deadline = time.monotonic() + 5
    while server.call(lambda: len(order)) < 3001:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    position = order.index("/127.0.0.1")
    assert position <= 2 * 64, position
    for sock in (flooder, busy_peer):
        sock.close()
    other.close()


# ------------------------------------------------------------------------------------------------------ settings


def test_connection_settings_take_kafka_names() -> None:
    from daemon.settings import SettingsError, parse_set_options

    settings = load_settings(
        None,
        **parse_set_options(
            [
                "queued.max.request.bytes=2097152",
                "connections.max.idle.ms=1234",
                "max.connections=50",
                "max.connections.per.ip=5",
                "max.connections.per.ip.overrides=127.0.0.2:10, [::1]:7,host.example:0",
            ]
        ),
    )
    k = settings.kafka
    assert (k.queued_max_request_bytes, k.connections_max_idle_ms, k.max_connections) == (2_097_152, 1234, 50)
    assert k.max_connections_per_ip == 5
    assert k.max_connections_per_ip_overrides == {"127.0.0.2": 10, "::1": 7, "host.example": 0}
    with pytest.raises((SettingsError, ValueError)):
        load_settings(None, **parse_set_options(["max.connections.per.ip.overrides=127.0.0.2"]))
    defaults = load_settings(None).kafka
    assert (defaults.max_inflight, defaults.connections_max_idle_ms) == (100, 600_000)
