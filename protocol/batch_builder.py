"""Writing RecordBatch v2 (magic 2): the records of a batch the broker itself produces, and the batch around them.

The data path keeps producers' batches as they come (``protocol.record_batch``); the batches of the internal topic
``__consumer_offsets`` are written by the daemon, uncompressed, in the layout ``protocol.record_batch`` describes.
A record inside a batch (Kafka's ``DefaultRecord``)::

    length varint            (of everything after it)
    attributes int8          (0: unused)
    timestamp_delta varlong  (from the batch's base timestamp)
    offset_delta varint      (from the batch's base offset)
    key_length varint, key   (-1: null)
    value_length varint, value (-1: null, a tombstone)
    headers_count varint     (0)

Varints are zig-zag encoded (``(n << 1) ^ (n >> 63)``), as Kafka's ``ByteUtils.writeVarint``/``writeVarlong``.
A record's bytes depend only on its deltas, so a batch rebuilt with the same base offset and base timestamp (what
log compaction does, keeping the records that survive) reuses them unchanged: ``build_batch`` takes encoded records.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from .record_batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC

__all__ = ["build_batch", "encode_record", "varint"]

# base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
# max_timestamp, producer_id, producer_epoch, base_sequence, records_count (protocol.record_batch's layout)
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21
NO_PRODUCER_ID = -1


def varint(n: int) -> bytes:
    """Kafka's signed (zig-zag) varint/varlong."""
    z = (n << 1) ^ (n >> 63)
    z &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [varint(n) for n in range(-1, 64)]  # the lengths and deltas that occur most


def _v(n: int) -> bytes:
    return _SMALL[n + 1] if -1 <= n < 63 else varint(n)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    """One record (no headers); a None ``value`` is a tombstone."""
    body = [b"\x00", _v(timestamp_delta), _v(offset_delta)]
    if key is None:
        body.append(_SMALL[0])
    else:
        body += (_v(len(key)), key)
    if value is None:
        body.append(_SMALL[0])
    else:
        body += (_v(len(value)), value)
    body.append(_SMALL[1])  # no headers
    raw = b"".join(body)
    return _v(len(raw)) + raw


def build_batch(
    base_offset: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    records: Sequence[bytes],
    *,
    partition_leader_epoch: int = 0,
) -> bytes:
    """An uncompressed CreateTime batch of ``records`` (from ``encode_record``), with no producer id, its CRC-32C
    computed. ``last_offset_delta`` may exceed ``len(records) - 1``: a compacted batch keeps its original offsets."""
    body = b"".join(records)
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    header = bytearray(
        _HEADER.pack(
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC,
            0,
            0,  # attributes: no compression, CreateTime, not transactional, not control
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            NO_PRODUCER_ID,
            -1,  # producer epoch
            -1,  # base sequence
            len(records),
        )
    )
    crc = crc32c.crc32c(body, crc32c.crc32c(memoryview(header)[_CRC_START:]))
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + body
