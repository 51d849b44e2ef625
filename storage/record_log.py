"""``SqlRecordLog``: the durable ``RecordLog`` (see ``coordinator.record_log``) on SQLAlchemy.

Write path (group commit)
    ``append(records, on_done)`` is called on the event loop thread; it only queues. One writer task takes
    *everything* queued and writes it in ONE transaction through the dialect's batch writer
    (``storage.writers``: the driver directly, not SQLAlchemy): log/history rows, the current-state snapshot
    (upserts/deletes), one ``log_batches`` row and the ``log_state`` counter.
    Then it calls every ``on_done`` of that batch, in append order, on the loop. The batching is adaptive: an idle
    writer starts a transaction on the next loop iteration (no linger); appends made while a transaction runs wait
    for the next one, so the batch size follows the load.

    Two streams share the writer: the coordinator's calls (group and offset records) and the data path's
    (``broker.records``: produced batches, topics). While coordinator calls are queued, a transaction takes
    produced batch bytes only up to ``max_batch_data_bytes`` (``storage.transaction_data_bytes``, 256 KiB; at least
    one data call), otherwise up to ``max_batch_data_bytes_alone`` (``storage.transaction_data_bytes_max``, 0: no
    cap); the data calls left over wait for the next transaction, and so do all data calls behind them, but the
    coordinator calls behind them are taken now. So an offset commit's own transaction carries a bounded amount of
    produced data instead of everything produced meanwhile (it still waits for the transaction in progress, whose
    size only ``max_batch_data_bytes_alone`` bounds; see docs/performance.md for what each costs). Each stream persists
    in call order (the contract of ``RecordLog`` and ``DataLog``); the two streams write different tables, so a
    commit may be written before a produce call made earlier. ``flush`` waits for the calls made before it by
    their sequence number, not by how many were answered.

Failure
    If the transaction fails (database unreachable, connection killed, lock timeout, disk full), every ``on_done``
    of that batch gets ``WriteFailure.UNAVAILABLE`` and the exception is logged, never raised:
    SQLAlchemy/driver exceptions stop here. One exception: when the database refuses the *data* (SQLSTATE 22/23,
    e.g. a NUL character in a string on PostgreSQL), retrying would fail again and would keep failing whoever
    shares the batch; then the calls of that batch are written one per transaction, and the call whose own
    records are refused gets ``WriteFailure.REFUSED`` (the core answers it as Kafka answers a record that can never
    be appended, UNKNOWN_SERVER_ERROR, see docs/semantics.md §3.3) so its client stops retrying. Storage reports
    what failed; the core maps it to the Kafka error once (``coordinator.writes``).

    Apart from that split, the records of a failed batch are NOT retried by storage. That is correct because the
    core answered the error already and applies offsets/assignments only on success, so no in-memory state ran
    ahead of the log; history records of a failed batch are lost (they are informational).
    The next batch simply tries again on a fresh connection (``pool_pre_ping`` drops dead ones), so the log
    recovers by itself when the database is back. If a commit's outcome is unknown (connection lost during COMMIT)
    the records may be durable although the caller got an error — the same ambiguity as a Kafka produce timeout;
    the client retries, and a repeated commit/metadata record is harmless on replay.

Write health (``/readyz``)
    Reaching the database is not enough: a full disk or read-only files let ``SELECT 1`` succeed while every write
    fails. ``write_health()`` says whether the last write transaction failed, since when, how many in a row and why;
    the next successful transaction clears it. ``check_writes()`` (the readiness probe) also clears it by itself: while
    writes are failing it runs a probe transaction (``log_state`` moved and moved back, which SQLite must append to
    its WAL, so a full disk fails it) at most once per ``probe_interval_s``; not after a ``PositionConflict`` (another
    process wrote here: only one of our own batches committing clears that). A batch refused for its *data* (see
    Failure) does not count: the database is fine, the request is not. Failed writes log one warning per cause,
    rate-limited (``runtime.logging_setup``' throttle), so an outage under load does not flood the log.

Positions
    Every record gets the next ``position`` (BIGINT). The writer keeps the last one in memory and moves the
    ``log_state`` row with a conditional UPDATE in each transaction; a mismatch (another process writing to the
    same database) fails the batch instead of interleaving two logs. After any failure the value is re-read.

Recovery
    ``load()`` reads only the current-state tables, so start-up does not grow with history. It returns the state
    records to replay: every live group's latest ``GroupMetadataRecord`` (in log order), then every committed
    offset as an ``OffsetCommitRecord``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from broker.partitions import PartitionSnapshot, StoredBatch, StoredTail
from broker.producers import BATCHES_TO_RETAIN, StoredProducerBatch
from broker.records import BatchAppended, LogStartAdvanced, ProducerIdsAllocated, TopicCreated, TopicDeleted
from coordinator.offsets import GroupOffsetRows, OffsetRow
from coordinator.record_log import OnDone, WriteFailure
from coordinator.records import MemberMetadata, OffsetCommitRecord, StateRecord
from security.credential_records import ScramCredentialSet
from security.credentials import ScramCredential

from . import models as m
from .batch_reader import BatchReader, reader_for
from .database import DEFAULT_DATA_DIR, create_engine, database_url, migrate
from .errors import StorageError, describe
from .lock import DatabaseLock, claim_sqlite_database
from .models import table
from .queries import StorageQueries, group_record_from_row, member_from_row
from .rows import AnyRecord
from .writers import BatchWriter, PositionConflict, writer_for

__all__ = ["PositionConflict", "SqlRecordLog", "WriteHealth", "WriterStats"]

log = logging.getLogger(__name__)

DEFAULT_HISTORY_RETENTION_MS = 30 * 24 * 3600 * 1000
DEFAULT_MAX_BATCH_RECORDS = 20_000
# Produced batch bytes a transaction takes (at least one data call): with coordinator calls in it, and in any case
# (0: no cap). See _take_batch.
DEFAULT_MAX_BATCH_DATA_BYTES = 256 * 1024
DEFAULT_MAX_BATCH_DATA_BYTES_ALONE = 0
_DATA_RECORDS = (BatchAppended, TopicCreated, TopicDeleted, LogStartAdvanced, ProducerIdsAllocated)
# One append() call: its records, its callback, its batch bytes (None: a coordinator call, not the data path) and
# its sequence number (the count of calls accepted before it).
_Call = tuple[Sequence[AnyRecord], OnDone | None, int | None, int]
BatchObserver = Callable[[int, float, bool], None]  # (records, seconds, ok) per write transaction


@dataclass(frozen=True, slots=True)
class WriteHealth:
    """Whether storage writes succeed. ``failing_since_ms`` is wall-clock epoch ms of the first failure in a row."""

    ok: bool
    failing_since_ms: int | None = None
    consecutive_failures: int = 0
    last_error: str | None = None

    def describe(self) -> str:
        if self.ok:
            return "storage writes succeed"
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((self.failing_since_ms or 0) / 1000))
        return (
            f"storage writes failing since {since} ({self.consecutive_failures} failed transactions in a row): "
            f"{self.last_error}"
        )


@dataclass
class WriterStats:
    transactions: int = 0  # committed write transactions
    failed_transactions: int = 0
    records: int = 0  # records committed
    appends: int = 0  # append() calls answered (success or failure)


class SqlRecordLog:
    """Durable ``RecordLog``. Create with ``await SqlRecordLog.open(url, data_dir=...)``; close with ``close()``."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
        max_batch_data_bytes: int = DEFAULT_MAX_BATCH_DATA_BYTES,
        max_batch_data_bytes_alone: int = DEFAULT_MAX_BATCH_DATA_BYTES_ALONE,
        owns_engine: bool = False,
        on_batch: BatchObserver | None = None,
        sqlite_busy_timeout_s: float = 10.0,
    ) -> None:
        """``on_batch(records, seconds, ok)`` is called after every write transaction (e.g. the metrics hook
        ``Metrics.observe_storage_write``). Raises ``StorageError`` for a backend without a batch writer."""
        self.engine = engine
        self._batch_writer: BatchWriter = writer_for(engine, sqlite_busy_timeout_s=sqlite_busy_timeout_s)
        self._batch_reader: BatchReader = reader_for(engine, sqlite_busy_timeout_s=sqlite_busy_timeout_s)
        self._tail_reads: set[asyncio.Task[None]] = set()  # read_tail in progress (kept from garbage collection)
        self.on_batch = on_batch
        self.max_batch_records = max_batch_records
        self.max_batch_data_bytes = max_batch_data_bytes
        self.max_batch_data_bytes_alone = max_batch_data_bytes_alone
        self.stats = WriterStats()
        self._owns_engine = owns_engine
        self._dialect = engine.dialect.name
        self._queue: list[_Call] = []
        self._inflight: list[_Call] = []
        self._wakeup = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False  # no more appends accepted
        self._stopping = False  # the writer exits once the queue is empty
        self._last_position: int | None = None  # None: unknown, read in the next transaction
        self._appended = 0  # append() calls accepted (the next call's sequence number)
        self._flush_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._health = WriteHealth(ok=True)
        self._last_probe = 0.0  # time.monotonic() of the last probe transaction
        self._conflict = False  # the last failure was a PositionConflict (see check_writes)
        self._lock: DatabaseLock | None = None  # an embedded SQLite database's (open(exclusive=True)); see close()
        self._sqlite_busy_timeout_s = sqlite_busy_timeout_s

    # ------------------------------------------------------------------------------------------------ life cycle

    @classmethod
    async def open(
        cls,
        url: str | None = None,
        *,
        data_dir: str | Path = DEFAULT_DATA_DIR,
        schema: str | None = None,
        run_migrations: bool = True,
        max_batch_records: int = DEFAULT_MAX_BATCH_RECORDS,
        max_batch_data_bytes: int = DEFAULT_MAX_BATCH_DATA_BYTES,
        max_batch_data_bytes_alone: int = DEFAULT_MAX_BATCH_DATA_BYTES_ALONE,
        on_batch: BatchObserver | None = None,
        exclusive: bool = False,
        **engine_options: Any,
    ) -> SqlRecordLog:
        """Create the engine (SQLite file under ``data_dir`` unless ``url``), migrate the schema, start the writer.

        ``exclusive`` (the daemon): an SQLite database must be writable by this process and is locked for it until
        ``close()`` (``storage.lock``), before anything opens it; a second ``open`` elsewhere then fails with
        ``DatabaseInUse`` naming the holder. Raises ``StorageError`` if the database cannot be claimed, reached or
        migrated."""
        target = database_url(url, data_dir)
        lock = _claim(target) if exclusive else None
        try:
            engine = create_engine(target, schema=schema, **engine_options)
        except Exception as e:
            if lock is not None:
                lock.release()
            raise StorageError(f"cannot set up the database engine: {describe(e)}") from e
        if run_migrations:
            # A migration may rewrite a big table: no statement timeout there (the writer's engine keeps one).
            migrator = create_engine(target, schema=schema, **{**engine_options, "command_timeout_s": None})
            try:
                await migrate(migrator)
            except Exception as e:
                await engine.dispose()
                if lock is not None:
                    lock.release()
                raise StorageError(f"cannot prepare the database schema: {describe(e)}") from e
            finally:
                await migrator.dispose()
        try:
            record_log = cls(
                engine,
                max_batch_records=max_batch_records,
                max_batch_data_bytes=max_batch_data_bytes,
                max_batch_data_bytes_alone=max_batch_data_bytes_alone,
                owns_engine=True,
                on_batch=on_batch,
                sqlite_busy_timeout_s=engine_options.get("sqlite_busy_timeout_s", 10.0),
            )
        except StorageError:
            await engine.dispose()
            if lock is not None:
                lock.release()
            raise
        record_log._lock = lock
        record_log.start()
        return record_log

    def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._run(), name="storage-writer")

    async def flush(self) -> None:
        """Wait until every append made before this call has been answered (written or failed)."""
        target = self._appended
        if self._oldest_pending() >= target:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flush_waiters.append((target, future))
        await future

    async def close(self) -> None:
        """Refuse new appends, write what is queued, stop the writer, dispose the engine if we created it."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        self._wakeup.set()
        if self._writer is not None:
            await self._writer
        await self._batch_writer.close()
        await self._batch_reader.close()
        if self._owns_engine:
            await self.engine.dispose()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # ------------------------------------------------------------------------------------------------ write path

    def append(self, records: Sequence[AnyRecord], on_done: OnDone | None = None) -> None:
        if self._closed:
            if on_done is not None:
                on_done(WriteFailure.UNAVAILABLE)
            return
        data: int | None = None
        if records and isinstance(records[0], _DATA_RECORDS):  # a call holds data records or coordinator records
            data = sum(len(r.data) for r in records if isinstance(r, BatchAppended))
        self._queue.append((records, on_done, data, self._appended))
        self._appended += 1
        if self._writer is None:
            self.start()
        self._wakeup.set()

    async def _run(self) -> None:
        try:
            while True:
                if not self._queue:
                    if self._stopping:
                        return
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                self._inflight = self._take_batch()
                error, bad_data = await self._write([r for records, *_ in self._inflight for r in records])
                if bad_data and len(self._inflight) > 1:
                    await self._isolate()
                    continue
                calls, self._inflight = self._inflight, []
                if bad_data:
                    error = WriteFailure.REFUSED
                self._complete(calls, error)
        finally:
            # Reached on shutdown (queue empty) or cancellation: nobody may wait forever.
            calls, self._inflight, self._queue = self._inflight + self._queue, [], []
            self._complete(calls, WriteFailure.UNAVAILABLE)

    def _take_batch(self) -> list[_Call]:
        """The calls of the next transaction: queued calls in order up to ``max_batch_records`` records, and of the
        data path's calls only as many as fit in the byte cap (at least one): ``max_batch_data_bytes`` when a
        coordinator call is queued, else ``max_batch_data_bytes_alone`` (0: none). Once a data call is left for a
        later transaction every later data call is too (the data calls keep their order), but the coordinator's
        calls behind them are still taken: a commit's own transaction carries little produced data. Each stream's
        calls persist in call order; the two streams touch different tables, so their relative order does not
        matter."""
        cap = self.max_batch_data_bytes_alone
        if self.max_batch_data_bytes and any(call[2] is None for call in self._queue):
            cap = min(cap, self.max_batch_data_bytes) if cap else self.max_batch_data_bytes
        count = data = 0
        taken: list[_Call] = []
        left: list[_Call] = []
        data_closed = False
        for i, call in enumerate(self._queue):
            records, _, size, _ = call
            if taken and count + len(records) > self.max_batch_records:
                left.extend(self._queue[i:])
                break
            if size is not None and cap:
                if data_closed or (data and data + size > cap):
                    data_closed = True
                    left.append(call)
                    continue
                data += size
            taken.append(call)
            count += len(records)
        self._queue = left
        return taken

    def _complete(self, calls: Iterable[_Call], error: WriteFailure | None) -> None:
        for _records, on_done, _size, _seq in calls:
            self.stats.appends += 1
            if on_done is None:
                continue
            try:
                on_done(error)
            except Exception:  # a caller's bug must not stop the writer for everybody else
                log.exception("storage: on_done callback raised")
        if self._flush_waiters:
            oldest = self._oldest_pending()
            waiting = []
            for target, future in self._flush_waiters:
                if oldest >= target:
                    if not future.done():
                        future.set_result(None)
                else:
                    waiting.append((target, future))
            self._flush_waiters = waiting

    def _oldest_pending(self) -> int:
        """The sequence number of the oldest call not answered yet (the next one's when all are): coordinator calls
        may be answered before data calls appended earlier, so a count of answered calls would not say it."""
        return min((call[3] for call in chain(self._inflight, self._queue)), default=self._appended)

    async def _isolate(self) -> None:
        """The batch failed on data the database refuses (not on the database being away): write its calls one
        by one, so that one bad request does not fail the requests that happened to share its transaction."""
        while self._inflight:
            call = self._inflight[0]
            error, bad_data = await self._write(list(call[0]))
            del self._inflight[0]
            self._complete([call], WriteFailure.REFUSED if bad_data else error)

    async def _write(self, records: list[AnyRecord]) -> tuple[WriteFailure | None, bool]:
        """One transaction. Returns (error, whether the failure is caused by the data rather than the database)."""
        started = time.perf_counter()
        try:
            batch = await self._batch_writer.write(records, self._last_position)
        except Exception as e:
            self._last_position = None
            self.stats.failed_transactions += 1
            self._observe(len(records), time.perf_counter() - started, False)
            bad_data = _is_data_error(e)
            if not bad_data:
                self._write_failed(e)
            log.warning(
                "storage: write of %d records failed%s: %s",
                len(records),
                " (refused data)" if bad_data else "",
                describe(e),
                extra={"throttle": ("storage-write", type(e).__name__, bad_data)},
            )
            return WriteFailure.UNAVAILABLE, bad_data
        self._write_succeeded()
        self._last_position = batch.last_position
        self.stats.transactions += 1
        self.stats.records += batch.record_count
        self._observe(batch.record_count, time.perf_counter() - started, True)
        return None, False

    # ------------------------------------------------------------------------------------------------ health

    def write_health(self) -> WriteHealth:
        return self._health

    async def check_writes(self, *, probe_interval_s: float = 1.0) -> WriteHealth:
        """The write health; while writes are failing, first a probe transaction (at most one per
        ``probe_interval_s``, so a busy ``/readyz`` does not hammer a sick database), which clears the failure when
        it commits. Never raises.

        Not after a ``PositionConflict``: another process wrote to this database, which a probe cannot see (it
        succeeds); that stays reported until one of our own batches commits on the re-read position."""
        if self._health.ok or self._closed or self._conflict:
            return self._health
        now = time.monotonic()
        if now - self._last_probe < probe_interval_s:
            return self._health
        self._last_probe = now
        try:
            await self._batch_writer.probe()
        except Exception as e:
            self._write_failed(e)
            log.warning("storage: probe write failed: %s", describe(e), extra={"throttle": ("storage-probe",)})
        else:
            log.info("storage: probe write succeeded; writes work again")
            self._write_succeeded()
        return self._health

    def _write_failed(self, e: BaseException) -> None:
        self._conflict = isinstance(e, PositionConflict)
        h = self._health
        self._health = WriteHealth(
            ok=False,
            failing_since_ms=h.failing_since_ms if h.failing_since_ms is not None else int(time.time() * 1000),
            consecutive_failures=h.consecutive_failures + 1,
            last_error=_describe_write_error(e),
        )

    def _write_succeeded(self) -> None:
        if not self._health.ok:
            self._health = WriteHealth(ok=True)
            self._conflict = False

    def _observe(self, records: int, seconds: float, ok: bool) -> None:
        if self.on_batch is not None:
            try:
                self.on_batch(records, seconds, ok)
            except Exception:
                log.exception("storage: on_batch observer raised")

    # ------------------------------------------------------------------------------------------------ recovery

    async def load(self) -> list[StateRecord]:
        """The state records to replay, from the current-state snapshot: groups (log order), then offsets."""
        try:
            async with self.engine.connect() as conn:
                if self._dialect == "postgresql":  # one snapshot for the three reads, even if someone writes
                    await conn.execution_options(isolation_level="REPEATABLE READ")
                groups = await _load_groups(conn)  # begins the transaction the offsets are read in
                rows = await _offset_rows(conn)
        except Exception as e:
            raise StorageError(f"cannot load the coordinator state: {describe(e)}") from e
        return [*groups, *(OffsetCommitRecord(*row) for row in rows)]

    async def load_state(self) -> tuple[list[StateRecord], list[GroupOffsetRows]]:
        """``load`` without a record object per committed offset (the start-up of a database with 1,000,000
        offsets; ``GroupCoordinator.load_offsets`` replays them): the group records (log order), and the current
        offsets per group (``GroupOffsetRows``: groups in id order, each group's rows in (topic, partition) order, the
        member id and generation of the commits left out: the state does not keep them). Read in one snapshot by
        the driver, a row a plain tuple: SQLite with its own ``sqlite3`` connection on a thread (no aiosqlite
        hop, no SQLAlchemy row), PostgreSQL with the engine's asyncpg connection."""
        try:
            if self._dialect == "sqlite":
                path = self.engine.url.database
                assert path is not None  # writer_for refused an SQLite engine without a file
                return await asyncio.to_thread(_sqlite_state, path, self._sqlite_busy_timeout_s)
            async with self.engine.connect() as conn:
                await conn.execution_options(isolation_level="REPEATABLE READ")  # one snapshot for the three reads
                groups = await _load_groups(conn)  # begins the transaction the offsets are read in
                driver: Any = (await conn.get_raw_connection()).driver_connection
                counts = await driver.fetch(_OFFSET_COUNTS_SQL)
                return groups, _per_group(counts, await driver.fetch(_GROUP_OFFSET_ROWS_SQL))
        except Exception as e:
            raise StorageError(f"cannot load the coordinator state: {describe(e)}") from e

    async def last_position(self) -> int:
        """The last position handed out (0 for a new database). The start-up rendering of ``__consumer_offsets``
        ends its partitions there, so that their offsets only grow across restarts (``broker.offsets_topic``)."""
        try:
            async with self.engine.connect() as conn:
                found = (await conn.execute(select(m.LogState.last_position).where(m.LogState.id == 1))).scalar()
        except Exception as e:
            raise StorageError(f"cannot read the log position: {describe(e)}") from e
        return int(found or 0)

    async def load_data(self, *, producers_since_ms: int = 0) -> tuple[list[TopicCreated], list[PartitionSnapshot]]:
        """The data path's stored state: every topic (partitions, configs) and every partition's offsets, epoch and
        batch index (no batch bytes: Fetch reads those with ``read_batches``), and the last batches of each
        idempotent producer that appended since ``producers_since_ms`` (the others have expired)."""
        try:
            async with self.engine.connect() as conn:
                if self._dialect == "postgresql":
                    await conn.execution_options(isolation_level="REPEATABLE READ")
                return await _load_data(conn, producers_since_ms)
        except Exception as e:
            raise StorageError(f"cannot load the topics and partitions: {describe(e)}") from e

    async def load_producer_ids(self) -> int:
        """Where the stored blocks of producer ids end (0 when none was handed out): the next block starts there."""
        try:
            async with self.engine.connect() as conn:
                blocks = table(m.ProducerIdBlock)
                end = (await conn.execute(select(func.max(blocks.c.first_id + blocks.c.block_size)))).scalar()
                return int(end) if end is not None else 0
        except Exception as e:
            raise StorageError(f"cannot load the producer id blocks: {describe(e)}") from e

    async def load_credentials(self) -> list[ScramCredentialSet]:
        """Every stored SCRAM credential (``scram_credentials``), as the records that set them, for
        ``security.users.UserStore.load``."""
        try:
            async with self.engine.connect() as conn:
                t = table(m.ScramCredentialRow)
                rows = (await conn.execute(select(t).order_by(t.c.user_name, t.c.mechanism))).all()
        except Exception as e:
            raise StorageError(f"cannot load the SCRAM credentials: {describe(e)}") from e
        return [
            ScramCredentialSet(
                r.user_name,
                ScramCredential(r.mechanism, bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), r.iterations),
                r.updated_ms,
            )
            for r in rows
        ]

    async def prune_producers(self, older_than_ms: int) -> int:
        """Delete the ``partition_producers`` rows of producers whose last append is older than ``older_than_ms``
        (expired: the start-up load skips them anyway), so that table does not grow with every producer ever seen.
        One short transaction; a producer appending meanwhile moves its row past the cut and keeps it."""
        try:
            async with self.engine.begin() as conn:
                pp = table(m.PartitionProducer)
                result = await conn.execute(delete(pp).where(pp.c.last_appended_ms < older_than_ms))
                return max(result.rowcount, 0)
        except Exception as e:
            raise StorageError(f"cannot prune expired producers: {describe(e)}") from e

    def read_tail(
        self, topic: str, partition: int, from_offset: int, on_done: Callable[[StoredTail | None], None]
    ) -> None:
        """``on_done`` with the partition's stored next offset and the index entries of its batches from
        ``from_offset`` on (``broker.partitions.Broker._resync``, after a write reported failed), or with None if the
        database cannot be read now."""
        task = asyncio.get_running_loop().create_task(self._read_tail(topic, partition, from_offset, on_done))
        self._tail_reads.add(task)
        task.add_done_callback(self._tail_reads.discard)

    async def _read_tail(
        self, topic: str, partition: int, from_offset: int, on_done: Callable[[StoredTail | None], None]
    ) -> None:
        p, b = table(m.PartitionRow), table(m.PartitionBatch)
        try:
            async with self.engine.connect() as conn:
                where = (p.c.topic == topic) & (p.c.partition_index == partition)
                next_offset = (await conn.execute(select(p.c.next_offset).where(where))).scalar()
                rows = await conn.execute(
                    select(
                        b.c.base_offset, b.c.last_offset, b.c.max_timestamp_ms, b.c.size_bytes, b.c.appended_ms,
                        b.c.producer_id, b.c.producer_epoch, b.c.base_sequence,
                    )
                    .where(b.c.topic == topic, b.c.partition_index == partition, b.c.base_offset >= from_offset)
                    .order_by(b.c.base_offset)
                )  # fmt: skip
                batches = [StoredBatch(*row) for row in rows]
        except Exception as e:
            log.warning("storage: cannot read the end of %s-%d: %s", topic, partition, describe(e))
            on_done(None)
            return
        on_done(StoredTail(int(next_offset) if next_offset is not None else from_offset, batches))

    async def read_batches(self, topic: str, partition: int, first_base: int, last_base: int) -> list[bytes]:
        """The stored batches of a partition whose base offsets lie in ``[first_base, last_base]``, in order."""
        return await self._batch_reader.read(topic, partition, first_base, last_base)

    # ------------------------------------------------------------------------------------------------ retention

    async def prune_history(self, older_than_ms: int, *, positions_per_step: int = 5_000) -> int:
        """Delete log and history rows of batches whose newest record is older than ``older_than_ms`` (epoch ms).

        Works in small position ranges, one short transaction each, yielding to the loop between them, so the
        writer is never blocked for long. The current-state tables are never pruned. Returns rows deleted."""
        try:
            return await self._prune(older_than_ms, positions_per_step)
        except Exception as e:
            raise StorageError(f"history pruning failed: {describe(e)}") from e

    async def run_history_pruning(
        self,
        retention_ms: int = DEFAULT_HISTORY_RETENTION_MS,
        interval_s: float = 3600.0,
        *,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        """Prune history older than ``retention_ms`` now and then every ``interval_s``, until cancelled. A failed
        pass (database away) is logged and retried at the next interval. Run it as a task; cancel it on shutdown."""
        clock = now_ms if now_ms is not None else (lambda: int(time.time() * 1000))
        while True:
            try:
                deleted = await self.prune_history(clock() - retention_ms)
                if deleted:
                    log.info("storage: pruned %d history rows older than %d ms", deleted, retention_ms)
            except StorageError as e:
                log.warning("storage: %s", e)
            await asyncio.sleep(interval_s)

    async def _prune(self, older_than_ms: int, step: int) -> int:
        async with self.engine.connect() as conn:
            young = (
                await conn.execute(
                    select(func.min(m.LogBatch.first_position)).where(m.LogBatch.timestamp_ms >= older_than_ms)
                )
            ).scalar()
            oldest = (await conn.execute(select(func.min(m.LogBatch.first_position)))).scalar()
            if young is None:
                young = (await conn.execute(select(m.LogState.last_position).where(m.LogState.id == 1))).scalar_one()
                young += 1
        if oldest is None:
            return 0
        deleted = 0
        lo = int(oldest)
        end = int(young)  # exclusive: the first position that must stay
        while lo < end:
            hi = min(lo + step, end)
            async with self.engine.begin() as conn:
                for model in m.HISTORY_TABLES:
                    pos = table(model).c.position
                    result = await conn.execute(delete(model).where(pos >= lo, pos < hi))
                    deleted += max(result.rowcount, 0)
                await conn.execute(delete(m.LogBatch).where(m.LogBatch.last_position < hi))
            lo = hi
            await asyncio.sleep(0)
        return deleted

    # ------------------------------------------------------------------------------------------------ reads

    @property
    def queries(self) -> StorageQueries:
        return StorageQueries(self.engine)


async def _load_groups(conn: AsyncConnection) -> list[StateRecord]:
    members: dict[str, list[MemberMetadata]] = {}
    gm = table(m.CurrentGroupMember)
    for row in await conn.execute(select(gm).order_by(gm.c.group_id, gm.c.member_index)):
        members.setdefault(row.group_id, []).append(member_from_row(row))
    out: list[StateRecord] = []
    g = table(m.CurrentGroup)
    for row in await conn.execute(select(g).order_by(g.c.position)):
        out.append(group_record_from_row(row, members.get(row.group_id, ())))
    return out


def _sqlite_state(path: str, busy_timeout_s: float) -> tuple[list[StateRecord], list[GroupOffsetRows]]:
    """``load_state`` on SQLite (on a thread): a connection of its own, one read transaction for every read."""
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only=ON")
        conn.execute("BEGIN")
        members: dict[str, list[MemberMetadata]] = {}
        for row in _named(conn.execute(_MEMBERS_SQL)):
            members.setdefault(row.group_id, []).append(member_from_row(row))
        groups: list[StateRecord] = [
            group_record_from_row(row, members.get(row.group_id, ())) for row in _named(conn.execute(_GROUPS_SQL))
        ]
        counts = conn.execute(_OFFSET_COUNTS_SQL).fetchall()
        rows = conn.execute(_GROUP_OFFSET_ROWS_SQL).fetchall()
        conn.execute("COMMIT")
    finally:
        conn.close()
    return groups, _per_group(counts, rows)


def _named(cursor: sqlite3.Cursor) -> Iterator[Any]:
    """The cursor's rows with their columns as attributes (what ``group_record_from_row`` reads)."""
    row_type = namedtuple("row_type", [column[0] for column in cursor.description], rename=True)  # type: ignore[misc]
    return map(row_type._make, cursor)


def _per_group(counts: Sequence[Any], rows: Sequence[OffsetRow]) -> list[GroupOffsetRows]:
    """``rows`` (every offset, in group order) cut into each group's, by the (group id, row count) pairs."""
    out: list[GroupOffsetRows] = []
    start = 0
    for group_id, count in counts:
        out.append((group_id, rows[start : start + count]))
        start += count
    if start != len(rows):
        raise StorageError(f"the offsets read do not match their count per group ({len(rows)} rows, {start} counted)")
    return out


_MEMBERS_SQL = "SELECT * FROM current_group_members ORDER BY group_id, member_index"
_GROUPS_SQL = "SELECT * FROM current_groups ORDER BY position"
# The current offsets per group, read with the group id once (in the same order as the rows: the primary key's).
_OFFSET_COUNTS_SQL = "SELECT group_id, count(*) FROM current_offsets GROUP BY group_id ORDER BY group_id"
_GROUP_OFFSET_ROWS_SQL = (
    "SELECT topic, partition_index, committed_offset, leader_epoch, commit_metadata, commit_timestamp_ms, "
    "expire_timestamp_ms FROM current_offsets ORDER BY group_id, topic, partition_index"
)
_OFFSET_ROWS_SQL = (
    "SELECT group_id, topic, partition_index, committed_offset, leader_epoch, commit_metadata, commit_timestamp_ms, "
    "expire_timestamp_ms, member_id, generation_id FROM current_offsets ORDER BY group_id, topic, partition_index"
)


async def _offset_rows(conn: AsyncConnection) -> Sequence[tuple[Any, ...]]:
    """Every current offset with ``OffsetCommitRecord``'s fields (``load``), fetched by the driver in one call:
    SQLAlchemy's result rows cost several microseconds each. asyncpg's records unpack like the tuples."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    if conn.dialect.name == "postgresql":
        rows: Sequence[tuple[Any, ...]] = await driver.fetch(_OFFSET_ROWS_SQL)  # inside the transaction begun above
        return rows
    cursor = await driver.execute(_OFFSET_ROWS_SQL)
    try:
        rows = await cursor.fetchall()
    finally:
        await cursor.close()
    return rows


_BATCH_COLUMNS = "producer_id, producer_epoch, base_sequence, base_offset, last_offset, max_timestamp_ms, appended_ms"
# Per producer, an index range of partition_batches (the partial index, its condition written as a literal so SQLite
# can use it). The join order is forced: SQLite's CROSS JOIN keeps the producers outside; PostgreSQL's LATERAL with a
# LIMIT (each producer keeps at most 5 batches from ``retained_from``) is never flattened into a hash join over the
# whole index. Either way the work grows with the producers, not with the log.
_LOAD_PRODUCERS_SQL = {
    "sqlite": (
        "SELECT pp.topic, pp.partition_index, "
        + ", ".join(f"b.{c}" for c in _BATCH_COLUMNS.split(", "))
        + " FROM partition_producers AS pp CROSS JOIN partition_batches AS b"
        " WHERE pp.last_appended_ms >= :since AND b.topic = pp.topic AND b.partition_index = pp.partition_index"
        " AND b.producer_id = pp.producer_id AND b.base_offset >= pp.retained_from AND b.producer_id >= 0"
    ),
    "postgresql": (
        "SELECT pp.topic, pp.partition_index, b.* FROM partition_producers AS pp CROSS JOIN LATERAL ("
        f"SELECT {_BATCH_COLUMNS} FROM partition_batches AS pb"
        " WHERE pb.topic = pp.topic AND pb.partition_index = pp.partition_index AND pb.producer_id = pp.producer_id"
        " AND pb.base_offset >= pp.retained_from AND pb.producer_id >= 0"
        f" ORDER BY pb.base_offset LIMIT {BATCHES_TO_RETAIN}) AS b"
        " WHERE pp.last_appended_ms >= :since"
    ),
}


async def _load_producers(conn: AsyncConnection, since_ms: int) -> dict[tuple[str, int], list[StoredProducerBatch]]:
    """Per partition, the batches each idempotent producer that appended since ``since_ms`` keeps in its state (at
    most ``BATCHES_TO_RETAIN``): ``partition_producers`` says from which offset, and they are read from the partial
    index over the idempotent batches (``models.PartitionBatch``), one index range per producer, never from batch
    rows (``_LOAD_PRODUCERS_SQL``)."""
    query = text(_LOAD_PRODUCERS_SQL[conn.dialect.name]).bindparams(since=since_ms)
    out: dict[tuple[str, int], list[StoredProducerBatch]] = {}
    for topic, partition, *rest in await conn.execute(query):
        out.setdefault((topic, partition), []).append(StoredProducerBatch(*rest))
    return out


async def _load_data(
    conn: AsyncConnection, producers_since_ms: int = 0
) -> tuple[list[TopicCreated], list[PartitionSnapshot]]:
    t = table(m.TopicRow)
    topics = [
        TopicCreated(row.name, row.partitions, tuple(sorted(json.loads(row.configs).items())), row.updated_ms)
        for row in await conn.execute(select(t).order_by(t.c.position))
    ]
    b = table(m.PartitionBatch)
    index: dict[tuple[str, int], list[tuple[int, int, int, int, int]]] = {}
    rows = await conn.execute(
        select(
            b.c.topic, b.c.partition_index, b.c.base_offset, b.c.last_offset, b.c.max_timestamp_ms, b.c.size_bytes,
            b.c.appended_ms,
        ).order_by(b.c.topic, b.c.partition_index, b.c.base_offset)
    )  # fmt: skip
    for topic, partition, base, last, max_ts, size, appended in rows:
        index.setdefault((topic, partition), []).append((base, last, max_ts, size, appended))
    producers = await _load_producers(conn, producers_since_ms)
    p = table(m.PartitionRow)
    partitions = [
        PartitionSnapshot(
            row.topic,
            row.partition_index,
            row.epoch,
            row.log_start_offset,
            row.next_offset,
            index.get((row.topic, row.partition_index), []),
            producers.get((row.topic, row.partition_index), []),
        )
        for row in await conn.execute(select(p).order_by(p.c.topic, p.c.partition_index))
    ]
    return topics, partitions


def _claim(url: str) -> DatabaseLock | None:
    """The lock of an SQLite database file (after checking it is writable); None for a server database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    if parsed.database.startswith("file:"):
        return None  # a URI filename: writer_for refuses it with its own message
    return claim_sqlite_database(parsed.database)


def _describe_write_error(e: BaseException) -> str:
    """The driver's own words ("database or disk is full", "attempt to write a readonly database"), without the
    SQLAlchemy wrapping, for the readiness answer."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:300]


def _is_data_error(e: BaseException) -> bool:
    """A failure that writing the same records again would repeat (as opposed to the database being unavailable):
    a value the driver or database refuses (SQLSTATE class 22 data exception / 23 integrity violation, e.g. a NUL
    character in a PostgreSQL text column), or one Python cannot convert."""
    if isinstance(e, OverflowError | ValueError | TypeError | UnicodeError):
        return True
    if isinstance(e, sa_exc.DataError | sa_exc.IntegrityError):
        return True
    if isinstance(e, sqlite3.IntegrityError | sqlite3.DataError | sqlite3.InterfaceError | sqlite3.ProgrammingError):
        return True  # sqlite3 (the batch writer): a constraint, or a value it cannot bind
    state = getattr(e, "sqlstate", None)  # asyncpg's own exceptions (the batch writer)
    if isinstance(state, str):
        return state[:2] in ("22", "23")
    if isinstance(e, sa_exc.DBAPIError):
        state = getattr(e.orig, "sqlstate", None) or getattr(e.orig, "pgcode", None)
        return isinstance(state, str) and state[:2] in ("22", "23")
    return isinstance(e, sa_exc.StatementError)  # parameter processing failed before reaching the database
