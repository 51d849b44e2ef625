"""RecordBatch v2 (magic 2): read and check the header of producer batches, stamp offsets, never touch the records.

A Produce request carries, per partition, ``records``: bytes holding record batches back to back. The broker keeps
each batch as the producer sent it and changes only what Kafka changes on append:

* ``base_offset`` (bytes 0-7) - the producer sends 0; the broker writes the offset it assigns;
* ``partition_leader_epoch`` (bytes 12-15) - the broker writes the partition's epoch;
* under ``message.timestamp.type = LogAppendTime`` the timestamp-type bit of ``attributes`` and ``max_timestamp``,
  which ARE covered by the CRC, so the CRC is computed again.

Neither the base offset nor the leader epoch is covered by the CRC-32C (Castagnoli), which runs from ``attributes``
(byte 21) to the end of the batch: stamping them keeps the producer's CRC valid, and the records section (possibly
compressed) is never decompressed or re-encoded.

Layout (offsets in bytes, big-endian; header 61 bytes, total size = batch_length + 12)::

    0  base_offset int64          27 base_timestamp int64      57 records_count int32
    8  batch_length int32         35 max_timestamp int64       61 records...
    12 partition_leader_epoch     43 producer_id int64
    16 magic int8                 51 producer_epoch int16
    17 crc uint32                 53 base_sequence int32
    21 attributes int16
    23 last_offset_delta int32

``attributes``: bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), bit 3 timestamp type
(1 = LogAppendTime), bit 4 transactional, bit 5 control batch.

Errors (``BatchError.code``), as Kafka answers a produce: bad CRC, truncated or inconsistent framing ->
CORRUPT_MESSAGE; a magic other than 2, a non-zero base offset, a record count that is not ``last_offset_delta + 1``,
a control batch from a producer, more than one batch where exactly one is required -> INVALID_RECORD; an unknown
compression codec -> UNSUPPORTED_COMPRESSION_TYPE (zstd below Produce v7 too, checked by the caller).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from .errors import ErrorCode

__all__ = [
    "HEADER_SIZE",
    "BatchError",
    "BatchHeader",
    "Compression",
    "TimestampType",
    "read_batches",
    "stamp",
]

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes batch_length does not count
_CRC_START = 21
MAGIC = 2

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20


class Compression:
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType:
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchError(ValueError):
    """A batch the broker refuses; ``code`` is the Kafka error for the partition."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """The whole batch in bytes."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_BIT) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)


def _corrupt(message: str) -> BatchError:
    return BatchError(ErrorCode.corrupt_message, message)


def read_header(data: bytes | memoryview, at: int = 0) -> BatchHeader:
    """The header of the batch starting at ``at`` (framing only: no CRC, no field checks)."""
    if len(data) - at < LOG_OVERHEAD + 5:  # up to the magic byte
        raise _corrupt(f"truncated batch: {len(data) - at} bytes left, a batch header needs {HEADER_SIZE}")
    magic = data[at + 16]
    if magic != MAGIC:
        raise BatchError(ErrorCode.invalid_record, f"message format v{magic} (magic {magic}): only v2 is accepted")
    if len(data) - at < HEADER_SIZE:
        raise _corrupt(f"truncated batch: {len(data) - at} bytes left, a batch header needs {HEADER_SIZE}")
    return BatchHeader(*_HEADER.unpack_from(data, at))


def read_batches(data: bytes, *, check_crc: bool = True) -> list[BatchHeader]:
    """Every batch in ``data`` (back to back), checked: framing, magic, CRC, record count. Raises ``BatchError``."""
    view = memoryview(data)
    out: list[BatchHeader] = []
    at = 0
    while at < len(data):
        header = read_header(view, at)
        size = header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise _corrupt(f"batch length {header.batch_length} is smaller than a batch header")
        if at + size > len(data):
            raise _corrupt(f"truncated batch: declares {size} bytes, {len(data) - at} present")
        if check_crc:
            computed = crc32c.crc32c(view[at + _CRC_START : at + size])
            if computed != header.crc:
                raise _corrupt(f"CRC mismatch: batch says {header.crc:#010x}, computed {computed:#010x}")
        if header.records_count != header.last_offset_delta + 1 or header.records_count <= 0:
            raise BatchError(
                ErrorCode.invalid_record,
                f"record count {header.records_count} does not match last offset delta {header.last_offset_delta}",
            )
        if header.compression > Compression.ZSTD:
            raise BatchError(ErrorCode.unsupported_compression_type, f"unknown compression codec {header.compression}")
        out.append(header)
        at += size
    if not out:
        raise _corrupt("no record batch")
    return out


def read_produced_batch(data: bytes) -> BatchHeader:
    """The one batch a Produce v3+ partition must carry, checked as Kafka checks a producer's batch."""
    batches = read_batches(data)
    if len(batches) != 1:
        raise BatchError(ErrorCode.invalid_record, f"{len(batches)} record batches: a produce carries exactly one")
    header = batches[0]
    if header.base_offset != 0:
        raise BatchError(ErrorCode.invalid_record, f"base offset {header.base_offset}: a producer sends 0")
    if header.is_control:
        raise BatchError(ErrorCode.invalid_record, "a control batch from a producer")
    return header


def stamp(data: bytes, base_offset: int, partition_leader_epoch: int, log_append_time_ms: int | None = None) -> bytes:
    """The batch with its base offset and leader epoch written; with ``log_append_time_ms``, also marked
    LogAppendTime with that max timestamp and its CRC computed again. The records are not touched."""
    out = bytearray(data)
    _OFFSET.pack_into(out, 0, base_offset)
    _EPOCH.pack_into(out, 12, partition_leader_epoch)
    if log_append_time_ms is not None:
        (attributes,) = _ATTRIBUTES.unpack_from(out, 21)
        _ATTRIBUTES.pack_into(out, 21, attributes | TIMESTAMP_TYPE_BIT)
        _OFFSET.pack_into(out, 35, log_append_time_ms)
        _CRC.pack_into(out, 17, crc32c.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)
