"""Idempotent produce over raw TCP against the real daemon (SQLite and PostgreSQL): InitProducerId, then the same
idempotent batch sent twice is appended once and both answers carry the original offset; a sequence gap gets
OUT_OF_ORDER_SEQUENCE_NUMBER; after a restart the producer state is rebuilt from storage (the replay is still a
duplicate, the next sequence follows) and producer ids are never handed out twice. Requests are built with kio
through the project's codec (tests/server/wire.py); batches with kafka-python's record builder."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from protocol.errors import ErrorCode
from tests.e2e.daemon import Daemon
from tests.e2e.helpers import wait_for
from tests.server.wire import WireClient, build_request

from .conftest import TOPIC, Backend, make_daemon

pytestmark = pytest.mark.e2e


def idempotent_batch(producer_id: int, epoch: int, seq: int, n: int) -> bytes:
    b = DefaultRecordBatchBuilder(2, 0, False, producer_id, epoch, seq, 1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_000 + i, key=b"k", value=b"value-%d" % (seq + i), headers=[])
    return bytes(b.build())


def init_producer_id(client: WireClient, version: int = 4, **identity: int) -> Any:
    fields: dict[str, Any] = {"transactional_id": None, "transaction_timeout": timedelta(seconds=60), **identity}
    return client.call(build_request(22, version, **fields))


def produce(client: WireClient, records: bytes, partition: int = 0) -> Any:
    response = client.call(
        build_request(
            0, 9, transactional_id=None, acks=-1, timeout=timedelta(seconds=10),
            topic_data=[{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}],
        )
    )  # fmt: skip
    [topic] = response.responses
    [answer] = topic.partition_responses
    return answer


def log_end(client: WireClient, partition: int = 0) -> int:
    response = client.call(
        build_request(
            2, 7, replica_id=-1, isolation_level=0,
            topics=[{"name": TOPIC, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                                    "timestamp": -1}]}],
        )
    )  # fmt: skip
    return int(response.topics[0].partitions[0].offset)


def connect(daemon: Daemon) -> WireClient:
    return WireClient("127.0.0.1", daemon.port)


def test_a_replayed_idempotent_batch_is_appended_once_even_across_a_restart(daemon: Daemon) -> None:
    client = connect(daemon)
    try:
        init = init_producer_id(client)
        assert init.error_code == ErrorCode.none and init.producer_epoch == 0
        pid = int(init.producer_id)
        first = idempotent_batch(pid, 0, 0, 3)
        answers = [produce(client, first) for _ in range(2)]  # the second is a client's retry
        assert [(a.error_code, a.base_offset) for a in answers] == [(ErrorCode.none, 0), (ErrorCode.none, 0)]
        assert log_end(client) == 3  # appended once
        gap = produce(client, idempotent_batch(pid, 0, 5, 1))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        second = produce(client, idempotent_batch(pid, 0, 3, 2))
        assert (second.error_code, second.base_offset) == (ErrorCode.none, 3)
        assert log_end(client) == 5
    finally:
        client.close()

    assert daemon.stop() == 0
    daemon.start()
    client = connect(daemon)
    try:
        replay = produce(client, first)
        assert (replay.error_code, replay.base_offset) == (ErrorCode.none, 0)
        replay = produce(client, idempotent_batch(pid, 0, 3, 2))
        assert (replay.error_code, replay.base_offset) == (ErrorCode.none, 3)
        assert log_end(client) == 5  # still appended once
        gap = produce(client, idempotent_batch(pid, 0, 9, 1))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        nxt = produce(client, idempotent_batch(pid, 0, 5, 1))
        assert (nxt.error_code, nxt.base_offset) == (ErrorCode.none, 5)
        again = init_producer_id(client)
        assert again.error_code == ErrorCode.none and int(again.producer_id) > pid  # never handed out twice
        # KIP-360: the producer asks to go on after an error naming its id and epoch; as Kafka, a new id, epoch 0
        bumped = init_producer_id(client, producer_id=pid, producer_epoch=0)
        assert bumped.error_code == ErrorCode.none and bumped.producer_epoch == 0
        assert int(bumped.producer_id) not in (pid, int(again.producer_id))
        fresh = produce(client, idempotent_batch(int(bumped.producer_id), 0, 0, 1))
        assert (fresh.error_code, fresh.base_offset) == (ErrorCode.none, 6)
    finally:
        client.close()


def test_an_idle_producer_expires_and_its_state_is_not_reloaded(tmp_path: Path, backend: Backend) -> None:
    """producer.id.expiration.ms: once the pass has forgotten the producer, a replay of its batch is appended like
    any batch of an unknown producer; after a restart the expired producer is not loaded again."""
    expiry = ("--set", "producer.id.expiration.ms=300", "--set", "producer.id.expiration.check.interval.ms=100")
    d = make_daemon(tmp_path, backend, *expiry).start()

    def expired(times: int) -> bool:
        return d.log_text().count("expired 1 idle producer states") >= times

    try:
        client = connect(d)
        try:
            pid = int(init_producer_id(client).producer_id)
            batch = idempotent_batch(pid, 0, 0, 1)
            assert produce(client, batch).base_offset == 0
            wait_for(lambda: expired(1), 10, "the expiry pass")
            again = produce(client, batch)
            assert (again.error_code, again.base_offset) == (ErrorCode.none, 1)  # no longer known: appended
            wait_for(lambda: expired(2), 10, "the second expiry")  # stored: its row pruned, or out of the window
        finally:
            client.close()
        assert d.stop() == 0
        d.start()
        client = connect(d)
        try:
            again = produce(client, batch)
            assert (again.error_code, again.base_offset) == (ErrorCode.none, 2)
        finally:
            client.close()
    finally:
        assert d.stop() == 0
