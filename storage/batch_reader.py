"""Reading record batches for Fetch, off the event loop or cheaply.

* **SQLite** - a dedicated ``sqlite3`` connection (``query_only``) on its own reader thread: the query and the copy
  of the blobs run there (sqlite3 releases the GIL while it steps), the loop only awaits the result. WAL lets it
  read while the writer thread writes; it sees every committed batch, and the broker asks only for durable ones.
* **PostgreSQL** - one primary-key range query through the pooled asyncpg connection (binary protocol: ``bytea``
  arrives as ``bytes`` without text decoding).

``read(topic, partition, first_base, last_base)`` returns the batches whose base offsets lie in that range, in order.
"""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

_SQL = (
    "SELECT data FROM partition_batches WHERE topic = {0} AND partition_index = {1} AND base_offset >= {2}"
    " AND base_offset <= {3} ORDER BY base_offset"
)


class BatchReader(Protocol):
    async def read(self, topic: str, partition: int, first_base: int, last_base: int) -> list[bytes]: ...

    async def close(self) -> None: ...


class SqliteReader:
    def __init__(self, path: str, *, busy_timeout_s: float = 10.0) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgc-sqlite-reader")
        self._sql = _SQL.format("?", "?", "?", "?")

    async def read(self, topic: str, partition: int, first_base: int, last_base: int) -> list[bytes]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._read, topic, partition, first_base, last_base)

    def _read(self, topic: str, partition: int, first_base: int, last_base: int) -> list[bytes]:
        conn = self._conn
        if conn is None:
            conn = self._conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, check_same_thread=False)
            conn.execute("PRAGMA query_only=ON")
        try:
            return [row[0] for row in conn.execute(self._sql, (topic, partition, first_base, last_base))]
        except sqlite3.Error:
            self._close()
            raise

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close)
        self._executor.shutdown(wait=True)


class PostgresReader:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sql = _SQL.format("$1", "$2", "$3", "$4")

    async def read(self, topic: str, partition: int, first_base: int, last_base: int) -> list[bytes]:
        async with self.engine.connect() as sa_conn:
            raw = await sa_conn.get_raw_connection()
            conn: Any = raw.driver_connection
            return [row[0] for row in await conn.fetch(self._sql, topic, partition, first_base, last_base)]

    async def close(self) -> None:
        return None


def reader_for(engine: AsyncEngine, *, sqlite_busy_timeout_s: float = 10.0) -> BatchReader:
    if engine.dialect.name == "sqlite":
        path = engine.url.database
        assert path  # writer_for refused anything else already
        return SqliteReader(path, busy_timeout_s=sqlite_busy_timeout_s)
    return PostgresReader(engine)
