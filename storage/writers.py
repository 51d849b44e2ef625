"""The write transaction of one batch, on the database driver directly (the hot path of ``SqlRecordLog``).

The schema, migrations, start-up load, pruning and every read go through SQLAlchemy; the one statement sequence run
for every group commit does not. Measured on the offset-commit benchmark (docs/performance.md), building,
binding and executing those statements through SQLAlchemy Core cost about 20 us of CPU per record plus about 3 ms
per transaction, more than the coordinator spends on the whole request. Here the SQL text of each statement is
generated once from the models (so the models stay the one definition of the schema), rows become tuples with one
``itemgetter`` call (offset commits, most of a busy coordinator's records, are built as tuples by ``build_batch``
directly: the Python the writer thread runs with the GIL held, per record, is about a quarter of the dict route's,
benchmarks/notes.md, seventh round), and each table costs one driver call per transaction:

* **SQLite** — a dedicated ``sqlite3`` connection used by one writer thread. The whole transaction (``BEGIN
  IMMEDIATE`` ... ``COMMIT``, multi-row statements per table) runs in one call to that thread, so the event loop
  neither waits for the fsync nor hops threads per statement. Same pragmas as the engine: WAL, ``synchronous=FULL``
  (a committed batch survives power loss), the busy timeout.
* **PostgreSQL** — the asyncpg connection under a pooled SQLAlchemy connection (so ``pool_pre_ping``, timeouts
  and ``search_path`` are the engine's), held from one transaction to the next and replaced when a write fails or
  it is found dead at BEGIN, one ``INSERT ... SELECT * FROM unnest($1::type[], ...)`` per table:
  every row of a table in one round trip, with the arrays encoded by asyncpg's C codecs.

``write(records, last_position)`` returns the ``BatchRows`` written; ``last_position`` None means unknown (read it
inside the transaction). Exceptions are the driver's own; ``SqlRecordLog`` turns them into error codes.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from operator import itemgetter
from typing import Any, Protocol

from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from . import models as m
from .errors import StorageError
from .models import table
from .rows import (
    CURRENT_OFFSET_COLUMNS,
    OFFSET_COMMIT_COLUMNS,
    AnyRecord,
    BatchRows,
    OffsetConflict,
    Row,
    RowTuple,
    build_batch,
    current_group_row,
    current_member_rows,
    current_offset_tuples,
)

log = logging.getLogger(__name__)

_OFFSET_KEYS = ("group_id", "topic", "partition_index")
_PRODUCER_KEYS = ("topic", "partition_index", "producer_id")
_CREDENTIAL_KEYS = ("user_name", "mechanism")
# Multi-row statements (SqliteWriter._chunked): SQLite's parameter limit is 32,766 since 3.32, 999 before.
_SQLITE_MAX_PARAMS = 32_766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999
_SQLITE_MAX_ROWS = 256
_SQLITE_CACHED_STATEMENTS = 512  # up to 9 sizes (1, 2, 4, ..., 256 rows) per statement kind and table


class PositionConflict(Exception):
    """The ``log_state`` row moved under us: another writer uses the same database."""


class BatchWriter(Protocol):
    async def write(self, records: Sequence[AnyRecord], last_position: int | None) -> BatchRows: ...

    async def probe(self) -> None:
        """One write transaction that changes nothing (``SqlRecordLog.check_writes``); raises if it fails."""

    async def close(self) -> None: ...


# A transaction that leaves every value as it was but is still a real write. One no-op UPDATE is not enough on
# SQLite: it sees the cell unchanged and writes nothing (measured: the WAL does not grow). Moving the counter and
# back dirties the page, which COMMIT appends to the WAL, so a full disk or a read-only file fails the probe as it
# fails a batch. (Inside BEGIN IMMEDIATE / a PostgreSQL transaction nobody sees the moved value.)
_PROBE_SQL = (
    "UPDATE log_state SET last_position = last_position + 1 WHERE id = 1",
    "UPDATE log_state SET last_position = last_position - 1 WHERE id = 1",
)


class _Table:
    """One table's column names (declared order) and ``rows(dicts) -> tuples`` in that order."""

    def __init__(self, model: type[m.Base]) -> None:
        t = table(model)
        self.name = t.name
        self.columns = [c.name for c in t.columns]
        pg = postgresql.dialect()  # type: ignore[no-untyped-call]
        self.pg_types = [c.type.compile(dialect=pg) for c in t.columns]
        getter = itemgetter(*self.columns)
        self.tuple = getter if len(self.columns) > 1 else lambda row: (getter(row),)
        self.nullable = tuple(c.name for c in t.columns if c.nullable and not c.primary_key)
        self._without: dict[tuple[str, ...], tuple[tuple[str, ...], Callable[[Row], tuple[Any, ...]]]] = {}

    def tuples(self, rows: list[Row]) -> list[tuple[Any, ...]]:
        return list(map(self.tuple, rows))

    def null_in_every_row(self, rows: list[Row]) -> tuple[str, ...]:
        """The nullable columns that are None in every one of ``rows`` (a dynamic member's instance id, a reason)."""
        return tuple(c for c in self.nullable if all(row[c] is None for row in rows))

    def without(self, absent: tuple[str, ...]) -> tuple[tuple[str, ...], Callable[[Row], tuple[Any, ...]]]:
        """The columns other than ``absent``, and a row -> tuple of them."""
        found = self._without.get(absent)
        if found is None:
            columns = tuple(c for c in self.columns if c not in absent)
            getter = itemgetter(*columns)
            found = self._without[absent] = (columns, getter if len(columns) > 1 else lambda row: (getter(row),))
        return found


_TABLES: dict[type[m.Base], _Table] = {}


def _table(model: type[m.Base]) -> _Table:
    found = _TABLES.get(model)
    if found is None:
        found = _TABLES[model] = _Table(model)
    return found


def _batch_row(batch: BatchRows) -> Row:
    return {
        "last_position": batch.last_position,
        "first_position": batch.first_position,
        "record_count": batch.record_count,
        "timestamp_ms": batch.timestamp_ms,
        "written_at_ms": int(time.time() * 1000),
    }


def _snapshot_rows(batch: BatchRows) -> tuple[list[Row], list[Row], list[RowTuple]]:
    """(current_groups upserts, current_group_members inserts, current_offsets upserts as tuples) of a batch."""
    groups = [current_group_row(position, r) for position, r in batch.group_upserts.values()]
    members = [row for _, r in batch.group_upserts.values() for row in current_member_rows(r)]
    return groups, members, current_offset_tuples(batch)


# ------------------------------------------------------------------------------------------------ SQLite


class SqliteWriter:
    """Writes batches with its own ``sqlite3`` connection on one dedicated thread."""

    def __init__(self, path: str, *, busy_timeout_s: float = 10.0) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgc-sqlite-writer")
        self._sql: dict[tuple[str, str, int], str] = {}

    async def write(self, records: Sequence[AnyRecord], last_position: int | None) -> BatchRows:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._write, records, last_position)

    async def probe(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._probe)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._disconnect)
        self._executor.shutdown(wait=True)

    # -- on the writer thread

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=_SQLITE_CACHED_STATEMENTS,
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _probe(self) -> None:
        conn = self._begin()
        try:
            for sql in _PROBE_SQL:
                conn.execute(sql)
            conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise

    def _begin(self) -> sqlite3.Connection:
        conn = self._conn if self._conn is not None else self._connect()
        self._conn = conn
        try:
            conn.execute("BEGIN IMMEDIATE")  # waits up to the busy timeout for another writer's lock
        except sqlite3.Error:
            self._disconnect()  # locked, or the file went away: the next batch starts from a fresh connection
            raise
        return conn

    def _rollback(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            self._disconnect()  # a connection that cannot roll back is not reused

    def _write(self, records: Sequence[AnyRecord], last_position: int | None) -> BatchRows:
        conn = self._begin()
        try:
            batch = self._write_in(conn, records, last_position)
            conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        return batch

    def _write_in(self, conn: sqlite3.Connection, records: Sequence[AnyRecord], last: int | None) -> BatchRows:
        if last is None:
            last = int(conn.execute("SELECT last_position FROM log_state WHERE id = 1").fetchone()[0])
        batch = build_batch(records, last + 1)
        if batch.record_count == 0:
            return batch
        moved = conn.execute(
            "UPDATE log_state SET last_position = ? WHERE id = 1 AND last_position = ?", (batch.last_position, last)
        )
        if moved.rowcount != 1:
            raise PositionConflict(f"log_state moved away from {last}: is another coordinator writing here?")
        self._insert(conn, m.LogBatch, [_batch_row(batch)])
        for name in batch.topic_deletes:  # rare: four statements each
            for sql in _TOPIC_DELETES:
                conn.execute(sql.replace("$1", "?"), (name,))
        if batch.topic_upserts or batch.partition_inserts:
            self._write_topics(conn, batch)
        for model, rows in batch.log_rows.items():
            self._insert(conn, model, rows)
        if batch.offset_commits:
            self._offsets(conn, m.OffsetCommit, OFFSET_COMMIT_COLUMNS, batch.offset_commits, ())
        if batch.partition_moves:
            self._move_partitions(conn, batch)
        if batch.log_starts:
            self._move_log_starts(conn, batch)
        if batch.producer_upserts:
            self._upsert(conn, m.PartitionProducer, _PRODUCER_KEYS, list(batch.producer_upserts.values()))
        if batch.credential_deletes:
            self._delete(conn, "scram_credentials", _CREDENTIAL_KEYS, sorted(batch.credential_deletes))
        if batch.credential_upserts:
            self._upsert(conn, m.ScramCredentialRow, _CREDENTIAL_KEYS, list(batch.credential_upserts.values()))
        touched = sorted(batch.group_deletes | batch.group_upserts.keys())
        if touched:
            self._delete(conn, "current_group_members", ("group_id",), [(g,) for g in touched])
        if batch.group_deletes:
            self._delete(conn, "current_groups", ("group_id",), [(g,) for g in sorted(batch.group_deletes)])
        groups, members, offsets = _snapshot_rows(batch)
        if groups:
            self._upsert(conn, m.CurrentGroup, ("group_id",), groups)
        if members:
            self._insert(conn, m.CurrentGroupMember, members)
        if batch.offset_deletes:
            self._delete(conn, "current_offsets", _OFFSET_KEYS, sorted(batch.offset_deletes))
        if offsets:
            self._offsets(conn, m.CurrentOffset, CURRENT_OFFSET_COLUMNS, offsets, _OFFSET_KEYS)
        return batch

    def _write_topics(self, conn: sqlite3.Connection, batch: BatchRows) -> None:
        topics = _table(m.TopicRow)
        for row in batch.topic_upserts.values():  # topic changes are rare: one statement each
            conn.execute(_sqlite_values(topics, 1) + _TOPIC_CONFLICT.format(greatest="max"), topics.tuple(row))
        if batch.partition_inserts:
            t = _table(m.PartitionRow)
            rows = t.tuples(batch.partition_inserts)
            self._chunked(conn, ("insert-new", t.name), len(t.columns), rows, lambda n: _sqlite_values(t, n) + _IGNORE)

    def _move_partitions(self, conn: sqlite3.Connection, batch: BatchRows) -> None:
        for (topic, partition), move in batch.partition_moves.items():
            moved = conn.execute(
                "UPDATE partitions SET next_offset = ? WHERE topic = ? AND partition_index = ? AND next_offset = ?"
                " AND epoch = ?",
                (move.new, topic, partition, move.expected, move.epoch),
            )
            if moved.rowcount != 1:
                raise OffsetConflict(f"{topic}-{partition}: the stored log does not end at {move.expected}")

    def _move_log_starts(self, conn: sqlite3.Connection, batch: BatchRows) -> None:
        for (topic, partition), (start, epoch) in batch.log_starts.items():
            moved = conn.execute(
                "UPDATE partitions SET log_start_offset = max(log_start_offset, ?) WHERE topic = ?"
                " AND partition_index = ? AND epoch = ? AND next_offset >= ?",
                (start, topic, partition, epoch, start),
            )
            if moved.rowcount != 1:
                raise OffsetConflict(f"{topic}-{partition}: no log start {start} under epoch {epoch}")
            conn.execute(
                "DELETE FROM partition_batches WHERE topic = ? AND partition_index = ? AND base_offset < ?"
                " AND last_offset < ?",
                (topic, partition, start, start),
            )

    def _insert(self, conn: sqlite3.Connection, model: type[m.Base], rows: list[Row]) -> None:
        """A table's rows; a nullable column that is None in every row is written as NULL by the statement text, not
        bound: ``sqlite3`` binds a None through its adapter lookup (~0.3 us each, measured), and most rows of the
        history and group-metadata tables carry some (a dynamic member's ``group_instance_id``: three per member of
        a generation)."""
        t = _table(model)
        absent = t.null_in_every_row(rows)
        if not absent:
            self._chunked(conn, ("insert", t.name), len(t.columns), t.tuples(rows), lambda n: _sqlite_values(t, n))
            return
        columns, getter = t.without(absent)
        sql_for: Callable[[int], str] = lambda n: _sqlite_values_with_nulls(t.name, columns, absent, n)  # noqa: E731
        kind = ("insert-null " + ",".join(absent), t.name)
        self._chunked(conn, kind, len(columns), list(map(getter, rows)), sql_for)

    def _upsert(self, conn: sqlite3.Connection, model: type[m.Base], keys: tuple[str, ...], rows: list[Row]) -> None:
        t = _table(model)
        conflict = _on_conflict(t, keys, "excluded")
        sql_for: Callable[[int], str] = lambda n: _sqlite_values(t, n) + conflict  # noqa: E731
        self._chunked(conn, ("upsert", t.name), len(t.columns), t.tuples(rows), sql_for)

    def _offsets(
        self,
        conn: sqlite3.Connection,
        model: type[m.Base],
        columns: tuple[str, ...],
        rows: list[RowTuple],
        keys: tuple[str, ...],
    ) -> None:
        """The commit path's rows (``columns`` order, the expiry last; upserts on ``keys`` if any). Rows without an
        expiry (nearly every commit) go in statements that write NULL for it and bind one parameter fewer: sqlite3
        binds a None through its adapter lookup, which cost more than the rest of the row (measured: a 256-row
        statement of 11 columns, ~1 us more per row with one None). The other rows go in statements of their own;
        a batch's offset rows have distinct keys (``build_batch`` folds them), so their order does not matter."""
        t = _table(model)
        conflict = _on_conflict(t, keys, "excluded") if keys else ""
        kind = "upsert" if keys else "insert"
        plain = [r[:-1] for r in rows if r[-1] is None]
        if plain:
            sql_plain: Callable[[int], str] = lambda n: _sqlite_values_of(t.name, columns, n, True) + conflict  # noqa: E731
            self._chunked(conn, (f"{kind}-no-expiry", t.name), len(columns) - 1, plain, sql_plain)
        if len(plain) < len(rows):
            expiring = [r for r in rows if r[-1] is not None]
            sql_for: Callable[[int], str] = lambda n: _sqlite_values_of(t.name, columns, n, False) + conflict  # noqa: E731
            self._chunked(conn, (f"{kind}-expiry", t.name), len(columns), expiring, sql_for)

    def _delete(self, conn: sqlite3.Connection, name: str, keys: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        self._chunked(conn, ("delete", name), len(keys), rows, lambda n: _sqlite_delete(name, keys, n))

    def _chunked(
        self,
        conn: sqlite3.Connection,
        kind: tuple[str, str],
        width: int,
        rows: list[tuple[Any, ...]],
        sql_for: Callable[[int], str],
    ) -> None:
        """Run one statement per chunk of ``rows`` (tuples of ``width`` parameters), chunks of power-of-two sizes
        (at most ``_SQLITE_MAX_ROWS`` rows or ``_SQLITE_MAX_PARAMS`` parameters): a table's rows cost a few
        statements, each text built and prepared once per connection (here and in sqlite3's statement cache).

        Not ``executemany``: it steps the statement once per row, and ``sqlite3`` releases the GIL around every
        step, so every row costs the writer thread a GIL hand-over from the event-loop thread. While the loop is
        busy (a 1,000-member rebalance, an open-loop commit load) each hand-over waits up to the interpreter's
        switch interval (5 ms): measured, 1,000 rows took 6.8 s against a busy thread, and 37 ms this way."""
        cap = max(1, min(_SQLITE_MAX_ROWS, _SQLITE_MAX_PARAMS // width))
        start, n = 0, len(rows)
        while start < n:
            size = min(cap, 1 << ((n - start).bit_length() - 1))  # the largest power of two left, capped
            key = (*kind, size)
            sql = self._sql.get(key)
            if sql is None:
                sql = self._sql[key] = sql_for(size)
            if size == 1:
                conn.execute(sql, rows[start])
            else:
                conn.execute(sql, list(chain.from_iterable(rows[start : start + size])))
            start += size


def _sqlite_values(t: _Table, rows: int) -> str:
    one = f"({', '.join('?' for _ in t.columns)})"
    return f"INSERT INTO {t.name} ({', '.join(t.columns)}) VALUES {', '.join([one] * rows)}"


def _sqlite_values_with_nulls(name: str, columns: tuple[str, ...], nulls: tuple[str, ...], rows: int) -> str:
    """A multi-row INSERT binding ``columns`` and writing NULL into ``nulls``."""
    one = f"({', '.join(['?'] * len(columns) + ['NULL'] * len(nulls))})"
    return f"INSERT INTO {name} ({', '.join(columns + nulls)}) VALUES {', '.join([one] * rows)}"


def _sqlite_values_of(name: str, columns: tuple[str, ...], rows: int, null_last: bool) -> str:
    """A multi-row INSERT into ``columns`` (in that order); ``null_last``: the last column is NULL, not bound."""
    one = f"({', '.join(['?'] * (len(columns) - 1) + ['NULL' if null_last else '?'])})"
    return f"INSERT INTO {name} ({', '.join(columns)}) VALUES {', '.join([one] * rows)}"


def _sqlite_delete(name: str, keys: tuple[str, ...], rows: int) -> str:
    if len(keys) == 1:
        return f"DELETE FROM {name} WHERE {keys[0]} IN ({', '.join('?' * rows)})"
    one = f"({', '.join('?' for _ in keys)})"
    return f"DELETE FROM {name} WHERE ({', '.join(keys)}) IN (VALUES {', '.join([one] * rows)})"


# A deleted topic: its batches, producers, partitions and row (the batches and producers by their keys' prefix).
_TOPIC_DELETES = (
    "DELETE FROM partition_batches WHERE topic = $1",
    "DELETE FROM partition_producers WHERE topic = $1",
    "DELETE FROM partitions WHERE topic = $1",
    "DELETE FROM topics WHERE name = $1",
)

# A topic only grows; its configs are the latest recorded.
_TOPIC_CONFLICT = (
    " ON CONFLICT (name) DO UPDATE SET partitions = {greatest}(topics.partitions, excluded.partitions),"
    " configs = excluded.configs, position = excluded.position, updated_ms = excluded.updated_ms"
)
_IGNORE = " ON CONFLICT DO NOTHING"  # a partition row that exists keeps its offsets


def _on_conflict(t: _Table, keys: tuple[str, ...], excluded: str) -> str:
    updates = ", ".join(f"{c} = {excluded}.{c}" for c in t.columns if c not in keys)
    return f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"


# ------------------------------------------------------------------------------------------------ PostgreSQL


class PostgresWriter:
    """Writes batches through the asyncpg connection of a pooled SQLAlchemy connection, held from one write to the
    next: checking a connection out for every transaction cost a ``pool_pre_ping`` round trip and a reset
    (ROLLBACK) at check-in, about a third of a produce transaction's time on a loaded host (docs/performance.md,
    the data path). A write that fails for any reason discards the connection (invalidated, never back in the
    pool), and a held connection found dead when its transaction begins is replaced at once: the recovery after a
    database outage or a terminated backend is the pool's pre-ping, as before."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sql: dict[tuple[str, type[m.Base]], str] = {}
        self._held: AsyncConnection | None = None

    async def close(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            await held.close()

    async def probe(self) -> None:
        async with self.engine.connect() as sa_conn:
            raw = await sa_conn.get_raw_connection()
            conn: Any = raw.driver_connection
            async with conn.transaction():
                for sql in _PROBE_SQL:
                    await conn.execute(sql)

    async def write(self, records: Sequence[AnyRecord], last_position: int | None) -> BatchRows:
        sa_conn, conn, transaction = await self._begin()
        try:
            batch = await self._write_in(conn, records, last_position)
            await transaction.commit()
        except BaseException:
            self._held = None
            await _discard(sa_conn)  # invalidated: the open transaction goes with the connection
            raise
        return batch

    async def _begin(self) -> tuple[AsyncConnection, Any, Any]:
        """(connection, asyncpg connection, started transaction). A held connection found dead at BEGIN (the
        backend was terminated, the database restarted) is replaced once by a fresh, pre-pinged checkout, as the
        pool's pre-ping would have done: nothing of this transaction was sent yet."""
        held = self._held
        if held is not None:
            try:
                return held, *await _start(held)
            except Exception:
                self._held = None
                await _discard(held)
        fresh = self._held = await self.engine.connect()
        try:
            return fresh, *await _start(fresh)
        except BaseException:
            self._held = None
            await _discard(fresh)
            raise

    async def _write_in(self, conn: Any, records: Sequence[AnyRecord], last: int | None) -> BatchRows:
        if last is None:
            last = int(await conn.fetchval("SELECT last_position FROM log_state WHERE id = 1"))
        batch = build_batch(records, last + 1)
        if batch.record_count == 0:
            return batch
        status = await conn.execute(
            "UPDATE log_state SET last_position = $1 WHERE id = 1 AND last_position = $2", batch.last_position, last
        )
        if status != "UPDATE 1":
            raise PositionConflict(f"log_state moved away from {last}: is another coordinator writing here?")
        await self._insert(conn, m.LogBatch, [_batch_row(batch)])
        for name in batch.topic_deletes:
            for sql in _TOPIC_DELETES:
                await conn.execute(sql, name)
        if batch.topic_upserts:
            t = _table(m.TopicRow)
            sql = _pg_insert(t) + _TOPIC_CONFLICT.format(greatest="GREATEST")
            await conn.execute(sql, *_columns(t.tuples(list(batch.topic_upserts.values()))))
        if batch.partition_inserts:
            t = _table(m.PartitionRow)
            await conn.execute(_pg_insert(t) + _IGNORE, *_columns(t.tuples(batch.partition_inserts)))
        for model, rows in batch.log_rows.items():
            await self._insert(conn, model, rows)
        if batch.offset_commits:
            await self._offsets(conn, m.OffsetCommit, OFFSET_COMMIT_COLUMNS, batch.offset_commits, ())
        if batch.partition_moves:
            keys = list(batch.partition_moves)
            moves = list(batch.partition_moves.values())
            status = await conn.execute(
                "UPDATE partitions AS p SET next_offset = k.new FROM unnest($1::VARCHAR[], $2::INTEGER[],"
                " $3::BIGINT[], $4::BIGINT[], $5::INTEGER[]) AS k(topic, partition_index, expected, new, epoch)"
                " WHERE p.topic = k.topic AND p.partition_index = k.partition_index AND p.next_offset = k.expected"
                " AND p.epoch = k.epoch",
                [k[0] for k in keys], [k[1] for k in keys], [mv.expected for mv in moves], [mv.new for mv in moves],
                [mv.epoch for mv in moves],
            )  # fmt: skip
            if status != f"UPDATE {len(keys)}":
                raise OffsetConflict(f"a partition's stored log does not end where its batches start ({status})")
        if batch.log_starts:
            await _pg_move_log_starts(conn, batch)
        if batch.producer_upserts:
            await self._upsert(conn, m.PartitionProducer, _PRODUCER_KEYS, list(batch.producer_upserts.values()))
        if batch.credential_deletes:  # rare (user administration): one statement each
            for user, mechanism in sorted(batch.credential_deletes):
                await conn.execute(
                    "DELETE FROM scram_credentials WHERE user_name = $1 AND mechanism = $2", user, mechanism
                )
        if batch.credential_upserts:
            await self._upsert(conn, m.ScramCredentialRow, _CREDENTIAL_KEYS, list(batch.credential_upserts.values()))
        touched = sorted(batch.group_deletes | batch.group_upserts.keys())
        if touched:
            await conn.execute("DELETE FROM current_group_members WHERE group_id = ANY($1::VARCHAR[])", touched)
        if batch.group_deletes:
            await conn.execute(
                "DELETE FROM current_groups WHERE group_id = ANY($1::VARCHAR[])", sorted(batch.group_deletes)
            )
        groups, members, offsets = _snapshot_rows(batch)
        if groups:
            await self._upsert(conn, m.CurrentGroup, ("group_id",), groups)
        if members:
            await self._insert(conn, m.CurrentGroupMember, members)
        if batch.offset_deletes:
            keys = list(zip(*sorted(batch.offset_deletes), strict=True))
            await conn.execute(
                "DELETE FROM current_offsets AS o USING unnest($1::VARCHAR[], $2::VARCHAR[], $3::INTEGER[])"
                " AS k(group_id, topic, partition_index) WHERE o.group_id = k.group_id AND o.topic = k.topic"
                " AND o.partition_index = k.partition_index",
                *keys,
            )
        if offsets:
            await self._offsets(conn, m.CurrentOffset, CURRENT_OFFSET_COLUMNS, offsets, _OFFSET_KEYS)
        return batch

    async def _insert(self, conn: Any, model: type[m.Base], rows: list[Row]) -> None:
        t = _table(model)
        sql = self._sql.get(("insert", model))
        if sql is None:
            sql = self._sql[("insert", model)] = _pg_insert(t)
        await conn.execute(sql, *_columns(t.tuples(rows)))

    async def _upsert(self, conn: Any, model: type[m.Base], keys: tuple[str, ...], rows: list[Row]) -> None:
        t = _table(model)
        sql = self._sql.get(("upsert", model))
        if sql is None:
            sql = self._sql[("upsert", model)] = _pg_insert(t) + _on_conflict(t, keys, "EXCLUDED")
        await conn.execute(sql, *_columns(t.tuples(rows)))

    async def _offsets(
        self, conn: Any, model: type[m.Base], columns: tuple[str, ...], rows: list[RowTuple], keys: tuple[str, ...]
    ) -> None:
        """The commit path's row tuples (``columns`` order; upserts on ``keys`` if any)."""
        t = _table(model)
        sql = self._sql.get(("offsets", model))
        if sql is None:
            sql = _pg_insert(t, columns) + (_on_conflict(t, keys, "EXCLUDED") if keys else "")
            self._sql[("offsets", model)] = sql
        await conn.execute(sql, *_columns(rows))


async def _pg_move_log_starts(conn: Any, batch: BatchRows) -> None:
    """Each partition's log start moved up under its epoch (and never past its stored end), then the batches wholly
    below it deleted: two statements for all the partitions of a retention pass."""
    keys = list(batch.log_starts)
    topics, partitions = [k[0] for k in keys], [k[1] for k in keys]
    starts = [v[0] for v in batch.log_starts.values()]
    epochs = [v[1] for v in batch.log_starts.values()]
    status = await conn.execute(
        "UPDATE partitions AS p SET log_start_offset = GREATEST(p.log_start_offset, k.start) FROM unnest("
        "$1::VARCHAR[], $2::INTEGER[], $3::BIGINT[], $4::INTEGER[]) AS k(topic, partition_index, start, epoch)"
        " WHERE p.topic = k.topic AND p.partition_index = k.partition_index AND p.epoch = k.epoch"
        " AND p.next_offset >= k.start",
        topics, partitions, starts, epochs,
    )  # fmt: skip
    if status != f"UPDATE {len(keys)}":
        raise OffsetConflict(f"a partition's log start cannot move under its epoch ({status})")
    await conn.execute(
        "DELETE FROM partition_batches AS b USING unnest($1::VARCHAR[], $2::INTEGER[], $3::BIGINT[])"
        " AS k(topic, partition_index, start) WHERE b.topic = k.topic AND b.partition_index = k.partition_index"
        " AND b.base_offset < k.start AND b.last_offset < k.start",
        topics, partitions, starts,
    )  # fmt: skip


async def _start(sa_conn: AsyncConnection) -> tuple[Any, Any]:
    raw = await sa_conn.get_raw_connection()
    conn: Any = raw.driver_connection  # asyncpg.Connection
    transaction = conn.transaction()
    await transaction.start()
    return conn, transaction


async def _discard(sa_conn: AsyncConnection) -> None:
    """Invalidate and return a connection that failed a write; errors of a dead connection are not ours to raise."""
    try:
        await sa_conn.invalidate()
        await sa_conn.close()
    except Exception:  # the connection is gone already: nothing to give back
        log.debug("storage: discarding the failed write connection raised", exc_info=True)


def _pg_insert(t: _Table, columns: Sequence[str] | None = None) -> str:
    """``INSERT ... SELECT * FROM unnest(...)`` of one array per column, in ``columns`` order (default: declared)."""
    types = dict(zip(t.columns, t.pg_types, strict=True))
    names = t.columns if columns is None else list(columns)
    arrays = ", ".join(f"${i}::{types[c]}[]" for i, c in enumerate(names, start=1))
    return f"INSERT INTO {t.name} ({', '.join(names)}) SELECT * FROM unnest({arrays})"


def _columns(rows: list[RowTuple]) -> list[list[Any]]:
    """Row tuples -> one list per column (unnest's input)."""
    return [list(column) for column in zip(*rows, strict=True)]


def writer_for(engine: AsyncEngine, *, sqlite_busy_timeout_s: float = 10.0) -> BatchWriter:
    """The batch writer for ``engine``'s database. Raises ``StorageError`` for a backend without one."""
    dialect = engine.dialect
    if dialect.name == "sqlite":
        path = engine.url.database
        if not path or path == ":memory:" or path.startswith("file:"):
            raise StorageError("SQLite storage needs a database file (sqlite:///path/to/file.db)")
        return SqliteWriter(path, busy_timeout_s=sqlite_busy_timeout_s)
    if dialect.name == "postgresql" and dialect.driver == "asyncpg":
        return PostgresWriter(engine)
    raise StorageError(f"unsupported storage backend {dialect.name}+{dialect.driver}: use SQLite or PostgreSQL")
