"""Request frames built from the request schemas (kio's, and ``protocol.legacy``'s in the same shape), for the length
guard's tests and the fuzzer: valid ones, and the same with a declared length replaced.

- ``neutral(cls, path, n)``: the smallest valid body (arrays empty, strings empty, numbers 0), except that along
  ``path`` (array field names, one per level) each array has one element and the last one has ``n``.
- ``array_paths(cls)``: every array reachable that way, top level and nested.
- ``count_offset(cls, path)``: where that array's count is in ``encode(neutral(cls, path, 0))``, found by comparing
  the encodings with 0 and 1 elements (independent of ``protocol.bounds``).
- ``random_body(cls, rng)``: a random valid body; strings come from a small pool so that the daemon's state (groups,
  topics, offsets) stays bounded however long a fuzz run is.
- ``mutate(frame, rng)``: one of bit flips, truncation, a junk tail, a declared length replaced (0, -1, 0x7fffffff,
  0xffffffff, a huge compact varint), a garbled header, an unknown api key or version.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

from kio.static.constants import uuid_zero

from protocol.apis import SUPPORTED_VERSIONS
from protocol.codec import encode_body, request_class
from protocol.framing import encode_frame
from protocol.headers import RequestHeader, encode_request_header
from protocol.tolerant import field_shape

SERVED = [(k, v) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()) for v in range(lo, hi + 1)]

_ZERO: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": b"",
    "uuid": uuid_zero,
    "timedelta_i32": timedelta(0),
    "timedelta_i64": timedelta(0),
}


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def header_bytes(api_key: int, version: int, correlation_id: int = 77, client_id: str | None = "fuzz") -> bytes:
    flexible = bool(request_class(api_key, version).__flexible__)
    return encode_request_header(RequestHeader(api_key, version, correlation_id, client_id), flexible)


def payload(api_key: int, version: int, body: bytes, correlation_id: int = 77) -> bytes:
    """Header and body: a frame without its size prefix (what ``decode_request`` takes)."""
    return header_bytes(api_key, version, correlation_id) + body


def frame(api_key: int, version: int, body: bytes, correlation_id: int = 77) -> bytes:
    return encode_frame(payload(api_key, version, body, correlation_id))


def _field(cls: type[Any], name: str) -> dataclasses.Field[Any]:
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f
    raise KeyError(name)


def _regular_fields(cls: type[Any]) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("tag") is None]


def _zero_item(f: dataclasses.Field[Any]) -> Any:
    item_type, _, _ = field_shape(f)
    return neutral(item_type) if item_type is not None else _ZERO[f.metadata["kafka_type"]]


def neutral(cls: type[Any], path: tuple[str, ...] = (), n: int = 0) -> Any:
    values: dict[str, Any] = {}
    for f in _regular_fields(cls):
        item_type, is_array, _ = field_shape(f)
        if is_array:
            if path and path[0] == f.name:
                if len(path) == 1:
                    values[f.name] = tuple(_zero_item(f) for _ in range(n))
                else:
                    assert item_type is not None
                    values[f.name] = (neutral(item_type, path[1:], n),)
            else:
                values[f.name] = ()
        elif item_type is not None:
            values[f.name] = neutral(item_type)
        else:
            values[f.name] = _ZERO[f.metadata["kafka_type"]]
    return cls(**values)


def array_paths(cls: type[Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for f in _regular_fields(cls):
        item_type, is_array, _ = field_shape(f)
        if is_array:
            yield (*prefix, f.name)
            if item_type is not None:
                yield from array_paths(item_type, (*prefix, f.name))


def path_field(cls: type[Any], path: tuple[str, ...]) -> dataclasses.Field[Any]:
    f = _field(cls, path[0])
    for name in path[1:]:
        item_type, _, _ = field_shape(f)
        assert item_type is not None
        f = _field(item_type, name)
    return f


def count_offset(cls: type[Any], path: tuple[str, ...]) -> int:
    """Where the count of the array at ``path`` starts in ``encode_body(neutral(cls, path, 0))``."""
    empty, one = encode_body(neutral(cls, path, 0)), encode_body(neutral(cls, path, 1))
    pos = next(i for i, (a, b) in enumerate(zip(empty, one, strict=False)) if a != b)
    if cls.__flexible__:
        assert empty[pos] == 1 and one[pos] == 2, (cls, path)
        return pos
    assert empty[pos - 3 : pos + 1] == b"\0\0\0\0" and one[pos] == 1, (cls, path)
    return pos - 3


def with_count(cls: type[Any], path: tuple[str, ...], declared: bytes) -> bytes:
    """The body of ``neutral(cls, path, 0)`` with that array's count replaced by the raw bytes ``declared``."""
    body = encode_body(neutral(cls, path, 0))
    pos = count_offset(cls, path)
    width = 1 if cls.__flexible__ else 4
    return body[:pos] + declared + body[pos + width :]


# Declared counts that must never reach an allocation: (raw bytes, what) per encoding.
HUGE_LEGACY_COUNTS = (
    (struct.pack(">i", 0x7FFFFFFF), "0x7fffffff"),
    (struct.pack(">I", 0x80000000), "-0x80000000"),
    (struct.pack(">i", -2), "-2"),
)
NULL_LEGACY_COUNT = struct.pack(">i", -1)  # 0xffffffff: null
HUGE_COMPACT_COUNTS = (
    (uvarint(0xFFFFFFFF + 1), "0xffffffff"),
    (uvarint(0xFFFFFFFF), "0xfffffffe"),
    (uvarint(0x7FFFFFFF + 1), "0x7fffffff"),
    (b"\xff\xff\xff\xff\xff\x01", "a 6-byte varint"),
)
NULL_COMPACT_COUNT = b"\x00"


def bad_count_bodies(cls: type[Any]) -> Iterator[tuple[tuple[str, ...], str, bytes, bool]]:
    """(array path, what, body, is_null) for every array of ``cls`` and every huge or null declared count."""
    for path in array_paths(cls):
        huge = HUGE_COMPACT_COUNTS if cls.__flexible__ else HUGE_LEGACY_COUNTS
        for raw, what in huge:
            yield path, what, with_count(cls, path, raw), False
        null = NULL_COMPACT_COUNT if cls.__flexible__ else NULL_LEGACY_COUNT
        yield path, "null", with_count(cls, path, null), True


# --- random valid bodies ------------------------------------------------------------------------------------------

STRING_POOL = ("", "fuzz-g0", "fuzz-g1", "fuzz-t0", "fuzz-t1", "range", "consumer", "m-1", "ü", "x" * 300)


def _random_value(kafka_type: str, rng: random.Random) -> Any:
    if kafka_type == "string":
        return rng.choice(STRING_POOL)
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.choice((0, 1, 8, 40)))
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "uuid":
        return uuid_zero if rng.random() < 0.5 else UUID(int=rng.getrandbits(128))
    if kafka_type == "float64":
        return rng.random()
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return timedelta(milliseconds=rng.choice((0, 1, 100, 3000, 60_000)))
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}.get(kafka_type)
    if bits is not None:
        choice = rng.random()
        if choice < 0.6:
            return rng.choice((0, 1, 2, -1))
        if choice < 0.8:
            return rng.choice((-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
        return rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))
    ubits = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}[kafka_type]
    return rng.randrange(0, 2**ubits)


def random_body(cls: type[Any], rng: random.Random, depth: int = 0) -> Any:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("tag") is not None and rng.random() < 0.7:
            continue  # a tagged field left at its default
        item_type, is_array, nullable = field_shape(f)
        if nullable and rng.random() < 0.2:
            values[f.name] = None
            continue
        if is_array:
            n = rng.choice((0, 1, 1, 2, 3)) if depth < 3 else 0
            if item_type is not None:
                values[f.name] = tuple(random_body(item_type, rng, depth + 1) for _ in range(n))
            else:
                values[f.name] = tuple(_random_value(f.metadata["kafka_type"], rng) for _ in range(n))
        elif item_type is not None:
            values[f.name] = random_body(item_type, rng, depth + 1)
        else:
            values[f.name] = _random_value(f.metadata["kafka_type"], rng)
    return cls(**values)


def random_frame(rng: random.Random, correlation_id: int) -> tuple[int, int, bytes]:
    """(api key, version, whole frame) of a random valid request of a random served api/version."""
    key, version = rng.choice(SERVED)
    body = encode_body(random_body(request_class(key, version), rng))
    return key, version, frame(key, version, body, correlation_id)


# --- mutations ----------------------------------------------------------------------------------------------------

_LEGACY_LENGTHS = (
    struct.pack(">i", 0),
    struct.pack(">i", -1),
    struct.pack(">i", 0x7FFFFFFF),
    struct.pack(">I", 0xFFFFFFFF),
    struct.pack(">i", -2),
)
_SHORT_LENGTHS = (struct.pack(">h", 0), struct.pack(">h", -1), struct.pack(">h", 0x7FFF), struct.pack(">h", -2))
_COMPACT_LENGTHS = (b"\x00", uvarint(0xFFFFFFFF), uvarint(0xFFFFFFFF + 1), uvarint(0x7FFFFFFF), b"\xff" * 6 + b"\x01")


def _resize(buf: bytearray) -> bytes:
    return struct.pack(">i", len(buf) - 4) + bytes(buf[4:])


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """A mutated copy of a whole frame (size prefix included), and the mutation's name."""
    buf = bytearray(data)
    body_start = 4
    kind = rng.randrange(9)
    if kind == 0:  # bit flips anywhere after the size prefix
        for _ in range(rng.choice((1, 1, 2, 4, 8))):
            i = rng.randrange(body_start, len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return "bitflip", bytes(buf)
    if kind == 1:  # truncated, the size prefix telling the truth (a short request) or not (a stalled one)
        cut = rng.randrange(body_start, len(buf))
        del buf[cut:]
        return ("truncate", _resize(buf)) if rng.random() < 0.8 else ("truncate-stall", bytes(buf))
    if kind == 2:  # a junk tail
        buf += rng.randbytes(rng.choice((1, 7, 64, 500)))
        return "junk-tail", _resize(buf)
    if kind in (3, 4, 5):  # a declared length replaced somewhere in the body
        pos = rng.randrange(12, max(13, len(buf)))
        table = (_LEGACY_LENGTHS, _SHORT_LENGTHS, _COMPACT_LENGTHS)[kind - 3]
        raw = rng.choice(table)
        buf[pos : pos + (len(raw) if kind != 5 else 1)] = raw
        return ("length-i32", "length-i16", "length-varint")[kind - 3], _resize(buf)
    if kind == 6:  # header fields garbled: api key, version, correlation id, client id length
        field = rng.choice(((4, 2), (6, 2), (8, 4), (12, 2)))
        pos, width = field
        buf[pos : pos + width] = rng.randbytes(width)
        return "header", bytes(buf)
    if kind == 7:  # an unknown api key or an unserved version
        if rng.random() < 0.5:
            buf[4:6] = struct.pack(">h", rng.choice((-1, 4, 19, 57, 68, 69, 1000, 32767)))
        else:
            buf[6:8] = struct.pack(">h", rng.choice((-1, 13, 20, 99, 32767)))
        return "unknown-api", bytes(buf)
    # a random size prefix: huge (refused), or not matching the bytes
    buf[0:4] = struct.pack(">i", rng.choice((-1, 0, 1, 0x7FFFFFFF, len(buf) + rng.randrange(1, 100))))
    return "size", bytes(buf)
