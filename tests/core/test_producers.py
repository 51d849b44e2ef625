"""Idempotent producers: the pure producer state (broker.producers) and its use by Broker.produce, with a manual clock
and a log whose writes complete (or fail) when the test says so. Kafka's rules: ProducerAppendInfo.checkSequence /
checkProducerEpoch, ProducerStateEntry (5 batches retained), UnifiedLog's duplicate answer, KIP-360 (an unknown
producer starts at any sequence)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.partitions import Appended, Broker, PartitionSnapshot
from broker.producers import (
    DURABLE,
    INT32_MAX,
    PENDING,
    PartitionProducers,
    ProducerBatch,
    ProducerIds,
    Refusal,
    StoredProducerBatch,
    increment_sequence,
)
from broker.records import BatchAppended, ProducerIdsAllocated
from broker.topics import TopicRegistry
from protocol.errors import ErrorCode

from .test_broker import ManualLog

DAY = 86_400_000


def idem(seq: int, n: int = 1, pid: int = 7, epoch: int = 0, ts: int = 100, transactional: bool = False) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, transactional, pid, epoch, seq, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k", value=b"v%d" % (seq + i), headers=[])
    return bytes(b.build())


class Env:
    def __init__(self, *, expiration_ms: int = DAY) -> None:
        self.now = 1_000
        self.topics = TopicRegistry(auto_create=False)
        self.topics.add("t", 2)
        self.log = ManualLog()
        self.broker = Broker(
            self.topics, self.log, lambda: self.now, keep_bytes=True, producer_id_expiration_ms=expiration_ms
        )
        self.broker.start()
        self.log.commit()

    def send(self, data: bytes, partition: int = 0) -> list[list[Appended]]:
        """Produce one batch; the list fills with the answers when they come."""
        got: list[list[Appended]] = []
        self.broker.produce([("t", partition, data)], got.append)
        return got

    def produce(self, data: bytes, partition: int = 0) -> Appended:
        """Produce one batch and make every write durable."""
        got = self.send(data, partition)
        self.log.commit()
        [[answer]] = got
        return answer

    def appended(self) -> list[BatchAppended]:
        return [r for r in self.log.durable if isinstance(r, BatchAppended)]


def ok(answer: Appended) -> tuple[ErrorCode, int]:
    return answer.error, answer.base_offset


# ------------------------------------------------------------------------------------------------ the pure rules


def state_with(*ranges: tuple[int, int], epoch: int = 0) -> PartitionProducers:
    """A producer 7 whose durable batches have these sequence ranges (offsets = sequences)."""
    state = PartitionProducers()
    for first, last in ranges:
        state.commit(7, epoch, ProducerBatch(first, last, first, last, 100, PENDING), 0)
    return state


def test_an_unknown_producer_is_accepted_at_any_sequence() -> None:
    state = PartitionProducers()
    assert state.check(7, 0, 0, 0) is None
    assert state.check(7, 0, 42, 44) is None  # KIP-360: no UNKNOWN_PRODUCER_ID from the broker any more


def test_the_same_epoch_must_continue_the_sequence() -> None:
    state = state_with((0, 2))
    assert state.check(7, 0, 3, 5) is None
    gap = state.check(7, 0, 4, 5)
    assert isinstance(gap, Refusal) and gap.error is ErrorCode.out_of_order_sequence_number
    overlap = state.check(7, 0, 2, 3)
    assert isinstance(overlap, Refusal) and overlap.error is ErrorCode.out_of_order_sequence_number


def test_a_duplicate_of_one_of_the_last_five_batches_is_recognised_and_an_older_one_is_out_of_order() -> None:
    state = state_with(*[(i, i) for i in range(6)])  # batches 0..5: batch 0 fell out of the five retained
    for i in range(1, 6):
        found = state.check(7, 0, i, i)
        assert isinstance(found, ProducerBatch) and found.base_offset == i
    old = state.check(7, 0, 0, 0)
    assert isinstance(old, Refusal) and old.error is ErrorCode.out_of_order_sequence_number
    partial = state.check(7, 0, 4, 5)  # not exactly a retained batch's range
    assert isinstance(partial, Refusal)


def test_epochs() -> None:
    state = state_with((0, 4), epoch=3)
    older = state.check(7, 2, 5, 5)
    assert isinstance(older, Refusal) and older.error is ErrorCode.invalid_producer_epoch
    older_duplicate = state.check(7, 2, 0, 4)  # a duplicate only within the same epoch
    assert isinstance(older_duplicate, Refusal) and older_duplicate.error is ErrorCode.invalid_producer_epoch
    not_zero = state.check(7, 4, 5, 5)
    assert isinstance(not_zero, Refusal) and not_zero.error is ErrorCode.out_of_order_sequence_number
    assert state.check(7, 4, 0, 0) is None
    state.commit(7, 4, ProducerBatch(0, 0, 5, 5, 100, PENDING), 0)
    assert [b.first_seq for b in state.entries[7].batches] == [0]  # the new epoch forgot the old batches
    assert state.entries[7].epoch == 4


def test_sequences_wrap_at_int32_max() -> None:
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert increment_sequence(INT32_MAX, 1) == 0
    state = state_with((INT32_MAX - 2, INT32_MAX))
    assert state.check(7, 0, 0, 9) is None
    assert isinstance(state.check(7, 0, 1, 9), Refusal)  # after Int32 max comes 0, nothing else
    spanning = state_with((INT32_MAX - 3, INT32_MAX - 2))
    assert spanning.check(7, 0, INT32_MAX - 1, 1) is None  # a batch of 4 records across the wrap


def test_pending_batches_count_and_a_failed_one_is_forgotten() -> None:
    state = state_with((0, 0))
    first = ProducerBatch(1, 1, 1, 1, 100, PENDING)
    state.begin(7, 0, first, 0)
    assert state.check(7, 0, 2, 2) is None  # pipelined behind the batch being written
    assert state.check(7, 0, 1, 1) is first  # a retry of the batch being written
    second = ProducerBatch(2, 2, 2, 2, 100, PENDING)
    state.begin(7, 0, second, 0)
    assert state.entries[7].last_seq == 0  # durable state untouched
    state.abort(7, first)
    state.abort(7, second)
    assert not state.pending
    assert state.check(7, 0, 1, 1) is None  # the retry is appended again
    assert (first.state, second.state) != (DURABLE, DURABLE)


def test_idle_producers_expire_oldest_first_and_not_while_writing() -> None:
    state = PartitionProducers()
    for pid, t in ((1, 0), (2, 10), (3, 20)):
        state.commit(pid, 0, ProducerBatch(0, 0, pid, pid, 100, PENDING), t)
    state.commit(1, 0, ProducerBatch(1, 1, 4, 4, 100, PENDING), 30)  # producer 1 appended again: now the newest
    assert state.expire(1_009, 1_000) == 0
    assert state.expire(1_010, 1_000) == 1 and list(state.entries) == [3, 1]
    state.begin(3, 0, ProducerBatch(1, 1, 5, 5, 100, PENDING), 1_500)  # writing now
    assert state.expire(5_000, 1_000) == 1 and list(state.entries) == [3]
    assert state.check(1, 0, 9, 9) is None  # forgotten: any sequence again


def test_load_replays_the_last_five_batches_and_orders_producers_by_last_append() -> None:
    state = PartitionProducers()
    stored = [StoredProducerBatch(7, 0, i, 10 + i, 10 + i, 100, 500 + i) for i in range(8)]
    stored += [StoredProducerBatch(8, 1, 0, 2, 3, 100, 400), StoredProducerBatch(8, 2, 0, 4, 5, 100, 450)]
    state.load_batches(reversed(stored))
    assert list(state.entries) == [8, 7]
    assert [b.first_seq for b in state.entries[7].batches] == [3, 4, 5, 6, 7]
    assert state.entries[7].last_append_ms == 507
    assert (state.entries[8].epoch, [b.base_offset for b in state.entries[8].batches]) == (2, [4])
    dup = state.check(8, 2, 0, 1)
    assert isinstance(dup, ProducerBatch) and dup.state == DURABLE and dup.base_offset == 4


# ------------------------------------------------------------------------------------------------ in Broker.produce


def test_a_duplicate_of_a_durable_batch_gets_the_original_offsets_and_is_not_appended() -> None:
    env = Env()
    assert ok(env.produce(idem(0, 3))) == (ErrorCode.none, 0)
    assert ok(env.produce(idem(3, 2))) == (ErrorCode.none, 3)
    again = env.send(idem(0, 3))
    assert again and ok(again[0][0]) == (ErrorCode.none, 0)  # answered at once: nothing to write
    assert again[0][0].log_append_time_ms == 102  # as Kafka: the max timestamp it keeps for the batch
    assert ok(env.produce(idem(3, 2))) == (ErrorCode.none, 3)
    assert [r.base_offset for r in env.appended()] == [0, 3]
    assert env.broker.read("t", 0, 0, 1 << 20, min_one=True).high_watermark == 5
    assert ok(env.produce(idem(5, 1))) == (ErrorCode.none, 5)


def test_a_duplicate_of_a_batch_being_written_is_answered_once_it_is_durable() -> None:
    env = Env()
    first = env.send(idem(0, 2))
    retry = env.send(idem(0, 2))
    assert first == [] and retry == []
    env.log.commit()
    assert [ok(a) for [a] in first + retry] == [(ErrorCode.none, 0), (ErrorCode.none, 0)]
    assert [r.base_offset for r in env.appended()] == [0]


def test_a_failed_write_rolls_the_producer_back_so_the_retry_is_appended() -> None:
    env = Env()
    assert ok(env.produce(idem(0, 1))) == (ErrorCode.none, 0)
    first = env.send(idem(1, 2))
    waiting = env.send(idem(1, 2))  # the client's retry while the write is in flight
    behind = env.send(idem(3, 1))  # and its next batch, pipelined
    env.log.fail(2)
    assert [a.error for [a] in first + waiting + behind] == [ErrorCode.kafka_storage_error] * 3
    assert ok(env.produce(idem(1, 2))) == (ErrorCode.none, 1)  # appended, not taken for a duplicate
    assert ok(env.produce(idem(3, 1))) == (ErrorCode.none, 3)
    assert [(r.base_offset, r.base_sequence) for r in env.appended()] == [(0, 0), (1, 1), (3, 3)]


def test_sequence_and_epoch_errors_take_no_offset() -> None:
    env = Env()
    assert ok(env.produce(idem(0, 1, epoch=2))) == (ErrorCode.none, 0)
    assert env.produce(idem(5, 1, epoch=2)).error is ErrorCode.out_of_order_sequence_number
    assert env.produce(idem(1, 1, epoch=1)).error is ErrorCode.invalid_producer_epoch
    assert env.produce(idem(1, 1, epoch=3)).error is ErrorCode.out_of_order_sequence_number
    assert ok(env.produce(idem(1, 1, epoch=2))) == (ErrorCode.none, 1)
    assert ok(env.produce(idem(0, 1, epoch=3))) == (ErrorCode.none, 2)  # a new epoch starts at 0
    assert ok(env.produce(idem(0, 1, pid=8))) == (ErrorCode.none, 3)  # producers are independent
    assert ok(env.produce(idem(0, 1), partition=1)) == (ErrorCode.none, 0)  # and so are partitions
    assert [r.base_offset for r in env.appended()] == [0, 1, 2, 3, 0]


def test_transactional_batches_and_bad_sequences_are_refused() -> None:
    env = Env()
    refused = env.produce(idem(0, 1, transactional=True))
    assert refused.error is ErrorCode.transactional_id_authorization_failed
    assert env.produce(idem(-1, 1)).error is ErrorCode.invalid_record  # a producer id needs a sequence >= 0
    assert env.appended() == []


def test_expired_producers_are_forgotten() -> None:
    env = Env(expiration_ms=1_000)
    assert ok(env.produce(idem(0, 1))) == (ErrorCode.none, 0)
    env.now += 999
    assert env.broker.expire_producers() == 0 and env.broker.producer_count() == 1
    env.now += 1
    assert env.broker.expire_producers() == 1 and env.broker.producer_count() == 0
    assert ok(env.produce(idem(0, 1))) == (ErrorCode.none, 1)  # no longer known: appended again


def test_the_state_is_rebuilt_from_the_stored_batches_at_load() -> None:
    env = Env()
    for seq in range(0, 12, 2):
        env.produce(idem(seq, 2))
    stored = [
        StoredProducerBatch(r.producer_id, r.producer_epoch, r.base_sequence, r.base_offset, r.last_offset,
                            r.max_timestamp, r.timestamp_ms)
        for r in env.appended()
    ]  # fmt: skip
    again = Env()
    again.broker.load([], [PartitionSnapshot("t", 0, next_offset=12, producers=stored)])
    assert ok(again.produce(idem(10, 2))) == (ErrorCode.none, 10)  # a duplicate of the last batch
    assert ok(again.produce(idem(2, 2))) == (ErrorCode.none, 2)  # of the fifth from last
    assert again.produce(idem(0, 2)).error is ErrorCode.out_of_order_sequence_number  # beyond the five
    assert ok(again.produce(idem(12, 1))) == (ErrorCode.none, 12)
    assert again.appended()[-1].base_offset == 12 and len(again.appended()) == 1


# ------------------------------------------------------------------------------------------------ producer ids


def test_producer_ids_come_from_durable_blocks_written_ahead() -> None:
    log = ManualLog()
    ids = ProducerIds(log, lambda: 5, block_size=10)
    got: list[Any] = []
    ids.allocate(got.append)
    ids.allocate(got.append)
    assert got == [] and [r for r, _ in log.pending] == [[ProducerIdsAllocated(0, 10, 5)]]
    log.commit()
    assert got == [0, 1]
    for _ in range(7):
        ids.allocate(got.append)
    assert got[-1] == 8 and not log.pending  # 1 id left of 10: not below 10% yet
    ids.allocate(got.append)
    assert got[-1] == 9 and [r for r, _ in log.pending] == [[ProducerIdsAllocated(10, 10, 5)]]  # written ahead
    log.commit()
    ids.allocate(got.append)
    assert got == list(range(11))


def test_a_failed_block_is_skipped_and_its_waiters_refused() -> None:
    log = ManualLog()
    ids = ProducerIds(log, lambda: 5, block_size=10)
    ids.load(30)  # blocks up to 30 are stored: never handed out again
    got: list[Any] = []
    ids.allocate(got.append)
    log.fail()
    assert got == [None]
    ids.allocate(got.append)
    log.commit()
    assert got == [None, 40]
    assert [r.first_id for r in log.durable] == [40]  # type: ignore[union-attr]


@pytest.mark.parametrize("block_size", [0, -1])
def test_block_size_must_be_positive(block_size: int) -> None:
    with pytest.raises(ValueError):
        ProducerIds(ManualLog(), lambda: 0, block_size=block_size)


def test_producers_beyond_the_cap_are_forgotten_least_recent_first() -> None:
    """A client may name any producer id: the state of one partition stays bounded."""
    state = PartitionProducers(max_entries=3)
    for pid in range(5):
        state.commit(pid, 0, ProducerBatch(0, 0, pid, pid, 100, PENDING), pid)
    assert list(state.entries) == [2, 3, 4] and state.evicted == 2
    state.begin(2, 0, ProducerBatch(1, 1, 5, 5, 100, PENDING), 10)  # writing: kept even though the oldest
    state.commit(5, 0, ProducerBatch(0, 0, 6, 6, 100, PENDING), 11)
    assert list(state.entries) == [4, 5, 2]  # 2 moved behind the others, 3 forgotten
    assert 3 not in state.entries and state.evicted == 3
