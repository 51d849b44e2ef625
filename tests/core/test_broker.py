"""broker.partitions.Broker: offsets, visibility once durable, fetch ranges, ListOffsets, failures; with a manual
clock and a log whose writes complete (or fail) when the test says so. Batches come from kafka-python's builder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.partitions import Appended, Broker, PartitionSnapshot, TopicConfig
from broker.records import BatchAppended, DataRecord, TopicCreated
from broker.topics import TopicRegistry
from protocol.errors import ErrorCode


class ManualLog:
    def __init__(self) -> None:
        self.pending: list[tuple[Sequence[DataRecord], Callable[[Any], None] | None]] = []
        self.durable: list[DataRecord] = []

    def append(self, records: Sequence[DataRecord], on_done: Callable[[Any], None] | None = None) -> None:
        self.pending.append((records, on_done))

    def commit(self) -> None:
        while self.pending:
            records, on_done = self.pending.pop(0)
            self.durable.extend(records)
            if on_done is not None:
                on_done(None)

    def fail(self, count: int = 1) -> None:
        for _ in range(count):
            _records, on_done = self.pending.pop(0)
            if on_done is not None:
                on_done("unavailable")


class Env:
    def __init__(self, **configs: str) -> None:
        self.now = 1_000
        self.topics = TopicRegistry(auto_create=False)
        self.topics.add("t", 2)
        self.log = ManualLog()
        self.broker = Broker(self.topics, self.log, lambda: self.now, keep_bytes=True, defaults=configs)
        self.broker.start()
        self.log.commit()
        self.answers: list[list[Appended]] = []

    def produce(self, *entries: tuple[str, int, bytes | None], zstd: bool = True) -> list[Appended] | None:
        got: list[list[Appended]] = []
        self.broker.produce(list(entries), got.append, zstd_allowed=zstd)
        return got[0] if got else None


def batch(n: int = 3, ts: int = 100, compression: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k", value=b"v" * 10, headers=[])
    return bytes(b.build())


@pytest.fixture
def env() -> Env:
    return Env()


def test_topics_are_recorded_at_start_and_when_created_or_grown(env: Env) -> None:
    assert env.log.durable == [TopicCreated("t", 2, (), 1_000)]
    env.topics.add("u", 1)
    env.topics.add("t", 3)
    env.topics.add("t", 2)  # no shrink, no record
    env.log.commit()
    assert [(r.name, r.partitions) for r in env.log.durable[1:]] == [("u", 1), ("t", 3)]  # type: ignore[union-attr]


def test_offsets_are_assigned_in_order_and_visible_only_once_durable(env: Env) -> None:
    assert env.produce(("t", 0, batch(3))) is None  # waits for the write
    assert env.produce(("t", 0, batch(2)), ("t", 1, batch(1))) is None
    assert env.broker.read("t", 0, 0, 1 << 20, min_one=True).bases == []  # nothing durable yet
    assert env.broker.list_offset("t", 0, -1) == (ErrorCode.none, 0, -1)
    got: list[list[Appended]] = []
    env.broker.produce([("t", 0, batch(1))], got.append)
    env.log.commit()
    assert got == [[Appended(ErrorCode.none, 5, -1, 0)]]
    appended = [r for r in env.log.durable if isinstance(r, BatchAppended)]
    assert [(r.partition, r.base_offset, r.last_offset) for r in appended] == [
        (0, 0, 2),
        (0, 3, 4),
        (1, 0, 0),
        (0, 5, 5),
    ]
    s = env.broker.read("t", 0, 0, 1 << 20, min_one=True)
    assert (s.error, s.high_watermark, s.bases) == (ErrorCode.none, 6, [0, 3, 5])
    assert s.data is not None
    offsets = [r.offset for data in s.data for r in DefaultRecordBatch(data)]
    assert offsets == [0, 1, 2, 3, 4, 5]
    assert all(DefaultRecordBatch(data).validate_crc() for data in s.data)


def test_fetch_starts_at_the_batch_holding_the_offset_and_honours_max_bytes(env: Env) -> None:
    for _ in range(4):
        env.produce(("t", 0, batch(10)))
    env.log.commit()
    size = env.broker.read("t", 0, 0, 1 << 20, min_one=True).size // 4
    assert env.broker.read("t", 0, 15, 1 << 20, min_one=True).bases == [10, 20, 30]
    assert env.broker.read("t", 0, 15, 2 * size, min_one=True).bases == [10, 20]
    assert env.broker.read("t", 0, 15, 1, min_one=True).bases == [10]  # at least one batch (KIP-74)
    assert env.broker.read("t", 0, 15, 1, min_one=False).bases == []
    assert env.broker.read("t", 0, 40, 1 << 20, min_one=True).error == ErrorCode.none  # at the end: empty
    assert env.broker.read("t", 0, 41, 1 << 20, min_one=True).error == ErrorCode.offset_out_of_range
    assert env.broker.read("t", 0, -1, 1 << 20, min_one=True).error == ErrorCode.offset_out_of_range
    assert env.broker.read("t", 5, 0, 1 << 20, min_one=True).error == ErrorCode.unknown_topic_or_partition
    assert env.broker.available("t", 0, 15, 1 << 20) == 3 * size


def test_list_offsets(env: Env) -> None:
    env.produce(("t", 0, batch(3, ts=100)))
    env.produce(("t", 0, batch(3, ts=500)))
    env.produce(("t", 0, batch(3, ts=200)))
    env.log.commit()
    b = env.broker
    assert b.list_offset("t", 0, -2) == (ErrorCode.none, 0, -1)
    assert b.list_offset("t", 0, -1) == (ErrorCode.none, 9, -1)
    assert b.list_offset("t", 0, -3) == (ErrorCode.none, 5, 502)
    assert b.list_offset("t", 0, 0) == (ErrorCode.none, 0, 102)
    assert b.list_offset("t", 0, 150) == (ErrorCode.none, 3, 502)
    assert b.list_offset("t", 0, 503) == (ErrorCode.none, -1, -1)
    assert b.list_offset("t", 1, -3) == (ErrorCode.none, -1, -1)
    assert b.list_offset("x", 0, -1)[0] == ErrorCode.unknown_topic_or_partition


def test_bad_batches_are_answered_at_once_and_take_no_offset(env: Env) -> None:
    corrupt = bytearray(batch())
    corrupt[-1] ^= 1
    answers = env.produce(("t", 0, bytes(corrupt)), ("t", 0, batch()[:30]), ("t", 0, None), ("nope", 0, batch()))
    assert answers is not None
    assert [a.error for a in answers] == [
        ErrorCode.corrupt_message,
        ErrorCode.corrupt_message,
        ErrorCode.invalid_record,
        ErrorCode.unknown_topic_or_partition,
    ]
    env.produce(("t", 0, batch()))
    env.log.commit()
    assert env.broker.read("t", 0, 0, 1 << 20, min_one=True).bases == [0]


def test_max_message_bytes() -> None:
    env = Env(**{"max.message.bytes": "100"})
    [a] = env.produce(("t", 0, batch(10))) or []
    assert a.error == ErrorCode.message_too_large
    assert env.produce(("t", 0, batch(1))) is None  # 70-odd bytes fit


def test_zstd_refused_below_produce_v7(env: Env) -> None:
    import struct

    data = bytearray(batch())
    struct.pack_into(">h", data, 21, 4)  # claim zstd; recompute the CRC through a LogAppendTime stamp
    from protocol.record_batch import stamp

    fixed = bytearray(stamp(bytes(data), 0, 0, log_append_time_ms=5))
    [a] = env.produce(("t", 0, bytes(fixed)), zstd=False) or []
    assert a.error == ErrorCode.unsupported_compression_type


def test_log_append_time() -> None:
    env = Env(**{"message.timestamp.type": "LogAppendTime"})
    env.now = 7_777
    got: list[list[Appended]] = []
    env.broker.produce([("t", 0, batch(2, ts=5))], got.append)
    env.log.commit()
    assert got == [[Appended(ErrorCode.none, 0, 7_777, 0)]]
    [data] = env.broker.read("t", 0, 0, 1 << 20, min_one=True).data or []
    parsed = DefaultRecordBatch(data)
    assert parsed.validate_crc() and parsed.timestamp_type == 1
    assert [r.timestamp for r in parsed] == [7_777, 7_777]
    assert env.broker.list_offset("t", 0, -3) == (ErrorCode.none, 0, 7_777)


def test_topic_configs_are_checked() -> None:
    with pytest.raises(ValueError):
        TopicConfig.of({"message.timestamp.type": "Whenever"})
    with pytest.raises(ValueError):
        TopicConfig.of({"retention.ms": "-2"})
    with pytest.raises(ValueError):
        TopicConfig.of({"segment.ms": "1"})
    env = Env()
    env.broker.configure("t", {"message.timestamp.type": "LogAppendTime"})
    env.log.commit()
    assert env.broker.config("t").log_append_time
    assert env.log.durable[-1] == TopicCreated("t", 2, (("message.timestamp.type", "LogAppendTime"),), 1_000)


def test_watchers_are_woken_by_durable_appends_only(env: Env) -> None:
    woken: list[str] = []
    env.broker.watch("t", 0, lambda: woken.append("a"))
    cancel = env.broker.watch("t", 0, lambda: woken.append("b"))
    assert cancel is not None
    cancel()
    env.broker.watch("t", 1, lambda: woken.append("other partition"))
    env.produce(("t", 0, batch()))
    assert woken == []
    env.log.commit()
    assert woken == ["a"]
    env.produce(("t", 0, batch()))
    env.log.commit()
    assert woken == ["a"]  # one-shot


def test_a_failed_write_skips_no_offset(env: Env) -> None:
    got: list[list[Appended]] = []
    env.broker.produce([("t", 0, batch(3))], got.append)  # offsets 0-2
    env.broker.produce([("t", 0, batch(3))], got.append)  # offsets 3-5, in flight behind it
    env.log.fail()
    # Refused while the write behind the failed one is in flight, so nothing is assigned past the hole.
    [refused] = env.produce(("t", 0, batch(1))) or []
    assert refused.error == ErrorCode.not_leader_or_follower
    env.log.fail()  # storage refuses it: its next offset is not the stored one
    assert [a.error for [a] in got] == [ErrorCode.kafka_storage_error] * 2
    env.broker.produce([("t", 0, batch(2))], got.append)
    env.log.commit()
    assert got[-1] == [Appended(ErrorCode.none, 0, -1, 0)]  # the log goes on from the high watermark
    assert env.broker.list_offset("t", 0, -1) == (ErrorCode.none, 2, -1)


def test_load_restores_topics_offsets_and_index() -> None:
    topics = TopicRegistry(auto_create=False)
    log = ManualLog()
    b = Broker(topics, log, lambda: 1)
    b.load(
        [TopicCreated("t", 3, (("message.timestamp.type", "LogAppendTime"),), 1)],
        [PartitionSnapshot("t", 1, 0, 0, 8, [(0, 4, 50, 100, 40), (5, 7, 60, 90, 55)])],
    )
    b.start()
    assert log.pending == []  # nothing to record again
    t = topics.get("t")
    assert t is not None and t.partitions == 3
    assert b.config("t").log_append_time
    s = b.read("t", 1, 6, 1 << 20, min_one=True)
    assert (s.high_watermark, s.bases, s.size, s.data) == (8, [5], 90, None)
    assert b.list_offset("t", 1, -1) == (ErrorCode.none, 8, -1)
    got: list[list[Appended]] = []
    b.produce([("t", 1, batch(1))], got.append)
    log.commit()
    assert got == [[Appended(ErrorCode.none, 8, 1, 0)]]
    p = b.partition("t", 1)
    assert p is not None  # the batch append times: loaded, then the new batch's (the broker's clock: 1)
    assert [p.append_time_at(o) for o in (0, 4, 5, 7, 8, 9)] == [40, 40, 55, 55, 1, None]
