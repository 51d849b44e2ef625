"""Every storage test runs against SQLite (a temp file) and PostgreSQL (a fresh schema per test, dropped after).

PostgreSQL: ``KGC_TEST_PG_URL`` (default ``postgresql+asyncpg://postgres@127.0.0.1:5432/test``). Under CI (``CI=true``)
an unreachable server FAILS the PostgreSQL tests; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from storage import SqlRecordLog, create_engine
from tests.needs import missing

PG_URL = os.environ.get("KGC_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
_SESSION = uuid.uuid4().hex[:8]
_counter = itertools.count()
T = TypeVar("T")


@dataclass(frozen=True)
class Database:
    kind: str  # "sqlite" | "postgresql"
    url: str
    schema: str | None = None
    sqlite_path: Path | None = None

    @property
    def application_name(self) -> str:
        return f"kgc-test-{self.schema}" if self.schema else "kgc-test"

    def engine_options(self) -> dict[str, object]:
        return {"schema": self.schema, "application_name": self.application_name}

    async def open_log(self, **kwargs: object) -> SqlRecordLog:
        options = {**self.engine_options(), **kwargs}
        return await SqlRecordLog.open(self.url, **options)  # type: ignore[arg-type]


async def _pg_check() -> str | None:
    engine = create_engine(PG_URL, connect_timeout_s=3)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    finally:
        await engine.dispose()


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    # Session fixtures may be set up from inside a running test loop: use a private loop in a thread.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def require_postgres() -> None:
    """Skip (fail under CI, see tests/needs.py) when the test PostgreSQL server cannot be reached."""
    problem = _run_in_thread(_pg_check())
    if problem is not None:
        where = make_url(PG_URL).render_as_string(hide_password=True)
        missing(f"PostgreSQL at {where} unreachable: {problem} (set KGC_TEST_PG_URL or start PostgreSQL)")


async def _autocommit(sql: str) -> None:
    engine = create_engine(PG_URL).execution_options(isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@contextlib.contextmanager
def fresh_postgres_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database (the role must be allowed to CREATE DATABASE), dropped after; yields its URL
    for the daemon's ``storage.url``. Skips (fails under CI) when PostgreSQL cannot be reached."""
    require_postgres()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _run_in_thread(_autocommit(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        _run_in_thread(_autocommit(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_available() -> Iterator[str]:
    require_postgres()
    yield PG_URL
    _run_in_thread(_drop_leftover_schemas())


async def _drop_leftover_schemas() -> None:
    engine = create_engine(PG_URL)
    try:
        async with engine.begin() as conn:
            rows = await conn.execute(
                text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"), {"p": f"kgc_{_SESSION}_%"}
            )
            for (name,) in rows:
                await conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "coordinator.db"
        yield Database("sqlite", f"sqlite+aiosqlite:///{path}", sqlite_path=path)
        return
    request.getfixturevalue("postgres_available")
    schema = f"kgc_{_SESSION}_{next(_counter)}"
    admin = create_engine(PG_URL)
    try:
        async with admin.begin() as conn:
            await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield Database("postgresql", PG_URL, schema=schema)
        async with admin.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        await admin.dispose()


@pytest.fixture
async def record_log(database: Database) -> AsyncIterator[SqlRecordLog]:
    log = await database.open_log()
    try:
        yield log
    finally:
        await log.close()
