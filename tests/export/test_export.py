"""``kgc export``: incremental Parquet export. The exported rows must equal the database's, a second run must write
only the rows beyond the first run's high-water mark, snapshot tables are replaced, an interrupted run leaves nothing
duplicated, and the database itself is never written."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Table, select

from broker.records import BatchAppended, DataRecord, TopicCreated
from coordinator import records as r
from daemon.export import (
    APPEND_TABLES,
    BATCH_INDEX,
    SNAPSHOT_TABLES,
    STATE_FILE,
    ExportError,
    ExportResult,
    export,
    source_url,
)
from protocol.consumer_protocol import encode_assignment
from storage import create_engine
from storage import models as m
from tests.e2e.daemon import ROOT
from tests.storage.conftest import Database

M = 60_000


def _member(mid: str, instance: str | None, parts: list[int]) -> r.MemberMetadata:
    assignment = encode_assignment({"t": parts})
    return r.MemberMetadata(mid, instance, "client", "/127.0.0.1", 300_000, 45_000, b"sub", assignment)


def _generation(group: str, gen: int, members: list[r.MemberMetadata], now: int, cause: r.RebalanceCause,
                who: str) -> list[r.Record]:  # fmt: skip
    ids = tuple(x.member_id for x in members)
    static = tuple(x.member_id for x in members if x.group_instance_id)
    return [
        r.RebalanceStarted(group, gen - 1, cause, who, None, None, "Stable" if gen > 1 else "Empty", now),
        r.MemberJoined(group, who, None, "client", "/127.0.0.1", ("range", "roundrobin"), 45_000, 300_000, now),
        r.JoinPhaseCompleted(
            group, gen, "CompletingRebalance", "consumer", "range", ids[0], ids, static, 100, now + 100
        ),
        r.new_group_metadata_record(
            group, protocol_type="consumer", generation_id=gen, protocol="range", leader=ids[0],
            current_state_timestamp_ms=now + 200, members=members, now_ms=now + 200,
        ),
        r.GroupStabilized(group, gen, 100, 200, now + 200),
    ]  # fmt: skip


def _commits(group: str, gen: int, member: str, now: int, offsets: dict[int, int]) -> list[r.Record]:
    return [
        r.new_offset_commit_record(
            group, "t", p, offset=o, leader_epoch=-1, metadata=None, commit_timestamp_ms=now,
            expire_timestamp_ms=None, member_id=member, generation_id=gen,
        )
        for p, o in offsets.items()
    ]  # fmt: skip


FIRST: list[r.Record | DataRecord] = [
    TopicCreated("t", 4, (), 0),
    BatchAppended("t", 0, 0, 9, 0, 0, b"ten messages", 30_000),
    *_generation("g1", 1, [_member("a", None, [0, 1, 2, 3])], 0, r.RebalanceCause.NEW_MEMBER, "a"),
    *_commits("g1", 1, "a", 1 * M, {0: 10, 1: 11, 2: 12, 3: 13}),
    *_generation("g2", 1, [_member("x", "static-x", [0, 1, 2, 3])], 0, r.RebalanceCause.NEW_MEMBER, "x"),
    *_commits("g2", 1, "x", 1 * M, {0: 5}),
]
SECOND: list[r.Record | DataRecord] = [
    BatchAppended("t", 0, 10, 19, 0, 0, b"ten more", 2 * M),
    *_generation(
        "g1", 2, [_member("a", None, [0, 1]), _member("b", None, [2, 3])], 2 * M, r.RebalanceCause.NEW_MEMBER, "b"
    ),
    *_commits("g1", 2, "b", 3 * M, {2: 20, 3: 21}),
    r.MemberRemoved("g1", "b", None, r.RemovalCause.LEFT, "shutting down", 2, 4 * M),
    r.new_offset_tombstone("g1", "t", 0, cause=r.OffsetRemovalCause.DELETED, now_ms=4 * M),
    r.new_offset_tombstone("g2", "t", 0, cause=r.OffsetRemovalCause.GROUP_DELETED, now_ms=5 * M),
    r.new_group_tombstone("g2", cause=r.GroupRemovalCause.DELETED, now_ms=5 * M),
]


async def _append(database: Any, batch: list[r.Record | DataRecord]) -> None:
    log = await database.open_log()
    try:
        log.append(batch)
        await log.flush()
    finally:
        await log.close()


def _key(table: Table, row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c.name] for c in table.primary_key.columns)


async def _db_rows(database: Any, table: Table) -> list[dict[str, Any]]:
    engine = create_engine(database.url, schema=database.schema)
    try:
        async with engine.connect() as conn:
            rows = [dict(x._mapping) for x in await conn.execute(select(table))]
    finally:
        await engine.dispose()
    for row in rows:
        for c in table.columns:
            if c.name == "protocols":
                row[c.name] = json.dumps(row[c.name])
            elif row[c.name] is not None and c.name in ("assignment_decoded", "is_static"):
                row[c.name] = bool(row[c.name])
    return sorted(rows, key=lambda x: _key(table, x))


def _exported(out: Path, table: Table, files: list[Path] | None = None) -> list[dict[str, Any]]:
    paths = files if files is not None else sorted((out / table.name).glob("*.parquet"))
    rows = [row for p in paths for row in pq.read_table(p).to_pylist()]
    return sorted(rows, key=lambda x: _key(table, x))


async def _run(database: Any, out: Path, chunk_rows: int = 3) -> ExportResult:
    """The export runs its own event loop (a batch CLI): run it in a thread from these async tests."""
    url = source_url(None, database.sqlite_path.parent) if database.sqlite_path else database.url
    return await asyncio.to_thread(export, url, out, schema=database.schema, chunk_rows=chunk_rows)


async def _assert_export_equals_db(database: Any, out: Path) -> None:
    for table in (*APPEND_TABLES, *SNAPSHOT_TABLES):
        assert _exported(out, table) == await _db_rows(database, table), table.name


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_second_run_exports_only_new_rows_and_the_union_equals_the_db(database: Any, tmp_path: Path) -> None:
    out = tmp_path / "export"
    await _append(database, FIRST)
    if database.sqlite_path:
        before = _digest(database.sqlite_path)
    first = await _run(database, out)
    assert first.high_position == len(FIRST)
    await _assert_export_equals_db(database, out)
    first_rows = {t.name: _exported(out, t) for t in APPEND_TABLES}
    assert sum(len(v) for v in first_rows.values()) > 0
    if database.sqlite_path:
        assert _digest(database.sqlite_path) == before  # read-only: the database file is untouched

    await _append(database, SECOND)
    second = await _run(database, out)
    assert second.high_position == len(FIRST) + len(SECOND)
    assert second.previous == {t.name: len(FIRST) for t in APPEND_TABLES}
    await _assert_export_equals_db(database, out)
    for table in APPEND_TABLES:
        new_files = [f for f in second.files if f.parent.name == table.name]
        new = _exported(out, table, new_files)
        db = await _db_rows(database, table)
        # exactly the rows beyond the first high-water mark, in a new file; the first run's files are untouched
        assert new == [row for row in db if row["position"] > first.high_position], table.name
        assert second.rows[table.name] == len(new)
        # read in chunks of 3 rows, each a row group: memory is bounded by the chunk, not the table
        assert sum(pq.ParquetFile(f).num_row_groups for f in new_files) == -(-len(new) // 3)
        assert _exported(out, table, [f for f in first.files if f.parent.name == table.name]) == first_rows[table.name]
    assert second.rows["member_removed"] == 1 and second.rows["offset_removals"] == 2
    # the batches' offsets and append times, never their bytes
    assert [(x["base_offset"], x["last_offset"], x["appended_ms"]) for x in _exported(out, BATCH_INDEX)] == [
        (0, 9, 30_000), (10, 19, 2 * M)
    ]  # fmt: skip
    assert "data" not in pq.read_schema(next((out / "partition_batches").glob("*.parquet"))).names
    # snapshots replaced: one file each, the current state after the second batch (g2 deleted, g1/t/0 deleted)
    for table in SNAPSHOT_TABLES:
        assert [p.name for p in (out / table.name).iterdir()] == [f"snapshot-{second.high_position:020d}.parquet"]
    assert {row["group_id"] for row in _exported(out, m.table(m.CurrentGroup))} == {"g1"}
    assert {(x["partition_index"], x["committed_offset"]) for x in _exported(out, m.table(m.CurrentOffset))} == {
        (1, 11), (2, 20), (3, 21)
    }  # fmt: skip

    third = await _run(database, out)  # nothing new
    assert all(third.rows[t.name] == 0 for t in APPEND_TABLES)
    await _assert_export_equals_db(database, out)
    state = json.loads((out / STATE_FILE).read_text())
    assert set(state["last_position"].values()) == {second.high_position}


async def test_an_interrupted_run_is_redone_without_duplicates(database: Any, tmp_path: Path) -> None:
    out = tmp_path / "export"
    await _append(database, FIRST)
    first = await _run(database, out)
    await _append(database, SECOND)
    # A run that died after writing its files but before recording the state: its files are beyond the state, and
    # the next run covers a longer range (more rows arrived), so it writes differently named files.
    saved = (out / STATE_FILE).read_text()
    crashed = await _run(database, out)
    (out / STATE_FILE).write_text(saved)
    await _append(database, _commits("g1", 2, "a", 6 * M, {0: 30, 1: 31}))
    (out / "offset_commits" / ".part-x.parquet.tmp").write_bytes(b"half a file")
    redo = await _run(database, out)
    assert redo.previous == {t.name: first.high_position for t in APPEND_TABLES}
    assert redo.high_position == crashed.high_position + 2
    assert not any(f.exists() for f in crashed.files if f.name.startswith("part-"))
    await _assert_export_equals_db(database, out)
    assert not list(out.glob("*/.*.tmp"))


async def test_a_database_behind_the_export_is_refused(database: Any, tmp_path: Path) -> None:
    out = tmp_path / "export"
    await _append(database, FIRST)
    await _run(database, out)
    state = json.loads((out / STATE_FILE).read_text())
    state["last_position"]["offset_commits"] = 10_000  # as if exported from a longer-lived database
    (out / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(ExportError, match="behind the export"):
        await _run(database, out)


def test_a_missing_database_file_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no database file"):
        source_url(None, tmp_path / "data")
    assert not (tmp_path / "data").exists()
    with pytest.raises(ExportError):
        source_url("memory", None)


def test_cli_export_of_a_sqlite_data_dir(tmp_path: Path) -> None:
    db = tmp_path / "data" / "coordinator.db"
    asyncio.run(_append(Database("sqlite", f"sqlite+aiosqlite:///{db}", sqlite_path=db), FIRST))
    out = tmp_path / "export"
    cmd = [sys.executable, "-m", "daemon", "export", "--out", str(out), "--data-dir", str(db.parent)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split("\t", 1) for line in done.stdout.splitlines())
    assert lines["offset_commits"].startswith("5 rows")
    assert len(pq.read_table(out / "offset_commits").to_pylist()) == 5
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and dict(x.split("\t", 1) for x in again.stdout.splitlines())[
        "offset_commits"
    ].startswith("0 rows")
    missing = subprocess.run([*cmd[:-1], str(tmp_path / "nowhere")], cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 1 and "no database file" in missing.stderr


async def test_the_export_connection_cannot_write(database: Any, tmp_path: Path) -> None:
    from sqlalchemy import update

    from daemon.export import open_readonly

    await _append(database, FIRST)
    url = source_url(None, database.sqlite_path.parent) if database.sqlite_path else database.url
    engine = open_readonly(url, database.schema)
    try:
        async with engine.connect() as conn:
            with pytest.raises(Exception, match=r"(?i)read.?only"):
                await conn.execute(update(m.table(m.LogState)).values(last_position=0))
    finally:
        await engine.dispose()
