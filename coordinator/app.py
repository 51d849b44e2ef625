"""Wiring: settings -> record log -> core coordinator -> API services -> Kafka listener.

``App`` owns the lifecycle: ``start()`` loads state (replay, then ``on_loaded``) and opens the listener; ``stop()``
stops accepting, closes connections, cancels timers and flushes the record log. The record log is
``MemoryLog(auto_commit=True, keep=False)`` until durable storage slots in through ``record_log`` (an object with
``append`` plus optional async ``load() -> records`` and ``close()``, like ``storage.log.SqlRecordLog``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from coordinator.api import Node, Services
from coordinator.core.clock import Clock, SystemClock
from coordinator.core.coordinator import GroupCoordinator
from coordinator.core.log import MemoryLog, RecordLog
from coordinator.runtime import AsyncioTimer
from coordinator.server import KafkaServer
from coordinator.settings import Settings
from coordinator.topics import TopicRegistry
from protocol.apis import SUPPORTED_VERSIONS

log = logging.getLogger("coordinator.app")


class App:
    def __init__(self, settings: Settings, *, record_log: RecordLog | None = None, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.timer = AsyncioTimer()
        self.record_log: RecordLog = record_log if record_log is not None else MemoryLog(auto_commit=True, keep=False)
        self.coordinator = GroupCoordinator(settings.group_config(), self.clock, self.timer, self.record_log)
        self.topics = TopicRegistry(
            auto_create=settings.topics.auto_create, default_partitions=settings.topics.num_partitions
        )
        for name, partitions in settings.topics.initial.items():
            self.topics.add(name, partitions)
        k = settings.kafka
        self.services = Services(
            coordinator=self.coordinator,
            topics=self.topics,
            node=Node(k.node_id, k.advertised_host or k.host, k.advertised_port or k.port, k.cluster_id),
            supported_versions=dict(SUPPORTED_VERSIONS),
            max_fetch_wait_ms=k.max_fetch_wait_ms,
        )
        self.server = KafkaServer(
            self.services, host=k.host, port=k.port, max_frame_size=k.max_frame_size, max_inflight=k.max_inflight
        )

    @property
    def port(self) -> int:
        return self.server.bound_port

    async def start(self) -> None:
        # Durable logs (storage.log.SqlRecordLog) return the stored state records; replay them before anything runs.
        load = getattr(self.record_log, "load", None)
        if load is not None:
            records = load()
            if inspect.isawaitable(records):
                records = await records
            for record in records or ():
                self.coordinator.replay(record)
        self.coordinator.on_loaded()
        await self.server.start()
        k = self.settings.kafka
        host, port = k.advertised(self.server.bound_port)
        self.services.node = Node(k.node_id, host, port, k.cluster_id)
        log.info("coordinator ready node_id=%d advertised=%s:%d topics=%d", k.node_id, host, port, len(self.topics))

    async def stop(self) -> None:
        await self.server.stop()
        self.timer.cancel_all()
        close = getattr(self.record_log, "close", None)
        if close is not None:
            result: Any = close()
            if inspect.isawaitable(result):
                await result
        log.info("coordinator stopped")

    async def run_until(self, stop: asyncio.Event) -> None:
        await self.start()
        try:
            await stop.wait()
        finally:
            await self.stop()
