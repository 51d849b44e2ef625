"""Hand-written codecs for the old request versions Kafka 3.9 still served and kio 0.6.5 has no schema for.

Kafka 4 dropped them (KIP-896), but clients still in the field send them: Sarama 1.2x commits with OffsetCommit v1,
Burrow 1.2 asks ListOffsets v0, and old consumers fetch with OffsetFetch v0. They are:

=============  =========================================================================================
OffsetCommit   v0: group_id, topics[name, partitions[partition_index, committed_offset, metadata]]
               v1: + generation_id_or_member_epoch, member_id after group_id; + commit_timestamp (int64)
               per partition, before the metadata. Response v0/v1: topics[name, partitions[index, error]]
OffsetFetch    v0: as v1 (group_id, topics[name, partition_indexes[]]); the response has no top-level
               error: topics[name, partitions[index, offset, metadata, error]]
ListOffsets    v0: replica_id, topics[name, partitions[index, timestamp, max_num_offsets]]; response
               topics[name, partitions[index, error, old_style_offsets[]int64]]
=============  =========================================================================================

(Kafka's ``OffsetCommitRequest.json`` etc. at 3.9; all non-flexible: int16-prefixed strings, int32-prefixed arrays,
request header v1, response header v0.)

The message classes below are written in kio's shape (frozen dataclasses with ``kafka_type`` metadata and the
``__api_key__``/``__version__``/``__flexible__`` class attributes, field names as kio names them in the next version),
so ``protocol.codec.request_class``/``response_class`` return them like any kio class, the adapters read them with the
same attribute names, and ``protocol.responses.error_response`` fills them like any other version.

Rules of this module:

- Decoding never trusts a declared length: a string's or array's length is checked against the bytes left in the
  frame *before* anything is allocated (an array of N entities needs at least N times the entity's smallest encoding).
  Anything that does not fit raises ``LegacyDecodeError``, a ``MalformedFrame`` (the codec adds the correlation id).
- Trailing bytes after the body are ignored, as for every other version (Kafka's request parser does the same).
- Encoding writes the classes' fields in declaration order; strings as UTF-8.
"""

import struct
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final, get_args, get_origin, get_type_hints

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as _RequestHeaderV1
from kio.schema.response_header.v0.header import ResponseHeader as _ResponseHeaderV0
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from protocol.errors import MalformedFrame

__all__ = [
    "CLASSES",
    "REQUEST_CLASSES",
    "RESPONSE_CLASSES",
    "RESPONSE_ENCODERS",
    "LegacyDecodeError",
    "decode",
    "encode",
    "response_frame",
]

_OFFSET_COMMIT, _OFFSET_FETCH, _LIST_OFFSETS = 8, 9, 2


class LegacyDecodeError(MalformedFrame, ValueError):
    """A legacy body that does not decode. A ``ValueError`` too, so ``protocol.codec`` reports it as it reports
    kio's decode errors (with the request's correlation id, api key and version)."""


def _i32(**kw: Any) -> Any:
    return field(metadata={"kafka_type": "int32"}, **kw)


def _i64(**kw: Any) -> Any:
    return field(metadata={"kafka_type": "int64"}, **kw)


def _str(**kw: Any) -> Any:
    return field(metadata={"kafka_type": "string"}, **kw)


def _err() -> Any:
    return field(metadata={"kafka_type": "error_code"})


_frozen = dataclass(frozen=True, slots=True, kw_only=True)

# --------------------------------------------------------------------------------------------- OffsetCommit v0/v1


@_frozen
class OffsetCommitRequestPartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    partition_index: i32 = _i32()
    committed_offset: i64 = _i64()
    committed_metadata: str | None = _str()


@_frozen
class OffsetCommitRequestTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    name: str = _str()
    partitions: tuple[OffsetCommitRequestPartitionV0, ...]


@_frozen
class OffsetCommitRequestV0:
    """No generation or member: in 3.9 a v0 commit went to ZooKeeper, separate from the coordinator's offsets.
    Here it is a commit with generation -1 and no member (the defaults Kafka's schema gives the v1+ fields)."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    group_id: str = _str()
    topics: tuple[OffsetCommitRequestTopicV0, ...]


@_frozen
class OffsetCommitRequestPartitionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    partition_index: i32 = _i32()
    committed_offset: i64 = _i64()
    commit_timestamp: i64 = _i64(default=i64(-1))
    """The commit time in ms since the epoch, or -1: the broker's time."""
    committed_metadata: str | None = _str()


@_frozen
class OffsetCommitRequestTopicV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    name: str = _str()
    partitions: tuple[OffsetCommitRequestPartitionV1, ...]


@_frozen
class OffsetCommitRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    group_id: str = _str()
    generation_id_or_member_epoch: i32 = _i32(default=i32(-1))
    member_id: str = _str()
    topics: tuple[OffsetCommitRequestTopicV1, ...]


@_frozen
class OffsetCommitResponsePartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    partition_index: i32 = _i32()
    error_code: ErrorCode = _err()


@_frozen
class OffsetCommitResponseTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    name: str = _str()
    partitions: tuple[OffsetCommitResponsePartitionV0, ...]


@_frozen
class OffsetCommitResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    topics: tuple[OffsetCommitResponseTopicV0, ...]


@_frozen
class OffsetCommitResponsePartitionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    partition_index: i32 = _i32()
    error_code: ErrorCode = _err()


@_frozen
class OffsetCommitResponseTopicV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    name: str = _str()
    partitions: tuple[OffsetCommitResponsePartitionV1, ...]


@_frozen
class OffsetCommitResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_COMMIT)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    topics: tuple[OffsetCommitResponseTopicV1, ...]


# ---------------------------------------------------------------------------------------------------- OffsetFetch v0


@_frozen
class OffsetFetchRequestTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_FETCH)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    name: str = _str()
    partition_indexes: tuple[i32, ...] = _i32(default=())


@_frozen
class OffsetFetchRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_FETCH)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    group_id: str = _str()
    topics: tuple[OffsetFetchRequestTopicV0, ...]  # not nullable before v2


@_frozen
class OffsetFetchResponsePartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_FETCH)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    partition_index: i32 = _i32()
    committed_offset: i64 = _i64()
    metadata: str | None = _str()
    error_code: ErrorCode = _err()


@_frozen
class OffsetFetchResponseTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_FETCH)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    name: str = _str()
    partitions: tuple[OffsetFetchResponsePartitionV0, ...]


@_frozen
class OffsetFetchResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_OFFSET_FETCH)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    topics: tuple[OffsetFetchResponseTopicV0, ...]


# ---------------------------------------------------------------------------------------------------- ListOffsets v0


@_frozen
class ListOffsetsPartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_LIST_OFFSETS)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    partition_index: i32 = _i32()
    timestamp: i64 = _i64()
    max_num_offsets: i32 = _i32(default=i32(1))


@_frozen
class ListOffsetsTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_LIST_OFFSETS)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    name: str = _str()
    partitions: tuple[ListOffsetsPartitionV0, ...]


@_frozen
class ListOffsetsRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_LIST_OFFSETS)
    __header_schema__: ClassVar[type[_RequestHeaderV1]] = _RequestHeaderV1
    replica_id: i32 = _i32()
    topics: tuple[ListOffsetsTopicV0, ...]


@_frozen
class ListOffsetsPartitionResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_LIST_OFFSETS)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    partition_index: i32 = _i32()
    error_code: ErrorCode = _err()
    old_style_offsets: tuple[i64, ...] = _i64()


@_frozen
class ListOffsetsTopicResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_LIST_OFFSETS)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    name: str = _str()
    partitions: tuple[ListOffsetsPartitionResponseV0, ...]


@_frozen
class ListOffsetsResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(_LIST_OFFSETS)
    __header_schema__: ClassVar[type[_ResponseHeaderV0]] = _ResponseHeaderV0
    topics: tuple[ListOffsetsTopicResponseV0, ...]


# (api key, version) -> class
REQUEST_CLASSES: Final[dict[tuple[int, int], type[Any]]] = {
    (_OFFSET_COMMIT, 0): OffsetCommitRequestV0,
    (_OFFSET_COMMIT, 1): OffsetCommitRequestV1,
    (_OFFSET_FETCH, 0): OffsetFetchRequestV0,
    (_LIST_OFFSETS, 0): ListOffsetsRequestV0,
}
RESPONSE_CLASSES: Final[dict[tuple[int, int], type[Any]]] = {
    (_OFFSET_COMMIT, 0): OffsetCommitResponseV0,
    (_OFFSET_COMMIT, 1): OffsetCommitResponseV1,
    (_OFFSET_FETCH, 0): OffsetFetchResponseV0,
    (_LIST_OFFSETS, 0): ListOffsetsResponseV0,
}

# ------------------------------------------------------------------------------------------------------ the codec

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INTS: Final[dict[str, struct.Struct]] = {"int16": _I16, "int32": _I32, "int64": _I64, "error_code": _I16}

# One step of a class's layout: (field name, kind, struct or nested class, flag). The flag says "nullable" for a
# string and "an error code" (read as ``ErrorCode``) for an integer.
_PRIM, _STRING, _PRIM_ARRAY, _ENTITY_ARRAY = 0, 1, 2, 3
_Step = tuple[str, int, Any, bool]


def _layout(cls: type[Any]) -> tuple[tuple[_Step, ...], int]:
    """The class's fields as decode/encode steps, and the fewest bytes one instance can take on the wire."""
    cached = _LAYOUTS.get(cls)
    if cached is not None:
        return cached
    hints = get_type_hints(cls)
    steps: list[_Step] = []
    least = 0
    for f in fields(cls):
        tp = hints[f.name]
        nullable = type(None) in get_args(tp)
        kafka_type = f.metadata.get("kafka_type")
        if get_origin(tp) is tuple:
            item = get_args(tp)[0]
            if isinstance(item, type) and hasattr(item, "__dataclass_fields__"):
                steps.append((f.name, _ENTITY_ARRAY, item, False))
            else:
                steps.append((f.name, _PRIM_ARRAY, _INTS[str(kafka_type)], False))
            least += 4
        elif kafka_type == "string":
            steps.append((f.name, _STRING, None, nullable))
            least += 2
        else:
            s = _INTS[str(kafka_type)]
            steps.append((f.name, _PRIM, s, kafka_type == "error_code"))
            least += s.size
    result = (tuple(steps), least)
    _LAYOUTS[cls] = result
    return result


_LAYOUTS: dict[type[Any], tuple[tuple[_Step, ...], int]] = {}


def _read(cls: type[Any], data: bytes, offset: int) -> tuple[Any, int]:
    steps, _ = _layout(cls)
    end = len(data)
    values: dict[str, Any] = {}
    for name, kind, sub, flag in steps:
        if kind == _PRIM:
            if offset + sub.size > end:
                raise LegacyDecodeError(f"{cls.__name__}.{name}: truncated")
            (value,) = sub.unpack_from(data, offset)
            offset += sub.size
            values[name] = ErrorCode(value) if flag else value
        elif kind == _STRING:
            if offset + 2 > end:
                raise LegacyDecodeError(f"{cls.__name__}.{name}: truncated string length")
            (n,) = _I16.unpack_from(data, offset)
            offset += 2
            if n < 0:
                if n != -1 or not flag:
                    raise LegacyDecodeError(f"{cls.__name__}.{name}: string length {n}")
                values[name] = None
                continue
            if n > end - offset:
                raise LegacyDecodeError(f"{cls.__name__}.{name}: string of {n} bytes, {end - offset} left")
            try:
                values[name] = data[offset : offset + n].decode("utf-8")
            except UnicodeDecodeError as e:
                raise LegacyDecodeError(f"{cls.__name__}.{name}: {e}") from None
            offset += n
        else:
            if offset + 4 > end:
                raise LegacyDecodeError(f"{cls.__name__}.{name}: truncated array length")
            (count,) = _I32.unpack_from(data, offset)
            offset += 4
            if count < 0:  # no array here is nullable in these versions
                raise LegacyDecodeError(f"{cls.__name__}.{name}: array length {count}")
            item_size = sub.size if kind == _PRIM_ARRAY else _layout(sub)[1]
            if count * item_size > end - offset:  # checked before anything is allocated
                raise LegacyDecodeError(
                    f"{cls.__name__}.{name}: {count} items need at least {count * item_size} bytes, {end - offset} left"
                )
            if kind == _PRIM_ARRAY:
                values[name] = struct.unpack_from(f">{count}{sub.format[-1]}", data, offset)
                offset += count * sub.size
            else:
                items = []
                for _ in range(count):
                    item, offset = _read(sub, data, offset)
                    items.append(item)
                values[name] = tuple(items)
    return cls(**values), offset


def decode(cls: type[Any], data: bytes, offset: int = 0) -> tuple[Any, int]:
    """One instance of ``cls`` (a class of this module) read at ``offset``, and the offset after it.

    Raises ``LegacyDecodeError`` (a ``MalformedFrame``) on anything that does not fit the bytes given."""
    if cls not in CLASSES:
        raise ValueError(f"{cls.__name__} is not a legacy message class")
    try:
        return _read(cls, data, offset)
    except (struct.error, ValueError, TypeError) as e:
        if isinstance(e, LegacyDecodeError):
            raise
        raise LegacyDecodeError(f"{cls.__name__}: {type(e).__name__}: {e}") from None


def _write(out: list[bytes], value: Any) -> None:
    steps, _ = _layout(type(value))
    for name, kind, sub, _flag in steps:
        v = getattr(value, name)
        if kind == _PRIM:
            out.append(sub.pack(v.value if isinstance(v, ErrorCode) else v))
        elif kind == _STRING:
            if v is None:
                out.append(b"\xff\xff")
            else:
                raw = v.encode("utf-8")
                out.append(_I16.pack(len(raw)))
                out.append(raw)
        elif kind == _PRIM_ARRAY:
            out.append(_I32.pack(len(v)))
            out.append(struct.pack(f">{len(v)}{sub.format[-1]}", *v))
        else:
            out.append(_I32.pack(len(v)))
            for item in v:
                _write(out, item)


def encode(value: Any) -> bytes:
    """The body of ``value`` (an instance of a class of this module), without any header."""
    out: list[bytes] = []
    _write(out, value)
    return b"".join(out)


def response_frame(correlation_id: int, body: Any) -> bytes:
    """The whole response frame: size, response header v0 (correlation id) and the body."""
    payload = encode(body)
    return _I32.pack(len(payload) + 4) + _I32.pack(correlation_id) + payload


def _all_classes() -> frozenset[type[Any]]:
    seen: set[type[Any]] = set()

    def walk(cls: type[Any]) -> None:
        seen.add(cls)
        for _, kind, sub, _ in _layout(cls)[0]:
            if kind == _ENTITY_ARRAY:
                walk(sub)

    for cls in (*REQUEST_CLASSES.values(), *RESPONSE_CLASSES.values()):
        walk(cls)
    return frozenset(seen)


CLASSES: Final[frozenset[type[Any]]] = _all_classes()  # every message and nested class of this module

# For protocol.codec: encoder of each response class, (correlation id, body) -> frame.
RESPONSE_ENCODERS: Final[dict[type[Any], Callable[[int, Any], bytes]]] = {
    cls: response_frame for cls in RESPONSE_CLASSES.values()
}
