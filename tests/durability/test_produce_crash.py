"""Issue #17, acceptance point 3: no acknowledged message is lost, reordered or moved when the daemon is SIGKILLed
while producers append.

Three kafka-python producers, one per partition of a topic (acks=all, no retries, one request in flight per
connection, so that each message is sent at most once and in order), append numbered messages, a new codec each
round; three connections keep several appends in the storage writer's transactions at any moment. A
message counts as acknowledged when its future succeeded; the offset it was told is remembered. At a random moment
while acknowledgements flow the daemon is SIGKILLed, the producer is closed (what was in flight fails), the daemon
restarts on the same storage, and the whole topic is read back from offset 0. Each round checks, on every
partition:

- the offsets are 0..n-1 without a gap (also across the earlier crashes: the log goes on where the stored one ended);
- every acknowledged message is there, at the offset its producer was told;
- every stored message is one that was sent, stored once, in the order it was sent (an unacknowledged message may
  be there or not: its request may have been stored before the kill took the answer away).

``KGC_PRODUCE_CRASH_REPEATS`` rounds (default 5) per backend; ``KGC_CRASH_SEED`` reproduces the kill moments. The
numbers of a long run are in docs/robustness.md. A SIGKILL loses no write the kernel has accepted, so this tests
that an acknowledgement waits for the commit, not power-loss durability (the database's fsync settings).
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaTimeoutError
from kafka.structs import TopicPartition

from tests.e2e.helpers import wait_for

from .clients import ready
from .conftest import TOPIC, Backend, make_daemon

pytestmark = pytest.mark.e2e

REPEATS = int(os.environ.get("KGC_PRODUCE_CRASH_REPEATS", "5"))
PARTITIONS = 3
CODECS = (None, "gzip", "snappy", "lz4", "zstd")


def value_of(seq: int) -> bytes:
    return b"m-%d-" % seq + b"p" * (seq % 64)


def seq_of(value: bytes) -> int:
    return int(value.split(b"-", 2)[1])


@dataclass
class Ledger:
    """What the producer sent and what was acknowledged (seq -> (partition, offset)), over all rounds."""

    sent: dict[int, int] = field(default_factory=dict)  # seq -> partition
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_seq: int = 0

    def acks(self) -> int:
        with self.lock:
            return len(self.acked)

    def send(self, partition: int) -> int:
        with self.lock:
            seq = self.next_seq
            self.next_seq += 1
            self.sent[seq] = partition
            return seq

    def unsend(self, seq: int) -> None:
        with self.lock:
            del self.sent[seq]


class Appender(threading.Thread):
    """One producer of one partition for one round: sends numbered messages until told to stop, then closes
    (failing what is still in flight)."""

    def __init__(self, bootstrap: str, ledger: Ledger, partition: int, codec: str | None) -> None:
        super().__init__(name=f"appender-{partition}", daemon=True)
        self.bootstrap, self.ledger, self.partition, self.codec = bootstrap, ledger, partition, codec
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.append()
        except BaseException as exc:
            self.error = exc

    def append(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", retries=0, enable_idempotence=False,
            max_in_flight_requests_per_connection=1, linger_ms=2, batch_size=16 * 1024, compression_type=self.codec,
            request_timeout_ms=3000, delivery_timeout_ms=10_000, max_block_ms=3000, reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=200,
        )  # fmt: skip
        outstanding: list[Any] = []
        try:
            while not self.stopping.is_set():
                seq = self.ledger.send(self.partition)
                try:
                    future = producer.send(TOPIC, key=b"k", value=value_of(seq), partition=self.partition)
                except KafkaTimeoutError:  # the daemon is down: never handed to the producer, so never sent
                    self.ledger.unsend(seq)
                    continue
                future.add_callback(self._acked, seq)
                future.add_errback(self._failed, seq)
                outstanding.append(future)
                if len(outstanding) >= 500:  # keep the backlog short: a kill fails at most this many
                    outstanding = [f for f in outstanding if not f.is_done]
                    if len(outstanding) >= 500:
                        time.sleep(0.005)
        finally:
            producer.close(timeout=10)

    def _acked(self, seq: int, metadata: Any) -> None:
        with self.ledger.lock:
            self.ledger.acked[seq] = (metadata.partition, metadata.offset)

    def _failed(self, seq: int, _exc: BaseException) -> None:
        with self.ledger.lock:
            self.ledger.failed.add(seq)

    def finish(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), "the producer did not close"
        assert self.error is None, repr(self.error)


def read_back(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition from offset 0 to the log end: partition -> [(offset, value)]."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "read-back timed out"
            for tp, msgs in consumer.poll(timeout_ms=200, max_records=5000).items():
                out[tp.partition] += [(m.offset, m.value) for m in msgs]
        return out
    finally:
        consumer.close()


def check(ledger: Ledger, log: dict[int, list[tuple[int, bytes]]]) -> tuple[int, int]:
    """The three promises above; returns (acknowledged messages lost, stored messages never acknowledged)."""
    where: dict[int, tuple[int, int]] = {}
    for partition, records in log.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(records))), f"partition {partition}: offsets not contiguous from 0"
        seqs = [seq_of(v) for _, v in records]
        assert seqs == sorted(set(seqs)), f"partition {partition}: a message stored twice or out of order"
        for (offset, value), seq in zip(records, seqs, strict=True):
            assert ledger.sent.get(seq) == partition, f"partition {partition}:{offset}: a message nobody sent"
            assert value == value_of(seq), f"partition {partition}:{offset}: the value changed"
            where[seq] = (partition, offset)
    lost = [seq for seq, at in ledger.acked.items() if where.get(seq) != at]
    assert not lost, f"acknowledged messages lost or moved: {[(s, ledger.acked[s], where.get(s)) for s in lost[:10]]}"
    return len(lost), len(set(where) - set(ledger.acked))


def test_acknowledged_messages_survive_sigkill(tmp_path: Path, backend: Backend) -> None:
    seed = int(os.environ.get("KGC_CRASH_SEED", str(time.time_ns())))
    rng = random.Random(seed)
    daemon = make_daemon(tmp_path, backend).start()
    ledger = Ledger()
    unacked_stored = 0
    try:
        for rep in range(REPEATS):
            codec = CODECS[rep % len(CODECS)]
            appenders = [Appender(daemon.bootstrap, ledger, p, codec) for p in range(PARTITIONS)]
            target = ledger.acks() + 300

            def flowing(target: int = target, appenders: list[Appender] = appenders) -> bool:
                return ledger.acks() >= target or any(a.error is not None for a in appenders)

            for a in appenders:
                a.start()
            try:
                wait_for(flowing, 60, f"rep {rep}: acknowledgements (seed {seed})")
                time.sleep(rng.uniform(0, 0.3))  # a random moment while acknowledgements flow
                daemon.kill()
                for a in appenders:  # no new messages; what is queued goes to the restarted daemon or fails
                    a.stopping.set()
                daemon.start()
                wait_for(lambda: ready(daemon.http_url), 30, "restarted daemon ready")
            finally:
                for a in appenders:
                    a.finish()
            with ledger.lock:
                assert ledger.acked.keys() | ledger.failed == ledger.sent.keys(), "a send neither acked nor failed"
            _, unacked_stored = check(ledger, read_back(daemon.bootstrap))
    finally:
        daemon.stop()
    assert "level=error" not in daemon.log_text(), daemon.log_text()[-3000:]
    print(
        f"\n{backend.kind}: {REPEATS} kills, {len(ledger.sent)} messages sent, {len(ledger.acked)} acknowledged, "
        f"0 lost, {len(ledger.failed)} failed of which {unacked_stored} were stored (seed {seed})"
    )
