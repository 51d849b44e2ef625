"""Decoding edge cases: bytes-like input, truncation, malformed fields, unknown tagged fields, unsupported versions."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.consumer.group import OffsetCommitResponse as KpOffsetCommitResponse
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataResponse as KpMetadataResponse
from kio.serial import entity_reader

from protocol import codec
from protocol.apis import SUPPORTED_VERSIONS
from protocol.codec import (
    RequestHeader,
    api_versions_error_frame,
    decode_body,
    decode_request,
    encode_body,
    encode_response,
    request_class,
    response_class,
)
from protocol.errors import ErrorCode, MalformedFrame, UnsupportedApi
from protocol.headers import encode_request_header
from protocol.responses import unsupported_response_frame
from protocol.tolerant import read_entity_tolerant
from tests.protocol.samples import encode_with_unknown_tags, sample
from tests.protocol.test_golden import HEARTBEAT_V0_REQUEST, HEARTBEAT_V4_REQUEST

ALL = [(k, v) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()) for v in range(lo, hi + 1)]
LOWEST_AND_HIGHEST = [(k, v) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()) for v in sorted({lo, hi})]
FLEXIBLE = [(k, v) for k, v in ALL if request_class(k, v).__flexible__]


def request_bytes(key: int, version: int, body: Any, correlation_id: int = 77, client_id: str | None = "c") -> bytes:
    header = RequestHeader(key, version, correlation_id, client_id)
    return encode_request_header(header, request_class(key, version).__flexible__) + encode_body(body)


def decode_error(data: bytes) -> MalformedFrame:
    with pytest.raises(MalformedFrame) as e:
        decode_request(data)
    return e.value


# --- bytes-like input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [bytearray, memoryview, lambda b: memoryview(b"xx" + b + b"yy")[2:-2]])
def test_any_bytes_like_input_decodes(kind: Any) -> None:
    expected = decode_request(HEARTBEAT_V4_REQUEST)
    assert decode_request(kind(HEARTBEAT_V4_REQUEST)) == expected
    assert decode_request(kind(HEARTBEAT_V0_REQUEST)) == decode_request(HEARTBEAT_V0_REQUEST)


@pytest.mark.parametrize(("key", "version"), ALL)
@pytest.mark.parametrize("client_id", [None, "", "c", "ü" * 40])
def test_every_header_shape_decodes_the_same_the_first_time_and_after(
    key: int, version: int, client_id: str | None
) -> None:
    """decode_request reads the header of a served api/version it has seen before once (the first request of each
    takes the checked path). Both give the same request, for every served api/version, client id and header tags."""
    body = sample(request_class(key, version))
    wire = request_bytes(key, version, body, correlation_id=-5, client_id=client_id)
    codec._decoders.pop((key, version), None)
    first = decode_request(wire)
    assert (key, version) in codec._decoders
    again = decode_request(wire)
    assert first == again == (RequestHeader(key, version, -5, client_id), body)
    if request_class(key, version).__flexible__:
        header_end = 8 + 2 + len((client_id or "").encode())
        tagged = wire[:header_end] + bytes.fromhex("01 00 01 ff") + wire[header_end + 1 :]
        assert decode_request(tagged) == first


def test_trailing_bytes_after_the_body_are_ignored_like_kafka() -> None:
    assert decode_request(HEARTBEAT_V4_REQUEST + b"\x00\x01") == decode_request(HEARTBEAT_V4_REQUEST)


# --- truncated and malformed --------------------------------------------------------------------------------------


def test_shorter_than_the_header_prefix_has_no_correlation_id() -> None:
    for n in range(8):
        assert decode_error(HEARTBEAT_V4_REQUEST[:n]).correlation_id is None


@pytest.mark.parametrize(("key", "version"), LOWEST_AND_HIGHEST)
def test_every_truncation_is_malformed_with_the_correlation_id(key: int, version: int) -> None:
    wire = request_bytes(key, version, sample(request_class(key, version)), correlation_id=31337)
    assert decode_request(wire).body == sample(request_class(key, version))
    for n in range(8, len(wire)):
        e = decode_error(wire[:n])
        assert (e.correlation_id, e.api_key, e.api_version) == (31337, key, version), n


def test_invalid_utf8_in_a_body_string_is_malformed() -> None:
    bad = HEARTBEAT_V4_REQUEST.replace(bytes.fromhex("03 6731"), bytes.fromhex("03 ff31"), 1)
    assert bad != HEARTBEAT_V4_REQUEST
    assert decode_error(bad).correlation_id == 42


def test_invalid_utf8_in_client_id_is_malformed() -> None:
    bad = HEARTBEAT_V0_REQUEST.replace(b"abc", b"a\xffc")
    assert decode_error(bad).correlation_id == 42


def test_truncated_client_id_is_malformed() -> None:
    bad = HEARTBEAT_V0_REQUEST[:8] + b"\x00\x10abc"
    assert decode_error(bad).correlation_id == 42


def test_null_in_a_non_nullable_string_is_malformed() -> None:
    # Heartbeat v0 group_id (legacy string) with length -1.
    bad = HEARTBEAT_V0_REQUEST.replace(bytes.fromhex("0002 6731"), bytes.fromhex("ffff"), 1)
    assert decode_error(bad).correlation_id == 42


def test_negative_string_length_is_malformed() -> None:
    bad = HEARTBEAT_V0_REQUEST.replace(bytes.fromhex("0002 6731"), bytes.fromhex("fff0"), 1)
    assert decode_error(bad).correlation_id == 42


def test_huge_array_length_is_malformed_not_a_memory_blowup() -> None:
    body = sample(request_class(15, 0), full=False)  # DescribeGroups v0: groups = []
    wire = request_bytes(15, 0, body)
    bad = wire[:-4] + struct.pack(">i", 2**31 - 1)
    assert decode_error(bad).correlation_id == 77


def test_tagged_field_running_past_the_end_is_malformed() -> None:
    bad = HEARTBEAT_V4_REQUEST[:-1] + bytes.fromhex("01 05 10 aabb")  # tag 5 claims 16 bytes, has 2
    assert decode_error(bad).correlation_id == 42


def test_header_tagged_field_running_past_the_end_is_malformed() -> None:
    bad = HEARTBEAT_V4_REQUEST[:13] + bytes.fromhex("01 00 7f")
    assert decode_error(bad).correlation_id == 42


# --- unknown tagged fields ----------------------------------------------------------------------------------------


def test_unknown_tagged_fields_in_the_request_header_are_skipped() -> None:
    header_end = 8 + 2 + 3  # prefix, client_id length, "abc"
    assert HEARTBEAT_V4_REQUEST[header_end] == 0
    with_tags = (
        HEARTBEAT_V4_REQUEST[:header_end] + bytes.fromhex("02 00 01 ff 07 00") + HEARTBEAT_V4_REQUEST[header_end + 1 :]
    )
    assert decode_request(with_tags) == decode_request(HEARTBEAT_V4_REQUEST)


def test_unknown_tagged_field_in_a_hand_written_heartbeat_body_is_skipped() -> None:
    with_tags = HEARTBEAT_V4_REQUEST[:-1] + bytes.fromhex("02 05 02 aabb 1f 00")
    assert decode_request(with_tags) == decode_request(HEARTBEAT_V4_REQUEST)


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize(("key", "version"), FLEXIBLE)
def test_unknown_tagged_fields_anywhere_in_a_request_body_are_skipped(key: int, version: int, full: bool) -> None:
    cls = request_class(key, version)
    body = sample(cls, full)
    payload = encode_with_unknown_tags(body)  # an unknown tag in every struct, nested ones included
    with pytest.raises(KeyError):  # the premise: kio's native reader refuses it
        entity_reader(cls)(payload, 0)
    wire = encode_request_header(RequestHeader(key, version, 5, "c"), True) + payload

    assert decode_request(wire).body == body


@pytest.mark.parametrize(("key", "version"), [(k, v) for k, v in ALL if response_class(k, v).__flexible__])
def test_unknown_tagged_fields_in_a_response_body_are_skipped(key: int, version: int) -> None:
    cls = response_class(key, version)
    body = sample(cls)
    assert decode_body(cls, encode_with_unknown_tags(body)) == body


@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize(("key", "version"), ALL)
def test_tolerant_reader_agrees_with_kio_native(key: int, version: int, full: bool) -> None:
    for cls in (request_class(key, version), response_class(key, version)):
        payload = encode_body(sample(cls, full)) + b"trailing"
        native = entity_reader(cls)(payload, 0)
        assert read_entity_tolerant(cls, payload) == native


# --- unsupported api keys and versions ----------------------------------------------------------------------------


def unsupported(data: bytes) -> UnsupportedApi:
    with pytest.raises(UnsupportedApi) as e:
        decode_request(data)
    return e.value


def test_unknown_api_key_carries_the_correlation_id() -> None:
    e = unsupported(struct.pack(">hhi", 999, 0, 4242) + b"\x00\x00")
    assert (e.api_key, e.api_version, e.correlation_id, e.body) == (999, 0, 4242, None)
    assert unsupported_response_frame(e) is None  # Kafka closes the connection


def test_unsupported_version_unknown_to_kio_carries_the_correlation_id() -> None:
    e = unsupported(HEARTBEAT_V4_REQUEST[:2] + b"\x00\x05" + HEARTBEAT_V4_REQUEST[4:])
    assert (e.api_key, e.api_version, e.correlation_id, e.body) == (12, 5, 42, None)
    assert unsupported_response_frame(e) is None


def test_unserved_api_known_to_kio_is_decoded_but_not_answered() -> None:
    body = sample(request_class(26, 0), full=False)  # EndTxn v0: kio has it, we do not serve it (no transactions)
    e = unsupported(request_bytes(26, 0, body, correlation_id=8))
    assert (e.api_key, e.api_version, e.correlation_id, e.client_id, e.body) == (26, 0, 8, "c", body)
    assert unsupported_response_frame(e) is None


def test_version_below_the_minimum_is_unsupported() -> None:
    e = unsupported(struct.pack(">hhih", 1, 3, 3, -1) + b"\x00" * 20)  # Fetch v3 (kio has none)
    assert (e.api_key, e.api_version, e.correlation_id) == (1, 3, 3)


def test_unsupported_api_versions_gets_the_v0_error_answer() -> None:
    request = struct.pack(">hhih", 18, 5, 99, 3) + b"lib" + b"\x00" + b"\x00"
    e = unsupported(request)
    frame = unsupported_response_frame(e)
    assert frame == api_versions_error_frame(99)
    assert frame is not None
    # As a client parses it: kafka-python decodes an ApiVersions answer with an error as v0, whatever it sent.
    for sent_version in (0, 4):
        decoded = KpApiVersionsResponse.decode(frame, version=sent_version, header=True, framed=True)
        assert decoded.header.correlation_id == 99
        assert decoded.error_code == 35
        assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == dict(SUPPORTED_VERSIONS)


def test_api_versions_error_frame_with_kafka_python_v0() -> None:
    frame = api_versions_error_frame(7)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    decoded = KpApiVersionsResponse[0].decode(frame, header=True, framed=True)
    assert (decoded.header.correlation_id, decoded.error_code) == (7, ErrorCode.unsupported_version.value)
    assert len(decoded.api_keys) == len(SUPPORTED_VERSIONS)


def test_unsupported_metadata_version_known_to_kio_is_answered_in_its_format() -> None:
    body = sample(request_class(3, 13))  # kafka-python's and librdkafka's maximum; we serve up to 12
    e = unsupported(request_bytes(3, 13, body, correlation_id=11))
    assert e.body == body
    frame = unsupported_response_frame(e)
    assert frame is not None
    decoded = KpMetadataResponse.decode(frame, version=13, header=True, framed=True)
    assert decoded.header.correlation_id == 11
    assert [t.name for t in decoded.topics] == [t.name for t in body.topics]
    assert {t.error_code for t in decoded.topics} == {35}


def test_unsupported_offset_commit_version_names_every_partition() -> None:
    body = sample(request_class(8, 10))
    e = unsupported(request_bytes(8, 10, body, correlation_id=12))
    frame = unsupported_response_frame(e)
    assert frame is not None
    decoded = KpOffsetCommitResponse.decode(frame, version=10, header=True, framed=True)
    got = {(t.topic_id, p.partition_index, p.error_code) for t in decoded.topics for p in t.partitions}
    assert got == {(t.topic_id, p.partition_index, 35) for t in body.topics for p in t.partitions}  # v10: by id


# --- encode_response contract -------------------------------------------------------------------------------------


def test_encode_response_refuses_another_apis_body() -> None:
    with pytest.raises(ValueError):
        encode_response(RequestHeader(11, 4, 1, None), sample(response_class(12, 4)))


def test_encode_response_refuses_another_version() -> None:
    with pytest.raises(ValueError):
        encode_response(RequestHeader(12, 3, 1, None), sample(response_class(12, 4)))


def test_api_versions_may_be_answered_in_v0_format_for_any_request_version() -> None:
    body = sample(response_class(18, 0))
    assert encode_response(RequestHeader(18, 4, 1, None), body) == encode_response(RequestHeader(18, 0, 1, None), body)


# --- hand-encoded Heartbeat responses ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(5))
def test_heartbeat_fast_path_is_byte_identical_to_kio(version: int) -> None:
    from datetime import timedelta

    from protocol.codec import _FAST_ENCODERS, _encode_with_kio

    cls = response_class(12, version)
    assert cls in _FAST_ENCODERS
    throttles = [timedelta(0), timedelta(milliseconds=1), timedelta(microseconds=1500), timedelta(seconds=2_147_483)]
    for error in ErrorCode:
        for throttle in throttles:
            body = cls(error_code=error) if version == 0 else cls(error_code=error, throttle_time=throttle)
            for correlation_id in (0, 1, -1, 2**31 - 1):
                header = RequestHeader(12, version, correlation_id, "c")
                assert encode_response(header, body) == _encode_with_kio(correlation_id, version >= 4, body)
