"""All metrics of the report, computed from the canonical inputs: ``compute_metrics(inputs, config) -> tables``."""

from __future__ import annotations

import fnmatch

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import assignments, commits, rebalances, timeline
from .config import ReportConfig, ReportRange
from .schema import Inputs

# Tables that have a group_id column (all of them).
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
    return inputs.map(lambda _name, df: df.where(F.col("group_id").rlike(regex)))


def resolve_range(inputs: Inputs, config: ReportConfig) -> ReportRange:
    """Fill a missing since/until from the data: the first event, and just after the last one."""
    if config.since_ms is not None and config.until_ms is not None:
        return ReportRange(config.since_ms, config.until_ms)
    bounds: DataFrame | None = None
    for name, col in _TIME_COLUMNS.items():
        df = getattr(inputs, name).select(F.min(col).alias("lo"), F.max(col).alias("hi"))
        bounds = df if bounds is None else bounds.unionByName(df)
    assert bounds is not None
    row = bounds.agg(F.min("lo").alias("lo"), F.max("hi").alias("hi")).first()
    lo = row["lo"] if row and row["lo"] is not None else 0
    hi = row["hi"] + 1 if row and row["hi"] is not None else lo
    since = config.since_ms if config.since_ms is not None else lo
    until = config.until_ms if config.until_ms is not None else max(hi, since)
    return ReportRange(since, until)


def compute_metrics(inputs: Inputs, config: ReportConfig, rng: ReportRange) -> dict[str, DataFrame]:
    """Metric name -> DataFrame (lazy). ``inputs`` should already be filtered to the groups of interest."""
    intervals = timeline.state_intervals(inputs, rng)
    episodes = timeline.rebalance_episodes(inputs, rng)
    steps = commits.commit_steps(inputs)
    cadence_partition, cadence_group = commits.commit_cadence(steps, config, rng)
    return {
        "rebalance_episodes": episodes,
        "state_intervals": intervals,
        "rebalance_counts": rebalances.rebalance_counts(episodes, rng),
        "rebalance_causes": rebalances.cause_mix(episodes, rng),
        "phase_durations": rebalances.phase_durations(episodes, config, rng),
        "state_time": rebalances.state_time(intervals, rng),
        "member_churn": rebalances.member_churn(inputs, rng),
        "membership": rebalances.membership(inputs, rng),
        "assignment_changes": assignments.assignment_changes(inputs, rng),
        "commit_cadence_partition": cadence_partition,
        "commit_cadence_group": cadence_group,
        "commit_rewinds": commits.commit_rewinds(steps, rng),
        "stale_partitions": commits.stale_partitions(inputs, intervals, config, rng),
        "expiring_groups": commits.expiring_groups(inputs, config, rng),
    }
