"""Shared fixtures: one local Spark session (with Delta) for the whole test run."""

from __future__ import annotations

import pytest

from ackreplay.config import SparkSettings
from ackreplay.session import build_spark_session


@pytest.fixture(scope="session")
def spark():
    settings = SparkSettings(
        master="local[2]",
        app_name="ackreplay-tests",
        log_level="ERROR",
        conf={
            "spark.sql.shuffle.partitions": 2,
            "spark.default.parallelism": 2,
            "spark.databricks.delta.snapshotPartitions": 2,
            "spark.ui.enabled": False,
            "spark.ui.showConsoleProgress": False,
            "spark.driver.memory": "2g",
        },
    )
    session = build_spark_session(settings)
    yield session
    session.stop()
