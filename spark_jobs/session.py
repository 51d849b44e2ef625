"""Building the SparkSession: local by default, UTC, UI off, the JDBC drivers on the class path, a quiet log."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark import SparkConf
from pyspark.sql import SparkSession

from .jdbc_drivers import jar_list

# Measured on the 2-core machine (spark_jobs/README.md): CPU time of the 5k-row report 46-55 s -> 26-28 s, of the
# 1M-row report 111-119 s -> 67-72 s.
SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def build_session(
    master: str | None = None,
    *,
    app_name: str = "kgc-rebalance-report",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    jdbc: bool = True,
    extra_conf: dict[str, str] | None = None,
    short_run: bool = False,
) -> SparkSession:
    """A session for the report. ``master`` None keeps what ``spark-submit`` set, else ``local[2]``.

    The driver's log4j2 configuration is ``log4j2.properties`` next to this file (``$SPARK_JOBS_LOG4J2`` overrides it):
    warnings only, without Spark's start-up notices. It applies when this call starts the JVM (a local run, or
    ``spark-submit`` in client mode reads ``spark.driver.extraJavaOptions`` only from its command line).

    ``short_run``: a JVM for a run of a minute or two (SHORT_RUN_JAVA_OPTIONS): the C1 compiler only and the serial
    collector. A fresh JVM otherwise spends most of a small report's CPU time compiling hot code with C2 that the run
    does not live long enough to profit from."""
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
    jvm_options = SHORT_RUN_JAVA_OPTIONS if short_run else ""
    java_options = " ".join(o for o in (SparkConf().get("spark.driver.extraJavaOptions"), log_option, jvm_options) if o)
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
