"""Time windows (hour and day, UTC) shared by the windowed metrics.

A windowed row carries ``granularity`` ("hour" / "day"), ``window_start`` (a UTC timestamp) and
``window_start_ms``. Windows are aligned to the epoch, so a day window is a UTC calendar day.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .config import GRANULARITIES, ReportRange

WINDOW_KEYS = ["granularity", "window_start_ms"]


def _granularities() -> Column:
    return F.array(
        *[F.struct(F.lit(name).alias("g"), F.lit(ms).cast("long").alias("w")) for name, ms in GRANULARITIES.items()]
    )


def bucket(df: DataFrame, ts_col: str) -> DataFrame:
    """One row per input row and granularity, with the window holding ``ts_col``."""
    return (
        df.withColumn("_gw", F.explode(_granularities()))
        .withColumn("granularity", F.col("_gw.g"))
        .withColumn("window_start_ms", F.floor(F.col(ts_col) / F.col("_gw.w")).cast("long") * F.col("_gw.w"))
        .drop("_gw")
    )


def split_interval(df: DataFrame, start_col: str, end_col: str) -> DataFrame:
    """One row per input interval [start, end) and every window it overlaps, with ``overlap_ms`` in that window."""
    w = F.col("_gw.w")
    first = F.floor(F.col(start_col) / w).cast("long") * w
    last = F.floor((F.col(end_col) - 1) / w).cast("long") * w
    return (
        df.withColumn("_gw", F.explode(_granularities()))
        .withColumn("granularity", F.col("_gw.g"))
        .withColumn("window_start_ms", F.explode(F.sequence(first, last, w)))
        .withColumn(
            "overlap_ms",
            F.least(F.col(end_col), F.col("window_start_ms") + w)
            - F.greatest(F.col(start_col), F.col("window_start_ms")),
        )
        .drop("_gw")
    )


def with_window_columns(df: DataFrame, rng: ReportRange) -> DataFrame:
    """Add ``window_start`` (timestamp) and ``window_hours``: the part of the window inside the report range, in hours
    (so rates of a partial first/last window are not diluted)."""
    w: Column = F.lit(None).cast("long")
    for name, ms in GRANULARITIES.items():
        w = F.when(F.col("granularity") == name, F.lit(ms)).otherwise(w)
    covered = F.least(F.col("window_start_ms") + w, F.lit(rng.until_ms)) - F.greatest(
        F.col("window_start_ms"), F.lit(rng.since_ms)
    )
    return df.withColumn("window_start", F.timestamp_millis("window_start_ms")).withColumn(
        "window_hours", F.greatest(covered, F.lit(0)).cast("double") / F.lit(float(GRANULARITIES["hour"]))
    )


def per_hour(count: Column) -> Column:
    """A count divided by ``window_hours``; null for a window with no covered time."""
    return F.when(F.col("window_hours") > 0, count / F.col("window_hours"))


def in_range(ts: Column, rng: ReportRange) -> Column:
    return (ts >= F.lit(rng.since_ms)) & (ts < F.lit(rng.until_ms))
