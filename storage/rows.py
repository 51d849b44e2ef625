"""Records -> table rows for one write batch (pure: no I/O, no clock).

``build_batch`` assigns consecutive positions to the records, produces the log/history rows per table and folds the
state records into their net effect on the current-state tables. Folding matters because one batch can hold
several records for the same key (commit, tombstone, commit of one partition): the snapshot must end as if they were
applied in order, and a multi-row upsert may not touch the same key twice (PostgreSQL refuses it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.records import (
    BatchAppended,
    DataRecord,
    LogStartAdvanced,
    ProducerIdsAllocated,
    TopicCreated,
    TopicDeleted,
)
from coordinator.records import (
    GroupMetadataRecord,
    GroupStabilized,
    GroupTombstone,
    JoinPhaseCompleted,
    MemberJoined,
    MemberRemoved,
    OffsetCommitRecord,
    OffsetTombstone,
    RebalanceStarted,
    Record,
)
from protocol.consumer_protocol import assignment_partitions
from security.audit import AdminAction
from security.credential_records import CredentialRecord, ScramCredentialDeleted, ScramCredentialSet

from . import models as m

log = logging.getLogger(__name__)

Row = dict[str, Any]
RowTuple = tuple[Any, ...]
# what the record log stores: the coordinator's records, the data path's, the audit's and users'
AnyRecord = Record | DataRecord | AdminAction | CredentialRecord
OffsetKey = tuple[str, str, int]

CONSUMER_PROTOCOL_TYPE = "consumer"


class OffsetConflict(ValueError):
    """Batches of one partition in a write that do not follow each other, or whose first one does not start at the
    stored next offset (or carries another epoch): a stale or out-of-order writer. A ValueError, so that
    ``SqlRecordLog`` treats it as refused data: the calls of the transaction are retried one by one and only the
    stale one fails."""


@dataclass
class PartitionMove:
    """A conditional move of ``partitions.next_offset`` from ``expected`` to ``new`` under ``epoch``."""

    expected: int
    new: int
    epoch: int


@dataclass
class BatchRows:
    first_position: int
    last_position: int  # first_position - 1 when the batch holds no record
    timestamp_ms: int  # newest record time (-1 if none)
    log_rows: dict[type[m.Base], list[Row]] = field(default_factory=dict)
    group_upserts: dict[str, tuple[int, GroupMetadataRecord]] = field(default_factory=dict)
    group_deletes: set[str] = field(default_factory=set)
    offset_upserts: dict[OffsetKey, tuple[int, OffsetCommitRecord]] = field(default_factory=dict)
    offset_deletes: set[OffsetKey] = field(default_factory=set)
    # offset_commits history rows as tuples in OFFSET_COMMIT_COLUMNS order (the commit path's rows: no dicts)
    offset_commits: list[RowTuple] = field(default_factory=list)
    # data path: topic upserts by name, new partition rows, and per partition the move of its stored next offset
    topic_upserts: dict[str, Row] = field(default_factory=dict)
    partition_inserts: list[Row] = field(default_factory=list)
    partition_moves: dict[tuple[str, int], PartitionMove] = field(default_factory=dict)
    # topics deleted (run before the upserts: a topic deleted and created again in one batch starts afresh), and per
    # partition its new log start and epoch (run after the batches: the rows wholly below it are deleted)
    topic_deletes: list[str] = field(default_factory=list)
    log_starts: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    # idempotent producers: the partition_producers row of each (topic, partition, producer id), the last one wins
    producer_upserts: dict[tuple[str, int, int], Row] = field(default_factory=dict)
    # SCRAM credentials by (user, mechanism): the last change of a key in the batch wins
    credential_upserts: dict[tuple[str, str], Row] = field(default_factory=dict)
    credential_deletes: set[tuple[str, str]] = field(default_factory=set)

    @property
    def record_count(self) -> int:
        return self.last_position - self.first_position + 1

    def add(self, model: type[m.Base], row: Row) -> None:
        self.log_rows.setdefault(model, []).append(row)


def build_batch(records: Sequence[AnyRecord], first_position: int) -> BatchRows:
    batch = BatchRows(first_position=first_position, last_position=first_position - 1, timestamp_ms=-1)
    position = first_position - 1
    newest = -1
    commits = batch.offset_commits
    upserts = batch.offset_upserts
    deletes = batch.offset_deletes
    for record in records:
        if type(record) is OffsetCommitRecord:  # the commit path, inline: most records of a busy coordinator
            position += 1
            r = record
            commits.append(
                (position, r.group_id, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata,
                 r.commit_timestamp_ms, r.member_id, r.generation_id, r.expire_timestamp_ms)
            )  # fmt: skip
            key = (r.group_id, r.topic, r.partition)
            if deletes:
                deletes.discard(key)
            upserts[key] = (position, r)
            if r.commit_timestamp_ms > newest:
                newest = r.commit_timestamp_ms
            continue
        handler = _HANDLERS.get(type(record))
        if handler is None:  # a record type this version does not store: keep the rest of the batch writable
            log.warning("storage: skipping unknown record type %s", type(record).__name__)
            continue
        position += 1
        handler(batch, position, record)
        newest = max(newest, _record_time(record))
    batch.last_position = position
    batch.timestamp_ms = newest
    return batch


def _topic_created(batch: BatchRows, position: int, r: TopicCreated) -> None:
    batch.topic_upserts[r.name] = {
        "name": r.name,
        "partitions": r.partitions,
        "configs": json.dumps(dict(r.configs), sort_keys=True),
        "position": position,
        "updated_ms": r.timestamp_ms,
    }
    batch.partition_inserts.extend(
        {"topic": r.name, "partition_index": p, "epoch": 0, "log_start_offset": 0, "next_offset": 0}
        for p in range(r.partitions)
    )


def _batch_appended(batch: BatchRows, position: int, r: BatchAppended) -> None:
    batch.add(
        m.PartitionBatch,
        {
            "topic": r.topic,
            "partition_index": r.partition,
            "base_offset": r.base_offset,
            "last_offset": r.last_offset,
            "max_timestamp_ms": r.max_timestamp,
            "partition_epoch": r.epoch,
            "size_bytes": len(r.data),
            "position": position,
            "appended_ms": r.timestamp_ms,
            "data": r.data,
            "producer_id": r.producer_id,
            "producer_epoch": r.producer_epoch,
            "base_sequence": r.base_sequence,
        },
    )
    if r.producer_id >= 0:
        batch.producer_upserts[(r.topic, r.partition, r.producer_id)] = {
            "topic": r.topic,
            "partition_index": r.partition,
            "producer_id": r.producer_id,
            "producer_epoch": r.producer_epoch,
            "retained_from": r.producer_retained_from if r.producer_retained_from >= 0 else r.base_offset,
            "last_offset": r.last_offset,
            "last_appended_ms": r.timestamp_ms,
        }
    key = (r.topic, r.partition)
    move = batch.partition_moves.get(key)
    if move is None:
        batch.partition_moves[key] = PartitionMove(r.base_offset, r.last_offset + 1, r.epoch)
    elif move.new != r.base_offset or move.epoch != r.epoch:
        raise OffsetConflict(
            f"{r.topic}-{r.partition}: batch at {r.base_offset} (epoch {r.epoch}) does not follow {move.new - 1}"
        )
    else:
        move.new = r.last_offset + 1


def _topic_deleted(batch: BatchRows, position: int, r: TopicDeleted) -> None:
    """Whatever this batch holds for the topic before its deletion is dropped; the deletion runs first."""
    name = r.name
    batch.topic_upserts.pop(name, None)
    batch.partition_inserts[:] = [row for row in batch.partition_inserts if row["topic"] != name]
    for key in [k for k in batch.partition_moves if k[0] == name]:
        del batch.partition_moves[key]
    for key in [k for k in batch.log_starts if k[0] == name]:
        del batch.log_starts[key]
    for pkey in [k for k in batch.producer_upserts if k[0] == name]:
        del batch.producer_upserts[pkey]
    rows = batch.log_rows.get(m.PartitionBatch)
    if rows:
        rows[:] = [row for row in rows if row["topic"] != name]
    if name not in batch.topic_deletes:
        batch.topic_deletes.append(name)


def _log_start_advanced(batch: BatchRows, position: int, r: LogStartAdvanced) -> None:
    key = (r.topic, r.partition)
    start, _ = batch.log_starts.get(key, (r.log_start_offset, r.epoch))
    batch.log_starts[key] = (max(start, r.log_start_offset), r.epoch)


def _producer_ids_allocated(batch: BatchRows, position: int, r: ProducerIdsAllocated) -> None:
    batch.add(
        m.ProducerIdBlock,
        {"first_id": r.first_id, "block_size": r.count, "position": position, "allocated_ms": r.timestamp_ms},
    )


def _credential_set(batch: BatchRows, position: int, r: ScramCredentialSet) -> None:
    c = r.credential
    key = (r.user, c.mechanism)
    batch.credential_deletes.discard(key)
    batch.credential_upserts[key] = {
        "user_name": r.user,
        "mechanism": c.mechanism,
        "salt": c.salt,
        "stored_key": c.stored_key,
        "server_key": c.server_key,
        "iterations": c.iterations,
        "position": position,
        "updated_ms": r.timestamp_ms,
    }


def _credential_deleted(batch: BatchRows, position: int, r: ScramCredentialDeleted) -> None:
    key = (r.user, r.mechanism)
    batch.credential_upserts.pop(key, None)
    batch.credential_deletes.add(key)


def _record_time(record: AnyRecord) -> int:
    if isinstance(record, OffsetCommitRecord):
        return record.commit_timestamp_ms
    return record.timestamp_ms


# ------------------------------------------------------------------------------------------------ state records


def _group_metadata(batch: BatchRows, position: int, r: GroupMetadataRecord) -> None:
    batch.add(
        m.GroupMetadataLog,
        {
            "position": position,
            "group_id": r.group_id,
            "protocol_type": r.protocol_type,
            "generation_id": r.generation_id,
            "protocol": r.protocol,
            "leader": r.leader,
            "current_state_timestamp_ms": r.current_state_timestamp_ms,
            "member_count": len(r.members),
            "timestamp_ms": r.timestamp_ms,
        },
    )
    # One GenerationMember row per member and one AssignedPartition row per assigned partition: a 1,000-member
    # generation is ~2,000 rows built here, on the writer thread, while its SyncGroups wait (the lists are looked up
    # once, in the order of first use, as ``batch.add`` would create them).
    is_consumer = r.protocol_type == CONSUMER_PROTOCOL_TYPE
    log_rows = batch.log_rows
    member_rows: list[Row] | None = None
    partition_rows: list[Row] | None = None
    group_id, generation_id = r.group_id, r.generation_id
    seen: set[str] = set()
    for index, member in enumerate(r.members):
        member_id = member.member_id
        if member_id in seen:  # cannot happen from the core; a duplicate key would fail the whole batch
            log.warning("duplicate member in group metadata record", extra={"group": group_id, "member": member_id})
            continue
        seen.add(member_id)
        decoded: bool | None = None
        if is_consumer:
            try:
                partitions = assignment_partitions(member.assignment)
                decoded = True
            except ValueError:
                partitions = {}
                decoded = False
            if partitions:
                if partition_rows is None:
                    partition_rows = log_rows.setdefault(m.AssignedPartition, [])
                instance_id = member.group_instance_id
                for topic, numbers in partitions.items():
                    for number in sorted(set(numbers)) if len(numbers) > 1 else numbers:
                        partition_rows.append(
                            {
                                "position": position,
                                "member_id": member_id,
                                "topic": topic,
                                "partition_index": number,
                                "group_id": group_id,
                                "generation_id": generation_id,
                                "group_instance_id": instance_id,
                            }
                        )
        if member_rows is None:
            member_rows = log_rows.setdefault(m.GenerationMember, [])
        member_rows.append(
            {
                "position": position,
                "member_id": member_id,
                "group_id": group_id,
                "generation_id": generation_id,
                "member_index": index,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "rebalance_timeout_ms": member.rebalance_timeout_ms,
                "session_timeout_ms": member.session_timeout_ms,
                "subscription": member.subscription,
                "assignment": member.assignment,
                "assignment_decoded": decoded,
            }
        )
    batch.group_deletes.discard(r.group_id)
    batch.group_upserts[r.group_id] = (position, r)


def _group_tombstone(batch: BatchRows, position: int, r: GroupTombstone) -> None:
    batch.add(
        m.GroupRemoval,
        {"position": position, "group_id": r.group_id, "cause": str(r.cause), "timestamp_ms": r.timestamp_ms},
    )
    batch.group_upserts.pop(r.group_id, None)
    batch.group_deletes.add(r.group_id)


def _offset_tombstone(batch: BatchRows, position: int, r: OffsetTombstone) -> None:
    batch.add(
        m.OffsetRemoval,
        {
            "position": position,
            "group_id": r.group_id,
            "topic": r.topic,
            "partition_index": r.partition,
            "cause": str(r.cause),
            "timestamp_ms": r.timestamp_ms,
        },
    )
    key = (r.group_id, r.topic, r.partition)
    batch.offset_upserts.pop(key, None)
    batch.offset_deletes.add(key)


# ------------------------------------------------------------------------------------------------ history records


def _rebalance_started(batch: BatchRows, position: int, r: RebalanceStarted) -> None:
    batch.add(
        m.RebalanceStartedRow,
        {
            "position": position,
            "group_id": r.group_id,
            "generation_id": r.generation_id,
            "cause": str(r.cause),
            "member_id": r.member_id,
            "group_instance_id": r.group_instance_id,
            "reason": r.reason,
            "previous_state": r.previous_state,
            "timestamp_ms": r.timestamp_ms,
        },
    )


def _join_phase_completed(batch: BatchRows, position: int, r: JoinPhaseCompleted) -> None:
    static = set(r.static_members)
    members = list(dict.fromkeys(r.members))  # de-duplicated, order kept
    batch.add(
        m.JoinPhaseCompletedRow,
        {
            "position": position,
            "group_id": r.group_id,
            "generation_id": r.generation_id,
            "state": r.state,
            "protocol_type": r.protocol_type,
            "protocol": r.protocol,
            "leader": r.leader,
            "member_count": len(members),
            "static_member_count": len(static),
            "join_duration_ms": r.join_duration_ms,
            "timestamp_ms": r.timestamp_ms,
        },
    )
    for member_id in members:
        batch.add(
            m.JoinPhaseMember,
            {
                "position": position,
                "member_id": member_id,
                "group_id": r.group_id,
                "generation_id": r.generation_id,
                "is_static": member_id in static,
            },
        )


def _group_stabilized(batch: BatchRows, position: int, r: GroupStabilized) -> None:
    batch.add(
        m.GroupStabilizedRow,
        {
            "position": position,
            "group_id": r.group_id,
            "generation_id": r.generation_id,
            "sync_duration_ms": r.sync_duration_ms,
            "rebalance_duration_ms": r.rebalance_duration_ms,
            "timestamp_ms": r.timestamp_ms,
        },
    )


def _member_joined(batch: BatchRows, position: int, r: MemberJoined) -> None:
    batch.add(
        m.MemberJoinedRow,
        {
            "position": position,
            "group_id": r.group_id,
            "member_id": r.member_id,
            "group_instance_id": r.group_instance_id,
            "client_id": r.client_id,
            "client_host": r.client_host,
            "protocols": _protocols_json(r.protocols),  # JSON column: the writers bind text
            "session_timeout_ms": r.session_timeout_ms,
            "rebalance_timeout_ms": r.rebalance_timeout_ms,
            "timestamp_ms": r.timestamp_ms,
        },
    )


# The JSON text of a member's protocol names, by the names: the members of a group send the same ones, and
# ``json.dumps`` cost 3.8 us per MemberJoined row (0.15 us looked up), on the writer thread during the join storm.
# Bounded: cleared when full.
_PROTOCOLS_JSON: dict[tuple[str, ...], str] = {}
_PROTOCOLS_JSON_MAX = 1024


def _protocols_json(protocols: tuple[str, ...]) -> str:
    text = _PROTOCOLS_JSON.get(protocols)
    if text is None:
        if len(_PROTOCOLS_JSON) >= _PROTOCOLS_JSON_MAX:
            _PROTOCOLS_JSON.clear()
        text = _PROTOCOLS_JSON[protocols] = json.dumps(list(protocols))
    return text


def _member_removed(batch: BatchRows, position: int, r: MemberRemoved) -> None:
    batch.add(
        m.MemberRemovedRow,
        {
            "position": position,
            "group_id": r.group_id,
            "member_id": r.member_id,
            "group_instance_id": r.group_instance_id,
            "cause": str(r.cause),
            "reason": r.reason,
            "generation_id": r.generation_id,
            "timestamp_ms": r.timestamp_ms,
        },
    )


def _admin_action(batch: BatchRows, position: int, r: AdminAction) -> None:
    batch.add(
        m.AdminActionRow,
        {
            "position": position,
            "timestamp_ms": r.timestamp_ms,
            "via": str(r.via),
            "action": str(r.action),
            "resource": r.resource,
            "group_id": r.group_id,
            "principal": r.principal,
            "client_id": r.client_id,
            "client_host": r.client_host,
            "detail": r.detail,
        },
    )


_HANDLERS: dict[type, Any] = {
    GroupMetadataRecord: _group_metadata,
    GroupTombstone: _group_tombstone,
    OffsetTombstone: _offset_tombstone,
    RebalanceStarted: _rebalance_started,
    JoinPhaseCompleted: _join_phase_completed,
    GroupStabilized: _group_stabilized,
    MemberJoined: _member_joined,
    MemberRemoved: _member_removed,
    TopicCreated: _topic_created,
    BatchAppended: _batch_appended,
    TopicDeleted: _topic_deleted,
    LogStartAdvanced: _log_start_advanced,
    ProducerIdsAllocated: _producer_ids_allocated,
    AdminAction: _admin_action,
    ScramCredentialSet: _credential_set,
    ScramCredentialDeleted: _credential_deleted,
}


# ------------------------------------------------------------------------------------------------ snapshot rows


def current_group_row(position: int, r: GroupMetadataRecord) -> Row:
    return {
        "group_id": r.group_id,
        "position": position,
        "protocol_type": r.protocol_type,
        "generation_id": r.generation_id,
        "protocol": r.protocol,
        "leader": r.leader,
        "current_state_timestamp_ms": r.current_state_timestamp_ms,
        "member_count": len(r.members),
        "timestamp_ms": r.timestamp_ms,
    }


def current_member_rows(r: GroupMetadataRecord) -> list[Row]:
    rows: dict[str, Row] = {}
    for index, member in enumerate(r.members):
        rows.setdefault(
            member.member_id,
            {
                "group_id": r.group_id,
                "member_id": member.member_id,
                "member_index": index,
                "group_instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "rebalance_timeout_ms": member.rebalance_timeout_ms,
                "session_timeout_ms": member.session_timeout_ms,
                "subscription": member.subscription,
                "assignment": member.assignment,
            },
        )
    return list(rows.values())


# The column order of the commit path's tuples: the models' columns with ``expire_timestamp_ms`` last, so that a row
# without an expiry (nearly every commit) can leave that column to the statement text (storage.writers: sqlite3
# binds a None through its adapter lookup, about 1 us per row). tests/storage/test_rows.py checks them.
OFFSET_COMMIT_COLUMNS = (
    "position", "group_id", "topic", "partition_index", "committed_offset", "leader_epoch", "commit_metadata",
    "commit_timestamp_ms", "member_id", "generation_id", "expire_timestamp_ms",
)  # fmt: skip
CURRENT_OFFSET_COLUMNS = (
    "group_id", "topic", "partition_index", "position", "committed_offset", "leader_epoch", "commit_metadata",
    "commit_timestamp_ms", "member_id", "generation_id", "expire_timestamp_ms",
)  # fmt: skip


def current_offset_tuples(batch: BatchRows) -> list[RowTuple]:
    """The batch's ``current_offsets`` upserts (the last commit of each key), in ``CURRENT_OFFSET_COLUMNS`` order."""
    return [
        (r.group_id, r.topic, r.partition, position, r.offset, r.leader_epoch, r.metadata, r.commit_timestamp_ms,
         r.member_id, r.generation_id, r.expire_timestamp_ms)
        for position, r in batch.offset_upserts.values()
    ]  # fmt: skip
