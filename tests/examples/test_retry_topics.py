"""examples/retry_topics end to end: the real daemon (SQLite), kafka-python, a processor that fails some messages
transiently and some for good. Every message ends processed or dead-lettered, never both; every attempt is in its
topic exactly once; no attempt runs before it is due; every read offset is committed; and a retry delay longer than
``max.poll.interval.ms`` causes no rebalance, because the worker pauses the partition instead of sleeping."""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from examples.retry_topics import Attempt, Ladder, PermanentError, RetryWorker
from tests.e2e.daemon import Daemon

pytestmark = pytest.mark.e2e

N = 36
# 300 ms twice (one topic), then 2.5 s: longer than the worker's max.poll.interval.ms of 2 s.
LADDER = Ladder("orders", (300, 300, 2500))
PARTITIONS = {"orders": 3, "orders-retry-300ms": 3, "orders-retry-2500ms": 2, "orders-dlt": 2}


def outcome(i: int, attempt: int) -> str:
    """What the processor does with message ``i`` on attempt ``attempt`` (0: from the main topic)."""
    kind = i % 6
    if kind == 0:
        return "permanent"
    if kind == 1:
        return "transient" if attempt < 1 else "ok"
    if kind == 2:
        return "transient" if attempt < 2 else "ok"
    if kind == 3:
        return "transient"  # down the whole ladder into the dead-letter topic
    if kind == 4:
        return "transient" if attempt < 1 else "permanent"
    return "ok"


def expected_attempts(i: int) -> tuple[list[int], str]:
    """The attempt numbers message ``i`` gets and where it ends (``processed`` or ``dlt``)."""
    attempts = []
    for n in range(len(LADDER.delays_ms) + 1):
        attempts.append(n)
        result = outcome(i, n)
        if result == "ok":
            return attempts, "processed"
        if result == "permanent":
            return attempts, "dlt"
    return attempts, "dlt"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    topics = tuple(f"{name}:{count}" for name, count in PARTITIONS.items())
    d = Daemon(tmp_path_factory.mktemp("retry"), topics=topics).start()
    try:
        yield d
    finally:
        code = d.stop()
        assert code == 0, f"daemon exit code {code}:\n{d.log_text()[-3000:]}"


def read_all(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None, bytes, dict[str, bytes]]]:
    """Every record of ``topic`` from offset 0 to its end: (partition, offset, key, value, headers)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS[topic])]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            for tp, records in consumer.poll(timeout_ms=200).items():
                out += [(tp.partition, r.offset, r.key, r.value, {k: bytes(v) for k, v in r.headers}) for r in records]
        return out
    finally:
        consumer.close()


def test_every_message_is_processed_or_dead_lettered_once_per_attempt(daemon: Daemon) -> None:
    producer = KafkaProducer(bootstrap_servers=daemon.bootstrap, acks="all", enable_idempotence=False)
    for i in range(N):
        producer.send("orders", key=b"key-%d" % (i % 5), value=b"%d" % i)
    producer.flush()
    producer.close()

    calls: list[tuple[int, int, int, int]] = []  # (message, attempt, due, now) per processor call

    def process(attempt: Attempt) -> None:
        i = int(attempt.value or b"")
        calls.append((i, attempt.retry_number, attempt.due_ms, int(time.time() * 1000)))
        result = outcome(i, attempt.retry_number)
        if result == "permanent":
            raise PermanentError(f"message {i} is malformed")
        if result == "transient":
            raise TimeoutError(f"message {i}: service unavailable")

    worker = RetryWorker(
        daemon.bootstrap,
        "retry-e2e",
        LADDER,
        process,
        poll_ms=200,
        consumer_config={"max_poll_interval_ms": 2000, "session_timeout_ms": 6000, "heartbeat_interval_ms": 500},
    )
    deadline = time.monotonic() + 60
    try:
        worker.run(
            until=lambda: worker.stats.processed + worker.stats.dead_lettered >= N or time.monotonic() > deadline
        )
    finally:
        worker.close()
    assert worker.stats.processed + worker.stats.dead_lettered == N, worker.stats

    # The processor saw each expected attempt exactly once, and none before it was due.
    want_calls = collections.Counter((i, n) for i in range(N) for n in expected_attempts(i)[0])
    assert collections.Counter((i, n) for i, n, _, _ in calls) == want_calls
    assert all(now >= due for _, _, due, now in calls)
    assert any(n == 3 for _, n, _, _ in calls), "the 2.5 s stage ran"

    # Each forwarded attempt is in its retry topic exactly once, with its routing headers.
    origin = {int(v): (p, o) for p, o, _k, v, _h in read_all(daemon.bootstrap, "orders")}
    assert sorted(origin) == list(range(N))
    for topic, numbers in (("orders-retry-300ms", {1, 2}), ("orders-retry-2500ms", {3})):
        got = collections.Counter()
        for _p, _o, key, value, headers in read_all(daemon.bootstrap, topic):
            i = int(value)
            n = int(headers["retry_number"])
            got[(i, n)] += 1
            assert key == b"key-%d" % (i % 5)
            assert (headers["original_topic"], int(headers["original_partition"]), int(headers["original_offset"])) == (
                b"orders",
                *origin[i],
            )
            assert headers["last_error"].startswith(b"TimeoutError")
        want = collections.Counter((i, n) for i in range(N) for n in expected_attempts(i)[0] if n in numbers)
        assert got == want, topic

    # Dead letters: exactly the messages that failed for good or ran out of retries, once each.
    dead = read_all(daemon.bootstrap, "orders-dlt")
    dead_ids = collections.Counter(int(v) for _p, _o, _k, v, _h in dead)
    assert dead_ids == collections.Counter(i for i in range(N) if expected_attempts(i)[1] == "dlt")
    for _p, _o, _k, value, headers in dead:
        attempts, _ = expected_attempts(int(value))
        assert int(headers["retry_number"]) == attempts[-1] + 1
        reason = b"PermanentError" if outcome(int(value), attempts[-1]) == "permanent" else b"TimeoutError"
        assert headers["last_error"].startswith(reason)
    processed = {i for i, n, _, _ in calls if outcome(i, n) == "ok"}
    assert processed.isdisjoint(dead_ids) and processed | set(dead_ids) == set(range(N))

    # Everything the worker read is committed, and pausing for 2.5 s did not cost the group a rebalance.
    admin = KafkaAdminClient(bootstrap_servers=daemon.bootstrap)
    try:
        committed = admin.list_group_offsets("retry-e2e")["retry-e2e"]
    finally:
        admin.close()
    for topic in LADDER.topics:
        for partition in range(PARTITIONS[topic]):
            count = sum(1 for p, *_ in read_all(daemon.bootstrap, topic) if p == partition)
            tp = TopicPartition(topic, partition)
            assert (committed[tp].offset if tp in committed else 0) == count, tp
    assert worker.stats.assignments == 1, worker.stats
    assert worker.stats.dead_lettered == len(dead) and worker.stats.retried == sum(want_calls.values()) - N
