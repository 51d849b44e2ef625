"""Adapters against the real core (manual clock/timer, in-memory log): kio request in, kio response out."""

from __future__ import annotations

from typing import Any

import pytest
from kio.index import load_request_schema

from broker.admin import TopicAdmin
from broker.partitions import Broker, MemoryDataLog
from broker.topics import TopicRegistry
from coordinator.clock import ManualClock, ManualTimer
from coordinator.config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.record_log import MemoryLog
from protocol.apis import SUPPORTED_VERSIONS
from protocol.codec import decode_response_frame, encode_response
from protocol.headers import RequestHeader
from servers.kafka import HANDLERS, Node, RequestContext, Services
from servers.kafka.build import build


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock(1_000_000)
        self.timer = ManualTimer(self.clock)
        self.log = MemoryLog()
        self.coordinator = GroupCoordinator(
            GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100), self.clock, self.timer, self.log
        )
        self.topics = TopicRegistry(auto_create=True, default_partitions=2)
        self.topics.add("t", 3)
        self.services = Services(
            coordinator=self.coordinator,
            topics=self.topics,
            node=Node(7, "coord.example", 19092, "cluster-x"),
            supported_versions=dict(SUPPORTED_VERSIONS),
            max_fetch_wait_ms=50,
        )
        self.broker = Broker(self.topics, MemoryDataLog(), self.clock.now_ms, keep_bytes=True)
        self.broker.start()
        self.services.broker = self.broker
        self.services.admin = TopicAdmin(self.broker, node_id=7)

    def call(self, api_key: int, version: int, client_id: str = "cid", **fields: Any) -> Any:
        """The handler's result (a response, or a coroutine for a parked request). Checks the response encodes."""
        body = build(load_request_schema(api_key, version), fields)
        ctx = RequestContext(api_key, version, 1, client_id, "/10.0.0.1")
        return HANDLERS[api_key](self.services, ctx, body)

    async def respond(self, api_key: int, version: int, **fields: Any) -> Any:
        result = self.call(api_key, version, **fields)
        if hasattr(result, "__await__"):
            result = await result
        if isinstance(result, bytes):  # a finished frame (OffsetCommit): it must read back as this version's response
            correlation_id, result = decode_response_frame(api_key, version, result)
            assert correlation_id == 1
        encode_response(RequestHeader(api_key, version, 1, "cid"), result)  # every response must be encodable
        return result


@pytest.fixture
def h() -> Harness:
    return Harness()
