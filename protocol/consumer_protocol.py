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
    """The topic-partitions of a ConsumerProtocolAssignment (any version). Empty bytes -> no partitions."""
    if not assignment:
        return {}
    r = _Reader(assignment)
    r.i16()  # version
    out: dict[str, list[int]] = {}
    for _ in range(r.array_len()):
        topic = r.string()
        out.setdefault(topic, []).extend(r.i32() for _ in range(r.array_len()))
    return out
