"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and their replay (Kafka's OffsetMetadataManager).

Rules of this module:

* **Records are the source of truth.** A handler validates, builds ``OffsetCommitRecord`` / ``OffsetTombstone``
  records and writes them as one ``Result`` (``coordinator.writes``, which also maps a failed write to the Kafka
  error the client gets); the in-memory store changes only in ``replay``, and the live path replays a batch only
  once the log reported it durable. So nothing a client can read (OffsetFetch, DescribeGroups) runs ahead of what a
  restart would rebuild, and a failed write needs no undo. This mirrors Kafka's new coordinator, whose reads are
  served from the last committed state.
* **In-flight commits are tracked per partition** (a counter, O(partitions in the request)). Deleting a group or an
  offset tombstones them too (the tombstone is appended after the commit, so it wins on replay as it does live);
  the retention cleanup never expires them and never deletes a group that has one (Kafka's old coordinator rule;
  the new one gets the same effect because its uncommitted commit is already visible with a fresh timestamp);
  a group deletion is applied to the group at once (``coordinator.deletion``) and detaches the group's
  in-flight counters, so a commit accepted before it stores its offset without bringing the group back;
  OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them, as the old coordinator did (the new one
  waits for the write instead; both make the client retry until the commit is durable).
* A commit never touches the group's other offsets: O(partitions in the request), never O(group offsets).
* Simple (offsets-only) groups are created when their first commit is replayed, through
  ``GroupDirectory.get_or_create_simple_group``; that is also how a load rebuilds them.
* **Groups of every type** are found in the ``coordinator.group_type.GroupDirectory`` and validate the requests
  themselves (``Group.validate_offset_commit``, ``validate_offset_fetch``, ``validate_offset_delete``,
  ``is_subscribed_to``): this module knows no group type. What it decides itself: a commit to no group (C1, C2),
  and that an accepted commit with a generation (or member epoch) below 0 is an admin commit, recorded with no
  member (the ids of an admin commit are not validated).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from protocol.errors import ErrorCode

from .clock import Clock, Timer
from .config import GroupConfig
from .deferred import Deferred, resolved
from .group_type import GroupDirectory
from .messages import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResult,
    OffsetDeleteRequest,
    OffsetDeleteResult,
    OffsetFetchRequest,
    OffsetFetchResult,
    PartitionError,
)
from .record_log import RecordLog
from .records import (
    OffsetCommitRecord,
    OffsetRemovalCause,
    OffsetTombstone,
    new_offset_commit_record,
    new_offset_tombstone,
)
from .result import Result
from .writes import write

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

_EMPTY: Mapping[TopicPartition, OffsetAndMetadata] = MappingProxyType({})


# A loaded committed offset of a group: topic, partition, offset, leader epoch, metadata, commit time, expiry time
# (``OffsetCommitRecord``'s fields that the state keeps, in their order). Start-up reads them per group
# (``GroupOffsetRows``: the group id once, its rows in (topic, partition) order), with no record and no
# ``OffsetAndMetadata`` per offset: a group's are built when the group is first used (``OffsetManager._built``).
OffsetRow = tuple[str, int, int, int, str, int, int | None]
GroupOffsetRows = tuple[str, Sequence[OffsetRow]]


@dataclass(slots=True)  # never changed once built, but not frozen: a frozen __init__ costs 4x (object.__setattr__
class OffsetAndMetadata:  # per field), once per commit and 1,000,000 times at a start-up with 1,000,000 offsets
    offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None  # explicit expiry (OffsetCommit v2-4 retention_time_ms); None = retention rule


def utf16_length(s: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (a character outside the BMP counts twice)."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _failed(records_results: list[PartitionError], error: ErrorCode) -> list[PartitionError]:
    """Every partition that was accepted (NONE) gets ``error``; per-partition validation errors stay."""
    return [PartitionError(r.topic, r.partition, error) if r.error is ErrorCode.none else r for r in records_results]


class OffsetManager:
    def __init__(self, config: GroupConfig, clock: Clock, timer: Timer, log: RecordLog, groups: GroupDirectory) -> None:
        self._config = config
        self._clock = clock
        self._timer = timer
        self._log = log
        self._groups = groups
        # Per group its durable offsets; a loaded group's rows (a Sequence, not a dict) until it is first used: every
        # reader goes through ``_built`` (``load``: 1,000,000 offsets are not built before the daemon serves).
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata] | Sequence[OffsetRow]] = {}
        self._inflight: dict[str, dict[TopicPartition, int]] = {}  # commits not durable yet, per partition

    # ------------------------------------------------------------------------------------------------ OffsetCommit
    def commit_offsets(self, req: OffsetCommitRequest) -> Deferred[OffsetCommitResult]:
        group = self._groups.group(req.group_id)
        if group is not None:
            error = group.validate_offset_commit(
                req.member_id, req.generation_id, req.group_instance_id, req.api_version
            )
        elif req.generation_id < 0:
            error = ErrorCode.none  # C1: a simple group appears when the first commit is replayed
        else:
            error = ErrorCode.group_id_not_found if req.api_version >= 9 else ErrorCode.illegal_generation  # C2
        if error is not ErrorCode.none:
            return resolved(OffsetCommitResult([PartitionError(p.topic, p.partition, error) for p in req.partitions]))

        results, records, keys = self._commit_records(req)
        if not records:
            return resolved(OffsetCommitResult(results))

        inflight = self._inflight.get(req.group_id)
        if inflight is None:
            inflight = self._inflight[req.group_id] = {}
        for key in keys:
            inflight[key] = inflight.get(key, 0) + 1
        reply: Deferred[OffsetCommitResult] = Deferred()
        out: Result[Deferred[OffsetCommitResult]] = Result(reply)
        out.records.extend(records)

        def on_done(err: ErrorCode | None) -> None:
            still_tracked = self._release_inflight(req.group_id, inflight, keys)
            if err is None:
                for record in records:
                    if still_tracked:
                        self.replay(record)
                    else:
                        # A deletion of the group was applied after this commit was accepted: the group must not
                        # come back as a simple group. The deletion's tombstone follows this record in the log and
                        # removes the offset when it lands (or the group is restored if it fails).
                        self._store(record)
                reply.resolve(OffsetCommitResult(results))
            else:
                log.warning(
                    "offset commit write failed: %s",
                    err.name,
                    extra={"group": req.group_id, "throttle": ("write-failed", "offset commit")},
                )
                reply.resolve(OffsetCommitResult(_failed(results, err)))

        out.on_durable.append(on_done)
        write(self._log, out)
        return reply

    def _commit_records(
        self, req: OffsetCommitRequest
    ) -> tuple[list[PartitionError], list[OffsetCommitRecord], list[TopicPartition]]:
        """Per partition: its answer, and for each accepted one its record and key (a metadata too long is refused)."""
        now = self._clock.now_ms()
        expire_ms = now + req.retention_time_ms if 2 <= req.api_version <= 4 and req.retention_time_ms != -1 else None
        max_len = self._config.offset_metadata_max_bytes
        # An accepted commit below generation 0 is an admin commit (C1, C4): its member id was not validated, so it
        # does not name the committer ("" in the record, which the history reads as an operator's commit).
        member_id = req.member_id if req.generation_id >= 0 else ""
        results: list[PartitionError] = []
        records: list[OffsetCommitRecord] = []
        keys: list[TopicPartition] = []
        for p in req.partitions:
            if p.metadata is not None and (len(p.metadata) > max_len or utf16_length(p.metadata) > max_len):
                results.append(PartitionError(p.topic, p.partition, ErrorCode.offset_metadata_too_large))
                continue
            results.append(PartitionError(p.topic, p.partition, ErrorCode.none))
            commit_ms = p.commit_timestamp_ms if req.api_version == 1 and p.commit_timestamp_ms != -1 else now
            records.append(
                new_offset_commit_record(
                    req.group_id,
                    p.topic,
                    p.partition,
                    offset=p.offset,
                    leader_epoch=p.leader_epoch,
                    metadata=p.metadata,
                    commit_timestamp_ms=commit_ms,
                    expire_timestamp_ms=expire_ms,
                    member_id=member_id,
                    generation_id=req.generation_id,
                )
            )
            keys.append((p.topic, p.partition))
        return results, records, keys

    def _release_inflight(self, group_id: str, inflight: dict[TopicPartition, int], keys: list[TopicPartition]) -> bool:
        """Count the commit's partitions down in the counters it was accepted under. Returns False if a group
        deletion detached those counters in the meantime (``detach_inflight``)."""
        for key in keys:
            left = inflight.get(key, 0) - 1
            if left > 0:
                inflight[key] = left
            else:
                inflight.pop(key, None)
        tracked = self._inflight.get(group_id) is inflight
        if tracked and not inflight:
            del self._inflight[group_id]
        return tracked

    def detach_inflight(self, group_id: str) -> None:
        """A deletion of the group is applied now (its tombstones cover these commits): the commits still in flight
        no longer count for the group id, which a later request may reuse for a new group."""
        self._inflight.pop(group_id, None)

    # ------------------------------------------------------------------------------------------------- OffsetFetch
    def fetch_offsets(self, req: OffsetFetchRequest) -> OffsetFetchResult:
        """One group (the adapter loops over OffsetFetch v8+ groups). An absent or Dead group is not an error."""
        group = self._groups.group(req.group_id)
        stored = None
        if group is not None:
            error = group.validate_offset_fetch()
            if error is ErrorCode.none:
                stored = self._built(req.group_id)
            elif error is not ErrorCode.group_id_not_found:  # not found: answered like an absent group
                return OffsetFetchResult(req.group_id, error, [])
        inflight = self._inflight.get(req.group_id) if req.require_stable and stored is not None else None
        if req.topics is None:
            return OffsetFetchResult(req.group_id, ErrorCode.none, AllOffsets(stored, inflight))
        partitions: list[FetchedOffset] = []
        for topic, indexes in req.topics:
            for partition in indexes:
                o = stored.get((topic, partition)) if stored is not None else None
                partitions.append(self._fetched(topic, partition, o, inflight))
        return OffsetFetchResult(req.group_id, ErrorCode.none, partitions)

    @staticmethod
    def _fetched(
        topic: str, partition: int, o: OffsetAndMetadata | None, inflight: Mapping[TopicPartition, int] | None
    ) -> FetchedOffset:
        return _fetched(topic, partition, o, inflight)

    # ------------------------------------------------------------------------------------------------ OffsetDelete
    def delete_offsets(self, req: OffsetDeleteRequest) -> Deferred[OffsetDeleteResult]:
        group = self._groups.group(req.group_id)
        if group is None:
            return resolved(OffsetDeleteResult(ErrorCode.group_id_not_found))
        error = group.validate_offset_delete()
        if error is not ErrorCode.none:
            return resolved(OffsetDeleteResult(error))

        now = self._clock.now_ms()
        stored = self._built(req.group_id) or {}
        inflight = self._inflight.get(req.group_id, {})
        results: list[PartitionError] = []
        records: list[OffsetTombstone] = []
        seen: set[TopicPartition] = set()
        for topic, partition in req.partitions:
            if group.is_subscribed_to(topic):
                results.append(PartitionError(topic, partition, ErrorCode.group_subscribed_to_topic))
                continue
            results.append(PartitionError(topic, partition, ErrorCode.none))
            key = (topic, partition)
            if key not in seen and (key in stored or key in inflight):
                seen.add(key)
                records.append(
                    new_offset_tombstone(req.group_id, topic, partition, cause=OffsetRemovalCause.DELETED, now_ms=now)
                )
        if not records:
            return resolved(OffsetDeleteResult(ErrorCode.none, results))

        reply: Deferred[OffsetDeleteResult] = Deferred()
        out: Result[Deferred[OffsetDeleteResult]] = Result(reply)
        out.records.extend(records)

        def on_done(err: ErrorCode | None) -> None:
            if err is None:
                for record in records:
                    self.replay(record)
                reply.resolve(OffsetDeleteResult(ErrorCode.none, results))
            else:
                log.warning(
                    "offset delete write failed: %s",
                    err.name,
                    extra={"group": req.group_id, "throttle": ("write-failed", "offset delete")},
                )
                reply.resolve(OffsetDeleteResult(err))

        out.on_durable.append(on_done)
        write(self._log, out)
        return reply

    # ------------------------------------------------------------------------------------------------------ replay
    def replay(self, record: OffsetCommitRecord | OffsetTombstone) -> None:
        if isinstance(record, OffsetCommitRecord):
            if self._groups.group(record.group_id) is None:
                self._groups.get_or_create_simple_group(record.group_id)
            self._store(record)
        else:
            stored = self._built(record.group_id)
            if stored is None:
                return
            stored.pop((record.topic, record.partition), None)
            if not stored:
                del self._offsets[record.group_id]

    def load(self, loaded: Iterable[GroupOffsetRows]) -> None:
        """Replay the loaded committed offsets, given per group as rows (``GroupOffsetRows``) rather than records:
        what ``replay`` does for each ``OffsetCommitRecord``, with the group looked up once, and the group's
        ``OffsetAndMetadata`` built when it is first used (``_built``), not here: start-up with 1,000,000 offsets
        keeps their rows until then. The rows must not change afterwards."""
        offsets = self._offsets
        groups = self._groups
        for group_id, rows in loaded:
            if not rows:
                continue
            if groups.group(group_id) is None:
                groups.get_or_create_simple_group(group_id)
            if group_id in offsets:  # offsets replayed before the load: the loaded ones are applied after them
                self._built(group_id).update(_offsets_of(rows))  # type: ignore[union-attr]
            else:
                offsets[group_id] = rows

    def _built(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """The group's durable offsets (None: none), built from its loaded rows on first use (``load``)."""
        stored = self._offsets.get(group_id)
        if stored is None or type(stored) is dict:
            return stored
        built = self._offsets[group_id] = _offsets_of(stored)  # type: ignore[arg-type]
        return built

    def _store(self, record: OffsetCommitRecord) -> None:
        stored = self._offsets.get(record.group_id)
        if stored is None:
            stored = self._offsets[record.group_id] = {}
        elif type(stored) is not dict:
            stored = self._built(record.group_id)
        stored[(record.topic, record.partition)] = OffsetAndMetadata(  # type: ignore[index]
            offset=record.offset,
            leader_epoch=record.leader_epoch,
            metadata=record.metadata,
            commit_timestamp_ms=record.commit_timestamp_ms,
            expire_timestamp_ms=record.expire_timestamp_ms,
        )

    # ------------------------------------------------------------------------------------------------------- views
    def committed(self, group_id: str) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Read-only view of the durable offsets of a group (empty if none)."""
        stored = self._built(group_id)
        return _EMPTY if stored is None else MappingProxyType(stored)

    def pending(self, group_id: str) -> Collection[TopicPartition]:
        """Partitions of the group with a commit accepted but not yet durable."""
        inflight = self._inflight.get(group_id)
        return () if inflight is None else inflight.keys()

    def loaded_rows(self, group_id: str) -> Sequence[OffsetRow] | None:
        """The group's loaded rows while its offsets are not built yet (``load``), else None: for a reader that
        needs no ``OffsetAndMetadata`` (the lag seed). The same object as long as the group is not used."""
        stored = self._offsets.get(group_id)
        return None if stored is None or type(stored) is dict else stored  # type: ignore[return-value]

    def group_ids(self) -> Collection[str]:
        """Groups that have at least one durable offset."""
        return self._offsets.keys()


def _offsets_of(rows: Iterable[OffsetRow]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {
        (t, p): OffsetAndMetadata(o, epoch, meta, commit_ms, expire_ms)
        for t, p, o, epoch, meta, commit_ms, expire_ms in rows
    }


def _fetched(
    topic: str, partition: int, o: OffsetAndMetadata | None, inflight: Mapping[TopicPartition, int] | None
) -> FetchedOffset:
    if inflight is not None and (topic, partition) in inflight:
        return FetchedOffset(topic, partition, error=ErrorCode.unstable_offset_commit)
    if o is None:
        return FetchedOffset(topic, partition)
    return FetchedOffset(topic, partition, o.offset, o.leader_epoch, o.metadata, ErrorCode.none)


class AllOffsets(Collection[FetchedOffset]):
    """Every committed offset of a group as an OffsetFetch of everything (null topics) answers it, each entry built
    when it is read. Taking it copies the group's offsets (``dict.copy``, one C-level step: 200,000 offsets in a few
    milliseconds) so commits that land while the answer is encoded in slices do not change it; the per-entry work
    (about 2 us each) happens in the adapter's slices. Order: the order in which the partitions were first committed
    (Kafka answers in its map's order too; clients index the answer by topic and partition)."""

    __slots__ = ("_inflight", "_offsets")

    def __init__(
        self,
        stored: Mapping[TopicPartition, OffsetAndMetadata] | None,
        inflight: Mapping[TopicPartition, int] | None,
    ) -> None:
        self._offsets: dict[TopicPartition, OffsetAndMetadata] = dict(stored) if stored else {}
        self._inflight = dict(inflight) if inflight else None

    def __len__(self) -> int:
        return len(self._offsets)

    def __iter__(self) -> Iterator[FetchedOffset]:
        inflight = self._inflight
        for (topic, partition), committed in self._offsets.items():
            yield _fetched(topic, partition, committed, inflight)

    def __contains__(self, item: object) -> bool:
        return any(item == entry for entry in self)
