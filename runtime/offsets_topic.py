"""Rendering the coordinator's state records into ``__consumer_offsets`` (``broker.offsets_topic.OffsetsTopic``;
what a reader sees and how it differs from Kafka: ``docs/semantics.md`` §11.1).

A record-stream listener: every batch holding a state record is rendered once it is DURABLE (a write that fails
renders nothing, and offsets become visible in the topic when they become visible to OffsetFetch). Each state record
becomes one record of the group's partition, ``abs(javaHashCode(group_id)) % offsets.topic.num.partitions``
(``coordinator.sharding.partition_for``, the partition FindCoordinator's clients compute), in Kafka's formats
(``protocol.consumer_offsets``), with the record's own time as its CreateTime:

| coordinator record | key | value |
|---|---|---|
| ``OffsetCommitRecord`` | OffsetCommitKey v1 (group, topic, partition) | OffsetCommitValue v3 (v1 if it expires) |
| ``OffsetTombstone`` (OffsetDelete, expiry, group deletion) | OffsetCommitKey v1 | null |
| ``GroupMetadataRecord`` (new group, generation, Empty) | GroupMetadataKey v2 (group) | GroupMetadataValue v3 |
| ``GroupTombstone`` (DeleteGroups, expiry of an Empty group) | GroupMetadataKey v2 | null |

A durable record costs one dict update (``OffsetsTopic.add`` holds it back under its key); it is encoded when a
reader looks at its partition, together with the others held back (one record batch), and only the newest record
of a key is. No lookup of group state, nothing on the heartbeat path (heartbeats write no records); history records
are ignored. At start-up ``load`` gives the topic the loaded current state - one record per live key, as a
compacted topic holds them - which it renders per partition when that partition is first read
(``OffsetsTopic.load_lazily``); the loaded offsets come as rows per group (``coordinator.offsets.GroupOffsetRows``),
not records.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

from broker.offsets_topic import Entry, OffsetsTopic
from coordinator.offsets import GroupOffsetRows, OffsetRow
from coordinator.records import (
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from coordinator.sharding import partition_for
from protocol.consumer_offsets import group_metadata_key, group_metadata_value, offset_commit_key, offset_commit_value

__all__ = ["OffsetsTopicRenderer", "render", "render_state"]


def render(record: Record) -> Entry | None:
    """The (key, value, timestamp) of ``record`` in ``__consumer_offsets``; None for a history record."""
    if isinstance(record, OffsetCommitRecord):
        key = offset_commit_key(record.group_id, record.topic, record.partition)
        value = offset_commit_value(
            record.offset,
            record.leader_epoch,
            record.metadata,
            record.commit_timestamp_ms,
            record.expire_timestamp_ms,
        )
        return key, value, record.commit_timestamp_ms
    if isinstance(record, GroupMetadataRecord):
        value = group_metadata_value(
            record.protocol_type,
            record.generation_id,
            record.protocol,
            record.leader,
            record.current_state_timestamp_ms,
            record.members,
        )
        return group_metadata_key(record.group_id), value, record.timestamp_ms
    if isinstance(record, OffsetTombstone):
        return offset_commit_key(record.group_id, record.topic, record.partition), None, record.timestamp_ms
    if isinstance(record, GroupTombstone):
        return group_metadata_key(record.group_id), None, record.timestamp_ms
    return None


def render_offset_row(group_id: str, row: OffsetRow) -> Entry:
    """``render`` of the ``OffsetCommitRecord`` of ``group_id`` whose fields ``row`` holds."""
    topic, partition, offset, epoch, metadata, commit_ms, expire_ms = row
    value = offset_commit_value(offset, epoch, metadata, commit_ms, expire_ms)
    return offset_commit_key(group_id, topic, partition), value, commit_ms


def _render_loaded(item: Any) -> Entry:
    """What ``OffsetsTopicRenderer.load`` hands over: a state record, or a (group id, offset row) pair."""
    return render_state(item) if type(item) in OffsetsTopicRenderer.durable_types else render_offset_row(*item)


class _Loaded(Collection[Any]):
    """One partition's start-up state for ``OffsetsTopic.load_lazily``: its state records, then its groups' offset
    rows, each as (group id, row) when iterated (when the partition is rendered); its length counts records and
    rows, the offsets they take in the partition."""

    __slots__ = ("count", "groups", "records")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.groups: list[GroupOffsetRows] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        yield from self.records
        for group_id, rows in self.groups:
            for row in rows:
                yield group_id, row

    def __contains__(self, item: object) -> bool:
        return any(item == entry for entry in self)


def render_state(record: Record) -> Entry:
    """``render`` for a state record (what ``OffsetsTopicRenderer`` gives ``OffsetsTopic.add``)."""
    entry = render(record)
    assert entry is not None, f"not a state record: {record!r}"
    return entry


class OffsetsTopicRenderer:
    """Gives every durable state record to ``topic`` (built with ``render_state``), under its key: (group, topic,
    partition) for offsets, (group,) for the group; ``partitions`` must be the coordinator's
    ``offsets.topic.num.partitions`` (the topic's own count)."""

    durable_types: frozenset[type] = frozenset(
        {OffsetCommitRecord, OffsetTombstone, GroupMetadataRecord, GroupTombstone}
    )

    def __init__(self, topic: OffsetsTopic, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self._partition_of: dict[str, int] = {}  # group id -> partition, computed once per group

    def on_append(self, records: Sequence[Record]) -> None:
        return None

    def on_durable(self, records: Sequence[Record]) -> None:
        add = self.topic.add
        for record in records:
            if isinstance(record, OffsetCommitRecord | OffsetTombstone):
                add(self._partition(record.group_id), (record.group_id, record.topic, record.partition), record)
            elif isinstance(record, GroupMetadataRecord | GroupTombstone):
                add(self._partition(record.group_id), (record.group_id,), record)

    def load(self, records: Iterable[Record], end_offset: int = 0, offsets: Iterable[GroupOffsetRows] = ()) -> None:
        """The loaded current state (before anything else is rendered): one record per live key, just below
        ``end_offset`` in each partition, the state ``records`` first, then the ``offsets`` rows of each group (in
        the given order); rendered when a partition is first read (``OffsetsTopic.load_lazily``)."""
        by_partition: dict[int, _Loaded] = {}

        def loaded(index: int) -> _Loaded:
            found = by_partition.get(index)
            if found is None:
                found = by_partition[index] = _Loaded()
            return found

        for record in records:
            if type(record) in self.durable_types:  # history records are not in the topic
                part = loaded(self._partition(record.group_id))
                part.records.append(record)
                part.count += 1
        for group_id, rows in offsets:
            if rows:
                part = loaded(self._partition(group_id))
                part.groups.append((group_id, rows))
                part.count += len(rows)
        self.topic.load_lazily(by_partition, _render_loaded, end_offset)

    def _partition(self, group_id: str) -> int:
        found = self._partition_of.get(group_id)
        if found is None:
            if len(self._partition_of) >= 100_000:  # a cache, not a registry of every group ever seen
                self._partition_of.clear()
            found = self._partition_of[group_id] = partition_for(group_id, self.partitions)
        return found
