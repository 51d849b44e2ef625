"""protocol.legacy: the hand-written codecs of OffsetCommit v0-1, OffsetFetch v0 and ListOffsets v0.

Golden bytes come from kafka-python 3.0.12's hand-written ``kafka.protocol.old`` structs (an encoder independent of
kio and of ours): they encode the requests we decode, and decode the responses we encode. (The generic tests in
test_golden/test_codec/test_responses cover these versions too, through kafka-python's JSON-schema classes.)
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from kafka.protocol.old.commit import (
    OffsetCommitRequest_v0,
    OffsetCommitRequest_v1,
    OffsetCommitResponse_v0,
    OffsetCommitResponse_v1,
    OffsetFetchRequest_v0,
    OffsetFetchResponse_v0,
)
from kafka.protocol.old.list_offsets import ListOffsetsRequest_v0, ListOffsetsResponse_v0

from protocol import legacy
from protocol.codec import decode_request, encode_response
from protocol.errors import ErrorCode, MalformedFrame
from protocol.headers import RequestHeader

SARAMA = "sarama"


def kp_request(kp: object, correlation_id: int = 4242, client_id: str = SARAMA) -> bytes:
    kp.with_header(correlation_id=correlation_id, client_id=client_id)  # type: ignore[attr-defined]
    return bytes(kp.encode(header=True))  # type: ignore[attr-defined]


def kp_response(kp_cls: object, frame: bytes) -> object:
    decoded = kp_cls.decode(frame, header=True, framed=True)  # type: ignore[attr-defined]
    assert decoded.header.correlation_id == 4242
    return decoded


# ---------------------------------------------------------------------------------------------- golden requests


def test_sarama_offset_commit_v1_decodes() -> None:
    wire = kp_request(
        OffsetCommitRequest_v1(
            group_id="orders-app",
            generation_id_or_member_epoch=7,
            member_id="sarama-1f3c",
            topics=[("orders", [(0, 1234, 1_700_000_000_000, ""), (2, 99, -1, None)]), ("pay", [(1, 5, -1, "é")])],
        )
    )
    request = decode_request(wire)
    assert request.header == RequestHeader(8, 1, 4242, SARAMA)
    body = request.body
    assert type(body) is legacy.OffsetCommitRequestV1
    assert (body.group_id, body.generation_id_or_member_epoch, body.member_id) == ("orders-app", 7, "sarama-1f3c")
    got = [
        (t.name, p.partition_index, p.committed_offset, p.commit_timestamp, p.committed_metadata)
        for t in body.topics
        for p in t.partitions
    ]
    assert got == [
        ("orders", 0, 1234, 1_700_000_000_000, ""),
        ("orders", 2, 99, -1, None),
        ("pay", 1, 5, -1, "é"),
    ]
    assert legacy.encode(body) == wire[wire.index(b"orders-app") - 2 :]  # our encoder gives kafka-python's bytes


def test_offset_commit_v0_decodes() -> None:
    wire = kp_request(OffsetCommitRequest_v0(group_id="g", topics=[("t", [(1, 42, "meta")])]))
    body = decode_request(wire).body
    assert body == legacy.OffsetCommitRequestV0(
        group_id="g",
        topics=(
            legacy.OffsetCommitRequestTopicV0(
                name="t",
                partitions=(
                    legacy.OffsetCommitRequestPartitionV0(
                        partition_index=1, committed_offset=42, committed_metadata="meta"
                    ),
                ),
            ),
        ),
    )


def test_offset_fetch_v0_decodes() -> None:
    wire = kp_request(OffsetFetchRequest_v0(group_id="burrow", topics=[("t", [0, 1, 2]), ("u", [])]))
    body = decode_request(wire).body
    assert type(body) is legacy.OffsetFetchRequestV0
    assert body.group_id == "burrow"
    assert [(t.name, t.partition_indexes) for t in body.topics] == [("t", (0, 1, 2)), ("u", ())]


def test_list_offsets_v0_decodes() -> None:
    wire = kp_request(ListOffsetsRequest_v0(replica_id=-1, topics=[("t", [(0, -1, 1), (1, -2, 10)])]))
    body = decode_request(wire).body
    assert type(body) is legacy.ListOffsetsRequestV0
    assert body.replica_id == -1
    assert [(p.partition_index, p.timestamp, p.max_num_offsets) for p in body.topics[0].partitions] == [
        (0, -1, 1),
        (1, -2, 10),
    ]


# --------------------------------------------------------------------------------------------- golden responses


@pytest.mark.parametrize(("version", "kp_cls"), [(0, OffsetCommitResponse_v0), (1, OffsetCommitResponse_v1)])
def test_offset_commit_response_reads_back_in_kafka_python(version: int, kp_cls: object) -> None:
    cls = legacy.RESPONSE_CLASSES[(8, version)]
    topic_cls, part_cls = (legacy.OffsetCommitResponseTopicV0, legacy.OffsetCommitResponsePartitionV0)
    if version == 1:
        topic_cls, part_cls = (legacy.OffsetCommitResponseTopicV1, legacy.OffsetCommitResponsePartitionV1)
    body = cls(
        topics=(
            topic_cls(
                name="orders",
                partitions=(
                    part_cls(partition_index=0, error_code=ErrorCode.none),
                    part_cls(partition_index=9, error_code=ErrorCode.unknown_topic_or_partition),
                ),
            ),
        )
    )
    frame = encode_response(RequestHeader(8, version, 4242, SARAMA), body)
    decoded = kp_response(kp_cls, frame)
    assert decoded.to_object() == {  # type: ignore[attr-defined]
        "topics": [
            {
                "name": "orders",
                "partitions": [{"partition_index": 0, "error_code": 0}, {"partition_index": 9, "error_code": 3}],
            }
        ]
    }
    golden = kp_cls(topics=[("orders", [(0, 0), (9, 3)])])  # type: ignore[operator]
    golden.with_header(correlation_id=4242)
    assert frame == bytes(golden.encode(header=True, framed=True))


def test_offset_fetch_v0_response_golden() -> None:
    body = legacy.OffsetFetchResponseV0(
        topics=(
            legacy.OffsetFetchResponseTopicV0(
                name="t",
                partitions=(
                    legacy.OffsetFetchResponsePartitionV0(
                        partition_index=0, committed_offset=17, metadata="m", error_code=ErrorCode.none
                    ),
                    legacy.OffsetFetchResponsePartitionV0(
                        partition_index=1, committed_offset=-1, metadata="", error_code=ErrorCode.none
                    ),
                ),
            ),
        )
    )
    frame = encode_response(RequestHeader(9, 0, 4242, SARAMA), body)
    golden = OffsetFetchResponse_v0(topics=[("t", [(0, 17, "m", 0), (1, -1, "", 0)])])
    golden.with_header(correlation_id=4242)
    assert frame == bytes(golden.encode(header=True, framed=True))


def test_list_offsets_v0_response_golden() -> None:
    body = legacy.ListOffsetsResponseV0(
        topics=(
            legacy.ListOffsetsTopicResponseV0(
                name="t",
                partitions=(
                    legacy.ListOffsetsPartitionResponseV0(
                        partition_index=0, error_code=ErrorCode.none, old_style_offsets=(0,)
                    ),
                    legacy.ListOffsetsPartitionResponseV0(
                        partition_index=5, error_code=ErrorCode.unknown_topic_or_partition, old_style_offsets=()
                    ),
                ),
            ),
        )
    )
    frame = encode_response(RequestHeader(2, 0, 4242, "burrow"), body)
    golden = ListOffsetsResponse_v0(topics=[("t", [(0, 0, [0]), (5, 3, [])])])
    golden.with_header(correlation_id=4242)
    assert frame == bytes(golden.encode(header=True, framed=True))
    assert kp_response(ListOffsetsResponse_v0, frame).to_object()["topics"][0]["partitions"][0] == {  # type: ignore[attr-defined]
        "partition_index": 0,
        "error_code": 0,
        "old_style_offsets": [0],
    }


# ------------------------------------------------------------------------------------------ never trust a length


def header(api_key: int, version: int, correlation_id: int = 99) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, 1) + b"c"


def malformed(wire: bytes) -> MalformedFrame:
    with pytest.raises(MalformedFrame) as e:
        decode_request(wire)
    return e.value


@pytest.mark.parametrize("count", [0x7FFFFFFF, 0x10000, 2])
def test_a_huge_declared_topic_count_is_malformed_before_any_allocation(count: int) -> None:
    wire = header(8, 1) + struct.pack(">h", 1) + b"g" + struct.pack(">ih", -1, 0) + struct.pack(">i", count) + b"x" * 8
    tracemalloc.start()
    try:
        e = malformed(wire)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (e.correlation_id, e.api_key, e.api_version) == (99, 8, 1)
    assert peak < 200_000, peak


@pytest.mark.parametrize("raw", [b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfe"])
def test_negative_array_lengths_are_malformed(raw: bytes) -> None:
    """No array is nullable in these versions (OffsetFetch's null topics came with v2)."""
    for api_key, version, prefix in (
        (9, 0, struct.pack(">h", 1) + b"g"),
        (2, 0, struct.pack(">i", -1)),
        (8, 0, struct.pack(">h", 1) + b"g"),
    ):
        e = malformed(header(api_key, version) + prefix + raw)
        assert (e.correlation_id, e.api_key, e.api_version) == (99, api_key, version)


def test_a_partition_index_array_longer_than_the_frame_is_malformed() -> None:
    wire = header(9, 0) + struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
    e = malformed(wire + struct.pack(">i", 0xFFFFFFF) + b"\x00" * 12)
    assert (e.correlation_id, e.api_key, e.api_version) == (99, 9, 0)


def test_strings_longer_than_the_frame_null_where_not_nullable_or_bad_utf8_are_malformed() -> None:
    malformed(header(8, 0) + struct.pack(">h", 0x7FFF) + b"g")
    malformed(header(8, 0) + struct.pack(">h", -1) + struct.pack(">i", 0))  # null group id
    malformed(header(8, 0) + struct.pack(">h", -2) + struct.pack(">i", 0))
    malformed(header(8, 0) + struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">i", 0))


def test_nullable_metadata_and_trailing_bytes() -> None:
    partition = struct.pack(">iq", 3, 10) + struct.pack(">h", -1)
    wire = header(8, 0) + struct.pack(">h", 1) + b"g" + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
    wire += struct.pack(">i", 1) + partition + b"trailing bytes are ignored, as Kafka does"
    body = decode_request(wire).body
    assert body.topics[0].partitions[0].committed_metadata is None


def test_decode_rejects_foreign_classes_and_raises_malformed_frame_directly() -> None:
    with pytest.raises(ValueError):
        legacy.decode(int, b"")
    with pytest.raises(MalformedFrame):
        legacy.decode(legacy.OffsetFetchRequestV0, b"\x00\x01g\x00\x00")


@pytest.mark.parametrize("cls", sorted(set(legacy.REQUEST_CLASSES.values()), key=lambda c: c.__name__))
def test_the_legacy_reader_itself_checks_every_length(cls: type) -> None:
    """Without the codec's generic length guard in front of it: every truncation, and a count of 0x7fffffff in
    place of each array length, is a LegacyDecodeError before anything big is allocated."""
    from tests.protocol.samples import sample

    value = sample(cls)
    body = legacy.encode(value)
    assert legacy.decode(cls, body) == (value, len(body))
    for n in range(len(body)):
        with pytest.raises(legacy.LegacyDecodeError):
            legacy.decode(cls, body[:n])
    refused = 0
    for at in range(len(body) - 3):
        if struct.unpack_from(">i", body, at)[0] != 2:  # samples have two items per array
            continue
        forged = body[:at] + struct.pack(">i", 0x7FFFFFFF) + body[at + 4 :]
        tracemalloc.start()
        try:
            legacy.decode(cls, forged)
        except legacy.LegacyDecodeError:
            refused += 1
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        assert peak < 200_000, (at, peak)
    assert refused >= 1
