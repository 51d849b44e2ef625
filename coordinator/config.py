"""The core's configuration: Kafka's broker settings for the group coordinator, with Kafka's defaults.

Plain dataclass (the core does not depend on pydantic); ``daemon.settings`` builds it from the typed settings.
"""

from __future__ import annotations

from dataclasses import dataclass

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS, not configurable there


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2_147_483_647  # group.max.size
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offsets_retention_ms: int = 10_080 * 60_000  # offsets.retention.minutes (7 days)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4_096  # offset.metadata.max.bytes (Java String.length: UTF-16 units)
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions (coordinator shards)
