"""Database trouble: every waiter of a failed batch gets COORDINATOR_NOT_AVAILABLE, nothing is raised, and the log
recovers by itself when the database is back.

SQLite outage: another connection holds the write lock (``BEGIN IMMEDIATE``) beyond the busy timeout.
PostgreSQL outage: the log talks to the server through a TCP proxy that the test stops (connections cut, port
refused) and starts again; and, separately, the server kills the log's backends (``pg_terminate_backend``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from coordinator.record_log import WriteFailure
from coordinator.records import OffsetCommitRecord
from storage import SqlRecordLog, StorageError, create_engine

from .conftest import PG_URL, Database
from .outages import log_with_outage
from .records_gen import commit


async def test_outage_fails_the_waiting_batches_then_recovers(database: Database) -> None:
    async with log_with_outage(database) as (log, (break_db, heal_db)):
        answers: list[tuple[str, WriteFailure | None]] = []

        def waiter(name: str) -> Callable[[WriteFailure | None], None]:
            return lambda error: answers.append((name, error))

        log.append([commit("g", "t", 0, 1, 1_000)], waiter("before"))
        await log.flush()
        assert answers == [("before", None)]

        await break_db()
        for i in range(5):  # several waiters, possibly in one batch: each is answered once, in order
            log.append([commit("g", "t", 0, 10 + i, 2_000 + i)], waiter(f"down-{i}"))
        await log.flush()
        assert answers[1:] == [(f"down-{i}", WriteFailure.UNAVAILABLE) for i in range(5)]
        assert log.stats.failed_transactions >= 1

        log.append([commit("g", "t", 0, 20, 3_000)], waiter("still-down"))  # the writer is still alive
        await log.flush()
        assert answers[-1] == ("still-down", WriteFailure.UNAVAILABLE)

        await heal_db()
        log.append([commit("g", "t", 0, 30, 4_000), commit("g", "t", 1, 31, 4_000)], waiter("after"))
        await log.flush()
        assert answers[-1] == ("after", None)

        # Failed batches were not written (and are not retried): the state is "before" + "after".
        loaded = [r for r in await log.load() if isinstance(r, OffsetCommitRecord)]
        assert [(r.partition, r.offset) for r in loaded] == [(0, 30), (1, 31)]
        commits = await log.queries.commit_log("g")
        assert sorted(e.offset for e in commits[0]) == [1, 30, 31]
        # Positions stay dense: a failed transaction hands out nothing.
        assert sorted(e.position for e in commits[0]) == [1, 2, 3]


# PostgreSQL only: a SQLite write lock does not block readers (WAL).
@pytest.mark.parametrize("database", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
async def test_reads_raise_storage_error_during_an_outage(database: Database) -> None:
    async with log_with_outage(database) as (log, (break_db, heal_db)):
        await break_db()
        with pytest.raises(StorageError):
            await log.load()
        with pytest.raises(StorageError):
            await log.queries.latest_offsets("g")
        await heal_db()
        assert await log.load() == []


@pytest.mark.parametrize("database", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
async def test_killed_backends_are_replaced_transparently(database: Database) -> None:
    log = await database.open_log()
    admin = create_engine(PG_URL)
    try:
        done: list[WriteFailure | None] = []
        log.append([commit("g", "t", 0, 1, 1)], done.append)
        await log.flush()
        async with admin.begin() as conn:
            killed = (
                await conn.execute(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": database.application_name},
                )
            ).scalar_one()
        assert killed >= 1
        # pool_pre_ping notices the dead connection at checkout and opens a new one.
        log.append([commit("g", "t", 0, 2, 2)], done.append)
        await log.flush()
        assert done == [None, None]
        assert [r.offset for r in await log.load() if isinstance(r, OffsetCommitRecord)] == [2]
    finally:
        await admin.dispose()
        await log.close()


async def test_open_raises_storage_error_when_the_database_is_unreachable(database: Database) -> None:
    if database.kind == "sqlite":
        url = "sqlite+aiosqlite:////proc/no-such-dir/x.db"
    else:
        url = make_url(PG_URL).set(port=1).render_as_string(hide_password=False)
    with pytest.raises(StorageError):
        await asyncio.wait_for(SqlRecordLog.open(url, connect_timeout_s=2), timeout=30)


async def test_refused_data_fails_only_its_own_request(database: Database, record_log: SqlRecordLog) -> None:
    # PostgreSQL text cannot hold NUL characters; SQLite stores them. Either way the other requests that share the
    # transaction must not pay for it.
    bad = commit("g", "t", 1, 2, 1_001, metadata="nul\x00inside")
    answers: list[tuple[str, WriteFailure | None]] = []
    record_log.append([commit("g", "t", 0, 1, 1_000)], lambda e: answers.append(("before", e)))
    record_log.append([bad], lambda e: answers.append(("bad", e)))
    record_log.append([commit("g", "t", 2, 3, 1_002)], lambda e: answers.append(("after", e)))
    await record_log.flush()
    loaded = {r.partition: r for r in await record_log.load() if isinstance(r, OffsetCommitRecord)}
    if database.kind == "postgresql":
        assert answers == [("before", None), ("bad", WriteFailure.REFUSED), ("after", None)]
        assert sorted(loaded) == [0, 2]
    else:
        assert answers == [("before", None), ("bad", None), ("after", None)]
        assert loaded[1] == bad
    record_log.append([commit("g", "t", 3, 4, 1_003)], lambda e: answers.append(("later", e)))
    await record_log.flush()
    assert answers[-1] == ("later", None)


async def test_sqlite_without_a_file_is_refused_with_a_clear_error() -> None:
    # The batch writer has its own connection: an in-memory database would be a different, empty one.
    with pytest.raises(StorageError, match="needs a database file"):
        await SqlRecordLog.open("sqlite+aiosqlite:///:memory:")
