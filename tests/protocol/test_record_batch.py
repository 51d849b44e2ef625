"""protocol.record_batch against batches built by an independent encoder: kafka-python's DefaultRecordBatchBuilder
(and its reader, DefaultRecordBatch, which checks the CRC and decodes the records after we stamp them)."""

from __future__ import annotations

import struct

import pytest
from kafka import codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from protocol.errors import ErrorCode
from protocol.record_batch import (
    BatchError,
    Compression,
    TimestampType,
    read_batches,
    read_produced_batch,
    stamp,
)

CODECS = [Compression.NONE, Compression.GZIP]
CODECS += [c for c, ok in ((Compression.SNAPPY, codec.has_snappy()), (Compression.LZ4, codec.has_lz4())) if ok]
CODECS += [Compression.ZSTD] if codec.has_zstd() else []


def build(n: int = 5, compression: int = Compression.NONE, *, ts: int = 1_700_000_000_000, pid: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=pid, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i in range(n):
        builder.append(i, timestamp=ts + i, key=b"k%d" % i, value=b"value-%d" % i * 20, headers=[("h", b"%d" % i)])
    return bytes(builder.build())


@pytest.mark.parametrize("compression", CODECS)
def test_reads_a_kafka_python_batch(compression: int) -> None:
    data = build(7, compression)
    [h] = read_batches(data)
    assert h.size == len(data)
    assert (h.magic, h.base_offset, h.records_count, h.last_offset_delta) == (2, 0, 7, 6)
    assert h.compression == compression
    assert h.timestamp_type == TimestampType.CREATE_TIME
    assert (h.base_timestamp, h.max_timestamp) == (1_700_000_000_000, 1_700_000_000_006)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert read_produced_batch(data) == h


@pytest.mark.parametrize("compression", CODECS)
def test_stamping_the_offset_keeps_the_producers_crc(compression: int) -> None:
    data = build(3, compression)
    out = stamp(data, 1234, 7)
    assert out[17:] == data[17:]  # CRC and everything it covers unchanged
    [h] = read_batches(out)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 7)
    batch = DefaultRecordBatch(out)
    assert batch.validate_crc()
    records = list(batch)
    assert [r.offset for r in records] == [1234, 1235, 1236]
    assert [r.key for r in records] == [b"k0", b"k1", b"k2"]
    assert [r.headers for r in records] == [[("h", b"0")], [("h", b"1")], [("h", b"2")]]


@pytest.mark.parametrize("compression", CODECS)
def test_log_append_time_rewrites_max_timestamp_and_the_crc(compression: int) -> None:
    data = build(3, compression)
    out = stamp(data, 10, 0, log_append_time_ms=1_800_000_000_000)
    [h] = read_batches(out)  # the CRC is checked here
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == 1_800_000_000_000
    batch = DefaultRecordBatch(out)
    assert batch.validate_crc() and batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [1_800_000_000_000] * 3


def test_several_batches_back_to_back() -> None:
    a, b = stamp(build(2), 0, 0), stamp(build(3, Compression.GZIP), 2, 0)
    assert [(h.base_offset, h.records_count) for h in read_batches(a + b)] == [(0, 2), (2, 3)]
    with pytest.raises(BatchError) as e:
        read_produced_batch(build(2) + build(3))
    assert e.value.code == ErrorCode.invalid_record


def test_bad_crc_is_corrupt_message() -> None:
    data = bytearray(build(3))
    data[-1] ^= 0xFF
    with pytest.raises(BatchError) as e:
        read_batches(bytes(data))
    assert e.value.code == ErrorCode.corrupt_message


@pytest.mark.parametrize("cut", [1, 20, 60, 70])
def test_truncated_is_corrupt_message(cut: int) -> None:
    data = build(3)
    with pytest.raises(BatchError) as e:
        read_batches(data[: len(data) - cut] if cut < len(data) else data[:cut])
    assert e.value.code == ErrorCode.corrupt_message
    with pytest.raises(BatchError) as e:
        read_batches(data[:cut])
    assert e.value.code == ErrorCode.corrupt_message


def test_empty_is_corrupt_message() -> None:
    with pytest.raises(BatchError) as e:
        read_batches(b"")
    assert e.value.code == ErrorCode.corrupt_message


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_formats_are_refused(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=None if magic == 0 else 1, key=b"k", value=b"v")
    with pytest.raises(BatchError) as e:
        read_produced_batch(bytes(builder.build()))
    assert e.value.code == ErrorCode.invalid_record


def test_non_zero_base_offset_from_a_producer_is_invalid() -> None:
    with pytest.raises(BatchError) as e:
        read_produced_batch(stamp(build(1), 5, 0))
    assert e.value.code == ErrorCode.invalid_record


def test_record_count_must_match_last_offset_delta() -> None:
    data = bytearray(build(3))
    struct.pack_into(">i", data, 57, 4)
    fixed = stamp(bytes(data), 0, 0, log_append_time_ms=1)  # recompute the CRC so that only the count is wrong
    with pytest.raises(BatchError) as e:
        read_batches(fixed)
    assert e.value.code == ErrorCode.invalid_record
