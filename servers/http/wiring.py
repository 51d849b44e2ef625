"""One-call wiring of the operator side into the daemon (used by ``daemon.app``).

    operator = Operator.around(record_log, per_group_labels=True)   # before the core is built
    core = GroupCoordinator(config, clock, timer, operator.log)      # the core writes through the taps
    operator.watch(core)
    http_app = operator.http_app(core, clock=clock, topics=topics, readiness=probe, token=token)
    server = await start_http(http_app, "127.0.0.1:8080")            # after the state is loaded
    ...
    await server.stop()

``operator.log`` feeds the metrics (rebalances, removals, durable commits) and, when the record log has no
history queries of its own (``MemoryLog``), an in-memory history; a log with ``queries`` (``SqlRecordLog``) is read
through ``StorageHistory``. Keep the original record log for ``load``/``close``: the wrapper only appends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from coordinator.clock import Clock
from coordinator.record_log import RecordLog
from runtime.metrics import Metrics, MetricsLog

from .app import create_http_app
from .deps import CoreFacade, ReadinessProbe, TopicRegistry
from .history import HistorySource, MemoryHistory, TapLog
from .storage_history import StorageHistory


@dataclass
class Operator:
    metrics: Metrics
    history: HistorySource
    log: RecordLog  # what the core must append to

    @classmethod
    def around(
        cls, record_log: RecordLog, *, per_group_labels: bool = True, metrics: Metrics | None = None
    ) -> Operator:
        metrics = metrics if metrics is not None else Metrics(per_group_labels=per_group_labels)
        queries = getattr(record_log, "queries", None)
        history: HistorySource
        if queries is not None:
            history = StorageHistory(queries)
            tapped: RecordLog = record_log
        else:
            memory = MemoryHistory()
            history = memory
            tapped = TapLog.for_history(record_log, memory)
        return cls(metrics=metrics, history=history, log=MetricsLog(tapped, metrics))

    def watch(self, core: Any) -> None:
        """Groups-by-state and member gauges, read from the live core at scrape time."""
        self.metrics.watch_groups(core.groups.all_groups)

    def http_app(
        self,
        core: CoreFacade,
        *,
        clock: Clock,
        topics: TopicRegistry,
        readiness: ReadinessProbe | None = None,
        token: str | None = None,
    ) -> web.Application:
        return create_http_app(
            core, clock=clock, topics=topics, history=self.history, metrics=self.metrics, readiness=readiness,
            token=token,
        )  # fmt: skip
