"""Burrow-style evaluation of consumer groups: is each group keeping up, slowing down, stalled, stopped or rewound?

LinkedIn's Burrow (``core/internal/evaluator/caching.go``, with the offset windows of
``core/internal/storage/inmemory.go``) judges a consumer without any threshold on the lag itself: it keeps, per group
and partition, a window of the last ``intervals`` commits (offset, commit time, and the lag at that commit: the log
end then minus the committed offset) and reads the trend. ``docs/consumer-status.md`` states the rules; in short, for a
partition whose current lag (log end now - last committed offset) is above ``allowed_lag``, in this order:

* **STOP** - no commit for longer than the window spans (now - last commit > last commit - first commit), unless the
  consumer was caught up recently (the log end was at or below its last offset within ``recent_zero_lag_ms``).
* **REWIND** - an offset in the window is lower than the one before it, and no later one got back to that offset.
* **STALL** - the lag was above ``allowed_lag`` at every commit of the window and the offset never moved.
* **WARN** - the lag was above ``allowed_lag`` at every commit and never went down from one commit to the next.
* **OK** - anything else (a partition with no lag now is always OK).

A group is the worst of its partitions: OK, WARN, or ERR for any STOP/STALL/REWIND; ``complete`` is the share of its
partitions whose window is full. Evaluation is on demand, with the log end of now, so a group that stops
committing while producers go on turns STOP, and one that catches up is OK again at the next evaluation.

``LagEvaluator`` is a ``runtime.record_stream.RecordListener``: it adds a durable ``OffsetCommitRecord`` to its window
(the lag measured with ``log_end(topic, partition)``, the broker's high watermark, when the commit becomes
durable) and forgets a partition at a durable ``OffsetTombstone`` and a whole group at a durable ``GroupTombstone``.
Memory: ``intervals`` entries per committed partition, nothing else per commit. It is pure: time comes from the
injected ``now_ms``, the log end from the injected callable; it runs on the event loop thread like the core.

Where this differs from Burrow, and why:

* Burrow reads ``__consumer_offsets`` and polls the brokers' log ends every ``offset-refresh`` (10 s), so the lag it
  stores with a commit is up to 10 s stale; here the log end is read when the commit is durable.
* Burrow's "consumer was caught up recently" looks at its ring of polled log ends; here it is the last time the
  evaluator saw the log end at or below the partition's last offset (at a commit or an evaluation). The log end
  only grows, so that is the same test on the observations made, and it costs one integer per partition.
* After a restart the daemon loads the committed offsets, not their history: ``seed`` starts each window with the
  current offset and an unknown lag (Burrow too has entries without a lag), and windows fill again as commits come.
* Burrow forgets a group whose last commit is older than ``expire-group`` (7 days); here a group's windows go when
  its offsets do (OffsetDelete, retention, DeleteGroups), which is what the coordinator itself keeps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from coordinator.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone, Record

__all__ = [
    "CommitSample",
    "GroupEvaluation",
    "GroupStatus",
    "LagEvaluator",
    "LagRules",
    "PartitionEvaluation",
    "PartitionStatus",
    "partition_status",
]

LogEnd = Callable[[str, int], int | None]  # (topic, partition) -> the log end offset now; None if unknown


class PartitionStatus(StrEnum):
    """Burrow's partition statuses (its numbering: OK 1, WARN 2, STOP 4, STALL 5, REWIND 6)."""

    OK = "OK"
    WARN = "WARN"
    STOP = "STOP"
    STALL = "STALL"
    REWIND = "REWIND"


class GroupStatus(StrEnum):
    """Burrow's group statuses: the worst partition, with STOP, STALL and REWIND reported as ERR."""

    NOTFOUND = "NOTFOUND"
    OK = "OK"
    WARN = "WARN"
    ERR = "ERR"


_GROUP_OF = {
    PartitionStatus.OK: GroupStatus.OK,
    PartitionStatus.WARN: GroupStatus.WARN,
    PartitionStatus.STOP: GroupStatus.ERR,
    PartitionStatus.STALL: GroupStatus.ERR,
    PartitionStatus.REWIND: GroupStatus.ERR,
}
_GROUP_RANK = {GroupStatus.NOTFOUND: 0, GroupStatus.OK: 1, GroupStatus.WARN: 2, GroupStatus.ERR: 3}


class CommitSample(NamedTuple):
    """One entry of a partition's window: the committed offset, when, and the lag then (None: unknown). A tuple:
    one is made per durable commit."""

    offset: int
    timestamp_ms: int
    lag: int | None


@dataclass(frozen=True, slots=True)
class LagRules:
    """Burrow's settings. ``intervals``: commits kept per partition (storage ``intervals``, 10). ``min_distance_ms``:
    a commit less than this after the previous one replaces it, keeping the previous time (``min-distance``, 0 = off).
    ``allowed_lag``: a lag at or below it counts as none (evaluator ``allowed-lag``, 0). ``minimum_complete``: a
    partition whose window is less full than this is OK (evaluator ``minimum-complete``, 0). ``recent_zero_lag_ms``:
    how recently a caught-up consumer is spared STOP (Burrow: ``intervals`` x ``offset-refresh`` = 100 s)."""

    intervals: int = 10
    min_distance_ms: int = 0
    allowed_lag: int = 0
    minimum_complete: float = 0.0
    recent_zero_lag_ms: int = 100_000

    def __post_init__(self) -> None:
        if self.intervals < 1:
            raise ValueError("intervals must be at least 1")


class _Window:
    """A partition's last ``intervals`` commits, oldest first, and the last time its log end was seen at or below
    the last committed offset."""

    __slots__ = ("caught_up_ms", "samples")

    def __init__(self, intervals: int) -> None:
        self.samples: deque[CommitSample] = deque(maxlen=intervals)
        self.caught_up_ms: int | None = None


class PartitionEvaluation(NamedTuple):
    topic: str
    partition: int
    status: PartitionStatus
    start: CommitSample | None  # the oldest commit of the window
    end: CommitSample | None  # the newest
    current_lag: int  # log end now - last committed offset (0 when the log end is unknown or behind)
    complete: float  # commits in the window / intervals


@dataclass(frozen=True, slots=True)
class GroupEvaluation:
    group_id: str
    status: GroupStatus
    complete: float  # share of partitions whose window is full (0 when there is none)
    partitions: tuple[PartitionEvaluation, ...]  # every evaluated partition, by topic and partition
    maxlag: PartitionEvaluation | None  # the partition with the largest current lag
    totallag: int
    evaluated_at_ms: int

    def problems(self) -> tuple[PartitionEvaluation, ...]:
        """The partitions that are not OK (what Burrow's status endpoint lists)."""
        return tuple(p for p in self.partitions if p.status is not PartitionStatus.OK)


# --------------------------------------------------------------------------------------------------------- rules


def partition_status(
    window: Sequence[CommitSample], current_lag: int, now_ms: int, rules: LagRules, recently_caught_up: bool
) -> PartitionStatus:
    """Burrow's rules for one partition, most severe first (``docs/consumer-status.md``), in one pass over the
    window after the STOP test."""
    allowed = rules.allowed_lag
    if current_lag <= allowed:
        return PartitionStatus.OK
    if not window:
        return PartitionStatus.OK
    first, last = window[0], window[-1]
    # Stopped: silent for longer than the window spans. Checked first: old history says nothing about a consumer
    # that is gone.
    if now_ms - last.timestamp_ms > last.timestamp_ms - first.timestamp_ms and not recently_caught_up:
        return PartitionStatus.STOP
    rewound_from: int | None = None  # the offset before the window's first rewind
    recovered = caught_up = moved = False
    growing = True  # the lag never went down from one commit (with a known lag) to the next
    previous_offset = first.offset
    previous_lag: int | None = None
    for offset, _ts, lag in window:
        if rewound_from is None:
            if offset < previous_offset:
                rewound_from = previous_offset
        elif offset >= rewound_from:
            recovered = True
        if offset != first.offset:
            moved = True
        if lag is not None:
            if lag <= allowed:
                caught_up = True
            if previous_lag is not None and lag < previous_lag:
                growing = False
            previous_lag = lag
        previous_offset = offset
    # Rewound and not back where it was (a rebalance may commit a slightly older offset: that passes quickly).
    if rewound_from is not None and not recovered:
        return PartitionStatus.REWIND
    # Caught up at some commit of the window: OK whatever else it shows.
    if caught_up:
        return PartitionStatus.OK
    if not moved:
        return PartitionStatus.STALL
    return PartitionStatus.WARN if growing else PartitionStatus.OK


# ----------------------------------------------------------------------------------------------------- evaluator


class LagEvaluator:
    """Commit windows per group and partition, fed by the record stream; ``evaluate(group)`` applies the rules."""

    durable_types: frozenset[type] = frozenset({OffsetCommitRecord, OffsetTombstone, GroupTombstone})

    def __init__(self, now_ms: Callable[[], int], log_end: LogEnd, rules: LagRules | None = None) -> None:
        self._now_ms = now_ms
        self._log_end = log_end
        self.rules = rules if rules is not None else LagRules()
        self._groups: dict[str, dict[tuple[str, int], _Window]] = {}

    # ----------------------------------------------------------------------------------------- record stream

    def on_append(self, records: Sequence[Record]) -> None:
        """Nothing: a commit counts once durable, and a tombstone may still fail (the group is then put back)."""

    def on_durable(self, records: Sequence[Record]) -> None:
        for rec in records:
            cls = rec.__class__
            if cls is OffsetCommitRecord:
                self._commit(rec.group_id, rec.topic, rec.partition, rec.offset, rec.commit_timestamp_ms)  # type: ignore[union-attr]
            elif cls is OffsetTombstone:
                windows = self._groups.get(rec.group_id)
                if windows is not None:
                    windows.pop((rec.topic, rec.partition), None)  # type: ignore[union-attr]
                    if not windows:
                        del self._groups[rec.group_id]
            elif cls is GroupTombstone:
                self._groups.pop(rec.group_id, None)

    def seed(self, committed: Iterable[tuple[str, str, int, int, int]]) -> None:
        """Start windows from loaded offsets ``(group, topic, partition, offset, commit time)``, lag unknown: the
        history of commits before a restart is not loaded (see the module docstring)."""
        now = self._now_ms()
        ends: dict[tuple[str, int], int | None] = {}  # log end per partition, looked up once per call
        groups = self._groups
        intervals = self.rules.intervals
        for group_id, topic, partition, offset, timestamp_ms in committed:
            windows = groups.get(group_id)
            if windows is None:
                windows = groups[group_id] = {}
            key = (topic, partition)
            if key in windows:
                continue
            w = windows[key] = _Window(intervals)
            w.samples.append(CommitSample(offset, timestamp_ms, None))
            if key in ends:
                end = ends[key]
            else:
                end = ends[key] = self._log_end(topic, partition)
            if end is not None and end <= offset:
                w.caught_up_ms = now

    def _commit(self, group_id: str, topic: str, partition: int, offset: int, timestamp_ms: int) -> None:
        windows = self._groups.get(group_id)
        if windows is None:
            windows = self._groups[group_id] = {}
        w = windows.get((topic, partition))
        if w is None:
            w = windows[(topic, partition)] = _Window(self.rules.intervals)
        end = self._log_end(topic, partition)
        lag = None if end is None else (end - offset if end > offset else 0)
        samples = w.samples
        if samples:
            prev = samples[-1]
            if offset < prev.offset:
                w.caught_up_ms = None  # an observation made for a higher offset says nothing about this one
            if timestamp_ms - prev.timestamp_ms < self.rules.min_distance_ms:
                samples[-1] = CommitSample(offset, prev.timestamp_ms, lag)  # Burrow keeps the earlier time
                if lag == 0:
                    w.caught_up_ms = timestamp_ms
                return
        samples.append(CommitSample(offset, timestamp_ms, lag))
        if lag == 0:
            w.caught_up_ms = timestamp_ms

    # ----------------------------------------------------------------------------------------------- reading

    def knows(self, group_id: str) -> bool:
        return group_id in self._groups

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def partitions(self) -> int:
        """Partitions with a window (all groups)."""
        return sum(len(w) for w in self._groups.values())

    def evaluate(self, group_id: str) -> GroupEvaluation:
        """The group's status now (NOTFOUND when it has no window: no durable commit seen or seeded)."""
        now = self._now_ms()
        windows = self._groups.get(group_id)
        if not windows:
            return GroupEvaluation(group_id, GroupStatus.NOTFOUND, 0.0, (), None, 0, now)
        rules = self.rules
        status = GroupStatus.OK
        evaluated: list[PartitionEvaluation] = []
        maxlag: PartitionEvaluation | None = None
        total = full = 0
        for (topic, partition), w in sorted(windows.items()):
            samples = w.samples
            last = samples[-1]
            end = self._log_end(topic, partition)
            current = 0 if end is None else max(0, end - last.offset)
            if end is not None and end <= last.offset:
                w.caught_up_ms = now
            complete = len(samples) / rules.intervals
            if complete >= rules.minimum_complete:
                recent = w.caught_up_ms is not None and now - w.caught_up_ms <= rules.recent_zero_lag_ms
                pstatus = partition_status(samples, current, now, rules, recent)
            else:
                pstatus = PartitionStatus.OK
            p = PartitionEvaluation(topic, partition, pstatus, samples[0], last, current, complete)
            evaluated.append(p)
            total += current
            full += complete >= 1.0
            if maxlag is None or current > maxlag.current_lag:
                maxlag = p
            worst = _GROUP_OF[pstatus]
            if _GROUP_RANK[worst] > _GROUP_RANK[status]:
                status = worst
        return GroupEvaluation(group_id, status, full / len(evaluated), tuple(evaluated), maxlag, total, now)
