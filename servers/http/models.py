"""Pydantic models of every body and query of the operator HTTP API; the OpenAPI document is generated from them.

Times are epoch milliseconds (``*_ms``) like everything the coordinator stores; durations are milliseconds too.
Query models validate the query string (unknown parameters are ignored, wrong types are a 400).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, WithJsonSchema

from coordinator.history import RebalanceOutcome  # the core's outcomes are the API's
from runtime.lag_evaluation import GroupStatus

# Kafka's limits on names: group ids are any non-empty string; topic names are legal Kafka topic names.
TOPIC_NAME_PATTERN = r"^(?!\.{1,2}$)[a-zA-Z0-9._-]{1,249}$"
MAX_PAGE = 1000


def _json_integer(value: object) -> object:
    """JSON Schema's integer: 3 and 3.0 are integers, true and "3" are not (the bodies are parsed strictly)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_INTEGER = BeforeValidator(_json_integer)


class Body(BaseModel):
    """Request bodies are parsed strictly: ``false`` is not 0, ``"1"`` is not 1."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------------------------------- errors


class ErrorBody(Out):
    """Every 4xx/5xx answer."""

    error: str = Field(description="What went wrong, for a human.")
    status: int = Field(description="The HTTP status, repeated.")
    details: list[dict[str, object]] | None = Field(default=None, description="Validation errors, when any.")


# ------------------------------------------------------------------------------------------------------ queries


class GroupStateName(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class PageQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="Page size.")] = 100
    offset: Annotated[int, Field(ge=0, le=2**31 - 1, description="Items to skip.")] = 0


class GroupsQuery(PageQuery):
    state: list[GroupStateName] | None = Field(
        default=None, description="Only groups in these states (repeat the parameter or separate with commas)."
    )
    protocol_type: str | None = Field(default=None, description='Only groups of this protocol type ("" = none).')


# An instant in a query: ISO 8601 or a number of epoch seconds/milliseconds (what pydantic's datetime accepts), so the
# schema says both - "until=0.5" is valid, not a string that fails the date-time format. Numbers up to the last
# millisecond of year 9999 (the largest datetime).
_MAX_INSTANT_MS = 253_402_300_799_999
_INSTANT = WithJsonSchema(
    {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "number", "minimum": 0, "maximum": _MAX_INSTANT_MS}]}
)


def _instant_in_range(value: Any) -> Any:
    """A number outside [0, the largest datetime's ms] is refused as the schema says (pydantic would take some)."""
    try:
        number = float(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None
    except ValueError:
        return value  # an ISO 8601 string: pydantic parses it
    if number is not None and not 0 <= number <= _MAX_INSTANT_MS:
        raise ValueError(f"an epoch instant must be within [0, {_MAX_INSTANT_MS}]")
    return value


_IN_RANGE = BeforeValidator(_instant_in_range)


class TimeRangeQuery(PageQuery):
    since: Annotated[datetime | None, _IN_RANGE, _INSTANT] = Field(
        default=None, description="From this instant, inclusive (ISO 8601, or epoch seconds/milliseconds)."
    )
    until: Annotated[datetime | None, _IN_RANGE, _INSTANT] = Field(
        default=None, description="Up to this instant, exclusive."
    )


# ------------------------------------------------------------------------------------------------------- groups


class GroupSummary(Out):
    group_id: str
    state: GroupStateName
    protocol_type: str = Field(description='"" when the group has none (offsets-only "simple" group).')
    protocol: str | None = Field(description="The selected protocol (assignor) name.")
    generation_id: int
    members: int = Field(description="Member count.")
    status: GroupStatus | None = Field(
        default=None,
        description="Burrow's evaluation of its commits (GET /v1/groups/{group}/status); null before any commit.",
    )


class GroupList(Out):
    groups: list[GroupSummary]
    total: int = Field(description="Groups matching the filter, before paging.")
    limit: int
    offset: int


class MemberView(Out):
    member_id: str
    group_instance_id: str | None = Field(description="Set for static members (KIP-345).")
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    since_last_heartbeat_ms: int = Field(description="Milliseconds since the member's last heartbeat.")
    protocols: list[str] = Field(description="Protocol (assignor) names the member supports, by preference.")
    subscription: list[str] | None = Field(
        default=None, description="consumer protocol only: the subscribed topics (selected protocol's metadata)."
    )
    assignment: dict[str, list[int]] | None = Field(
        default=None, description="consumer protocol only: the assigned partitions by topic."
    )
    decode_error: str | None = Field(default=None, description="Why subscription/assignment could not be decoded.")


class GroupDetail(Out):
    group_id: str
    state: GroupStateName
    state_since_ms: int = Field(description="When the group entered its state.")
    protocol_type: str
    protocol: str | None
    generation_id: int
    leader: str | None
    members: list[MemberView]
    lag: GroupLagView = Field(description="The lag of each partition the group committed or is assigned.")


# ---------------------------------------------------------------------------------------------------------- lag


class PartitionLagView(Out):
    """One partition of a group (``runtime.lag``): every partition it committed or its members are assigned."""

    topic: str
    partition: int
    committed_offset: int | None = Field(description="The group's committed offset; null when it has none.")
    log_start_offset: int | None = Field(description="The log start offset; null for a partition that does not exist.")
    log_end_offset: int | None = Field(description="The high watermark (what consumers can read up to).")
    lag: int | None = Field(description="log_end_offset - committed_offset, never negative; null without a commit.")
    lag_ms: int | None = Field(
        description="Now minus the broker's append time of the first unconsumed message; 0 when caught up, null "
        "without a commit."
    )
    member_id: str | None = Field(description="The member the partition is assigned to now; null when none.")
    client_id: str | None
    host: str | None


class GroupLagView(Out):
    group: str
    now_ms: int = Field(description="The instant the lag in time is measured at (epoch ms).")
    total_lag: int = Field(description="The sum of the partitions' lag in messages.")
    max_lag_ms: int | None = Field(description="The largest lag in time of a partition; null when none has a commit.")
    partitions: list[PartitionLagView]


class GroupLagSummary(Out):
    # Room for a Burrow-style "status" (OK/WARN/ERR...) that another part of the API evaluates.
    group: str
    state: GroupStateName | None = Field(description="null for offsets without a live group.")
    total_lag: int
    max_lag: int | None = Field(description="The largest lag in messages of a partition; null when none has one.")
    max_lag_ms: int | None
    partitions: int = Field(description="Partitions committed or assigned.")


class LagList(Out):
    now_ms: int
    groups: list[GroupLagSummary]


# ------------------------------------------------------------------------------------------------------ offsets


class CommittedOffset(Out):
    topic: str
    partition: int
    offset: int
    leader_epoch: int = Field(description="-1 when none.")
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = Field(description="Only for commits with an explicit retention time.")


class GroupOffsets(Out):
    group_id: str
    offsets: list[CommittedOffset]


class CommitEntry(Out):
    """One partition of one OffsetCommit, as the commit log keeps it."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    member_id: str = Field(description='"" for admin commits.')
    generation_id: int = Field(description="-1 for admin commits (offset resets, simple groups).")
    admin: bool = Field(description="An admin commit (generation -1, no member).")


class CommitLog(Out):
    group_id: str
    commits: list[CommitEntry] = Field(description="Newest first.")
    total: int
    limit: int
    offset: int


# ---------------------------------------------------------------------------------------------------- rebalances


class MemberIn(Out):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    timestamp_ms: int


class MemberOut(Out):
    member_id: str
    group_instance_id: str | None
    cause: str = Field(description="left, admin, session_timeout, join_timeout, sync_timeout, fenced, ...")
    reason: str | None
    timestamp_ms: int


class PartitionMove(Out):
    topic: str
    partition: int
    from_member: str | None = Field(description="None: the partition was not assigned before.")
    to_member: str | None = Field(description="None: the partition is no longer assigned.")


class RebalanceView(Out):
    group_id: str
    cause: str = Field(description="new_member, member_left, session_timeout, admin_action, ...")
    reason: str | None = Field(description="The client's KIP-800 reason or a short detail.")
    member_id: str | None = Field(description="The member whose action caused it, when there is one.")
    group_instance_id: str | None
    previous_state: str
    from_generation: int
    to_generation: int | None
    started_ms: int
    join_completed_ms: int | None
    stabilized_ms: int | None
    join_duration_ms: int | None
    sync_duration_ms: int | None
    duration_ms: int | None = Field(description="Start to Stable (or to the end of the join phase when Empty).")
    outcome: RebalanceOutcome
    protocol: str | None
    leader: str | None
    members: list[str] = Field(description="Members of the new generation, sorted.")
    members_in: list[MemberIn]
    members_out: list[MemberOut]
    partitions_moved: list[PartitionMove] | None = Field(
        description="consumer protocol only, once Stable: partitions whose owner changed."
    )


class RebalanceHistory(Out):
    group_id: str
    rebalances: list[RebalanceView] = Field(description="Newest first.")
    total: int
    limit: int
    offset: int


# ------------------------------------------------------------------------------------------------------- topics


class PartitionLog(Out):
    partition: int
    log_start_offset: int = Field(description="The first offset a Fetch can read (moved by retention, DeleteRecords).")
    log_end_offset: int = Field(description="The high watermark: the end of what is durable and readable.")
    size_bytes: int = Field(description="The bytes of the record batches kept.")


class TopicView(Out):
    name: str
    partitions: int
    internal: bool = Field(default=False, description="Kafka's internal topic of offsets (__consumer_offsets).")
    configs: dict[str, str] = Field(
        default_factory=dict, description="Every served topic config with its value (the topic's own or the default)."
    )
    own_configs: dict[str, str] = Field(default_factory=dict, description="The configs set on the topic itself.")
    size_bytes: int = 0
    log: list[PartitionLog] = Field(default_factory=list, description="Per partition: its log start, end and size.")


class TopicList(Out):
    topics: list[TopicView]


class TopicCreate(Body):
    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")

    name: Annotated[str, Field(pattern=TOPIC_NAME_PATTERN, description="A legal Kafka topic name.")]
    partitions: Annotated[int, Field(ge=1, le=100_000), _INTEGER]


class TopicConfigChange(Body):
    configs: dict[str, str | None] = Field(
        description="Topic configs to set (a string) or to put back to their default (null), e.g. "
        '{"retention.ms": "3600000", "retention.bytes": null}.'
    )


class TopicDeleted(Out):
    name: str
    deleted: bool = True


# ------------------------------------------------------------------------------------------------------ actions


class ResetStrategy(StrEnum):
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_CURRENT = "to-current"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"
    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"
    FROM_FILE = "from-file"


class TopicSelection(Body):
    topic: Annotated[str, Field(min_length=1, max_length=249)]
    partitions: list[Annotated[int, Field(ge=0, le=2**31 - 1), _INTEGER]] | None = Field(
        default=None, description="Omit for every partition of the topic."
    )


class _Reset(Body):
    topics: Literal["all"] | Annotated[list[TopicSelection], Field(min_length=1, max_length=1000)] = Field(
        description='"all": every partition the group has committed (--all-topics); or the partitions to reset '
        "(--topic)."
    )
    execute: bool = Field(default=False, description="Apply the plan. Without it the answer is a dry run.")


class ResetToEarliest(_Reset):
    """The partition's log start offset (Kafka's ListOffsets EARLIEST)."""

    strategy: Literal["to-earliest"]


class ResetToLatest(_Reset):
    """The partition's log end offset, the high watermark (Kafka's ListOffsets LATEST)."""

    strategy: Literal["to-latest"]


class ResetToCurrent(_Reset):
    """The committed offset (the log end offset where there is none, as Kafka's tool does)."""

    strategy: Literal["to-current"]


class ResetToOffset(_Reset):
    """That offset, clamped into [log start, log end] as kafka-consumer-groups.sh does."""

    strategy: Literal["to-offset"]
    to_offset: Annotated[int, Field(ge=0, le=2**63 - 1), _INTEGER]


class ResetShiftBy(_Reset):
    """The committed offset plus ``shift_by``, clamped into [log start, log end]; partitions without a committed
    offset are refused."""

    strategy: Literal["shift-by"]
    shift_by: Annotated[int, Field(ge=-(2**62), le=2**62), _INTEGER]


class ResetToDatetime(_Reset):
    """The first offset whose batch timestamp is at or after that instant (ListOffsets by timestamp); the log end
    offset where every message is older."""

    strategy: Literal["to-datetime"]
    to_datetime: AwareDatetime = Field(description="ISO 8601 with a time zone, e.g. 2026-01-01T00:00:00Z")


class ResetByDuration(_Reset):
    """to-datetime of now minus ``by_duration_ms``."""

    strategy: Literal["by-duration"]
    by_duration_ms: Annotated[int, Field(ge=0, le=10**13), _INTEGER]


class PlannedOffset(Body):
    topic: Annotated[str, Field(min_length=1, max_length=249)]
    partition: Annotated[int, Field(ge=0, le=2**31 - 1), _INTEGER]
    offset: Annotated[int, Field(ge=0, le=2**63 - 1), _INTEGER]


class ResetFromFile(Body):
    """The offsets of a reset plan, per partition (``--from-file``: the CSV ``topic,partition,offset`` that
    ``--export`` writes). The partitions are the plan's; there is no ``topics`` field."""

    strategy: Literal["from-file"]
    offsets: Annotated[list[PlannedOffset], Field(min_length=1, max_length=100_000)]
    execute: bool = Field(default=False, description="Apply the plan. Without it the answer is a dry run.")


OffsetResetRequest = Annotated[
    ResetToEarliest
    | ResetToLatest
    | ResetToCurrent
    | ResetToOffset
    | ResetShiftBy
    | ResetToDatetime
    | ResetByDuration
    | ResetFromFile,
    Field(discriminator="strategy"),
]
OFFSET_RESET_REQUEST: TypeAdapter[OffsetResetRequest] = TypeAdapter(OffsetResetRequest)


class PartitionReset(Out):
    topic: str
    partition: int
    current_offset: int | None = Field(description="The committed offset before the reset (None: none).")
    new_offset: int


class OffsetResetResult(Out):
    group_id: str
    strategy: ResetStrategy
    dry_run: bool
    partitions: list[PartitionReset]


class OffsetsDelete(Body):
    """The partitions whose committed offsets to delete (Kafka's OffsetDelete, ``--delete-offsets``)."""

    topics: Annotated[list[TopicSelection], Field(min_length=1, max_length=1000)] = Field(
        description="Topics, each with its partitions or, without them, every partition of the topic (the "
        "registered topic's partitions, or the ones the group has committed for a topic that is not registered)."
    )


class PartitionDeletion(Out):
    topic: str
    partition: int
    error: str | None = Field(
        description="None: deleted (or there was nothing to delete). Else Kafka's error name: "
        "GROUP_SUBSCRIBED_TO_TOPIC (a live member of the group subscribes to the topic), "
        "UNKNOWN_TOPIC_OR_PARTITION (no such topic or partition)."
    )


class DeletedOffsets(Out):
    group_id: str
    partitions: list[PartitionDeletion]


class DeletedGroup(Out):
    group_id: str
    deleted: Literal[True] = True


class RemovedMember(Out):
    group_id: str
    group_instance_id: str
    removed: Literal[True] = True


# ------------------------------------------------------------------------------------------------------- health


class Health(Out):
    status: Literal["ok"] = "ok"


class Readiness(Out):
    ready: bool
    detail: str


# ------------------------------------------------------------------------------------------- needs attention


class AttentionQuery(BaseModel):
    """Thresholds of the "needs attention" list; 0 switches a check off."""

    model_config = ConfigDict(extra="ignore")

    flapping_per_hour: Annotated[
        int,
        Field(
            ge=0,
            le=1_000_000,
            description=("A group that started at least this many rebalances in the last hour is flapping."),
        ),
    ] = 6
    stale_heartbeat_pct: Annotated[
        int,
        Field(
            ge=0,
            le=100,
            description=(
                "A member of a Stable group that has not heartbeated (since its last heartbeat or since the group "
                "turned Stable) for this percentage of its session timeout is stale."
            ),
        ),
    ] = 50
    stuck_ms: Annotated[
        int,
        Field(
            ge=0,
            le=10**12,
            description=("A group in PreparingRebalance or CompletingRebalance for longer than this is stuck."),
        ),
    ] = 120_000
    quiet_commits_ms: Annotated[
        int,
        Field(
            ge=0,
            le=10**12,
            description=(
                "A Stable group with members and no offset commit for this long (since its last commit, or since it "
                "turned Stable) has gone quiet."
            ),
        ),
    ] = 600_000


class AttentionKind(StrEnum):
    STUCK = "stuck"
    STALE_HEARTBEAT = "stale_heartbeat"
    FLAPPING = "flapping"
    JOIN_REFUSED = "join_refused"
    NO_PARTITIONS = "no_partitions"
    QUIET_COMMITS = "quiet_commits"


class AttentionItem(Out):
    kind: AttentionKind
    group_id: str
    member_id: str | None = Field(description="The member concerned (stale_heartbeat, no_partitions).")
    group_instance_id: str | None
    detail: str = Field(description="What is wrong, for a human.")
    since_ms: int | None = Field(
        description="Since when, when known (epoch milliseconds); join_refused: the last refusal."
    )


class GroupHealth(Out):
    """One group's numbers for the "needs attention" list. Rebalance and refusal counts and the events behind them
    are kept in memory since the daemon started."""

    group_id: str
    state: GroupStateName
    state_since_ms: int
    members: int
    rebalances_last_hour: int = Field(description="Rebalances started in the last hour (since the daemon started).")
    flapping: bool = Field(description="rebalances_last_hour reached flapping_per_hour.")
    refused_joins_last_hour: int = Field(description="JoinGroups refused in the last hour (in memory, since start).")
    last_commit_ms: int | None = Field(description="The group's last durable offset commit; None: none.")
    last_commit_age_ms: int | None
    stale_members: list[str] = Field(description="Member ids whose last heartbeat is stale.")
    members_without_partitions: list[str] = Field(
        description="Stable consumer-protocol groups only: member ids assigned no partition."
    )


class AttentionThresholds(Out):
    flapping_per_hour: int
    stale_heartbeat_pct: int
    stuck_ms: int
    quiet_commits_ms: int


class Attention(Out):
    now_ms: int = Field(description="The daemon's clock when the list was computed (epoch milliseconds).")
    thresholds: AttentionThresholds
    items: list[AttentionItem] = Field(
        description="Most urgent kind first (stuck, stale heartbeats, flapping, "
        "refused joins, members without partitions, quiet commits)."
    )
    groups: list[GroupHealth] = Field(description="Every group, by group id.")


class GroupEventKind(StrEnum):
    JOIN_REFUSED = "join_refused"
    STATIC_REPLACEMENT = "static_replacement"
    GROUP_DELETED = "group_deleted"
    GROUP_RECREATED = "group_recreated"


class GroupEventSource(StrEnum):
    HISTORY = "history"  # the stored rebalance history: survives a restart
    MEMORY = "memory"  # kept in memory since the daemon started: lost at a restart


class GroupEventView(Out):
    kind: GroupEventKind
    source: GroupEventSource = Field(
        description="history: folded from the stored records (static_replacement, group_deleted, group_recreated; "
        "survives a restart, pruned with the history retention). memory: join_refused, which no record holds - kept "
        "in memory since the daemon started (the last 50 per group), lost at a restart."
    )
    group_id: str
    timestamp_ms: int
    detail: str
    member_id: str | None = Field(
        description='join_refused: the refused member id ("" for a new member); '
        "static_replacement: the new instance's member id."
    )
    previous_member_id: str | None = Field(description="static_replacement: the fenced member id.")
    group_instance_id: str | None
    client_id: str | None
    client_host: str | None
    error: str | None = Field(
        description="join_refused: Kafka's error name (kgc_join_refused_total's error label, in lower case there)."
    )
    cause: str | None = Field(description="group_deleted: deleted (DeleteGroups, operator API) or expired.")


class GroupEvents(Out):
    group_id: str
    events: list[GroupEventView] = Field(
        description="Newest first: the stored events and the in-memory refused joins merged by time, filtered on "
        "the time, then paged."
    )
    total: int = Field(description="Events in the time range, before paging.")
    limit: int
    offset: int
    note: str = Field(description="Which events survive a restart and which do not.")


# ---------------------------------------------------------------------------------------------------------- audit


class AuditQuery(TimeRangeQuery):
    group: str | None = Field(default=None, description="Only the actions on this group.")


class AuditEntry(Out):
    timestamp_ms: int
    via: str = Field(description="http (the operator API) or kafka (a Kafka admin API).")
    action: str = Field(
        description="group.delete, member.remove, offsets.reset, offsets.alter, offsets.delete, topic.create, "
        "topic.delete, topic.grow, topic.configs, records.delete, acl.*, user.*"
    )
    resource: str
    group_id: str | None = None
    principal: str = Field(description="User:<name>, token (the legacy single token) or User:ANONYMOUS.")
    client_id: str | None = None
    client_host: str | None = None
    detail: str


class AuditLog(Out):
    actions: list[AuditEntry] = Field(description="Newest first.")
    total: int
    limit: int
    offset: int
