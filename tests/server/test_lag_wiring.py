"""The daemon's wiring of the Burrow-style evaluator: [lag] settings reach it, durable commits feed it, and after a
restart on the same database the loaded offsets start its windows (lag unknown)."""

from __future__ import annotations

from pathlib import Path

from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from daemon.app import App
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
