"""All metrics of the report, computed from the canonical inputs: ``compute_metrics(inputs, config) -> tables``."""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import assignments, commits, lag, rebalances, timeline
from .config import ReportConfig, ReportRange
from .schema import GROUPLESS_TABLES, Inputs

# The tables of group events and their time column (partition_batches is no event of a group).
_TIME_COLUMNS = {
    "group_metadata_log": "timestamp_ms",
    "group_removals": "timestamp_ms",
    "offset_commits": "commit_timestamp_ms",
    "offset_removals": "timestamp_ms",
    "rebalance_started": "timestamp_ms",
    "join_phase_completed": "timestamp_ms",
    "group_stabilized": "timestamp_ms",
    "member_joined": "timestamp_ms",
    "member_removed": "timestamp_ms",
}


def filter_groups(inputs: Inputs, glob: str | None) -> Inputs:
    """Keep the groups whose id matches a shell-style glob (``orders-*``); all when ``glob`` is None."""
    if not glob:
        return inputs
    regex = fnmatch.translate(glob)
    return inputs.map(lambda name, df: df if name in GROUPLESS_TABLES else df.where(F.col("group_id").rlike(regex)))


def first_event_ms(inputs: Inputs) -> int | None:
    """The time of the first stored event (None when there is none)."""
    lows: DataFrame | None = None
    for name, col in _TIME_COLUMNS.items():
        df = getattr(inputs, name).select(F.min(col).alias("lo"))
        lows = df if lows is None else lows.unionByName(df)
    assert lows is not None
    row = lows.agg(F.min("lo").alias("lo")).first()
    return row["lo"] if row is not None else None


def now_ms() -> int:
    return int(time.time() * 1000)


def resolve_range(inputs: Inputs, config: ReportConfig, now: int | None = None) -> ReportRange:
    """Fill a missing since/until: ``until`` is the time the report runs (``now``), the same for every group whatever
    the data holds (a group that stopped writing is still observed up to now: its open state, its uncommitted
    partitions); ``since`` is the first stored event of ``inputs`` (pass the inputs before any group filter, so the
    range does not depend on which groups are in the report)."""
    until = config.until_ms if config.until_ms is not None else (now if now is not None else now_ms())
    if config.since_ms is not None:
        return ReportRange(config.since_ms, until)
    first = first_event_ms(inputs)
    return ReportRange(until if first is None else min(first, until), until)


def compute_metrics(
    inputs: Inputs, config: ReportConfig, rng: ReportRange, keep: Callable[[DataFrame], DataFrame] | None = None
) -> dict[str, DataFrame]:
    """Metric name -> DataFrame (lazy). ``inputs`` should already be filtered to the groups of interest.
    ``keep`` is applied to the intermediate frames several metrics read (state intervals, rebalance episodes, commit
    steps): the job persists them so that each is computed once."""
    keep = keep or (lambda df: df)
    intervals = keep(timeline.state_intervals(inputs, rng))
    episodes = keep(timeline.rebalance_episodes(inputs, rng))
    steps = keep(commits.commit_steps(inputs))
    cadence_partition, cadence_group = commits.commit_cadence(steps, config, rng)
    commit_lag = keep(lag.commit_lag(inputs, rng))
    lag_partition, lag_group = lag.lag_windows(commit_lag)
    return {
        "rebalance_episodes": episodes,
        "state_intervals": intervals,
        "rebalance_counts": rebalances.rebalance_counts(episodes, rng),
        "rebalance_causes": rebalances.cause_mix(episodes, rng),
        "phase_durations": rebalances.phase_durations(episodes, config, rng),
        "state_time": rebalances.state_time(intervals, rng),
        "member_churn": rebalances.member_churn(inputs, rng),
        "evictions": rebalances.evictions(inputs, rng),
        "membership": rebalances.membership(inputs, rng),
        "assignment_changes": assignments.assignment_changes(inputs, rng),
        "commit_cadence_partition": cadence_partition,
        "commit_cadence_group": cadence_group,
        "commit_rewinds": commits.commit_rewinds(steps, rng),
        "offset_resets": commits.offset_resets(steps, rng, inputs.admin_actions),
        "stale_partitions": commits.stale_partitions(inputs, intervals, config, rng),
        "expiring_groups": commits.expiring_groups(inputs, config, rng),
        "commit_lag": commit_lag,
        "lag_windows": lag_partition,
        "group_lag_windows": lag_group,
    }
