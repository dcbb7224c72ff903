"""Tables by name as well as by path: registers the lakehouse's path-based Delta tables in a catalog.

The path stays the table's identity (every write is a `replaceWhere` on it); the catalog entry is an
external table over that path, so `spark.table("main.ackreplay.policy_summary")`, SQL and Databricks'
Catalog Explorer see the same data as `read_table(spark, lakehouse, "policy_summary")`.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ackreplay.config import MetastoreSettings
from ackreplay.session import is_connect, session_jvm
from ackreplay.storage.lakehouse import TABLES, sql_string, table_exists, table_path, table_spec

log = logging.getLogger(__name__)


class MetastoreError(RuntimeError):
    """A catalog name is taken by a table stored somewhere else than the lakehouse's path."""


def table_name(settings: MetastoreSettings, name: str) -> str:
    """The quoted three-part (or two-part) name of a lakehouse table: `catalog`.`schema`.`table`."""
    return f"{settings.prefix}.`{table_spec(name).name}`"


def _same_location(registered: str, path: str) -> bool:
    # DESCRIBE DETAIL qualifies local paths (file:/...), the lakehouse may name them plainly.
    def normal(location: str) -> str:
        location = location.rstrip("/")
        for scheme in ("file://", "file:"):
            if location.startswith(scheme):
                return location[len(scheme) :]
        return location

    return normal(registered) == normal(path)


def _qualified(spark: SparkSession, path: str) -> str:
    """`path` with its filesystem's scheme (file:/…, s3a://…), as the metastore records locations; on Spark Connect
    the path as given (the server resolves it)."""
    if is_connect(spark):
        return path
    hadoop_path = session_jvm(spark).org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()).makeQualified(hadoop_path).toString()


def register_tables(spark: SparkSession, lakehouse: str, settings: MetastoreSettings) -> list[str]:
    """Register every table that exists in the lakehouse under `settings`; return the names.

    Idempotent: a name already registered over the same path is kept; one over another path is an error
    (two lakehouses must not share a schema). Tables never written are not registered.
    """
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {settings.prefix}")
    registered = []
    for name in TABLES:
        if not table_exists(spark, lakehouse, name):
            continue
        full_name = table_name(settings, name)
        qualified = _qualified(spark, table_path(lakehouse, name))
        if spark.catalog.tableExists(full_name):
            location = spark.sql(f"DESCRIBE DETAIL {full_name}").select("location").collect()[0]["location"]
            if not _same_location(location, qualified):
                raise MetastoreError(f"{full_name} is already registered over {location}, not over {qualified}")
        else:
            spark.sql(f"CREATE TABLE {full_name} USING DELTA LOCATION {sql_string(qualified)}")
            log.info("registered %s over %s", full_name, qualified)
        registered.append(full_name)
    return registered
