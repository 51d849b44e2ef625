"""Non-blocking retry topics with kafka-python: main topic -> retry topics with growing delays -> dead-letter topic.

A partition is consumed in order, so a consumer that sleeps until a failed message may be tried again blocks every
message behind it, and a sleep longer than ``max.poll.interval.ms`` makes the client leave its group (KIP-62): a
rebalance, a failed commit, the same message again. Here a failed message is handed to another topic instead and the
consumer moves on:

* ``Ladder`` names the topics. With delays ``[d0, d1, ...]`` a message whose attempt ``n`` fails (``n = 0`` on the
  main topic) is copied to ``<main>-retry-<d_n>ms`` with ``retry_number = n + 1`` and ``retry_timestamp = now + d_n``
  while ``n < len(delays)``, else to ``<main>-dlt``. One topic per distinct delay (a delay listed twice reuses its
  topic), so along each partition of a retry topic ``retry_timestamp`` never decreases: the head of a partition is
  always the message due first, and waiting on it is enough.
* The routing metadata travels in headers (``retry_number``, ``retry_timestamp`` in epoch ms, ``original_topic``,
  ``original_partition``, ``original_offset``, ``last_error``); key and value are unchanged, so a key keeps its
  partition inside each topic (the order of one key's messages across topics is not kept).
* ``RetryWorker`` reads the main and the retry topics with one consumer in a group. Records are buffered per
  partition; a partition whose head is not due is **paused** (``consumer.pause``) and the consumer keeps polling with
  a timeout up to the earliest due time (at most ``poll_ms``), which keeps its heartbeats and its
  ``max.poll.interval.ms`` clock going however long the delay. When the head is due the partition is resumed. The
  head stays in the worker's buffer: kafka-python (and librdkafka) continue after a resume at the record after the
  last one they returned.
* A record's offset is committed only once it was processed, or once its copy was acknowledged by the next topic
  (``acks=all``): at-least-once. A crash between that acknowledgement and the commit repeats one attempt; exactly
  once would need transactions, which the daemon does not serve.
* A processor raising ``PermanentError`` sends the message straight to the dead-letter topic; any other exception is
  retried down the ladder.

Run it against the daemon (``./run serve``), see README.md in this directory.
"""

from __future__ import annotations

import argparse
import collections
import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

log = logging.getLogger("retry_topics")

DEFAULT_DELAYS_MS = (5_000, 30_000, 300_000)

HEADERS = ("retry_number", "retry_timestamp", "original_topic", "original_partition", "original_offset", "last_error")


class PermanentError(Exception):
    """Raised by a processor for a message that no retry can fix: it goes to the dead-letter topic at once."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Ladder:
    """The topics of one main topic's retry ladder and where attempt ``n`` goes when it fails."""

    main: str
    delays_ms: tuple[int, ...] = DEFAULT_DELAYS_MS

    def retry_topic(self, delay_ms: int) -> str:
        return f"{self.main}-retry-{delay_ms}ms"

    @property
    def dead_letter(self) -> str:
        return f"{self.main}-dlt"

    @property
    def retry_topics(self) -> list[str]:
        return list(dict.fromkeys(self.retry_topic(d) for d in self.delays_ms))

    @property
    def topics(self) -> list[str]:
        """Every topic the worker reads (the dead-letter topic is read by people, not by the worker)."""
        return [self.main, *self.retry_topics]

    def route(self, retry_number: int, permanent: bool) -> tuple[str, int | None]:
        """(topic, delay) for a failed attempt ``retry_number``; delay None: the dead-letter topic."""
        if permanent or retry_number >= len(self.delays_ms):
            return self.dead_letter, None
        delay = self.delays_ms[retry_number]
        return self.retry_topic(delay), delay


@dataclass(frozen=True)
class Attempt:
    """One delivery of a message to the processor: the record and its routing headers."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]

    @property
    def retry_number(self) -> int:
        return int(self.headers.get("retry_number", b"0"))

    @property
    def due_ms(self) -> int:
        return int(self.headers.get("retry_timestamp", b"0"))

    @property
    def origin(self) -> tuple[str, int, int]:
        """(topic, partition, offset) of the message on the main topic: the same for every attempt."""
        if "original_topic" in self.headers:
            h = self.headers
            return h["original_topic"].decode(), int(h["original_partition"]), int(h["original_offset"])
        return self.topic, self.partition, self.offset


@dataclass
class Stats:
    processed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    lateness_ms: list[int] = field(default_factory=list)  # processing time - retry_timestamp, retries only
    assignments: int = 0  # partition assignments received (1 when no rebalance happened)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, worker: RetryWorker) -> None:
        self.worker = worker

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        self.worker._revoked(list(revoked))

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self.worker.stats.assignments += 1


class RetryWorker:
    """Consumes ``ladder.topics`` in group ``group_id`` and runs ``process`` on every due attempt."""

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        ladder: Ladder,
        process: Callable[[Attempt], None],
        *,
        poll_ms: int = 500,
        consumer_config: dict[str, Any] | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.ladder = ladder
        self.process = process
        self.poll_ms = poll_ms
        self.clock = clock
        self.stats = Stats()
        self.stopping = threading.Event()
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **(consumer_config or {}),
        )
        # kafka-python's producer is idempotent by default, and the daemon does not serve InitProducerId.
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=0)
        self.buffers: dict[TopicPartition, collections.deque[Attempt]] = {}
        self.done: dict[TopicPartition, int] = {}  # next offset to commit per partition
        self.consumer.subscribe(ladder.topics, listener=_Listener(self))

    # -- the loop -------------------------------------------------------------------------------------------------

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        """Poll, handle what is due, pause what is not, commit; until ``stop()`` or ``until()``."""
        wait = self.poll_ms
        while not self.stopping.is_set() and not until():
            for tp, records in self.consumer.poll(timeout_ms=wait).items():
                buffer = self.buffers.setdefault(tp, collections.deque())
                buffer.extend(
                    Attempt(r.topic, r.partition, r.offset, r.key, r.value, {k: bytes(v) for k, v in r.headers})
                    for r in records
                )
            wait = self._handle_due()
            self._commit()

    def stop(self) -> None:
        self.stopping.set()

    def close(self) -> None:
        self._commit()
        self.consumer.close()
        self.producer.close()

    def _handle_due(self) -> int:
        """Process the buffered attempts that are due, pause partitions whose head is not; the next poll wait."""
        wait = self.poll_ms
        paused = self.consumer.paused()
        for tp, buffer in self.buffers.items():
            while buffer:
                head = buffer[0]
                not_due_for = head.due_ms - self.clock()
                if not_due_for > 0:
                    if tp not in paused:
                        self.consumer.pause(tp)
                    wait = min(wait, not_due_for)
                    break
                if tp in paused:
                    self.consumer.resume(tp)
                    paused.discard(tp)
                self._attempt(head)
                buffer.popleft()
                self.done[tp] = head.offset + 1
            if not buffer and tp in paused:
                self.consumer.resume(tp)
        return max(wait, 1)

    def _attempt(self, attempt: Attempt) -> None:
        if attempt.retry_number:
            self.stats.lateness_ms.append(self.clock() - attempt.due_ms)
        try:
            self.process(attempt)
        except Exception as exc:  # a processor's failure is routed, whatever it is
            self._forward(attempt, exc)
        else:
            self.stats.processed += 1

    def _forward(self, attempt: Attempt, exc: Exception) -> None:
        topic, delay = self.ladder.route(attempt.retry_number, isinstance(exc, PermanentError))
        origin_topic, origin_partition, origin_offset = attempt.origin
        due = self.clock() + delay if delay is not None else 0
        headers = {
            **{k: v for k, v in attempt.headers.items() if k not in HEADERS},
            "retry_number": b"%d" % (attempt.retry_number + 1),
            "retry_timestamp": b"%d" % due,
            "original_topic": origin_topic.encode(),
            "original_partition": b"%d" % origin_partition,
            "original_offset": b"%d" % origin_offset,
            "last_error": f"{type(exc).__name__}: {exc}".encode()[:1000],
        }
        # Wait for the acknowledgement: the offset is committed only once the copy is durable in the next topic.
        self.producer.send(topic, key=attempt.key, value=attempt.value, headers=list(headers.items())).get(30)
        if delay is None:
            self.stats.dead_lettered += 1
        else:
            self.stats.retried += 1

    def _commit(self) -> None:
        if not self.done:
            return
        self.consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in self.done.items()})
        self.done.clear()

    def _revoked(self, revoked: list[TopicPartition]) -> None:
        """Commit what was handled, forget the buffers: the partition's next owner starts at the committed head."""
        self._commit()
        for tp in revoked:
            self.buffers.pop(tp, None)


# -- a command-line demo --------------------------------------------------------------------------------------------


def _demo_processor(fail_share: float, permanent_share: float) -> Callable[[Attempt], None]:
    def process(attempt: Attempt) -> None:
        roll = random.random()
        if roll < permanent_share:
            raise PermanentError("cannot be processed")
        if roll < permanent_share + fail_share:
            raise TimeoutError("downstream service timed out")
        log.info("processed %s (attempt %d)", attempt.origin, attempt.retry_number)

    return process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders", help="the main topic")
    parser.add_argument("--group", default="orders-retry-demo")
    parser.add_argument("--delays-ms", default=",".join(map(str, DEFAULT_DELAYS_MS)))
    parser.add_argument("--produce", type=int, default=20, help="messages to write to the main topic first")
    parser.add_argument("--fail-share", type=float, default=0.5, help="share of attempts failing transiently")
    parser.add_argument("--permanent-share", type=float, default=0.1, help="share of attempts failing for good")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    ladder = Ladder(args.topic, tuple(int(d) for d in args.delays_ms.split(",")))
    if args.produce:
        producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", enable_idempotence=False)
        for i in range(args.produce):
            producer.send(ladder.main, key=b"k%d" % (i % 4), value=b"message %d" % i)
        producer.flush()
        producer.close()
    worker = RetryWorker(
        args.bootstrap, args.group, ladder, _demo_processor(args.fail_share, args.permanent_share), poll_ms=500
    )
    print(f"reading {', '.join(ladder.topics)}; dead letters go to {ladder.dead_letter}; Ctrl-C stops", flush=True)
    try:
        worker.run()
    except KeyboardInterrupt:
        pass
    finally:
        worker.close()
        s = worker.stats
        print(f"processed {s.processed}, retried {s.retried}, dead-lettered {s.dead_lettered}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
