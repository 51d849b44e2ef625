"""Outages the storage tests can switch on and off.

SQLite: another connection holds the write lock (``BEGIN IMMEDIATE``) beyond the log's busy timeout.
PostgreSQL: the log talks to the server through a TCP proxy; stopping it cuts every connection and refuses new ones.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.engine import make_url

from storage import SqlRecordLog

from .conftest import PG_URL, Database
from .tcp_proxy import TcpProxy

Outage = tuple[Callable[[], Coroutine[Any, Any, None]], Callable[[], Coroutine[Any, Any, None]]]


@asynccontextmanager
async def log_with_outage(database: Database) -> AsyncIterator[tuple[SqlRecordLog, Outage]]:
    if database.kind == "sqlite":
        log = await database.open_log(sqlite_busy_timeout_s=0.2)
        blocker = sqlite3.connect(str(database.sqlite_path), isolation_level=None, timeout=5)

        async def break_db() -> None:
            blocker.execute("BEGIN IMMEDIATE")  # holds the write lock: writers time out

        async def heal_db() -> None:
            blocker.execute("ROLLBACK")

        try:
            yield log, (break_db, heal_db)
        finally:
            await log.close()
            blocker.close()
        return
    target = make_url(PG_URL)
    proxy = TcpProxy(target.host or "127.0.0.1", target.port or 5432)
    await proxy.start()
    url = target.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    log = await SqlRecordLog.open(url, connect_timeout_s=2, **database.engine_options())  # type: ignore[arg-type]
    try:
        yield log, (proxy.stop, proxy.start)
    finally:
        await log.close()
        await proxy.stop()
