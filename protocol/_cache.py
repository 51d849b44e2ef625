"""``functools.cache`` with the wrapped function's signature kept (mypy rejects ``type[Any]`` as ``Hashable``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

_P = ParamSpec("_P")
_R = TypeVar("_R")


def typed_cache(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    return cast(Callable[_P, _R], functools.cache(fn))  # type: ignore[arg-type]
