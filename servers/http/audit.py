"""Who did an operator action: the INFO line each executed action of the HTTP API writes.

Every line carries ``client_id`` (the request's ``User-Agent``: the CLI's is Python-urllib's), ``client_host`` (the
peer address) and ``principal``: ``token`` when the daemon has a token configured (every mutating request then
proved it has it: ``app.auth_middleware``), else ``User:ANONYMOUS``, Kafka's name for an unauthenticated client and
the one the Kafka side's admin lines use (``servers.kafka.audit``). There is one token, so it names no person.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from . import keys

log = logging.getLogger("servers.http.audit")

ANONYMOUS = "User:ANONYMOUS"


def who(request: web.Request) -> dict[str, Any]:
    """The log fields naming the client of ``request`` (None values are left out of the line)."""
    return {
        "client_id": request.headers.get("User-Agent") or None,
        "client_host": request.remote or None,
        "principal": "token" if request.app[keys.TOKEN] else ANONYMOUS,
    }


def admin_action(request: web.Request, group: str | None, what: str, *args: object) -> None:
    """One executed operator action: ``what % args``, with the group and who asked."""
    log.info(what, *args, extra={"group": group, **who(request)})
