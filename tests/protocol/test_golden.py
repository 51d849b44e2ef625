"""Golden bytes: our codec against an independent encoder (kafka-python 3.0.12) and against hex written by hand
from the Kafka protocol guide. Every advertised API at every advertised version (so in particular the lowest and
highest), requests and responses, in a fully populated and a sparse (nulls, empty arrays) shape."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse

from protocol.apis import SUPPORTED_VERSIONS
from protocol.codec import (
    RequestHeader,
    decode_body,
    decode_request,
    encode_body,
    encode_response,
    request_class,
    response_class,
)
from protocol.errors import ErrorCode
from protocol.headers import encode_request_header
from tests.protocol.samples import KAFKA_PYTHON, sample, to_kafka_python

CASES = [(key, v) for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()) for v in range(lo, hi + 1)]
SHAPES = [pytest.param(True, id="full"), pytest.param(False, id="sparse")]


def kafka_python_request(key: int, version: int, body: Any, correlation_id: int, client_id: str | None) -> bytes:
    kp = to_kafka_python(KAFKA_PYTHON[key][0], body, version)
    kp.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(kp.encode(header=True))


@pytest.mark.parametrize("full", SHAPES)
@pytest.mark.parametrize(("key", "version"), CASES)
def test_request_golden_bytes_and_round_trip(key: int, version: int, full: bool) -> None:
    cls = request_class(key, version)
    body = sample(cls, full)
    wire = kafka_python_request(key, version, body, correlation_id=123456, client_id="client-é")

    request = decode_request(wire)

    assert request.header == RequestHeader(key, version, 123456, "client-é")
    assert request.body == body
    ours = encode_request_header(request.header, cls.__flexible__) + encode_body(request.body)
    assert ours == wire


@pytest.mark.parametrize("full", SHAPES)
@pytest.mark.parametrize(("key", "version"), CASES)
def test_response_golden_bytes_and_round_trip(key: int, version: int, full: bool) -> None:
    cls = response_class(key, version)
    body = sample(cls, full)
    kp = to_kafka_python(KAFKA_PYTHON[key][1], body, version)
    kp.with_header(correlation_id=654321)
    golden = bytes(kp.encode(header=True, framed=True))

    frame = encode_response(RequestHeader(key, version, 654321, "c"), body)

    assert frame == golden
    header_size = 4 if key == 18 or not cls.__flexible__ else 5
    assert decode_body(cls, frame, 4 + header_size) == body


def test_null_client_id_in_both_header_versions() -> None:
    for key, version in [(12, 0), (12, 4)]:
        body = sample(request_class(key, version))
        wire = kafka_python_request(key, version, body, correlation_id=1, client_id=None)
        assert decode_request(wire).header.client_id is None


# --- hand-written from https://kafka.apache.org/protocol (field order per the message JSON schemas) ----------------

HEARTBEAT_V0_REQUEST = bytes.fromhex(
    "000c"  # api key 12
    "0000"  # version 0
    "0000002a"  # correlation id 42
    "0003 616263"  # client_id "abc" (legacy string)
    "0002 6731"  # group_id "g1"
    "00000005"  # generation_id 5
    "0002 6d31"  # member_id "m1"
)

HEARTBEAT_V4_REQUEST = bytes.fromhex(
    "000c 0004 0000002a"  # api key 12, version 4, correlation id 42
    "0003 616263"  # client_id stays a legacy nullable string in header v2
    "00"  # header tagged fields: none
    "03 6731"  # group_id compact string (length + 1)
    "00000005"  # generation_id
    "03 6d31"  # member_id
    "00"  # group_instance_id: compact nullable string, null
    "00"  # body tagged fields: none
)

HEARTBEAT_V4_RESPONSE_FRAME = bytes.fromhex(
    "0000000c"  # size 12
    "0000002a"  # correlation id
    "00"  # response header v1 tagged fields
    "00000000"  # throttle_time_ms
    "001b"  # error 27 REBALANCE_IN_PROGRESS
    "00"  # tagged fields
)

API_VERSIONS_V3_REQUEST = bytes.fromhex(
    "0012 0003 00000007"  # api key 18, version 3, correlation id 7
    "ffff"  # client_id null
    "00"  # header tagged fields
    "04 6b6763"  # client_software_name "kgc"
    "04 312e30"  # client_software_version "1.0"
    "00"  # tagged fields
)

FIND_COORDINATOR_V0_REQUEST = bytes.fromhex("000a 0000 00000009 0001 78 0005 67726f7570")  # client "x", key "group"

JOIN_GROUP_V0_ERROR_RESPONSE_FRAME = bytes.fromhex(
    "00000014"  # size 20
    "00000003"  # correlation id, header v0
    "0019"  # error 25 UNKNOWN_MEMBER_ID
    "ffffffff"  # generation_id -1
    "0000"  # protocol_name ""
    "0000"  # leader ""
    "0000"  # member_id ""
    "00000000"  # members: empty array
)


def test_hand_written_heartbeat_v0_request() -> None:
    request = decode_request(HEARTBEAT_V0_REQUEST)
    assert request.header == RequestHeader(12, 0, 42, "abc")
    assert (request.body.group_id, request.body.generation_id, request.body.member_id) == ("g1", 5, "m1")


def test_hand_written_heartbeat_v4_request() -> None:
    request = decode_request(HEARTBEAT_V4_REQUEST)
    assert request.header == RequestHeader(12, 4, 42, "abc")
    body = request.body
    assert (body.group_id, body.generation_id, body.member_id, body.group_instance_id) == ("g1", 5, "m1", None)
    assert encode_request_header(request.header, True) + encode_body(body) == HEARTBEAT_V4_REQUEST


def test_hand_written_heartbeat_v4_response() -> None:
    body = response_class(12, 4)(throttle_time=timedelta(0), error_code=ErrorCode.rebalance_in_progress)
    assert encode_response(RequestHeader(12, 4, 42, "abc"), body) == HEARTBEAT_V4_RESPONSE_FRAME


def test_hand_written_api_versions_v3_request() -> None:
    request = decode_request(API_VERSIONS_V3_REQUEST)
    assert request.header == RequestHeader(18, 3, 7, None)
    assert (request.body.client_software_name, request.body.client_software_version) == ("kgc", "1.0")


def test_api_versions_v3_response_uses_header_v0_with_a_flexible_body() -> None:
    cls = response_class(18, 3)
    entry = cls.__dataclass_fields__["api_keys"].type.__args__[0]
    body = cls(
        error_code=ErrorCode.none,
        api_keys=(entry(api_key=12, min_version=0, max_version=4),),
        throttle_time=timedelta(0),
    )
    expected = bytes.fromhex(
        "00000013"  # size 19
        "00000007"  # correlation id; no header tagged-field byte
        "0000"  # error
        "02 000c 0000 0004 00"  # compact array of one entry (key 12, 0-4), with its tagged fields
        "00000000"  # throttle
        "00"  # tagged fields
    )
    assert encode_response(RequestHeader(18, 3, 7, None), body) == expected
    decoded = KpApiVersionsResponse.decode(expected, version=3, header=True, framed=True)
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(12, 0, 4)]


def test_hand_written_find_coordinator_v0_request() -> None:
    request = decode_request(FIND_COORDINATOR_V0_REQUEST)
    assert request.header == RequestHeader(10, 0, 9, "x")
    assert request.body.key == "group"


def test_hand_written_join_group_v0_error_response() -> None:
    body = response_class(11, 0)(
        error_code=ErrorCode.unknown_member_id, generation_id=-1, protocol_name="", leader="", member_id="", members=()
    )
    assert encode_response(RequestHeader(11, 0, 3, None), body) == JOIN_GROUP_V0_ERROR_RESPONSE_FRAME
