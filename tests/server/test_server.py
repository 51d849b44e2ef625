"""The asyncio listener over raw sockets: faults stay on their connection, pipelined requests are answered in
order while a JoinGroup is parked, unsupported and unknown APIs, internal errors."""

from __future__ import annotations

import random
import select
import socket
import struct
import time
from typing import Any

from protocol.apis import SUPPORTED_VERSIONS
from protocol.errors import ErrorCode

from .conftest import RunningApp
from .wire import WireClient, build_request


def api_versions(version: int = 3) -> Any:
    return build_request(18, version, client_software_name="wire", client_software_version="1")


def assert_alive(server: RunningApp, client: WireClient | None = None) -> None:
    """A connection (existing or new) still gets its ApiVersions answered."""
    own = client is None
    client = client or WireClient("127.0.0.1", server.port)
    try:
        response = client.call(api_versions())
        assert response.error_code == ErrorCode.none
    finally:
        if own:
            client.close()


def test_api_versions_every_version_lists_the_table(server: RunningApp) -> None:
    client = WireClient("127.0.0.1", server.port)
    for version in range(0, 5):
        response = client.call(api_versions(version))
        assert response.error_code == ErrorCode.none
        assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == dict(SUPPORTED_VERSIONS)
        if version >= 1:
            assert response.throttle_time.total_seconds() == 0
    client.close()


def test_unsupported_api_versions_version_gets_v0_error_and_keeps_the_connection(server: RunningApp) -> None:
    client = WireClient("127.0.0.1", server.port)
    # A v9 ApiVersions request (what a future client might send): header v2 + an empty body is enough.
    frame_body = struct.pack(">hhih", 18, 9, 77, 1) + b"x" + b"\x00"
    client.send_raw(struct.pack(">i", len(frame_body)) + frame_body)
    frame = client.read_frame()
    cid, error = struct.unpack(">ih", frame[:6])
    assert (cid, error) == (77, ErrorCode.unsupported_version)
    assert_alive(server, client)  # same connection still served
    client.close()


def test_random_bytes_never_take_the_daemon_down(server: RunningApp) -> None:
    bystander = WireClient("127.0.0.1", server.port)
    assert_alive(server, bystander)
    rng = random.Random(1234)
    for _ in range(20):
        junk = WireClient("127.0.0.1", server.port)
        junk.send_raw(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000))))
        junk.close()
    # A well-formed size prefix around random bytes whose api key is unknown: that connection is closed.
    junk = WireClient("127.0.0.1", server.port)
    payload = struct.pack(">hhi", 0x7ABC, 0, 1) + bytes(rng.getrandbits(8) for _ in range(100))
    junk.send_raw(struct.pack(">i", len(payload)) + payload)
    assert junk.is_closed_by_peer()
    junk.close()
    assert_alive(server, bystander)
    assert_alive(server)
    bystander.close()


def test_oversized_frame_closes_only_that_connection(server: RunningApp) -> None:
    bystander = WireClient("127.0.0.1", server.port)
    for size in (0x7FFF_FFFF, -1):  # 2 GiB, and a negative size
        big = WireClient("127.0.0.1", server.port)
        big.send_raw(struct.pack(">i", size) + b"\x00" * 16)
        assert big.is_closed_by_peer()
        big.close()
    assert_alive(server, bystander)
    bystander.close()


def test_half_frame_then_disconnect(server: RunningApp) -> None:
    bystander = WireClient("127.0.0.1", server.port)
    half = WireClient("127.0.0.1", server.port)
    frame = struct.pack(">i", 100) + b"\x00\x12\x00\x00" + b"\x00" * 20  # promises 100 bytes, sends 24
    half.send_raw(frame)
    half.sock.shutdown(socket.SHUT_RDWR)
    half.close()
    assert_alive(server, bystander)
    wait_connections(server, 1)
    bystander.close()


def wait_connections(server: RunningApp, n: int) -> None:
    deadline = time.monotonic() + 5
    while server.call(lambda: server.app.server.connections) != n:
        assert time.monotonic() < deadline, "connection count did not settle"
        time.sleep(0.02)


def test_pipelined_requests_answered_in_order_while_join_is_parked(server: RunningApp) -> None:
    a = WireClient("127.0.0.1", server.port)
    join = build_request(
        11,
        3,  # v3: no MEMBER_ID_REQUIRED round trip, the join parks for the initial rebalance delay (500 ms)
        group_id="pipelined",
        session_timeout=_ms(10_000),
        rebalance_timeout=_ms(10_000),
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\x00\x01"}],
    )
    ids = [a.send(join)]
    ids.append(a.send(build_request(3, 5, topics=None, allow_auto_topic_creation=False)))
    ids.append(a.send(api_versions(2)))
    ids.append(a.send(build_request(12, 1, group_id="nope", generation_id=1, member_id="m")))
    for _ in range(30):  # well beyond max_inflight=8: the server stops reading until the join completes
        ids.append(a.send(build_request(12, 1, group_id="nope", generation_id=1, member_id="m")))

    # Another connection is served while A's join is parked...
    b = WireClient("127.0.0.1", server.port)
    assert_alive(server, b)
    # ...and nothing was written to A yet: its first response is the parked join.
    readable, _, _ = select.select([a.sock], [], [], 0.05)
    assert readable == []

    # A's 34 pipelined requests are not all queued: the server stopped at max_inflight (8) and waits.
    def peak() -> int:
        return int(server.call(lambda: max(c.peak_inflight for c in server.app.server.open_connections)))

    deadline = time.monotonic() + 0.3  # well inside the 500 ms the join stays parked
    while peak() < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert peak() == 8

    got = []
    for expected in ids:
        cid, body = a.receive()
        got.append(cid)
        if cid == ids[0]:
            assert body.error_code == ErrorCode.none
            assert body.generation_id == 1
            assert body.leader == body.member_id
        elif cid == ids[1]:
            assert [(t.name, t.is_internal) for t in body.topics] == [("__consumer_offsets", True), ("t", False)]
        elif cid == ids[2]:
            assert body.error_code == ErrorCode.none
        else:
            assert body.error_code == ErrorCode.unknown_member_id
        assert cid == expected
    assert got == ids
    a.close()
    b.close()


def test_unsupported_version_of_known_api_gets_error_response(server: RunningApp) -> None:
    client = WireClient("127.0.0.1", server.port)
    # Metadata v13 exists in kio but is not advertised: answered with UNSUPPORTED_VERSION, connection kept.
    request = build_request(3, 13, topics=[{"name": "t", "topic_id": None}], include_topic_authorized_operations=False)
    response = client.call(request)
    assert [t.error_code for t in response.topics] == [ErrorCode.unsupported_version]
    assert_alive(server, client)
    client.close()


def test_unknown_api_key_or_version_closes_the_connection(server: RunningApp) -> None:
    for api_key, version in ((9999, 0), (12, 99), (0, 9)):  # unknown key, unknown version, Produce (not served)
        client = WireClient("127.0.0.1", server.port)
        payload = struct.pack(">hhih", api_key, version, 5, -1) + b"\x00" * 8
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        assert client.is_closed_by_peer(), (api_key, version)
        client.close()
    assert_alive(server)


def test_internal_error_is_unknown_server_error_and_the_connection_carries_on(server: RunningApp) -> None:
    class Broken:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def heartbeat(self, request: Any) -> Any:
            raise RuntimeError("boom")

        def heartbeat_fields(self, *fields: Any) -> Any:  # the server's Heartbeat path
            raise RuntimeError("boom")

        def heartbeat_at(self, *fields: Any) -> Any:  # the in-place Heartbeat path (Connection._hot_heartbeats)
            raise RuntimeError("boom")

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    services = server.app.services
    server.call(lambda: setattr(services, "coordinator", Broken(services.coordinator)))
    client = WireClient("127.0.0.1", server.port)
    response = client.call(build_request(12, 4, group_id="g", generation_id=1, member_id="m"))
    assert response.error_code == ErrorCode.unknown_server_error
    assert_alive(server, client)
    client.close()


def _ms(value: int) -> Any:
    from datetime import timedelta

    return timedelta(milliseconds=value)


def test_stop_with_a_parked_join_closes_connections_promptly() -> None:
    running = RunningApp().start()
    client = WireClient("127.0.0.1", running.port)
    join = build_request(
        11,
        3,
        group_id="parked-at-stop",
        session_timeout=_ms(10_000),
        rebalance_timeout=_ms(10_000),
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )
    client.send(join)
    wait_connections(running, 1)
    deadline = time.monotonic() + 5
    while not running.call(lambda: running.app.coordinator.list_groups([], [])):  # the join is in: parked
        assert time.monotonic() < deadline
        time.sleep(0.01)
    started = time.monotonic()
    running.stop()
    assert time.monotonic() - started < 2
    assert client.is_closed_by_peer(1)
    client.close()


def test_a_held_fetch_blocks_neither_other_connections_nor_later_reads(server: RunningApp) -> None:
    fetch = build_request(
        1,
        12,
        max_wait=_ms(1000),
        min_bytes=1,
        topics=[{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}],
        forgotten_topics_data=[],
    )
    a = WireClient("127.0.0.1", server.port)
    started = time.monotonic()
    fetch_id = a.send(fetch)
    versions_id = a.send(api_versions())
    b = WireClient("127.0.0.1", server.port)
    assert_alive(server, b)
    readable, _, _ = select.select([a.sock], [], [], 0)
    assert readable == []  # B was answered while A's fetch is still held
    cid, response = a.receive()
    assert cid == fetch_id
    assert time.monotonic() - started >= 0.98  # held for max_wait
    assert [p.records for t in response.responses for p in t.partitions] == [b""]
    assert a.receive()[0] == versions_id  # the request read behind it is answered right after, in order
    a.close()
    b.close()
