"""The dashboard's topics view in headless Chromium: per partition the log start and end, the records between them,
the bytes kept, and each topic's retention and cleanup policy, from ``GET /v1/topics`` over a real broker core."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.admin import TopicAdmin
from broker.partitions import Broker, MemoryDataLog
from servers.http import HttpServer
from servers.http.app import create_http_app
from tests.http.world import World, make_world

from .conftest import serve
from .test_dashboard import dump_dom, screenshot


def batch(n: int) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_000, key=None, value=b"v" * 100, headers=[])
    return bytes(b.build())


@pytest.fixture(scope="module")
def topics_served() -> Iterator[tuple[World, Broker, HttpServer]]:
    world = make_world()
    broker = Broker(world.topics, MemoryDataLog(), world.clock.now_ms, keep_bytes=True)
    broker.start()
    broker.configure("orders", {"retention.ms": "3600000", "retention.bytes": "1048576"})
    for _ in range(4):
        broker.produce([("orders", 2, batch(5))], lambda _answers: None)
    p = broker.partition("orders", 2)
    assert p is not None
    broker.advance_log_start([(p, 10)])  # DeleteRecords / retention: the first two batches go
    world.app = create_http_app(world.core, clock=world.clock, topics=world.topics, history=world.history,
                                admin=TopicAdmin(broker, node_id=1))  # fmt: skip
    with serve(world) as server:
        yield world, broker, server


def test_topics_page_shows_log_start_end_bytes_and_retention(
    chromium: str, topics_served: tuple[World, Broker, HttpServer], tmp_path: Path
) -> None:
    _world, broker, server = topics_served
    dom = dump_dom(chromium, tmp_path, server.url + "/#/topics")
    assert 'data-view="topics"' in dom
    rows = {
        (topic, int(part)): body
        for topic, part, body in re.findall(r'<tr data-topic="([^"]+)" data-partition="(\d+)">(.*?)</tr>', dom, re.S)
    }
    assert set(rows) == {("orders", i) for i in range(4)} | {("payments", 0), ("payments", 1)}

    def cells(key: tuple[str, int]) -> list[str]:
        return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[key], re.S)]

    p = broker.partition("orders", 2)
    assert p is not None and p.size_bytes > 0
    assert cells(("orders", 2))[1:6] == ["2", "10", "20", "10", f"{p.size_bytes / 1024:.1f} KiB"]
    assert cells(("orders", 0))[0] == "orders" and cells(("orders", 0))[2:5] == ["0", "0", "0"]
    assert cells(("orders", 0))[6] == "1 h (topic) · 1.0 MiB (topic)" and cells(("orders", 0))[7] == "delete"
    assert cells(("payments", 0))[6] == "7 d · no size limit"
    cards = re.findall(r'<div class="n">([^<]*)</div><div class="l">([^<]*)</div>', dom)
    assert ("2", "Topics") in cards and ("6", "Partitions") in cards

    image = screenshot(chromium, tmp_path, server.url + "/#/topics", "topics.png")
    assert image.size == (1280, 900)
