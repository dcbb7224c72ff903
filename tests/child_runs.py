"""`ackreplay` run in a process of its own, as a user runs it, and its lakehouse compared table by table with the
session's local run of the same input (the object-store and Spark Connect tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, MapType

from ackreplay.storage.lakehouse import read_table, table_exists
from tests.helpers import assert_df_equality

RUN_COLUMNS = ("ingest_run_id", "replay_run_id", "gold_run_id", "run_id")
# Tables whose rows name the run (ids, the files' full paths and times, the checks that ran).
NOT_COMPARED = {
    "ingested_files": "the ledger: files' URIs and the times they were seen",
    "dq_results": "the checks that ran, with their run's id",
    "replay_checks": "the verdict row carries the run's id and time",
}
# Compared in Spark both ways (rows with their multiplicity): too many rows to compare in Python.
LARGE_TABLES = frozenset({"produce_replay", "request_log_lines", "follower_fetches", "produce_requests"})


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m ackreplay.cli <args>` from `cwd`, its output captured; the session's own Spark environment
    (a Connect URL, a gateway) is not handed down."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT")}
    return subprocess.run(
        [sys.executable, "-m", "ackreplay.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )


def comparable(df: DataFrame) -> DataFrame:
    """Without the run's ids; DOUBLEs to 12 significant digits (a sum's last bits follow the partitioning); maps as
    their sorted entries (Spark neither sorts nor compares maps)."""

    def column(f):
        if isinstance(f.dataType, DoubleType):
            return F.format_string("%.12e", F.col(f.name)).alias(f.name)
        if isinstance(f.dataType, MapType):
            return F.to_json(F.array_sort(F.map_entries(F.col(f.name)))).alias(f.name)
        return F.col(f.name)

    return df.select(*(column(f) for f in df.schema.fields if f.name not in RUN_COLUMNS))


def assert_same_table(spark, lakehouse: str, reference: str, table: str) -> None:
    """Table `table` of `lakehouse` holds the rows of `reference`'s (both absent counts as the same)."""
    if not table_exists(spark, reference, table):
        assert not table_exists(spark, lakehouse, table)
        return
    df = comparable(read_table(spark, lakehouse, table))
    expected = comparable(read_table(spark, reference, table))
    assert df.count() == expected.count()
    if table in LARGE_TABLES:
        assert expected.count() > 0
        assert df.exceptAll(expected).isEmpty() and expected.exceptAll(df).isEmpty()
    else:
        assert_df_equality(df, expected, ignore_row_order=True, ignore_column_order=True)
