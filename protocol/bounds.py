"""The length guard: every declared length in a request body is checked against the bytes left, before kio reads it.

Why it exists: kio's native (Rust) entity reader pre-allocates an array of the declared element count before it reads
any element. A ListGroups v4 frame of 31 bytes declaring 0xffffffff ``states_filter`` entries made it ask for 34 GB,
and the allocation failure aborts the whole process (SIGABRT: Python cannot catch it, nothing is logged). kio's
native *string and bytes* readers do check the declared length against the buffer before allocating (shown by
``tests/protocol/test_bounds.py``), so a schema without arrays needs no guard; every other one is walked here first.

Rules of this module:

- One checker per kio entity class, compiled once from its dataclass schema (``field.metadata["kafka_type"]``,
  ``protocol.tolerant.field_shape``) into Python source (``exec``, the technique ``dataclasses`` uses): straight-line
  code with nested entities inlined and fixed-width runs of fields merged into one offset step. ``checker(cls)`` is
  ``None`` when the schema has no array anywhere.
- A checker walks the body as kio reads it and allocates nothing proportional to a declared length. An array count
  is bounded by (bytes left) / (smallest encoding of one element) before any element is looked at, so a nested
  array's count is checked before the native reader could allocate for it. A count that does not fit, a negative
  one other than -1, a read past the end (a string or bytes length, a varint, a tagged field's size) raise
  ``LengthOutOfBounds``; a null count where the schema forbids one raises ``InvalidRequest`` (kio would return None
  and the handler would fail on it). Both are ``MalformedFrame``s without header data: the codec adds it.
- Strings and bytes are only skipped: kio's readers check their lengths and nulls themselves (a null where none is
  allowed is kio's ``UnexpectedNull``, which the codec also reports as ``InvalidRequest``). For a valid value the
  walk lands exactly where kio's reader does (tested against it for every served api/version); for an invalid one
  the native reader fails at that same field, before it reaches any array after it.
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

__all__ = ["Checker", "Reader", "check_body", "checker", "checker_for", "guarded_reader"]

# checker(buf, offset, end) -> offset after the entity; raises LengthOutOfBounds / InvalidRequest.
Checker = Callable[[bytes, int, int], int]
Reader = Callable[[bytes, int], tuple[Any, int]]

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
        if check is not None:
            check(buf[o:stop], 0, size)  # its own buffer: a checker may read up to the end of what it is given
        o = stop
    return o


class _Source:
    """Python source of one checker function, and the objects it refers to.

    The generated code reads ``buf`` directly; a read past the end raises ``IndexError`` (or ``struct.error``),
    turned into ``LengthOutOfBounds`` once around the whole function, so only array counts need explicit checks.
    That is why a checker's ``end`` must be ``len(buf)``.
    """

    def __init__(self, name: str, what: str, native: Reader | None = None) -> None:
        self.name = name
        self.native = native  # set: the function is a reader, (buf, start) -> native(buf, start) after the check
        head = (
            [f"def {name}(buf, start):", "    o = start", "    end = len(buf)"]
            if native
            else [f"def {name}(buf, o, end):"]
        )
        self.lines: list[str] = [*head, "    try:", "        pass"]
        self.env: dict[str, Any] = {
            "_I16": _I16,
            "_I32": _I32,
            "_StructError": struct.error,
            "_uvarint": _uvarint,
            "_skip_tags": _skip_tags,
            "_overrun": _overrun,
            "_negative": _negative,
            "_null": _null,
        }
        self.pending = 0  # bytes of fixed-width fields not yet added to ``o``
        self.counter = 0
        self.what = self.const(what)

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

    def compile(self) -> Checker:
        self.settle(2)
        self.emit(1, "except (IndexError, _StructError):")
        self.emit(2, f"raise _overrun({self.what}) from None")
        self.emit(1, f"if o > end: raise _overrun({self.what})")
        self.emit(1, f"return {self.const(self.native)}(buf, start)" if self.native else "return o")
        namespace = dict(self.env)
        exec("\n".join(self.lines), namespace)  # source generated from kio's schema; no input in it
        fn: Checker = namespace[self.name]
        return fn


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


def _field_has_array(f: Any) -> bool:
    item_type, is_array, _ = field_shape(f)
    return is_array or (item_type is not None and _has_array(item_type))


def _emit_entity(src: _Source, indent: int, cls: type[Any], stop_after_last_array: bool = False) -> None:
    """Inline code walking one ``cls`` at ``o`` (nested entities inlined too: no call per array element).

    ``stop_after_last_array`` (the top level of a request): nothing after the last array can make kio allocate
    (strings and bytes it checks itself), so the walk ends there, and when that array's elements hold no array
    they are not walked either: only its count is checked. JoinGroup and SyncGroup then check one count and no
    element at all."""
    flexible = bool(cls.__flexible__)
    all_fields = fields(cls)
    if stop_after_last_array and not any(_field_has_array(f) for f in all_fields if f.metadata.get("tag") is not None):
        regular = [f for f in all_fields if f.metadata.get("tag") is None]
        last = max((i for i, f in enumerate(regular) if _field_has_array(f)), default=-1)
        for f in regular[: last + 1]:
            item_type, is_array, _ = field_shape(f)
            if f is regular[last] and is_array and (item_type is None or not _has_array(item_type)):
                _emit_array(
                    src,
                    indent,
                    f,
                    item_type,
                    f.metadata.get("kafka_type"),
                    field_shape(f)[2],
                    flexible,
                    f"{cls.__name__}.{f.name}",
                    elements=False,
                )
            else:
                _emit_field(src, indent, cls, f, flexible)
        return
    known_tags: dict[int, Checker] = {}
    for f in all_fields:
        tag = f.metadata.get("tag")
        if tag is None:
            _emit_field(src, indent, cls, f, flexible)
            continue
        tag_src = _Source(f"check_{cls.__name__}_tag_{tag}", f"{cls.__name__}.{f.name} (tag {tag})")
        _emit_field(tag_src, 2, cls, f, True)
        known_tags[int(tag)] = tag_src.compile()
    if flexible:
        src.settle(indent)
        w = src.const(f"{cls.__name__} tagged fields")
        src.emit(indent, f"if buf[o]: o = _skip_tags(buf, o, end, {src.const(known_tags)}, {w})")
        src.emit(indent, "else: o += 1")


def _emit_field(src: _Source, indent: int, owner: type[Any], f: Any, flexible: bool) -> None:
    item_type, is_array, nullable = field_shape(f)
    kafka_type = f.metadata.get("kafka_type")
    what = f"{owner.__name__}.{f.name}"
    if is_array:
        _emit_array(src, indent, f, item_type, kafka_type, nullable, flexible, what)
    elif item_type is not None:  # a nested struct (no request schema we serve has one; responses do)
        src.settle(indent)
        if nullable and f.metadata.get("tag") is None:  # KIP-893: an int8 marker, -1 = null
            src.emit(indent, "o += 1")
            src.emit(indent, "if buf[o - 1] < 0x80:")
            _emit_entity(src, indent + 1, item_type)
            src.settle(indent + 1)
            src.emit(indent + 1, "pass")
        else:
            _emit_entity(src, indent, item_type)
    elif kafka_type in _FIXED_SIZE:
        src.pending += _FIXED_SIZE[kafka_type]
    elif kafka_type in _LENGTH_PREFIXED:
        _emit_skip_length_prefixed(src, indent, kafka_type, flexible, what)
    else:
        raise TypeError(f"{what}: no bounds check for kafka type {kafka_type!r}")


def _emit_array(
    src: _Source,
    indent: int,
    f: Any,
    item_type: type[Any] | None,
    kafka_type: str | None,
    nullable: bool,
    flexible: bool,
    what: str,
    elements: bool = True,
) -> None:
    size = _min_size(kafka_type, item_type, flexible)
    if size < 1:
        raise TypeError(f"{what}: array of zero-width elements")
    w = src.const(what)
    src.settle(indent)
    if flexible:
        src.emit(indent, "n = buf[o]")
        src.emit(indent, "if n < 0x80: o += 1")
        src.emit(indent, f"else: n, o = _uvarint(buf, o, end, {w})")
        src.emit(indent, "if n:")
        src.emit(indent + 1, "n -= 1")
    else:
        src.emit(indent, "n = _I32(buf, o)[0]")
        src.emit(indent, "o += 4")
        src.emit(indent, "if n >= 0:")
    body = indent + 1
    src.emit(body, f"if n * {size} > end - o: raise _overrun({w})")
    if not elements:
        pass
    elif item_type is not None:
        src.emit(body, "for _ in range(n):")
        _emit_entity(src, body + 1, item_type)
        src.settle(body + 1)
        src.emit(body + 1, "pass")
    elif kafka_type in _FIXED_SIZE:
        src.emit(body, f"o += n * {size}")
    else:
        assert kafka_type is not None
        src.emit(body, "for _ in range(n):")
        _emit_skip_length_prefixed(src, body + 1, kafka_type, flexible, f"{what}[]")
        src.settle(body + 1)
    # a null count (compact 0, legacy -1): kio's reader returns None even where the schema forbids it
    if not flexible:
        src.emit(indent, f"elif n != -1: raise _negative({w})")
    if not nullable:
        src.emit(indent, f"else: raise _null({w})")


def _emit_skip_length_prefixed(src: _Source, indent: int, kafka_type: str, flexible: bool, what: str) -> None:
    """Skip a string or bytes field. kio's own readers check these lengths (and nulls) before allocating, so this
    only has to land where they land when the value is valid: a null or negative length skips just its prefix,
    and the native reader then refuses the same field before it reaches anything after it."""
    src.settle(indent)
    if flexible:
        w = src.const(what)
        src.emit(indent, "n = buf[o]")
        src.emit(indent, "if n < 0x80: o += n or 1")
        src.emit(indent, "else:")
        src.emit(indent + 1, f"n, o = _uvarint(buf, o, end, {w})")
        src.emit(indent + 1, "if n: o += n - 1")
    elif kafka_type == "string":
        src.emit(indent, "n = buf[o] << 8 | buf[o + 1]")
        src.emit(indent, "o += 2 + n if n < 0x8000 else 2")
    else:
        src.emit(indent, "n = _I32(buf, o)[0]")
        src.emit(indent, "o += 4 + n if n > 0 else 4")


@typed_cache
def checker_for(cls: type[Any]) -> Checker:
    """The compiled checker of entity ``cls`` (also for schemas without arrays). Raises ``TypeError`` for a field
    type this module does not know."""
    src = _Source(f"check_{cls.__name__}", cls.__name__)
    _emit_entity(src, 2, cls)
    return src.compile()


@typed_cache
def checker(cls: type[Any]) -> Checker | None:
    """The check to run before kio's native reader on ``cls``, or ``None`` when the schema has no array (kio's own
    string and bytes readers check their lengths before allocating). It stops after the last array (see
    ``_emit_entity``), so the offset it returns is not the end of the body; ``checker_for`` walks all of it."""
    if not _has_array(cls):
        return None
    src = _Source(f"check_{cls.__name__}", cls.__name__)
    _emit_entity(src, 2, cls, stop_after_last_array=True)
    return src.compile()


def guarded_reader(cls: type[Any], native: Reader) -> Reader:
    """``native`` (kio's reader of ``cls``: (buf, offset) -> (value, size)) behind ``checker(cls)``, as one
    function; ``native`` itself when the schema has no array."""
    if not _has_array(cls):
        return native
    src = _Source(f"read_{cls.__name__}", cls.__name__, native)
    _emit_entity(src, 2, cls, stop_after_last_array=True)
    read: Reader = src.compile()  # type: ignore[assignment]  # a reader when built with ``native``
    return read


def check_body(cls: type[Any], buf: bytes, offset: int) -> int:
    """Check one ``cls`` body at ``offset`` of ``buf`` (to its end); return the offset after it."""
    return checker_for(cls)(buf, offset, len(buf))
