"""The consumer status (Burrow's OK/WARN/ERR per group, OK/WARN/STOP/STALL/REWIND per partition) on the dashboard, in
headless Chromium, checked against ``GET /v1/groups`` and ``GET /v1/groups/{group}/status`` of the same app.

The world is the real core on a manual clock, with a ``LagEvaluator`` on its record stream (as the daemon wires it)
measuring against the real broker core's high watermarks; each group's commits are chosen so that its status is
known: the rules are in ``docs/consumer-status.md``.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.topics import TopicRegistry
from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.record_log import MemoryLog
from runtime.activity import GroupActivity
from runtime.lag_evaluation import LagEvaluator, LagRules
from runtime.metrics import Metrics
from runtime.record_stream import RecordStream
from servers.http import HttpServer, MemoryHistory, create_http_app
from tests.cdp import Browser
from tests.http.world import START_MS, Consumer, World

from .conftest import on_loop, serve
from .test_dashboard import dump_dom

READY = "document.getElementById('view').dataset.ready === '1'"


def status_world() -> World:
    clock = ManualClock(START_MS)
    timer = ManualTimer(clock)
    memory = MemoryLog(auto_commit=True)  # commits are durable at once: the evaluator sees them at append
    history = MemoryHistory()
    metrics = Metrics()
    activity = GroupActivity(clock.now_ms)
    holder: dict[str, World] = {}

    def log_end(topic: str, partition: int) -> int | None:
        p = holder["world"].broker.partition(topic, partition)
        return None if p is None else p.high_watermark

    lag = LagEvaluator(clock.now_ms, log_end, LagRules(intervals=4))
    core = GroupCoordinator(GroupConfig(), clock, timer, RecordStream(memory, metrics, history, activity, lag))
    topics = TopicRegistry(auto_create=False)
    topics.add("orders", 4)
    world = holder["world"] = World(clock, timer, memory, core, history, metrics, topics, None, activity)
    world.app = create_http_app(core, clock=clock, topics=topics, history=history, metrics=metrics,
                                activity=activity, broker=world.broker, lag=lag)  # fmt: skip
    return world


def tick(world: World, commits: dict[str, dict[tuple[str, int], int]], produced: int = 10) -> None:
    """One second: ``produced`` records onto every orders partition, then the groups' commits."""
    for p in range(4):
        world.produce("orders", p, produced)
    for group, offsets in commits.items():
        world.commit(group, offsets)
    world.advance(1_000)


def populate(world: World) -> None:
    # "stopped": commits behind the log end for 4 s, then nothing for 200 s while producers go on: STOP (ERR)
    for i in range(4):
        tick(world, {"stopped": {("orders", 3): 5 * (i + 1)}})
    world.advance(200_000)
    # a live group that has committed nothing yet: no status to show (formed now: its join phase takes 3 s of the
    # manual clock, which would otherwise count as silence in the windows below)
    world.form_group("idle", [Consumer("idle-1")])
    # "mixed": orders-0 advances but falls behind (WARN), orders-1 commits the same offset (STALL), orders-2 went
    # back from 20 to 5 (REWIND); "steady" commits the log end (OK); "slow" only falls behind (WARN).
    for i, back in enumerate((10, 20, 5, 6)):
        tick(world, {
            "mixed": {("orders", 0): 5 * (i + 1), ("orders", 1): 3, ("orders", 2): back},
            "steady": {("orders", p): 10 * (i + 1) + 40 for p in range(4)},
            "slow": {("orders", 0): 5 * (i + 1) + 40},
        })  # fmt: skip


@pytest.fixture(scope="module")
def status_served() -> Iterator[tuple[World, HttpServer]]:
    world = status_world()
    populate(world)
    with serve(world) as server:
        yield world, server


def api(server: HttpServer, path: str) -> Any:
    with urllib.request.urlopen(server.url + path, timeout=10) as resp:
        return json.loads(resp.read())


def test_the_api_says_what_the_scenario_was_built_for(status_served: tuple[World, HttpServer]) -> None:
    _world, server = status_served
    listed = {g["group_id"]: g["status"] for g in api(server, "/v1/groups")["groups"]}
    assert listed == {"stopped": "ERR", "mixed": "ERR", "steady": "OK", "slow": "WARN", "idle": None}
    mixed = api(server, "/v1/groups/mixed/status?all=true")
    assert {p["partition"]: p["status"] for p in mixed["partitions"]} == {0: "WARN", 1: "STALL", 2: "REWIND"}
    assert api(server, "/v1/groups/stopped/status")["partitions"][0]["status"] == "STOP"


def badges(row: str) -> list[str]:
    return re.findall(r'class="badge status (\w+)" data-status="\1"', row)


def test_groups_list_shows_each_groups_status_as_the_api_does(
    chromium: str, status_served: tuple[World, HttpServer], tmp_path: Path
) -> None:
    _world, server = status_served
    dom = dump_dom(chromium, tmp_path, server.url + "/")
    rows = dict(re.findall(r'<tr data-group="([^"]+)">(.*?)</tr>', dom, flags=re.S))
    cells = {g: re.search(r'<td class="consumer-status" data-status="(\w*)">(.*?)</td>', r, re.S) for g, r in
             rows.items()}  # fmt: skip
    expected = {g["group_id"]: g["status"] for g in api(server, "/v1/groups")["groups"]}
    assert set(cells) == set(expected)
    for group, status in expected.items():
        cell = cells[group]
        assert cell is not None, group
        assert cell.group(1) == (status or ""), group
        assert badges(cell.group(2)) == ([status] if status else []), group
    assert "\N{EN DASH}" in cells["idle"].group(2)  # type: ignore[union-attr]


def test_group_page_shows_the_group_status_and_each_partitions(
    chromium: str, status_served: tuple[World, HttpServer], tmp_path: Path
) -> None:
    _world, server = status_served
    for group in ("mixed", "stopped", "steady", "slow"):
        want = api(server, f"/v1/groups/{group}/status?all=true")
        dom = dump_dom(chromium, tmp_path, f"{server.url}/#/group/{group}")
        head = re.search(r'<span id="g-status" data-status="(\w*)">(.*?)</span></h1>', dom, re.S)
        assert head is not None and head.group(1) == want["status"] and badges(head.group(2)) == [want["status"]]
        shown = {
            tp: status
            for tp, status in re.findall(
                r'<tr data-tp="([^"]+)">.*?<td class="consumer-status" data-status="(\w*)">', dom, re.S
            )
        }
        expected = {f"{p['topic']}/{p['partition']}": p["status"] for p in want["partitions"]}
        # every committed partition with its status; a partition assigned but never committed has none
        assert {tp: s for tp, s in shown.items() if s} == expected, group
    mixed = dump_dom(chromium, tmp_path, f"{server.url}/#/group/mixed")
    assert "3 of 3 partition(s) not OK (REWIND 1, STALL 1, WARN 1)" in re.sub(r"\s+", " ", mixed)


def test_idle_group_page_has_no_status_to_show(
    chromium: str, status_served: tuple[World, HttpServer], tmp_path: Path
) -> None:
    _world, server = status_served
    assert api(server, "/v1/groups/idle/status")["partition_count"] == 0
    dom = dump_dom(chromium, tmp_path, f"{server.url}/#/group/idle")
    assert '<span id="g-status" data-status=""></span>' in dom and "no commit to judge yet" in dom
    assert 'class="badge status' not in dom


def test_a_group_that_stops_committing_turns_err_on_the_next_refresh(chromium: str, tmp_path: Path) -> None:
    world = status_world()
    for i in range(4):
        tick(world, {"live": {("orders", 0): 10 * (i + 1)}})  # at the log end each time: OK
    with serve(world) as server, Browser(chromium, tmp_path / "profile") as page:
        page.navigate(f"{server.url}/?refresh=300#/group/live")
        cell = "document.querySelector('#offsets-body tr[data-tp=\"orders/0\"] td.consumer-status').dataset.status"
        page.wait_for(f"{READY} && {cell} === 'OK'", what="orders-0 OK")
        assert page.evaluate("document.getElementById('g-status').dataset.status") == "OK"

        # the consumer goes away; producers go on, and the window's span and the 100 s of "caught up recently" pass
        def go_silent() -> None:
            world.produce("orders", 0, 10)
            world.advance(200_000)

        on_loop(world, go_silent)
        page.wait_for(f"{cell} === 'STOP'", what="orders-0 STOP")
        page.wait_for("document.getElementById('g-status').dataset.status === 'ERR'", what="the group ERR")
        assert api(server, "/v1/groups/live/status")["status"] == "ERR"
        page.navigate(f"{server.url}/?refresh=300#/")
        page.wait_for(f"{READY} && document.querySelector('tr[data-group=\"live\"] .badge.status.ERR')",
                      what="ERR in the groups list")  # fmt: skip
