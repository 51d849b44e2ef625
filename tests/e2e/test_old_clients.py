"""Old clients against the real daemon over TCP: the request versions Kafka 4 dropped and Kafka 3.9 still served.

Requests are encoded, and our answers decoded, by kafka-python 3.0.12's hand-written ``kafka.protocol.old`` structs
(independent of kio and of ``protocol.legacy``), as Sarama 1.2x (OffsetCommit v1), Burrow 1.2 (ListOffsets v0) and
ZooKeeper-era consumers (OffsetFetch v0, OffsetCommit v0) send them. What they commit is read back by modern admin
clients (kafka-python's OffsetFetch v8+ of everything, librdkafka's).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.protocol.old.api_versions import ApiVersionsRequest_v0, ApiVersionsResponse_v0
from kafka.protocol.old.commit import (
    OffsetCommitRequest_v0,
    OffsetCommitRequest_v1,
    OffsetCommitResponse_v0,
    OffsetCommitResponse_v1,
    OffsetFetchRequest_v0,
    OffsetFetchResponse_v0,
)
from kafka.protocol.old.list_offsets import ListOffsetsRequest_v0, ListOffsetsResponse_v0

from tests.server.wire import build_request, request_frame

from .conftest import Daemon

pytestmark = pytest.mark.e2e

TOPIC = "e2e6"


class OldClient:
    """A blocking socket speaking kafka-python's old structs, answers read in order."""

    def __init__(self, port: int, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.client_id = client_id
        self.next_id = 1
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any) -> int:
        cid = self.next_id
        self.next_id += 1
        request.with_header(correlation_id=cid, client_id=self.client_id)
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        return cid

    def send_raw(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def frame(self) -> bytes:
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">i", self.buf[:4])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the daemon")
            self.buf += chunk
        size = struct.unpack(">i", self.buf[:4])[0]
        frame, self.buf = self.buf[: 4 + size], self.buf[4 + size :]
        return frame

    def receive(self, response_cls: Any, cid: int) -> Any:
        decoded = response_cls.decode(self.frame(), header=True, framed=True)
        assert decoded.header.correlation_id == cid
        return decoded.to_object()

    def call(self, request: Any, response_cls: Any) -> Any:
        return self.receive(response_cls, self.send(request))


@pytest.fixture
def old(daemon: Daemon) -> Iterator[OldClient]:
    client = OldClient(daemon.port, "sarama")
    try:
        yield client
    finally:
        client.close()


def partition_errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in response["topics"] for p in t["partitions"]}


def test_api_versions_advertise_the_old_versions(old: OldClient) -> None:
    response = old.call(ApiVersionsRequest_v0(), ApiVersionsResponse_v0)
    versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
    assert versions[8][0] == 0 and versions[9][0] == 0 and versions[2][0] == 0


def test_sarama_commit_v1_is_read_back_by_old_and_modern_clients(daemon: Daemon, old: OldClient) -> None:
    group = "sarama-v1"
    commit = OffsetCommitRequest_v1(
        group_id=group,
        generation_id_or_member_epoch=-1,  # Sarama's offset manager outside a consumer group
        member_id="",
        topics=[(TOPIC, [(0, 42, -1, "from-sarama"), (3, 7, int(time.time() * 1000), "")]), ("nope", [(0, 1, -1, "")])],
    )
    response = old.call(commit, OffsetCommitResponse_v1)
    assert partition_errors(response) == {(TOPIC, 0): 0, (TOPIC, 3): 0, ("nope", 0): 3}  # 3: UNKNOWN_TOPIC_OR_PART.

    fetched = old.call(OffsetFetchRequest_v0(group_id=group, topics=[(TOPIC, [0, 3, 5])]), OffsetFetchResponse_v0)
    got = {
        p["partition_index"]: (p["committed_offset"], p["metadata"], p["error_code"])
        for p in fetched["topics"][0]["partitions"]
    }
    assert got == {0: (42, "from-sarama", 0), 3: (7, "", 0), 5: (-1, "", 0)}

    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)  # OffsetFetch v8+, topics null: everything
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    assert {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()} == {
        (TOPIC, 0): (42, "from-sarama"),
        (TOPIC, 3): (7, ""),
    }
    cf_admin = AdminClient({"bootstrap.servers": daemon.bootstrap})
    result = cf_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert {tp.partition: tp.offset for tp in result.topic_partitions} == {0: 42, 3: 7}


def test_commit_v0_and_list_offsets_v0(old: OldClient) -> None:
    response = old.call(
        OffsetCommitRequest_v0(group_id="zk-era", topics=[(TOPIC, [(1, 9, "")])]), OffsetCommitResponse_v0
    )
    assert partition_errors(response) == {(TOPIC, 1): 0}
    fetched = old.call(OffsetFetchRequest_v0(group_id="zk-era", topics=[(TOPIC, [1])]), OffsetFetchResponse_v0)
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 9

    burrow = ListOffsetsRequest_v0(replica_id=-1, topics=[(TOPIC, [(0, -1, 1), (1, -2, 1), (9, -1, 1)])])
    offsets = old.call(burrow, ListOffsetsResponse_v0)
    assert [
        (p["partition_index"], p["error_code"], p["old_style_offsets"]) for p in offsets["topics"][0]["partitions"]
    ] == [
        (0, 0, [0]),
        (1, 0, [0]),
        (9, 3, []),
    ]


def test_a_commit_v1_behind_a_parked_fetch_is_answered_in_order(old: OldClient) -> None:
    """Sarama pipelines its OffsetCommit v1 behind a Fetch the daemon holds for max_wait. Before, the v1 was an
    unsupported version: the connection was to be closed but hung behind the parked Fetch, and the member's
    heartbeats stalled. Now both are answered, the Fetch after its wait, the commit right behind it."""
    fetch = build_request(
        1,
        4,
        max_wait=timedelta(milliseconds=300),
        min_bytes=1,
        topics=[{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}],
    )
    old.send_raw(request_frame(fetch, correlation_id=500, client_id="sarama"))
    commit = OffsetCommitRequest_v1(
        group_id="sarama-pipelined", generation_id_or_member_epoch=-1, member_id="", topics=[(TOPIC, [(2, 5, -1, "")])]
    )
    old.next_id = 501
    started = time.monotonic()
    cid = old.send(commit)
    first = old.frame()
    assert struct.unpack(">i", first[4:8])[0] == 500  # the Fetch, first, as sent
    assert partition_errors(old.receive(OffsetCommitResponse_v1, cid)) == {(TOPIC, 2): 0}
    assert time.monotonic() - started < 5
