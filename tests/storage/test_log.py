"""SqlRecordLog on SQLite and PostgreSQL: schema, round trip, group commit, snapshot consistency, pruning."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import func, inspect, select, text

from coordinator.record_log import WriteFailure
from coordinator.records import (
    GroupMetadataRecord,
    GroupRemovalCause,
    OffsetCommitRecord,
    OffsetRemovalCause,
    Record,
    new_group_tombstone,
    new_offset_tombstone,
)
from storage import SqlRecordLog, create_engine, migrate
from storage import models as m
from storage.database import HEAD_REVISION, alembic_config, current_revision
from storage.models import table

from .conftest import Database
from .records_gen import (
    commit,
    consumer_assignment,
    fold_state,
    group_record,
    member,
    random_state_records,
    split_loaded,
)


async def count(log: SqlRecordLog, model: type[m.Base]) -> int:
    async with log.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table(model)))).scalar_one())


async def rows(log: SqlRecordLog, model: type[m.Base], order_by: str = "position") -> list[Any]:
    t = table(model)
    async with log.engine.connect() as conn:
        return list(await conn.execute(select(t).order_by(t.c[order_by])))


def append_all(log: SqlRecordLog, batches: list[list[Record]]) -> list[WriteFailure | None]:
    results: list[WriteFailure | None] = []
    for records in batches:
        log.append(records, results.append)
    return results


# ------------------------------------------------------------------------------------------------ schema


async def test_migrations_apply_on_empty_database_and_are_idempotent(database: Database) -> None:
    engine = create_engine(database.url, **database.engine_options())  # type: ignore[arg-type]
    try:
        assert await current_revision(engine) is None
        await migrate(engine)
        first = await current_revision(engine)
        await migrate(engine)
        assert await current_revision(engine) == first is not None
        async with engine.connect() as conn:
            names = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            assert {t.name for t in m.Base.metadata.sorted_tables} <= names
            state = list(await conn.execute(text("SELECT id, last_position FROM log_state")))
        assert [tuple(r) for r in state] == [(1, 0)]
        # The migrations build exactly what the models describe (nothing for autogenerate to add).
        async with engine.connect() as conn:
            diff = await conn.run_sync(lambda c: compare_metadata(MigrationContext.configure(c), m.Base.metadata))
        assert diff == []
    finally:
        await engine.dispose()


async def test_a_database_at_the_head_is_left_as_it_is_and_an_older_one_is_upgraded(database: Database) -> None:
    """``migrate`` recognises a database at ``HEAD_REVISION`` without Alembic (start-up); ``HEAD_REVISION`` is
    Alembic's head, and a database one revision behind is still upgraded."""
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD_REVISION
    engine = create_engine(database.url, **database.engine_options())  # type: ignore[arg-type]
    try:
        previous = ScriptDirectory.from_config(alembic_config()).get_revision(HEAD_REVISION).down_revision
        assert isinstance(previous, str)
        await migrate(engine, previous)
        assert await current_revision(engine) == previous
        await migrate(engine)
        assert await current_revision(engine) == HEAD_REVISION
        await migrate(engine)
        assert await current_revision(engine) == HEAD_REVISION
    finally:
        await engine.dispose()


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_runs_in_wal_mode(database: Database, record_log: SqlRecordLog) -> None:
    async with record_log.engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
        assert (await conn.execute(text("PRAGMA synchronous"))).scalar() == 2  # FULL


# ------------------------------------------------------------------------------------------------ round trip


async def test_load_state_gives_the_loaded_state_per_group(database: Database, record_log: SqlRecordLog) -> None:
    """``load_state`` (the daemon's start-up read: a plain driver read, each group's offset rows once) holds what
    ``load`` does: the same group records in the same order, and each live offset's fields, per group in group id
    order, each group's rows in (topic, partition) order."""
    records = random_state_records(seed=11, count=600)
    results = append_all(record_log, [records[i : i + 13] for i in range(0, len(records), 13)])
    await record_log.flush()
    assert results == [None] * len(results)
    loaded = await record_log.load()
    groups, per_group = await record_log.load_state()
    assert groups == [r for r in loaded if isinstance(r, GroupMetadataRecord)]
    expected = [r for r in loaded if isinstance(r, OffsetCommitRecord)]
    assert expected
    assert [gid for gid, _ in per_group] == sorted({r.group_id for r in expected})
    assert [(gid, *tuple(row)) for gid, rows in per_group for row in rows] == [
        (r.group_id, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata, r.commit_timestamp_ms,
         r.expire_timestamp_ms)
        for r in sorted(expected, key=lambda r: (r.group_id, r.topic, r.partition))
    ]  # fmt: skip


async def test_append_then_load_equals_replayed_state(database: Database, record_log: SqlRecordLog) -> None:
    records = random_state_records(seed=7, count=600)
    # Mixed call sizes in one tick (one or few transactions, so keys repeat inside a batch) ...
    first, rest = records[:300], records[300:]
    results = append_all(record_log, [first[i : i + 7] for i in range(0, len(first), 7)])
    await record_log.flush()
    # ... and one call per record, flushing now and then (many transactions).
    for i, r in enumerate(rest):
        record_log.append([r], results.append)
        if i % 50 == 0:
            await record_log.flush()
    await record_log.flush()
    assert results == [None] * len(results)

    expected_groups, expected_offsets = fold_state(records)
    loaded = await record_log.load()
    groups, offsets = split_loaded(loaded)
    assert groups == expected_groups
    assert offsets == expected_offsets
    # Groups come before offsets, groups in log order of their latest record.
    kinds = [type(r) for r in loaded]
    assert kinds == [GroupMetadataRecord] * len(groups) + [OffsetCommitRecord] * len(offsets)
    order = [r.group_id for r in records if isinstance(r, GroupMetadataRecord) and r.group_id in groups]
    last_seen = {g: i for i, g in enumerate(order)}
    assert [r.group_id for r in loaded[: len(groups)]] == sorted(groups, key=last_seen.__getitem__)

    # A new process on the same database sees the same state and continues the positions.
    await record_log.close()
    reopened = await database.open_log()
    try:
        assert split_loaded(await reopened.load()) == (expected_groups, expected_offsets)
        done: list[WriteFailure | None] = []
        reopened.append([commit("group-0", "topic-0", 0, 1, 1_800_000_000_000)], done.append)
        await reopened.flush()
        assert done == [None]
        history = await rows(reopened, m.OffsetCommit)
        positions = [r.position for r in history]
        assert positions == sorted(set(positions))
        # Every commit's history row holds its fields, with or without an expiry (two statement shapes).
        commits = [r for r in records if isinstance(r, OffsetCommitRecord)]
        assert {None} < {c.expire_timestamp_ms for c in commits}
        assert [
            (h.group_id, h.topic, h.partition_index, h.committed_offset, h.leader_epoch, h.commit_metadata,
             h.commit_timestamp_ms, h.expire_timestamp_ms, h.member_id, h.generation_id)
            for h in history[: len(commits)]
        ] == [
            (c.group_id, c.topic, c.partition, c.offset, c.leader_epoch, c.metadata, c.commit_timestamp_ms,
             c.expire_timestamp_ms, c.member_id, c.generation_id)
            for c in commits
        ]  # fmt: skip
        batches = await rows(reopened, m.LogBatch, "last_position")
        assert batches[-1].last_position == max(positions) == len(records) + 1
    finally:
        await reopened.close()


async def test_every_record_gets_the_next_position(record_log: SqlRecordLog) -> None:
    records = random_state_records(seed=3, count=120)
    append_all(record_log, [records[:50], records[50:]])
    await record_log.flush()
    seen: list[int] = []
    for model in (m.GroupMetadataLog, m.GroupRemoval, m.OffsetCommit, m.OffsetRemoval):
        seen.extend(r.position for r in await rows(record_log, model))
    assert sorted(seen) == list(range(1, len(records) + 1))
    batches = await rows(record_log, m.LogBatch, "last_position")
    assert sum(b.record_count for b in batches) == len(records)
    assert all(b.first_position + b.record_count - 1 == b.last_position for b in batches)


async def test_last_position_is_what_the_next_start_renders_the_offsets_topic_below(database: Database) -> None:
    log = await database.open_log()
    try:
        assert await log.last_position() == 0  # a new database
        records = random_state_records(seed=4, count=30)
        append_all(log, [records])
        await log.flush()
        assert await log.last_position() == 30
    finally:
        await log.close()
    again = await database.open_log()
    try:
        assert await again.last_position() == 30  # read back by the next daemon, not kept in memory
    finally:
        await again.close()


# ------------------------------------------------------------------------------------------------ group commit


async def test_group_commit_batches_concurrent_appends_and_answers_in_order(record_log: SqlRecordLog) -> None:
    calls = 200
    appended: list[int] = []
    answered: list[tuple[int, WriteFailure | None]] = []

    async def producer(start: int) -> None:
        for i in range(start, calls, 4):
            appended.append(i)
            record_log.append([commit("g", "t", i % 8, i, 1_000 + i)], lambda e, i=i: answered.append((i, e)))
            await asyncio.sleep(0)  # other producers run; the writer commits while appends keep arriving

    await asyncio.gather(*(producer(s) for s in range(4)))
    await record_log.flush()

    assert [i for i, _ in answered] == appended  # every on_done once, in append order
    assert len(answered) == calls and all(e is None for _, e in answered)
    transactions = await count(record_log, m.LogBatch)
    assert transactions == record_log.stats.transactions
    assert 1 <= transactions < calls / 4
    assert await count(record_log, m.OffsetCommit) == calls


async def test_an_idle_writer_starts_at_once_and_batches_what_arrives_meanwhile(record_log: SqlRecordLog) -> None:
    done: list[int] = []
    record_log.append([commit("g", "t", 0, 1, 1)], lambda e: done.append(1))
    await record_log.flush()  # a lone append is written without waiting for company
    assert done == [1]
    for i in range(2, 52):
        record_log.append([commit("g", "t", 0, i, i)], lambda e, i=i: done.append(i))
    await record_log.flush()
    assert done == list(range(1, 52))
    assert record_log.stats.transactions <= 3  # 1 for the lone append; the 50 queued together need 1 (or 2)


async def test_history_only_appends_need_no_callback_and_empty_appends_are_answered(record_log: SqlRecordLog) -> None:
    done: list[WriteFailure | None] = []
    record_log.append([commit("g", "t", 0, 1, 1)])
    record_log.append([], done.append)
    await record_log.flush()
    assert done == [None]
    assert await count(record_log, m.OffsetCommit) == 1


async def test_a_failing_callback_does_not_stop_the_writer(record_log: SqlRecordLog) -> None:
    done: list[WriteFailure | None] = []

    def explode(_: WriteFailure | None) -> None:
        raise RuntimeError("caller bug")

    record_log.append([commit("g", "t", 0, 1, 1)], explode)
    record_log.append([commit("g", "t", 0, 2, 2)], done.append)
    await record_log.flush()
    record_log.append([commit("g", "t", 0, 3, 3)], done.append)
    await record_log.flush()
    assert done == [None, None]


async def test_close_writes_what_is_queued_then_refuses(database: Database) -> None:
    log = await database.open_log()
    done: list[WriteFailure | None] = []
    for i in range(10):
        log.append([commit("g", "t", 0, i, i)], done.append)
    await log.close()
    assert done == [None] * 10
    log.append([commit("g", "t", 0, 99, 99)], done.append)
    assert done[-1] == WriteFailure.UNAVAILABLE
    reopened = await database.open_log()
    try:
        loaded = await reopened.load()
        assert [r.offset for r in loaded if isinstance(r, OffsetCommitRecord)] == [9]
    finally:
        await reopened.close()


# ------------------------------------------------------------------------------------------------ snapshot


async def test_latest_offset_table_matches_the_commit_log(record_log: SqlRecordLog) -> None:
    records = random_state_records(seed=11, count=800, groups=3, topics=2, partitions=3)
    append_all(record_log, [records[i : i + 13] for i in range(0, len(records), 13)])
    await record_log.flush()
    # Rebuild from the stored log tables alone (not from the input records) and compare with the snapshot table.
    events = [(r.position, "commit", r) for r in await rows(record_log, m.OffsetCommit)]
    events += [(r.position, "remove", r) for r in await rows(record_log, m.OffsetRemoval)]
    latest: dict[tuple[str, str, int], Any] = {}
    for _, kind, r in sorted(events, key=lambda e: e[0]):
        key = (r.group_id, r.topic, r.partition_index)
        if kind == "commit":
            latest[key] = r
        else:
            latest.pop(key, None)
    current = {(r.group_id, r.topic, r.partition_index): r for r in await rows(record_log, m.CurrentOffset)}
    assert current.keys() == latest.keys()
    for key, row in current.items():
        log_row = latest[key]
        assert row.position == log_row.position
        assert (row.committed_offset, row.leader_epoch, row.commit_metadata, row.commit_timestamp_ms) == (
            log_row.committed_offset,
            log_row.leader_epoch,
            log_row.commit_metadata,
            log_row.commit_timestamp_ms,
        )
        assert (row.expire_timestamp_ms, row.member_id, row.generation_id) == (
            log_row.expire_timestamp_ms,
            log_row.member_id,
            log_row.generation_id,
        )


async def test_large_transactions_write_every_row_in_multi_row_statements(record_log: SqlRecordLog) -> None:
    # The SQLite writer sends a table's rows in chunks of power-of-two sizes (up to 256 rows); PostgreSQL in one
    # statement per table. Thousands of distinct keys in one transaction, with tombstones of many of them and a
    # 700-member generation, must end exactly as replaying the records one by one.
    records = random_state_records(seed=5, count=3_000, groups=40, topics=10, partitions=25)
    members = [member(f"m-{i:04d}", consumer_assignment({"orders": [i % 32, 100 + i]})) for i in range(700)]
    big = group_record("big-group", 3, members, 1_700_000_000_000)
    first, second = [*records[:1_777], big], records[1_777:]
    results: list[WriteFailure | None] = []
    for records_of_one_transaction in (first, second):
        record_log.append(records_of_one_transaction, results.append)
        await record_log.flush()
    assert results == [None, None]
    assert record_log.stats.transactions == 2
    groups, offsets = split_loaded(await record_log.load())
    assert (groups, offsets) == fold_state([*first, *second])
    assert await count(record_log, m.OffsetCommit) == sum(isinstance(r, OffsetCommitRecord) for r in records)
    assert await count(record_log, m.GenerationMember) == 700 + sum(
        len(r.members) for r in records if isinstance(r, GroupMetadataRecord)
    )
    assigned = [r for r in await rows(record_log, m.AssignedPartition) if r.group_id == "big-group"]
    assert len(assigned) == 1_400
    assert await count(record_log, m.CurrentGroupMember) == sum(len(g.members) for g in groups.values())


async def test_tombstones_remove_current_state_but_history_stays(record_log: SqlRecordLog) -> None:
    assignment = consumer_assignment({"orders": [0, 1]})
    metadata = group_record("g", 1, [member("m-1", assignment)], 1_000)
    record_log.append([metadata, commit("g", "orders", 0, 42, 1_001), commit("g", "orders", 1, 7, 1_002)])
    await record_log.flush()
    assert split_loaded(await record_log.load())[0] == {"g": metadata}

    done: list[WriteFailure | None] = []
    record_log.append(
        [
            new_offset_tombstone("g", "orders", 0, cause=OffsetRemovalCause.DELETED, now_ms=2_000),
            new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=2_001),
        ],
        done.append,
    )
    await record_log.flush()
    assert done == [None]
    groups, offsets = split_loaded(await record_log.load())
    assert groups == {}
    assert list(offsets) == [("g", "orders", 1)]
    assert await count(record_log, m.CurrentGroupMember) == 0
    # The log keeps everything.
    assert [r.generation_id for r in await rows(record_log, m.GroupMetadataLog)] == [1]
    assert [(r.member_id, r.assignment) for r in await rows(record_log, m.GenerationMember)] == [("m-1", assignment)]
    assert [r.committed_offset for r in await rows(record_log, m.OffsetCommit)] == [42, 7]
    assert [(r.partition_index, r.cause) for r in await rows(record_log, m.OffsetRemoval)] == [(0, "deleted")]
    assert [r.cause for r in await rows(record_log, m.GroupRemoval)] == ["deleted"]


async def test_consumer_assignments_are_decoded_per_partition_and_bad_bytes_tolerated(
    record_log: SqlRecordLog,
) -> None:
    good = consumer_assignment({"a": [0, 2], "b": [1]}, version=1)
    members = [member("m-1", good, instance="i-1"), member("m-2", b"\x00\x01garbage"), member("m-3", b"")]
    non_consumer = group_record("c", 4, [member("x", b"\x00\x00\x00\x00\x00\x01")], 5, protocol_type="connect")
    done: list[WriteFailure | None] = []
    record_log.append([group_record("g", 3, members, 1_000), non_consumer], done.append)
    await record_log.flush()
    assert done == [None]
    parts = [
        (r.member_id, r.group_instance_id, r.topic, r.partition_index, r.generation_id)
        for r in await rows(record_log, m.AssignedPartition)
    ]
    assert sorted(parts) == [("m-1", "i-1", "a", 0, 3), ("m-1", "i-1", "a", 2, 3), ("m-1", "i-1", "b", 1, 3)]
    decoded = {(r.group_id, r.member_id): r.assignment_decoded for r in await rows(record_log, m.GenerationMember)}
    assert decoded == {("g", "m-1"): True, ("g", "m-2"): False, ("g", "m-3"): True, ("c", "x"): None}


async def test_a_column_none_in_every_row_of_a_batch_is_stored_as_null_like_a_bound_none(
    record_log: SqlRecordLog,
) -> None:
    # SQLite writes such a column as NULL in the statement text instead of binding None (storage.writers._insert):
    # the rows must read back the same as rows whose None was bound (a batch mixing None and values).
    dynamic = group_record("d", 1, [member("d-1"), member("d-2")], 1_000)  # no instance id in any row
    mixed = group_record("s", 1, [member("s-1", instance="i-1"), member("s-2")], 1_000)
    for batch in ([dynamic], [mixed]):
        done: list[WriteFailure | None] = []
        record_log.append(batch, done.append)
        await record_log.flush()
        assert done == [None]
    for model in (m.GenerationMember, m.CurrentGroupMember):
        stored = {(r.group_id, r.member_id): (r.group_instance_id, r.client_id, r.subscription) for r in await rows(
            record_log, model, "member_id")}  # fmt: skip
        assert stored == {
            (g.group_id, x.member_id): (x.group_instance_id, x.client_id, x.subscription)
            for g in (dynamic, mixed)
            for x in g.members
        }
    groups = {r.group_id: (r.protocol, r.leader) for r in await rows(record_log, m.CurrentGroup, "group_id")}
    assert groups == {"d": ("range", "d-1"), "s": ("range", "s-1")}


# ------------------------------------------------------------------------------------------------ pruning


async def test_prune_history_deletes_old_batches_only_and_keeps_current_state(record_log: SqlRecordLog) -> None:
    old = [group_record("g", 1, [member("m-1", consumer_assignment({"t": [0]}))], 1_000)]
    old += [commit("g", "t", 0, i, 1_000 + i) for i in range(30)]
    middle = [
        commit("h", "t", 0, 5, 5_000),
        new_offset_tombstone("g", "t", 0, cause=OffsetRemovalCause.EXPIRED, now_ms=5_001),
    ]
    young = [commit("g", "t", 1, 9, 9_000)]
    for batch in (old, middle, young):
        record_log.append(batch)
        await record_log.flush()
    before = await record_log.load()

    deleted = await record_log.prune_history(5_000, positions_per_step=4)  # several small steps
    assert deleted == len(old) + 1 + 1  # old records + the member row + the assigned partition row
    assert await record_log.load() == before
    assert [r.committed_offset for r in await rows(record_log, m.OffsetCommit)] == [5, 9]
    assert await count(record_log, m.GroupMetadataLog) == 0
    assert await count(record_log, m.GenerationMember) == 0
    assert await count(record_log, m.AssignedPartition) == 0
    assert [b.timestamp_ms for b in await rows(record_log, m.LogBatch, "last_position")] == [5_001, 9_000]

    assert await record_log.prune_history(5_000) == 0  # nothing more is that old
    assert await record_log.prune_history(10_000) == 3
    assert await count(record_log, m.LogBatch) == 0
    assert await record_log.load() == before
    # Positions keep increasing after everything was pruned.
    record_log.append([commit("g", "t", 2, 1, 11_000)])
    await record_log.flush()
    assert [r.position for r in await rows(record_log, m.OffsetCommit)] == [len(old) + len(middle) + len(young) + 1]


async def test_repeated_keys_inside_one_transaction_end_as_the_last_record(record_log: SqlRecordLog) -> None:
    g1 = group_record("g", 1, [member("m-1")], 10)
    g2 = group_record("g", 2, [member("m-2"), member("m-3")], 11)
    record_log.append(
        [
            commit("g", "t", 0, 1, 1),
            new_offset_tombstone("g", "t", 0, cause=OffsetRemovalCause.DELETED, now_ms=2),
            commit("g", "t", 0, 3, 3),
            commit("g", "t", 1, 1, 4),
            commit("g", "t", 1, 2, 5),
            new_offset_tombstone("g", "t", 1, cause=OffsetRemovalCause.DELETED, now_ms=6),
            g1,
            new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=12),
            g2,
            group_record("gone", 1, [member("x")], 13),
            new_group_tombstone("gone", cause=GroupRemovalCause.EXPIRED, now_ms=14),
        ]
    )
    await record_log.flush()
    assert record_log.stats.transactions == 1
    groups, offsets = split_loaded(await record_log.load())
    assert groups == {"g": g2}
    assert {k: r.offset for k, r in offsets.items()} == {("g", "t", 0): 3}
    assert [r.member_id for r in await rows(record_log, m.CurrentGroupMember, "member_index")] == ["m-2", "m-3"]


async def test_a_batch_is_capped_at_max_batch_records(database: Database) -> None:
    log = await database.open_log(max_batch_records=10)
    try:
        done: list[WriteFailure | None] = []
        for i in range(100):
            log.append([commit("g", "t", 0, i, i)], done.append)
        log.append([commit("g", "t", 1, i, i) for i in range(25)], done.append)  # a bigger call is never split
        await log.flush()
        assert done == [None] * 101
        sizes = [b.record_count for b in await rows(log, m.LogBatch, "last_position")]
        assert sizes[:10] == [10] * 10 and sizes[10:] == [25]
    finally:
        await log.close()


async def test_two_writers_on_one_database_never_reuse_a_position(database: Database) -> None:
    first, second = await database.open_log(), await database.open_log()
    try:
        answers: list[tuple[str, int, WriteFailure | None]] = []
        for round_ in range(3):
            for name, log in (("first", first), ("second", second)):
                offset = round_ * 10 + (name == "second")
                log.append([commit("g", "t", 0, offset, offset)], lambda e, n=name, o=offset: answers.append((n, o, e)))
                await log.flush()
        # A writer whose cached position went stale fails that batch (and re-reads): nothing is interleaved.
        assert any(e == WriteFailure.UNAVAILABLE for _, _, e in answers)
        stored = await rows(first, m.OffsetCommit)
        assert sorted(r.committed_offset for r in stored) == sorted(o for _, o, e in answers if e is None)
        assert [r.position for r in stored] == list(range(1, len(stored) + 1))
    finally:
        await first.close()
        await second.close()


async def test_every_transaction_is_reported_to_the_batch_observer(database: Database) -> None:
    seen: list[tuple[int, bool]] = []
    log = await database.open_log(on_batch=lambda records, seconds, ok: seen.append((records, ok and seconds >= 0)))
    try:
        log.append([commit("g", "t", 0, 1, 1), commit("g", "t", 1, 1, 1)])
        log.append([commit("g", "t", 2, 1, 1)])
        await log.flush()
        log.append([commit("g", "t", 0, 2, 2)])
        await log.flush()
        assert seen == [(3, True), (1, True)]
    finally:
        await log.close()


async def test_background_pruning_task_prunes_until_cancelled(record_log: SqlRecordLog) -> None:
    for offset, ts in ((1, 1_000), (2, 50_000)):  # two transactions: pruning goes by whole batches
        record_log.append([commit("g", "t", 0, offset, ts)])
        await record_log.flush()
    task = asyncio.get_running_loop().create_task(
        record_log.run_history_pruning(retention_ms=10_000, interval_s=0.01, now_ms=lambda: 40_000)
    )
    try:
        deadline = asyncio.get_running_loop().time() + 20
        while await count(record_log, m.OffsetCommit) != 1:
            assert asyncio.get_running_loop().time() < deadline, "history was not pruned in time"
            await asyncio.sleep(0.01)
        assert [r.committed_offset for r in await rows(record_log, m.OffsetCommit)] == [2]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
