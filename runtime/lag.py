"""Consumer lag: one pure computation that every view uses (HTTP API, dashboard, CLI, ``/metrics``), so they agree by
construction.

For each partition of a group - every partition it has committed an offset for, and every partition its live
``consumer`` members are assigned (kafka-consumer-groups.sh lists the same set) - the view holds:

* ``committed_offset``: the group's committed offset (None when it has none: Kafka's tool prints ``-``);
* ``log_start_offset`` and ``log_end_offset``: the partition's log start and high watermark (the end of what is
  durable, what consumers can read: the "LOG-END-OFFSET" of kafka-consumer-groups.sh); None for a partition the
  broker does not know;
* ``lag``: ``log_end_offset - committed_offset``, never negative; None without a commit (Kafka prints ``-``);
* ``lag_ms``: lag in time, as kafka-lag-exporter and WarpStream define it: ``now`` minus the broker's append time of
  the first message the group has not consumed (the message at the committed offset, or the first one kept when
  the committed offset is below the log start); 0 when the group is caught up, None without a commit. Every record of
  a batch shares the batch's append time (``BatchAppended.timestamp_ms``), which the broker's batch index keeps, so
  the lookup is one bisection (``Partition.append_time_at``: O(log batches)), never a scan;
* the owning member (member id, client id, client host) from the group's current assignment, None when nobody owns
  the partition.

Nothing here runs on the commit or heartbeat path: views are computed when asked (an HTTP request, a scrape).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from coordinator.group import CONSUMER_PROTOCOL_TYPE
from protocol.consumer_protocol import assignment_partitions

__all__ = ["GroupLag", "LogView", "PartitionLag", "PartitionLog", "group_lag", "group_lags", "partition_owners"]

TopicPartition = tuple[str, int]


class PartitionLog(Protocol):
    """One partition of the broker (``broker.partitions.Partition``)."""

    @property
    def log_start(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def append_time_at(self, offset: int) -> int | None: ...


class LogView(Protocol):
    """The broker (``broker.partitions.Broker``): a registered partition, or None."""

    def partition(self, topic: str, index: int) -> Any: ...  # PartitionLog | None


class CommittedOffset(Protocol):
    @property
    def offset(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int | None
    log_start_offset: int | None
    log_end_offset: int | None
    lag: int | None
    lag_ms: int | None
    member_id: str | None = None
    client_id: str | None = None
    host: str | None = None


@dataclass(frozen=True, slots=True)
class GroupLag:
    group_id: str
    state: str | None  # the group's state name (None: no live group, only offsets)
    now_ms: int
    partitions: tuple[PartitionLag, ...]  # by (topic, partition)

    @property
    def total_lag(self) -> int:
        """The sum of the partitions' lag in messages (those without a commit count nothing)."""
        return sum(p.lag for p in self.partitions if p.lag is not None)

    @property
    def max_lag(self) -> int | None:
        lags = [p.lag for p in self.partitions if p.lag is not None]
        return max(lags) if lags else None

    @property
    def max_lag_ms(self) -> int | None:
        lags = [p.lag_ms for p in self.partitions if p.lag_ms is not None]
        return max(lags) if lags else None

    def topic_lags(self) -> dict[str, int]:
        """Lag in messages summed per topic (kafka-lag-exporter's ``group_topic_sum_lag``)."""
        out: dict[str, int] = {}
        for p in self.partitions:
            out[p.topic] = out.get(p.topic, 0) + (p.lag or 0)
        return out


def partition_owners(group: Any) -> dict[TopicPartition, Any]:
    """(topic, partition) -> the member of a ``consumer`` group the partition is assigned to now (its assignment
    bytes decoded; undecodable ones skipped: they are a client's bytes). Empty for other protocol types."""
    if group is None or getattr(group, "protocol_type", None) != CONSUMER_PROTOCOL_TYPE:
        return {}
    owners: dict[TopicPartition, Any] = {}
    for member in group.members.values():
        try:
            assigned = assignment_partitions(member.assignment)
        except Exception:  # a client's bytes: not ours to trust
            continue
        for topic, partitions in assigned.items():
            for partition in partitions:
                owners[(topic, partition)] = member
    return owners


def partition_lag(
    topic: str, partition: int, committed: int | None, log: PartitionLog | None, now_ms: int, owner: Any = None
) -> PartitionLag:
    """One partition's lag (module docstring)."""
    start = end = lag = lag_ms = None
    if log is not None:
        start, end = log.log_start, log.high_watermark
        if committed is not None:
            lag = max(0, end - committed)
            if lag == 0:
                lag_ms = 0
            else:
                appended = log.append_time_at(max(committed, start))
                lag_ms = max(0, now_ms - appended) if appended is not None and appended >= 0 else None
    if owner is None:
        return PartitionLag(topic, partition, committed, start, end, lag, lag_ms)
    return PartitionLag(
        topic, partition, committed, start, end, lag, lag_ms, owner.member_id, owner.client_id, owner.client_host
    )


def group_lag(
    group_id: str,
    committed: Mapping[TopicPartition, CommittedOffset],
    group: Any,
    log: LogView,
    now_ms: int,
) -> GroupLag:
    """The lag of every partition the group committed or is assigned (``group``: its live group or None)."""
    owners = partition_owners(group)
    rows = []
    for topic, partition in sorted(set(committed) | set(owners)):
        stored = committed.get((topic, partition))
        rows.append(
            partition_lag(
                topic,
                partition,
                stored.offset if stored is not None else None,
                log.partition(topic, partition),
                now_ms,
                owners.get((topic, partition)),
            )
        )
    state = getattr(getattr(group, "state", None), "value", None)
    return GroupLag(group_id, state, now_ms, tuple(rows))


def group_lags(groups: Iterable[Any], committed_of: Any, log: LogView, now_ms: int) -> Iterator[GroupLag]:
    """``group_lag`` of each group (``committed_of(group_id)``: its committed offsets), in the order given."""
    for group in groups:
        yield group_lag(group.group_id, committed_of(group.group_id), group, log, now_ms)
