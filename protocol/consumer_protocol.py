"""The embedded consumer protocol (protocol type ``consumer``): subscriptions and assignments.

Both are versioned, non-flexible structures carried as opaque bytes in JoinGroup/SyncGroup. Every version starts
with the same prefix, so newer versions decode as far as we need (Kafka's coordinator reads the topic list the same
way). All functions raise ``ValueError`` on malformed input.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, data: bytes) -> None:
        self.buf = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("truncated consumer protocol data")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ValueError("null string in consumer protocol data")
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(str(e)) from e

    def array_len(self) -> int:
        n = self.i32()
        if n < -1:
            raise ValueError("negative array length")
        return max(n, 0)


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (any version)."""
    r = _Reader(metadata)
    r.i16()  # version
    return [r.string() for _ in range(r.array_len())]


def assignment_partitions(assignment: bytes) -> dict[str, list[int]]:
    """The topic-partitions of a ConsumerProtocolAssignment (any version). Empty bytes -> no partitions.

    Read with ``unpack_from`` (each topic's partition array in one call): it runs for every member of every
    persisted generation (1,000 members: 1,000 assignments in one group-metadata record)."""
    if not assignment:
        return {}
    data = bytes(assignment)
    end = len(data)
    try:
        (topics,) = _I32.unpack_from(data, 2)  # after the version
        pos = 6
        if topics < -1:
            raise ValueError("negative array length")
        out: dict[str, list[int]] = {}
        for _ in range(topics):
            (n,) = _I16.unpack_from(data, pos)
            if n < 0:
                raise ValueError("null string in consumer protocol data")
            pos += 2
            if pos + n > end:
                raise ValueError("truncated consumer protocol data")
            topic = data[pos : pos + n].decode("utf-8")
            pos += n
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            if count < -1:
                raise ValueError("negative array length")
            if count > 0:
                partitions = struct.unpack_from(f">{count}i", data, pos)
                pos += 4 * count
                out.setdefault(topic, []).extend(partitions)
            else:
                out.setdefault(topic, [])
    except struct.error as e:
        raise ValueError("truncated consumer protocol data") from e
    except UnicodeDecodeError as e:
        raise ValueError(str(e)) from e
    return out


# --- encoders (for tests, tools and error paths; the coordinator itself passes these bytes through) ---------------

_SUBSCRIPTION_MAX_VERSION = 3
_ASSIGNMENT_MAX_VERSION = 3


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _nullable_bytes(value: bytes | None) -> bytes:
    if value is None:
        return _I32.pack(-1)
    return _I32.pack(len(value)) + bytes(value)


def _topic_partitions(partitions: dict[str, list[int]]) -> bytes:
    out = [_I32.pack(len(partitions))]
    for topic, indexes in partitions.items():
        out.append(_string(topic))
        out.append(_I32.pack(len(indexes)))
        out.extend(_I32.pack(p) for p in indexes)
    return b"".join(out)


def encode_subscription(
    topics: list[str],
    user_data: bytes | None = b"",
    version: int = 0,
    *,
    owned_partitions: dict[str, list[int]] | None = None,
    generation_id: int = -1,
    rack_id: str | None = None,
) -> bytes:
    """A ConsumerProtocolSubscription: v0 topics + user_data, v1 + owned partitions, v2 + generation, v3 + rack."""
    if not 0 <= version <= _SUBSCRIPTION_MAX_VERSION:
        raise ValueError(f"unknown subscription version {version}")
    out = [_I16.pack(version), _I32.pack(len(topics)), *(_string(t) for t in topics), _nullable_bytes(user_data)]
    if version >= 1:
        out.append(_topic_partitions(owned_partitions or {}))
    if version >= 2:
        out.append(_I32.pack(generation_id))
    if version >= 3:
        out.append(_I16.pack(-1) if rack_id is None else _string(rack_id))
    return b"".join(out)


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes | None = b"", version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment (every version has the same layout: partitions, then user_data)."""
    if not 0 <= version <= _ASSIGNMENT_MAX_VERSION:
        raise ValueError(f"unknown assignment version {version}")
    return _I16.pack(version) + _topic_partitions(partitions) + _nullable_bytes(user_data)
