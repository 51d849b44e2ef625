"""The embedded consumer protocol (protocol type ``consumer``): subscriptions and assignments.

Both are versioned, non-flexible structures carried as opaque bytes in JoinGroup/SyncGroup. Every version starts
with the same prefix, so newer versions decode as far as we need (Kafka's coordinator reads the topic list the same
way). All functions raise ``ValueError`` on malformed input.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (any version)."""
    buf = bytes(metadata)
    count, pos = _read_array_len(buf, 2)  # after the version
    topics: list[str] = []
    for _ in range(count):
        topic, pos = _read_string(buf, pos)
        topics.append(topic)
    return topics


def assignment_partitions(assignment: bytes) -> dict[str, list[int]]:
    """The topic-partitions of a ConsumerProtocolAssignment (any version). Empty bytes -> no partitions.

    Read with ``unpack_from`` at positions by plain functions (no reader object, no call per field beyond these):
    every member's assignment of every persisted generation is decoded (storage.rows: a 1,000-member group's
    GroupMetadataRecord decodes 1,000 of them on the writer thread, on the rebalance's critical path)."""
    if not assignment:
        return {}
    buf = bytes(assignment)
    count, pos = _read_array_len(buf, 2)  # after the version
    end = len(buf)
    out: dict[str, list[int]] = {}
    for _ in range(count):
        topic, pos = _read_string(buf, pos)
        n, pos = _read_array_len(buf, pos)
        stop = pos + 4 * n
        if stop > end:
            raise ValueError(_TRUNCATED)
        partitions = out.get(topic)
        if partitions is None:
            out[topic] = list(struct.unpack_from(f">{n}i", buf, pos)) if n else []
        elif n:
            partitions.extend(struct.unpack_from(f">{n}i", buf, pos))
        pos = stop
    return out


_TRUNCATED = "truncated consumer protocol data"
_I16_AT = _I16.unpack_from
_I32_AT = _I32.unpack_from


def _read_array_len(buf: bytes, pos: int) -> tuple[int, int]:
    """An int32 array length at ``pos`` (null, -1, is empty) and the position after it."""
    if pos + 4 > len(buf):
        raise ValueError(_TRUNCATED)
    n: int = _I32_AT(buf, pos)[0]
    if n < -1:
        raise ValueError("negative array length")
    return (n if n > 0 else 0), pos + 4


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    """A non-null int16-length UTF-8 string at ``pos`` and the position after it."""
    if pos + 2 > len(buf):
        raise ValueError(_TRUNCATED)
    n: int = _I16_AT(buf, pos)[0]
    if n < 0:
        raise ValueError("null string in consumer protocol data")
    start = pos + 2
    stop = start + n
    if stop > len(buf):
        raise ValueError(_TRUNCATED)
    try:
        return buf[start:stop].decode("utf-8"), stop
    except UnicodeDecodeError as e:
        raise ValueError(str(e)) from e


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
