"""The internal topic ``__consumer_offsets``: record batches kept in memory, compacted like Kafka's cleaner.

In Kafka the group coordinator's state IS this topic. Here the truth is the coordinator's record log, and the topic
is a rendering of it for the tools that read it (Burrow, ``kafka-console-consumer`` with the offsets formatter,
consumers with ``exclude.internal.topics=false``): ``runtime.offsets_topic`` turns each durable offset commit, group
metadata change and removal into a (key, value) pair and appends it here; at start-up it appends one record per live
key (the topic as compaction would leave it). Nothing of it is stored; its partitions are broker partitions that keep
their bytes, so Fetch and ListOffsets serve them like any other.

Lazy rendering. ``add`` only remembers the record under its key (an O(1) dict update: a commit costs no encoding);
the records held back are rendered and appended - one uncompressed batch (magic 2, CreateTime, CRC-32C) at the
partition's next offsets, visible at once (what is rendered is already durable) - when someone looks at the
partition (a Fetch, ListOffsets: ``Broker.written_on_read``) or at once when a Fetch is parked on it, at most
``max_render`` (the oldest held) per look, so that no look holds the event loop for long (a reader arriving after a
while gets the rest at its next fetches). A key added again before that replaces its held record (moved to the end):
only its newest record is rendered, as if compaction had already removed the others - so a tailing reader (Burrow)
sees every change, and nobody reading costs a dict entry per live key (the held records are keyed, so they are
bounded by the live keys too), not an encoding per commit.

Compaction (Kafka's ``cleanup.policy=compact``): when a partition holds more than twice as many records as it has
live keys (and at least ``min_compaction_records``), every batch but the last (Kafka never cleans the active segment)
keeps only the records that are the newest of their key, at their ORIGINAL offsets: a batch keeps its base offset,
last offset delta and base timestamp, so the surviving records' bytes are reused as they are, and a batch with
nothing left is dropped - offsets with gaps, as a cleaned Kafka log has. A tombstone (null value) is kept for
``delete_retention_ms`` after its timestamp (Kafka's ``delete.retention.ms``, default one day) so that readers see
the deletion, then dropped with its key. Memory is thus proportional to the live keys (and recent tombstones), not to
the number of commits ever made; a compaction costs O(records held) and happens after as many appends, so an append
costs O(1) amortised. The log start offset stays where it is (compaction never moves it).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from itertools import islice
from typing import Any, NamedTuple

from protocol.batch_builder import build_batch, encode_record

from .partitions import Broker, Partition
from .topics import OFFSETS_TOPIC

__all__ = ["DELETE_RETENTION_MS", "Entry", "OffsetsTopic"]

Entry = tuple[bytes, bytes | None, int]  # key, value (None: a tombstone), timestamp ms

DELETE_RETENTION_MS = 86_400_000  # Kafka's log.cleaner.delete.retention.ms default
MAX_RENDER = 1_000  # held-back records rendered per look at a partition (about 10 ms)
MIN_COMPACTION_RECORDS = 1_000
MAX_BATCH_RECORDS = 1_000  # records per batch when a call appends more (the start-up rebuild)
_BASE_TIMESTAMP = struct.Struct(">q")
_BASE_TIMESTAMP_AT = 27


class _Kept(NamedTuple):
    """One record held in a partition: what compaction needs to decide on it, and its encoded bytes."""

    offset: int
    key: bytes
    tombstone: bool
    timestamp: int
    raw: bytes


class _Compacted:
    __slots__ = ("count", "latest", "loaded", "pending", "records")

    def __init__(self) -> None:
        self.loaded: Collection[object] = ()  # the start-up state (``load_lazily``), not rendered yet
        self.pending: dict[Hashable, object] = {}  # key -> its newest record, not rendered yet, in arrival order
        self.records: list[list[_Kept]] = []  # per batch, in the order of the partition's batch index
        self.latest: dict[bytes, int] = {}  # key -> offset of its newest record
        self.count = 0  # records held


class OffsetsTopic:
    """The partitions of ``__consumer_offsets`` in ``broker`` (the topic is created in its registry with
    ``partitions`` partitions; it is never recorded as a stored topic). ``render`` turns a record given to ``add``
    into its (key, value or None, timestamp ms)."""

    def __init__(
        self,
        broker: Broker,
        partitions: int,
        now_ms: Callable[[], int],
        render: Callable[[Any], Entry],
        *,
        delete_retention_ms: int = DELETE_RETENTION_MS,
        min_compaction_records: int = MIN_COMPACTION_RECORDS,
        max_render: int = MAX_RENDER,
    ) -> None:
        self.broker = broker
        self.now_ms = now_ms
        self.render = render
        self._render_loaded: Callable[[Any], Entry] = render  # the start-up state's items (``load_lazily``)
        self.delete_retention_ms = delete_retention_ms
        self.min_compaction_records = min_compaction_records
        self.max_render = max_render
        self.partitions = broker.topics.add(OFFSETS_TOPIC, partitions).partitions
        self._state = [_Compacted() for _ in range(self.partitions)]
        self._parts: list[Partition] = []
        for index in range(self.partitions):
            p = broker.partition(OFFSETS_TOPIC, index)
            assert p is not None and p.data is not None, "the internal topic's partitions keep their bytes"
            self._parts.append(p)
        broker.written_on_read(OFFSETS_TOPIC, self.flush)
        self.compactions = 0

    def _partition(self, index: int) -> Partition:
        return self._parts[index]

    def add(self, index: int, key: Hashable, record: object) -> None:
        """Hold ``record`` (rendered later by ``render``) as the newest of ``key`` in partition ``index``."""
        pending = self._state[index].pending
        pending.pop(key, None)
        pending[key] = record
        if self._parts[index].watchers:  # a Fetch is parked on the partition: it gets the record now
            self.flush(index)

    def flush(self, index: int) -> None:
        """Render and append (the ``max_render`` oldest of) the records held back for partition ``index``; the
        loaded start-up state first, all of it (``load_lazily``)."""
        if not 0 <= index < self.partitions:
            return
        state = self._state[index]
        if state.loaded:
            loaded, state.loaded = state.loaded, ()
            self.append(index, [self._render_loaded(item) for item in loaded])
        held = state.pending
        if not held:
            return
        render = self.render
        if len(held) <= self.max_render:
            state.pending = {}
            self.append(index, [render(record) for record in held.values()])
        else:
            self.append(index, [render(held.pop(key)) for key in list(islice(held, self.max_render))])

    def load(self, by_partition: Mapping[int, Sequence[Entry]], end_offset: int = 0) -> None:
        """The start-up state, before anything is appended: each partition's records at the offsets just below
        ``end_offset`` (``runtime.offsets_topic`` passes the stored log's last position, which is at least the end of
        every partition in the previous run), its log start at 0 - the offsets below are a gap, as a log cleaned
        from its beginning has. So offsets only grow across restarts: a reader that had reached offset X before the
        restart is not out of range after it, and reads on from X."""
        for index in range(self.partitions):
            entries = by_partition.get(index, ())
            p = self._partition(index)
            if p.bases or p.next_offset:  # records held back (not rendered yet) stay after the loaded ones
                raise ValueError(f"{OFFSETS_TOPIC}-{index} is not empty: load it first")
            p.high_watermark = p.next_offset = max(end_offset - len(entries), 0)
            self.append(index, entries)

    def load_lazily(
        self, by_partition: Mapping[int, Collection[Any]], render: Callable[[Any], Entry], end_offset: int = 0
    ) -> None:
        """``load`` without rendering at start-up: each partition's loaded items go to the same offsets, just below
        ``end_offset``, but are rendered with ``render`` (and appended, all at once, before anything held back) when
        someone first looks at the partition, as held-back records are. A daemon restarting with 1,000,000
        committed offsets does not encode them all before it serves (tens of seconds; few deployments read the
        topic at all); the first Fetch or ListOffsets of a partition pays for its part (1/``partitions`` of it)."""
        for index in range(self.partitions):
            items = by_partition.get(index, ())
            p = self._partition(index)
            if p.bases or p.next_offset:
                raise ValueError(f"{OFFSETS_TOPIC}-{index} is not empty: load it first")
            p.high_watermark = p.next_offset = max(end_offset - len(items), 0)
            self._state[index].loaded = items
        self._render_loaded = render

    def append(self, index: int, entries: Sequence[Entry]) -> None:
        """Append (key, value or None for a tombstone, timestamp ms) records to partition ``index``."""
        for start in range(0, len(entries), MAX_BATCH_RECORDS):
            self._append_batch(index, entries[start : start + MAX_BATCH_RECORDS])
        state = self._state[index]
        if state.count >= self.min_compaction_records and state.count > 2 * len(state.latest):
            self.compact(index)

    def _append_batch(self, index: int, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        p = self._partition(index)
        state = self._state[index]
        base = p.next_offset
        base_ts = entries[0][2]
        kept: list[_Kept] = []
        for delta, (key, value, ts) in enumerate(entries):
            raw = encode_record(delta, ts - base_ts, key, value)
            kept.append(_Kept(base + delta, key, value is None, ts, raw))
            state.latest[key] = base + delta
        last_delta = len(entries) - 1
        max_ts = max(e[2] for e in entries)
        data = build_batch(base, last_delta, base_ts, max_ts, [k.raw for k in kept], partition_leader_epoch=p.epoch)
        p.add(base, base + last_delta, max_ts, len(data), data)
        p.next_offset = base + last_delta + 1
        state.records.append(kept)
        state.count += len(kept)
        Broker.wake(p)

    def compact(self, index: int) -> None:
        """Keep, in every batch but the last, only the newest record of each key (tombstones until they are older
        than the delete retention), at their original offsets."""
        p = self._partition(index)
        state = self._state[index]
        n = len(p.bases)
        if n <= 1:
            return
        assert p.data is not None
        horizon = self.now_ms() - self.delete_retention_ms
        latest = state.latest
        bases, lasts, stamps, sizes = array("q"), array("q"), array("q"), array("q")
        data: list[bytes] = []
        records: list[list[_Kept]] = []
        count = 0
        for i in range(n):
            batch = state.records[i]
            if i == n - 1:
                kept = batch
            else:
                kept = []
                for r in batch:
                    if latest.get(r.key) != r.offset:
                        continue
                    if r.tombstone and r.timestamp < horizon:
                        del latest[r.key]
                        continue
                    kept.append(r)
                if not kept:
                    continue
            raw = p.data[i]
            max_ts = p.max_timestamps[i]
            if len(kept) != len(batch):
                (base_ts,) = _BASE_TIMESTAMP.unpack_from(raw, _BASE_TIMESTAMP_AT)
                max_ts = max(r.timestamp for r in kept)
                raw = build_batch(
                    p.bases[i], p.lasts[i] - p.bases[i], base_ts, max_ts, [r.raw for r in kept],
                    partition_leader_epoch=p.epoch,
                )  # fmt: skip
            bases.append(p.bases[i])
            lasts.append(p.lasts[i])
            stamps.append(max_ts)
            sizes.append(len(raw))
            data.append(raw)
            records.append(kept)
            count += len(kept)
        p.bases, p.lasts, p.max_timestamps, p.sizes, p.data = bases, lasts, stamps, sizes, data
        state.records = records
        state.count = count
        self.compactions += 1

    def records_held(self, index: int) -> int:
        """Records in the partition's batches (not counting those held back)."""
        return self._state[index].count

    def pending(self, index: int) -> int:
        return len(self._state[index].pending)

    def live_keys(self, index: int) -> int:
        return len(self._state[index].latest)

    def bytes_held(self) -> int:
        return sum(sum(self._partition(i).sizes) for i in range(self.partitions))
