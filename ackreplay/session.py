"""The one SparkSession factory used by every job, test helper and notebook."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ackreplay import delta_jars
from ackreplay.config import SparkSettings
from ackreplay.console import output_to

log = logging.getLogger(__name__)

# Settings the pipeline relies on whatever the environment: times are UTC microseconds.
_FIXED_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
}


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (a client of a remote driver: no JVM, no SparkContext here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_jvm(spark: SparkSession) -> Any:
    """The session's Py4J gateway to its driver JVM (Hadoop filesystems, Delta's Scala API). A Spark Connect
    session has none."""
    if is_connect(spark) or spark.sparkContext._jvm is None:
        raise RuntimeError("this needs a classic Spark session with a driver JVM, not a Spark Connect session")
    return spark.sparkContext._jvm


def remote_of(settings: SparkSettings) -> str | None:
    """The Spark Connect server to use: `settings.remote` (the conf's `spark.remote`, the CLI's `--remote`),
    else the environment's SPARK_REMOTE, as pyspark reads it."""
    return settings.remote or os.environ.get("SPARK_REMOTE") or None


def build_spark_session(
    settings: SparkSettings, app_name: str | None = None, jvm_output: Path | None = None
) -> SparkSession:
    """Build (or reuse) a SparkSession with Delta configured from `settings`.

    Delta's jars are resolved from Maven Central by Spark's own resolver (cached under ~/.ivy2.5.2) once,
    with its log kept off the console, and later starts pass the jars it retrieved (ackreplay/delta_jars.py);
    `settings.jars` lists local jar files instead. Under spark-submit the JVM already runs, so pass the
    same coordinates with `--packages` (see README). `jvm_output`: a file the driver JVM this call may start
    writes its own output to (its start-up warnings and log4j's console), instead of this process's console.
    """
    remote = remote_of(settings)
    if remote:
        return connect_session(settings, remote)
    builder = SparkSession.builder.appName(app_name or settings.app_name)
    if settings.master:
        builder = builder.master(settings.master)
        if settings.master.startswith("local"):
            # Python workers must run this interpreter (the venv), not whatever `python3` is first on PATH.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {**settings.conf, **_FIXED_CONF}.items():
        builder = builder.config(key, str(value).lower() if isinstance(value, bool) else str(value))
    for key, value in delta_jars.jars_conf(settings).items():
        builder = builder.config(key, value)
    with output_to(jvm_output):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    log.info("Spark %s session %s (master %s)", spark.version, spark.sparkContext.appName, spark.sparkContext.master)
    return spark


# A Spark Connect client sets only the settings a session may change; these are the server's, checked instead.
_SERVER_CONF = ("spark.sql.extensions", "spark.sql.catalog.spark_catalog")


def connect_session(settings: SparkSettings, remote: str) -> SparkSession:
    """A Spark Connect session on `remote` (`sc://host:port`): the conf's settings that a session may change are
    set (SQL, Delta and Hadoop settings); the driver's own (memory, jars, master) belong to the server and are
    skipped. The server must run Delta's session extension and catalog (README "Spark Connect")."""
    spark = SparkSession.builder.remote(remote).getOrCreate()
    extensions = spark.conf.get("spark.sql.extensions", None) or ""
    if "DeltaSparkSessionExtension" not in extensions:
        raise RuntimeError(
            f"the Spark Connect server at {remote} does not run Delta (spark.sql.extensions is {extensions!r}): "
            "start it with Delta's jars and " + ", ".join(f"{k}={_FIXED_CONF[k]}" for k in _SERVER_CONF)
        )
    skipped = []
    for key, value in {**settings.conf, "spark.sql.session.timeZone": "UTC"}.items():
        if key in _SERVER_CONF:
            continue
        try:
            spark.conf.set(key, str(value).lower() if isinstance(value, bool) else str(value))
        except Exception:  # a static or core setting: the server's
            skipped.append(key)
    log.info("Spark Connect session on %s (Spark %s); settings left to the server: %s", remote, spark.version,
             ", ".join(skipped) or "none")  # fmt: skip
    return spark


@contextmanager
def command_session(settings: SparkSettings, app_name: str | None = None) -> Iterator[SparkSession]:
    """The session of a command (a benchmark): built from `settings` and stopped when the command ends.

    A session already active in this process (a notebook's, a test session's) is used instead and left
    running: stopping it would end the caller's work.
    """
    already_active = SparkSession.getActiveSession() is not None
    spark = build_spark_session(settings, app_name)
    try:
        yield spark
    finally:
        if not already_active:
            spark.stop()
