"""The data path in storage (SQLite and PostgreSQL): the real Broker over the real SqlRecordLog - topics and batches
written by the batched writer, loaded at start-up without bytes, batches read back byte for byte, stale writes
refused by the conditional move of a partition's next offset."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.partitions import Appended, Broker
from broker.records import BatchAppended, TopicCreated
from broker.topics import TopicRegistry
from coordinator.record_log import WriteFailure
from coordinator.records import OffsetCommitRecord
from protocol.errors import ErrorCode
from storage import SqlRecordLog

from .conftest import Database


def batch(n: int = 3, ts: int = 100, compression: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"key-%d" % i, value=b"v" * 50, headers=[("h", b"x")])
    return bytes(b.build())


async def produce(broker: Broker, entries: Sequence[tuple[str, int, bytes | None]]) -> list[Appended]:
    future: asyncio.Future[list[Appended]] = asyncio.get_running_loop().create_future()
    broker.produce(list(entries), future.set_result)
    return await future


def new_broker(log: SqlRecordLog, topics: TopicRegistry | None = None) -> Broker:
    registry = topics if topics is not None else TopicRegistry(auto_create=False)
    return Broker(registry, log, lambda: int(time.time() * 1000))


async def test_batches_survive_a_restart_and_read_back_byte_for_byte(database: Database) -> None:
    log = await database.open_log()
    topics = TopicRegistry(auto_create=False)
    broker = new_broker(log, topics)
    broker.start()
    topics.add("t", 3)
    broker.configure("t", {"max.message.bytes": "5000"})
    sent = [batch(3), batch(2, compression=1), batch(1)]
    answers = [await produce(broker, [("t", 1, data)]) for data in sent]
    assert [(a.error, a.base_offset) for [a] in answers] == [(ErrorCode.none, 0), (ErrorCode.none, 3), (0, 5)]
    first = broker.read("t", 1, 4, 1 << 20, min_one=True)
    assert first.bases == [3, 5]
    stored = await log.read_batches("t", 1, first.bases[0], first.bases[-1])
    p1 = broker.partition("t", 1)
    assert p1 is not None
    appended = [p1.append_time_at(o) for o in range(6)]  # the broker's append time of each offset's batch
    assert all(t is not None and t > 0 for t in appended)
    await log.close()

    log = await database.open_log()
    try:
        topics2 = TopicRegistry(auto_create=False)
        broker2 = new_broker(log, topics2)
        stored_topics, partitions = await log.load_data()
        assert [(t.name, t.partitions, t.configs) for t in stored_topics] == [
            ("t", 3, (("max.message.bytes", "5000"),))
        ]
        broker2.load(stored_topics, partitions)
        broker2.start()
        assert topics2.get("t").partitions == 3  # type: ignore[union-attr]
        assert broker2.config("t").max_message_bytes == 5000
        again = broker2.read("t", 1, 4, 1 << 20, min_one=True)
        assert (again.high_watermark, again.bases, again.size) == (6, [3, 5], first.size)
        loaded = broker2.partition("t", 1)
        assert loaded is not None and [loaded.append_time_at(o) for o in range(6)] == appended  # lag in time too
        assert await log.read_batches("t", 1, 3, 5) == stored
        everything = await log.read_batches("t", 1, 0, 5)
        assert [r.offset for data in everything for r in DefaultRecordBatch(data)] == [0, 1, 2, 3, 4, 5]
        assert [data[8:] for data in everything] == [data[8:] for data in sent]  # only the base offset changed
        [a] = await produce(broker2, [("t", 1, batch(1))])
        assert a.base_offset == 6
        [a] = await produce(broker2, [("t", 2, batch(1))])
        assert a.base_offset == 0
    finally:
        await log.close()


async def test_concurrent_produces_and_commits_share_one_transaction(record_log: SqlRecordLog) -> None:
    topics = TopicRegistry(auto_create=False)
    topics.add("t", 2)
    broker = new_broker(record_log, topics)
    broker.start()
    await record_log.flush()
    before = record_log.stats.transactions
    commit_done: asyncio.Future[WriteFailure | None] = asyncio.get_running_loop().create_future()
    futures = [produce(broker, [("t", i % 2, batch(2))]) for i in range(10)]
    tasks = [asyncio.ensure_future(f) for f in futures]
    await asyncio.sleep(0)
    record_log.append([OffsetCommitRecord("g", "t", 0, 4, -1, "", 1, None, "", -1)], commit_done.set_result)
    results = await asyncio.gather(*tasks)
    assert await commit_done is None
    assert record_log.stats.transactions - before <= 2  # the first starts at once; the rest share the next one
    assert sorted(a.base_offset for [a] in results) == [0, 0, 2, 2, 4, 4, 6, 6, 8, 8]


async def test_a_stale_writer_fails_on_the_partitions_next_offset(database: Database, record_log: SqlRecordLog) -> None:
    topics = TopicRegistry(auto_create=False)
    topics.add("t", 1)
    broker = new_broker(record_log, topics)
    broker.start()
    [a] = await produce(broker, [("t", 0, batch(2))])
    assert a.base_offset == 0
    # Another writer that believes the log ends at 0 (or writes under another epoch) is refused ...
    stale: asyncio.Future[WriteFailure | None] = asyncio.get_running_loop().create_future()
    record_log.append([BatchAppended("t", 0, 0, 1, 100, 0, batch(2), 1)], stale.set_result)
    assert await stale == WriteFailure.REFUSED
    wrong_epoch: asyncio.Future[WriteFailure | None] = asyncio.get_running_loop().create_future()
    record_log.append([BatchAppended("t", 0, 2, 3, 100, 5, batch(2), 1)], wrong_epoch.set_result)
    assert await wrong_epoch == WriteFailure.REFUSED
    # ... without failing whoever shared its transaction, and the log goes on.
    [a] = await produce(broker, [("t", 0, batch(1))])
    assert (a.error, a.base_offset) == (ErrorCode.none, 2)
    assert record_log.write_health().ok
    _, [p] = await record_log.load_data()
    assert (p.next_offset, [b[0] for b in p.batches]) == (3, [0, 2])


async def test_recording_a_topic_again_never_shrinks_it_or_resets_offsets(record_log: SqlRecordLog) -> None:
    topics = TopicRegistry(auto_create=False)
    topics.add("t", 2)
    broker = new_broker(record_log, topics)
    broker.start()
    await produce(broker, [("t", 0, batch(4))])
    done: asyncio.Future[WriteFailure | None] = asyncio.get_running_loop().create_future()
    record_log.append([TopicCreated("t", 1, (), 5), TopicCreated("t", 4, (), 6)], done.set_result)
    assert await done is None
    stored, partitions = await record_log.load_data()
    assert [(t.name, t.partitions) for t in stored] == [("t", 4)]
    assert [(p.partition, p.next_offset) for p in partitions] == [(0, 4), (1, 0), (2, 0), (3, 0)]


# ------------------------------------------------------------------------------------------------ idempotent producers


def idempotent(seq: int, n: int = 2, pid: int = 0, epoch: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, pid, epoch, seq, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=100 + i, key=b"k", value=b"v%d" % (seq + i), headers=[])
    return bytes(b.build())


async def init_producer_id(broker: Broker) -> int | None:
    future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
    broker.producer_ids.allocate(future.set_result)
    return await future


async def test_producer_state_and_producer_ids_survive_a_restart(database: Database) -> None:
    """Producer ids are never handed out twice; the last five batches of each producer come back from the stored
    batch headers (through the partial index), so a retry after a restart is still recognised as a duplicate."""
    log = await database.open_log()
    topics = TopicRegistry(auto_create=False)
    broker = new_broker(log, topics)
    broker.start()
    topics.add("t", 2)
    pid = await init_producer_id(broker)
    other = await init_producer_id(broker)
    assert (pid, other) == (0, 1)
    for seq in range(0, 14, 2):  # 7 batches of 2: offsets 0..13
        [a] = await produce(broker, [("t", 0, idempotent(seq, pid=pid))])
        assert (a.error, a.base_offset) == (ErrorCode.none, seq)
    [a] = await produce(broker, [("t", 1, idempotent(0, pid=other, epoch=3))])
    [a] = await produce(broker, [("t", 0, batch(1))])  # not idempotent: -1 in the producer columns
    assert a.base_offset == 14
    await log.close()

    log = await database.open_log()
    try:
        assert await log.load_producer_ids() == 1000  # one block of ids was stored
        broker2 = new_broker(log, TopicRegistry(auto_create=False))
        stored_topics, partitions = await log.load_data()
        by_partition = {p.partition: p for p in partitions}
        assert sorted((b.base_sequence, b.base_offset) for b in by_partition[0].producers) == [
            (4, 4), (6, 6), (8, 8), (10, 10), (12, 12)
        ]  # fmt: skip
        assert [(b.producer_id, b.producer_epoch) for b in by_partition[1].producers] == [(1, 3)]
        broker2.load(stored_topics, partitions)
        broker2.producer_ids.load(await log.load_producer_ids())
        broker2.start()
        [dup] = await produce(broker2, [("t", 0, idempotent(12, pid=pid))])
        assert (dup.error, dup.base_offset) == (ErrorCode.none, 12)
        [old] = await produce(broker2, [("t", 0, idempotent(2, pid=pid))])
        assert old.error is ErrorCode.out_of_order_sequence_number
        [dup] = await produce(broker2, [("t", 1, idempotent(0, pid=other, epoch=3))])
        assert (dup.error, dup.base_offset) == (ErrorCode.none, 0)
        [nxt] = await produce(broker2, [("t", 0, idempotent(14, pid=pid))])
        assert (nxt.error, nxt.base_offset) == (ErrorCode.none, 15)
        assert await init_producer_id(broker2) == 1000
        assert len(await log.read_batches("t", 0, 0, 100)) == 9  # 7 + 1 + 1: no duplicate was stored
        # producers older than the window are not loaded
        _, partitions = await log.load_data(producers_since_ms=int(time.time() * 1000) + 60_000)
        assert all(not p.producers for p in partitions)
    finally:
        await log.close()


async def test_expired_producers_rows_are_pruned(database: Database) -> None:
    log = await database.open_log()
    try:
        topics = TopicRegistry(auto_create=False)
        broker = new_broker(log, topics)
        broker.start()
        topics.add("t", 1)
        for pid in (3, 4):
            [a] = await produce(broker, [("t", 0, idempotent(0, pid=pid))])
            assert a.error is ErrorCode.none
        _, [partition] = await log.load_data()
        assert {b.producer_id for b in partition.producers} == {3, 4}
        assert await log.prune_producers(0) == 0  # nobody is older than the epoch
        assert await log.prune_producers(int(time.time() * 1000) + 60_000) == 2
        _, [partition] = await log.load_data()
        assert partition.producers == []
    finally:
        await log.close()


async def test_a_deleted_topic_takes_its_producer_rows_with_it(database: Database) -> None:
    log = await database.open_log()
    try:
        topics = TopicRegistry(auto_create=False)
        broker = new_broker(log, topics)
        broker.start()
        topics.add("t", 1)
        [a] = await produce(broker, [("t", 0, idempotent(0, pid=5))])
        assert a.error is ErrorCode.none
        assert await log.prune_producers(int(time.time() * 1000) + 60_000) == 1  # the row exists ...
        [a] = await produce(broker, [("t", 0, idempotent(2, pid=5))])
        deleted: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        assert broker.delete_topic("t", deleted.set_result)
        assert await deleted is None
        assert await log.prune_producers(int(time.time() * 1000) + 60_000) == 0  # ... and went with the topic
    finally:
        await log.close()


class LosesOneAnswer:
    """The real log, except that the answer to the next append is lost: the transaction commits, the broker hears
    that it failed (a connection that drops during COMMIT)."""

    def __init__(self, log: SqlRecordLog) -> None:
        self.log = log
        self.lose_next = False

    def append(self, records: Sequence[object], on_done: object = None) -> None:
        if self.lose_next and callable(on_done):
            self.lose_next = False
            done = on_done
            self.log.append(records, lambda failure: done(failure or WriteFailure.UNAVAILABLE))  # type: ignore[arg-type]
            return
        self.log.append(records, on_done)  # type: ignore[arg-type]

    def read_tail(self, topic: str, partition: int, from_offset: int, on_done: object) -> None:
        self.log.read_tail(topic, partition, from_offset, on_done)  # type: ignore[arg-type]


async def test_a_committed_write_whose_answer_was_lost_is_read_back_and_the_log_continues(
    record_log: SqlRecordLog,
) -> None:
    topics = TopicRegistry(auto_create=False)
    topics.add("t", 1)
    log = LosesOneAnswer(record_log)
    broker = Broker(topics, log, lambda: int(time.time() * 1000))  # type: ignore[arg-type]
    broker.start()
    [a] = await produce(broker, [("t", 0, batch(2))])
    assert a.base_offset == 0
    log.lose_next = True
    [lost] = await produce(broker, [("t", 0, batch(3))])
    assert lost.error == ErrorCode.kafka_storage_error  # stored at 2-4 all the same
    [refused] = await produce(broker, [("t", 0, batch(1))])
    assert refused.error == ErrorCode.not_leader_or_follower  # reading the stored end back
    for _ in range(200):
        p = broker.partition("t", 0)
        if p is not None and not p.stale:
            break
        await asyncio.sleep(0.01)
    [a] = await produce(broker, [("t", 0, batch(1))])
    assert (a.error, a.base_offset) == (ErrorCode.none, 5)  # after the stored batch: no conditional-write conflict
    assert broker.read("t", 0, 2, 1 << 20, min_one=True).bases == [2, 5]
    assert record_log.write_health().ok
    _, [p] = await record_log.load_data()
    assert (p.next_offset, [b[0] for b in p.batches]) == (6, [0, 2, 5])
