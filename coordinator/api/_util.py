"""Small helpers shared by the API adapters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kio.index import load_response_schema

from coordinator.core.deferred import Deferred
from coordinator.runtime import deferred_to_future

from .context import RequestContext

T = TypeVar("T")
R = TypeVar("R")

_response_classes: dict[tuple[int, int], type] = {}


def response_cls(ctx: RequestContext) -> Any:
    key = (ctx.api_key, ctx.api_version)
    cls = _response_classes.get(key)
    if cls is None:
        cls = load_response_schema(ctx.api_key, ctx.api_version)
        _response_classes[key] = cls
    return cls


def then(deferred: Deferred[T], fn: Callable[[T], R]) -> R | Awaitable[R]:
    """``fn(result)`` now if the core already answered, else an awaitable of it (a parked request)."""
    if deferred.done:
        return fn(deferred.result())

    async def _wait() -> R:
        return fn(await deferred_to_future(deferred))

    return _wait()


def ms(value: Any) -> int:
    """kio's ``*_ms`` fields are timedeltas; the core speaks integer milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)
