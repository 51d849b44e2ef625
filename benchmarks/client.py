"""The load generator's Kafka client side: request frames built once, a pipelining connection, response checks.

Frames are encoded with the project's codec helpers (kio bodies behind a hand-built header) once per member and
reused; the hot loops only concatenate prebuilt bytes and compare response tails with the expected success bytes,
so the client spends far less per request than the server. Responses on one connection arrive in request order
(Kafka's rule, kept by the daemon), so a FIFO of send times is all the bookkeeping a pipelined request needs.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.codec import decode_body, encode_body, request_class, response_class
from protocol.consumer_protocol import encode_assignment, encode_subscription
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder, encode_frame
from protocol.headers import RequestHeader, encode_request_header
from protocol.hot_responses import uvarint
from servers.kafka.build import build

# The versions a current Java client (3.x, classic protocol) sends.
JOIN_V, SYNC_V, HEARTBEAT_V, COMMIT_V, API_VERSIONS_V = 9, 5, 4, 8, 3
CLIENT_ID = "kgc-bench"
TOPIC = "bench"

MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25


def frame(api_key: int, version: int, fields: dict[str, Any], correlation_id: int = 0) -> bytes:
    """One complete request frame (size prefix, header, body)."""
    cls = request_class(api_key, version)
    header = RequestHeader(api_key, version, correlation_id, CLIENT_ID)
    return encode_frame(encode_request_header(header, bool(cls.__flexible__)) + encode_body(build(cls, fields)))


def sync_error(payload: bytes) -> int:
    """The error code of a SyncGroup v5 response payload: after the correlation id (4), the header's empty tag
    buffer (1) and throttle_time_ms (4). The only field the load generator needs; read without decoding the body,
    so that 1,000 members' answers cost the load processes little (they share one core)."""
    assert SYNC_V == 5
    return int.from_bytes(payload[9:11], "big", signed=True)


def decode(api_key: int, version: int, payload: bytes) -> Any:
    """A response payload (size prefix removed) as the kio body."""
    cls = response_class(api_key, version)
    offset = 5 if cls.__flexible__ and api_key != 18 else 4  # correlation id (+ empty header tags)
    return decode_body(cls, payload, offset)


def response_tail(api_key: int, version: int, fields: dict[str, Any]) -> bytes:
    """The bytes after the correlation id of a given response (used to check success without decoding)."""
    cls = response_class(api_key, version)
    head = b"\x00" if cls.__flexible__ and api_key != 18 else b""
    return head + encode_body(build(cls, fields))


SUBSCRIPTION = encode_subscription([TOPIC])
ASSIGNMENT = encode_assignment({TOPIC: [0]})
HEARTBEAT_OK = response_tail(12, HEARTBEAT_V, {"error_code": ErrorCode.none})


def _compact(raw: bytes) -> bytes:
    return uvarint(len(raw) + 1) + raw


_HEADER_V2 = struct.Struct(">hhih")  # api key, version, correlation id, client id length (then the id, empty tags)
_CLIENT_ID = CLIENT_ID.encode()
_JOIN_TAIL = (  # protocol type, one protocol (name, metadata, its tags), null reason, body tags
    _compact(b"consumer") + b"\x02" + _compact(b"range") + _compact(SUBSCRIPTION) + b"\x00" + b"\x00" + b"\x00"
)
_SYNC_PROTOCOL = _compact(b"consumer") + _compact(b"range")
_ASSIGNMENT = _compact(ASSIGNMENT) + b"\x00"  # + the assignment's tags


def _flexible_frame(api_key: int, version: int, body: bytes) -> bytes:
    header = _HEADER_V2.pack(api_key, version, 0, len(_CLIENT_ID)) + _CLIENT_ID + b"\x00"
    return (len(header) + len(body)).to_bytes(4, "big") + header + body


def join_frame(group_id: str, member_id: str, session_ms: int, rebalance_ms: int) -> bytes:
    """JoinGroup v9 (protocol range, subscribed to TOPIC), written by hand: a 1,000-member rebalance sends 2,000 of
    them from one shared core, and kio's build + encode cost ~25 us each. Same bytes as ``frame(11, 9, ...)`` of
    the same fields (tests/perf/test_client_frames.py)."""
    assert JOIN_V == 9
    body = (
        _compact(group_id.encode())
        + struct.pack(">ii", session_ms, rebalance_ms)
        + _compact(member_id.encode())
        + b"\x00"  # null group instance id
        + _JOIN_TAIL
    )
    return _flexible_frame(11, JOIN_V, body)


def sync_frame(group_id: str, generation: int, member_id: str, assignments: list[str]) -> bytes:
    """SyncGroup v5 (the leader gives ASSIGNMENT to each member of ``assignments``), written by hand: kio took
    5.9 ms for the leader's 1,000 assignments, on the rebalance's critical path. Same bytes as ``frame(14, 5, ...)``."""
    assert SYNC_V == 5
    parts = [
        _compact(group_id.encode()),
        struct.pack(">i", generation),
        _compact(member_id.encode()),
        b"\x00",  # null group instance id
        _SYNC_PROTOCOL,
        uvarint(len(assignments) + 1),
    ]
    for m in assignments:
        parts.append(_compact(m.encode()))
        parts.append(_ASSIGNMENT)
    parts.append(b"\x00")  # body tags
    return _flexible_frame(14, SYNC_V, b"".join(parts))


def heartbeat_frame(group_id: str, generation: int, member_id: str) -> bytes:
    return frame(
        12,
        HEARTBEAT_V,
        {"group_id": group_id, "generation_id": generation, "member_id": member_id, "group_instance_id": None},
    )


def commit_frame(group_id: str, generation: int, member_id: str, partitions: int, offset: int = 42) -> bytes:
    return frame(
        8,
        COMMIT_V,
        {
            "group_id": group_id,
            "generation_id_or_member_epoch": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for p in range(partitions)
                    ],
                }
            ],
        },
    )


def commit_ok(partitions: int) -> bytes:
    return response_tail(
        8,
        COMMIT_V,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [{"partition_index": p, "error_code": ErrorCode.none} for p in range(partitions)],
                }
            ]
        },
    )


API_VERSIONS_FRAME = frame(18, API_VERSIONS_V, {"client_software_name": "kgc-bench", "client_software_version": "1"})


class Conn(asyncio.Protocol):
    """One pipelining Kafka connection.

    Two ways to use it: ``await request(frame)`` (forming groups: returns the response payload), or the hot mode,
    where ``on_frames(frames, now_ns)`` is set by a scenario driver and ``sent`` holds the send time of each
    request in flight.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder()
        self.waiters: deque[asyncio.Future[bytes]] = deque()
        self.sent: deque[int] = deque()
        self.on_frames: Callable[[Conn, list[bytes], int], None] | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports do not subclass asyncio's
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        frames = self.decoder.feed(data)
        if not frames:
            return
        if self.on_frames is not None:
            self.on_frames(self, frames, time.perf_counter_ns())
            return
        for payload in frames:
            self.waiters.popleft().set_result(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        error = exc or ConnectionError("connection closed by the server")
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self.waiters.clear()
        if not self.lost.done():
            self.lost.set_result(None)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def request(self, data: bytes) -> asyncio.Future[bytes]:
        if self.transport is None or self.transport.is_closing():
            raise ConnectionError("not connected")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiters.append(future)
        self.transport.write(data)
        return future

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(host: str, port: int) -> Conn:
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(Conn, host, port)
    return protocol


@dataclass(slots=True)
class Member:
    """A formed group member: what its heartbeats and commits need."""

    group_id: str
    member_id: str
    generation: int
    conn: int  # index of the connection it uses


class FormError(RuntimeError):
    pass


async def form_member(
    conn: Conn,
    group_id: str,
    session_ms: int,
    rebalance_ms: int,
    member_id: str = "",
    on_join_sent: Callable[[int], None] | None = None,
) -> tuple[str, int]:
    """JoinGroup (+ MEMBER_ID_REQUIRED rejoin) then SyncGroup until this member has an assignment.

    The leader assigns every member of its join response. Returns (member id, generation). ``on_join_sent`` gets
    the monotonic time (ns) of each JoinGroup that carries a member id (the one that adds the member).
    """
    for _ in range(50):
        if member_id and on_join_sent is not None:
            on_join_sent(time.monotonic_ns())
        join = decode(11, JOIN_V, await conn.request(join_frame(group_id, member_id, session_ms, rebalance_ms)))
        error = int(join.error_code)
        if error == MEMBER_ID_REQUIRED:
            member_id = join.member_id
            continue
        if error in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
            continue
        if error == UNKNOWN_MEMBER_ID:
            member_id = ""
            continue
        if error != 0:
            raise FormError(f"JoinGroup {group_id}: error {error}")
        member_id = join.member_id
        generation = int(join.generation_id)
        followers = [m.member_id for m in join.members] if join.leader == member_id else []
        error = sync_error(await conn.request(sync_frame(group_id, generation, member_id, followers)))
        if error == 0:
            return member_id, generation
        if error == UNKNOWN_MEMBER_ID:
            member_id = ""
        elif error not in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
            raise FormError(f"SyncGroup {group_id}: error {error}")
    raise FormError(f"{group_id}: no stable generation after 50 rounds")


async def heartbeat_once(conn: Conn, member: Member) -> int:
    payload = await conn.request(heartbeat_frame(member.group_id, member.generation, member.member_id))
    return int(decode(12, HEARTBEAT_V, payload).error_code)


async def wait_for_port(host: str, port: int, timeout_s: float, interval_s: float = 0.002) -> float:
    """Seconds until an ApiVersions request is answered on host:port (polling connects)."""
    started = time.monotonic()
    while True:
        try:
            conn = await connect(host, port)
        except OSError:
            if time.monotonic() - started > timeout_s:
                raise
            await asyncio.sleep(interval_s)
            continue
        try:
            payload = await asyncio.wait_for(conn.request(API_VERSIONS_FRAME), timeout_s)
            if int(decode(18, API_VERSIONS_V, payload).error_code) != 0:
                raise RuntimeError("ApiVersions answered with an error")
            return time.monotonic() - started
        finally:
            conn.close()


class RebalancingMember:
    """One member joining a group, driven from its connection's callbacks (no coroutine or future per request):
    the same exchange as ``form_member`` (JoinGroup, the MEMBER_ID_REQUIRED rejoin, SyncGroup, the leader assigning
    every member), used where a worker process runs hundreds of members at once on a shared core, so that the
    client's own per-answer cost stays small next to the server's (the rebalance scenario).

    Times are ``time.monotonic_ns()``: ``join_sent`` of each member-adding JoinGroup (the ones carrying a member
    id), ``joined`` (the last join answer), ``sync_sent``, ``synced``; ``leader`` is True for the leader. ``done``
    gets None on success or the exception.
    """

    __slots__ = (
        "conn",
        "done",
        "group_id",
        "join_sent",
        "joined",
        "leader",
        "member_id",
        "rebalance_ms",
        "rounds",
        "session_ms",
        "sync_sent",
        "synced",
        "waiting",
    )

    def __init__(self, conn: Conn, group_id: str, session_ms: int, rebalance_ms: int, done: Callable[..., None]):
        self.conn = conn
        self.group_id = group_id
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.done = done
        self.member_id = ""
        self.rounds = 0
        self.waiting = ""  # "join" or "sync": the answer expected next
        self.join_sent: list[int] = []
        self.joined = self.sync_sent = self.synced = 0
        self.leader = False
        conn.on_frames = self._on_frames

    def start(self) -> None:
        self._join()

    def _join(self) -> None:
        self.rounds += 1
        if self.rounds > 50:
            self.done(FormError(f"{self.group_id}: no stable generation after 50 rounds"))
            return
        if self.member_id:
            self.join_sent.append(time.monotonic_ns())
        self.waiting = "join"
        self.conn.write(join_frame(self.group_id, self.member_id, self.session_ms, self.rebalance_ms))

    def _on_frames(self, conn: Conn, payloads: list[bytes], now: int) -> None:
        for payload in payloads:  # one request in flight: one answer at a time
            try:
                if self.waiting == "join":
                    self._on_join(payload)
                elif self.waiting == "sync":
                    self._on_sync(payload)
            except Exception as exc:  # a malformed answer: report, do not kill the worker's loop
                self.waiting = ""
                self.done(exc)

    def _on_join(self, payload: bytes) -> None:
        self.joined = time.monotonic_ns()
        join = decode(11, JOIN_V, payload)
        error = int(join.error_code)
        if error == MEMBER_ID_REQUIRED:
            self.member_id = join.member_id
            self._join()
        elif error in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
            self._join()
        elif error == UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self._join()
        elif error != 0:
            self.waiting = ""
            self.done(FormError(f"JoinGroup {self.group_id}: error {error}"))
        else:
            self.member_id = join.member_id
            self.leader = join.leader == self.member_id
            followers = [m.member_id for m in join.members] if self.leader else []
            self.waiting = "sync"
            self.conn.write(sync_frame(self.group_id, int(join.generation_id), self.member_id, followers))
            self.sync_sent = time.monotonic_ns()

    def _on_sync(self, payload: bytes) -> None:
        error = sync_error(payload)
        if error == 0:
            self.synced = time.monotonic_ns()
            self.waiting = ""
            self.done(None)
        elif error == UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self._join()
        elif error in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
            self._join()
        else:
            self.waiting = ""
            self.done(FormError(f"SyncGroup {self.group_id}: error {error}"))
