"""Benchmark: start-up (open + load) with a large history, on the embedded SQLite database.

    python -m benchmarks.bench_load [--history-rows 1000000] [--offsets 100000] [--groups 1000] [--data-dir DIR]

Generates, with bulk ``executemany`` inserts straight into the schema (not through the writer, so generation is
fast): ``--history-rows`` rows spread over the log and history tables, ``--offsets`` current committed offsets
and ``--groups`` live groups with 5 members each. Then measures ``SqlRecordLog.open`` (engine + migration check)
and ``load()``, and the group-commit write path (``--clients`` concurrent clients doing ``--commits`` synchronous
commits each). Not part of the test suite: it takes tens of seconds and writes ~200 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import struct
import time
from pathlib import Path
from typing import Any

from storage.database import SQLITE_FILE_NAME, create_engine, database_url, migrate
from storage.record_log import SqlRecordLog

Rows = list[tuple[Any, ...]]
MEMBERS_PER_GROUP = 5
TOPICS_PER_GROUP = 4


def assignment(topic: str, partitions: list[int]) -> bytes:
    raw = topic.encode()
    out = struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", len(partitions))
    return out + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1)


def generate(path: Path, history_rows: int, offsets: int, groups: int, seed: int = 1) -> dict[str, int]:
    rng = random.Random(seed)
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous=OFF")
    now = 1_700_000_000_000
    position = 0
    counts: dict[str, int] = {}

    def insert(table: str, rows: Rows) -> None:
        if rows:
            marks = ",".join("?" * len(rows[0]))
            db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            counts[table] = counts.get(table, 0) + len(rows)

    def columns(table: str) -> list[str]:
        return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]

    # Column order of each table as created by the migration (the INSERTs below follow it).
    assert columns("offset_commits")[:3] == ["position", "group_id", "topic"]

    group_ids = [f"group-{g:05d}" for g in range(groups)]
    partitions_per_group = max(1, offsets // groups)

    # History: 70 % offset commits, the rest rebalance events, generation members and assigned partitions.
    commits_target = int(history_rows * 0.7)
    chunk: Rows = []
    while counts.get("offset_commits", 0) + len(chunk) < commits_target:
        position += 1
        g = rng.randrange(groups)
        p = rng.randrange(partitions_per_group)
        chunk.append(
            (
                position,
                group_ids[g],
                f"topic-{p % TOPICS_PER_GROUP}",
                p // TOPICS_PER_GROUP,
                position * 10,
                5,
                "",
                now + position,
                None,
                f"member-{g}-{p % MEMBERS_PER_GROUP}",
                7,
            )
        )
        if len(chunk) == 50_000:
            insert("offset_commits", chunk)
            chunk = []
    insert("offset_commits", chunk)

    generation = 0
    while sum(counts.values()) < history_rows:
        generation += 1
        started, joined_phase, members_rows, stabilized, member_joined, metadata, gen_members, parts = (
            [],
            [],
            [],
            [],
            [],
            [],
            [],
            [],
        )
        for g, gid in enumerate(group_ids[: min(groups, 500)]):
            position += 1
            started.append(
                (position, gid, generation - 1, "new_member", f"m-{g}", None, None, "Stable", now + position)
            )
            position += 1
            member_joined.append(
                (
                    position,
                    gid,
                    f"m-{g}-{generation}",
                    None,
                    "client",
                    "/10.0.0.1",
                    '["range"]',
                    45_000,
                    60_000,
                    now + position,
                )
            )
            position += 1
            members = [f"m-{g}-{i}" for i in range(MEMBERS_PER_GROUP)]
            joined_phase.append(
                (
                    position,
                    gid,
                    generation,
                    "CompletingRebalance",
                    "consumer",
                    "range",
                    members[0],
                    len(members),
                    0,
                    250,
                    now + position,
                )
            )
            members_rows += [(position, mid, gid, generation, False) for mid in members]
            position += 1
            metadata.append(
                (
                    position,
                    gid,
                    "consumer",
                    generation,
                    "range",
                    members[0],
                    now + position,
                    len(members),
                    now + position,
                )
            )
            for i, mid in enumerate(members):
                owned = [p for p in range(8) if (p + generation) % MEMBERS_PER_GROUP == i]
                gen_members.append(
                    (
                        position,
                        mid,
                        gid,
                        generation,
                        i,
                        None,
                        "client",
                        "/10.0.0.1",
                        60_000,
                        45_000,
                        b"\x00\x01sub",
                        assignment("topic-0", owned),
                        True,
                    )
                )
                parts += [(position, mid, "topic-0", p, gid, generation, None) for p in owned]
            position += 1
            stabilized.append((position, gid, generation, 40, 290, now + position))
        insert("rebalance_started", started)
        insert("member_joined", member_joined)
        insert("join_phase_completed", joined_phase)
        insert("join_phase_members", members_rows)
        insert("group_metadata_log", metadata)
        insert("generation_members", gen_members)
        insert("assigned_partitions", parts)
        insert("group_stabilized", stabilized)
    insert(
        "log_batches",
        [(min(p + 99, position), p, min(100, position - p + 1), now + p, now + p) for p in range(1, position + 1, 100)],
    )

    # Current state: the snapshot tables load() reads.
    current_groups: Rows = []
    current_members: Rows = []
    current_offsets: Rows = []
    for g, gid in enumerate(group_ids):
        members = [f"m-{g}-{i}" for i in range(MEMBERS_PER_GROUP)]
        current_groups.append((gid, g + 1, "consumer", generation, "range", members[0], now, len(members), now))
        for i, mid in enumerate(members):
            owned = [p for p in range(8) if p % MEMBERS_PER_GROUP == i]
            current_members.append(
                (
                    gid,
                    mid,
                    i,
                    None,
                    "client",
                    "/10.0.0.1",
                    60_000,
                    45_000,
                    b"\x00\x01\x00\x00\x00\x01\x00\x07topic-0\xff\xff\xff\xff",
                    assignment("topic-0", owned),
                )
            )
    for n in range(offsets):
        g, p = divmod(n, partitions_per_group)
        current_offsets.append(
            (
                group_ids[g % groups],
                f"topic-{p % TOPICS_PER_GROUP}",
                p // TOPICS_PER_GROUP,
                n + 1,
                n * 10,
                5,
                "",
                now + n,
                None,
                f"member-{g}",
                7,
            )
        )
    insert("current_groups", current_groups)
    insert("current_group_members", current_members)
    insert("current_offsets", current_offsets)
    db.execute("UPDATE log_state SET last_position = ?", (position,))
    db.commit()
    db.close()
    return counts


def _series(lo: int, hi: int, step: int = 1) -> str:
    """A recursive CTE ``s(n)`` counting lo, lo + step, ... <= hi (SQLite has no generate_series built in)."""
    return f"WITH RECURSIVE s(n) AS (SELECT {lo} UNION ALL SELECT n + {step} FROM s WHERE n + {step} <= {hi}) "


def _sqlite_statements(history_rows: int, offsets: int, groups: int) -> list[str]:
    """The shape of ``_pg_statements`` for SQLite, generated inside SQLite (no Python per row): 70 % offset commits,
    the rest rebalance starts, stabilisations and member joins, spread over ``groups`` groups; the current state
    (groups of 5 members, ``offsets`` committed offsets) that start-up reads."""
    commits = int(history_rows * 0.7)
    per_table = (history_rows - commits) // 3
    per_group = max(1, offsets // groups)
    now = 1_700_000_000_000
    a, b, c = commits, commits + per_table, commits + 2 * per_table
    gid = "printf('group-%05d', ({n}) % {groups})"
    g = gid.format(n="n", groups=groups)
    return [
        _series(1, a) + f"INSERT INTO offset_commits SELECT n, {g}, 'topic-' || (n % 4), (n / 4) % "
        f"{max(1, per_group // 4)}, n * 10, 5, '', {now} + n, NULL, 'member', 7 FROM s",
        _series(a + 1, b) + f"INSERT INTO rebalance_started SELECT n, {g}, n / {groups}, 'new_member', 'm', NULL, "
        f"NULL, 'Stable', {now} + n FROM s",
        _series(b + 1, c) + f"INSERT INTO group_stabilized SELECT n, {g}, n / {groups}, 40, 290, {now} + n FROM s",
        _series(c + 1, history_rows) + f"INSERT INTO member_joined SELECT n, {g}, 'm-' || n, NULL, 'client', "
        f"'/10.0.0.1', '[\"range\"]', 45000, 60000, {now} + n FROM s",
        _series(1, history_rows, 100) + f"INSERT INTO log_batches SELECT min(n + 99, {history_rows}), n, "
        f"min(100, {history_rows} - n + 1), {now} + n, {now} + n FROM s",
        _series(0, groups - 1) + f"INSERT INTO current_groups SELECT {g}, n + 1, 'consumer', 7, 'range', "
        f"'m-' || n || '-0', {now}, {MEMBERS_PER_GROUP}, {now} FROM s",
        _series(0, groups * MEMBERS_PER_GROUP - 1)
        + f"INSERT INTO current_group_members SELECT {gid.format(n=f'n / {MEMBERS_PER_GROUP}', groups=groups)}, "
        f"'m-' || (n / {MEMBERS_PER_GROUP}) || '-' || (n % {MEMBERS_PER_GROUP}), n % {MEMBERS_PER_GROUP}, NULL, "
        f"'client', '/10.0.0.1', 60000, 45000, X'000100000001000774', X'{assignment('topic-0', [0, 5]).hex()}' FROM s",
        _series(0, offsets - 1)
        + f"INSERT INTO current_offsets SELECT {gid.format(n=f'n / {per_group}', groups=groups)}, "
        f"'topic-' || (n % {per_group} % 4), n % {per_group} / 4, n + 1, n * 10, 5, '', {now} + n, NULL, "
        "'member', 7 FROM s",
        f"UPDATE log_state SET last_position = {history_rows}",
    ]


def generate_sql(path: Path, history_rows: int, offsets: int, groups: int) -> dict[str, int]:
    """Fill a migrated SQLite database (``prepare``) by SQL run inside SQLite: 10M history rows in about a minute
    (``generate`` builds every row in Python). The history tables' secondary indexes are dropped during the inserts
    and created again from their own definitions, so the schema is the migrations' exactly. Returns rows per
    table."""
    history = ("offset_commits", "rebalance_started", "group_stabilized", "member_joined", "log_batches")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("PRAGMA cache_size=-262144")
        db.execute("BEGIN")
        marks = ",".join("?" * len(history))
        indexes = db.execute(
            f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN ({marks})",
            history,
        ).fetchall()
        for name, _ in indexes:
            db.execute(f'DROP INDEX "{name}"')
        for statement in _sqlite_statements(history_rows, offsets, groups):
            db.execute(statement)
        for _, sql in indexes:
            db.execute(sql)
        db.execute("COMMIT")
        db.execute("ANALYZE")
        db.execute("PRAGMA journal_mode=WAL")
        tables = (*history, "current_groups", "current_group_members", "current_offsets")
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        db.close()


def cached_database(cache: Path, history_rows: int, offsets: int, groups: int) -> tuple[Path, dict[str, int]]:
    """A generated database (``generate_sql``) kept under ``cache`` for these sizes and this schema, generated on
    the first call; returns its directory and its rows per table. Copy it before starting a daemon on it."""
    from storage.migrations import versions

    head = max(p.name for p in Path(versions.__path__[0]).glob("0*.py"))
    key = f"recovery-{history_rows}-{offsets}-{groups}-{head.removesuffix('.py')}"
    where = cache / key
    counts_file = where / "counts.json"
    if not counts_file.exists():
        shutil.rmtree(where, ignore_errors=True)
        building = cache / f"{key}.building-{os.getpid()}"
        shutil.rmtree(building, ignore_errors=True)
        asyncio.run(prepare(building))
        counts = generate_sql(building / SQLITE_FILE_NAME, history_rows, offsets, groups)
        (building / "counts.json").write_text(json.dumps(counts))
        building.rename(where)
    return where, json.loads(counts_file.read_text())


async def prepare(data_dir: Path) -> None:
    engine = create_engine(database_url(None, data_dir))
    await migrate(engine)
    await engine.dispose()


async def measure_load(target: dict[str, Any]) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    log = await SqlRecordLog.open(**target)
    t1 = time.perf_counter()
    records = await log.load()
    t2 = time.perf_counter()
    await log.close()
    return t1 - t0, t2 - t1, len(records)


async def measure_writes(target: dict[str, Any], clients: int, commits_per_client: int) -> tuple[float, int]:
    """``clients`` concurrent committers, each waiting for its commit to be durable before the next one (like a
    consumer's commitSync). Returns elapsed seconds and the number of transactions used."""
    from coordinator.records import new_offset_commit_record

    log = await SqlRecordLog.open(**target)
    before = log.stats.transactions
    loop = asyncio.get_running_loop()

    async def client(c: int) -> None:
        for i in range(commits_per_client):
            future: asyncio.Future[object] = loop.create_future()
            record = new_offset_commit_record(
                f"group-{c:05d}",
                "topic-0",
                i % 8,
                offset=i,
                leader_epoch=1,
                metadata="",
                commit_timestamp_ms=1_800_000_000_000 + i,
                expire_timestamp_ms=None,
                member_id="m",
                generation_id=1,
            )
            log.append([record], future.set_result)
            assert await future is None

    t0 = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    elapsed = time.perf_counter() - t0
    transactions = log.stats.transactions - before
    await log.close()
    return elapsed, transactions


def _pg_statements(history_rows: int, offsets: int, groups: int) -> list[str]:
    """Server-side generation (generate_series) of the same shape of data as ``generate``."""
    commits = int(history_rows * 0.7)
    per_table = (history_rows - commits) // 3
    per_group = max(1, offsets // groups)
    now = 1_700_000_000_000
    gid = "'group-' || lpad(({n} % {groups})::text, 5, '0')"
    a, b, c = commits, commits + per_table, commits + 2 * per_table
    return [
        f"INSERT INTO offset_commits SELECT n, {gid.format(n='n', groups=groups)}, 'topic-' || (n % 4), "
        f"(n / 4) % {max(1, per_group // 4)}, n * 10, 5, '', {now} + n, NULL, 'member', 7 "
        f"FROM generate_series(1, {a}) n",
        f"INSERT INTO rebalance_started SELECT n, {gid.format(n='n', groups=groups)}, n / {groups}, 'new_member', "
        f"'m', NULL, NULL, 'Stable', {now} + n FROM generate_series({a + 1}, {b}) n",
        f"INSERT INTO group_stabilized SELECT n, {gid.format(n='n', groups=groups)}, n / {groups}, 40, 290, {now} + n "
        f"FROM generate_series({b + 1}, {c}) n",
        f"INSERT INTO member_joined SELECT n, {gid.format(n='n', groups=groups)}, 'm-' || n, NULL, 'client', "
        f"'/10.0.0.1', '[\"range\"]', 45000, 60000, {now} + n FROM generate_series({c + 1}, {history_rows}) n",
        f"INSERT INTO log_batches SELECT least(n + 99, {history_rows}), n, least(100, {history_rows} - n + 1), "
        f"{now} + n, {now} + n FROM generate_series(1, {history_rows}, 100) n",
        f"INSERT INTO current_groups SELECT {gid.format(n='g', groups=groups)}, g + 1, 'consumer', 7, 'range', "
        f"'m-' || g || '-0', {now}, {MEMBERS_PER_GROUP}, {now} FROM generate_series(0, {groups - 1}) g",
        f"INSERT INTO current_group_members SELECT {gid.format(n='g', groups=groups)}, 'm-' || g || '-' || i, i, "
        f"NULL, 'client', '/10.0.0.1', 60000, 45000, decode('000100000001000774', 'hex'), "
        f"decode('{assignment('topic-0', [0, 5]).hex()}', 'hex') "
        f"FROM generate_series(0, {groups - 1}) g, generate_series(0, {MEMBERS_PER_GROUP - 1}) i",
        f"INSERT INTO current_offsets SELECT {gid.format(n='(n / ' + str(per_group) + ')', groups=groups)}, "
        f"'topic-' || (n % {per_group} % 4), n % {per_group} / 4, n + 1, n * 10, 5, '', {now} + n, NULL, 'member', 7 "
        f"FROM generate_series(0, {offsets - 1}) n",
        f"UPDATE log_state SET last_position = {history_rows}",
        "ANALYZE",
    ]


async def generate_postgres(url: str, schema: str, history_rows: int, offsets: int, groups: int) -> None:
    from sqlalchemy import text

    admin = create_engine(url)
    async with admin.begin() as conn:
        await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    await admin.dispose()
    engine = create_engine(url, schema=schema, command_timeout_s=600)
    await migrate(engine)
    async with engine.begin() as conn:
        for statement in _pg_statements(history_rows, offsets, groups):
            await conn.execute(text(statement))
    await engine.dispose()


async def drop_postgres(url: str, schema: str) -> None:
    from sqlalchemy import text

    admin = create_engine(url)
    async with admin.begin() as conn:
        await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    await admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history-rows", type=int, default=1_000_000)
    parser.add_argument("--offsets", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--clients", type=int, default=100, help="concurrent committers for the write benchmark")
    parser.add_argument("--commits", type=int, default=100, help="sequential commits per client")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/kgc-bench-load"))
    parser.add_argument("--keep", action="store_true", help="keep the generated database")
    parser.add_argument("--url", help="a PostgreSQL URL: benchmark there (schema kgc_bench) instead of SQLite")
    args = parser.parse_args()

    target: dict[str, Any]
    if args.url:
        target = {"url": args.url, "schema": "kgc_bench"}
        t0 = time.perf_counter()
        asyncio.run(generate_postgres(args.url, "kgc_bench", args.history_rows, args.offsets, args.groups))
        print(f"generated in {time.perf_counter() - t0:.1f}s on PostgreSQL (schema kgc_bench)")
    else:
        target = {"data_dir": args.data_dir}
        shutil.rmtree(args.data_dir, ignore_errors=True)
        asyncio.run(prepare(args.data_dir))
        t0 = time.perf_counter()
        counts = generate(args.data_dir / SQLITE_FILE_NAME, args.history_rows, args.offsets, args.groups)
        generated = time.perf_counter() - t0
        history = sum(v for k, v in counts.items() if not k.startswith("current_") and k != "log_batches")
        size_mb = sum(f.stat().st_size for f in args.data_dir.iterdir()) / 1e6
        print(
            f"generated in {generated:.1f}s: {history} history rows, {counts['current_offsets']} current offsets, "
            f"{counts['current_groups']} groups ({size_mb:.0f} MB)"
        )
        for table, n in sorted(counts.items()):
            print(f"  {table:24} {n:>9}")

    for attempt in (1, 2):
        open_s, load_s, n = asyncio.run(measure_load(target))
        print(
            f"start-up #{attempt}: open+migrate-check {open_s:.2f}s, load {load_s:.2f}s ({n} records), "
            f"total {open_s + load_s:.2f}s"
        )
    elapsed, transactions = asyncio.run(measure_writes(target, args.clients, args.commits))
    total = args.clients * args.commits
    print(
        f"writes: {args.clients} clients x {args.commits} synchronous commits: {elapsed:.2f}s "
        f"({total / elapsed:.0f} commits/s), {transactions} transactions ({total / transactions:.1f} per transaction)"
    )
    if not args.keep:
        if args.url:
            asyncio.run(drop_postgres(args.url, "kgc_bench"))
        else:
            shutil.rmtree(args.data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
