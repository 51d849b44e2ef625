"""Deletions of the data path in storage (SQLite and PostgreSQL): retention / DeleteRecords move a partition's log
start and delete the batch rows below it, DeleteTopics deletes a topic's rows; after a restart the log start, the
remaining batches and the topics are as before; a log start move under another epoch is refused."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from broker.admin import EntryResult, TopicAdmin
from broker.partitions import Broker
from broker.records import LogStartAdvanced
from broker.retention import run_retention
from broker.topics import TopicRegistry
from protocol.errors import ErrorCode
from storage import SqlRecordLog

from .conftest import Database
from .test_data_path import batch, produce


async def settle(call: Callable[[Callable[[list[EntryResult]], object]], object]) -> list[EntryResult]:
    future: asyncio.Future[list[EntryResult]] = asyncio.get_running_loop().create_future()
    call(future.set_result)
    return await future


async def restart(database: Database, log: SqlRecordLog) -> tuple[SqlRecordLog, Broker, TopicRegistry]:
    await log.close()
    log = await database.open_log()
    topics = TopicRegistry(auto_create=False)
    broker = Broker(topics, log, lambda: int(time.time() * 1000))
    broker.load(*await log.load_data())
    broker.start()
    return log, broker, topics


async def test_log_start_moves_and_topic_deletions_survive_a_restart(database: Database) -> None:
    log = await database.open_log()
    topics = TopicRegistry(auto_create=False)
    now = [int(time.time() * 1000)]
    broker = Broker(topics, log, lambda: now[0], defaults={"retention.ms": "60000"})
    broker.start()
    topics.add("t", 2)
    topics.add("gone", 1)
    for ts in (now[0] - 120_000, now[0] - 90_000, now[0]):  # two batches beyond retention, one young
        await produce(broker, [("t", 0, batch(3, ts=ts))])
    await produce(broker, [("t", 1, batch(2, ts=now[0])), ("gone", 0, batch(1, ts=now[0]))])
    admin = TopicAdmin(broker, node_id=1)
    assert run_retention(broker) == 1  # t-0 only
    results = await settle(lambda done: admin.delete_records([("t", 1, 1)], done))
    assert results[0].error == ErrorCode.none and results[0].partitions == 1
    results = await settle(lambda done: admin.delete_topics(["gone"], [None], done))
    assert results[0].error == ErrorCode.none
    for _ in range(50):  # the retention pass's write has no waiter: wait for it
        if broker.partition("t", 0).log_start == 6:  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    p0 = broker.partition("t", 0)
    assert p0 is not None and p0.log_start == 6 and list(p0.bases) == [6]
    size0 = p0.size_bytes

    log, broker2, topics2 = await restart(database, log)
    try:
        assert [t.name for t in topics2.all()] == ["t"]
        p0 = broker2.partition("t", 0)
        p1 = broker2.partition("t", 1)
        assert p0 is not None and (p0.log_start, p0.high_watermark, list(p0.bases), p0.size_bytes) == (6, 9, [6], size0)
        assert p1 is not None and (p1.log_start, p1.high_watermark, list(p1.bases)) == (1, 2, [0])
        assert len(await log.read_batches("t", 0, 0, 9)) == 1
        assert await log.read_batches("gone", 0, 0, 10) == []
        async with log.engine.connect() as conn:
            rows = (await conn.execute(text("SELECT topic FROM partitions ORDER BY topic"))).all()
        assert [r[0] for r in rows] == ["t", "t"]
        [a] = await produce(broker2, [("t", 0, batch(1))])
        assert a.base_offset == 9 and a.log_start_offset == 6
    finally:
        await log.close()


async def test_a_log_start_move_under_another_epoch_is_refused(database: Database) -> None:
    log = await database.open_log()
    try:
        topics = TopicRegistry(auto_create=False)
        broker = Broker(topics, log, lambda: int(time.time() * 1000))
        broker.start()
        topics.add("t", 1)
        await produce(broker, [("t", 0, batch(3))])
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        log.append([LogStartAdvanced("t", 0, 2, 7, 0)], done.set_result)  # a stale writer's epoch
        assert await done is not None
        done = asyncio.get_running_loop().create_future()
        log.append([LogStartAdvanced("t", 0, 4, 0, 0)], done.set_result)  # beyond the stored end
        assert await done is not None
        assert len(await log.read_batches("t", 0, 0, 3)) == 1
    finally:
        await log.close()
