"""``SqlRecordLog.write_health``/``check_writes`` (what ``/readyz`` reports) on SQLite and PostgreSQL.

A failure that is the database's (here: another writer moved ``log_state``, which fails the batch as a second
daemon would) marks writes as failing with its reason; the probe transaction clears it without touching the log
position; a batch refused for its data does not count. The full-disk case on the real daemon is in
tests/durability/test_storage_truth.py.
"""

from __future__ import annotations

from sqlalchemy import text

from protocol.errors import ErrorCode
from storage import SqlRecordLog

from .records_gen import commit


async def _last_position(log: SqlRecordLog) -> int:
    async with log.engine.connect() as conn:
        return int((await conn.execute(text("SELECT last_position FROM log_state WHERE id = 1"))).scalar_one())


async def _move_position(log: SqlRecordLog) -> None:
    async with log.engine.begin() as conn:
        await conn.execute(text("UPDATE log_state SET last_position = last_position + 5 WHERE id = 1"))


async def test_failing_writes_are_reported_until_a_probe_write_succeeds(record_log: SqlRecordLog) -> None:
    results: list[ErrorCode | None] = []
    record_log.append([commit("g", "t", 0, 1, 1_000)], results.append)
    await record_log.flush()
    assert results == [None] and record_log.write_health().ok
    assert (await record_log.check_writes()).ok

    await _move_position(record_log)  # another writer: the next batch fails (PositionConflict)
    record_log.append([commit("g", "t", 0, 2, 1_000)], results.append)
    await record_log.flush()
    assert results[-1] == ErrorCode.coordinator_not_available
    health = record_log.write_health()
    assert not health.ok and health.consecutive_failures == 1 and health.failing_since_ms is not None
    assert "another coordinator writing here" in health.describe(), health.describe()
    assert health.describe().startswith("storage writes failing since ")

    before = await _last_position(record_log)
    assert (await record_log.check_writes(probe_interval_s=0)).ok  # the probe commits: writes work
    assert await _last_position(record_log) == before  # and it moved nothing
    record_log.append([commit("g", "t", 0, 3, 1_000)], results.append)
    await record_log.flush()
    assert results[-1] is None and record_log.write_health().ok


async def test_refused_data_does_not_mark_storage_failing(record_log: SqlRecordLog) -> None:
    results: list[ErrorCode | None] = []
    record_log.append([commit("g", "t", 0, 2**70, 1_000)], results.append)  # no BIGINT holds it
    await record_log.flush()
    assert results == [ErrorCode.unknown_server_error]
    assert record_log.write_health().ok


async def test_successful_write_clears_failure_without_a_probe(record_log: SqlRecordLog) -> None:
    results: list[ErrorCode | None] = []
    record_log.append([commit("g", "t", 0, 1, 1_000)], results.append)  # the writer now knows the position
    await record_log.flush()
    await _move_position(record_log)
    record_log.append([commit("g", "t", 0, 2, 1_000)], results.append)
    await record_log.flush()
    assert not record_log.write_health().ok
    record_log.append([commit("g", "t", 0, 3, 1_000)], results.append)  # the position was re-read after the failure
    await record_log.flush()
    assert results == [None, ErrorCode.coordinator_not_available, None]
    assert record_log.write_health().ok
