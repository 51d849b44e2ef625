"""Offsets reset planning: ``kafka-consumer-groups.sh --reset-offsets`` strategies, as a pure function over the
partitions' logs (``LogOffsets``: log start, log end = the high watermark, and the ListOffsets answer for a time).

As Kafka's tool does: to-earliest and to-latest are the log start and end offsets; to-current is the committed offset,
or the log end where there is none; to-offset is clamped into [log start, log end]; shift-by moves the committed
offset and clamps likewise, and refuses partitions with no committed offset (409: the request is well formed, the
group's offsets do not allow it); to-datetime and by-duration take the first offset whose batch timestamp is at or
after the instant (ListOffsets by timestamp, ``Broker.list_offset``: batch granularity), or the log end where every
message is older. from-file takes each partition's offset from the plan (``--from-file``, the CSV that ``--export``
writes) as it is; a partition named twice takes its last offset, as Kafka reads the file. A partition the broker does
not have is refused (404) by every strategy that needs its log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .models import (
    OffsetResetRequest,
    PartitionReset,
    ResetByDuration,
    ResetFromFile,
    ResetShiftBy,
    ResetToCurrent,
    ResetToDatetime,
    ResetToEarliest,
    ResetToLatest,
    ResetToOffset,
)

MAX_OFFSET = 2**63 - 1

TopicPartition = tuple[str, int]


class LogOffsets(NamedTuple):
    start: int  # the log start offset
    end: int  # the high watermark
    by_time: int | None = None  # to-datetime/by-duration: ListOffsets' offset for the instant; None when not found


class ResetError(Exception):
    """The request cannot be planned; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def select_partitions(
    req: OffsetResetRequest, committed: Mapping[TopicPartition, int], topic_partitions: Mapping[str, int]
) -> list[TopicPartition]:
    """The partitions a reset applies to (``--all-topics``, ``--topic t[:p,...]`` or the plan's), sorted."""
    if isinstance(req, ResetFromFile):
        planned: set[TopicPartition] = set()
        for o in req.offsets:
            count = topic_partitions.get(o.topic)
            if count is not None and o.partition >= count:
                raise ResetError(404, f"topic {o.topic!r} has {count} partitions; no partition {o.partition}")
            planned.add((o.topic, o.partition))
        return sorted(planned)
    if req.topics == "all":
        if not committed:
            raise ResetError(409, "the group has no committed offsets; name the topics to reset")
        return sorted(committed)
    selected: set[TopicPartition] = set()
    for sel in req.topics:
        count = topic_partitions.get(sel.topic)
        if sel.partitions is not None:
            if count is not None:
                bad = [p for p in sel.partitions if p >= count]
                if bad:
                    raise ResetError(404, f"topic {sel.topic!r} has {count} partitions; no partition {bad[0]}")
            selected.update((sel.topic, p) for p in sel.partitions)
        elif count is not None:
            selected.update((sel.topic, p) for p in range(count))
        else:
            known = [tp for tp in committed if tp[0] == sel.topic]
            if not known:
                raise ResetError(404, f"unknown topic {sel.topic!r}: not registered and never committed by the group")
            selected.update(known)
    return sorted(selected)


def plan_reset(
    req: OffsetResetRequest,
    partitions: list[TopicPartition],
    committed: Mapping[TopicPartition, int],
    logs: Mapping[TopicPartition, LogOffsets],
) -> list[PartitionReset]:
    """New offset of each partition (module docstring)."""
    out: list[PartitionReset] = []
    from_file = {(o.topic, o.partition): o.offset for o in req.offsets} if isinstance(req, ResetFromFile) else {}
    for tp in partitions:
        current = committed.get(tp)
        if isinstance(req, ResetFromFile):
            out.append(PartitionReset(topic=tp[0], partition=tp[1], current_offset=current, new_offset=from_file[tp]))
            continue
        if isinstance(req, ResetToCurrent) and current is not None:
            out.append(PartitionReset(topic=tp[0], partition=tp[1], current_offset=current, new_offset=current))
            continue
        log = logs.get(tp)
        if log is None:
            raise ResetError(404, f"partition {tp[0]}-{tp[1]} does not exist: its log offsets are unknown")
        match req:
            case ResetToEarliest():
                new = log.start
            case ResetToLatest() | ResetToCurrent():
                new = log.end
            case ResetToOffset():
                new = req.to_offset
            case ResetShiftBy():
                if current is None:
                    raise ResetError(
                        409, f"cannot shift offset for partition {tp[0]}-{tp[1]}: it has no committed offset"
                    )
                new = current + req.shift_by
            case ResetToDatetime() | ResetByDuration():
                new = log.by_time if log.by_time is not None else log.end
        new = min(max(new, log.start), log.end)
        out.append(PartitionReset(topic=tp[0], partition=tp[1], current_offset=current, new_offset=new))
    return out
