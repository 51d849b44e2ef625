"""broker.partitions.Broker after a write reported failed that may have committed (a connection lost during
COMMIT): the partition reads its stored end back before appending again, so the log continues after what was
stored, an idempotent retry is answered as a duplicate, and a partition never stays stuck on conditional writes.
The log here stores what the test says and answers what the test says, as a database can."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.partitions import Appended, Broker, StoredBatch, StoredTail, TailReader
from broker.records import BatchAppended, DataRecord
from broker.topics import TopicRegistry
from protocol.errors import ErrorCode


class AmbiguousLog:
    """Appends complete on ``commit`` (stored, answered ok), ``lose_answer`` (stored, answered failed: the ambiguous
    case) or ``fail`` (not stored, answered failed). ``read_tail`` answers from what is stored, when ``reads`` says."""

    def __init__(self) -> None:
        self.pending: list[tuple[Sequence[DataRecord], Callable[[Any], None] | None]] = []
        self.stored: list[BatchAppended] = []
        self.reads: list[tuple[str, int, int, Callable[[StoredTail | None], None]]] = []

    def append(self, records: Sequence[DataRecord], on_done: Callable[[Any], None] | None = None) -> None:
        self.pending.append((records, on_done))

    def _complete(self, store: bool, failure: Any) -> None:
        records, on_done = self.pending.pop(0)
        if store:
            self.stored.extend(r for r in records if isinstance(r, BatchAppended))
        if on_done is not None:
            on_done(failure)

    def commit(self) -> None:
        while self.pending:
            self._complete(True, None)

    def lose_answer(self) -> None:
        self._complete(True, "unavailable")

    def fail(self) -> None:
        self._complete(False, "unavailable")

    def read_tail(
        self, topic: str, partition: int, from_offset: int, on_done: Callable[[StoredTail | None], None]
    ) -> None:
        self.reads.append((topic, partition, from_offset, on_done))

    def answer_reads(self, *, fail: bool = False) -> None:
        reads, self.reads = self.reads, []
        for topic, partition, from_offset, on_done in reads:
            if fail:
                on_done(None)
                continue
            mine = [b for b in self.stored if (b.topic, b.partition) == (topic, partition)]
            batches = [
                StoredBatch(
                    b.base_offset, b.last_offset, b.max_timestamp, b.size, b.timestamp_ms,
                    b.producer_id, b.producer_epoch, b.base_sequence,
                )
                for b in mine
                if b.base_offset >= from_offset
            ]  # fmt: skip
            on_done(StoredTail(max((b.last_offset + 1 for b in mine), default=0), batches))


def batch(n: int = 3, *, producer_id: int = -1, epoch: int = -1, sequence: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, producer_id, epoch, sequence, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=100 + i, key=b"k", value=b"v", headers=[])
    return bytes(b.build())


class Env:
    def __init__(self) -> None:
        self.topics = TopicRegistry(auto_create=False)
        self.topics.add("t", 1)
        self.log = AmbiguousLog()
        assert isinstance(self.log, TailReader)
        self.broker = Broker(self.topics, self.log, lambda: 5_000)
        self.broker.start()
        self.log.commit()

    def produce(self, data: bytes) -> list[Appended] | None:
        got: list[list[Appended]] = []
        self.broker.produce([("t", 0, data)], got.append)
        return got[0] if got else None

    def produced(self, data: bytes) -> Appended:
        """Produce and let the write commit."""
        got: list[list[Appended]] = []
        self.broker.produce([("t", 0, data)], got.append)
        self.log.commit()
        [answer] = got[0]
        return answer


def test_a_write_that_committed_although_reported_failed_is_found_and_the_log_continues_after_it() -> None:
    env = Env()
    assert env.produced(batch(3)).base_offset == 0
    got: list[list[Appended]] = []
    env.broker.produce([("t", 0, batch(2))], got.append)
    env.log.lose_answer()  # offsets 3-4 are stored, the client is told KAFKA_STORAGE_ERROR
    assert got[0][0].error == ErrorCode.kafka_storage_error
    p = env.broker.partition("t", 0)
    assert p is not None and p.high_watermark == 3 and p.stale

    refused = env.produce(batch(1))  # the next append first reads the stored end back
    assert refused is not None and refused[0].error == ErrorCode.not_leader_or_follower
    assert len(env.log.reads) == 1 and env.log.reads[0][:3] == ("t", 0, 3)
    assert env.produce(batch(1)) is not None  # still reading: refused again, no second read
    assert len(env.log.reads) == 1
    env.log.answer_reads()

    assert (p.high_watermark, p.next_offset, p.stale) == (5, 5, False)
    assert list(p.bases) == [0, 3]
    assert env.produced(batch(1)).base_offset == 5  # continues after the stored batch: no conditional conflict
    assert [b.base_offset for b in env.log.stored] == [0, 3, 5]


def test_an_idempotent_retry_of_the_ambiguous_batch_is_a_duplicate() -> None:
    env = Env()
    first = batch(2, producer_id=7, epoch=0, sequence=0)
    assert env.produced(first).base_offset == 0
    second = batch(2, producer_id=7, epoch=0, sequence=2)
    got: list[list[Appended]] = []
    env.broker.produce([("t", 0, second)], got.append)
    env.log.lose_answer()
    assert got[0][0].error == ErrorCode.kafka_storage_error
    assert env.produce(second)[0].error == ErrorCode.not_leader_or_follower  # type: ignore[index]
    env.log.answer_reads()

    retry = env.produce(second)  # the client's retry: the stored batch's offsets, nothing appended
    assert retry is not None and (retry[0].error, retry[0].base_offset) == (ErrorCode.none, 2)
    assert env.log.pending == []
    assert env.produced(batch(1, producer_id=7, epoch=0, sequence=4)).base_offset == 4


def test_a_write_that_really_failed_leaves_nothing_and_the_offsets_are_reused() -> None:
    env = Env()
    got: list[list[Appended]] = []
    env.broker.produce([("t", 0, batch(3))], got.append)
    env.log.fail()
    assert got[0][0].error == ErrorCode.kafka_storage_error
    env.produce(batch(1))
    env.log.answer_reads()
    p = env.broker.partition("t", 0)
    assert p is not None and (p.high_watermark, p.next_offset, p.stale) == (0, 0, False)
    assert env.produced(batch(2)).base_offset == 0


def test_a_failed_read_leaves_the_partition_refusing_until_a_read_succeeds() -> None:
    env = Env()
    env.broker.produce([("t", 0, batch(3))], lambda _answers: None)
    env.log.lose_answer()
    env.produce(batch(1))
    env.log.answer_reads(fail=True)  # the database is still away
    p = env.broker.partition("t", 0)
    assert p is not None and p.stale and not p.resyncing
    assert env.produce(batch(1))[0].error == ErrorCode.not_leader_or_follower  # type: ignore[index]
    assert len(env.log.reads) == 1  # tried again
    env.log.answer_reads()
    assert env.produced(batch(1)).base_offset == 3
