"""Log retention: which whole batches of a partition ``retention.ms`` and ``retention.bytes`` delete.

Kafka deletes whole segments, oldest first, while a segment breaches a limit (``UnifiedLog.deleteOldSegments``):

* time - a segment whose largest timestamp is more than ``retention.ms`` old (``-1``: never);
* size - while the partition is larger than ``retention.bytes`` by at least the oldest segment's size (so what is
  left is never below the limit; negative: no limit);

and never beyond the high watermark. We keep no segments, so a batch plays a segment's part: the same rules applied
to the batch index (its max timestamp and size). A pass costs O(partitions + batches deleted): both scans stop at the
first batch that stays, and the partition's size is a running total (``Partition.size_bytes``). The batches indexed
are the durable ones, all below the high watermark; appends in flight are not in the index and are never touched.

``Broker.run_retention`` (below, via ``retention_moves``) appends one ``LogStartAdvanced`` per partition that moves,
in one append; storage deletes the rows below each new log start in the same transaction.
"""

from __future__ import annotations

from .configs import TopicConfig
from .partitions import Broker, Partition
from .topics import is_internal_topic

__all__ = ["retention_moves", "retention_start", "run_retention"]


def retention_start(p: Partition, config: TopicConfig, now_ms: int) -> int | None:
    """The new log start of ``p`` under ``config`` at ``now_ms`` (the end of the last batch to delete), or None
    when nothing is to be deleted (or the move is already asked for)."""
    n = len(p.bases)
    drop = 0
    if config.retention_ms >= 0:
        oldest_kept = now_ms - config.retention_ms
        stamps = p.max_timestamps
        while drop < n and stamps[drop] < oldest_kept:
            drop += 1
    if config.retention_bytes >= 0:
        excess = p.size_bytes - config.retention_bytes
        sizes = p.sizes
        by_size = 0
        while by_size < n and excess - sizes[by_size] >= 0:
            excess -= sizes[by_size]
            by_size += 1
        drop = max(drop, by_size)
    if drop == 0:
        return None
    start = p.lasts[drop - 1] + 1
    return start if start > p.pending_start else None


def retention_moves(broker: Broker, now_ms: int) -> list[tuple[Partition, int]]:
    """(partition, new log start) for every partition retention deletes from now."""
    moves = []
    for p in broker.partitions():
        if not p.bases or is_internal_topic(p.topic):  # __consumer_offsets is compacted (broker.offsets_topic)
            continue
        start = retention_start(p, broker.config(p.topic), now_ms)
        if start is not None:
            moves.append((p, start))
    return moves


def run_retention(broker: Broker) -> int:
    """One retention pass at the broker's time: returns the number of partitions whose log start moves."""
    moves = retention_moves(broker, broker.now_ms())
    if moves:
        broker.advance_log_start(moves)
    return len(moves)
