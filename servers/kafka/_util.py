"""Small helpers shared by the API adapters."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

from kio.index import load_response_schema

from coordinator.deferred import Deferred
from runtime.loop import deferred_to_future

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


class DeferredAnswer(Generic[T, R]):
    """An adapter's deferred answer: ``fn(value)`` once the core resolves ``deferred``.

    "Deferred" is the one word for a reply that is not ready yet, in every layer: the core returns a ``Deferred``,
    an adapter wraps it in a ``DeferredAnswer``, the listener queues a ``DeferredSlot`` for it. The server completes
    it from the Deferred's callback (no task, future or coroutine per deferred request: a 1,000-member rebalance
    defers 2,000 of them); anything else can simply ``await`` it."""

    __slots__ = ("deferred", "fn")

    def __init__(self, deferred: Deferred[T], fn: Callable[[T], R]) -> None:
        self.deferred = deferred
        self.fn = fn

    def __await__(self) -> Generator[Any, None, R]:
        return self._wait().__await__()

    async def _wait(self) -> R:
        return self.fn(await deferred_to_future(self.deferred))


def then(deferred: Deferred[T], fn: Callable[[T], R]) -> R | DeferredAnswer[T, R]:
    """``fn(result)`` now if the core already answered, else a ``DeferredAnswer`` of it (a deferred request)."""
    if deferred.done:
        return fn(deferred.result())
    return DeferredAnswer(deferred, fn)


def ms(value: Any) -> int:
    """kio's ``*_ms`` fields are timedeltas; the core speaks integer milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)
