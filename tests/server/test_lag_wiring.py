"""The daemon's wiring of the Burrow-style evaluator: [lag] settings reach it, durable commits feed it, and after a
restart on the same database the loaded offsets start its windows (lag unknown)."""

from __future__ import annotations

from pathlib import Path

from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.records import OffsetRemovalCause, new_offset_tombstone
from daemon.app import App, lag_seed_entries
from daemon.settings import load_settings
from protocol.errors import ErrorCode
from runtime.lag_evaluation import GroupStatus
from runtime.loop import deferred_to_future


async def test_commits_feed_the_evaluator_and_a_restart_seeds_it(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        kafka={"port": 0},
        http={"listen": ""},
        storage={"data_dir": str(tmp_path)},
        topics={"initial": {"orders": 2}},
        lag={"intervals": 3},
    )
    app = await App.open(settings)
    await app.start()
    try:
        assert app.lag.rules.intervals == 3
        req = OffsetCommitRequest("g", -1, "", None, [OffsetCommitPartition("orders", 1, 5, -1, "")], 8)
        result = await deferred_to_future(app.coordinator.commit_offsets(req))
        assert [p.error for p in result.partitions] == [ErrorCode.none]
        [p] = app.lag.evaluate("g").partitions
        assert p.end is not None and (p.end.offset, p.end.lag) == (5, 0)  # nothing produced: log end 0, no lag
        committed_at = p.end.timestamp_ms
    finally:
        await app.stop()

    app = await App.open(settings)
    await app.start()
    try:
        await app.lag_seeded  # the loaded offsets seed the windows in the background, after the listeners open
        ev = app.lag.evaluate("g")
        assert ev.status is GroupStatus.OK
        [p] = ev.partitions
        assert p.start is not None and (p.start.offset, p.start.timestamp_ms, p.start.lag) == (5, committed_at, None)
        assert p.complete == 1 / 3
    finally:
        await app.stop()


async def test_the_seed_reads_loaded_rows_and_sees_what_changes_meanwhile() -> None:
    """``lag_seed_entries`` reads a group not used since the load from its rows (nothing built for it); a group used
    while the seed is in it (a commit builds its offsets) is read on as it is then: an offset deleted meanwhile is
    skipped, the other rows are read as stored."""
    settings = load_settings(None, kafka={"port": 0}, http={"listen": ""}, storage={"url": "memory"})
    app = App(settings)
    offsets = app.coordinator.offsets
    row = ("t", 0, 7, 2, "m", 1_000, None)
    app.coordinator.load_offsets(
        [("a", [row, ("t", 1, 8, 2, "", 1_001, None), ("u", 0, 9, -1, "", 1_002, 5_000)]), ("b", [row])]
    )
    assert offsets.loaded_rows("a") is not None and offsets.loaded_rows("b") is not None
    entries = lag_seed_entries(offsets)
    assert next(entries) == ("a", "t", 0, 7, 1_000)
    offsets.replay(new_offset_tombstone("a", "t", 1, cause=OffsetRemovalCause.DELETED, now_ms=2_000))
    assert offsets.loaded_rows("a") is None  # built by the tombstone's replay
    assert list(entries) == [("a", "u", 0, 9, 1_002), ("b", "t", 0, 7, 1_000)]
    assert offsets.loaded_rows("b") is not None  # the seed built nothing
    assert {
        k: (o.offset, o.leader_epoch, o.metadata, o.expire_timestamp_ms) for k, o in offsets.committed("a").items()
    } == {
        ("t", 0): (7, 2, "m", None),
        ("u", 0): (9, -1, "", 5_000),
    }
    assert list(lag_seed_entries(offsets)) == [
        ("a", "t", 0, 7, 1_000),
        ("a", "u", 0, 9, 1_002),
        ("b", "t", 0, 7, 1_000),
    ]
