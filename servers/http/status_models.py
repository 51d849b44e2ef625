"""The bodies of ``GET /v1/groups/{group}/status``: Burrow's consumer group status (``docs/consumer-status.md``).

Burrow's field names where it has them (``status``, ``complete``, ``partitions``, ``partition_count``, ``maxlag``,
``totallag``, ``current_lag``, ``start``/``end``), times in epoch milliseconds like the rest of this API.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from runtime.lag_evaluation import CommitSample, GroupEvaluation, GroupStatus, PartitionEvaluation, PartitionStatus

from .models import Out


class GroupStatusQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    all: bool = Field(
        default=False,
        description="List every partition; by default only those not OK are listed (Burrow's /status; its /lag "
        "lists all).",
    )


class CommitSampleView(Out):
    offset: int
    timestamp_ms: int = Field(description="The commit's time.")
    lag: int | None = Field(description="Log end minus the offset when the commit was durable; null when unknown "
                            "(windows started from the offsets loaded at start).")  # fmt: skip


class PartitionStatusView(Out):
    topic: str
    partition: int
    status: PartitionStatus = Field(description="OK, WARN (lag growing), STOP, STALL or REWIND.")
    start: CommitSampleView | None = Field(description="The oldest commit of the window.")
    end: CommitSampleView | None = Field(description="The newest commit of the window.")
    current_lag: int = Field(description="Log end now minus the last committed offset.")
    complete: float = Field(description="Commits in the window / intervals (0.1 to 1.0).")


class GroupStatusView(Out):
    group_id: str
    status: GroupStatus = Field(description="OK, WARN, or ERR (a partition in STOP, STALL or REWIND).")
    complete: float = Field(description="Share of the partitions whose window is full.")
    partitions: list[PartitionStatusView] = Field(description="The partitions not OK (every one with all=true).")
    partition_count: int = Field(description="Partitions the group has committed offsets for.")
    maxlag: PartitionStatusView | None = Field(description="The partition with the largest current lag.")
    totallag: int = Field(description="Sum of the partitions' current lag.")
    intervals: int = Field(description="Commits kept per partition (lag.intervals).")
    evaluated_at_ms: int


def _sample(s: CommitSample | None) -> CommitSampleView | None:
    return None if s is None else CommitSampleView(offset=s.offset, timestamp_ms=s.timestamp_ms, lag=s.lag)


def partition_view(p: PartitionEvaluation) -> PartitionStatusView:
    return PartitionStatusView(
        topic=p.topic, partition=p.partition, status=p.status, start=_sample(p.start), end=_sample(p.end),
        current_lag=p.current_lag, complete=p.complete,
    )  # fmt: skip


def group_status_view(ev: GroupEvaluation, intervals: int, *, all_partitions: bool) -> GroupStatusView:
    listed = ev.partitions if all_partitions else ev.problems()
    return GroupStatusView(
        group_id=ev.group_id,
        status=ev.status,
        complete=ev.complete,
        partitions=[partition_view(p) for p in listed],
        partition_count=len(ev.partitions),
        maxlag=None if ev.maxlag is None else partition_view(ev.maxlag),
        totallag=ev.totallag,
        intervals=intervals,
        evaluated_at_ms=ev.evaluated_at_ms,
    )
