"""``Broker``: the data path's pure core - partitions, offsets, the batch index, Produce, Fetch and ListOffsets.

Per partition it keeps the log start offset, the **high watermark** (the end of what is durable: what Fetch and
ListOffsets see), the **log end offset** (``next_offset``: the next offset to assign; appends in flight sit between
the two) and the partition epoch, and an index of the durable batches: base offset, last offset, max timestamp, size
and the broker's append time, in five ``array('q')`` columns (40 bytes a batch; a million batches cost 40 MB). The
append time is what consumer lag in time is measured from (``append_time_at``; ``runtime.lag``). The batch bytes stay in
storage and Fetch reads them from there by (topic, partition, base offsets); with ``keep_bytes`` (the in-memory
daemon, nothing stored) the index keeps them too.

Produce (``produce``): each partition's batch is checked (``protocol.record_batch``: framing, CRC, one batch of
magic 2, ``max.message.bytes``), gets the next offsets, is stamped (base offset, epoch; LogAppendTime if the topic
says so) and becomes a ``BatchAppended`` record. One call appends the records of the whole request with ONE
``DataLog.append`` (the storage writer merges concurrent calls into one transaction); ``on_done`` gets the
per-partition answers once they are durable. Only then are the batches indexed and the high watermark moved, and
the partition's watchers (parked Fetches) are called.

A failed write: the partitions of the call answer KAFKA_STORAGE_ERROR (retriable); the partition refuses new appends
(NOT_LEADER_OR_FOLLOWER, retriable) until every append in flight on it has completed, then its log end offset goes
back to the high watermark, so no offset is skipped. (Appends already in flight behind the failed one fail in
storage too: the write of a batch is conditional on the partition's stored next offset.)

Idempotent producers (``broker.producers``): a batch with a producer id is checked against the producer's state on
the partition before it gets offsets - a duplicate of one of the producer's last five batches is answered with that
batch's offsets and not appended again (once that batch is durable, if it is still being written), an older epoch
gets INVALID_PRODUCER_EPOCH, a sequence gap OUT_OF_ORDER_SEQUENCE_NUMBER. The accepted batch counts for the
producer's next batch at once and joins its durable state when the write is; a failed write drops it again.
Transactional batches are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (transactions are not served).
``producer_ids`` hands out the producer ids (InitProducerId).

Time is injected (``now_ms``); the registry's changes are heard through ``TopicRegistry.on_change``.
"""

from __future__ import annotations

import contextlib
import logging
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from protocol.errors import ErrorCode
from protocol.record_batch import BatchError, BatchHeader, Compression, read_produced_batch, stamp

from .configs import CONFIG_NAMES, DEFAULT_MAX_MESSAGE_BYTES, TopicConfig
from .producers import (
    DEFAULT_MAX_PRODUCERS_PER_PARTITION,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    PENDING,
    PartitionProducers,
    ProducerBatch,
    ProducerIds,
    Refusal,
    StoredProducerBatch,
    increment_sequence,
)
from .records import BatchAppended, DataRecord, LogStartAdvanced, TopicCreated, TopicDeleted
from .topics import Topic, TopicRegistry, is_internal_topic

__all__ = [
    "CONFIG_NAMES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "Appended",
    "Broker",
    "DataLog",
    "FetchSlice",
    "PartitionSnapshot",
    "StoredBatch",
    "StoredTail",
    "TailReader",
    "TopicConfig",
]

log = logging.getLogger("broker.partitions")

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


class DataLog(Protocol):
    """Where the records go: ``storage.SqlRecordLog`` (or ``MemoryDataLog``). ``on_done(None)`` once durable,
    ``on_done(failure)`` if not; records of successive calls are persisted in call order."""

    def append(self, records: Sequence[DataRecord], on_done: Callable[[Any], None] | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """A stored batch's index entry (no bytes), as ``TailReader.read_tail`` returns it."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    appended_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


@dataclass(frozen=True, slots=True)
class StoredTail:
    """A partition's stored end: its next offset and the batches from a given offset on."""

    next_offset: int
    batches: Sequence[StoredBatch] = ()


@runtime_checkable
class TailReader(Protocol):
    """A ``DataLog`` that can read a partition's stored end back (``storage.SqlRecordLog``): ``on_done(tail)``, or
    ``on_done(None)`` if the read failed."""

    def read_tail(
        self, topic: str, partition: int, from_offset: int, on_done: Callable[[StoredTail | None], None]
    ) -> None: ...


class MemoryDataLog:
    """Durable at once (the in-memory daemon); ``records`` keeps what was appended when ``keep``."""

    def __init__(self, *, keep: bool = False) -> None:
        self.keep = keep
        self.records: list[DataRecord] = []

    def append(self, records: Sequence[DataRecord], on_done: Callable[[Any], None] | None = None) -> None:
        if self.keep:
            self.records.extend(records)
        if on_done is not None:
            on_done(None)


@dataclass(frozen=True, slots=True)
class Appended:
    """One partition's answer to a Produce."""

    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None


@dataclass(slots=True)
class FetchSlice:
    """What a Fetch of one partition gets: whole durable batches from the one holding the fetch offset."""

    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    bases: list[int] = field(default_factory=list)  # base offsets of the batches to send, in order
    size: int = 0  # their bytes
    data: list[bytes] | None = None  # the batches themselves when the broker keeps bytes


@dataclass(slots=True)
class PartitionSnapshot:
    """A partition as storage loads it: offsets, epoch and the batch index (no bytes)."""

    topic: str
    partition: int
    epoch: int = 0
    log_start_offset: int = 0
    next_offset: int = 0
    # (base offset, last offset, max timestamp, size, append time), by offset
    batches: Sequence[tuple[int, int, int, int, int]] = ()
    producers: Sequence[StoredProducerBatch] = ()  # the last batches of each idempotent producer, by offset


class Partition:
    __slots__ = (
        "appended",
        "bases",
        "data",
        "epoch",
        "failed",
        "high_watermark",
        "index",
        "inflight",
        "lasts",
        "log_start",
        "max_timestamps",
        "next_offset",
        "pending_start",
        "producers",
        "resyncing",
        "size_bytes",
        "sizes",
        "stale",
        "topic",
        "watchers",
    )

    def __init__(self, topic: str, index: int, *, keep_bytes: bool, epoch: int = 0, start: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.epoch = epoch
        self.log_start = start
        self.high_watermark = start
        self.next_offset = start
        self.pending_start = start  # the highest log start asked for (retention, DeleteRecords), durable or not
        self.size_bytes = 0  # the bytes of the indexed batches: kept on append and trim, never summed
        self.inflight = 0
        self.failed = False
        # after a failed write: the stored log may end beyond the high watermark (the transaction may have committed
        # although its answer was lost), so appends wait until the stored end has been read back (Broker._resync)
        self.stale = False
        self.resyncing = False
        self.bases = array("q")
        self.lasts = array("q")
        self.max_timestamps = array("q")
        self.sizes = array("q")
        self.appended = array("q")  # the broker's append time of each batch (BatchAppended.timestamp_ms)
        self.data: list[bytes] | None = [] if keep_bytes else None
        self.watchers: list[Callable[[], None]] = []
        self.producers: PartitionProducers | None = None  # created at the first idempotent batch

    def add(
        self, base: int, last: int, max_timestamp: int, size: int, data: bytes | None = None, appended: int = -1
    ) -> None:
        self.appended.append(appended)
        self.bases.append(base)
        self.lasts.append(last)
        self.max_timestamps.append(max_timestamp)
        self.sizes.append(size)
        self.size_bytes += size
        if self.data is not None and data is not None:
            self.data.append(data)
        self.high_watermark = last + 1

    def trim(self, start: int) -> int:
        """Move the log start up to ``start`` (never down) and drop the batches wholly below it; returns how many.
        The batch holding ``start`` stays: a Fetch from ``start`` gets it whole, as Kafka serves a log start inside
        a batch."""
        if start <= self.log_start:
            return 0
        drop = bisect_left(self.lasts, start)
        if drop:
            self.size_bytes -= sum(self.sizes[:drop])
            for column in (self.bases, self.lasts, self.max_timestamps, self.sizes, self.appended):
                del column[:drop]
            if self.data is not None:
                del self.data[:drop]
        self.log_start = start
        self.pending_start = max(self.pending_start, start)
        return drop

    def first_batch_at(self, offset: int) -> int:
        """The index of the first batch whose last offset is >= ``offset``."""
        return bisect_left(self.lasts, offset)

    def append_time_at(self, offset: int) -> int | None:
        """The broker's append time of the batch holding ``offset`` (the first durable batch at or after it), by
        bisection; None at or beyond the high watermark. All records of a batch share it."""
        i = bisect_left(self.lasts, offset)
        return self.appended[i] if i < len(self.appended) else None

    def bytes_from(self, offset: int, limit: int) -> int:
        """Durable bytes from the batch holding ``offset``, counted up to ``limit``."""
        total = 0
        sizes = self.sizes
        for i in range(self.first_batch_at(offset), len(sizes)):
            total += sizes[i]
            if total >= limit:
                break
        return total


class Broker:
    def __init__(
        self,
        topics: TopicRegistry,
        log: DataLog,
        now_ms: Callable[[], int],
        *,
        keep_bytes: bool = False,
        defaults: Mapping[str, str] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        max_producers_per_partition: int = DEFAULT_MAX_PRODUCERS_PER_PARTITION,
    ) -> None:
        self.topics = topics
        self.log = log
        self.now_ms = now_ms
        self.keep_bytes = keep_bytes
        self.defaults = dict(defaults or {})
        self._default_config = TopicConfig.of(self.defaults)
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._configs: dict[str, tuple[tuple[str, str], ...]] = {}  # configs set on each topic
        self._config_cache: dict[str, TopicConfig] = {}
        self._recorded: dict[str, int] = {}  # topic -> partition count known durable (or being written)
        self.deleted_batches = 0  # batches (and their bytes) deleted below moved log starts, since start
        self.deleted_bytes = 0
        self._on_read: dict[str, Callable[[int], None]] = {}  # see written_on_read
        self._started = False
        self.producer_ids = ProducerIds(log, now_ms)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_producers_per_partition = max_producers_per_partition

    # ------------------------------------------------------------------------------------------------ topics

    def load(self, topics: Iterable[TopicCreated], partitions: Iterable[PartitionSnapshot]) -> None:
        """Stored topics and partitions, before ``start``: the registry grows to the stored partition counts. An
        internal topic is never stored (one stored by an older version, when its name was not reserved, is skipped)."""
        for t in topics:
            if is_internal_topic(t.name):
                continue
            self._recorded[t.name] = max(self._recorded.get(t.name, 0), t.partitions)
            self._configs[t.name] = t.configs
            self._config_cache.pop(t.name, None)
            self.topics.add(t.name, t.partitions)
        for s in partitions:
            if is_internal_topic(s.topic):
                continue
            p = Partition(s.topic, s.partition, keep_bytes=self.keep_bytes, epoch=s.epoch, start=s.log_start_offset)
            for base, last, max_ts, size, appended in s.batches:
                p.add(base, last, max_ts, size, appended=appended)
            p.high_watermark = p.next_offset = max(s.next_offset, p.high_watermark)
            if s.producers:
                p.producers = PartitionProducers(self.max_producers_per_partition)
                p.producers.load_batches(s.producers)
                p.producers.expire(self.now_ms(), self.producer_id_expiration_ms)
            self._partitions[(s.topic, s.partition)] = p

    def start(self) -> None:
        """Record every topic not stored yet (configured ones, say), then every topic created or grown from now on."""
        if self._started:
            return
        self._started = True
        self.topics.on_change(self._topic_changed)
        records = [
            self._topic_record(t)
            for t in self.topics.all()
            if self._recorded.get(t.name, 0) < t.partitions and not is_internal_topic(t.name)
        ]
        if records:
            self.log.append(records, self._topics_written(records))

    def configure(self, name: str, configs: Mapping[str, str]) -> None:
        """Set configs on an existing topic (checked: ValueError) and record them."""
        topic = self.topics.get(name)
        if topic is None:
            raise ValueError(f"unknown topic {name!r}")
        self.config_of(configs)
        self._configs[name] = tuple(sorted({**dict(self._configs.get(name, ())), **configs}.items()))
        self._config_cache.pop(name, None)
        record = self._topic_record(topic)
        self.log.append([record], self._topics_written([record]))

    def config_of(self, configs: Mapping[str, str]) -> TopicConfig:
        """The effective config of a topic whose own configs are ``configs`` (ConfigError if one is bad)."""
        return TopicConfig.of({**self.defaults, **configs})

    def config(self, name: str) -> TopicConfig:
        found = self._config_cache.get(name)
        if found is None:
            own = self._configs.get(name)
            found = self._default_config if not own else TopicConfig.of({**self.defaults, **dict(own)})
            self._config_cache[name] = found
        return found

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(name, ()))

    def _topic_changed(self, topic: Topic) -> None:
        if self.topics.get(topic.name) is not topic:  # removed: delete_topic writes its record
            return
        if self._recorded.get(topic.name, 0) < topic.partitions and not is_internal_topic(topic.name):
            record = self._topic_record(topic)
            self.log.append([record], self._topics_written([record]))

    def _topic_record(self, topic: Topic) -> TopicCreated:
        self._recorded[topic.name] = topic.partitions
        return TopicCreated(topic.name, topic.partitions, self._configs.get(topic.name, ()), self.now_ms())

    def _topics_written(self, records: list[TopicCreated]) -> Callable[[Any], None]:
        def done(failure: Any) -> None:
            if failure is not None:  # written again with the next append to the topic
                for r in records:
                    if self._recorded.get(r.name) == r.partitions:
                        self._recorded[r.name] = 0

        return done

    def written_on_read(self, topic: str, write: Callable[[int], None]) -> None:
        """``write(index)`` is called whenever a partition of ``topic`` is looked up (``partition``, ``available``):
        the topic's owner appends what it has been holding back (``broker.offsets_topic`` renders lazily)."""
        self._on_read[topic] = write

    def partition(self, topic: str, index: int) -> Partition | None:
        if self._on_read:
            write = self._on_read.get(topic)
            if write is not None:
                write(index)
        p = self._partitions.get((topic, index))
        if p is None and self.topics.has_partition(topic, index):
            keep = self.keep_bytes or is_internal_topic(topic)  # an internal topic is rendered, not stored
            p = self._partitions[(topic, index)] = Partition(topic, index, keep_bytes=keep)
        return p

    # ------------------------------------------------------------------------------------------------ produce

    def produce(
        self,
        entries: Sequence[tuple[str, int, bytes | None]],
        on_done: Callable[[list[Appended]], object],
        *,
        zstd_allowed: bool = True,
    ) -> None:
        """Append one batch to each (topic, partition); ``on_done`` gets the answers in entry order, once every
        accepted batch is durable (at once if none is, maybe inside this call)."""
        answers: list[Appended | None] = []
        records: list[DataRecord] = []
        appended: list[tuple[int, Partition, BatchAppended, int, ProducerBatch | None]] = []
        duplicates: list[tuple[int, Partition, ProducerBatch]] = []  # (answer index, partition, the original)
        now = self.now_ms()
        for topic, index, data in entries:
            p = self.partition(topic, index)
            if p is None:
                answers.append(Appended(ErrorCode.unknown_topic_or_partition))
                continue
            if is_internal_topic(topic):  # Kafka's ReplicaManager: "Cannot append to internal topic"
                answers.append(Appended(ErrorCode.invalid_topic_exception, message=f"cannot append to {topic}"))
                continue
            header = self._check(p, data, zstd_allowed)
            if isinstance(header, Appended):
                answers.append(header)
                continue
            last_seq = -1
            if header.producer_id >= 0:
                last_seq = increment_sequence(header.base_sequence, header.last_offset_delta)
            seen = self._check_producer(p, header, last_seq) if header.producer_id >= 0 else None
            if isinstance(seen, Appended):
                answers.append(seen)
                continue
            if seen is not None:  # a retry of a batch appended already: answered with its offsets, not appended
                duplicates.append((len(answers), p, seen))
                answers.append(None)
                continue
            assert data is not None
            config = self.config(topic)
            base = p.next_offset
            last = base + header.last_offset_delta
            append_time = now if config.log_append_time else None
            stamped = stamp(data, base, p.epoch, append_time)
            max_ts = now if config.log_append_time else header.max_timestamp
            t = self.topics.get(topic)
            if t is not None and self._recorded.get(topic, 0) < t.partitions:  # its record failed: write it again
                records.append(self._topic_record(t))
            producer, retained_from = None, -1
            if header.producer_id >= 0:
                producer = ProducerBatch(header.base_sequence, last_seq, base, last, max_ts, PENDING)
                assert p.producers is not None
                retained_from = p.producers.begin(header.producer_id, header.producer_epoch, producer, now)
            record = BatchAppended(
                topic, index, base, last, max_ts, p.epoch, stamped, now,
                header.producer_id, header.producer_epoch, header.base_sequence, retained_from,
            )  # fmt: skip
            p.next_offset = last + 1
            p.inflight += 1
            records.append(record)
            appended.append((len(answers), p, record, -1 if append_time is None else append_time, producer))
            answers.append(None)
        # Answers still to come: the write, the originals of duplicates still being written, and this call itself
        # (so that answers completed inside this call do not answer before every callback is in place).
        waiting = len(duplicates) + (1 if appended else 0) + 1

        def answered() -> None:
            nonlocal waiting
            waiting -= 1
            if waiting == 0:
                on_done([a for a in answers if a is not None])

        def done(failure: Any) -> None:
            woken: list[Partition] = []
            for i, p, record, append_time, producer in appended:
                p.inflight -= 1
                if failure is None and not p.failed:
                    p.add(
                        record.base_offset,
                        record.last_offset,
                        record.max_timestamp,
                        record.size,
                        record.data,
                        record.timestamp_ms,
                    )
                    answers[i] = Appended(ErrorCode.none, record.base_offset, append_time, p.log_start)
                    woken.append(p)
                    if producer is not None and p.producers is not None:
                        p.producers.commit(record.producer_id, record.producer_epoch, producer, record.timestamp_ms)
                else:
                    p.failed = True
                    answers[i] = Appended(ErrorCode.kafka_storage_error, message="the batch could not be stored")
                    if producer is not None and p.producers is not None:
                        p.producers.abort(record.producer_id, producer)
                if p.failed and p.inflight == 0:
                    p.next_offset = p.high_watermark
                    p.failed = False
                    p.stale = isinstance(self.log, TailReader)
                    if p.producers is not None:
                        p.producers.reset_pending()
            for p in woken:
                self.wake(p)
            answered()

        for i, p, original in duplicates:
            original.when_done(self._duplicate_answer(answers, i, p, original, answered))
        if appended:
            self.log.append(records, done)
        elif records:
            self.log.append(records)
        answered()

    @staticmethod
    def _duplicate_answer(
        answers: list[Appended | None], i: int, p: Partition, original: ProducerBatch, answered: Callable[[], None]
    ) -> Callable[[bool], None]:
        """Kafka answers a duplicate with the original batch's offsets, and as log append time the max timestamp
        it keeps for the batch (``UnifiedLog.append``); the original must be durable first."""

        def fill(durable: bool) -> None:
            if durable:
                answers[i] = Appended(ErrorCode.none, original.base_offset, original.max_timestamp, p.log_start)
            else:
                answers[i] = Appended(ErrorCode.kafka_storage_error, message="the batch could not be stored")
            answered()

        return fill

    def _check_producer(self, p: Partition, header: BatchHeader, last_seq: int) -> Appended | ProducerBatch | None:
        """An idempotent batch against its producer's state: an answer (refused), the batch it duplicates, or None
        (append it). As Kafka's ``LogValidator`` a producer id needs a sequence >= 0; transactions are not served."""
        if header.is_transactional:
            return Appended(
                ErrorCode.transactional_id_authorization_failed,
                message="transactions are not supported by this broker",
            )
        if header.base_sequence < 0:
            return Appended(
                ErrorCode.invalid_record,
                message=f"invalid sequence number {header.base_sequence} in a batch of producer {header.producer_id}",
            )
        if p.producers is None:
            p.producers = PartitionProducers(self.max_producers_per_partition)
        seen = p.producers.check(header.producer_id, header.producer_epoch, header.base_sequence, last_seq)
        if isinstance(seen, Refusal):
            return Appended(seen.error, message=seen.message)
        return seen

    def expire_producers(self) -> int:
        """Forget the producers idle for ``producer_id_expiration_ms`` on every partition; returns how many."""
        now = self.now_ms()
        removed = 0
        for p in self._partitions.values():
            if p.producers is not None and p.producers.entries:
                removed += p.producers.expire(now, self.producer_id_expiration_ms)
        return removed

    def producer_count(self) -> int:
        """Producer states kept, over all partitions (a producer writing to n partitions counts n times)."""
        return sum(len(p.producers) for p in self._partitions.values() if p.producers is not None)

    def _check(self, p: Partition, data: bytes | None, zstd_allowed: bool) -> Appended | BatchHeader:
        if p.failed:
            return Appended(ErrorCode.not_leader_or_follower, message="a write failed; appends resume shortly")
        if p.stale:
            self._resync(p)
            return Appended(ErrorCode.not_leader_or_follower, message="a write failed; reading the stored log's end")
        if data is None:
            return Appended(ErrorCode.invalid_record, message="no records")
        try:
            header = read_produced_batch(data)
        except BatchError as e:
            return Appended(e.code, message=str(e))
        if header.size > self.config(p.topic).max_message_bytes:
            return Appended(
                ErrorCode.message_too_large,
                message=f"batch of {header.size} bytes is larger than max.message.bytes "
                f"{self.config(p.topic).max_message_bytes}",
            )
        if header.compression == Compression.ZSTD and not zstd_allowed:
            return Appended(ErrorCode.unsupported_compression_type, message="zstd needs Produce v7 or later")
        return header

    def _resync(self, p: Partition) -> None:
        """After a failed write, read the partition's stored end back before appending again: a write reported as
        failed may have committed (a connection lost during COMMIT). Batches found beyond the high watermark are
        durable: they are indexed (and their producers' sequences known, so an idempotent retry is recognised as a
        duplicate) and the log continues after them; without this every later conditional write would fail. A read
        that fails leaves the partition stale: the next produce tries again (clients retry NOT_LEADER_OR_FOLLOWER)."""
        reader = self.log
        if p.resyncing or not isinstance(reader, TailReader):
            return
        p.resyncing = True

        def done(tail: StoredTail | None) -> None:
            p.resyncing = False
            if tail is None or self._partitions.get((p.topic, p.index)) is not p or p.inflight:
                return
            found = 0
            for b in tail.batches:
                if b.base_offset != p.high_watermark:  # below it: indexed already; a gap: never written so
                    continue
                p.add(b.base_offset, b.last_offset, b.max_timestamp, b.size, None, b.appended_ms)
                found += 1
                if b.producer_id >= 0:
                    if p.producers is None:
                        p.producers = PartitionProducers(self.max_producers_per_partition)
                    last_seq = increment_sequence(b.base_sequence, b.last_offset - b.base_offset)
                    batch = ProducerBatch(
                        b.base_sequence, last_seq, b.base_offset, b.last_offset, b.max_timestamp, PENDING
                    )
                    p.producers.commit(b.producer_id, b.producer_epoch, batch, b.appended_ms)
            p.next_offset = max(p.high_watermark, tail.next_offset)
            p.stale = False
            if found:
                log.info(
                    "partition %s-%d: %d batch(es) found stored after a write reported failed; the log continues "
                    "at %d", p.topic, p.index, found, p.next_offset,
                )  # fmt: skip
                self.wake(p)

        reader.read_tail(p.topic, p.index, p.high_watermark, done)

    # ------------------------------------------------------------------------------------------------ fetch

    def read(self, topic: str, index: int, offset: int, max_bytes: int, *, min_one: bool) -> FetchSlice:
        """Whole durable batches from the one holding ``offset``, up to ``max_bytes`` (at least one batch when
        ``min_one``, as Kafka's soft limit, KIP-74). OFFSET_OUT_OF_RANGE below the log start or beyond the log
        end, as Kafka answers."""
        p = self.partition(topic, index)
        if p is None:
            return FetchSlice(ErrorCode.unknown_topic_or_partition)
        out = FetchSlice(ErrorCode.none, p.high_watermark, p.log_start)
        if offset < p.log_start or offset > p.next_offset:
            out.error = ErrorCode.offset_out_of_range
            return out
        if offset >= p.high_watermark:
            return out
        sizes, bases = p.sizes, p.bases
        data: list[bytes] | None = [] if p.data is not None else None
        for i in range(p.first_batch_at(offset), len(bases)):
            size = sizes[i]
            if out.size + size > max_bytes and (out.bases or not min_one):
                break
            out.bases.append(bases[i])
            out.size += size
            if data is not None and p.data is not None:
                data.append(p.data[i])
        out.data = data
        return out

    def available(self, topic: str, index: int, offset: int, limit: int) -> int:
        """Durable bytes a Fetch from ``offset`` would find (counted up to ``limit``); 0 for an error."""
        p = self.partition(topic, index) if self._on_read else self._partitions.get((topic, index))
        if p is None or offset < p.log_start or offset >= p.high_watermark:
            return 0
        return p.bytes_from(offset, limit)

    def watch(self, topic: str, index: int, callback: Callable[[], None]) -> Callable[[], None] | None:
        """Call ``callback`` once, at the next durable append to the partition. Returns a cancel function (None for
        an unknown partition)."""
        p = self.partition(topic, index)
        if p is None:
            return None
        p.watchers.append(callback)
        watchers = p.watchers

        def cancel() -> None:
            with contextlib.suppress(ValueError):
                watchers.remove(callback)

        return cancel

    @staticmethod
    def wake(p: Partition) -> None:
        """Call (and forget) the partition's watchers: after a durable append."""
        watchers, p.watchers = p.watchers, []
        for callback in watchers:
            callback()

    # ------------------------------------------------------------------------------------------------ list offsets

    def list_offset(self, topic: str, index: int, timestamp: int) -> tuple[ErrorCode, int, int]:
        """(error, offset, timestamp) for ListOffsets: -2 earliest, -1 latest, -3 the max timestamp, t >= 0 the first
        batch whose max timestamp is >= t (batch granularity: its base offset and max timestamp); not found: -1."""
        p = self.partition(topic, index)
        if p is None:
            return ErrorCode.unknown_topic_or_partition, -1, -1
        if timestamp == EARLIEST:
            return ErrorCode.none, p.log_start, -1
        if timestamp == LATEST:
            return ErrorCode.none, p.high_watermark, -1
        stamps = p.max_timestamps
        if timestamp == MAX_TIMESTAMP:
            if not stamps:
                return ErrorCode.none, -1, -1
            best = max(range(len(stamps)), key=stamps.__getitem__)  # the first batch with the largest timestamp
            log_append = self.config(topic).log_append_time
            return ErrorCode.none, p.bases[best] if log_append else p.lasts[best], stamps[best]
        if timestamp < 0:
            return ErrorCode.unsupported_version, -1, -1
        for i in range(len(stamps)):
            if stamps[i] >= timestamp:
                return ErrorCode.none, max(p.bases[i], p.log_start), stamps[i]
        return ErrorCode.none, -1, -1

    # ------------------------------------------------------------------------------------------------ admin

    def existing_partition(self, topic: str, index: int) -> Partition | None:
        """The partition if it has been touched (``partition`` creates an untouched one: empty, from offset 0)."""
        return self._partitions.get((topic, index))

    def partitions(self) -> Iterable[Partition]:
        """Every partition that has been touched (created lazily: one never produced to may be missing)."""
        return self._partitions.values()

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], on_done: Callable[[Any], None]
    ) -> Topic:
        """Create a topic with its own ``configs`` (checked before: ``config_of``); ``on_done(failure)`` once its
        record is durable. The topic is in Metadata at once (as an auto-created one)."""
        self._configs[name] = tuple(sorted(configs.items()))
        self._config_cache.pop(name, None)
        self._recorded[name] = partitions  # the registry listener leaves the record to us
        topic = self.topics.add(name, partitions)
        self.write_topic(topic, on_done)
        return topic

    def grow_topic(self, name: str, partitions: int, on_done: Callable[[Any], None]) -> None:
        """CreatePartitions: grow an existing topic (checked before) and record it."""
        self._recorded[name] = partitions
        self.write_topic(self.topics.add(name, partitions), on_done)

    def replace_configs(self, name: str, configs: Mapping[str, str], on_done: Callable[[Any], None]) -> None:
        """Replace the configs set on a topic (checked before: ``config_of``) and record them."""
        self._configs[name] = tuple(sorted(configs.items()))
        self._config_cache.pop(name, None)
        topic = self.topics.get(name)
        if topic is not None:
            self.write_topic(topic, on_done)

    def write_topic(self, topic: Topic, on_done: Callable[[Any], None] | None = None) -> None:
        record = self._topic_record(topic)
        written = self._topics_written([record])

        def done(failure: Any) -> None:
            written(failure)
            if on_done is not None:
                on_done(failure)

        self.log.append([record], done)

    def delete_topic(self, name: str, on_done: Callable[[Any], None]) -> bool:
        """Delete a topic at once (gone from the registry and Metadata; parked Fetches are woken and answer
        UNKNOWN_TOPIC_OR_PARTITION; appends in flight complete on the dropped partitions) and record it;
        ``on_done(failure)`` once durable. A deletion that cannot be written puts the topic back (unless the name
        was created again meanwhile). False for an unknown topic."""
        topic = self.topics.get(name)
        if topic is None:
            return False
        dropped = [(i, self._partitions.pop((name, i), None)) for i in range(topic.partitions)]
        configs = self._configs.pop(name, ())
        recorded = self._recorded.pop(name, 0)
        self._config_cache.pop(name, None)
        self.topics.remove(name)
        for _, p in dropped:
            if p is not None:
                self.wake(p)

        def done(failure: Any) -> None:
            if failure is not None and self.topics.get(name) is None:
                self._configs[name] = configs
                self._recorded[name] = recorded
                for i, p in dropped:
                    if p is not None:
                        self._partitions[(name, i)] = p
                self.topics.add(name, topic.partitions)
            on_done(failure)

        self.log.append([TopicDeleted(name, self.now_ms())], done)
        return True

    def advance_log_start(
        self, moves: Sequence[tuple[Partition, int]], on_done: Callable[[Any], None] | None = None
    ) -> None:
        """Move each partition's log start up to the given offset (at most its high watermark: checked by the
        caller) with ONE append of ``LogStartAdvanced`` records; the batches below are dropped from the index once
        durable (storage deletes their rows in the same transaction), then ``on_done(failure)``."""
        now = self.now_ms()
        records = [LogStartAdvanced(p.topic, p.index, start, p.epoch, now) for p, start in moves]
        for p, start in moves:
            p.pending_start = max(p.pending_start, start)

        def done(failure: Any) -> None:
            for p, start in moves:
                if failure is None:
                    size = p.size_bytes
                    self.deleted_batches += p.trim(start)
                    self.deleted_bytes += size - p.size_bytes
                else:
                    p.pending_start = p.log_start
            if on_done is not None:
                on_done(failure)

        if records:
            self.log.append(records, done)
        elif on_done is not None:
            on_done(None)
