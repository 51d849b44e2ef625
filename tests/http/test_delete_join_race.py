"""The operator's DELETE goes through the core's DeleteGroups: a JoinGroup that arrives while the tombstone is being
written gets a new group, which the tombstone does not remove (issue #16, point 1; the core's own tests are in
tests/core/test_deletion.py)."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

from coordinator.group import GroupState
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.records import GroupTombstone

from .world import Consumer, make_world


async def test_join_while_an_http_delete_is_being_written_gets_a_group_that_survives_it() -> None:
    world = make_world(auto_commit=False)  # the core is real; the log holds writes until told
    world.core.commit_offsets(OffsetCommitRequest("g", -1, "", None, [OffsetCommitPartition("orders", 0, 1)], 8))
    world.log.commit()
    async with TestClient(TestServer(world.app)) as client:
        deleting = asyncio.ensure_future(client.request("DELETE", "/v1/groups/g"))
        for _ in range(1_000):  # let the request reach the handler: it appends the tombstones and waits for them
            if world.log.pending:
                break
            await asyncio.sleep(0)
        assert world.log.pending == 1
        joiner = Consumer("joiner")
        joining = world._join("g", joiner)
        world.log.commit()
        response = await deleting
        assert response.status == 200, await response.text()
        assert not joining.done  # parked in the new group's join phase, not answered COORDINATOR_NOT_AVAILABLE
        group = world.core.groups.group("g")
        assert group is not None and group.state is GroupState.PREPARING_REBALANCE
        assert set(group.members) == {joiner.member_id}

        world.log.auto_commit = True
        world.advance(3_000)  # the new group's initial join delay
        assert joining.done and joining.result().generation_id == 1
        world.sync_all("g", [joiner], 1)
        assert group.state is GroupState.STABLE
        assert world.core.offsets.committed("g") == {}
        body = await (await client.get("/v1/groups/g")).json()
        assert body["state"] == "Stable", body
    assert len(world.log.of_type(GroupTombstone)) == 1
