"""The length guard: every declared length in a request body is checked against the bytes left, before kio reads it.

Why it exists: kio's native (Rust) entity reader pre-allocates an array of the declared element count before it reads
any element. A ListGroups v4 frame of 31 bytes declaring 0xffffffff ``states_filter`` entries made it ask for 34 GB,
and the allocation failure aborts the whole process (SIGABRT: Python cannot catch it, nothing is logged). kio's
native *string and bytes* readers do check the declared length against the buffer before allocating (shown by
``tests/protocol/test_bounds.py``), so a schema without arrays needs no guard; every other one is walked here first.

Rules of this module:

- One checker per kio entity class, compiled once from its dataclass schema (``field.metadata["kafka_type"]``,
  ``protocol.tolerant.field_shape``) into Python source (``exec``, the technique ``dataclasses`` uses), so a check is
  straight-line code with fixed-width runs of fields merged into one offset step. ``checker(cls)`` is ``None`` when
  the schema has no array anywhere.
- A checker walks the body exactly as kio reads it, allocates nothing proportional to a declared length, and
  raises ``LengthOutOfBounds`` when a declared length (array count, string/bytes length, compact varint, tagged-field
  count or size) runs past the bytes left, or is negative other than -1; it raises ``InvalidRequest`` when a field
  the schema says is not nullable is null. Both are ``MalformedFrame``s without header data: the codec adds it.
- An array's count is bounded by (bytes left) / (smallest encoding of one element) before any element is looked at,
  so a nested array's count is checked before the native reader could allocate for it.
- Unknown tagged fields are skipped (their size checked); known ones are checked inside their declared size.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from protocol._cache import typed_cache
from protocol.errors import InvalidRequest, LengthOutOfBounds
from protocol.tolerant import field_shape

__all__ = ["Checker", "check_body", "checker"]

# checker(buf, offset, end) -> offset after the entity; raises LengthOutOfBounds / InvalidRequest.
Checker = Callable[[bytes, int, int], int]

_FIXED_SIZE: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_LENGTH_PREFIXED = frozenset({"string", "bytes", "records"})

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


def _overrun(what: str) -> LengthOutOfBounds:
    return LengthOutOfBounds(f"declared length of {what} runs past the end of the request")


def _negative(what: str) -> LengthOutOfBounds:
    return LengthOutOfBounds(f"negative length in {what}")


def _null(what: str) -> InvalidRequest:
    return InvalidRequest(f"null in non-nullable field {what}")


def _uvarint(buf: bytes, o: int, end: int, what: str) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (kio's limit) at ``o``; (value, offset after it)."""
    value = 0
    shift = 0
    while True:
        if o >= end:
            raise _overrun(what)
        b = buf[o]
        o += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, o
        shift += 7
        if shift >= 35:
            raise LengthOutOfBounds(f"varint longer than 5 bytes in {what}")


def _skip_tags(buf: bytes, o: int, end: int, known: dict[int, Checker], what: str) -> int:
    """Check a tagged-field section at ``o``: its count, each tag's size, and known tags' contents."""
    count, o = _uvarint(buf, o, end, what)
    if count * 2 > end - o:  # each tagged field takes at least a tag byte and a size byte
        raise _overrun(what)
    for _ in range(count):
        tag, o = _uvarint(buf, o, end, what)
        size, o = _uvarint(buf, o, end, what)
        stop = o + size
        if stop > end:
            raise _overrun(what)
        check = known.get(tag)
        if check is not None and check(buf, o, stop) > stop:
            raise _overrun(f"{what} tag {tag}")
        o = stop
    return o


class _Source:
    """Python source of one checker function, and the objects it refers to."""

    def __init__(self, name: str) -> None:
        self.lines: list[str] = [f"def {name}(buf, o, end):"]
        self.env: dict[str, Any] = {
            "_I16": _I16,
            "_I32": _I32,
            "_uvarint": _uvarint,
            "_skip_tags": _skip_tags,
            "_overrun": _overrun,
            "_negative": _negative,
            "_null": _null,
        }
        self.pending = 0  # bytes of fixed-width fields not yet added to ``o``
        self.counter = 0

    def const(self, value: Any) -> str:
        self.counter += 1
        name = f"_c{self.counter}"
        self.env[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def settle(self, indent: int) -> None:
        if self.pending:
            self.emit(indent, f"o += {self.pending}")
            self.pending = 0

    def length(self, indent: int, flexible: bool, width: int, what: str) -> None:
        """Emit code leaving the declared length in ``n`` (-1 = null) and ``o`` after the prefix."""
        self.settle(indent)
        w = self.const(what)
        if flexible:
            self.emit(indent, f"if o >= end: raise _overrun({w})")
            self.emit(indent, "n = buf[o]")
            self.emit(indent, "if n < 0x80: o += 1")
            self.emit(indent, f"else: n, o = _uvarint(buf, o, end, {w})")
            self.emit(indent, "n -= 1")
        else:
            reader = "_I16" if width == 2 else "_I32"
            self.emit(indent, f"if o + {width} > end: raise _overrun({w})")
            self.emit(indent, f"n = {reader}(buf, o)[0]")
            self.emit(indent, f"o += {width}")

    def null_or_negative(self, indent: int, nullable: bool, what: str) -> None:
        w = self.const(what)
        self.emit(indent, "if n < 0:")
        if nullable:
            self.emit(indent + 1, f"if n != -1: raise _negative({w})")
        else:
            self.emit(indent + 1, f"raise (_null({w}) if n == -1 else _negative({w}))")


def _min_size(kafka_type: str | None, item_type: type[Any] | None, flexible: bool) -> int:
    if item_type is not None:
        return _entity_min_size(item_type)
    assert kafka_type is not None
    if kafka_type in _FIXED_SIZE:
        return _FIXED_SIZE[kafka_type]
    if kafka_type in _LENGTH_PREFIXED:
        return 1 if flexible else (2 if kafka_type == "string" else 4)
    raise TypeError(f"no bounds check for kafka type {kafka_type!r}")


@typed_cache
def _entity_min_size(cls: type[Any]) -> int:
    """The fewest bytes one ``cls`` can be encoded in (every array empty, every string empty, no tags)."""
    flexible = bool(cls.__flexible__)
    total = 1 if flexible else 0  # the tagged-field count
    for f in fields(cls):
        if f.metadata.get("tag") is not None:
            continue
        item_type, is_array, nullable = field_shape(f)
        if is_array:
            total += 1 if flexible else 4
        elif item_type is not None and nullable:
            total += 1  # the null marker alone
        else:
            total += _min_size(f.metadata.get("kafka_type"), item_type, flexible)
    return total


@typed_cache
def _has_array(cls: type[Any]) -> bool:
    for f in fields(cls):
        item_type, is_array, _ = field_shape(f)
        if is_array or (item_type is not None and _has_array(item_type)):
            return True
    return False


def _emit_field(src: _Source, indent: int, owner: type[Any], f: Any, flexible: bool) -> None:
    item_type, is_array, nullable = field_shape(f)
    kafka_type = f.metadata.get("kafka_type")
    what = f"{owner.__name__}.{f.name}"
    if is_array:
        src.length(indent, flexible, 4, what)
        src.null_or_negative(indent, nullable, what)
        size = _min_size(kafka_type, item_type, flexible)
        if size < 1:
            raise TypeError(f"{what}: array of zero-width elements")
        body = indent + 1 if nullable else indent
        if nullable:
            src.emit(indent, "else:")
        w = src.const(what)
        src.emit(body, f"if n * {size} > end - o: raise _overrun({w})")
        if item_type is not None:
            src.emit(body, f"for _ in range(n): o = {src.const(checker_for(item_type))}(buf, o, end)")
        elif kafka_type in _FIXED_SIZE:
            src.emit(body, f"o += n * {size}")
        else:
            src.emit(body, "for _ in range(n):")
            _emit_length_prefixed(src, body + 1, kafka_type, False, flexible, f"{what}[]")
            src.settle(body + 1)
        return
    if item_type is not None:  # a nested struct (no request schema we serve has one; responses do)
        src.settle(indent)
        check = src.const(checker_for(item_type))
        if nullable and f.metadata.get("tag") is None:  # KIP-893: an int8 marker, -1 = null
            w = src.const(what)
            src.emit(indent, f"if o >= end: raise _overrun({w})")
            src.emit(indent, "o += 1")
            src.emit(indent, f"if buf[o - 1] < 0x80: o = {check}(buf, o, end)")
        else:
            src.emit(indent, f"o = {check}(buf, o, end)")
        return
    if kafka_type in _FIXED_SIZE:
        src.pending += _FIXED_SIZE[kafka_type]
        return
    if kafka_type in _LENGTH_PREFIXED:
        _emit_length_prefixed(src, indent, kafka_type, nullable, flexible, what)
        return
    raise TypeError(f"{what}: no bounds check for kafka type {kafka_type!r}")


def _emit_length_prefixed(
    src: _Source, indent: int, kafka_type: str, nullable: bool, flexible: bool, what: str
) -> None:
    src.length(indent, flexible, 2 if kafka_type == "string" else 4, what)
    src.null_or_negative(indent, nullable, what)
    src.emit(indent, "else: o += n")  # past ``end`` is caught by the next length read or the entity's final check


@typed_cache
def checker_for(cls: type[Any]) -> Checker:
    """The compiled checker of entity ``cls`` (also for schemas without arrays). Raises ``TypeError`` for a field
    type this module does not know."""
    flexible = bool(cls.__flexible__)
    name = f"check_{cls.__name__}"
    src = _Source(name)
    known_tags: dict[int, Checker] = {}
    for f in fields(cls):
        tag = f.metadata.get("tag")
        if tag is not None:
            tag_src = _Source(f"check_tag_{tag}")
            _emit_field(tag_src, 1, cls, f, True)
            tag_src.settle(1)
            tag_src.emit(1, "return o")
            known_tags[int(tag)] = _compile(tag_src, f"check_tag_{tag}")
            continue
        _emit_field(src, 1, cls, f, flexible)
    src.settle(1)
    if flexible:
        w = src.const(f"{cls.__name__} tagged fields")
        tags = src.const(known_tags)
        src.emit(1, f"if o >= end: raise _overrun({w})")
        src.emit(1, "if buf[o] == 0: o += 1")
        src.emit(1, f"else: o = _skip_tags(buf, o, end, {tags}, {w})")
    w = src.const(cls.__name__)
    src.emit(1, f"if o > end: raise _overrun({w})")
    src.emit(1, "return o")
    return _compile(src, name)


def _compile(src: _Source, name: str) -> Checker:
    namespace = dict(src.env)
    exec("\n".join(src.lines), namespace)  # source generated above from kio's schema; no input in it
    fn: Checker = namespace[name]
    return fn


@typed_cache
def checker(cls: type[Any]) -> Checker | None:
    """The checker to run before kio's native reader on ``cls``, or ``None`` when the schema has no array (kio's own
    string and bytes readers check their lengths before allocating)."""
    return checker_for(cls) if _has_array(cls) else None


def check_body(cls: type[Any], buf: bytes, offset: int) -> int:
    """Check one ``cls`` body at ``offset`` of ``buf`` (to its end); return the offset after it."""
    return checker_for(cls)(buf, offset, len(buf))
