"""The server's hand-encoded answers (``offset_commit_response_frame``, ``sync_group_response_frame``,
``join_group_response_frame``) are byte-identical to encoding kio's response, for every version and shape, and
``decode_response_frame`` reads them back."""

from __future__ import annotations

import random

import pytest

from protocol import hot_responses
from protocol.codec import decode_response_frame, encode_response, response_class
from protocol.errors import ErrorCode
from protocol.headers import RequestHeader
from protocol.hot_responses import (
    JoinMembers,
    TopicErrors,
    join_group_response_frame,
    offset_commit_response_frame,
    sync_group_response_frame,
)
from servers.kafka.build import build

ERRORS = [int(e.value) for e in ErrorCode]


def _kio_frame(version: int, correlation_id: int, topics: TopicErrors) -> bytes:
    body = build(
        response_class(8, version),
        {
            "topics": [
                {
                    "name": name,
                    "partitions": [{"partition_index": p, "error_code": ErrorCode(e)} for p, e in partitions],
                }
                for name, partitions in topics
            ]
        },
    )
    return encode_response(RequestHeader(8, version, correlation_id, "c"), body)


SHAPES: list[TopicErrors] = [
    [],
    [("t", [(0, 0)])],
    [("orders", [(0, 0), (1, 0), (2, 3), (3, 0)]), ("payments", [(7, 25)])],
    [("", [])],
    [("ümlaut-topic", [(2**31 - 1, -1)])],
    [("x" * 200, [(i, 0) for i in range(130)])],  # lengths past one varint byte (>= 128) in flexible versions
    [(f"t{i}", [(0, 0)]) for i in range(140)],
]


@pytest.mark.parametrize("version", range(2, 10))  # the versions we serve (kio has no v0-1)
@pytest.mark.parametrize("shape", range(len(SHAPES)))
@pytest.mark.parametrize("correlation_id", [0, -1, 2**31 - 1])
def test_same_bytes_as_kio(version: int, shape: int, correlation_id: int) -> None:
    topics = SHAPES[shape]
    frame = offset_commit_response_frame(version, correlation_id, topics)
    assert frame == _kio_frame(version, correlation_id, topics)
    read_id, body = decode_response_frame(8, version, frame)
    assert read_id == correlation_id
    assert [(t.name, [(p.partition_index, int(p.error_code)) for p in t.partitions]) for t in body.topics] == [
        (name, list(partitions)) for name, partitions in topics
    ]


@pytest.mark.parametrize("seed", range(20))
def test_random_shapes(seed: int) -> None:
    rng = random.Random(seed)
    topics = [
        (f"topic-{rng.randrange(1000)}", [(rng.randrange(2**31), rng.choice(ERRORS)) for _ in range(rng.randrange(6))])
        for _ in range(rng.randrange(5))
    ]
    version = rng.randrange(2, 10)
    correlation_id = rng.randrange(-(2**31), 2**31)
    assert offset_commit_response_frame(version, correlation_id, topics) == _kio_frame(version, correlation_id, topics)


SYNC_CASES = [
    (0, None, None, b""),
    (0, "consumer", "range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"),
    (27, "consumer", "cooperative-sticky", b""),
    (25, None, None, b""),
    (0, "connect", "", bytes(range(256)) * 3),  # an assignment longer than one varint byte
    (0, "ümlaut", None, b"x"),
]


@pytest.mark.parametrize("version", range(6))
@pytest.mark.parametrize("case", range(len(SYNC_CASES)))
@pytest.mark.parametrize("correlation_id", [0, -1, 2**31 - 1])
def test_sync_group_same_bytes_as_kio(version: int, case: int, correlation_id: int) -> None:
    error, protocol_type, protocol_name, assignment = SYNC_CASES[case]
    body = build(
        response_class(14, version),
        {
            "error_code": ErrorCode(error),
            "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "assignment": assignment,
        },
    )
    expected = encode_response(RequestHeader(14, version, correlation_id, "c"), body)
    frame = sync_group_response_frame(version, correlation_id, error, protocol_type, protocol_name, assignment)
    assert frame == expected
    read_id, read = decode_response_frame(14, version, frame)
    assert read_id == correlation_id and read.assignment == assignment and int(read.error_code) == error


SUBSCRIPTION = b"\x00\x01\x00\x00\x00\x01\x00\x06orders\xff\xff\xff\xff"
JOIN_MEMBER_SHAPES: list[JoinMembers] = [
    [],
    [("m-1", None, SUBSCRIPTION)],
    [("m-1", "instance-1", SUBSCRIPTION), ("m-2", None, b""), ("ümlaut-m", "ü", bytes(range(256)))],
    [(f"kgc-bench-{i:036d}", f"i-{i}" if i % 3 else None, SUBSCRIPTION) for i in range(150)],  # > 127: 2-byte varint
]
JOIN_CASES = [  # error, generation, protocol type, protocol name, leader, skip assignment, member id, members shape
    (79, -1, None, None, "", False, "kgc-bench-new", 0),  # MEMBER_ID_REQUIRED
    (0, 1, "consumer", "range", "m-1", False, "m-1", 2),  # the leader
    (0, 7, "consumer", "cooperative-sticky", "m-1", False, "m-2", 0),  # a follower
    (0, 2**31 - 1, "consumer", "range", "m-1", True, "m-1", 3),  # static leader, skip assignment (v9)
    (27, -1, None, None, "", False, "", 0),
    (0, 3, "connect", "", "x" * 200, False, "y" * 130, 1),  # long strings: 2-byte varint lengths
]


def _join_kio_frame(version: int, correlation_id: int, case: tuple[object, ...], members: JoinMembers) -> bytes:
    error, generation, protocol_type, protocol_name, leader, skip, member_id, _ = case
    if version < 7 and protocol_name is None:
        protocol_name = ""  # as the adapter does: the field is not nullable before v7
    body = build(
        response_class(11, version),
        {
            "error_code": ErrorCode(error),
            "generation_id": generation,
            "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "leader": leader,
            "skip_assignment": skip,
            "member_id": member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in members],
        },
    )
    return encode_response(RequestHeader(11, version, correlation_id, "c"), body)


@pytest.mark.parametrize("version", range(10))
@pytest.mark.parametrize("case", range(len(JOIN_CASES)))
@pytest.mark.parametrize("correlation_id", [0, -1, 2**31 - 1])
def test_join_group_same_bytes_as_kio(version: int, case: int, correlation_id: int) -> None:
    error, generation, protocol_type, protocol_name, leader, skip, member_id, shape = JOIN_CASES[case]
    members = JOIN_MEMBER_SHAPES[shape]
    if version < 7 and protocol_name is None:
        protocol_name = ""
    frame = join_group_response_frame(
        version, correlation_id, error, generation, protocol_type, protocol_name, leader, skip, member_id, members
    )
    assert frame == _join_kio_frame(version, correlation_id, JOIN_CASES[case], members)
    read_id, read = decode_response_frame(11, version, frame)
    assert read_id == correlation_id and int(read.error_code) == error and read.member_id == member_id
    expected_members = [(m, i if version >= 5 else None, md) for m, i, md in members]
    assert [(x.member_id, getattr(x, "group_instance_id", None), x.metadata) for x in read.members] == expected_members


def test_heads_shared_per_generation_never_leak_into_other_answers() -> None:
    """The head every member of a generation gets alike is encoded once and reused (``_heads``): answers for many
    generations, versions and errors, interleaved and repeated past the cache's bound, are still each kio's bytes,
    and the cache stays bounded."""
    rng = random.Random(7)
    for n in range(3 * hot_responses._HEADS_MAX):
        generation = rng.randrange(2 * hot_responses._HEADS_MAX)
        version = rng.choice([5, 9])
        error = rng.choice([0, 27])
        leader = f"m-{generation % 3}"
        case = (error, generation, "consumer", "range", leader, False, f"m-{n}", 0)
        frame = join_group_response_frame(
            version, n, error, generation, "consumer", "range", leader, False, f"m-{n}", []
        )
        assert frame == _join_kio_frame(version, n, case, [])
        sync_version = rng.choice([3, 5])
        sync = sync_group_response_frame(sync_version, n, error, "consumer", f"p-{generation}", b"a")
        _, read = decode_response_frame(14, sync_version, sync)
        assert (int(read.error_code), read.assignment) == (error, b"a")
        if sync_version == 5:
            assert read.protocol_name == f"p-{generation}"
        assert len(hot_responses._heads) <= hot_responses._HEADS_MAX
