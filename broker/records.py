"""The records of the data path, persisted by the same record log as the coordinator's records.

* ``TopicCreated`` - a topic was created or grew (Kafka only grows partition counts), with its configs. Replayed at
  start-up into the topic registry, so topics keep their partition counts and configs across restarts.
* ``BatchAppended`` - one record batch appended to a partition: the batch bytes exactly as the producer sent them,
  with the assigned ``base_offset`` (and, under LogAppendTime, the broker's max timestamp) stamped in, and the
  producer id, epoch and base sequence of its header (-1 for a producer that is not idempotent), from which the
  producer state (``broker.producers``) is rebuilt at start-up: ``producer_retained_from`` tells from which offset
  the producer's last five batches (the ones its state keeps) start.
* ``TopicDeleted`` - a topic was deleted (DeleteTopics, the operator API): its partitions and batches go with it.
* ``LogStartAdvanced`` - a partition's log start offset moved up (retention, DeleteRecords): the batches wholly
  below it are deleted. Conditional in storage on the partition's stored epoch, like a batch.
* ``ProducerIdsAllocated`` - a block of producer ids ``[first_id, first_id + count)`` may be handed out: ids below
  the end of the last stored block are never handed out again (``broker.producers.ProducerIds``).

Every batch carries the partition ``epoch`` it was appended under. Today there is one node and the epoch is 0; when
several daemons share a database, the storage write of a batch is conditional on the stored epoch and next offset of
its partition (``storage/README.md``), so a writer with a stale epoch fails instead of interleaving two logs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicCreated:
    name: str
    partitions: int
    configs: tuple[tuple[str, str], ...]  # sorted (name, value) pairs: only the ones set on the topic
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class BatchAppended:
    topic: str
    partition: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    epoch: int
    data: bytes
    timestamp_ms: int  # when the broker appended it
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    producer_retained_from: int = -1  # base offset of the oldest batch the producer's state keeps after this one

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    name: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class LogStartAdvanced:
    topic: str
    partition: int
    log_start_offset: int
    epoch: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ProducerIdsAllocated:
    first_id: int
    count: int
    timestamp_ms: int


DataRecord = TopicCreated | BatchAppended | TopicDeleted | LogStartAdvanced | ProducerIdsAllocated
