"""The canonical input DataFrames every transform takes: table names, columns and Spark types.

They mirror the daemon's log and history tables (``storage/models.py``) column for column, minus the columns no
report needs (raw subscription/assignment bytes, commit metadata, client protocols). The extract (``extract.py``)
maps whatever a source holds onto these schemas, casting types (SQLite's JDBC driver reports BIGINT as DECIMAL and
booleans as integers), so the transforms never see a source's quirks and tests build inputs with these schemas.

Conventions: times are epoch milliseconds (``*_ms``, UTC), ``position`` is the log position (one per record,
increasing across all tables; child rows share their record's position). Nothing here imports the daemon.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)


def _schema(*fields: tuple[str, DataType, bool]) -> StructType:
    return StructType([StructField(name, dtype, nullable) for name, dtype, nullable in fields])


S, I32, L, B = StringType(), IntegerType(), LongType(), BooleanType()

GROUP_METADATA_LOG = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("protocol_type", S, False),  # "" when the group has none
    ("generation_id", I32, False),
    ("protocol", S, True),
    ("leader", S, True),
    ("current_state_timestamp_ms", L, False),  # -1 = unknown
    ("member_count", I32, False),
    ("timestamp_ms", L, False),
)

GENERATION_MEMBERS = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("generation_id", I32, False),
    ("member_id", S, False),
    ("group_instance_id", S, True),  # set for static members
    ("client_id", S, False),
    ("client_host", S, False),
    ("session_timeout_ms", I32, False),
    ("rebalance_timeout_ms", I32, False),
    ("assignment_decoded", B, True),  # None: not protocol type "consumer"; False: undecodable assignment bytes
)

ASSIGNED_PARTITIONS = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("generation_id", I32, False),
    ("member_id", S, False),
    ("group_instance_id", S, True),
    ("topic", S, False),
    ("partition_index", I32, False),
)

GROUP_REMOVALS = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("cause", S, False),
    ("timestamp_ms", L, False),
)

OFFSET_COMMITS = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("topic", S, False),
    ("partition_index", I32, False),
    ("committed_offset", L, False),
    ("leader_epoch", I32, False),
    ("commit_timestamp_ms", L, False),
    ("expire_timestamp_ms", L, True),
    ("member_id", S, False),  # "" for admin/simple commits
    ("generation_id", I32, False),  # -1 for admin/simple commits
)

OFFSET_REMOVALS = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("topic", S, False),
    ("partition_index", I32, False),
    ("cause", S, False),
    ("timestamp_ms", L, False),
)

REBALANCE_STARTED = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("generation_id", I32, False),  # the generation being left
    ("cause", S, False),
    ("member_id", S, True),
    ("group_instance_id", S, True),
    ("reason", S, True),
    ("previous_state", S, False),
    ("timestamp_ms", L, False),
)

JOIN_PHASE_COMPLETED = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("generation_id", I32, False),  # the new generation
    ("state", S, False),  # CompletingRebalance or Empty
    ("protocol_type", S, True),
    ("protocol", S, True),
    ("leader", S, True),
    ("member_count", I32, False),
    ("static_member_count", I32, False),
    ("join_duration_ms", L, False),
    ("timestamp_ms", L, False),
)

GROUP_STABILIZED = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("generation_id", I32, False),
    ("sync_duration_ms", L, False),
    ("rebalance_duration_ms", L, False),
    ("timestamp_ms", L, False),
)

MEMBER_JOINED = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("member_id", S, False),
    ("group_instance_id", S, True),
    ("client_id", S, False),
    ("client_host", S, False),
    ("session_timeout_ms", I32, False),
    ("rebalance_timeout_ms", I32, False),
    ("timestamp_ms", L, False),
)

MEMBER_REMOVED = _schema(
    ("position", L, False),
    ("group_id", S, False),
    ("member_id", S, False),
    ("group_instance_id", S, True),
    ("cause", S, False),
    ("reason", S, True),
    ("generation_id", I32, False),
    ("timestamp_ms", L, False),
)

# The data path's record batches, without their bytes: where each partition's log end was when (spark_jobs/lag.py).
PARTITION_BATCHES = _schema(
    ("topic", S, False),
    ("partition_index", I32, False),
    ("base_offset", L, False),
    ("last_offset", L, False),
    ("appended_ms", L, False),  # when the broker appended the batch
    ("position", L, False),
)

# Admin actions with their actor (the daemon's audit trail, ``security.audit.AdminAction``): who reset offsets.
ADMIN_ACTIONS = _schema(
    ("position", L, False),
    ("timestamp_ms", L, False),  # when the action was done (once durable)
    ("via", S, False),  # http | kafka
    ("action", S, False),  # offsets.reset, offsets.alter, group.delete, ...
    ("resource", S, False),
    ("group_id", S, True),  # None: not about a group (a topic, a user, an ACL)
    ("principal", S, False),
    ("client_id", S, True),
    ("client_host", S, True),
    ("detail", S, False),
)

# Table name (as in the database and in a Parquet export: one sub-directory per table) -> canonical schema.
TABLES: dict[str, StructType] = {
    "group_metadata_log": GROUP_METADATA_LOG,
    "generation_members": GENERATION_MEMBERS,
    "assigned_partitions": ASSIGNED_PARTITIONS,
    "group_removals": GROUP_REMOVALS,
    "offset_commits": OFFSET_COMMITS,
    "offset_removals": OFFSET_REMOVALS,
    "rebalance_started": REBALANCE_STARTED,
    "join_phase_completed": JOIN_PHASE_COMPLETED,
    "group_stabilized": GROUP_STABILIZED,
    "member_joined": MEMBER_JOINED,
    "member_removed": MEMBER_REMOVED,
    "partition_batches": PARTITION_BATCHES,
    "admin_actions": ADMIN_ACTIONS,
}

# Tables a source may lack without a warning (an export made before ``kgc export`` wrote the batches' offsets).
# Their metrics are then empty or null.
OPTIONAL_TABLES = frozenset({"partition_batches", "admin_actions"})

# Tables without a group (not filtered by the report's group glob).
GROUPLESS_TABLES = frozenset({"partition_batches"})

# Group states as the daemon writes them.
EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

# MemberRemoved causes, split the way the churn metric reports them.
LEAVE_CAUSES = ("left", "admin")
EVICTION_CAUSES = ("session_timeout", "join_timeout", "sync_timeout", "fenced", "group_max_size", "internal_error")
GROUP_DELETION_CAUSES = ("group_deleted",)


@dataclass(frozen=True)
class Inputs:
    """One canonical DataFrame per table (see ``TABLES``); what every metric transform reads."""

    group_metadata_log: DataFrame
    generation_members: DataFrame
    assigned_partitions: DataFrame
    group_removals: DataFrame
    offset_commits: DataFrame
    offset_removals: DataFrame
    rebalance_started: DataFrame
    join_phase_completed: DataFrame
    group_stabilized: DataFrame
    member_joined: DataFrame
    member_removed: DataFrame
    partition_batches: DataFrame
    admin_actions: DataFrame

    @classmethod
    def from_tables(cls, spark: SparkSession, tables: dict[str, DataFrame]) -> Inputs:
        """Build from a mapping; a table that is missing becomes an empty DataFrame of its schema."""
        unknown = set(tables) - set(TABLES)
        if unknown:
            raise ValueError(f"unknown tables: {sorted(unknown)}")
        frames = {n: tables[n] if n in tables else spark.createDataFrame([], TABLES[n]) for n in TABLES}
        return cls(**frames)

    def items(self) -> list[tuple[str, DataFrame]]:
        return [(f.name, getattr(self, f.name)) for f in fields(self)]

    def map(self, fn: Callable[[str, DataFrame], DataFrame]) -> Inputs:
        """Apply ``fn(name, df) -> df`` to every table."""
        return Inputs(**{name: fn(name, df) for name, df in self.items()})
