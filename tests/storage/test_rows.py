"""Pure parts of storage: URL defaults, record -> row folding (no database)."""

from __future__ import annotations

from pathlib import Path

from coordinator.records import GroupRemovalCause, OffsetRemovalCause, new_group_tombstone, new_offset_tombstone
from storage import models as m
from storage.database import database_url
from storage.models import table
from storage.rows import CURRENT_OFFSET_COLUMNS, OFFSET_COMMIT_COLUMNS, build_batch, current_offset_tuples

from .records_gen import commit, consumer_assignment, group_record, member


def test_database_url_defaults_to_a_sqlite_file_in_the_data_dir_and_fills_in_async_drivers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert database_url(None, data) == f"sqlite+aiosqlite:///{data.resolve()}/coordinator.db"
    assert data.is_dir()
    assert database_url("postgresql://u:p@db:5433/kgc") == "postgresql+asyncpg://u:p@db:5433/kgc"
    assert database_url("sqlite:////var/lib/kgc.db") == "sqlite+aiosqlite:////var/lib/kgc.db"
    assert database_url("postgresql+asyncpg://db/kgc") == "postgresql+asyncpg://db/kgc"


def test_build_batch_positions_rows_and_net_snapshot_effect() -> None:
    g = group_record("g", 2, [member("a", consumer_assignment({"t": [1, 1, 0]})), member("b", b"\xff")], 50)
    batch = build_batch(
        [
            commit("g", "t", 0, 1, 10),
            new_offset_tombstone("g", "t", 0, cause=OffsetRemovalCause.EXPIRED, now_ms=20),
            commit("g", "t", 1, 5, 30),
            g,
            new_group_tombstone("h", cause=GroupRemovalCause.EXPIRED, now_ms=40),
        ],
        first_position=101,
    )
    assert (batch.first_position, batch.last_position, batch.record_count, batch.timestamp_ms) == (101, 105, 5, 50)
    assert [r[0] for r in batch.offset_commits] == [101, 103]
    assert batch.offset_commits[1] == (103, "g", "t", 1, 5, 3, "", 30, "m-1", 1, None)
    assert [r["position"] for r in batch.log_rows[m.OffsetRemoval]] == [102]
    assert [(r["position"], r["topic"], r["partition_index"]) for r in batch.log_rows[m.AssignedPartition]] == [
        (104, "t", 0),
        (104, "t", 1),  # duplicates in the assignment bytes collapse: one row per partition
    ]
    assert [(r["member_id"], r["assignment_decoded"]) for r in batch.log_rows[m.GenerationMember]] == [
        ("a", True),
        ("b", False),
    ]
    assert batch.offset_deletes == {("g", "t", 0)}
    assert {k: p for k, (p, _) in batch.offset_upserts.items()} == {("g", "t", 1): 103}
    assert batch.group_upserts == {"g": (104, g)} and batch.group_deletes == {"h"}


def test_a_later_record_for_the_same_key_wins_inside_a_batch() -> None:
    batch = build_batch(
        [
            new_offset_tombstone("g", "t", 0, cause=OffsetRemovalCause.DELETED, now_ms=1),
            commit("g", "t", 0, 9, 2),
            new_group_tombstone("g", cause=GroupRemovalCause.DELETED, now_ms=3),
            group_record("g", 1, [], 4),
        ],
        first_position=1,
    )
    assert batch.offset_deletes == set() and list(batch.offset_upserts) == [("g", "t", 0)]
    assert batch.group_deletes == set() and list(batch.group_upserts) == ["g"]


def test_the_commit_paths_tuples_follow_the_models_column_order() -> None:
    for model, columns in ((m.OffsetCommit, OFFSET_COMMIT_COLUMNS), (m.CurrentOffset, CURRENT_OFFSET_COLUMNS)):
        declared = [c.name for c in table(model).columns]
        assert [c for c in declared if c != "expire_timestamp_ms"] + ["expire_timestamp_ms"] == list(columns)
    batch = build_batch([commit("g", "t", 0, 1, 10), commit("g", "t", 0, 2, 11), commit("g", "u", 3, 7, 12)], 5)
    assert current_offset_tuples(batch) == [
        ("g", "t", 0, 6, 2, 3, "", 11, "m-1", 1, None),
        ("g", "u", 3, 7, 7, 3, "", 12, "m-1", 1, None),
    ]
