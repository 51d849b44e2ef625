"""GET /v1/groups/{group}/status, the group list's status, the kgc_group_status metrics and ``kgc groups status``:
the real core on a manual clock, a ``LagEvaluator`` on its record stream, and a log end the test moves by hand."""

from __future__ import annotations

import argparse
import io
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from broker.topics import TopicRegistry
from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.messages import OffsetCommitPartition, OffsetCommitRequest
from coordinator.record_log import MemoryLog
from daemon.cli import show_status
from protocol.errors import ErrorCode
from runtime.lag_evaluation import LagEvaluator, LagRules
from runtime.lag_metrics import LagStatusCollector
from runtime.metrics import Metrics
from runtime.record_stream import RecordStream
from servers.http import create_http_app

from .test_metrics import samples
from .world import START_MS

Client = TestClient  # type: ignore[type-arg]


class Stack:
    def __init__(self, per_group: bool = True) -> None:
        self.clock = ManualClock(START_MS)
        self.ends: dict[tuple[str, int], int] = {}
        self.lag = LagEvaluator(self.clock.now_ms, lambda t, p: self.ends.get((t, p)), LagRules(intervals=4))
        self.metrics = Metrics(per_group_labels=per_group)
        self.metrics.registry.register(LagStatusCollector(self.lag, per_group=per_group))
        stream = RecordStream(MemoryLog(), self.metrics, self.lag)
        self.core = GroupCoordinator(GroupConfig(), self.clock, ManualTimer(self.clock), stream)
        topics = TopicRegistry(auto_create=False)
        topics.add("orders", 2)
        self.app = create_http_app(self.core, clock=self.clock, topics=topics, metrics=self.metrics, lag=self.lag)

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        req = OffsetCommitRequest(group, -1, "", None, [OffsetCommitPartition(t, p, o, -1, "") for (t, p), o in
                                                        offsets.items()], 8)  # fmt: skip
        d = self.core.commit_offsets(req)
        assert d.done and all(p.error is ErrorCode.none for p in d.result().partitions)

    def second(self, produced: int, committed: dict[int, int], group: str = "g") -> None:
        for p in (0, 1):
            self.ends[("orders", p)] = self.ends.get(("orders", p), 0) + produced
        self.commit(group, {("orders", p): o for p, o in committed.items()})
        self.clock.set(self.clock.now_ms() + 1_000)


@pytest.fixture
def stack() -> Stack:
    return Stack()


@pytest.fixture
async def client(stack: Stack) -> AsyncIterator[Client]:
    async with TestClient(TestServer(stack.app)) as c:
        yield c


async def test_status_lists_problems_and_totals(stack: Stack, client: Client) -> None:
    for i in range(4):  # partition 0 keeps up, partition 1 is stuck at 3
        stack.second(10, {0: (i + 1) * 10, 1: 3})
    resp = await client.get("/v1/groups/g/status")
    assert resp.status == 200
    body = await resp.json()
    assert body["status"] == "ERR" and body["complete"] == 1.0
    assert body["partition_count"] == 2 and body["totallag"] == 37 and body["intervals"] == 4
    [p] = body["partitions"]  # only the partitions not OK
    assert (p["topic"], p["partition"], p["status"], p["current_lag"]) == ("orders", 1, "STALL", 37)
    assert p["start"] == {"offset": 3, "timestamp_ms": START_MS, "lag": 7}
    assert p["end"] == {"offset": 3, "timestamp_ms": START_MS + 3_000, "lag": 37}
    assert body["maxlag"]["partition"] == 1
    every = await (await client.get("/v1/groups/g/status", params={"all": "true"})).json()
    assert [(x["partition"], x["status"]) for x in every["partitions"]] == [(0, "OK"), (1, "STALL")]

    listed = await (await client.get("/v1/groups")).json()
    assert [(g["group_id"], g["status"]) for g in listed["groups"]] == [("g", "ERR")]

    got = samples(stack.metrics.render().decode())
    assert got[("kgc_group_status", (("group", "g"), ("status", "ERR")))] == 1
    assert got[("kgc_group_status", (("group", "g"), ("status", "OK")))] == 0
    assert got[("kgc_group_partitions_by_status", (("group", "g"), ("status", "STALL")))] == 1
    assert got[("kgc_groups_by_status", (("status", "ERR"),))] == 1

    out = io.StringIO()
    show_status(body, out)
    text = out.getvalue()
    assert "Status:   ERR" in text and "STALL" in text and "orders" in text


async def test_status_of_a_group_that_catches_up_goes_back_to_ok(stack: Stack, client: Client) -> None:
    for _ in range(4):
        stack.second(10, {0: 0, 1: 0})
    assert (await (await client.get("/v1/groups/g/status")).json())["status"] == "ERR"
    stack.commit("g", {("orders", 0): 40, ("orders", 1): 40})
    body = await (await client.get("/v1/groups/g/status")).json()
    assert (body["status"], body["totallag"], body["partitions"]) == ("OK", 0, [])


async def test_unknown_group_is_404_and_a_group_without_commits_is_ok(stack: Stack, client: Client) -> None:
    resp = await client.get("/v1/groups/nobody/status")
    assert resp.status == 404
    listed = await (await client.get("/v1/groups")).json()
    assert listed["groups"] == []
    stack.commit("g", {("orders", 0): 0})
    assert (await (await client.get("/v1/groups")).json())["groups"][0]["status"] == "OK"


def test_per_group_series_follow_the_setting() -> None:
    stack = Stack(per_group=False)
    stack.second(10, {0: 10, 1: 10})
    got = samples(stack.metrics.render().decode())
    assert got[("kgc_groups_by_status", (("status", "OK"),))] == 1
    assert not any(name == "kgc_group_status" for name, _ in got)


def test_cli_status_command_calls_the_endpoint() -> None:
    from daemon.cli import add_groups_subcommands, run_command

    parser = argparse.ArgumentParser()
    add_groups_subcommands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["groups", "status", "a/b", "--all"])
    calls: list[tuple[Any, ...]] = []

    class Api:
        def request(self, method: str, path: str, query: Any = None, body: Any = None) -> Any:
            calls.append((method, path, query))
            return {}

    run_command(args, Api())  # type: ignore[arg-type]
    assert calls == [("GET", "/v1/groups/a%2Fb/status", {"all": "true"})]
