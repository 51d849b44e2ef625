"""Typed application keys: everything the handlers read from ``request.app``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from broker.admin import TopicAdmin
from coordinator.clock import Clock
from runtime.activity import GroupActivity
from runtime.audit_trail import AuditTrail
from runtime.lag import LogView
from runtime.lag_evaluation import LagEvaluator
from runtime.metrics import Metrics
from security.users import UserStore

from .access import Access, HttpPrincipal, Role
from .basic_auth import BasicAuth
from .deps import CoreFacade, ReadinessProbe, TopicRegistry
from .history import HistorySource

CORE = web.AppKey("core", CoreFacade)
CLOCK = web.AppKey("clock", Clock)
TOPICS = web.AppKey("topics", TopicRegistry)
HISTORY = web.AppKey("history", HistorySource)
METRICS = web.AppKey("metrics", Metrics)
READINESS: web.AppKey[ReadinessProbe] = web.AppKey("readiness")
TOKEN = web.AppKey("token", str)  # "" = no token: mutating endpoints are open
OPENAPI: web.AppKey[dict[str, Any]] = web.AppKey("openapi")
DEFERRED_TIMEOUT_S = web.AppKey("deferred_timeout_s", float)
ACTIVITY = web.AppKey("activity", GroupActivity)
BROKER = web.AppKey("broker", LogView)  # broker.partitions.Broker: log start/end, append times, ListOffsets
ADMIN = web.AppKey("admin", TopicAdmin)  # the topic admin over the broker (absent: topics without offsets or configs)
LAG = web.AppKey("lag", LagEvaluator)  # Burrow-style status of each group (runtime.lag_evaluation)
ACCESS = web.AppKey("access", Access)  # principals, roles, allowed origins (servers.http.access)
ROLES: web.AppKey[dict[str, Role]] = web.AppKey("roles")  # operation id -> the role it needs
PRINCIPAL = web.RequestKey("principal", HttpPrincipal)  # set on each request by app.auth_middleware
AUDIT = web.AppKey("audit", AuditTrail)  # admin actions with their actor (runtime.audit_trail)
USERS = web.AppKey("users", UserStore)  # SCRAM users (security.users)
BASIC = web.AppKey("basic", BasicAuth)  # HTTP Basic with the SCRAM users (servers.http.basic_auth); absent: refused
