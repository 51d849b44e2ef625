"""The keys and values of Kafka's ``__consumer_offsets`` records, as Kafka's group coordinator writes them.

Kafka frames each record as an int16 version followed by the struct of that version (``CoordinatorRecordSerde``);
the KEY's version names the record type, a null VALUE is a tombstone. The schemas are Kafka's
``OffsetCommitKey``/``OffsetCommitValue`` and ``GroupMetadataKey``/``GroupMetadataValue`` (non-flexible versions:
strings are int16 length + UTF-8, a null string has length -1, bytes are int32 length + bytes, arrays int32 count).
kio has no classes for them; they are small and fixed, so they are written here by hand.

* OffsetCommitKey, version 1 (Kafka writes 1; 0 has the same layout): ``group, topic, partition int32``.
* OffsetCommitValue: version 3 - ``offset int64, leader_epoch int32, metadata, commit_timestamp int64`` - what
  Kafka writes; version 1 - ``offset, metadata, commit_timestamp, expire_timestamp int64`` - what it writes when the
  commit carried an explicit retention time (OffsetCommit v2-4), the only version with an expire timestamp.
* GroupMetadataKey, version 2: ``group``.
* GroupMetadataValue, version 3 (what Kafka writes): ``protocol_type, generation int32, protocol (nullable),
  leader (nullable), current_state_timestamp int64, members[]``, each member ``member_id, group_instance_id
  (nullable), client_id, client_host, rebalance_timeout int32, session_timeout int32, subscription bytes,
  assignment bytes``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Protocol

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupMember",
    "group_metadata_key",
    "group_metadata_value",
    "offset_commit_key",
    "offset_commit_value",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NULL_STRING = _I16.pack(-1)


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def _nullable(s: str | None) -> bytes:
    return _NULL_STRING if s is None else _string(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


class GroupMember(Protocol):
    """What a member's entry needs (``coordinator.records.MemberMetadata`` has it): subscription is the member's
    metadata for the group's selected protocol only, as Kafka keeps it."""

    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...
    @property
    def client_id(self) -> str: ...
    @property
    def client_host(self) -> str: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...
    @property
    def session_timeout_ms(self) -> int: ...
    @property
    def subscription(self) -> bytes: ...
    @property
    def assignment(self) -> bytes: ...


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return b"".join((_I16.pack(OFFSET_COMMIT_KEY_VERSION), _string(group_id), _string(topic), _I32.pack(partition)))


def offset_commit_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp_ms: int, expire_timestamp_ms: int | None
) -> bytes:
    """Version 1 when the commit has an expire timestamp (it drops the leader epoch, as Kafka's does), else 3."""
    if expire_timestamp_ms is not None:
        return b"".join(
            (
                _I16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRY),
                _I64.pack(offset),
                _string(metadata),
                _I64.pack(commit_timestamp_ms),
                _I64.pack(expire_timestamp_ms),
            )
        )
    return b"".join(
        (
            _I16.pack(OFFSET_VALUE_VERSION),
            _I64.pack(offset),
            _I32.pack(leader_epoch),
            _string(metadata),
            _I64.pack(commit_timestamp_ms),
        )
    )


def group_metadata_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group_id)


def group_metadata_value(
    protocol_type: str,
    generation_id: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp_ms: int,
    members: Iterable[GroupMember],
) -> bytes:
    parts = [
        _I16.pack(GROUP_VALUE_VERSION),
        _string(protocol_type),
        _I32.pack(generation_id),
        _nullable(protocol),
        _nullable(leader),
        _I64.pack(current_state_timestamp_ms),
    ]
    listed = list(members)
    parts.append(_I32.pack(len(listed)))
    for m in listed:
        parts += (
            _string(m.member_id),
            _nullable(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        )
    return b"".join(parts)
