"""The real core on top of SqlRecordLog: commits answered only once durable, state rebuilt by replaying load()."""

from __future__ import annotations

import asyncio

from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest, OffsetFetchRequest
from protocol.errors import ErrorCode
from storage import SqlRecordLog

from .conftest import Database
from .outages import log_with_outage


def coordinator(log: SqlRecordLog) -> GroupCoordinator:
    clock = ManualClock(1_700_000_000_000)
    return GroupCoordinator(GroupConfig(), clock, ManualTimer(clock), log)


async def commit(c: GroupCoordinator, group: str, offsets: dict[tuple[str, int], int]) -> list[ErrorCode]:
    request = OffsetCommitRequest(
        group_id=group,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        partitions=[OffsetCommitPartition(t, p, o, leader_epoch=2, metadata="m") for (t, p), o in offsets.items()],
        api_version=8,
    )
    deferred = c.commit_offsets(request)
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()
    deferred.add_callback(lambda _: answered.done() or answered.set_result(None))
    await asyncio.wait_for(answered, timeout=30)
    return [p.error for p in deferred.result().partitions]


def fetched(c: GroupCoordinator, group: str) -> dict[tuple[str, int], int]:
    result = c.fetch_offsets(OffsetFetchRequest(group_id=group, topics=None))
    return {(p.topic, p.partition): p.offset for p in result.partitions if p.error == ErrorCode.none}


async def test_commits_survive_a_restart_through_load_and_replay(database: Database) -> None:
    log = await database.open_log()
    try:
        c = coordinator(log)
        assert await commit(c, "g", {("t", 0): 5, ("t", 1): 6}) == [ErrorCode.none, ErrorCode.none]
        assert await commit(c, "g", {("t", 0): 7}) == [ErrorCode.none]
        assert await commit(c, "h", {("u", 3): 1}) == [ErrorCode.none]
        before = {g: fetched(c, g) for g in ("g", "h")}
    finally:
        await log.close()
    log = await database.open_log()
    try:
        restarted = coordinator(log)
        for record in await log.load():
            restarted.replay(record)
        restarted.on_loaded()
        assert (
            {g: fetched(restarted, g) for g in ("g", "h")}
            == before
            == {
                "g": {("t", 0): 7, ("t", 1): 6},
                "h": {("u", 3): 1},
            }
        )
    finally:
        await log.close()


async def test_a_failed_write_is_answered_with_coordinator_not_available_and_not_applied(database: Database) -> None:
    async with log_with_outage(database) as (log, (break_db, heal_db)):
        c = coordinator(log)
        assert await commit(c, "g", {("t", 0): 5}) == [ErrorCode.none]
        await break_db()
        assert await commit(c, "g", {("t", 0): 6}) == [ErrorCode.coordinator_not_available]
        assert fetched(c, "g") == {("t", 0): 5}  # the core did not run ahead of the log
        await heal_db()
        assert await commit(c, "g", {("t", 0): 8}) == [ErrorCode.none]
        assert fetched(c, "g") == {("t", 0): 8}
