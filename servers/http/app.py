"""The operator HTTP application: factory, middlewares, and start/stop next to the Kafka listener.

Wiring (the daemon, same event loop as the Kafka server)::

    app = create_http_app(core, clock=clock, topics=topics, history=history, metrics=metrics,
                          readiness=probe, token=settings.http.token)
    server = await start_http(app, "127.0.0.1:8080")
    ...
    await server.stop()

Errors: every 4xx/5xx is a JSON ``ErrorBody``; bad queries and bodies are 400, unknown names 404, state conflicts
409, a storage that does not answer in time 503. An unexpected exception is logged and answered 500 (a bug).
"""

from __future__ import annotations

import logging
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler

from broker.admin import TopicAdmin
from broker.partitions import Broker, MemoryDataLog
from broker.topics import TopicRegistry as Topics
from coordinator.clock import Clock, SystemClock
from runtime.activity import GroupActivity
from runtime.audit_trail import AuditTrail
from runtime.lag_evaluation import LagEvaluator
from runtime.metrics import Metrics
from security.users import UserStore

from . import keys
from .access import ANONYMOUS, SECURITY_HEADERS, Access, HttpPrincipal, Role
from .acls import ACL_ENDPOINTS, ACLS, AclAccess
from .basic_auth import CHALLENGE, BasicAuth
from .deps import CoreFacade, ReadinessProbe, TopicRegistry
from .history import HistorySource, MemoryHistory
from .openapi import build_openapi, openapi_handler
from .routes import ENDPOINTS, METRICS_PATH_ITEM, json_error, metrics_endpoint
from .users import USER_ENDPOINTS

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parent / "web"
API_VERSION = "1"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _route_label(request: web.Request) -> str:
    info = request.match_info
    route = getattr(info, "route", None)
    resource = getattr(route, "resource", None)
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as JSON; no exception leaks as an HTML page."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.content_type == "application/json" or e.status < 400:
            raise
        replacement = json_error(e.status, e.reason or "error")
        for name, value in e.headers.items():  # keep Allow (405), Location, ...
            if name.lower() not in ("content-type", "content-length"):
                replacement.headers[name] = value
        raise replacement from None
    except Exception:
        log.exception("operator API: unexpected error on %s %s", request.method, request.path)
        raise json_error(500, "internal error (logged)") from None


# Reachable without credentials even when anonymous requests get no role: probes and the dashboard's static files
# (they hold no data; the data comes from the API, which asks for the token).
_PUBLIC_ROUTES = frozenset({"healthz", "readyz", "dashboard", "ui"})


def _route_name(request: web.Request) -> str | None:
    route = getattr(request.match_info, "route", None)
    return getattr(route, "name", None)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The principal of the request, its role against the endpoint's, and the Origin of state changes (``access``)."""
    access = request.app[keys.ACCESS]
    name = _route_name(request)
    needed = request.app[keys.ROLES].get(name or "", Role.VIEWER if request.method in _SAFE_METHODS else Role.ADMIN)
    if name in _PUBLIC_ROUTES:
        needed = Role.NONE
    authorization = request.headers.get("Authorization")
    if authorization and authorization[:6].lower() == "basic ":
        principal: HttpPrincipal | None = await _basic_principal(request, authorization[6:])
    else:
        principal = access.authenticate(authorization)
    if principal is None:
        exc = json_error(401, "the token is not valid")
        exc.headers["WWW-Authenticate"] = 'Bearer realm="kgc"'
        raise exc
    request[keys.PRINCIPAL] = principal
    if principal.role < needed:
        if principal.name == ANONYMOUS:
            exc = json_error(401, f"a valid bearer token of role {needed.label} or above is required")
            exc.headers["WWW-Authenticate"] = 'Bearer realm="kgc"'
            raise exc
        raise json_error(403, f"{principal.name} has role {principal.role.label}; this needs {needed.label}")
    if request.method not in _SAFE_METHODS and not access.origin_allowed(request.headers, request.scheme, request.host):
        raise json_error(403, "cross-origin state changes are refused (Origin not allowed)")
    return await handler(request)


async def _basic_principal(request: web.Request, credentials: str) -> HttpPrincipal:
    """``Authorization: Basic``: a SCRAM user and its configured role (``servers.http.basic_auth``), over TLS only."""
    basic = request.app.get(keys.BASIC)
    if basic is None:
        exc = json_error(401, "HTTP Basic is not enabled on this API ([http] basic_auth); use a bearer token")
        exc.headers["WWW-Authenticate"] = 'Bearer realm="kgc"'
        raise exc
    if not request.secure:
        raise json_error(403, "HTTP Basic is accepted over TLS only")
    principal = await basic.authenticate(credentials)
    if principal is None:
        exc = json_error(401, "invalid user name or password")
        exc.headers["WWW-Authenticate"] = CHALLENGE
        raise exc
    return principal


@web.middleware
async def security_headers_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """CSP and friends on every answer (``access.SECURITY_HEADERS``): the dashboard's pages and the API's JSON."""
    try:
        response = await handler(request)
    except web.HTTPException as e:
        e.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    m = request.app.get(keys.METRICS)
    if m is None:
        return await handler(request)
    try:
        response = await handler(request)
    except web.HTTPException as e:
        m.observe_http(_route_label(request), e.status)
        raise
    m.observe_http(_route_label(request), response.status)
    return response


def create_http_app(
    core: CoreFacade,
    *,
    clock: Clock | None = None,
    topics: TopicRegistry | None = None,
    history: HistorySource | None = None,
    metrics: Metrics | None = None,
    readiness: ReadinessProbe | None = None,
    token: str | None = None,
    access: Access | None = None,
    deferred_timeout_s: float = 30.0,
    dashboard: bool = True,
    activity: GroupActivity | None = None,
    broker: Broker | None = None,
    admin: TopicAdmin | None = None,
    lag: LagEvaluator | None = None,
    audit: AuditTrail | None = None,
    users: UserStore | None = None,
    acls: AclAccess | None = None,
    basic: BasicAuth | None = None,
) -> web.Application:
    """The operator API, the ``/metrics`` endpoint and the dashboard, on one ``web.Application``.

        ``history`` defaults to an empty ``MemoryHistory`` (feed it with ``RecordStream.listen``); ``metrics`` to none
        (``/metrics`` answers 404); ``access`` says who may do what
    (``servers.http.access``; default: the single ``token`` as an admin principal, or an open API when it is "" or
    None); ``activity`` defaults to an
        empty ``GroupActivity`` (feed it with ``RecordStream.listen`` and the Kafka listener's ``on_join_refused``);
        ``broker`` (the partitions' logs: lag, offset resets) defaults to an empty one over ``topics``.
        ``lag`` to a ``LagEvaluator`` that knows no log end (feed it with ``RecordStream.listen``).
    """
    app = web.Application(
        middlewares=[security_headers_middleware, metrics_middleware, error_middleware, auth_middleware]
    )
    app[keys.CORE] = core
    app[keys.CLOCK] = clock if clock is not None else SystemClock()
    app[keys.TOPICS] = topics if topics is not None else Topics(auto_create=False)
    app[keys.HISTORY] = history if history is not None else MemoryHistory()
    app[keys.ACTIVITY] = activity if activity is not None else GroupActivity(app[keys.CLOCK].now_ms)
    if broker is None:
        registry = app[keys.TOPICS]
        broker = Broker(registry if isinstance(registry, Topics) else Topics(auto_create=False), MemoryDataLog(),
                        app[keys.CLOCK].now_ms, keep_bytes=True)  # fmt: skip
    app[keys.BROKER] = broker
    app[keys.LAG] = lag if lag is not None else LagEvaluator(app[keys.CLOCK].now_ms, lambda _t, _p: None)
    if metrics is not None:
        app[keys.METRICS] = metrics
    if readiness is not None:
        app[keys.READINESS] = readiness
    if admin is not None:
        app[keys.ADMIN] = admin
    # admin actions with their actor (runtime.audit_trail); default: kept in memory only
    app[keys.AUDIT] = audit if audit is not None else AuditTrail(None, app[keys.CLOCK].now_ms)
    # SCRAM users: the daemon's store; by default one of its own, in memory
    app[keys.USERS] = users if users is not None else UserStore(MemoryDataLog(), app[keys.CLOCK].now_ms)
    app[keys.TOKEN] = token or ""
    app[keys.ACCESS] = access if access is not None else Access(legacy_token=token or None)
    if basic is not None:  # Authorization: Basic with the SCRAM users (servers.http.basic_auth); none: refused
        app[keys.BASIC] = basic
    if acls is not None:  # the daemon's authorizer and ACL store (servers.http.acls); none: /v1/acls is empty
        app[ACLS] = acls
    app[keys.DEFERRED_TIMEOUT_S] = deferred_timeout_s
    endpoints = [*ENDPOINTS, *USER_ENDPOINTS, *ACL_ENDPOINTS]
    app[keys.ROLES] = {ep.operation_id(): ep.role for ep in endpoints}
    doc = build_openapi(
        endpoints,
        title="Kafka group coordinator - operator API",
        version=API_VERSION,
        extra_paths={"/metrics": METRICS_PATH_ITEM},
    )
    app[keys.OPENAPI] = doc
    for ep in endpoints:
        app.router.add_route(ep.method, ep.path, ep.handler, name=ep.operation_id())
    app.router.add_get("/metrics", metrics_endpoint, name="metrics")
    app.router.add_get("/openapi.json", openapi_handler(doc), name="openapi")
    if dashboard and WEB_DIR.is_dir():
        index = WEB_DIR / "index.html"

        async def dashboard_index(_request: web.Request) -> web.FileResponse:
            return web.FileResponse(index)

        app.router.add_get("/", dashboard_index, name="dashboard")
        app.router.add_static("/ui/", WEB_DIR, name="ui", append_version=False)
    return app


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) -> (host, port)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {listen!r}")
    host = host.strip("[]") or "0.0.0.0"
    n = int(port)
    if not 0 <= n <= 65535:
        raise ValueError(f"port out of range in {listen!r}")
    return host, n


@dataclass
class HttpServer:
    runner: web.AppRunner
    site: web.TCPSite
    host: str
    port: int  # the bound port (useful with port 0)
    tls: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    async def stop(self) -> None:
        await self.runner.cleanup()


# aiohttp's default request line limit is 8,190 bytes: a group id of more than about 8 KB (Kafka allows 32,767
# bytes) could be neither read nor deleted. See HttpSettings.max_request_line_bytes for the bound used instead.
DEFAULT_MAX_LINE_SIZE = 262_144


class _RequestErrorLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The logger aiohttp's request handler reports errors with. A request it cannot parse (a request line longer
    than the limit, a malformed header: ``HttpProcessingError``) is the client's fault and answered 400 by aiohttp;
    aiohttp would log it at ERROR with a traceback. Here it is one rate-limited warning per peer; anything else
    (a bug) keeps its ERROR and traceback."""

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if isinstance(exc, HttpProcessingError):
            peer = args[0] if args else "?"
            self.logger.warning(
                "operator API: bad HTTP request from %s: %s",
                peer,
                str(exc).replace("\n", " ")[:300],
                extra={"throttle": ("http-bad-request", peer)},
            )
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)


async def start_http(
    app: web.Application,
    listen: str = "127.0.0.1:8080",
    *,
    max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    ssl_context: ssl.SSLContext | None = None,
    **runner_kwargs: Any,
) -> HttpServer:
    """Serve ``app`` on ``listen`` in the running loop (``AppRunner`` + ``TCPSite``); ``await server.stop()``.
    With ``ssl_context``, over TLS (HTTPS) only.

    ``max_line_size`` bounds the request line (the path carries group ids); headers keep aiohttp's 8,190 bytes."""
    host, port = parse_listen(listen)
    runner_kwargs.setdefault("logger", _RequestErrorLogger(logging.getLogger("aiohttp.server"), {}))
    runner = web.AppRunner(app, access_log=None, max_line_size=max_line_size, **runner_kwargs)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = port
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or []
    if sockets:
        bound = sockets[0].getsockname()[1]
    log.info("operator HTTP API listening on %s:%d%s", host, bound, " (TLS)" if ssl_context is not None else "")
    return HttpServer(runner=runner, site=site, host=host, port=bound, tls=ssl_context is not None)


async def stop_http(server: HttpServer) -> None:
    await server.stop()
