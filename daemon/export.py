"""``kgc export``: an incremental Parquet export of the daemon's database for analytics (the Spark report reads it).

    kgc export --out DIR [--storage-url URL | --data-dir DIR] [--schema NAME] [--chunk-rows N]

Layout of ``DIR`` (what ``spark_jobs.extract.read_parquet`` reads): one sub-directory per table, named like the table,
with the database's column names.

* **Log and history tables** (``storage.models.HISTORY_TABLES``: every table the Spark job reads, plus
  ``join_phase_members``; and ``partition_batches`` without its ``data``: offsets and append times, not the message
  bytes) are append-only and carry the log ``position``. Each run exports the rows with
  ``last < position <= high`` into one new file ``<table>/part-<last+1>-<high>.parquet`` (20-digit positions), where
  ``last`` is what the previous run exported and ``high`` the database's ``log_state.last_position`` read at the
  start of this run. Rows the daemon's retention later prunes stay in the export (it is the long-term archive).
* **Current-state tables** (``current_groups``, ``current_group_members``, ``current_offsets``) are snapshots that
  rows are updated in and deleted from, so each run exports them whole, replacing the previous copy
  (``<table>/snapshot-<high>.parquet``).
* ``_export_state.json`` records the last exported position per table (and the database it came from); it is
  replaced atomically after every file of a run is in place. A run that died half-way leaves files beyond the recorded
  position, which the next run deletes before it exports the same range again, so rows are never duplicated.
  Files being written are named ``.*.tmp`` (hidden from Spark and Hadoop readers).
* ``log_state`` / ``log_batches`` (the writer's bookkeeping) are not exported.

The export never writes to the database: SQLite is opened read-only (``mode=ro``; in WAL mode this reads alongside
the running daemon), PostgreSQL sessions are ``default_transaction_read_only``; no migrations run. Everything is read
in one transaction (SQLite: ``BEGIN`` then a WAL read snapshot; PostgreSQL: ``REPEATABLE READ``), so the tables and
the high-water mark agree. Rows are streamed in chunks of ``--chunk-rows`` (one Parquet row group each), so memory
does not grow with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sqlalchemy import JSON, BigInteger, Boolean, Column, Integer, LargeBinary, MetaData, String, Table, event, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from storage import models as m
from storage.database import DEFAULT_DATA_DIR, SQLITE_FILE_NAME, database_url

STATE_FILE = "_export_state.json"
STATE_VERSION = 1
DEFAULT_CHUNK_ROWS = 50_000
SNAPSHOT_MODELS: tuple[type[m.Base], ...] = (m.CurrentGroup, m.CurrentGroupMember, m.CurrentOffset)


def _without(table: Table, *dropped: str) -> Table:
    """``table`` as seen without some of its columns (a statement on it selects only the others)."""
    kept = [Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable) for c in table.columns
            if c.name not in dropped]  # fmt: skip
    return Table(table.name, MetaData(), *kept)


# The data path's batches without their bytes: when each partition's log end moved (the Spark lag report).
BATCH_INDEX = _without(m.table(m.PartitionBatch), "data")
# admin_actions: the audit trail (not pruned with the history), for the report's "who reset these offsets".
APPEND_TABLES: tuple[Table, ...] = (
    *(m.table(model) for model in m.HISTORY_TABLES),
    BATCH_INDEX,
    m.table(m.AdminActionRow),
)
SNAPSHOT_TABLES: tuple[Table, ...] = tuple(m.table(model) for model in SNAPSHOT_MODELS)
if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

_PART = re.compile(r"^part-(\d{20})-(\d{20})\.parquet$")


class ExportError(Exception):
    pass


@dataclass
class ExportResult:
    high_position: int  # log_state.last_position this run exported up to
    previous: dict[str, int]  # table -> last exported position before this run (appended tables)
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows written by this run
    files: list[Path] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ schema


def arrow_type(column: Any) -> pa.DataType:
    import pyarrow as pa  # imported when exporting only: `kgc serve` does not load pyarrow

    t = column.type
    if isinstance(t, BigInteger):
        return pa.int64()
    if isinstance(t, Integer):
        return pa.int32()
    if isinstance(t, Boolean):
        return pa.bool_()
    if isinstance(t, LargeBinary):
        return pa.binary()
    if isinstance(t, JSON):
        return pa.string()  # JSON text
    if isinstance(t, String):
        return pa.string()
    raise TypeError(f"{column.table.name}.{column.name}: no Parquet mapping for {t!r}")


def arrow_schema(table: Table) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(c.name, arrow_type(c), nullable=bool(c.nullable)) for c in table.columns])


def _batch(table: Table, schema: pa.Schema, rows: Sequence[Any]) -> pa.RecordBatch:
    import pyarrow as pa

    columns: list[list[Any]] = [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in schema]
    for i, column in enumerate(table.columns):
        if isinstance(column.type, JSON):
            columns[i] = [None if v is None else json.dumps(v) for v in columns[i]]
    arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ------------------------------------------------------------------------------------------------ source


def source_url(storage_url: str | None, data_dir: str | Path | None) -> str:
    """The database to read: ``storage_url`` (the daemon's spelling) or ``<data_dir>/coordinator.db``, which must
    exist (the export never creates a database)."""
    if storage_url:
        if storage_url == "memory":
            raise ExportError("the daemon runs without storage ('memory'): nothing to export")
        url = database_url(storage_url)
        parsed = make_url(url)
        if parsed.get_backend_name() != "sqlite":
            return url
        path = Path(parsed.database or "")
        if not parsed.database or parsed.database == ":memory:":
            raise ExportError("an in-memory SQLite database cannot be exported")
    else:
        path = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR) / SQLITE_FILE_NAME
    if not path.is_file():
        raise ExportError(f"no database file at {path}")
    return f"sqlite+aiosqlite:///{path.resolve()}"


def open_readonly(url: str, schema: str | None = None) -> AsyncEngine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        import aiosqlite

        # Read-only (mode=ro): never creates, migrates or writes the database. A URI, percent-encoded by hand (a
        # SQLAlchemy URL would decode it again and break paths with spaces, '#' or '?').
        uri = f"file:{quote(str(Path(parsed.database or '').resolve()))}?mode=ro"

        async def connect() -> Any:
            return await aiosqlite.connect(uri, uri=True, timeout=30)

        engine = create_async_engine("sqlite+aiosqlite://", async_creator=connect)

        @event.listens_for(engine.sync_engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # let the "begin" hook below start the transaction

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN")  # one read snapshot for the whole run (WAL)

        return engine
    if parsed.get_backend_name() == "postgresql":
        settings = {"application_name": "kgc-export", "default_transaction_read_only": "on"}
        if schema:
            settings["search_path"] = schema
        connect_args = {"server_settings": settings} if parsed.get_driver_name() == "asyncpg" else {}
        return create_async_engine(url, connect_args=connect_args, isolation_level="REPEATABLE READ")
    raise ExportError(f"unsupported database: {parsed.get_backend_name()}")


# ------------------------------------------------------------------------------------------------ state


def read_state(out: Path) -> dict[str, int]:
    path = out / STATE_FILE
    if not path.exists():
        return {}
    state = json.loads(path.read_text())
    if state.get("version") != STATE_VERSION:
        raise ExportError(f"{path}: unknown state version {state.get('version')!r}")
    return {str(k): int(v) for k, v in state["last_position"].items()}


def write_state(out: Path, last: dict[str, int], source: str) -> None:
    body = {"version": STATE_VERSION, "source": source, "last_position": dict(sorted(last.items()))}
    tmp = out / f".{STATE_FILE}.tmp"
    with open(tmp, "w") as f:
        json.dump(body, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out / STATE_FILE)


def _discard_unrecorded(directory: Path, last: int) -> None:
    """Delete what an interrupted run left: temporary files and parts beyond the recorded position."""
    if not directory.is_dir():
        return
    for p in directory.iterdir():
        match = _PART.match(p.name)
        if p.name.endswith(".tmp") or (match is not None and int(match.group(1)) > last):
            p.unlink()


# ------------------------------------------------------------------------------------------------ export


async def _write_stream(conn: AsyncConnection, stmt: Any, table: Table, target: Path, chunk_rows: int) -> int:
    """Stream ``stmt`` into ``target`` (via a hidden temporary file); no file when there are no rows."""
    import pyarrow.parquet as pq

    schema = arrow_schema(table)
    tmp = target.with_name(f".{target.name}.tmp")
    written = 0
    writer: pq.ParquetWriter | None = None
    try:
        result = await conn.stream(stmt.execution_options(yield_per=chunk_rows))
        async for rows in result.partitions(chunk_rows):
            if writer is None:
                writer = pq.ParquetWriter(tmp, schema, compression="zstd")
            writer.write_batch(_batch(table, schema, rows))
            written += len(rows)
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        os.replace(tmp, target)
    return written


def _order(table: Table) -> list[Any]:
    return list(table.primary_key.columns)


def export(
    url: str, out: str | Path, *, schema: str | None = None, chunk_rows: int = DEFAULT_CHUNK_ROWS
) -> ExportResult:
    """Export ``url`` (an async SQLAlchemy URL, e.g. from ``source_url``) into ``out``; see the module docstring.
    Synchronous (it runs its own event loop): a batch job, not something for the daemon's loop."""
    import asyncio

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    last = read_state(root)
    for table in APPEND_TABLES:
        _discard_unrecorded(root / table.name, last.get(table.name, 0))
        (root / table.name).mkdir(exist_ok=True)
    for table in SNAPSHOT_TABLES:
        _discard_unrecorded(root / table.name, 0)
        (root / table.name).mkdir(exist_ok=True)
    result = asyncio.run(_export(url, root, last, schema, chunk_rows))
    for table in SNAPSHOT_TABLES:  # the new snapshot is in place: drop the previous one
        for p in (root / table.name).iterdir():
            if p.name != f"snapshot-{result.high_position:020d}.parquet":
                p.unlink()
    write_state(root, {t.name: max(result.high_position, last.get(t.name, 0)) for t in APPEND_TABLES}, _describe(url))
    return result


async def _export(url: str, root: Path, last: dict[str, int], schema: str | None, chunk_rows: int) -> ExportResult:
    import pyarrow.parquet as pq

    engine = open_readonly(url, schema)
    try:
        async with engine.connect() as conn, conn.begin():
            high = (await conn.execute(select(m.table(m.LogState).c.last_position))).scalar()
            high = int(high) if high is not None else 0
            behind = {t: p for t, p in last.items() if p > high}
            if behind:
                raise ExportError(
                    f"the database's last position {high} is behind the export's ({behind}): a different or restored "
                    f"database? Export into a new directory."
                )
            result = ExportResult(high, {t.name: last.get(t.name, 0) for t in APPEND_TABLES})
            for table in APPEND_TABLES:
                lo = last.get(table.name, 0)
                result.rows[table.name] = 0
                if high <= lo:
                    continue
                target = root / table.name / f"part-{lo + 1:020d}-{high:020d}.parquet"
                pos = table.c.position
                stmt = select(table).where(pos > lo, pos <= high).order_by(*_order(table))
                result.rows[table.name] = await _write_stream(conn, stmt, table, target, chunk_rows)
                if result.rows[table.name]:
                    result.files.append(target)
            for table in SNAPSHOT_TABLES:
                target = root / table.name / f"snapshot-{high:020d}.parquet"
                stmt = select(table).order_by(*_order(table))
                n = await _write_stream(conn, stmt, table, target, chunk_rows)
                if n == 0:  # an empty snapshot still replaces the previous one
                    pq.write_table(arrow_schema(table).empty_table(), target)
                result.rows[table.name] = n
                result.files.append(target)
    finally:
        await engine.dispose()
    return result


def _describe(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return str(parsed.database)
    return parsed.render_as_string(hide_password=True)


# ------------------------------------------------------------------------------------------------ CLI


def cmd_export(args: argparse.Namespace) -> int:
    """``kgc export`` (its options are defined in ``daemon.__main__``, which imports this module only to run it)."""
    if args.chunk_rows < 1:
        print("kgc export: --chunk-rows must be positive", file=sys.stderr)
        return 2
    try:
        url = source_url(args.storage_url, args.data_dir)
        result = export(url, args.out, schema=args.schema, chunk_rows=args.chunk_rows)
    except ExportError as e:
        print(f"kgc export: {e}", file=sys.stderr)
        return 1
    for table, n in result.rows.items():
        since = result.previous.get(table)
        if since is None:
            what = "snapshot"
        elif since >= result.high_position:
            what = f"up to date at position {since}"
        else:
            what = f"positions {since + 1}..{result.high_position}"
        print(f"{table}\t{n} rows\t{what}")
    return 0
