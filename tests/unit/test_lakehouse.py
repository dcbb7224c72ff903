"""Writing tables: a table written by an earlier release takes the columns a later contract adds."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.sql.types import (
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from ackreplay.schemas.tables import PRODUCE_REQUESTS
from ackreplay.storage.lakehouse import read_table, replace_rows
from tests.helpers import assert_df_equality

_VALUES = {BooleanType(): False, StringType(): "x", IntegerType(): 1, LongType(): 1, DoubleType(): 1.0, DateType(): date(2026, 11, 20),
           TimestampType(): datetime(2026, 11, 20, 12)}  # fmt: skip


def _row(schema: StructType, **values) -> dict:
    """A row with every required column set and the rest null, but for `values`."""
    return {f.name: values.get(f.name, None if f.nullable else _VALUES[f.dataType]) for f in schema}


def test_a_column_added_to_the_contract_is_added_to_an_existing_table(spark, tmp_path):
    lakehouse = str(tmp_path / "lakehouse")
    before = StructType([f for f in PRODUCE_REQUESTS if f.name != "connection"])  # the contract of an earlier release
    old = spark.createDataFrame([_row(before, source_file="a.log", client_id="p1")], before)
    replace_rows(old, lakehouse, "produce_requests", "source_file = 'a.log'", "run-1")
    new = spark.createDataFrame(
        [_row(PRODUCE_REQUESTS, source_file="b.log", client_id="p1", connection="n-1")], PRODUCE_REQUESTS
    )
    assert replace_rows(new, lakehouse, "produce_requests", "source_file = 'b.log'", "run-2") == 1
    table = read_table(spark, lakehouse, "produce_requests")
    assert sorted(table.columns) == sorted(PRODUCE_REQUESTS.fieldNames())  # Delta appends the new column
    expected = spark.createDataFrame(
        [("a.log", "p1", None), ("b.log", "p1", "n-1")], "source_file string, client_id string, connection string"
    )
    assert_df_equality(
        table.select("source_file", "client_id", "connection"), expected, ignore_row_order=True, ignore_nullable=True
    )


def test_a_replace_returns_the_rows_it_wrote_and_zero_when_it_wrote_none(spark, tmp_path):
    lakehouse = str(tmp_path / "lakehouse")
    rows = [_row(PRODUCE_REQUESTS, source_file=f"{name}.log", client_id=f"p{i}") for i, name in enumerate("aab")]
    assert (
        replace_rows(spark.createDataFrame(rows, PRODUCE_REQUESTS), lakehouse, "produce_requests", "true", "run-1") == 3
    )
    # the same file again, now with one row: 1 written, whatever the replace removed
    again = spark.createDataFrame(rows[:1], PRODUCE_REQUESTS)
    assert replace_rows(again, lakehouse, "produce_requests", "source_file = 'a.log'", "run-2") == 1
    # nothing to write where no row matches: 0, not the previous commit's count, and the table unchanged
    empty = spark.createDataFrame([], PRODUCE_REQUESTS)
    assert replace_rows(empty, lakehouse, "produce_requests", "source_file = 'c.log'", "run-3") == 0
    assert replace_rows(empty, str(tmp_path / "new"), "produce_requests", "false", "run-4") == 0
    # the same run writing the same file again after a replace that committed nothing: the last commit is
    # still run-2's on that predicate, and the count is this write's own
    assert replace_rows(again, lakehouse, "produce_requests", "source_file = 'a.log'", "run-2") == 1
    # an empty rerun of a replace whose rows are gone: nothing committed, and the last commit (the same run's
    # removal of b.log's row, on the same predicate) wrote none either
    assert replace_rows(empty, lakehouse, "produce_requests", "source_file = 'b.log'", "run-5") == 0
    assert replace_rows(empty, lakehouse, "produce_requests", "source_file = 'b.log'", "run-5") == 0
    assert (
        replace_rows(
            spark.createDataFrame(rows[2:], PRODUCE_REQUESTS),
            lakehouse,
            "produce_requests",
            "source_file = 'b.log'",
            "run-6",
        )
        == 1
    )
    table = read_table(spark, lakehouse, "produce_requests")
    assert sorted((r["source_file"], r["client_id"]) for r in table.collect()) == [("a.log", "p0"), ("b.log", "p2")]


def test_the_last_commit_is_read_as_delta_history_shows_it(spark, tmp_path):
    from delta.tables import DeltaTable

    from ackreplay.storage.lakehouse import _last_commit, table_path

    lakehouse = str(tmp_path / "lakehouse")
    rows = spark.createDataFrame([_row(PRODUCE_REQUESTS, source_file=f"{n}.log") for n in "abc"], PRODUCE_REQUESTS)
    for version, name in enumerate("abc"):  # beside the commit files: .crc checksums
        replace_rows(
            rows.filter(f"source_file = '{name}.log'"),
            lakehouse,
            "produce_requests",
            f"source_file = '{name}.log'",
            f"run-{version}",
        )
    history = DeltaTable.forPath(spark, table_path(lakehouse, "produce_requests")).history(1)
    expected = history.select("version", "userMetadata", "operationParameters", "operationMetrics").first().asDict()
    assert _last_commit(spark, lakehouse, "produce_requests") == expected
    assert expected["userMetadata"] == "run-2" and expected["operationMetrics"]["numOutputRows"] == "1"


def test_a_created_table_has_its_description_and_its_columns_their_contracts_descriptions(spark, tmp_path):
    from ackreplay.storage.lakehouse import TABLES, delta_sql_name

    lakehouse = str(tmp_path / "lakehouse")
    rows = spark.createDataFrame([_row(PRODUCE_REQUESTS, source_file="a.log")], PRODUCE_REQUESTS)
    # the rows' own schema without its descriptions, as most stages' frames reach the writer
    bare = rows.select(*rows.columns)
    bare = spark.createDataFrame(
        bare.rdd, StructType([f.__class__(f.name, f.dataType, f.nullable) for f in rows.schema])
    )
    replace_rows(bare, lakehouse, "produce_requests", "source_file = 'a.log'", "run-1")
    table = delta_sql_name(lakehouse, "produce_requests")
    assert spark.sql(f"DESCRIBE DETAIL {table}").first()["description"] == TABLES["produce_requests"].description
    comments = {r["col_name"]: r["comment"] for r in spark.sql(f"DESCRIBE {table}").collect() if r["col_name"]}
    assert {f.name: comments[f.name] for f in PRODUCE_REQUESTS} == {
        f.name: f.metadata["comment"] for f in PRODUCE_REQUESTS
    }
    # a second write leaves both as they are, and its rows are counted as before
    assert replace_rows(rows, lakehouse, "produce_requests", "source_file = 'a.log'", "run-2") == 1
    assert spark.sql(f"DESCRIBE DETAIL {table}").first()["description"] == TABLES["produce_requests"].description


def test_a_table_an_older_release_partitioned_keeps_its_partitioning(spark, tmp_path):
    """Gold tables were partitioned by cluster; they are not any more, and a lakehouse written before still
    takes the replacement of one cluster's rows (Delta applies the table's own partition columns)."""
    from ackreplay.schemas.gold import ROUTING
    from ackreplay.storage.lakehouse import table_path

    lakehouse = str(tmp_path / "lakehouse")
    old = spark.createDataFrame([_row(ROUTING, cluster=c, gold_run_id="run-1") for c in "ab"], ROUTING)
    old.write.format("delta").partitionBy("cluster").save(table_path(lakehouse, "routing"))
    new = spark.createDataFrame([_row(ROUTING, cluster="a", gold_run_id="run-2")], ROUTING)
    assert replace_rows(new, lakehouse, "routing", "cluster IN ('a')", "run-2") == 1
    assert sorted(
        tuple(r) for r in read_table(spark, lakehouse, "routing").select("cluster", "gold_run_id").collect()
    ) == [
        ("a", "run-2"),
        ("b", "run-1"),
    ]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table_path(lakehouse, 'routing')}`").first()
    assert list(detail["partitionColumns"]) == ["cluster"]
    # a new lakehouse's gold tables are not partitioned
    fresh = str(tmp_path / "fresh")
    replace_rows(new, fresh, "routing", "cluster IN ('a')", "run-2")
    assert list(spark.sql(f"DESCRIBE DETAIL delta.`{table_path(fresh, 'routing')}`").first()["partitionColumns"]) == []


def test_delta_sql_names_a_relative_lakehouse_by_its_absolute_path(spark, tmp_path):
    """`make sample` runs with `--lakehouse lakehouse`: Delta's SQL takes delta.`<path>` only for an absolute path,
    so the ledger's UPDATE on a relative one failed (UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY). The relative path is
    taken from the working folder the session's JVM started in, which is this process's."""
    import os

    from ackreplay.storage.lakehouse import delta_sql_name

    relative = os.path.relpath(tmp_path / "lakehouse")
    rows = spark.createDataFrame([_row(PRODUCE_REQUESTS, source_file=f"{n}.log") for n in "ab"], PRODUCE_REQUESTS)
    replace_rows(rows, relative, "produce_requests", "true", "run-1")
    name = delta_sql_name(relative, "produce_requests")
    assert name == f"delta.`{tmp_path}/lakehouse/silver/produce_requests`"
    spark.sql(f"DELETE FROM {name} WHERE source_file = 'a.log'")
    assert [r["source_file"] for r in read_table(spark, str(tmp_path / "lakehouse"), "produce_requests").collect()] == [
        "b.log"
    ]
    assert delta_sql_name("s3a://b/lh", "produce_requests") == "delta.`s3a://b/lh/silver/produce_requests`"
