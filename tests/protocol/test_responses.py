"""Error responses, checked by decoding our bytes with kafka-python (an independent decoder)."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.apis import SUPPORTED_VERSIONS
from protocol.codec import (
    RequestHeader,
    api_versions_error_frame,
    encode_body,
    encode_response,
    request_class,
    response_class,
)
from protocol.errors import ErrorCode
from protocol.responses import api_versions_response, error_response
from tests.protocol.samples import KAFKA_PYTHON, sample

ALL = [(k, v) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()) for v in range(lo, hi + 1)]
ERR = ErrorCode.coordinator_load_in_progress  # 14


def kp_decode(key: int, version: int, body: Any) -> Any:
    """Our encoding of ``body``, decoded by kafka-python."""
    frame = encode_response(RequestHeader(key, version, 5, None), body)
    decoded = KAFKA_PYTHON[key][1].decode(frame, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 5
    return decoded


def error_codes(value: Any) -> list[int]:
    """Every error_code in a kafka-python message tree."""
    out: list[int] = []
    struct = getattr(value, "_struct", None)
    if struct is None:
        return out
    for name in struct.fields:
        try:  # only the fields this version decoded; kafka-python's __getattr__ invents defaults for the others
            v = object.__getattribute__(value, name)
        except AttributeError:
            continue
        if name == "error_code" and v is not None:
            out.append(v)
        elif isinstance(v, list):
            for item in v:
                out.extend(error_codes(item))
        else:
            out.extend(error_codes(v))
    return out


@pytest.mark.parametrize("with_request", [True, False])
@pytest.mark.parametrize(("key", "version"), ALL)
def test_every_error_field_carries_the_error(key: int, version: int, with_request: bool) -> None:
    request = sample(request_class(key, version)) if with_request else None
    # kafka-python parses any errored ApiVersions answer as v0, which is what we send for UNSUPPORTED_VERSION.
    error = ErrorCode.unsupported_version if key == 18 else ERR
    body = error_response(key, version, error, request)
    assert type(body) is response_class(key, 0 if key == 18 else version)
    codes = error_codes(kp_decode(key, version, body))
    assert set(codes) <= {error.value}
    if with_request:  # without one, versions with no top-level error (OffsetCommit, Fetch <7) have none to set
        assert codes


def partitions_of(topics: Any, name: str = "name", partitions: str = "partitions") -> set[tuple[str, int, int]]:
    return {(getattr(t, name), p.partition_index, p.error_code) for t in topics for p in getattr(t, partitions)}


@pytest.mark.parametrize("version", [2, 9])
def test_offset_commit_names_every_requested_partition(version: int) -> None:
    request = sample(request_class(8, version))
    decoded = kp_decode(8, version, error_response(8, version, ERR, request))
    expected = {(t.name, p.partition_index, ERR.value) for t in request.topics for p in t.partitions}
    assert partitions_of(decoded.topics) == expected
    assert len(expected) == 4


@pytest.mark.parametrize("version", [1, 7])
def test_offset_fetch_single_group_versions(version: int) -> None:
    request = sample(request_class(9, version))
    decoded = kp_decode(9, version, error_response(9, version, ERR, request))
    expected = {(t.name, p, ERR.value) for t in request.topics for p in t.partition_indexes}
    assert partitions_of(decoded.topics) == expected
    for t in decoded.topics:
        for p in t.partitions:
            assert (p.committed_offset, p.metadata) == (-1, "")
    if version >= 2:
        assert decoded.error_code == ERR.value


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_grouped_versions(version: int) -> None:
    request = sample(request_class(9, version))
    decoded = kp_decode(9, version, error_response(9, version, ERR, request))
    assert [(g.group_id, g.error_code) for g in decoded.groups] == [(g.group_id, ERR.value) for g in request.groups]
    for got, asked in zip(decoded.groups, request.groups, strict=True):
        expected = {(t.name, p, ERR.value) for t in asked.topics for p in t.partition_indexes}
        assert partitions_of(got.topics) == expected


@pytest.mark.parametrize("version", [4, 12])
def test_fetch_error_has_empty_records_never_null(version: int) -> None:
    request = sample(request_class(1, version))
    decoded = kp_decode(1, version, error_response(1, version, ERR, request))
    got = {(t.topic, p.partition_index, p.error_code) for t in decoded.responses for p in t.partitions}
    assert got == {(t.topic, p.partition, ERR.value) for t in request.topics for p in t.partitions}
    for t in decoded.responses:
        for p in t.partitions:
            assert p.records == b""
            assert (p.high_watermark, p.last_stable_offset) == (-1, -1)
    if version >= 7:
        assert (decoded.error_code, decoded.session_id) == (ERR.value, 0)


def test_leave_group_v0_is_top_level_only() -> None:
    decoded = kp_decode(13, 0, error_response(13, 0, ERR, sample(request_class(13, 0))))
    assert decoded.error_code == ERR.value


def test_leave_group_v5_names_every_member() -> None:
    request = sample(request_class(13, 5))
    decoded = kp_decode(13, 5, error_response(13, 5, ERR, request))
    assert decoded.error_code == ERR.value
    got = [(m.member_id, m.group_instance_id, m.error_code) for m in decoded.members]
    assert got == [(m.member_id, m.group_instance_id, ERR.value) for m in request.members]


def test_find_coordinator_v0_has_no_node() -> None:
    decoded = kp_decode(10, 0, error_response(10, 0, ERR, sample(request_class(10, 0))))
    assert (decoded.error_code, decoded.node_id, decoded.host, decoded.port) == (ERR.value, -1, "", -1)


def test_find_coordinator_v6_answers_every_key() -> None:
    request = sample(request_class(10, 6))
    decoded = kp_decode(10, 6, error_response(10, 6, ERR, request))
    got = [(c.key, c.error_code, c.node_id, c.host, c.port) for c in decoded.coordinators]
    assert got == [(k, ERR.value, -1, "", -1) for k in request.coordinator_keys]


@pytest.mark.parametrize("version", [0, 9])
def test_join_group_error_has_no_generation_or_member(version: int) -> None:
    decoded = kp_decode(11, version, error_response(11, version, ERR))
    assert (decoded.error_code, decoded.generation_id, decoded.member_id, decoded.leader) == (ERR.value, -1, "", "")
    assert decoded.members == []
    assert decoded.protocol_name == ("" if version < 7 else None)


@pytest.mark.parametrize("version", [0, 12])
def test_metadata_names_every_requested_topic(version: int) -> None:
    request = sample(request_class(3, version))
    decoded = kp_decode(3, version, error_response(3, version, ERR, request))
    assert [(t.name, t.error_code) for t in decoded.topics] == [(t.name, ERR.value) for t in request.topics]
    assert decoded.brokers == []


def test_metadata_for_all_topics_lists_none() -> None:
    request = sample(request_class(3, 12), full=False)
    assert request.topics is None
    assert kp_decode(3, 12, error_response(3, 12, ERR, request)).topics == []


@pytest.mark.parametrize("version", [0, 5])
def test_describe_groups_answers_every_group(version: int) -> None:
    request = sample(request_class(15, version))
    decoded = kp_decode(15, version, error_response(15, version, ERR, request))
    assert [(g.group_id, g.error_code, g.group_state) for g in decoded.groups] == [
        (g, ERR.value, "") for g in request.groups
    ]
    if version >= 3:
        assert encode_body(error_response(15, version, ERR, request)).count(b"\x80\x00\x00\x00") == 2  # omitted ops


@pytest.mark.parametrize("version", [0, 2])
def test_delete_groups_answers_every_group(version: int) -> None:
    request = sample(request_class(42, version))
    decoded = kp_decode(42, version, error_response(42, version, ERR, request))
    assert [(r.group_id, r.error_code) for r in decoded.results] == [(g, ERR.value) for g in request.groups_names]


@pytest.mark.parametrize("version", [1, 7])
def test_list_offsets_has_unknown_offsets(version: int) -> None:
    request = sample(request_class(2, version))
    decoded = kp_decode(2, version, error_response(2, version, ERR, request))
    assert partitions_of(decoded.topics) == {
        (t.name, p.partition_index, ERR.value) for t in request.topics for p in t.partitions
    }
    assert {(p.offset, p.timestamp) for t in decoded.topics for p in t.partitions} == {(-1, -1)}


def test_offset_delete_top_level_and_partitions() -> None:
    request = sample(request_class(47, 0))
    decoded = kp_decode(47, 0, error_response(47, 0, ERR, request))
    assert decoded.error_code == ERR.value
    assert partitions_of(decoded.topics) == {
        (t.name, p.partition_index, ERR.value) for t in request.topics for p in t.partitions
    }


def test_list_groups_error() -> None:
    decoded = kp_decode(16, 5, error_response(16, 5, ERR, sample(request_class(16, 5))))
    assert (decoded.error_code, decoded.groups) == (ERR.value, [])


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_unsupported_version_lists_our_keys_in_v0_format(version: int) -> None:
    body = error_response(18, version, ErrorCode.unsupported_version)
    assert encode_response(RequestHeader(18, version, 9, None), body) == api_versions_error_frame(9)
    unsupported = kp_decode(18, version, body)
    assert {k.api_key: (k.min_version, k.max_version) for k in unsupported.api_keys} == dict(SUPPORTED_VERSIONS)


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_other_errors_keep_the_version_and_list_nothing(version: int) -> None:
    body = error_response(18, version, ErrorCode.invalid_request)
    assert type(body) is response_class(18, version)
    assert (body.error_code, body.api_keys) == (ErrorCode.invalid_request, ())


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_response_advertises_exactly_the_table(version: int) -> None:
    decoded = kp_decode(18, version, api_versions_response(version))
    assert decoded.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == dict(SUPPORTED_VERSIONS)
    assert len(decoded.api_keys) == len(SUPPORTED_VERSIONS)


def test_unknown_api_has_no_error_response() -> None:
    with pytest.raises(ValueError):
        error_response(26, 0, ERR)  # EndTxn: transactions are not served
    with pytest.raises(ValueError):
        error_response(12, 99, ERR)
