"""``SqlRecordLog.write_health``/``check_writes`` (what ``/readyz`` reports) on SQLite and PostgreSQL.

A failure that is the database's (here: another connection holds the write lock) marks writes as failing with its
reason; the probe transaction clears it once writes work, without touching the log position. Another writer that
moved ``log_state`` (a second daemon) stays reported until one of our own batches commits. A batch refused for its
data does not count. The full-disk case on the real daemon is in
tests/durability/test_storage_truth.py.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator

from sqlalchemy import text

from coordinator.record_log import WriteFailure
from storage import SqlRecordLog, create_engine

from .conftest import Database
from .records_gen import commit


async def _last_position(log: SqlRecordLog) -> int:
    async with log.engine.connect() as conn:
        return int((await conn.execute(text("SELECT last_position FROM log_state WHERE id = 1"))).scalar_one())


async def _move_position(log: SqlRecordLog) -> None:
    async with log.engine.begin() as conn:
        await conn.execute(text("UPDATE log_state SET last_position = last_position + 5 WHERE id = 1"))


@contextlib.asynccontextmanager
async def writes_blocked(database: Database) -> AsyncIterator[None]:
    """Another connection holds the write lock: SQLite's (BEGIN IMMEDIATE) or PostgreSQL's on ``log_state``."""
    if database.sqlite_path is not None:
        conn = sqlite3.connect(database.sqlite_path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    engine = create_engine(database.url, schema=database.schema)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("LOCK TABLE log_state IN EXCLUSIVE MODE"))  # reads go on, writes wait
            yield
            await conn.rollback()
    finally:
        await engine.dispose()


async def test_failing_writes_are_reported_until_a_probe_write_succeeds(database: Database) -> None:
    # Writes that wait for a lock give up after 0.3 s (SQLite busy timeout) or 1 s (PostgreSQL command timeout).
    log = await database.open_log(sqlite_busy_timeout_s=0.3, command_timeout_s=1.0)
    try:
        results: list[WriteFailure | None] = []
        log.append([commit("g", "t", 0, 1, 1_000)], results.append)
        await log.flush()
        assert results == [None] and log.write_health().ok
        assert (await log.check_writes()).ok

        async with writes_blocked(database):
            log.append([commit("g", "t", 0, 2, 1_000)], results.append)
            await log.flush()
            assert results[-1] == WriteFailure.UNAVAILABLE
            health = log.write_health()
            assert not health.ok and health.consecutive_failures == 1 and health.failing_since_ms is not None
            assert health.describe().startswith("storage writes failing since "), health.describe()
            again = await log.check_writes(probe_interval_s=0)  # the probe fails too while the lock is held
            assert not again.ok and again.consecutive_failures == 2
            assert again.failing_since_ms == health.failing_since_ms
        before = await _last_position(log)
        assert (await log.check_writes(probe_interval_s=0)).ok  # no client write needed: the probe commits
        assert await _last_position(log) == before  # and it moved nothing
        log.append([commit("g", "t", 0, 3, 1_000)], results.append)
        await log.flush()
        assert results[-1] is None and log.write_health().ok
    finally:
        await log.close()


async def test_another_writer_is_reported_until_our_own_batch_commits(record_log: SqlRecordLog) -> None:
    results: list[WriteFailure | None] = []
    record_log.append([commit("g", "t", 0, 1, 1_000)], results.append)  # the writer now knows the position
    await record_log.flush()
    await _move_position(record_log)  # as a second daemon's batch would
    record_log.append([commit("g", "t", 0, 2, 1_000)], results.append)
    await record_log.flush()
    assert results[-1] == WriteFailure.UNAVAILABLE
    # A probe would succeed and hide it: none is run, the conflict stays reported.
    health = await record_log.check_writes(probe_interval_s=0)
    assert not health.ok and "another coordinator writing here" in health.describe(), health.describe()
    record_log.append([commit("g", "t", 0, 3, 1_000)], results.append)  # the position was re-read
    await record_log.flush()
    assert results[-1] is None and record_log.write_health().ok


async def test_refused_data_does_not_mark_storage_failing(record_log: SqlRecordLog) -> None:
    results: list[WriteFailure | None] = []
    record_log.append([commit("g", "t", 0, 2**70, 1_000)], results.append)  # no BIGINT holds it
    await record_log.flush()
    assert results == [WriteFailure.REFUSED]
    assert record_log.write_health().ok
