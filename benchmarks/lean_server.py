"""The independent lean baseline: a minimal Kafka group server sharing no code with the daemon.

    python -m benchmarks.lean_server --listen 127.0.0.1:9094

Written from a description, not from the daemon's listener: one ``asyncio.Protocol`` per connection (on uvloop, as
the daemon), Kafka's 4-byte size framing, the request body read by kio's compiled reader straight out of the
received bytes, the group and the member looked up in dicts, and the Heartbeat answer packed by one precompiled
``struct``. It imports only kio, struct, asyncio and uvloop (and the standard library's argparse, signal, os,
socket, io, datetime); the import-linter contract "the lean baseline ... shares no code with the daemon" and
``tests/perf/test_lean_server.py`` hold it to that.

What it serves (what the benchmark scenarios send), minimal but correct for well-formed requests:

* ApiVersions v0-v3: the versions below (an unknown ApiVersions version gets the v0 UNSUPPORTED_VERSION answer);
* JoinGroup v0-v9: from v4 a request without a member id gets MEMBER_ID_REQUIRED and a new id; a member with an id
  joins its group and is answered at once as the leader of a one-member view of it, in generation 1 (no rebalance
  protocol: there is no waiting, no timer, no generation bump);
* SyncGroup v0-v5: the member's own assignment back (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION checked);
* Heartbeat v0-v4: UNKNOWN_MEMBER_ID for an unknown group or member, ILLEGAL_GENERATION, else NONE;
* OffsetCommit v2-v8 (the ones kio reads): the same membership check (a simple commit, generation -1 and no
  member id, is accepted), the offsets kept in a dict (not durable), one error per partition.

Anything else, or a frame it cannot read, closes the connection. It is a benchmark baseline, not a server for
hostile input (kio's reader is not guarded against huge declared array lengths here). No sessions, no timers, no
storage, no metrics, no ACLs: the daemon's heartbeats/s as a share of this server's is the cost of everything the
daemon adds to the cheapest request (``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import signal
import socket
import struct
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

API_VERSIONS, HEARTBEAT, JOIN_GROUP, SYNC_GROUP, OFFSET_COMMIT = 18, 12, 11, 14, 8
VERSIONS = {API_VERSIONS: (0, 3), HEARTBEAT: (0, 4), JOIN_GROUP: (0, 9), SYNC_GROUP: (0, 5), OFFSET_COMMIT: (2, 8)}
FIRST_FLEXIBLE = {API_VERSIONS: 3, HEARTBEAT: 4, JOIN_GROUP: 6, SYNC_GROUP: 4, OFFSET_COMMIT: 8}
MAX_FRAME = 104_857_600

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION, MEMBER_ID_REQUIRED = 0, 22, 25, 35, 79

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
# Heartbeat answers, whole frames: size, correlation id [, header tags] | [throttle,] error [, tags]
_HEARTBEAT_ANSWER = (
    struct.Struct(">iih"),
    struct.Struct(">iiih"),
    struct.Struct(">iiih"),
    struct.Struct(">iiih"),
    struct.Struct(">iibihb"),
)
_PARTITION_V8 = struct.Struct(">ihb")  # partition, error, tags
_ZERO = timedelta(0)


class Member:
    __slots__ = ("assignment", "metadata")

    def __init__(self, metadata: bytes) -> None:
        self.metadata = metadata
        self.assignment = b""


class Group:
    __slots__ = ("generation", "members")

    def __init__(self) -> None:
        self.generation = 1
        self.members: dict[str, Member] = {}


# (api key, version) -> (kio reader, flexible); built at import for every version served.
_READERS: dict[tuple[int, int], tuple[Callable[[bytes, int], tuple[Any, int]], bool]] = {}
_RESPONSES: dict[tuple[int, int], tuple[type[Any], Callable[[io.BytesIO, Any], None]]] = {}
for _key, (_low, _high) in VERSIONS.items():
    for _version in range(_low, _high + 1):
        _flexible = _version >= FIRST_FLEXIBLE[_key]
        _READERS[(_key, _version)] = (entity_reader(load_request_schema(_key, _version)), _flexible)
        _cls = load_response_schema(_key, _version)
        _RESPONSES[(_key, _version)] = (_cls, entity_writer(_cls))


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _kio_frame(key: int, version: int, correlation_id: int, fields: dict[str, Any]) -> bytes:
    """A whole response frame with a kio-encoded body (the cold paths)."""
    cls, write = _RESPONSES[(key, version)]
    names = cls.__dataclass_fields__
    body = cls(**{k: v for k, v in fields.items() if k in names})
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_SIZE.pack(correlation_id))
    if key != API_VERSIONS and version >= FIRST_FLEXIBLE[key]:
        out.write(b"\0")  # response header v1: no tags
    write(out, body)
    data = out.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


def _api_versions(version: int, correlation_id: int) -> bytes:
    cls = load_response_schema(API_VERSIONS, version)
    entry = cls.__dataclass_fields__["api_keys"].type.__args__[0]
    keys = tuple(entry(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(VERSIONS.items()))
    return _kio_frame(API_VERSIONS, version, correlation_id, {
        "error_code": ErrorCode.none, "api_keys": keys, "throttle_time": _ZERO,
    })  # fmt: skip


def _unsupported_api_versions(correlation_id: int) -> bytes:
    cls = load_response_schema(API_VERSIONS, 0)
    entry = cls.__dataclass_fields__["api_keys"].type.__args__[0]
    keys = tuple(entry(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(VERSIONS.items()))
    error = ErrorCode(UNSUPPORTED_VERSION)
    return _kio_frame(API_VERSIONS, 0, correlation_id, {"error_code": error, "api_keys": keys})


class LeanState:
    """Every group the server knows, and the committed offsets."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.next_id = 0

    def member_error(self, group_id: str, generation: int, member_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        return NONE if generation == group.generation else ILLEGAL_GENERATION

    def new_member_id(self, client_id: str) -> str:
        self.next_id += 1
        return f"{client_id}-{os.getpid():x}-{self.next_id:012x}"


class LeanConnection(asyncio.Protocol):
    def __init__(self, state: LeanState) -> None:
        self.state = state
        self.transport: asyncio.Transport | None = None
        self.pending = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:  # answers leave at once (Kafka's brokers set TCP_NODELAY too)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.pending:
            data = self.pending + data
        end = len(data)
        pos = 0
        out: list[bytes] = []
        groups = self.state.groups
        while end - pos >= 4:
            size = _SIZE.unpack_from(data, pos)[0]
            if size < 12 or size > MAX_FRAME:
                self._close(out)
                return
            stop = pos + 4 + size
            if stop > end:
                break
            key, version, correlation_id, client_len = _HEADER.unpack_from(data, pos + 4)
            start = pos + 14 + (client_len if client_len > 0 else 0)
            pos = stop
            if start > stop:
                self._close(out)
                return
            entry = _READERS.get((key, version))
            if entry is None:
                if key == API_VERSIONS:
                    out.append(_unsupported_api_versions(correlation_id))
                    continue
                self._close(out)
                return
            read, flexible = entry
            if flexible:
                if start >= stop or data[start] != 0:  # header tags: this server reads none
                    self._close(out)
                    return
                start += 1
            try:
                body, read_to = read(data, start)
            except Exception:
                self._close(out)
                return
            if read_to > stop:
                self._close(out)
                return
            if key == HEARTBEAT:
                group = groups.get(body.group_id)
                if group is None or body.member_id not in group.members:
                    error = UNKNOWN_MEMBER_ID
                else:
                    error = NONE if body.generation_id == group.generation else ILLEGAL_GENERATION
                answer = _HEARTBEAT_ANSWER[version]
                if version >= 4:
                    out.append(answer.pack(12, correlation_id, 0, 0, error, 0))
                elif version:
                    out.append(answer.pack(10, correlation_id, 0, error))
                else:
                    out.append(answer.pack(6, correlation_id, error))
            else:
                client_id = bytes(data[pos - size + 10 : pos - size + 10 + max(client_len, 0)]).decode()
                out.append(self._answer(key, version, correlation_id, client_id, body))
        self.pending = data[pos:] if pos < end else b""
        if out:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))  # type: ignore[union-attr]

    def _close(self, out: list[bytes]) -> None:
        if self.transport is not None:
            if out:
                self.transport.write(b"".join(out))
            self.transport.close()

    def _answer(self, key: int, version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
        state = self.state
        if key == OFFSET_COMMIT:
            return self._offset_commit(version, correlation_id, body)
        if key == JOIN_GROUP:
            member_id = body.member_id
            if not member_id:
                member_id = state.new_member_id(client_id)
                if version >= 4:
                    return _kio_frame(JOIN_GROUP, version, correlation_id, {
                        "throttle_time": _ZERO, "error_code": ErrorCode(MEMBER_ID_REQUIRED), "generation_id": -1,
                        "protocol_name": None if version >= 7 else "", "leader": "", "member_id": member_id,
                        "members": (),
                    })  # fmt: skip
            group = state.groups.setdefault(body.group_id, Group())
            protocol = body.protocols[0]
            group.members[member_id] = Member(protocol.metadata)
            members_cls = _RESPONSES[(JOIN_GROUP, version)][0].__dataclass_fields__["members"].type.__args__[0]
            me = members_cls(**{k: v for k, v in {
                "member_id": member_id, "group_instance_id": None, "metadata": protocol.metadata,
            }.items() if k in members_cls.__dataclass_fields__})  # fmt: skip
            return _kio_frame(JOIN_GROUP, version, correlation_id, {
                "throttle_time": _ZERO, "error_code": ErrorCode.none, "generation_id": group.generation,
                "protocol_type": getattr(body, "protocol_type", None), "protocol_name": protocol.name,
                "leader": member_id, "member_id": member_id, "members": (me,),
            })  # fmt: skip
        if key == SYNC_GROUP:
            error = state.member_error(body.group_id, body.generation_id, body.member_id)
            assignment = b""
            if error == NONE:
                member = state.groups[body.group_id].members[body.member_id]
                for given in body.assignments:
                    if given.member_id == body.member_id:
                        member.assignment = given.assignment
                assignment = member.assignment
            return _kio_frame(SYNC_GROUP, version, correlation_id, {
                "throttle_time": _ZERO, "error_code": ErrorCode(error), "assignment": assignment,
                "protocol_type": getattr(body, "protocol_type", None),
                "protocol_name": getattr(body, "protocol_name", None),
            })  # fmt: skip
        return _api_versions(version, correlation_id)  # API_VERSIONS: the only other key with readers

    def _offset_commit(self, version: int, correlation_id: int, body: Any) -> bytes:
        state = self.state
        generation = body.generation_id_or_member_epoch
        simple = generation == -1 and not body.member_id
        error = NONE if simple else state.member_error(body.group_id, generation, body.member_id)
        offsets = state.offsets
        answered = []
        for topic in body.topics:
            for p in topic.partitions:
                if error == NONE:
                    offsets[(body.group_id, topic.name, p.partition_index)] = p.committed_offset
            answered.append((topic.name, [p.partition_index for p in topic.partitions]))
        if version >= 8:  # the benchmark's version, by hand: compact arrays and strings, empty tag sections
            parts = [b"\0\0\0\0", _SIZE.pack(correlation_id), b"\0\0\0\0\0", _uvarint(len(answered) + 1)]
            for name, partitions in answered:
                raw = name.encode()
                parts += (_uvarint(len(raw) + 1), raw, _uvarint(len(partitions) + 1))
                parts += [_PARTITION_V8.pack(p, error, 0) for p in partitions]
                parts.append(b"\0")
            parts.append(b"\0")
            frame = bytearray(b"".join(parts))
            _SIZE.pack_into(frame, 0, len(frame) - 4)
            return bytes(frame)
        cls = _RESPONSES[(OFFSET_COMMIT, version)][0]
        topic_cls = cls.__dataclass_fields__["topics"].type.__args__[0]
        partition_cls = topic_cls.__dataclass_fields__["partitions"].type.__args__[0]
        topics = tuple(
            topic_cls(name=name, partitions=tuple(
                partition_cls(partition_index=p, error_code=ErrorCode(error)) for p in partitions
            ))
            for name, partitions in answered
        )  # fmt: skip
        return _kio_frame(OFFSET_COMMIT, version, correlation_id, {"throttle_time": _ZERO, "topics": topics})


async def serve(host: str, port: int, ready: Callable[[int], None] | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or cancelled); ``ready`` gets the bound port."""
    loop = asyncio.get_running_loop()
    state = LeanState()
    server = await loop.create_server(lambda: LeanConnection(state), host, port, reuse_address=True, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    print(f"lean server listening on {host}:{bound}", flush=True)
    if ready is not None:
        ready(bound)
    try:
        await stop.wait()
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:9094", metavar="HOST:PORT")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(host, int(port)))
    else:
        uvloop.run(serve(host, int(port)))


if __name__ == "__main__":
    main()
