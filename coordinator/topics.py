"""The topics this coordinator pretends to host.

The coordinator stores no messages, but clients will not join a group (librdkafka) or start (aiokafka) unless the
topics they subscribe to exist in Metadata. So it keeps a registry of topic name -> partition count, every topic led
by this node and always empty. Topics come from the settings / ``--topic NAME:PARTITIONS`` and, like Kafka with
``auto.create.topics.enable=true``, are created with ``num.partitions`` on first mention in a Metadata request.

Topic ids are ``uuid5`` of the name: stable across restarts (a client caching an id sees the same one), and never
the null uuid.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass

log = logging.getLogger("coordinator.topics")

_TOPIC_NAMESPACE = uuid.UUID("6b1c6c9e-3f0e-5d59-9d7c-6b6f6e1a1f00")
# Kafka's legal topic names (Topic.java): ASCII letters, digits, '.', '_', '-', at most 249 characters.
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID


def topic_id_for(name: str) -> uuid.UUID:
    return uuid.uuid5(_TOPIC_NAMESPACE, name)


def is_legal_topic_name(name: str) -> bool:
    return bool(_LEGAL.match(name)) and name not in (".", "..")


def parse_topic_spec(spec: str) -> tuple[str, int]:
    """``NAME:PARTITIONS`` (``NAME`` alone means one partition)."""
    name, sep, count = spec.rpartition(":")
    if not sep:
        name, count = spec, "1"
    try:
        partitions = int(count)
    except ValueError:
        raise ValueError(f"bad topic spec {spec!r}: expected NAME:PARTITIONS") from None
    if partitions < 1:
        raise ValueError(f"bad topic spec {spec!r}: partitions must be >= 1")
    if not is_legal_topic_name(name):
        raise ValueError(f"bad topic spec {spec!r}: illegal topic name")
    return name, partitions


class TopicRegistry:
    def __init__(self, *, auto_create: bool = True, default_partitions: int = 1) -> None:
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    def add(self, name: str, partitions: int) -> Topic:
        """Create or resize (grow only, like Kafka) a topic."""
        if not is_legal_topic_name(name):
            raise ValueError(f"illegal topic name {name!r}")
        if partitions < 1:
            raise ValueError(f"topic {name!r}: partitions must be >= 1")
        existing = self._by_name.get(name)
        if existing is not None and existing.partitions >= partitions:
            return existing
        topic = Topic(name, partitions, topic_id_for(name))
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        if existing is None:
            log.info("topic created name=%s partitions=%d", name, partitions)
        return topic

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def maybe_auto_create(self, name: str, allowed: bool = True) -> Topic | None:
        """The topic, created with ``num.partitions`` if auto-creation is on (and the request allows it)."""
        topic = self._by_name.get(name)
        if topic is None and self.auto_create and allowed and is_legal_topic_name(name):
            topic = self.add(name, self.default_partitions)
        return topic

    def has_partition(self, name: str, partition: int) -> bool:
        topic = self._by_name.get(name)
        return topic is not None and 0 <= partition < topic.partitions

    def all(self) -> list[Topic]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    def __len__(self) -> int:
        return len(self._by_name)
