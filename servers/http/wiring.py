"""The operator side of the daemon in one object (used by ``daemon.app``).

records = RecordStream(record_log, metrics)               # runtime.record_stream: what the core appends to
history = StorageHistory(record_log.queries)              # or a MemoryHistory listening to ``records``
operator = Operator(metrics, history)
operator.watch(core)
http_app = operator.http_app(core, clock=clock, topics=topics, readiness=probe, token=token, broker=broker)
server = await start_http(http_app, "127.0.0.1:8080")     # after the state is loaded
...
await server.stop()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from broker.admin import TopicAdmin
from broker.partitions import Broker
from coordinator.clock import Clock
from runtime.activity import GroupActivity
from runtime.audit_trail import AuditTrail
from runtime.lag_evaluation import LagEvaluator
from runtime.metrics import Metrics
from security.users import UserStore

from .access import Access
from .acls import AclAccess
from .app import create_http_app
from .basic_auth import BasicAuth
from .deps import CoreFacade, ReadinessProbe, TopicRegistry
from .history import HistorySource


@dataclass
class Operator:
    metrics: Metrics
    history: HistorySource
    activity: GroupActivity | None = None  # recent activity (runtime.activity), listening to the record stream
    lag: LagEvaluator | None = None  # Burrow-style group status (runtime.lag_evaluation), listening too
    audit: AuditTrail | None = None  # admin actions with their actor (runtime.audit_trail), shared with Kafka's

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
        access: Access | None = None,
        broker: Broker | None = None,
        admin: TopicAdmin | None = None,
        users: UserStore | None = None,
        acls: AclAccess | None = None,
        basic: BasicAuth | None = None,
    ) -> web.Application:
        return create_http_app(
            core, clock=clock, topics=topics, history=self.history, metrics=self.metrics, readiness=readiness,
            token=token, access=access, activity=self.activity, broker=broker, admin=admin, lag=self.lag,
            audit=self.audit, users=users, acls=acls, basic=basic,
        )  # fmt: skip
