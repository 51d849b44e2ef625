"""Offsets reset planning: ``kafka-consumer-groups.sh --reset-offsets`` strategies, as a pure function.

This service stores no messages, so its ListOffsets answers 0 for both the earliest and the latest offset of every
partition: to-earliest and to-latest resolve to 0, and so does to-current for a partition with no committed offset
(Kafka uses the log end there). to-offset is taken as given (Kafka clamps it into [log start, log end], which here
would always give 0). to-datetime and by-duration cannot look up message timestamps either; they resolve to the
offset the group had committed at that instant (from the commit log), or 0 where it had none - "put the group back
where it was at that time". shift-by moves the committed offset and, like Kafka, refuses partitions with none
(409: the request is well formed, the group's offsets do not allow it). from-file takes each partition's offset from
the plan (``--from-file``, the CSV that ``--export`` writes); a partition named twice takes its last offset, as Kafka
reads the file.
"""

from __future__ import annotations

from collections.abc import Mapping

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

EARLIEST = 0
LATEST = 0  # no messages are stored: the log end is 0 too
MAX_OFFSET = 2**63 - 1

TopicPartition = tuple[str, int]


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
    as_of: Mapping[TopicPartition, int] | None = None,
) -> list[PartitionReset]:
    """New offset of each partition. ``as_of`` is the committed offsets at the to-datetime/by-duration instant."""
    out: list[PartitionReset] = []
    from_file = {(o.topic, o.partition): o.offset for o in req.offsets} if isinstance(req, ResetFromFile) else {}
    for tp in partitions:
        current = committed.get(tp)
        match req:
            case ResetToEarliest():
                new = EARLIEST
            case ResetToLatest():
                new = LATEST
            case ResetToCurrent():
                new = current if current is not None else LATEST
            case ResetToOffset():
                new = req.to_offset
            case ResetShiftBy():
                if current is None:
                    raise ResetError(
                        409, f"cannot shift offset for partition {tp[0]}-{tp[1]}: it has no committed offset"
                    )
                new = current + req.shift_by
            case ResetToDatetime() | ResetByDuration():
                new = (as_of or {}).get(tp, EARLIEST)
            case ResetFromFile():
                new = from_file[tp]
        out.append(
            PartitionReset(
                topic=tp[0], partition=tp[1], current_offset=current, new_offset=min(max(new, EARLIEST), MAX_OFFSET)
            )
        )
    return out
