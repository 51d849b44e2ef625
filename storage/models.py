"""The SQL schema: typed models for the record log, the history tables and the current-state snapshot.

Three kinds of tables, all written in the same transaction per batch (see ``storage.record_log``):

* **Log tables** — one row per state record, append-only, in log order: ``group_metadata_log`` (with its members in
  ``generation_members`` and, for protocol type ``consumer``, the decoded assignment in ``assigned_partitions``),
  ``group_removals``, ``offset_commits``, ``offset_removals``.
* **History tables** — one row per history record Kafka does not keep: ``rebalance_started``,
  ``join_phase_completed`` (+ ``join_phase_members``), ``group_stabilized``, ``member_joined``, ``member_removed``.
* **Current-state tables** (a materialised snapshot of replaying the log): ``current_groups``,
  ``current_group_members``, ``current_offsets``. Start-up loads only these, so it does not grow with history.

Every log and history row carries ``position``: a BIGINT that increases by one per record across all tables (child
rows share their record's position). Readers use it for ranges (Spark JDBC ``partitionColumn``, incremental export),
pruning deletes position ranges. ``log_batches`` has one row per transaction (positions it covered, record time), which
is what ``prune_history`` uses to turn a time into a position. Times are epoch milliseconds (``*_ms``), Kafka style.

Column names avoid SQL keywords an analyst would otherwise have to quote: ``committed_offset`` (not ``offset``),
``partition_index`` (Kafka's protocol name), ``commit_metadata`` (not ``metadata``).
"""

from __future__ import annotations

from typing import Annotated

from sqlalchemy import JSON, BigInteger, Index, Integer, LargeBinary, MetaData, String, Table, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Explicit constraint names keep Alembic migrations identical on every dialect.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Position = Annotated[int, mapped_column(BigInteger, primary_key=True, autoincrement=False)]
PositionKey = Annotated[
    int, mapped_column(BigInteger, primary_key=True, autoincrement=False)
]  # part of a composite key
Millis = Annotated[int, mapped_column(BigInteger)]
Int32 = Annotated[int, mapped_column(Integer)]
Int64 = Annotated[int, mapped_column(BigInteger)]
Text = Annotated[str, mapped_column(String)]
OptText = Annotated[str | None, mapped_column(String, nullable=True)]
Key = Annotated[str, mapped_column(String, primary_key=True)]
KeyInt = Annotated[int, mapped_column(Integer, primary_key=True, autoincrement=False)]
Bytes = Annotated[bytes, mapped_column(LargeBinary)]


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# ------------------------------------------------------------------------------------------------ bookkeeping


class LogState(Base):
    """Exactly one row: the last position handed out. Updated conditionally in every write transaction, which also
    fences a second writer pointed at the same database."""

    __tablename__ = "log_state"
    id: Mapped[KeyInt]
    last_position: Mapped[Int64]


class LogBatch(Base):
    """One row per committed write transaction (a group commit)."""

    __tablename__ = "log_batches"
    last_position: Mapped[Position]
    first_position: Mapped[Int64]
    record_count: Mapped[Int32]
    timestamp_ms: Mapped[Millis]  # the newest record time in the batch; pruning compares against it
    written_at_ms: Mapped[Millis]  # wall clock of the writer when the transaction started
    __table_args__ = (Index(None, "timestamp_ms"),)


# ------------------------------------------------------------------------------------------------ state log


class GroupMetadataLog(Base):
    """Every GroupMetadataRecord (a new generation after SyncGroup, an Empty group, a static-member replacement)."""

    __tablename__ = "group_metadata_log"
    position: Mapped[Position]
    group_id: Mapped[Text]
    protocol_type: Mapped[Text]  # "" when the group has none
    generation_id: Mapped[Int32]
    protocol: Mapped[OptText]
    leader: Mapped[OptText]
    current_state_timestamp_ms: Mapped[Millis]
    member_count: Mapped[Int32]
    timestamp_ms: Mapped[Millis]
    __table_args__ = (Index(None, "group_id", "position"),)


class GenerationMember(Base):
    """The members of one GroupMetadataRecord, with their raw subscription and assignment bytes."""

    __tablename__ = "generation_members"
    position: Mapped[PositionKey]
    member_id: Mapped[Key]
    group_id: Mapped[Text]
    generation_id: Mapped[Int32]
    member_index: Mapped[Int32]  # order within the record
    group_instance_id: Mapped[OptText]
    client_id: Mapped[Text]
    client_host: Mapped[Text]
    rebalance_timeout_ms: Mapped[Int32]
    session_timeout_ms: Mapped[Int32]
    subscription: Mapped[Bytes]
    assignment: Mapped[Bytes]
    # None: protocol type is not "consumer"; False: the assignment bytes could not be decoded (no partition rows).
    assignment_decoded: Mapped[bool | None]


class AssignedPartition(Base):
    """The decoded assignment of a ``consumer`` group member: one row per (record, member, topic, partition)."""

    __tablename__ = "assigned_partitions"
    position: Mapped[PositionKey]
    member_id: Mapped[Key]
    topic: Mapped[Key]
    partition_index: Mapped[KeyInt]
    group_id: Mapped[Text]
    generation_id: Mapped[Int32]
    group_instance_id: Mapped[OptText]  # owner identity across restarts of a static member
    __table_args__ = (Index(None, "group_id", "generation_id"),)


class GroupRemoval(Base):
    """Every GroupTombstone."""

    __tablename__ = "group_removals"
    position: Mapped[Position]
    group_id: Mapped[Text]
    cause: Mapped[Text]
    timestamp_ms: Mapped[Millis]
    __table_args__ = (Index(None, "group_id", "position"),)


class OffsetCommit(Base):
    """Every OffsetCommitRecord, also the ones later overwritten."""

    __tablename__ = "offset_commits"
    position: Mapped[Position]
    group_id: Mapped[Text]
    topic: Mapped[Text]
    partition_index: Mapped[Int32]
    committed_offset: Mapped[Int64]
    leader_epoch: Mapped[Int32]  # -1 = none
    commit_metadata: Mapped[Text]
    commit_timestamp_ms: Mapped[Millis]
    expire_timestamp_ms: Mapped[int | None] = mapped_column(BigInteger)
    member_id: Mapped[str] = mapped_column(String)  # "" for admin/simple commits
    generation_id: Mapped[int] = mapped_column(Integer)  # -1 for admin/simple commits
    __table_args__ = (Index(None, "group_id", "commit_timestamp_ms", "position"),)


class OffsetRemoval(Base):
    """Every OffsetTombstone (OffsetDelete, expiration, group deletion)."""

    __tablename__ = "offset_removals"
    position: Mapped[Position]
    group_id: Mapped[Text]
    topic: Mapped[Text]
    partition_index: Mapped[Int32]
    cause: Mapped[Text]
    timestamp_ms: Mapped[Millis]
    __table_args__ = (Index(None, "group_id", "position"),)


# ------------------------------------------------------------------------------------------------ history


class RebalanceStartedRow(Base):
    __tablename__ = "rebalance_started"
    position: Mapped[Position]
    group_id: Mapped[Text]
    generation_id: Mapped[Int32]  # the generation being left
    cause: Mapped[Text]
    member_id: Mapped[OptText]
    group_instance_id: Mapped[OptText]
    reason: Mapped[OptText]
    previous_state: Mapped[Text]
    timestamp_ms: Mapped[Millis]
    __table_args__ = (Index(None, "group_id", "position"),)


class JoinPhaseCompletedRow(Base):
    __tablename__ = "join_phase_completed"
    position: Mapped[Position]
    group_id: Mapped[Text]
    generation_id: Mapped[Int32]  # the new generation
    state: Mapped[Text]  # CompletingRebalance or Empty
    protocol_type: Mapped[OptText]
    protocol: Mapped[OptText]
    leader: Mapped[OptText]
    member_count: Mapped[Int32]
    static_member_count: Mapped[Int32]
    join_duration_ms: Mapped[Int64]
    timestamp_ms: Mapped[Millis]
    __table_args__ = (Index(None, "group_id", "position"),)


class JoinPhaseMember(Base):
    __tablename__ = "join_phase_members"
    position: Mapped[PositionKey]
    member_id: Mapped[Key]
    group_id: Mapped[Text]
    generation_id: Mapped[Int32]
    is_static: Mapped[bool]


class GroupStabilizedRow(Base):
    __tablename__ = "group_stabilized"
    position: Mapped[Position]
    group_id: Mapped[Text]
    generation_id: Mapped[Int32]
    sync_duration_ms: Mapped[Int64]
    rebalance_duration_ms: Mapped[Int64]
    timestamp_ms: Mapped[Millis]
    __table_args__ = (Index(None, "group_id", "position"),)


class MemberJoinedRow(Base):
    __tablename__ = "member_joined"
    position: Mapped[Position]
    group_id: Mapped[Text]
    member_id: Mapped[Text]
    group_instance_id: Mapped[OptText]
    client_id: Mapped[Text]
    client_host: Mapped[Text]
    protocols: Mapped[list[str]] = mapped_column(JSON)  # JSON array of protocol names
    session_timeout_ms: Mapped[int] = mapped_column(Integer)
    rebalance_timeout_ms: Mapped[int] = mapped_column(Integer)
    timestamp_ms: Mapped[int] = mapped_column(BigInteger)
    __table_args__ = (Index(None, "group_id", "position"),)


class MemberRemovedRow(Base):
    __tablename__ = "member_removed"
    position: Mapped[Position]
    group_id: Mapped[Text]
    member_id: Mapped[Text]
    group_instance_id: Mapped[OptText]
    cause: Mapped[Text]
    reason: Mapped[OptText]
    generation_id: Mapped[Int32]
    timestamp_ms: Mapped[Millis]
    __table_args__ = (Index(None, "group_id", "position"),)


class AdminActionRow(Base):
    """One admin action with its actor (``security.audit.AdminAction``): over HTTP or a Kafka admin API. Not pruned
    with the history: an audit trail is kept until an operator deletes it."""

    __tablename__ = "admin_actions"
    position: Mapped[Position]
    timestamp_ms: Mapped[Millis]
    via: Mapped[Text]  # http | kafka
    action: Mapped[Text]  # group.delete, offsets.reset, offsets.alter, ... (security.audit.Action)
    resource: Mapped[Text]
    group_id: Mapped[OptText]
    principal: Mapped[Text]
    client_id: Mapped[OptText]
    client_host: Mapped[OptText]
    detail: Mapped[Text]
    __table_args__ = (Index(None, "group_id", "position"), Index(None, "timestamp_ms"))


# ------------------------------------------------------------------------------------------------ current state


class CurrentGroup(Base):
    """The latest GroupMetadataRecord of every live group (removed by a GroupTombstone)."""

    __tablename__ = "current_groups"
    group_id: Mapped[Key]
    position: Mapped[Int64]
    protocol_type: Mapped[Text]
    generation_id: Mapped[Int32]
    protocol: Mapped[OptText]
    leader: Mapped[OptText]
    current_state_timestamp_ms: Mapped[Millis]
    member_count: Mapped[Int32]
    timestamp_ms: Mapped[Millis]


class CurrentGroupMember(Base):
    __tablename__ = "current_group_members"
    group_id: Mapped[Key]
    member_id: Mapped[Key]
    member_index: Mapped[Int32]
    group_instance_id: Mapped[OptText]
    client_id: Mapped[Text]
    client_host: Mapped[Text]
    rebalance_timeout_ms: Mapped[Int32]
    session_timeout_ms: Mapped[Int32]
    subscription: Mapped[Bytes]
    assignment: Mapped[Bytes]


class CurrentOffset(Base):
    """The latest committed offset per (group, topic, partition) (removed by an OffsetTombstone)."""

    __tablename__ = "current_offsets"
    group_id: Mapped[Key]
    topic: Mapped[Key]
    partition_index: Mapped[KeyInt]
    position: Mapped[Int64]
    committed_offset: Mapped[Int64]
    leader_epoch: Mapped[Int32]
    commit_metadata: Mapped[Text]
    commit_timestamp_ms: Mapped[Millis]
    expire_timestamp_ms: Mapped[int | None] = mapped_column(BigInteger)
    member_id: Mapped[str] = mapped_column(String)
    generation_id: Mapped[int] = mapped_column(Integer)


# ------------------------------------------------------------------------------------------------ data path


class TopicRow(Base):
    """One row per topic (``broker.records.TopicCreated``): its partition count (grows only) and the configs set on
    it (a JSON object of Kafka config names to strings; the daemon's defaults apply to the rest)."""

    __tablename__ = "topics"
    name: Mapped[Key]
    partitions: Mapped[Int32]
    configs: Mapped[Text]
    position: Mapped[Int64]
    updated_ms: Mapped[Millis]


class PartitionRow(Base):
    """One row per partition: its epoch, log start offset and next offset (the end of the stored log). Every
    batch write moves ``next_offset`` with a conditional UPDATE (``WHERE next_offset = <the batch's base offset>
    AND epoch = <the writer's epoch>``): a writer whose idea of the log is stale fails instead of writing."""

    __tablename__ = "partitions"
    topic: Mapped[Key]
    partition_index: Mapped[KeyInt]
    epoch: Mapped[Int32]
    log_start_offset: Mapped[Int64]
    next_offset: Mapped[Int64]


class PartitionBatch(Base):
    """One row per record batch (``broker.records.BatchAppended``): the bytes as the producer sent them, with the
    assigned base offset (and the partition epoch, and under LogAppendTime the broker's time) stamped in.

    ``producer_id``, ``producer_epoch`` and ``base_sequence`` repeat the batch header's (-1: not an idempotent
    producer); the partial index over the idempotent batches holds every column the start-up load of the producer
    state reads (``record_log._load_producers``: at most five batches per producer, found from
    ``partition_producers``), so that load never reads a batch row (nor, on SQLite, the pages of its bytes)."""

    __tablename__ = "partition_batches"
    __table_args__ = (
        Index(
            "ix_partition_batches_producers",
            "topic",
            "partition_index",
            "producer_id",
            "base_offset",
            "producer_epoch",
            "base_sequence",
            "last_offset",
            "max_timestamp_ms",
            "appended_ms",
            sqlite_where=text("producer_id >= 0"),
            postgresql_where=text("producer_id >= 0"),
        ),
    )
    topic: Mapped[Key]
    partition_index: Mapped[KeyInt]
    base_offset: Mapped[PositionKey]
    last_offset: Mapped[Int64]
    max_timestamp_ms: Mapped[Millis]
    partition_epoch: Mapped[Int32]
    size_bytes: Mapped[Int32]
    position: Mapped[Int64]
    appended_ms: Mapped[Millis]
    data: Mapped[Bytes]
    producer_id: Mapped[Int64]
    producer_epoch: Mapped[Int32]
    base_sequence: Mapped[Int32]


class PartitionProducer(Base):
    """One row per idempotent producer and partition (current state, upserted with each of its batches): its epoch,
    the base offset of the oldest of the batches its state keeps (``retained_from``: the start-up load reads that
    producer's batches from there, at most five, through the partial index of ``partition_batches``), its last
    offset and when it last appended (producers idle for ``producer.id.expiration.ms`` are not loaded)."""

    __tablename__ = "partition_producers"
    topic: Mapped[Key]
    partition_index: Mapped[KeyInt]
    producer_id: Mapped[PositionKey]
    producer_epoch: Mapped[Int32]
    retained_from: Mapped[Int64]
    last_offset: Mapped[Int64]
    last_appended_ms: Mapped[Millis]


class ProducerIdBlock(Base):
    """One row per block of producer ids handed out (``broker.records.ProducerIdsAllocated``): ids below the end of
    the last block are never handed out again."""

    __tablename__ = "producer_id_blocks"
    first_id: Mapped[Position]
    block_size: Mapped[Int32]
    position: Mapped[Int64]
    allocated_ms: Mapped[Millis]


class AclRow(Base):
    """One ACL binding (``security.acls.AclBinding``; CreateAcls / DeleteAcls). The key is the whole binding, as in
    Kafka an ACL is identified by its content; enum columns hold Kafka's wire codes."""

    __tablename__ = "acls"
    resource_type: Mapped[KeyInt]
    resource_name: Mapped[Key]
    pattern_type: Mapped[KeyInt]
    principal: Mapped[Key]
    host: Mapped[Key]
    operation: Mapped[KeyInt]
    permission: Mapped[KeyInt]
    created_ms: Mapped[Millis]


class ScramCredentialRow(Base):
    """One row per user and SCRAM mechanism (``security.credential_records``): the salted credential, never the
    password. Upserted by ``ScramCredentialSet``, deleted by ``ScramCredentialDeleted``; start-up loads them all."""

    __tablename__ = "scram_credentials"
    user_name: Mapped[Key]
    mechanism: Mapped[Key]  # SCRAM-SHA-256 or SCRAM-SHA-512
    salt: Mapped[Bytes]
    stored_key: Mapped[Bytes]
    server_key: Mapped[Bytes]
    iterations: Mapped[Int32]
    position: Mapped[Int64]
    updated_ms: Mapped[Millis]


# Tables pruned by position range (everything except the current state and the bookkeeping).
HISTORY_TABLES: tuple[type[Base], ...] = (
    GroupMetadataLog,
    GenerationMember,
    AssignedPartition,
    GroupRemoval,
    OffsetCommit,
    OffsetRemoval,
    RebalanceStartedRow,
    JoinPhaseCompletedRow,
    JoinPhaseMember,
    GroupStabilizedRow,
    MemberJoinedRow,
    MemberRemovedRow,
)


def table(model: type[Base]) -> Table:
    """The Core table of a model (for Core statements and typed column access)."""
    t = model.__table__
    assert isinstance(t, Table)
    return t
