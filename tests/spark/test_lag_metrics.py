"""Lag over time (spark_jobs/lag.py): the log end at each commit from the stored batches, the lag in messages and
in time, and the per-window summaries, against rows worked out by hand."""

from __future__ import annotations

from pyspark.sql import Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_jobs import lag
from spark_jobs.config import ReportRange

from .history import History, M

S = 1000


def history() -> History:
    return (
        History()
        # t/0: batches [0-9] at 1 s, [10-19] at 2 s, [20-39] at 61 s, [40-49] at 62 s
        .batch(1, "t", 0, 0, 9, 1 * S)
        .batch(2, "t", 0, 10, 19, 2 * S)
        .commit(3, "g", "t", 0, 0, 2 * S)  # log end 20 (the batch at 2 s counts), first unconsumed: [0-9] at 1 s
        .commit(4, "g", "t", 0, 20, 3 * S)  # caught up
        .batch(5, "t", 0, 20, 39, 61 * S)
        .batch(6, "t", 0, 40, 49, 62 * S)
        .commit(7, "g", "t", 0, 25, 63 * S)  # log end 50, lag 25, first unconsumed [20-39] at 61 s
        .commit(8, "g", "t", 0, 50, 70 * S)
        .commit(9, "h", "t", 0, 10, 0)  # before any batch: log end 0, lag 0
        .commit(10, "g", "u", 0, 5, 4 * S)  # no batch of u/0 at all: unknown
        .commit(11, "g", "t", 0, 1, 200 * S)  # outside the range
    )


RANGE = ReportRange(0, 100 * S)


def test_commit_lag_in_messages_and_in_time(spark: SparkSession) -> None:
    got = lag.commit_lag(history().inputs(spark), RANGE)
    expected = [
        Row(group_id="g", topic="t", partition_index=0, position=3, commit_timestamp_ms=2 * S, committed_offset=0,
            log_end_offset=20, lag_messages=20, lag_ms=1 * S),
        Row(group_id="g", topic="t", partition_index=0, position=4, commit_timestamp_ms=3 * S, committed_offset=20,
            log_end_offset=20, lag_messages=0, lag_ms=0),
        Row(group_id="g", topic="t", partition_index=0, position=7, commit_timestamp_ms=63 * S, committed_offset=25,
            log_end_offset=50, lag_messages=25, lag_ms=2 * S),
        Row(group_id="g", topic="t", partition_index=0, position=8, commit_timestamp_ms=70 * S, committed_offset=50,
            log_end_offset=50, lag_messages=0, lag_ms=0),
        Row(group_id="h", topic="t", partition_index=0, position=9, commit_timestamp_ms=0, committed_offset=10,
            log_end_offset=0, lag_messages=0, lag_ms=0),
        Row(group_id="g", topic="u", partition_index=0, position=10, commit_timestamp_ms=4 * S, committed_offset=5,
            log_end_offset=None, lag_messages=None, lag_ms=None),
    ]  # fmt: skip
    assertDataFrameEqual(got, expected)


def test_lag_windows_per_partition_and_group(spark: SparkSession) -> None:
    commit_lag = lag.commit_lag(history().inputs(spark), RANGE)
    per_partition, per_group = lag.lag_windows(commit_lag)
    minute = per_partition.where("granularity = 'minute' AND group_id = 'g' AND topic = 't'").select(
        "window_start_ms", "commits", "max_lag_messages", "avg_lag_messages", "max_lag_ms", "avg_lag_ms",
        "last_lag_messages",
    )  # fmt: skip
    assertDataFrameEqual(
        minute,
        [
            Row(window_start_ms=0, commits=2, max_lag_messages=20, avg_lag_messages=10.0, max_lag_ms=1 * S,
                avg_lag_ms=500.0, last_lag_messages=0),
            Row(window_start_ms=1 * M, commits=2, max_lag_messages=25, avg_lag_messages=12.5, max_lag_ms=2 * S,
                avg_lag_ms=1000.0, last_lag_messages=0),
        ],
    )  # fmt: skip
    hour = per_group.where("granularity = 'hour'").select(
        "group_id", "window_start_ms", "partitions", "commits", "max_lag_messages", "max_lag_ms"
    )
    assertDataFrameEqual(
        hour,
        [
            Row(group_id="g", window_start_ms=0, partitions=2, commits=5, max_lag_messages=25, max_lag_ms=2 * S),
            Row(group_id="h", window_start_ms=0, partitions=1, commits=1, max_lag_messages=0, max_lag_ms=0),
        ],
    )
    assert sorted({r["granularity"] for r in per_group.collect()}) == ["day", "hour", "minute"]
