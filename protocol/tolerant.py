"""A pure-Python reader for kio entities that skips unknown tagged fields.

Kafka's rule for flexible versions is that a reader skips tagged fields it does not know (that is how fields are
added without bumping a version). kio's native reader raises ``KeyError`` instead, so the codec falls back to this
walker when that happens. It follows the same dataclass schema as kio: primitive fields and primitive arrays are read
with kio's own native field readers (so the values are identical), and only the structure (nested entities, entity
arrays, nullable-struct markers, the tagged-field section) is walked here. It is slower than the native path, which
is why it is only the fallback.

Errors are kio's ``DecodeError`` subclasses (``BufferUnderflow``, ``UnexpectedNull``...), as with the native reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._parse import get_field_reader
from kio.serial.errors import BufferUnderflow, DecodeError, UnexpectedNull
from kio.serial.readers import (
    read_compact_array_length,
    read_int8,
    read_legacy_array_length,
    read_unsigned_varint,
)

from protocol._cache import typed_cache

__all__ = ["field_shape", "read_entity_tolerant", "skip_tagged_fields"]

# A field step reads one value at ``offset`` and returns (value, new offset).
_Step = Callable[[bytes, int], tuple[Any, int]]


def skip_tagged_fields(buf: bytes, offset: int) -> int:
    """Skip a tagged-field section (count, then tag/size/bytes triples); return the offset after it."""
    count, n = read_unsigned_varint(buf, offset)
    offset += n
    for _ in range(count):
        _tag, n = read_unsigned_varint(buf, offset)
        offset += n
        size, n = read_unsigned_varint(buf, offset)
        offset += n + size
        if offset > len(buf):
            raise BufferUnderflow("tagged field runs past the end of the buffer")
    return offset


def read_entity_tolerant(entity_type: type[Any], buf: bytes, offset: int = 0) -> tuple[Any, int]:
    """Read one ``entity_type`` at ``offset``; return (entity, bytes consumed), like kio's ``entity_reader``."""
    value, end = _plan(entity_type)(buf, offset)
    return value, end - offset


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (UnionType, Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0], len(args) < len(get_args(tp))
    return tp, False


def _is_entity(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__flexible__") and hasattr(tp, "__dataclass_fields__")


def field_shape(field: Field[Any]) -> tuple[type[Any] | None, bool, bool]:
    """How a kio dataclass field is laid out: (entity type, or None for primitives; is an array; is nullable)."""
    tp, nullable = _unwrap_optional(field.type)
    if get_origin(tp) is tuple:
        item = get_args(tp)[0]
        return (item if _is_entity(item) else None), True, nullable
    return (tp if _is_entity(tp) else None), False, nullable


def _field_step(owner: type[Any], field: Field[Any], is_tag: bool) -> _Step:
    item_type, is_array, nullable = field_shape(field)
    if item_type is None:
        reader = get_field_reader(owner, field, False, is_tag)

        def read_primitive(buf: bytes, offset: int) -> tuple[Any, int]:
            value, n = reader(buf, offset)
            return value, offset + n

        return read_primitive

    flexible = bool(owner.__flexible__)
    name = f"{owner.__name__}.{field.name}"

    if is_array:

        def read_array(buf: bytes, offset: int) -> tuple[Any, int]:
            length: int | None
            if flexible:
                length, n = read_compact_array_length(buf, offset)
            else:
                raw, n = read_legacy_array_length(buf, offset)
                length = None if raw < 0 else int(raw)
            offset += n
            if length is None:
                if not nullable:
                    raise UnexpectedNull(f"null array in non-nullable field {name}")
                return None, offset
            item = _plan(item_type)
            items = []
            for _ in range(length):
                value, offset = item(buf, offset)
                items.append(value)
            return tuple(items), offset

        return read_array

    # A nullable struct is preceded by an int8 marker (KIP-893); a tagged struct is not (its presence is the tag).
    has_marker = nullable and not is_tag

    def read_struct(buf: bytes, offset: int) -> tuple[Any, int]:
        if has_marker:
            marker, n = read_int8(buf, offset)
            offset += n
            if marker < 0:
                return None, offset
        return _plan(item_type)(buf, offset)

    return read_struct


@typed_cache
def _plan(entity_type: type[Any]) -> _Step:
    regular: list[tuple[str, _Step]] = []
    tagged: dict[int, tuple[str, _Step]] = {}
    defaults: dict[str, Any] = {}
    for field in fields(entity_type):
        tag = field.metadata.get("tag")
        if tag is None:
            regular.append((field.name, _field_step(entity_type, field, False)))
        else:
            tagged[int(tag)] = (field.name, _field_step(entity_type, field, True))
            if field.default is MISSING and field.default_factory is MISSING:
                defaults[field.name] = get_tagged_field_default(field)
    flexible = bool(entity_type.__flexible__)

    def read(buf: bytes, offset: int) -> tuple[Any, int]:
        values: dict[str, Any] = dict(defaults)
        for name, step in regular:
            values[name], offset = step(buf, offset)
        if flexible:
            count, n = read_unsigned_varint(buf, offset)
            offset += n
            for _ in range(count):
                tag, n = read_unsigned_varint(buf, offset)
                offset += n
                size, n = read_unsigned_varint(buf, offset)
                offset += n
                end = offset + size
                if end > len(buf):
                    raise BufferUnderflow("tagged field runs past the end of the buffer")
                known = tagged.get(tag)
                if known is not None:
                    name, step = known
                    values[name], used = step(buf, offset)
                    if used > end:
                        raise DecodeError(f"tagged field {tag} of {entity_type.__name__} overruns its size")
                offset = end
        return entity_type(**values), offset

    return read
