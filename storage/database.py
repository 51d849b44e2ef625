"""Engine creation and schema migrations.

* ``database_url(url, data_dir)``: the URL to use. No URL means an embedded SQLite file ``<data_dir>/coordinator.db``
  (default data dir ``./data``), created on demand. PostgreSQL: ``postgresql+asyncpg://user@host:port/db``.
* ``create_engine(url)``: an ``AsyncEngine`` set up for this workload: SQLite in WAL mode with ``synchronous=FULL``
  (a committed batch survives power loss) and a busy timeout; PostgreSQL with ``pool_pre_ping`` (a connection killed
  while the database was away is replaced at the next checkout) and bounded connect/command timeouts, so a database
  that hangs turns into COORDINATOR_NOT_AVAILABLE instead of parking every request. ``sqlite_page_size`` is the
  page size of a NEW SQLite database (``PRAGMA page_size`` before its first table); a database that exists keeps the
  page size it was created with (changing it takes a ``VACUUM`` outside WAL mode, which we never run).
* ``migrate(engine)``: Alembic ``upgrade head`` with the migrations shipped in ``storage/migrations``; no alembic.ini
  is needed at run time. Idempotent. A database already at the head revision (``HEAD_REVISION``: every start after
  the first) is recognised by one query, without importing Alembic (0.4-0.6 s of a daemon's start-up).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

if TYPE_CHECKING:
    from alembic.config import Config

DEFAULT_DATA_DIR = Path("./data")
SQLITE_FILE_NAME = "coordinator.db"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# The newest revision: each migration's id is its file name's number (``0006_admin_actions.py`` is "0006"; a test
# compares this with Alembic's own head).
HEAD_REVISION = max(p.name.split("_", 1)[0] for p in (MIGRATIONS_DIR / "versions").glob("[0-9]*_*.py"))
DEFAULT_SQLITE_PAGE_SIZE = 4096  # SQLite's own default; see docs/performance.md for what bigger pages cost and give
_ASYNC_DRIVERS = {"postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg", "sqlite": "sqlite+aiosqlite"}


def database_url(url: str | None = None, data_dir: str | Path = DEFAULT_DATA_DIR) -> str:
    """``url`` if given (with the async driver filled in: ``postgresql://`` -> ``postgresql+asyncpg://``,
    ``sqlite://`` -> ``sqlite+aiosqlite://``), else the embedded SQLite file under ``data_dir`` (created)."""
    if url:
        parsed = make_url(url)
        driver = _ASYNC_DRIVERS.get(parsed.drivername)
        return parsed.set(drivername=driver).render_as_string(hide_password=False) if driver else url
    directory = Path(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite+aiosqlite:///{(directory / SQLITE_FILE_NAME).resolve()}"


def create_engine(
    url: str,
    *,
    schema: str | None = None,
    connect_timeout_s: float = 5.0,
    command_timeout_s: float | None = 30.0,
    sqlite_busy_timeout_s: float = 10.0,
    sqlite_page_size: int = DEFAULT_SQLITE_PAGE_SIZE,
    application_name: str = "kafka-group-coordinator",
    echo: bool = False,
) -> AsyncEngine:
    """An engine for ``url``. ``schema`` (PostgreSQL only) sets the search_path, e.g. to share a database."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, echo=echo, connect_args={"timeout": sqlite_busy_timeout_s})
        event.listen(engine.sync_engine, "connect", partial(_sqlite_on_connect, sqlite_page_size))
        return engine
    if backend == "postgresql":
        connect_args: dict[str, Any] = {}
        if parsed.get_driver_name() == "asyncpg":
            settings = {"application_name": application_name}
            if schema:
                settings["search_path"] = schema
            connect_args = {
                "timeout": connect_timeout_s,
                "command_timeout": command_timeout_s,
                "server_settings": settings,
            }
        return create_async_engine(url, echo=echo, pool_pre_ping=True, pool_recycle=3600, connect_args=connect_args)
    return create_async_engine(url, echo=echo, pool_pre_ping=True)


def _sqlite_on_connect(page_size: int, dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA page_size={int(page_size)}")  # only takes effect while the file is still empty
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


async def migrate(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (default: the newest). Safe to call on every start."""
    async with engine.begin() as conn:
        await conn.run_sync(_upgrade, revision)


def _upgrade(connection: Connection, revision: str) -> None:
    if revision == "head" and _at_head(connection):
        return
    from alembic import command

    command.upgrade(alembic_config(connection), revision)


def _at_head(connection: Connection) -> bool:
    """Whether the database's Alembic version table names ``HEAD_REVISION`` alone (what ``upgrade head`` would then
    leave as it is)."""
    if not inspect(connection).has_table("alembic_version"):
        return False
    found = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return found == [HEAD_REVISION]


async def current_revision(engine: AsyncEngine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as conn:
        return await conn.run_sync(read)
