"""Who did an operator action: the INFO line each executed action of the HTTP API writes.

Each executed action is also one ``security.audit.AdminAction`` in the audit trail (stored, shown by ``GET
/v1/audit`` and the dashboard). Every line carries ``client_id`` (the request's ``User-Agent``: the CLI's is Python-
urllib's), ``client_host`` (the peer address) and ``principal``: the principal whose token the request carried
(``User:<name>`` of ``[http] principals``, ``token`` for the single legacy ``[http] token``: ``app.auth_middleware``
authenticated it), else ``User:ANONYMOUS``, Kafka's name for an unauthenticated client and the one the Kafka side
uses (``servers.kafka.audit``)."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from security.audit import Action, Via

from . import keys
from .access import ANONYMOUS

log = logging.getLogger("servers.http.audit")


def principal(request: web.Request) -> str:
    """The name of the request's principal (set by ``app.auth_middleware``)."""
    p = request.get(keys.PRINCIPAL)
    return p.name if p is not None else ANONYMOUS


def who(request: web.Request) -> dict[str, Any]:
    """The log fields naming the client of ``request`` (None values are left out of the line)."""
    return {
        "client_id": request.headers.get("User-Agent") or None,
        "client_host": request.remote or None,
        "principal": principal(request),
    }


def admin_action(
    request: web.Request, group: str | None, what: str, *args: object, action: Action, resource: str | None = None
) -> None:
    """One executed operator action: ``what % args``, with the group and who asked; logged, and recorded in the
    audit trail (``runtime.audit_trail``) when the app has one."""
    fields = who(request)
    log.info(what, *args, extra={"group": group, **fields})
    trail = request.app.get(keys.AUDIT)
    if trail is not None:
        trail.record(
            Via.HTTP, action, resource if resource is not None else (group or ""), group_id=group,
            detail=what % args if args else what, **fields,
        )  # fmt: skip
