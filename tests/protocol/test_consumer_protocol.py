"""The embedded consumer protocol, against kafka-python's independent ConsumerProtocol classes and hand-written hex."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from protocol.consumer_protocol import (
    assignment_partitions,
    encode_assignment,
    encode_subscription,
    subscription_topics,
)

TOPICS = ["orders", "payments-é", "x"]
PARTITIONS = {"orders": [0, 2, 5], "payments-é": [1], "empty": []}


def kp_subscription(version: int, user_data: bytes | None = b"ud") -> bytes:
    kwargs: dict[str, object] = {"version": version, "topics": TOPICS, "user_data": user_data}
    if version >= 1:
        kwargs["owned_partitions"] = [KpSubscription.TopicPartition(topic="orders", partitions=[0, 1])]
    if version >= 2:
        kwargs["generation_id"] = 7
    if version >= 3:
        kwargs["rack_id"] = "rack-a"
    return bytes(KpSubscription(**kwargs).encode())


def kp_assignment(version: int, user_data: bytes | None = b"ud") -> bytes:
    tps = [KpAssignment.TopicPartition(topic=t, partitions=p) for t, p in PARTITIONS.items()]
    return bytes(KpAssignment(version=version, assigned_partitions=tps, user_data=user_data).encode())


@pytest.mark.parametrize("version", range(4))
def test_subscription_topics_from_kafka_python(version: int) -> None:
    assert subscription_topics(kp_subscription(version)) == TOPICS


@pytest.mark.parametrize("version", range(4))
def test_encode_subscription_matches_kafka_python(version: int) -> None:
    ours = encode_subscription(
        TOPICS, b"ud", version, owned_partitions={"orders": [0, 1]}, generation_id=7, rack_id="rack-a"
    )
    assert ours == kp_subscription(version)


def test_encode_subscription_null_user_data_and_defaults() -> None:
    assert encode_subscription(TOPICS, None, 0) == kp_subscription(0, user_data=None)
    decoded = KpSubscription.decode(encode_subscription(["t"], version=3))
    assert (decoded.topics, decoded.user_data, decoded.owned_partitions) == (["t"], b"", [])
    assert (decoded.generation_id, decoded.rack_id) == (-1, None)


def test_subscription_hand_written_v0() -> None:
    data = bytes.fromhex("0000 00000001 0001 61 ffffffff")  # v0, ["a"], user_data null
    assert subscription_topics(data) == ["a"]
    assert encode_subscription(["a"], None) == data


@pytest.mark.parametrize("version", range(4))
def test_assignment_partitions_from_kafka_python(version: int) -> None:
    assert assignment_partitions(kp_assignment(version)) == PARTITIONS


@pytest.mark.parametrize("version", range(4))
def test_encode_assignment_matches_kafka_python(version: int) -> None:
    assert encode_assignment(PARTITIONS, b"ud", version) == kp_assignment(version)
    assert encode_assignment(PARTITIONS, None, version) == kp_assignment(version, user_data=None)


def test_assignment_hand_written_v0() -> None:
    data = bytes.fromhex("0000 00000001 0001 74 00000002 00000003 00000000 00000000")
    assert assignment_partitions(data) == {"t": [3, 0]}
    assert encode_assignment({"t": [3, 0]}) == data


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert assignment_partitions(b"") == {}


def test_repeated_topic_in_an_assignment_is_merged() -> None:
    data = bytes.fromhex("0000 00000002 0001 74 00000001 00000001 0001 74 00000001 00000002")
    assert assignment_partitions(data) == {"t": [1, 2]}


def test_future_versions_decode_their_common_prefix() -> None:
    sub = encode_subscription(["a", "b"], b"", 0)
    future = struct.pack(">h", 9) + sub[2:] + b"fields-we-do-not-know"
    assert subscription_topics(future) == ["a", "b"]
    assignment = struct.pack(">h", 9) + encode_assignment({"a": [1]})[2:] + b"\x00\x01"
    assert assignment_partitions(assignment) == {"a": [1]}


def test_null_arrays_decode_as_empty() -> None:
    assert subscription_topics(bytes.fromhex("0000 ffffffff")) == []
    assert assignment_partitions(bytes.fromhex("0000 ffffffff")) == {}


@pytest.mark.parametrize("version", range(4))
def test_truncated_subscription_is_a_value_error(version: int) -> None:
    data = kp_subscription(version)
    topics_end = 2 + 4 + sum(2 + len(t.encode()) for t in TOPICS)
    for n in range(topics_end):
        with pytest.raises(ValueError):
            subscription_topics(data[:n])


@pytest.mark.parametrize("version", range(4))
def test_truncated_assignment_is_a_value_error(version: int) -> None:
    data = kp_assignment(version)
    partitions_end = len(data) - 4 - 2  # user_data b"ud" is not needed
    for n in range(1, partitions_end):
        with pytest.raises(ValueError):
            assignment_partitions(data[:n])


@pytest.mark.parametrize(
    "data",
    [
        bytes.fromhex("0000 00000001 ffff"),  # null topic name
        bytes.fromhex("0000 00000001 fffe"),  # negative string length
        bytes.fromhex("0000 fffffffe"),  # array length below -1
        bytes.fromhex("0000 00000001 0002 ff61"),  # invalid UTF-8
        bytes.fromhex("0000 7fffffff 0001 61"),  # claims more topics than present
    ],
)
def test_malformed_subscription_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        subscription_topics(data)


@pytest.mark.parametrize(
    "data",
    [
        bytes.fromhex("00"),  # not even a version
        bytes.fromhex("0000 00000001 0001 61 fffffff0"),  # partition array length below -1
        bytes.fromhex("0000 00000001 0001 61 00000002 00000001"),  # one partition missing
    ],
)
def test_malformed_assignment_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        assignment_partitions(data)


def test_unknown_encode_versions_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_subscription(["a"], version=4)
    with pytest.raises(ValueError):
        encode_assignment({}, version=-1)
