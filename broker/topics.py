"""The topics this coordinator pretends to host.

The coordinator stores no messages, but clients will not join a group (librdkafka) or start (aiokafka) unless the
topics they subscribe to exist in Metadata. So it keeps a registry of topic name -> partition count, every topic led
by this node and always empty. Topics come from the settings / ``--topic NAME:PARTITIONS`` and, like Kafka with
``auto.create.topics.enable=true``, are created with ``num.partitions`` on first mention in a Metadata request -
within limits (``AutoCreateLimits``), so that no client can fill the registry with junk: a name must be a legal Kafka
topic name, one request creates at most ``max_per_request``, each client host at most ``per_second`` on average
(token bucket of ``burst``), and nothing is auto-created beyond ``max_topics``.

Topic ids are ``uuid5`` of the name: stable across restarts (a client caching an id sees the same one), and never
the null uuid.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("broker.topics")

_TOPIC_NAMESPACE = uuid.UUID("6b1c6c9e-3f0e-5d59-9d7c-6b6f6e1a1f00")
# Kafka's legal topic names (Topic.java): ASCII letters, digits, '.', '_', '-', at most 249 characters.
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# Why auto-creation refused a topic (the ``reason`` label of kgc_topics_auto_create_refused_total).
REFUSALS = ("invalid_name", "max_topics", "per_request", "rate")
# Kafka's internal topic of committed offsets and group metadata: reserved, never auto-created as a plain topic, never
# produced to by a client (Topic.isInternal). Rendered by the daemon from the coordinator's records.
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID


def topic_id_for(name: str) -> uuid.UUID:
    return uuid.uuid5(_TOPIC_NAMESPACE, name)


def is_legal_topic_name(name: str) -> bool:
    return _LEGAL.fullmatch(name) is not None and name not in (".", "..")  # fullmatch: "$" would allow a "\n"


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


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
    if is_internal_topic(name):
        raise ValueError(f"bad topic spec {spec!r}: {name} is internal (offsets.topic.num.partitions sizes it)")
    return name, partitions


@dataclass(frozen=True, slots=True)
class AutoCreateLimits:
    """How much Metadata may auto-create (``[topics]`` settings; 0 switches a limit off).

    Kafka has no such limits for auto-creation itself (KIP-599's controller mutation quota throttles CreateTopics per
    principal, and KRaft answers a topic it has not created yet with UNKNOWN_TOPIC_OR_PARTITION). A topic refused by
    a limit gets exactly that answer: the client sees a topic that does not exist (yet) and asks again later.
    """

    max_per_request: int = 100  # topics one Metadata request may create
    per_second: float = 10.0  # topics each client host may create per second, on average ...
    burst: int = 1_000  # ... after a burst of this many
    max_topics: int = 10_000  # no auto-creation once this many topics exist (configured topics are never refused)


_MAX_BUCKETS = 10_000  # client hosts with an auto-creation bucket; full buckets are dropped beyond it


class TopicRegistry:
    """Topic name -> ``Topic``. ``generation`` changes whenever a topic is created, grows or is removed, and
    ``on_change`` listeners hear of each such topic (a removed one is no longer in ``get``; ``servers.kafka.metadata``
    caches encoded entries and drops them there)."""

    def __init__(
        self,
        *,
        auto_create: bool = True,
        default_partitions: int = 1,
        limits: AutoCreateLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        self.limits = limits if limits is not None else AutoCreateLimits()
        self._clock = clock
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._sorted: tuple[Topic, ...] | None = None
        self._listeners: list[Callable[[Topic], None]] = []
        self._buckets: dict[str, tuple[float, float]] = {}  # client host -> (tokens, at)
        self.generation = 0
        self.auto_created = 0
        self.refused: dict[str, int] = dict.fromkeys(REFUSALS, 0)

    @classmethod
    def from_settings(cls, settings: Any) -> TopicRegistry:
        """From ``daemon.settings.TopicSettings`` (auto-creation, its limits, and the initial topics)."""
        registry = cls(
            auto_create=settings.auto_create,
            default_partitions=settings.num_partitions,
            limits=AutoCreateLimits(
                max_per_request=settings.auto_create_max_per_request,
                per_second=settings.auto_create_per_second,
                burst=settings.auto_create_burst,
                max_topics=settings.auto_create_max_topics,
            ),
        )
        for name, partitions in settings.initial.items():
            registry.add(name, partitions)
        return registry

    def on_change(self, listener: Callable[[Topic], None]) -> None:
        self._listeners.append(listener)

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
        self._sorted = None
        self.generation += 1
        for listener in self._listeners:
            listener(topic)
        if existing is None:
            log.info("topic created name=%s partitions=%d", name, partitions, extra={"throttle": ("topic_created",)})
        return topic

    def remove(self, name: str) -> Topic | None:
        """Delete a topic (DeleteTopics): gone from Metadata at once; listeners hear of it (``get`` is None then)."""
        topic = self._by_name.pop(name, None)
        if topic is None:
            return None
        self._by_id.pop(topic.topic_id, None)
        self._sorted = None
        self.generation += 1
        for listener in self._listeners:
            listener(topic)
        log.info("topic deleted name=%s partitions=%d", name, topic.partitions)
        return topic

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def maybe_auto_create(
        self, name: str, allowed: bool = True, *, client: str = "", created_in_request: int = 0
    ) -> Topic | None:
        """The topic, created with ``num.partitions`` if auto-creation is on, the request allows it, the name is
        legal and no limit is reached (``created_in_request``: how many this request has created so far)."""
        topic = self._by_name.get(name)
        if topic is not None or not (self.auto_create and allowed) or is_internal_topic(name):
            return topic
        refusal = self._refusal(name, client, created_in_request)
        if refusal is not None:
            self.refused[refusal] += 1
            return None
        self.auto_created += 1
        return self.add(name, self.default_partitions)

    def _refusal(self, name: str, client: str, created_in_request: int) -> str | None:
        """Why ``name`` may not be auto-created now (a key of ``refused``), or None; takes a token when it may."""
        if not is_legal_topic_name(name):
            return "invalid_name"
        limits = self.limits
        if limits.max_topics and len(self._by_name) >= limits.max_topics:
            return "max_topics"
        if limits.max_per_request and created_in_request >= limits.max_per_request:
            return "per_request"
        if limits.per_second <= 0:
            return None
        now = self._clock()
        tokens, at = self._buckets.get(client, (float(limits.burst), now))
        tokens = min(float(limits.burst), tokens + (now - at) * limits.per_second)
        if tokens < 1.0:
            self._buckets[client] = (tokens, now)
            return "rate"
        if len(self._buckets) >= _MAX_BUCKETS and client not in self._buckets:
            self._drop_full_buckets(now)
        self._buckets[client] = (tokens - 1.0, now)
        return None

    def _drop_full_buckets(self, now: float) -> None:
        limits = self.limits
        full = [c for c, (t, at) in self._buckets.items() if t + (now - at) * limits.per_second >= limits.burst]
        for client in full:
            del self._buckets[client]

    def has_partition(self, name: str, partition: int) -> bool:
        topic = self._by_name.get(name)
        return topic is not None and 0 <= partition < topic.partitions

    def all(self) -> tuple[Topic, ...]:
        """Every topic, by name (sorted once per change, not per call: Metadata for every topic asks often)."""
        ordered = self._sorted
        if ordered is None:
            ordered = self._sorted = tuple(sorted(self._by_name.values(), key=_name))
        return ordered

    def __len__(self) -> int:
        return len(self._by_name)


def _name(topic: Topic) -> str:
    return topic.name
