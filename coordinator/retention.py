"""Offset retention and group expiry (KIP-211; Kafka's cleanupGroupMetadata), run by a periodic keyed timer.

Every ``offsets.retention.check.interval.ms`` (timer key ``cleanup``) one pass looks at every group:

1. Its expiration condition (§9.3), which the group's type gives (``Group.offset_expiration_base``; the classic one:
   a simple group (no protocol type) expires offsets by commit time; an Empty group with a protocol type by the time
   it became Empty (commit time if that is unknown); a Stable consumer group whose subscriptions are known expires
   only offsets of topics it is not subscribed to (``Group.is_subscribed_to``), by commit time; any other group
   expires nothing). An offset with an explicit expire timestamp (OffsetCommit v2-4 retention) expires at that time.
2. Expired offsets get an ``OffsetTombstone`` (cause EXPIRED). Offsets with a commit in flight are kept.
3. If every offset of the group went (or it had none) and the group is Empty (``Group.is_empty``), a
   ``GroupTombstone`` (cause EXPIRED) follows: an Empty group with no offsets disappears at the next pass whatever
   the retention.

A full scan per interval is what Kafka does; commits never scan. All records of a pass go in one append through
``coordinator.deletion``: expired groups go from memory at once (a JoinGroup that comes later creates a new
group), offsets once the tombstones are durable; a failed write restores the groups and the next pass retries.
"""

from __future__ import annotations

import logging
from functools import partial

from protocol.errors import ErrorCode

from .clock import Clock, Timer
from .config import GroupConfig
from .deletion import deletion
from .group_type import BaseTimestamp, GroupDirectory
from .offsets import OffsetAndMetadata, OffsetManager
from .record_log import RecordLog
from .records import GroupRemovalCause, OffsetRemovalCause, Record, new_group_tombstone, new_offset_tombstone
from .writes import write

log = logging.getLogger(__name__)

CLEANUP_TIMER_KEY = "cleanup"
EXPIRED = OffsetRemovalCause.EXPIRED


def is_offset_expired(o: OffsetAndMetadata, base: BaseTimestamp, now_ms: int, retention_ms: int) -> bool:
    if o.expire_timestamp_ms is not None:
        return now_ms >= o.expire_timestamp_ms
    return now_ms - base(o) >= retention_ms


class RetentionCleaner:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        timer: Timer,
        log: RecordLog,
        groups: GroupDirectory,
        offsets: OffsetManager,
    ) -> None:
        """``groups`` are the groups of every type (the group-type seam)."""
        self._config = config
        self._clock = clock
        self._timer = timer
        self._log = log
        self._groups = groups
        self._offsets = offsets

    def schedule(self) -> None:
        """Arm the periodic pass (idempotent: scheduling the key again replaces it)."""
        self._timer.schedule(CLEANUP_TIMER_KEY, self._config.offsets_retention_check_interval_ms, self._on_timer)

    def cancel(self) -> None:
        self._timer.cancel(CLEANUP_TIMER_KEY)

    def _on_timer(self) -> None:
        self.schedule()  # first, so that a failing pass does not stop the task
        self.run_once()

    def run_once(self) -> list[Record]:
        """One cleanup pass. Returns the records appended (applied once durable)."""
        now = self._clock.now_ms()
        retention = self._config.offsets_retention_ms
        records: list[Record] = []
        for group in list(self._groups.all_groups()):
            group_id = group.group_id
            committed = self._offsets.committed(group_id)
            pending = self._offsets.pending(group_id)
            all_expired = True
            if committed:
                base = group.offset_expiration_base()
                if base is None:  # a Dead group's offsets never expire either
                    continue
                subscribed: dict[str, bool] = {}
                for (topic, partition), o in committed.items():
                    is_subscribed = subscribed.get(topic)
                    if is_subscribed is None:
                        is_subscribed = subscribed[topic] = group.is_subscribed_to(topic)
                    if is_subscribed:
                        all_expired = False
                        continue
                    if (topic, partition) not in pending and is_offset_expired(o, base, now, retention):
                        records.append(
                            new_offset_tombstone(
                                group_id, topic, partition, cause=OffsetRemovalCause.EXPIRED, now_ms=now
                            )
                        )
                    else:
                        all_expired = False
            if all_expired and not pending and group.is_empty():
                records.append(new_group_tombstone(group_id, cause=GroupRemovalCause.EXPIRED, now_ms=now))
        if records:
            write(self._log, deletion(self._groups, self._offsets, records, partial(self._on_written, records)))
        return records

    @staticmethod
    def _on_written(records: list[Record], err: ErrorCode | None) -> None:
        if err is not None:
            log.warning(
                "retention cleanup write of %d records failed: %s (retried next pass)",
                len(records),
                err.name,
                extra={"throttle": ("write-failed", "retention")},
            )
