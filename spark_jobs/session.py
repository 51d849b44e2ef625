"""Building the SparkSession: local by default, UTC, UI off, the JDBC drivers on the class path, a quiet log."""

from __future__ import annotations

import os
from pathlib import Path

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
    """A session for the report. ``master`` None keeps what ``spark-submit`` set, else ``local[2]``.

    The driver's log4j2 configuration is ``log4j2.properties`` next to this file (``$SPARK_JOBS_LOG4J2`` overrides it):
    warnings only, without Spark's start-up notices. It applies when this call starts the JVM (a local run, or
    ``spark-submit`` in client mode reads ``spark.driver.extraJavaOptions`` only from its command line)."""
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
    log_config = Path(os.environ.get("SPARK_JOBS_LOG4J2") or Path(__file__).with_name("log4j2.properties"))
    log_option = f"-Dlog4j2.configurationFile={log_config.as_uri()}"
    java_options = " ".join(o for o in (SparkConf().get("spark.driver.extraJavaOptions"), log_option) if o)
    builder = builder.config("spark.driver.extraJavaOptions", java_options)
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
