"""A session-scoped local Spark for the transform tests (small, UI off, UTC)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession  # a core dependency: missing is an error, not a skip

from spark_jobs.session import build_session


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(
        master="local[1]",
        app_name="spark-jobs-tests",
        shuffle_partitions=1,
        jdbc=True,
        # Tiny inputs: compiling generated code costs more than it saves, and adaptive planning adds jobs.
        extra_conf={
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            "spark.sql.adaptive.enabled": "false",
            "spark.driver.memory": "1g",
        },
    )
    yield session
    session.stop()
