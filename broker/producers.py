"""Idempotent producers: producer ids handed out in durable blocks, and each partition's producer state.

**Producer ids** (``ProducerIds``, Kafka's ``ProducerIdManager``). An idempotent producer asks InitProducerId for an
id once and stamps it, with its epoch and a per-partition sequence number, on every batch. Ids are never reused, not
even across restarts: they are handed out from blocks of ``block_size`` ids (Kafka's block is 1000), and a block is
used only once its ``ProducerIdsAllocated`` record is durable - one write per block, not per producer. When a block is
90% used the next one is written ahead (as Kafka's broker asks its controller for the next block early), so an
InitProducerId waits for the database only when the ids ran out faster than a block could be written. A block whose
write failed is skipped, never handed out (the write may have committed after all); the callers waiting for it get
None (InitProducerId answers the retriable COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer while no block is ready).

**Producer state** (``PartitionProducers``, Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo``). Per partition
and producer id: the producer's epoch and the metadata of its last ``BATCHES_TO_RETAIN`` (5) batches - first and last
sequence, base and last offset, max timestamp. ``check`` decides what an incoming batch is, in Kafka's order:

1. a **duplicate**: same epoch and exactly the sequence range of a retained batch -> the client is answered with that
   batch's offsets and it is NOT appended again (``UnifiedLog.analyzeAndValidateProducerState``);
2. an **older epoch** than the producer's -> INVALID_PRODUCER_EPOCH (what Kafka answers a Produce since 2.7; the
   fatal PRODUCER_FENCED is for transactional APIs, never for Produce);
3. a **newer epoch** (the producer got a new epoch) must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
4. the **same epoch** must continue the sequence: first sequence = last sequence + 1, wrapping from Int32 max to 0,
   else OUT_OF_ORDER_SEQUENCE_NUMBER (a gap, or a batch older than the five retained);
5. an **unknown producer** (never seen here, or expired) is accepted whatever its sequence: since KIP-360 (Kafka 2.5)
   the broker no longer answers UNKNOWN_PRODUCER_ID, it starts tracking the producer at the batch it gets.

In-flight batches count: an accepted batch is added at once to a *pending* copy of the producer's entry, so the next
batch of a pipelining producer is checked against it, and a retry of a batch still being written is recognised as its
duplicate (its answer waits for that write: ``ProducerBatch.when_done``). Only when the write is durable is the batch
added to the durable entry (``commit``); when it fails the pending copy is dropped (``abort``), and the producer's
state is what storage holds, so the client's retry of the same batch is appended normally.

**Expiry.** A producer whose last batch was appended ``producer.id.expiration.ms`` ago (Kafka's default: one day) is
forgotten (``expire``); its next batch is then that of an unknown producer. Kafka measures from the batch's max
timestamp (the producer's clock under CreateTime); we measure from the broker's append time, so a producer with a
wrong clock is neither forgotten early nor kept for ever. Entries are kept in order of last append, so a pass looks
only at the ones it removes. Memory is bounded by the producers active in one expiration period (about 1 KB each),
and by ``max_entries`` per partition (default ``DEFAULT_MAX_PRODUCERS_PER_PARTITION``): a batch needs no InitProducerId
to name a producer id, so a client inventing ids could otherwise grow the state by one entry per batch. Past the cap
the least recently appending producer is forgotten early, as if it had expired: the only loss is the duplicate
detection of that idle producer (Kafka has no such cap; KIP-936 limits the rate of new producer ids instead).

The rules as the client sees them: docs/semantics.md §13. Pure: no I/O (``ProducerIds`` appends to the injected
record log), time comes in as arguments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from protocol.errors import ErrorCode

from .records import ProducerIdsAllocated

__all__ = [
    "BATCHES_TO_RETAIN",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "PRODUCER_ID_BLOCK_SIZE",
    "PartitionProducers",
    "ProducerBatch",
    "ProducerEntry",
    "ProducerIds",
    "Refusal",
    "StoredProducerBatch",
    "increment_sequence",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (and max.in.flight.requests.per.connection)
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_MAX_PRODUCERS_PER_PARTITION = 10_000
PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PENDING, DURABLE, FAILED = 0, 1, 2


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past Int32 max to 0 as Kafka's ``DefaultRecordBatch.incrementSequence``."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == INT32_MAX)


class ProducerBatch:
    """One appended batch of a producer (Kafka's ``BatchMetadata``), shared by the pending and durable entries."""

    __slots__ = ("base_offset", "first_seq", "last_offset", "last_seq", "max_timestamp", "state", "waiters")

    def __init__(
        self, first_seq: int, last_seq: int, base_offset: int, last_offset: int, max_timestamp: int, state: int
    ) -> None:
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.state = state
        self.waiters: list[Callable[[bool], None]] | None = None

    @property
    def durable(self) -> bool:
        return self.state == DURABLE

    def when_done(self, callback: Callable[[bool], None]) -> None:
        """``callback(durable)`` once the batch's write has completed (at once if it has)."""
        if self.state != PENDING:
            callback(self.state == DURABLE)
        elif self.waiters is None:
            self.waiters = [callback]
        else:
            self.waiters.append(callback)

    def complete(self, state: int) -> None:
        self.state = state
        waiters, self.waiters = self.waiters, None
        for callback in waiters or ():
            callback(state == DURABLE)

    def __repr__(self) -> str:
        return (
            f"ProducerBatch(seq {self.first_seq}..{self.last_seq}, offsets {self.base_offset}..{self.last_offset}, "
            f"state {self.state})"
        )


class ProducerEntry:
    """A producer's state on one partition: its epoch, its last batches (oldest first), its last append time."""

    __slots__ = ("batches", "epoch", "last_append_ms")

    def __init__(self, epoch: int = NO_PRODUCER_EPOCH, last_append_ms: int = -1) -> None:
        self.epoch = epoch
        self.batches: deque[ProducerBatch] = deque(maxlen=BATCHES_TO_RETAIN)
        self.last_append_ms = last_append_ms

    def copy(self) -> ProducerEntry:
        out = ProducerEntry(self.epoch, self.last_append_ms)
        out.batches.extend(self.batches)
        return out

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def add(self, epoch: int, batch: ProducerBatch, now_ms: int) -> None:
        """Kafka's ``ProducerStateEntry.addBatch``: a new epoch forgets the batches of the old one."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch
        self.batches.append(batch)  # the deque drops the oldest beyond BATCHES_TO_RETAIN
        self.last_append_ms = now_ms

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> ProducerBatch | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


class StoredProducerBatch(NamedTuple):
    """A stored batch of an idempotent producer, as the start-up load reads it."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    appended_ms: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """A batch refused by the sequence rules: the partition's error and the message for the client."""

    error: ErrorCode
    message: str


def check(entry: ProducerEntry | None, epoch: int, first_seq: int, last_seq: int) -> ProducerBatch | Refusal | None:
    """What an incoming batch is for the producer's ``entry`` (None: unknown producer): the retained batch it
    duplicates, a ``Refusal``, or None when it may be appended (rules 1-5 of the module docstring)."""
    if entry is None:
        return None
    if epoch == entry.epoch and entry.batches and in_sequence(entry.batches[-1].last_seq, first_seq):
        return None  # the usual case, decided first: a batch that continues the sequence duplicates none of the five
    duplicate = entry.duplicate_of(epoch, first_seq, last_seq)
    if duplicate is not None:
        return duplicate
    if epoch < entry.epoch:
        return Refusal(
            ErrorCode.invalid_producer_epoch,
            f"producer epoch {epoch} is older than the producer's current epoch {entry.epoch}",
        )
    if epoch != entry.epoch:
        if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
            return Refusal(
                ErrorCode.out_of_order_sequence_number,
                f"sequence {first_seq} for new producer epoch {epoch} (the first batch of an epoch has sequence 0)",
            )
        return None
    if not in_sequence(entry.last_seq, first_seq):
        return Refusal(
            ErrorCode.out_of_order_sequence_number,
            f"out of order sequence number {first_seq}: the producer's last sequence is {entry.last_seq}",
        )
    return None


class PartitionProducers:
    """The producer state of one partition: durable entries (in order of last append) and pending copies."""

    __slots__ = ("entries", "evicted", "max_entries", "pending")

    def __init__(self, max_entries: int = DEFAULT_MAX_PRODUCERS_PER_PARTITION) -> None:
        self.max_entries = max(1, max_entries)
        self.evicted = 0  # producers forgotten early because of max_entries
        self.entries: dict[int, ProducerEntry] = {}
        self.pending: dict[int, tuple[ProducerEntry, list[int]]] = {}  # pid -> (entry, [batches in flight])

    def __len__(self) -> int:
        return len(self.entries)

    def current(self, producer_id: int) -> ProducerEntry | None:
        """The producer's entry including its batches in flight."""
        pending = self.pending.get(producer_id)
        return pending[0] if pending is not None else self.entries.get(producer_id)

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> ProducerBatch | Refusal | None:
        return check(self.current(producer_id), epoch, first_seq, last_seq)

    def begin(self, producer_id: int, epoch: int, batch: ProducerBatch, now_ms: int) -> int:
        """An accepted batch, being written: later batches are checked against it. Returns the base offset of the
        oldest batch the producer's state keeps with it (where a restart reads its batches from)."""
        pending = self.pending.get(producer_id)
        if pending is None:
            durable = self.entries.get(producer_id)
            pending = self.pending[producer_id] = (durable.copy() if durable is not None else ProducerEntry(), [0])
        pending[0].add(epoch, batch, now_ms)
        pending[1][0] += 1
        return pending[0].batches[0].base_offset

    def commit(self, producer_id: int, epoch: int, batch: ProducerBatch, now_ms: int) -> None:
        """The batch is durable: into the producer's durable entry (moved to the end: the most recent)."""
        entry = self.entries.pop(producer_id, None)
        if entry is None:
            entry = ProducerEntry()
        entry.add(epoch, batch, now_ms)
        self.entries[producer_id] = entry
        if len(self.entries) > self.max_entries:
            self._evict()
        self._settle(producer_id)
        batch.complete(DURABLE)

    def _evict(self) -> None:
        """Forget the least recently appending producers beyond ``max_entries`` (not one writing a batch now)."""
        entries = self.entries
        for _ in range(len(entries)):
            if len(entries) <= self.max_entries:
                return
            producer_id, entry = next(iter(entries.items()))
            del entries[producer_id]
            if producer_id in self.pending:
                entries[producer_id] = entry
            else:
                self.evicted += 1

    def abort(self, producer_id: int, batch: ProducerBatch) -> None:
        """The batch's write failed: once none of the producer's batches is in flight, the pending copy is
        dropped and the durable entry is the producer's state again."""
        self._settle(producer_id)
        batch.complete(FAILED)

    def _settle(self, producer_id: int) -> None:
        pending = self.pending.get(producer_id)
        if pending is not None:
            pending[1][0] -= 1
            if pending[1][0] <= 0:
                del self.pending[producer_id]

    def reset_pending(self) -> None:
        """Nothing is in flight on the partition after a failed write: forget every pending copy."""
        self.pending.clear()

    def load(self, producer_id: int, batches: Iterable[tuple[int, ProducerBatch]], last_append_ms: int) -> None:
        """A producer's last stored batches as (epoch, batch), oldest first, replayed as Kafka rebuilds its state
        from the log: a new epoch forgets the batches before it. Load producers in order of last append."""
        entry = ProducerEntry()
        for epoch, batch in batches:
            entry.add(epoch, batch, last_append_ms)
        self.entries.pop(producer_id, None)
        self.entries[producer_id] = entry

    def load_batches(self, stored: Iterable[StoredProducerBatch]) -> None:
        """The stored batches of the partition's producers (any order): each producer's last
        ``BATCHES_TO_RETAIN`` by offset are replayed, producers in order of last append."""
        by_producer: dict[int, list[StoredProducerBatch]] = {}
        for b in stored:
            by_producer.setdefault(b.producer_id, []).append(b)
        ordered = sorted(by_producer.values(), key=lambda bs: max(b.appended_ms for b in bs))
        for batches in ordered:
            batches.sort(key=lambda b: b.base_offset)
            batches = batches[-BATCHES_TO_RETAIN:]
            self.load(
                batches[0].producer_id,
                [
                    (
                        b.producer_epoch,
                        ProducerBatch(
                            b.base_sequence,
                            increment_sequence(b.base_sequence, b.last_offset - b.base_offset),
                            b.base_offset,
                            b.last_offset,
                            b.max_timestamp,
                            DURABLE,
                        ),
                    )
                    for b in batches
                ],
                batches[-1].appended_ms,
            )
        if len(self.entries) > self.max_entries:
            self._evict()

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers whose last append is ``expiration_ms`` old; returns how many. Looks only at the
        oldest entries (they are kept in order of last append)."""
        removed = 0
        entries = self.entries
        for _ in range(len(entries)):
            producer_id, entry = next(iter(entries.items()))
            if now_ms - entry.last_append_ms < expiration_ms:
                break
            del entries[producer_id]
            if producer_id in self.pending:  # writing a batch now: not idle, kept (at the end)
                entries[producer_id] = entry
            else:
                removed += 1
        return removed


# ------------------------------------------------------------------------------------------------ producer ids


class RecordAppender(Protocol):
    def append(self, records: Any, on_done: Callable[[Any], None] | None = None) -> None: ...


class ProducerIds:
    """Hands out producer ids from durable blocks (see the module docstring)."""

    def __init__(
        self, log: RecordAppender, now_ms: Callable[[], int], *, block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> None:
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        self.log = log
        self.now_ms = now_ms
        self.block_size = block_size
        self._blocks: deque[list[int]] = deque()  # durable blocks not used up: [next id, end (exclusive)]
        self._next_start = 0  # where the next block written starts
        self._writing = False
        self._waiting: deque[Callable[[int | None], object]] = deque()
        self.blocks_written = 0

    def load(self, next_start: int) -> None:
        """Where the stored blocks end: ids below it may have been handed out already."""
        self._next_start = max(self._next_start, next_start)

    @property
    def available(self) -> int:
        return sum(end - nxt for nxt, end in self._blocks)

    def allocate(self, reply: Callable[[int | None], object]) -> None:
        """``reply(producer_id)`` with a fresh id once its block is durable (maybe inside this call), or
        ``reply(None)`` if the block could not be written."""
        if self._waiting or not self._blocks:
            self._waiting.append(reply)
            self._write_block()
            return
        reply(self._take())
        if self.available * 10 < self.block_size:  # less than 10% of a block left: write the next one ahead
            self._write_block()

    def _take(self) -> int:
        block = self._blocks[0]
        producer_id = block[0]
        block[0] += 1
        if block[0] >= block[1]:
            self._blocks.popleft()
        return producer_id

    def _write_block(self) -> None:
        if self._writing:
            return
        self._writing = True
        start = self._next_start
        self._next_start = start + self.block_size  # never handed out twice, even if this write fails
        record = ProducerIdsAllocated(start, self.block_size, self.now_ms())

        def done(failure: Any) -> None:
            self._writing = False
            if failure is not None:
                waiting, self._waiting = self._waiting, deque()
                for reply in waiting:
                    reply(None)
                return
            self.blocks_written += 1
            self._blocks.append([start, start + self.block_size])
            while self._waiting and self._blocks:
                self._waiting.popleft()(self._take())
            if self._waiting:
                self._write_block()

        self.log.append([record], done)
