"""Which calls share a write transaction: the byte cap on produced batches, coordinator records going ahead of the
data calls left for later, each stream kept in call order (SQLite and PostgreSQL); the page size of a new SQLite
database."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from broker.partitions import Appended, Broker
from broker.topics import TopicRegistry
from coordinator.records import OffsetCommitRecord
from protocol.errors import ErrorCode
from storage import SqlRecordLog

from .conftest import Database
from .test_data_path import batch, new_broker


def _commit(offset: int) -> OffsetCommitRecord:
    return OffsetCommitRecord("g", "t", 0, offset, -1, "", 1, None, "", -1)


async def _queue_mixed(log: SqlRecordLog, broker: Broker) -> tuple[list[str], list[asyncio.Future[object]]]:
    """Queue, without yielding to the writer: produce P1, P2, P3, commit C1, produce P4, commit C2 (each produce
    one batch of about 300 bytes to partition 0). Returns the completion order, filled as calls complete."""
    done: list[str] = []
    futures: list[asyncio.Future[object]] = []
    loop = asyncio.get_running_loop()

    def on(name: str) -> object:
        future: asyncio.Future[object] = loop.create_future()
        futures.append(future)

        def finish(result: object) -> None:
            done.append(name)
            future.set_result(result)

        return finish

    for name in ("P1", "P2", "P3"):
        broker.produce([("t", 0, batch(3))], on(name))  # type: ignore[arg-type]
    log.append([_commit(1)], on("C1"))  # type: ignore[arg-type]
    broker.produce([("t", 0, batch(3))], on("P4"))  # type: ignore[arg-type]
    log.append([_commit(2)], on("C2"))  # type: ignore[arg-type]
    return done, futures


async def _topic(log: SqlRecordLog) -> Broker:
    topics = TopicRegistry(auto_create=False)
    broker = new_broker(log, topics)
    broker.start()
    topics.add("t", 1)
    await log.flush()  # the TopicCreated record is written
    return broker


@pytest.mark.parametrize(("alone", "transactions"), [(0, 2), (1, 4)])
async def test_coordinator_records_go_ahead_of_data_past_the_cap(
    database: Database, alone: int, transactions: int
) -> None:
    # One produce call per transaction while commits are queued; without them, ``alone`` (0: no cap).
    log = await database.open_log(max_batch_data_bytes=1, max_batch_data_bytes_alone=alone)
    try:
        broker = await _topic(log)
        before = log.stats.transactions
        done, futures = await _queue_mixed(log, broker)
        results = await asyncio.gather(*futures)
        # Transactions: [P1, C1, C2], then [P2, P3, P4] (no cap alone) or [P2], [P3], [P4]: the commits waited for
        # one produce call, not for four; the produce calls and the commits each complete in call order.
        assert done == ["P1", "C1", "C2", "P2", "P3", "P4"]
        assert log.stats.transactions - before == transactions
        produced = [r for r in results if isinstance(r, list)]
        assert [a.base_offset for [a] in produced] == [0, 3, 6, 9]
        assert all(isinstance(a, Appended) and a.error == ErrorCode.none for [a] in produced)
        assert [r for r in results if not isinstance(r, list)] == [None, None]
        stored = await log.read_batches("t", 0, 0, 9)
        assert len(stored) == 4
        _, partitions = await log.load_data()
        assert [(p.topic, p.next_offset) for p in partitions] == [("t", 12)]
        loaded = await log.load()
        assert [r.offset for r in loaded if isinstance(r, OffsetCommitRecord)] == [2]  # C2 after C1
    finally:
        await log.close()


async def test_flush_waits_for_the_calls_before_it_not_for_a_count(database: Database) -> None:
    log = await database.open_log(max_batch_data_bytes=1)
    try:
        broker = await _topic(log)
        done: list[str] = []
        broker.produce([("t", 0, batch(3))], lambda _: done.append("P0"))
        await asyncio.sleep(0)  # the writer takes P0 and writes it on its thread
        broker.produce([("t", 0, batch(3))], lambda _: done.append("P1"))
        broker.produce([("t", 0, batch(3))], lambda _: done.append("P2"))
        flushed = asyncio.ensure_future(log.flush())
        await asyncio.sleep(0)  # the flush starts: it waits for P0, P1 and P2
        log.append([_commit(1)], lambda _: done.append("C1"))  # after the flush, ahead of P2: [P1, C1], then [P2]
        await flushed
        # Three calls answered (P0, P1, C1) is not enough: P2 was appended before the flush.
        assert done[-1] == "P2" and sorted(done) == ["C1", "P0", "P1", "P2"]
    finally:
        await log.close()


async def test_without_a_cap_everything_queued_shares_one_transaction(database: Database) -> None:
    log = await database.open_log(max_batch_data_bytes=0, max_batch_data_bytes_alone=0)
    try:
        broker = await _topic(log)
        before = log.stats.transactions
        done, futures = await _queue_mixed(log, broker)
        await asyncio.gather(*futures)
        assert done == ["P1", "P2", "P3", "C1", "P4", "C2"]
        assert log.stats.transactions - before == 1
    finally:
        await log.close()


def _page_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


async def test_a_new_sqlite_database_gets_the_page_size_an_existing_one_keeps_its_own(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'big.db'}"
    log = await SqlRecordLog.open(url, sqlite_page_size=65536)
    log.append([_commit(7)])
    await log.close()
    assert _page_size(tmp_path / "big.db") == 65536

    log = await SqlRecordLog.open(url, sqlite_page_size=4096)  # an existing database: its page size stays
    try:
        assert [r.offset for r in await log.load() if isinstance(r, OffsetCommitRecord)] == [7]
        log.append([_commit(8)])
        await log.flush()
    finally:
        await log.close()
    assert _page_size(tmp_path / "big.db") == 65536

    default = f"sqlite+aiosqlite:///{tmp_path / 'default.db'}"
    log = await SqlRecordLog.open(default)
    await log.close()
    assert _page_size(tmp_path / "default.db") == 4096
