"""Durability fixtures: the real daemon on SQLite (a temp directory) or PostgreSQL (a fresh database per test).

PostgreSQL: ``KGC_TEST_PG_URL`` (default ``postgresql+asyncpg://postgres@127.0.0.1:5432/test``; the role must be
allowed to CREATE DATABASE). Under CI (``CI=true``) an unreachable server FAILS the PostgreSQL tests; elsewhere they
are skipped with the reason (the check is the one of tests/storage/conftest.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from storage import create_engine
from tests.e2e.daemon import Daemon
from tests.storage.conftest import PG_URL, _run_in_thread, require_postgres

TOPIC = "dur3"
DAEMON_TOPICS = (f"{TOPIC}:3", "dur6:6")


@dataclass(frozen=True)
class Backend:
    kind: str  # "sqlite" | "postgresql"
    url: str | None  # the daemon's --storage-url (None: SQLite under --data-dir)


async def _admin(sql: str) -> None:
    engine = create_engine(PG_URL).execution_options(isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    require_postgres()
    return PG_URL


@pytest.fixture
def pg_database(postgres_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (dropped after); yields its URL."""
    name = f"kgc_dur_{uuid.uuid4().hex[:10]}"
    _run_in_thread(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        _run_in_thread(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", None)
    return Backend("postgresql", request.getfixturevalue("pg_database"))


def make_daemon(workdir: Path, backend: Backend, *extra: str, topics: tuple[str, ...] = DAEMON_TOPICS) -> Daemon:
    from tests.e2e.daemon import DEFAULT_ARGS

    return Daemon(workdir, topics=topics, storage_url=backend.url, extra_args=DEFAULT_ARGS + tuple(extra))


@pytest.fixture
def daemon(tmp_path: Path, backend: Backend) -> Iterator[Daemon]:
    """A started daemon; the test may kill/stop/start it. Stopped (SIGTERM) at the end."""
    d = make_daemon(tmp_path, backend).start()
    try:
        yield d
    finally:
        d.stop()
