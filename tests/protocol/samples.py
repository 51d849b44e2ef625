"""Test helpers: deterministic sample values for any kio message class, and their kafka-python twins.

``sample(cls, full=True)`` fills every field (nullable ones with values, arrays with two items, tagged fields with
non-default values); ``full=False`` gives the sparse shape (nulls, empty arrays, tagged fields left at defaults).
``to_kafka_python`` builds the same message with kafka-python 3.0.12's independent protocol classes, so its encoder
gives golden bytes to compare kio's (and our codec's) bytes against.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.admin.cluster import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_unsigned_varint

from protocol.errors import ErrorCode
from protocol.tolerant import field_shape

# api key -> (kafka-python request class, response class)
KAFKA_PYTHON: dict[int, tuple[Any, Any]] = {
    18: (ApiVersionsRequest, ApiVersionsResponse),
    3: (MetadataRequest, MetadataResponse),
    10: (FindCoordinatorRequest, FindCoordinatorResponse),
    11: (JoinGroupRequest, JoinGroupResponse),
    14: (SyncGroupRequest, SyncGroupResponse),
    12: (HeartbeatRequest, HeartbeatResponse),
    13: (LeaveGroupRequest, LeaveGroupResponse),
    8: (OffsetCommitRequest, OffsetCommitResponse),
    9: (OffsetFetchRequest, OffsetFetchResponse),
    0: (ProduceRequest, ProduceResponse),
    2: (ListOffsetsRequest, ListOffsetsResponse),
    1: (FetchRequest, FetchResponse),
    16: (ListGroupsRequest, ListGroupsResponse),
    15: (DescribeGroupsRequest, DescribeGroupsResponse),
    42: (DeleteGroupsRequest, DeleteGroupsResponse),
    47: (OffsetDeleteRequest, OffsetDeleteResponse),
    60: (DescribeClusterRequest, DescribeClusterResponse),
    19: (CreateTopicsRequest, CreateTopicsResponse),
    20: (DeleteTopicsRequest, DeleteTopicsResponse),
    21: (DeleteRecordsRequest, DeleteRecordsResponse),
    23: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    32: (DescribeConfigsRequest, DescribeConfigsResponse),
    37: (CreatePartitionsRequest, CreatePartitionsResponse),
    44: (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    33: (AlterConfigsRequest, AlterConfigsResponse),
    22: (InitProducerIdRequest, InitProducerIdResponse),
    29: (DescribeAclsRequest, DescribeAclsResponse),
    30: (CreateAclsRequest, CreateAclsResponse),
    31: (DeleteAclsRequest, DeleteAclsResponse),
    50: (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
    51: (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
    17: (SaslHandshakeRequest, SaslHandshakeResponse),
    36: (SaslAuthenticateRequest, SaslAuthenticateResponse),
}

_ERRORS = [
    ErrorCode.not_coordinator,
    ErrorCode.unknown_member_id,
    ErrorCode.rebalance_in_progress,
    ErrorCode.illegal_generation,
    ErrorCode.none,
    ErrorCode.member_id_required,
]


def _primitive(kafka_type: str, n: int) -> Any:
    match kafka_type:
        case "int8":
            return n % 100
        case "int16":
            return n % 30000
        case "int32" | "uint32":
            return 1000 + n
        case "int64":
            return 10_000_000_000 + n
        case "string":
            return f"s{n}-é"
        case "bytes" | "records":
            return bytes([n % 256, 1, 2])
        case "bool":
            return True
        case "uuid":
            return UUID(int=0x1234 + n)
        case "error_code":
            return _ERRORS[n % len(_ERRORS)]
        case "datetime_i64":
            return datetime.fromtimestamp(1_700_000_000 + n, tz=UTC)
        case "timedelta_i32" | "timedelta_i64":
            return timedelta(milliseconds=500 + n)
    raise AssertionError(f"no sample for {kafka_type}")


def sample(cls: type[Any], full: bool = True, _counter: Any = None) -> Any:
    counter = _counter if _counter is not None else itertools.count(1)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        is_tag = "tag" in f.metadata
        if is_tag and not full:
            continue
        item_type, is_array, nullable = field_shape(f)
        if nullable and not full:
            values[f.name] = None
        elif is_array:
            if not full:
                values[f.name] = ()
            elif item_type is not None:
                values[f.name] = tuple(sample(item_type, full, counter) for _ in range(2))
            else:
                kafka_type = f.metadata["kafka_type"]
                values[f.name] = tuple(_primitive(kafka_type, next(counter)) for _ in range(2))
        elif item_type is not None:
            values[f.name] = sample(item_type, full, counter)
        else:
            values[f.name] = _primitive(f.metadata["kafka_type"], next(counter))
    return cls(**values)


# kafka-python renames these and types them as a set of bit positions ("bitfield").
_RENAMED = {
    "topic_authorized_operations": "authorized_operations",
    "cluster_authorized_operations": "authorized_operations",
}


def _convert(kp_field: Any, value: Any) -> Any:
    if kp_field.type_str == "bitfield":
        return {bit for bit in range(32) if value & (1 << bit)}
    if isinstance(value, ErrorCode):
        return int(value.value)
    if isinstance(value, timedelta):
        return int(value / timedelta(milliseconds=1))
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if dataclasses.is_dataclass(value):
        return to_kafka_python(kp_field.data_class, value, None)
    if isinstance(value, tuple):
        return [_convert(kp_field, v) for v in value]
    return value


def to_kafka_python(kp_cls: Any, value: Any, version: int | None) -> Any:
    """The kafka-python twin of a kio value (field names mapped: kio drops ``_ms`` from duration fields)."""
    kp_fields = kp_cls._struct.fields
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if "tag" in f.metadata and v == f.default:
            continue  # kio writes a tagged field only when it differs from its default; kafka-python when given
        name = _RENAMED.get(f.name, f.name)
        if name not in kp_fields:
            name += "_ms"
        kwargs[name] = _convert(kp_fields[name], v)
    if version is None:
        return kp_cls(**kwargs)
    return kp_cls[version](**kwargs)


UNKNOWN_TAG = 1000  # above every tag Kafka defines for these messages, so it sorts last
UNKNOWN_TAG_PAYLOAD = b"\xde\xad\xbe"


def encode_with_unknown_tags(value: Any) -> bytes:
    """Encode like kio, but add an unknown tagged field (tag ``UNKNOWN_TAG``) to every flexible struct.

    A reader following Kafka's rules must decode this to ``value``.
    """
    out = io.BytesIO()
    _write_with_unknown_tags(out, value)
    return out.getvalue()


def _write_with_unknown_tags(out: io.BytesIO, value: Any) -> None:
    cls = type(value)
    flexible = bool(cls.__flexible__)
    tagged: list[tuple[int, bytes]] = []
    for f in dataclasses.fields(cls):
        v = getattr(value, f.name)
        tag = f.metadata.get("tag")
        buf = io.BytesIO() if tag is not None else out
        if tag is not None and v == f.default:
            continue
        item_type, is_array, nullable = field_shape(f)
        if item_type is not None and is_array:
            if v is None:
                buf.write(b"\x00" if flexible else b"\xff\xff\xff\xff")
            else:
                if flexible:
                    write_unsigned_varint(buf, len(v) + 1)
                else:
                    buf.write(len(v).to_bytes(4, "big"))
                for item in v:
                    _write_with_unknown_tags(buf, item)
        elif item_type is not None:
            if nullable and tag is None:
                if v is None:
                    buf.write(b"\xff")
                    continue
                buf.write(b"\x01")
            _write_with_unknown_tags(buf, v)
        else:
            get_field_writer(f, flexible, False, tag is not None)(buf, v)
        if tag is not None:
            assert isinstance(buf, io.BytesIO)
            tagged.append((int(tag), buf.getvalue()))
    if not flexible:
        return
    tagged.append((UNKNOWN_TAG, UNKNOWN_TAG_PAYLOAD))
    write_unsigned_varint(out, len(tagged))
    for tag, payload in sorted(tagged):
        write_unsigned_varint(out, tag)
        write_unsigned_varint(out, len(payload))
        out.write(payload)
