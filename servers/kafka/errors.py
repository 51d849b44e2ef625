"""The one place where an internal exception becomes a Kafka error on the wire.

A handler that raises is a bug in this server, not the client's fault: the client gets the API's own error response
with the mapped code (UNKNOWN_SERVER_ERROR unless the exception says better) and the connection stays open.
"""

from __future__ import annotations

import logging
from typing import Any

from protocol.errors import ErrorCode
from protocol.responses import error_response

from .context import RequestContext

log = logging.getLogger("servers.kafka.listener")


class KafkaError(Exception):
    """A domain failure that already knows its wire code."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


def error_code_for(exc: BaseException) -> ErrorCode:
    if isinstance(exc, KafkaError):
        return exc.error
    code = getattr(exc, "error_code", None)  # typed domain exceptions of other layers may carry one
    if isinstance(code, ErrorCode):
        return code
    return ErrorCode.unknown_server_error


def error_body(ctx: RequestContext, exc: BaseException, request_body: Any) -> Any:
    """The error response for ``ctx``'s API and version (its code in ``ctx.error``, for the metrics). Logs the
    failure once, with the request's identity."""
    code = error_code_for(exc)
    ctx.error = code
    if code is ErrorCode.unknown_server_error:
        log.error(
            "internal error api_key=%d api_version=%d correlation_id=%d client_id=%s",
            ctx.api_key,
            ctx.api_version,
            ctx.correlation_id,
            ctx.client_id,
            exc_info=exc,
        )
    return error_response(ctx.api_key, ctx.api_version, code, request_body)
