"""Hand-encoded response frames for the hot paths that have a variable shape (Heartbeat's fixed one is in codec).

``sync_group_response_frame`` and ``join_group_response_frame`` do the same for SyncGroup (v0-v5) and JoinGroup
(v0-v9), answered to every member of a rebalance: a 1,000-member rebalance answers 2,000 JoinGroups (half of them
MEMBER_ID_REQUIRED) and the leader's answer carries all 1,000 subscriptions. Through kio that answer alone took
7.3 ms and each other one ~16 us.

``offset_commit_response_frame`` is the whole OffsetCommit response frame (size, response header, body) of any
version we serve, written straight from ``(topic, [(partition, error)])`` pairs: no kio response object is built
and no generic writer walks its schema. Measured on the commit benchmark the kio path (build the entities, then
encode them) cost about 50 us of the daemon's ~240 us per 4-partition commit. Bytes are identical to
``codec.encode_response`` of the equivalent kio response for every version (tests/protocol/test_hot_responses.py),
and ``codec.decode_response_frame`` reads them back.

Layout (Kafka's OffsetCommitResponse.json): v3+ start with ``throttle_time_ms`` (always 0 here: kafka-python pauses
a connection for any non-zero value); v8+ are flexible: response header v1 (one empty tag buffer), compact arrays
and strings (unsigned varint length + 1) and an empty tag buffer after every struct.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

_SIZE_CORRELATION = struct.Struct(">ii")
_SIZE_CORRELATION_TAGS = struct.Struct(">iib")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_ERROR_GENERATION = struct.Struct(">hi")
_PARTITION = struct.Struct(">ih")  # partition_index, error_code
_PARTITION_TAGGED = struct.Struct(">ihb")  # + empty tag buffer
_ZERO_THROTTLE = b"\x00\x00\x00\x00"

TopicErrors = Sequence[tuple[str, Sequence[tuple[int, int]]]]  # [(topic, [(partition, error code)])]


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint (the lengths of compact strings, bytes and arrays in flexible versions)."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def offset_commit_response_frame(api_version: int, correlation_id: int, topics: TopicErrors) -> bytes:
    """The OffsetCommit response frame (v2-v9, the versions served) answering ``correlation_id`` with the
    partition errors of ``topics``."""
    parts: list[bytes] = []
    if api_version >= 3:
        parts.append(_ZERO_THROTTLE)
    if api_version >= 8:
        parts.append(uvarint(len(topics) + 1))
        pack = _PARTITION_TAGGED.pack
        for name, partitions in topics:
            raw = name.encode()
            parts.append(uvarint(len(raw) + 1))
            parts.append(raw)
            parts.append(uvarint(len(partitions) + 1))
            parts.extend([pack(index, error, 0) for index, error in partitions])
            parts.append(b"\x00")  # topic tags
        parts.append(b"\x00")  # body tags
        body = b"".join(parts)
        return _SIZE_CORRELATION_TAGS.pack(len(body) + 5, correlation_id, 0) + body
    parts.append(_INT32.pack(len(topics)))
    pack = _PARTITION.pack
    for name, partitions in topics:
        raw = name.encode()
        parts.append(_INT16.pack(len(raw)))
        parts.append(raw)
        parts.append(_INT32.pack(len(partitions)))
        parts.extend([pack(index, error) for index, error in partitions])
    body = b"".join(parts)
    return _SIZE_CORRELATION.pack(len(body) + 4, correlation_id) + body


def _compact_nullable_string(value: str | None) -> bytes:
    return b"\x00" if value is None else _compact_string(value)


def sync_group_response_frame(
    api_version: int,
    correlation_id: int,
    error: int,
    protocol_type: str | None,
    protocol_name: str | None,
    assignment: bytes,
) -> bytes:
    """The SyncGroup response frame (v0-v5). Layout (SyncGroupResponse.json): v1+ start with ``throttle_time_ms``;
    v4+ are flexible; v5 adds the nullable ``protocol_type`` and ``protocol_name`` before the assignment."""
    key = (_SYNC, api_version, error, protocol_type, protocol_name)
    head = _heads.get(key)
    if head is None:
        head = _cache_head(key, _sync_head(api_version, error, protocol_type, protocol_name))
    if api_version >= 4:
        body = b"".join((head, uvarint(len(assignment) + 1), assignment, b"\x00"))  # + body tags
        return _SIZE_CORRELATION_TAGS.pack(len(body) + 5, correlation_id, 0) + body
    body = head + _INT32.pack(len(assignment)) + assignment
    return _SIZE_CORRELATION.pack(len(body) + 4, correlation_id) + body


def _sync_head(api_version: int, error: int, protocol_type: str | None, protocol_name: str | None) -> bytes:
    """Everything before the assignment."""
    if api_version == 0:
        return _INT16.pack(error)
    head = _ZERO_THROTTLE + _INT16.pack(error)
    if api_version >= 5:
        head += _compact_nullable_string(protocol_type) + _compact_nullable_string(protocol_name)
    return head


# The part of a JoinGroup or SyncGroup answer that every member of one generation gets alike (error, generation,
# protocol, leader), encoded once per generation instead of once per member. Bounded: cleared when full.
_HEADS_MAX = 1024
_SYNC, _JOIN = 0, 1
_heads: dict[tuple[object, ...], bytes] = {}


def _cache_head(key: tuple[object, ...], head: bytes) -> bytes:
    if len(_heads) >= _HEADS_MAX:
        _heads.clear()
    _heads[key] = head
    return head


def _string(value: str) -> bytes:
    raw = value.encode()
    return _INT16.pack(len(raw)) + raw


def _nullable_string(value: str | None) -> bytes:
    return b"\xff\xff" if value is None else _string(value)


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


JoinMembers = Sequence[tuple[str, str | None, bytes]]  # [(member_id, group_instance_id, metadata)]


def join_group_response_frame(
    api_version: int,
    correlation_id: int,
    error: int,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    skip_assignment: bool,
    member_id: str,
    members: JoinMembers,
) -> bytes:
    """The JoinGroup response frame (v0-v9). Layout (JoinGroupResponse.json): v2+ start with ``throttle_time_ms``;
    v5+ members carry ``group_instance_id``; v6+ are flexible; v7+ add the nullable ``protocol_type`` and make
    ``protocol_name`` nullable; v9 adds ``skip_assignment`` after the leader. ``protocol_name`` must not be None
    before v7 (the adapter sends "" there, as Kafka does)."""
    key: _JoinHeadKey = (
        _JOIN,
        api_version,
        error,
        generation_id,
        protocol_type,
        protocol_name,
        leader,
        skip_assignment,
    )
    head = _heads.get(key)
    if head is None:
        head = _cache_head(key, _join_head(key))
    if api_version >= 6:
        if not members:  # every answer but the leader's
            body = b"".join((head, _compact_string(member_id), b"\x01\x00"))  # empty members, body tags
            return _SIZE_CORRELATION_TAGS.pack(len(body) + 5, correlation_id, 0) + body
        parts = [head, _compact_string(member_id), uvarint(len(members) + 1)]
        for mid, instance_id, metadata in members:
            parts.append(_compact_string(mid))
            parts.append(_compact_nullable_string(instance_id))
            parts.append(uvarint(len(metadata) + 1))
            parts.append(metadata)
            parts.append(b"\x00")  # member tags
        parts.append(b"\x00")  # body tags
        body = b"".join(parts)
        return _SIZE_CORRELATION_TAGS.pack(len(body) + 5, correlation_id, 0) + body
    parts = [head, _string(member_id), _INT32.pack(len(members))]
    with_instance = api_version >= 5
    for mid, instance_id, metadata in members:
        parts.append(_string(mid))
        if with_instance:
            parts.append(_nullable_string(instance_id))
        parts.append(_INT32.pack(len(metadata)))
        parts.append(metadata)
    body = b"".join(parts)
    return _SIZE_CORRELATION.pack(len(body) + 4, correlation_id) + body


_JoinHeadKey = tuple[int, int, int, int, str | None, str | None, str, bool]


def _join_head(key: _JoinHeadKey) -> bytes:
    """Everything before the member id."""
    _, api_version, error, generation_id, protocol_type, protocol_name, leader, skip_assignment = key
    parts = [_ZERO_THROTTLE] if api_version >= 2 else []
    parts.append(_ERROR_GENERATION.pack(error, generation_id))
    if api_version >= 7:
        parts.append(_compact_nullable_string(protocol_type))
        parts.append(_compact_nullable_string(protocol_name))
    elif api_version >= 6:
        parts.append(_compact_string(protocol_name))  # type: ignore[arg-type]
    else:
        parts.append(_string(protocol_name))  # type: ignore[arg-type]
    parts.append(_compact_string(leader) if api_version >= 6 else _string(leader))
    if api_version >= 9:
        parts.append(b"\x01" if skip_assignment else b"\x00")
    return b"".join(parts)
