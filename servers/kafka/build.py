"""Build a kio response of any version from one version-independent description.

Every API adapter describes its response once, as plain dicts/lists with the union of the fields of all versions
(``{"error_code": ..., "members": [{"member_id": ...}]}``). ``build(cls, data)`` keeps the fields that this version's
class declares, recurses into nested entities, and leaves out what the version does not have - so the version rules
that are just "field exists from vN" need no code. Rules that change a value by version (null vs "" protocol name,
errors pushed into partitions) stay explicit in the adapters.

A field missing from ``data`` takes the class default; a field without default that is missing is a bug in the
adapter and raises ``TypeError`` from the dataclass constructor.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, TypeVar

T = TypeVar("T")

ZERO_MS = timedelta(0)

_PLAIN, _LIST, _ONE = 0, 1, 2
_Fields = tuple[tuple[str, int, Any], ...]
_specs: dict[type, tuple[_Fields, bool]] = {}


def _nested(tp: Any) -> tuple[int, Any]:
    """Classify a field type: plain value, tuple of entities (optionally nullable), or one nested entity."""
    if dataclasses.is_dataclass(tp):
        return _ONE, tp
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        for arg in args:
            if arg is not type(None):
                return _nested(arg)
        return _PLAIN, None
    if typing.get_origin(tp) is tuple and args and dataclasses.is_dataclass(args[0]):
        return _LIST, args[0]
    return _PLAIN, None


def _spec(cls: type) -> tuple[_Fields, bool]:
    """(fields as (name, kind, nested class), whether the class has ``throttle_time``), computed once per class."""
    spec = _specs.get(cls)
    if spec is None:
        fields = tuple((f.name, *_nested(f.type)) for f in dataclasses.fields(cls))
        spec = (fields, any(name == "throttle_time" for name, _, _ in fields))
        _specs[cls] = spec
    return spec


def build(cls: type[T], data: Mapping[str, Any]) -> T:
    fields, has_throttle = _spec(cls)
    kwargs: dict[str, Any] = {}
    for name, kind, sub in fields:
        if name not in data:
            continue
        value = data[name]
        if kind == _LIST and value is not None:
            value = tuple(build(sub, item) for item in value)
        elif kind == _ONE and value is not None:
            value = build(sub, value)
        kwargs[name] = value
    if has_throttle and "throttle_time" not in kwargs:
        kwargs["throttle_time"] = ZERO_MS  # never throttle: kafka-python pauses a connection for any non-zero value
    return cls(**kwargs)
