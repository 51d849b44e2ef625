"""Building the SparkSession: local by default, UTC, UI off, the JDBC drivers on the class path."""

from __future__ import annotations

from pyspark import SparkConf
from pyspark.sql import SparkSession

from .jdbc_drivers import jar_list


def build_session(
    master: str | None = None,
    *,
    app_name: str = "kgc-rebalance-report",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    jdbc: bool = True,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """A session for the report. ``master`` None keeps what ``spark-submit`` set, else ``local[2]``."""
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif SparkConf().get("spark.master") is None:
        builder = builder.master("local[2]")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    jars = jar_list() if jdbc else []
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
