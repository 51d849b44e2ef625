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
    """Reads the consumer protocol's big-endian fields with ``unpack_from`` at a position (no slice per field, an
    int array in one call): subscriptions and assignments are read for every member of every persisted generation
    (a 1,000-member group: 1,000 of each per group-metadata record)."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, data: bytes) -> None:
        self.buf = bytes(data)
        self.end = len(self.buf)
        self.pos = 0

    def i16(self) -> int:
        pos = self.pos
        self.pos = pos + 2
        if self.pos > self.end:
            raise ValueError("truncated consumer protocol data")
        return int(_I16.unpack_from(self.buf, pos)[0])

    def i32(self) -> int:
        pos = self.pos
        self.pos = pos + 4
        if self.pos > self.end:
            raise ValueError("truncated consumer protocol data")
        return int(_I32.unpack_from(self.buf, pos)[0])

    def i32s(self, count: int) -> tuple[int, ...]:
        end = self.pos + 4 * count
        if end > self.end:
            raise ValueError("truncated consumer protocol data")
        values: tuple[int, ...] = struct.unpack_from(f">{count}i", self.buf, self.pos)
        self.pos = end
        return values

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ValueError("null string in consumer protocol data")
        start, self.pos = self.pos, self.pos + n
        if self.pos > self.end:
            raise ValueError("truncated consumer protocol data")
        try:
            return self.buf[start : self.pos].decode("utf-8")
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
    """The topic-partitions of a ConsumerProtocolAssignment (any version). Empty bytes -> no partitions."""
    if not assignment:
        return {}
    r = _Reader(assignment)
    r.i16()  # version
    out: dict[str, list[int]] = {}
    for _ in range(r.array_len()):
        topic = r.string()
        out.setdefault(topic, []).extend(r.i32s(r.array_len()))
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
