"""The topic admin APIs' rules: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DeleteRecords and OffsetForLeaderEpoch, version-free, on the ``Broker``.

Each function checks every entry as Kafka's controller / replica manager does (the errors below), changes the
broker, and calls ``on_done`` with one result per entry, in request order, once what it changed is durable (a write
that fails answers KAFKA_STORAGE_ERROR). The Kafka adapters (``servers.kafka.topics_admin``) only translate.

Kafka's errors, per entry:

* CreateTopics - a name twice in the request: INVALID_REQUEST; an illegal name: INVALID_TOPIC_EXCEPTION; an existing
  topic (``__consumer_offsets`` always exists): TOPIC_ALREADY_EXISTS; partitions 0 or below -1: INVALID_PARTITIONS;
  replication factor 0 or below -1: INVALID_REPLICATION_FACTOR, above 1 (one broker): INVALID_REPLICATION_FACTOR;
  manual assignments with partitions or replication factor set: INVALID_REQUEST, naming another broker or a
  partition twice: INVALID_REPLICA_ASSIGNMENT; a config we do not serve or a bad value: INVALID_CONFIG. -1
  partitions is ``num.partitions``. Beyond Kafka: more than ``max_partitions`` partitions: INVALID_PARTITIONS, more
  than ``max_total_partitions`` in all topics together: POLICY_VIOLATION (also for CreatePartitions).
* DeleteTopics - unknown name: UNKNOWN_TOPIC_OR_PARTITION, unknown id: UNKNOWN_TOPIC_ID, named twice:
  INVALID_REQUEST. ``__consumer_offsets`` is the coordinator's: TOPIC_AUTHORIZATION_FAILED (what a Kafka cluster
  that protects it with ACLs answers).
* CreatePartitions - unknown: UNKNOWN_TOPIC_OR_PARTITION; not an increase: INVALID_PARTITIONS; assignments not one
  per new partition: INVALID_REPLICA_ASSIGNMENT; ``__consumer_offsets``: TOPIC_AUTHORIZATION_FAILED.
* DeleteRecords - an internal topic: INVALID_TOPIC_EXCEPTION (``ReplicaManager``); unknown partition:
  UNKNOWN_TOPIC_OR_PARTITION; -1 means the high watermark; below 0 or beyond the high watermark:
  OFFSET_OUT_OF_RANGE. The answer's low watermark is the log start after the call (an offset below the log start
  moves nothing).
* IncrementalAlterConfigs - SET and DELETE on topic configs; APPEND / SUBTRACT only on list configs
  (``cleanup.policy``), else INVALID_CONFIG; a config named twice or a resource twice: INVALID_REQUEST; broker
  resources: INVALID_CONFIG (broker configs come from the settings file); ``__consumer_offsets``:
  TOPIC_AUTHORIZATION_FAILED.
* AlterConfigs - the same, every config of a resource a SET and the others reset.
* OffsetForLeaderEpoch - one node, one epoch per partition (``Partition.epoch``): a current leader epoch below it
  FENCED_LEADER_EPOCH, above it UNKNOWN_LEADER_EPOCH; the requested epoch equal to it: its end offset is the high
  watermark (the durable end, which is the log end as a reader sees it); an older epoch has no entry here (the
  partition began with this one): that epoch, ending where the current one starts (the log start); a newer one: -1, -1
  (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), as Kafka's leader-epoch cache answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode

from .configs import (
    CONFIG_TYPES,
    ConfigError,
    ConfigType,
    DescribedConfig,
    check_config,
    describe_broker_configs,
    describe_topic_configs,
)
from .partitions import Broker
from .topics import is_internal_topic, is_legal_topic_name, topic_id_for

__all__ = [
    "AlterConfig",
    "ConfigResource",
    "CreateTopic",
    "EntryResult",
    "TopicAdmin",
]

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
HIGH_WATERMARK = -1
INTERNAL_CONFIGS = {"cleanup.policy": "compact"}  # what __consumer_offsets reports, as Kafka's


@dataclass(slots=True)
class EntryResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    partitions: int = -1
    replication_factor: int = -1
    topic_id: uuid.UUID | None = None
    configs: list[DescribedConfig] = field(default_factory=list)
    name: str | None = None


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Sequence[tuple[int, Sequence[int]]] = ()  # (partition index, broker ids)
    configs: Sequence[tuple[str, str | None]] = ()


@dataclass(frozen=True, slots=True)
class AlterConfig:
    name: str
    op: int
    value: str | None


@dataclass(frozen=True, slots=True)
class ConfigResource:
    resource_type: int
    name: str
    configs: Sequence[AlterConfig] = ()  # IncrementalAlterConfigs
    names: Sequence[str] | None = None  # DescribeConfigs: None = every config


class _Join:
    """Calls ``on_done(results)`` once every pending write of a request is done."""

    def __init__(self, results: list[EntryResult], on_done: Callable[[list[EntryResult]], object]) -> None:
        self.results = results
        self.on_done = on_done
        self.pending = 1

    def wait(self, result: EntryResult, then: Callable[[], None] | None = None) -> Callable[[Any], None]:
        self.pending += 1

        def done(failure: Any) -> None:
            if failure is not None:
                result.error = ErrorCode.kafka_storage_error
                result.message = "the change could not be stored"
            elif then is not None:
                then()
            self.release()

        return done

    def release(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.on_done(self.results)


class TopicAdmin:
    def __init__(
        self, broker: Broker, *, node_id: int, max_partitions: int = 10_000, max_total_partitions: int = 200_000
    ) -> None:
        self.broker = broker
        self.node_id = node_id
        self.max_partitions = max_partitions  # per topic
        self.max_total_partitions = max_total_partitions  # every topic together (0: no limit)

    def _total_partitions(self) -> int:
        return sum(t.partitions for t in self.broker.topics.all())

    def _over_total(self, adding: int, total: int) -> bool:
        return self.max_total_partitions > 0 and total + adding > self.max_total_partitions

    # ------------------------------------------------------------------------------------------------ topics

    def create_topics(
        self, topics: Sequence[CreateTopic], validate_only: bool, on_done: Callable[[list[EntryResult]], object]
    ) -> None:
        results = [EntryResult(name=t.name) for t in topics]
        join = _Join(results, on_done)
        counts: dict[str, int] = {}
        for t in topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        total = self._total_partitions()
        for t, result in zip(topics, results, strict=True):
            if counts[t.name] > 1:
                result.error, result.message = ErrorCode.invalid_request, "Duplicate topic name."
                continue
            checked = self._check_create(t, result)
            if checked is None:
                continue
            partitions, own = checked
            if self._over_total(partitions, total):
                result.error = ErrorCode.policy_violation
                result.message = f"This daemon holds at most {self.max_total_partitions} partitions in all."
                continue
            total += partitions
            result.partitions, result.replication_factor = partitions, 1
            result.topic_id = topic_id_for(t.name)
            result.configs = describe_topic_configs(own, self.broker.defaults)
            if validate_only:
                continue
            topic = self.broker.create_topic(t.name, partitions, own, join.wait(result))
            result.topic_id = topic.topic_id
        join.release()

    def _check_create(self, t: CreateTopic, result: EntryResult) -> tuple[int, dict[str, str]] | None:
        def fail(error: ErrorCode, message: str) -> None:
            result.error, result.message = error, message

        if not is_legal_topic_name(t.name):
            fail(ErrorCode.invalid_topic_exception, f"Topic name {t.name!r} is illegal")
            return None
        if is_internal_topic(t.name) or self.broker.topics.get(t.name) is not None:
            fail(ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.")
            return None
        if t.assignments:
            if t.replication_factor != -1:
                fail(ErrorCode.invalid_request, "A manual partition assignment was specified, but replication "
                                                "factor was not set to -1.")  # fmt: skip
                return None
            if t.num_partitions != -1:
                fail(ErrorCode.invalid_request, "A manual partition assignment was specified, but numPartitions "
                                                "was not set to -1.")  # fmt: skip
                return None
            indexes = sorted(i for i, _ in t.assignments)
            if indexes != list(range(len(indexes))):
                fail(ErrorCode.invalid_replica_assignment, "Partitions must be assigned from 0, once each.")
                return None
            if any(list(ids) != [self.node_id] for _, ids in t.assignments):
                fail(ErrorCode.invalid_replica_assignment, f"Every partition must be on broker {self.node_id}, "
                                                           "the only one.")  # fmt: skip
                return None
            partitions = len(indexes)
        else:
            if t.replication_factor < -1 or t.replication_factor == 0:
                fail(ErrorCode.invalid_replication_factor,
                     "Replication factor must be larger than 0, or -1 to use the default value.")  # fmt: skip
                return None
            if t.num_partitions < -1 or t.num_partitions == 0:
                fail(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
                return None
            if t.replication_factor > 1:
                fail(ErrorCode.invalid_replication_factor,
                     f"Unable to replicate the partition {t.replication_factor} time(s): The target replication "
                     f"factor of {t.replication_factor} cannot be reached because only 1 broker(s) are "
                     "registered.")  # fmt: skip
                return None
            partitions = self.broker.topics.default_partitions if t.num_partitions == -1 else t.num_partitions
        if partitions > self.max_partitions:
            fail(ErrorCode.invalid_partitions, f"At most {self.max_partitions} partitions per topic here.")
            return None
        own: dict[str, str] = {}
        try:
            for name, value in t.configs:
                if name in own:
                    raise ConfigError(f"Config {name} is given twice")
                own[name] = check_config(name, value)
            self.broker.config_of(own)
        except ConfigError as e:
            fail(ErrorCode.invalid_config, str(e))
            return None
        return partitions, own

    def delete_topics(
        self,
        names: Sequence[str | None],
        ids: Sequence[uuid.UUID | None],
        on_done: Callable[[list[EntryResult]], object],
    ) -> None:
        """Delete by name, or by id where the name is None (DeleteTopics v6+); ``ids`` parallel to ``names``."""
        results = [EntryResult(name=n, topic_id=i) for n, i in zip(names, ids, strict=True)]
        join = _Join(results, on_done)
        registry = self.broker.topics
        resolved: list[str | None] = []
        for name, topic_id, result in zip(names, ids, results, strict=True):
            if name is None and topic_id is not None and topic_id != uuid.UUID(int=0):
                topic = registry.by_id(topic_id)
                if topic is None:
                    result.error, result.message = (
                        ErrorCode.unknown_topic_id,
                        "This server does not host this topic ID.",
                    )
                    resolved.append(None)
                    continue
                result.name = name = topic.name
            elif name is None or (topic_id is not None and topic_id != uuid.UUID(int=0)):
                result.error, result.message = ErrorCode.invalid_request, "Give a topic name or a topic id, not both."
                resolved.append(None)
                continue
            resolved.append(name)
        counts: dict[str, int] = {}
        for name in resolved:
            if name is not None:
                counts[name] = counts.get(name, 0) + 1
        for name, result in zip(resolved, results, strict=True):
            if name is None:
                continue
            if counts[name] > 1:
                result.error, result.message = ErrorCode.invalid_request, "Duplicate topic name."
            elif is_internal_topic(name):
                result.error = ErrorCode.topic_authorization_failed
                result.message = f"{name} is the group coordinator's internal topic and cannot be deleted"
            else:
                topic = registry.get(name)
                if topic is None:
                    result.error = ErrorCode.unknown_topic_or_partition
                    result.message = "This server does not host this topic-partition."
                    continue
                result.topic_id = topic.topic_id
                self.broker.delete_topic(name, join.wait(result))
        join.release()

    def create_partitions(
        self,
        topics: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]],
        validate_only: bool,
        on_done: Callable[[list[EntryResult]], object],
    ) -> None:
        """(name, new count, assignments of the new partitions or None) per topic: grow only."""
        results = [EntryResult(name=name) for name, _, _ in topics]
        join = _Join(results, on_done)
        counts: dict[str, int] = {}
        for name, _, _ in topics:
            counts[name] = counts.get(name, 0) + 1
        total = self._total_partitions()
        for (name, count, assignments), result in zip(topics, results, strict=True):
            topic = self.broker.topics.get(name)
            if counts[name] > 1:
                result.error, result.message = ErrorCode.invalid_request, "Duplicate topic name."
            elif is_internal_topic(name):
                result.error = ErrorCode.topic_authorization_failed
                result.message = f"The partitions of {name} are fixed (offsets.topic.num.partitions)"
            elif topic is None:
                result.error = ErrorCode.unknown_topic_or_partition
                result.message = "This server does not host this topic-partition."
            elif count == topic.partitions:
                result.error = ErrorCode.invalid_partitions
                result.message = f"Topic already has {topic.partitions} partition(s)."
            elif count < topic.partitions:
                result.error = ErrorCode.invalid_partitions
                result.message = (f"The topic {name} currently has {topic.partitions} partition(s); {count} would "
                                  "not be an increase.")  # fmt: skip
            elif count > self.max_partitions:
                result.error = ErrorCode.invalid_partitions
                result.message = f"At most {self.max_partitions} partitions per topic here."
            elif assignments is not None and len(assignments) != count - topic.partitions:
                result.error = ErrorCode.invalid_replica_assignment
                result.message = (f"Attempted to add {count - topic.partitions} additional partition(s), but only "
                                  f"{len(assignments)} assignment(s) were specified.")  # fmt: skip
            elif assignments is not None and any(list(a) != [self.node_id] for a in assignments):
                result.error = ErrorCode.invalid_replica_assignment
                result.message = f"Every partition must be on broker {self.node_id}, the only one."
            elif self._over_total(count - topic.partitions, total):
                result.error = ErrorCode.policy_violation
                result.message = f"This daemon holds at most {self.max_total_partitions} partitions in all."
            else:
                total += count - topic.partitions
                if not validate_only:
                    self.broker.grow_topic(name, count, join.wait(result))
        join.release()

    # ------------------------------------------------------------------------------------------------ configs

    def describe_configs(self, resources: Sequence[ConfigResource]) -> list[EntryResult]:
        out = []
        for r in resources:
            result = EntryResult(name=r.name)
            names = None if r.names is None else list(r.names)
            if r.resource_type == TOPIC_RESOURCE:
                if is_internal_topic(r.name):
                    result.configs = describe_topic_configs(INTERNAL_CONFIGS, self.broker.defaults, names)
                elif self.broker.topics.get(r.name) is None:
                    result.error = ErrorCode.unknown_topic_or_partition
                    result.message = "This server does not host this topic-partition."
                else:
                    own = self.broker.topic_configs(r.name)
                    result.configs = describe_topic_configs(own, self.broker.defaults, names)
            elif r.resource_type == BROKER_RESOURCE:
                if r.name not in ("", str(self.node_id)):
                    result.error = ErrorCode.invalid_request
                    result.message = (
                        f"Unexpected broker id, expected {self.node_id} or empty string, but received {r.name}"
                    )
                else:
                    result.configs = describe_broker_configs(self.broker.defaults, names)
            else:
                result.error = ErrorCode.invalid_request
                result.message = f"Unsupported resource type {r.resource_type}"
            out.append(result)
        return out

    def alter_configs(
        self,
        resources: Sequence[ConfigResource],
        validate_only: bool,
        on_done: Callable[[list[EntryResult]], object],
        *,
        replace: bool = False,
    ) -> None:
        """IncrementalAlterConfigs: each topic's configs changed as a whole (all of a resource's changes or none).
        ``replace`` (AlterConfigs, the older API): the resource's SETs become the topic's configs, the rest go back to
        their defaults."""
        results = [EntryResult(name=r.name) for r in resources]
        join = _Join(results, on_done)
        counts: dict[tuple[int, str], int] = {}
        for r in resources:
            counts[(r.resource_type, r.name)] = counts.get((r.resource_type, r.name), 0) + 1
        for r, result in zip(resources, results, strict=True):
            if counts[(r.resource_type, r.name)] > 1:
                result.error, result.message = ErrorCode.invalid_request, "Duplicate resource."
            elif r.resource_type == BROKER_RESOURCE:
                result.error = ErrorCode.invalid_config
                result.message = "Broker configs are static here: set them in the settings file"
            elif r.resource_type != TOPIC_RESOURCE:
                result.error, result.message = ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"
            elif is_internal_topic(r.name):
                result.error = ErrorCode.topic_authorization_failed
                result.message = f"The configs of {r.name} are fixed"
            elif self.broker.topics.get(r.name) is None:
                result.error = ErrorCode.unknown_topic_or_partition
                result.message = "This server does not host this topic-partition."
            else:
                own = {} if replace else self.broker.topic_configs(r.name)
                changed = self._altered(own, r.configs, result)
                if changed is not None and not validate_only:
                    self.broker.replace_configs(r.name, changed, join.wait(result))
        join.release()

    def _altered(
        self, own: dict[str, str], changes: Sequence[AlterConfig], result: EntryResult
    ) -> dict[str, str] | None:
        names = [c.name for c in changes]
        if len(set(names)) != len(names):
            result.error, result.message = ErrorCode.invalid_request, "Error due to duplicate config keys"
            return None
        out = dict(own)
        try:
            for c in changes:
                if c.name not in CONFIG_TYPES:
                    check_config(c.name, c.value)  # raises: unknown or unsupported
                if c.op == SET:
                    out[c.name] = check_config(c.name, c.value)
                elif c.op == DELETE:
                    out.pop(c.name, None)
                elif c.op in (APPEND, SUBTRACT):
                    if CONFIG_TYPES[c.name] != ConfigType.LIST:
                        raise ConfigError(f"Config value append is not allowed for config key: {c.name}"
                                          if c.op == APPEND else
                                          f"Config value subtract is not allowed for config key: {c.name}")  # fmt: skip
                    current = [v for v in out.get(c.name, "delete").split(",") if v]
                    given = [v.strip() for v in (c.value or "").split(",") if v.strip()]
                    if c.op == APPEND:
                        values = current + [v for v in given if v not in current]
                    else:
                        values = [v for v in current if v not in given]
                    out[c.name] = check_config(c.name, ",".join(values))
                else:
                    raise ConfigError(f"Unknown operation {c.op}")
            self.broker.config_of(out)
        except ConfigError as e:
            result.error, result.message = ErrorCode.invalid_config, str(e)
            return None
        return out

    # ------------------------------------------------------------------------------------------------ records

    def delete_records(
        self, entries: Sequence[tuple[str, int, int]], on_done: Callable[[list[EntryResult]], object]
    ) -> None:
        """(topic, partition, offset) -> result with ``partitions`` holding the low watermark (the log start)."""
        results = [EntryResult(name=t) for t, _, _ in entries]
        join = _Join(results, on_done)
        moves = []
        moved: list[tuple[EntryResult, Any, int]] = []
        for (topic, index, offset), result in zip(entries, results, strict=True):
            if is_internal_topic(topic):
                result.error = ErrorCode.invalid_topic_exception
                result.message = f"Cannot delete records of internal topic {topic}"
                continue
            p = self.broker.partition(topic, index)
            if p is None:
                result.error = ErrorCode.unknown_topic_or_partition
                result.message = "This server does not host this topic-partition."
                continue
            target = p.high_watermark if offset == HIGH_WATERMARK else offset
            if target < 0 or target > p.high_watermark:
                result.error = ErrorCode.offset_out_of_range
                result.message = (f"The offset {target} for partition {topic}-{index} is not valid (high watermark "
                                  f"{p.high_watermark})")  # fmt: skip
                continue
            result.partitions = max(p.log_start, target)
            if target > p.pending_start:
                moves.append((p, target))
            moved.append((result, p, target))
        if moves:
            waits = [join.wait(r) for r, _, _ in moved]

            def done(failure: Any) -> None:
                for (result, p, _), wait in zip(moved, waits, strict=True):
                    if failure is None:
                        result.partitions = p.log_start
                    wait(failure)

            self.broker.advance_log_start(moves, done)
        join.release()

    def offset_for_leader_epoch(
        self, topic: str, index: int, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """(error, leader epoch, end offset) of one partition."""
        p = self.broker.partition(topic, index)
        if p is None:
            return ErrorCode.unknown_topic_or_partition, -1, -1
        if current_leader_epoch >= 0 and current_leader_epoch < p.epoch:
            return ErrorCode.fenced_leader_epoch, -1, -1
        if current_leader_epoch > p.epoch:
            return ErrorCode.unknown_leader_epoch, -1, -1
        if leader_epoch == p.epoch:
            return ErrorCode.none, p.epoch, p.high_watermark
        if leader_epoch < 0 or leader_epoch > p.epoch:
            return ErrorCode.none, -1, -1
        return ErrorCode.none, leader_epoch, p.log_start  # older than every epoch here: it ends where ours starts


def describe_configs_of(broker: Broker, name: str) -> Mapping[str, str]:
    """A topic's effective configs by name (the operator API), as DescribeConfigs reports them."""
    own = INTERNAL_CONFIGS if is_internal_topic(name) else broker.topic_configs(name)
    return {c.name: c.value for c in describe_topic_configs(own, broker.defaults)}
