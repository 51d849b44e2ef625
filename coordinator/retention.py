"""Offset retention and group expiry (KIP-211; Kafka's cleanupGroupMetadata), run by a periodic keyed timer.

Every ``offsets.retention.check.interval.ms`` (timer key ``cleanup``) one pass looks at every group:

1. Its expiration condition (§9.3): a simple group (no protocol type) expires offsets by commit time; an Empty group
   with a protocol type by the time it became Empty (commit time if that is unknown); a Stable consumer group whose
   subscriptions are known expires only offsets of topics it is not subscribed to, by commit time; any other group
   expires nothing. An offset with an explicit expire timestamp (OffsetCommit v2-4 retention) expires at that time.
2. Expired offsets get an ``OffsetTombstone`` (cause EXPIRED). Offsets with a commit in flight are kept.
3. If every offset of the group went (or it had none) and the group is Empty, a ``GroupTombstone`` (cause EXPIRED)
   follows: an Empty group with no offsets disappears at the next pass whatever the retention.

A full scan per interval is what Kafka does; commits never scan. All records of a pass go in one append through
``coordinator.deletion``: expired groups go from memory at once (a JoinGroup that comes later creates a new
group), offsets once the tombstones are durable; a failed write restores the groups and the next pass retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from protocol.errors import ErrorCode

from .classic_groups import ClassicGroups
from .deletion import deletion
from .group import ClassicGroup, GroupState
from .offsets import GroupDirectory, OffsetAndMetadata, OffsetManager
from .records import GroupRemovalCause, OffsetRemovalCause, Record, new_group_tombstone, new_offset_tombstone
from .writes import write

log = logging.getLogger(__name__)

CLEANUP_TIMER_KEY = "cleanup"
EXPIRED = OffsetRemovalCause.EXPIRED

BaseTimestamp = Callable[[OffsetAndMetadata], int]


def _commit_time(o: OffsetAndMetadata) -> int:
    return o.commit_timestamp_ms


def expiration_base(group: ClassicGroup) -> BaseTimestamp | None:
    """Kafka's ClassicGroup.offsetExpirationCondition: the base timestamp of the retention rule, or None if the
    group's offsets do not expire in its current state."""
    if group.protocol_type is None:
        return _commit_time if group.state is not GroupState.DEAD else None
    if group.state is GroupState.EMPTY:
        became_empty = group.state_timestamp_ms
        if became_empty >= 0:
            return lambda _o: became_empty
        return _commit_time
    if group.state is GroupState.STABLE and group.uses_consumer_protocol() and group.subscribed_topics is not None:
        return _commit_time
    return None


def is_offset_expired(o: OffsetAndMetadata, base: BaseTimestamp, now_ms: int, retention_ms: int) -> bool:
    if o.expire_timestamp_ms is not None:
        return now_ms >= o.expire_timestamp_ms
    return now_ms - base(o) >= retention_ms


class RetentionCleaner:
    def __init__(self, shard: ClassicGroups, groups: GroupDirectory, offsets: OffsetManager) -> None:
        """``shard`` gives the configuration, clock, timer and log; ``groups`` the groups (the group-type seam)."""
        self._config = shard.config
        self._clock = shard.clock
        self._timer = shard.timer
        self._log = shard.log
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
            if group.state is GroupState.DEAD:
                continue
            group_id = group.group_id
            committed = self._offsets.committed(group_id)
            pending = self._offsets.pending(group_id)
            all_expired = True
            if committed:
                base = expiration_base(group)
                if base is None:
                    continue
                # Nothing is subscribed in an Empty group (its subscription set is empty).
                check_subscription = group.state is not GroupState.EMPTY
                subscribed: dict[str, bool] = {}
                for (topic, partition), o in committed.items():
                    if check_subscription:
                        is_subscribed = subscribed.get(topic)
                        if is_subscribed is None:
                            is_subscribed = subscribed[topic] = group.is_subscribed_to_topic(topic)
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
            if all_expired and not pending and group.state is GroupState.EMPTY:
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
