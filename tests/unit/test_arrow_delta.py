"""Delta data files written from Arrow and committed with delta-rs: what Spark's Delta reader sees."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
from delta.tables import DeltaTable

from ackreplay.storage.arrow_delta import (
    ArrowFileWriter,
    ConcurrentReplaceError,
    arrow_writable,
    commit_files,
    escape_partition_value,
    local_path,
)
from tests.helpers import assert_df_equality

SCHEMA = pa.schema([("cluster", pa.string()), ("topic", pa.string()), ("n", pa.int64()), ("event_date", pa.date32())])
SPARK_SCHEMA = "cluster string, topic string, n long, event_date date"
PARTITION_BY = ("cluster", "event_date")


def write_files(root: Path, rows: list[tuple[str, str, int, date]]) -> list[dict]:
    """One data file per (cluster, event_date) of `rows`, as the replay's groups write them."""
    writer = ArrowFileWriter(str(root), PARTITION_BY, ("topic", "n"), ("topic",), ("topic", "n"))
    files = []
    for cluster, day in sorted({(r[0], r[3]) for r in rows}):
        part = [r for r in rows if (r[0], r[3]) == (cluster, day)]
        table = pa.table({"topic": [r[1] for r in part], "n": pa.array([r[2] for r in part], pa.int64())})
        files.append(
            writer.write({"cluster": cluster, "event_date": day.isoformat()}, [table.slice(0, 1), table.slice(1)])
        )
    return files


def replacing(clusters: set[str], day: date | None = None) -> list[list[tuple[str, str, str]]]:
    """The partition filters of a replace of `clusters` (on `day` only, if given): one conjunction a cluster."""
    on_day = [("event_date", ">=", day.isoformat()), ("event_date", "<=", day.isoformat())] if day else []
    return [[("cluster", "=", c), *on_day] for c in sorted(clusters)]


def test_committed_files_are_the_table_spark_reads(spark, tmp_path):
    rows = [("a", "t1", 1, date(2026, 11, 20)), ("a", "t2", 2, date(2026, 11, 20)), ("b", "t1", 3, date(2026, 11, 21))]
    files = write_files(tmp_path, rows)
    assert commit_files(str(tmp_path), SCHEMA, PARTITION_BY, files, replacing({"a", "b"}), "run-1") == 3
    table = spark.read.format("delta").load(str(tmp_path))
    assert_df_equality(table, spark.createDataFrame(rows, SPARK_SCHEMA), ignore_row_order=True)
    last = DeltaTable.forPath(spark, str(tmp_path)).history(1).first()
    assert (last["userMetadata"], last["operationMetrics"]["numOutputRows"], last["operationMetrics"]["numFiles"]) == (
        "run-1",
        "3",
        "2",
    )
    # Delta's file statistics skip files: only b's file is read for n = 3
    assert table.filter("n = 3").inputFiles() == [f"file:{tmp_path}/{files[1]['path']}"]
    # and the table takes Spark's own writes after delta-rs commits
    spark.createDataFrame([("c", "t3", 4, date(2026, 11, 22))], SPARK_SCHEMA).write.format("delta").mode("append").save(
        str(tmp_path)
    )
    assert spark.read.format("delta").load(str(tmp_path)).count() == 4


def test_a_commit_replaces_only_the_partitions_it_names_and_a_rerun_changes_nothing(spark, tmp_path):
    first = [("a", "t", 1, date(2026, 11, 20)), ("a", "t", 2, date(2026, 11, 21)), ("b", "t", 3, date(2026, 11, 20))]
    commit_files(str(tmp_path), SCHEMA, PARTITION_BY, write_files(tmp_path, first), replacing({"a", "b"}), "run-1")
    again = [("a", "t", 10, date(2026, 11, 20))]
    for run in ("run-2", "run-3"):  # the same replacement twice: the second leaves the same rows
        files = write_files(tmp_path, again)
        commit_files(str(tmp_path), SCHEMA, PARTITION_BY, files, replacing({"a"}, date(2026, 11, 20)), run)
        expected = [
            ("a", "t", 10, date(2026, 11, 20)),
            ("a", "t", 2, date(2026, 11, 21)),
            ("b", "t", 3, date(2026, 11, 20)),
        ]
        assert_df_equality(
            spark.read.format("delta").load(str(tmp_path)), spark.createDataFrame(expected, SPARK_SCHEMA),
            ignore_row_order=True,
        )  # fmt: skip
    # replacing a partition with nothing removes its rows (as Spark's replaceWhere does)
    commit_files(str(tmp_path), SCHEMA, PARTITION_BY, [], replacing({"b"}), "run-4")
    assert sorted(r["cluster"] for r in spark.read.format("delta").load(str(tmp_path)).collect()) == ["a", "a"]


def test_a_replace_is_recorded_as_an_overwrite_per_cluster_and_a_concurrent_one_is_refused(
    spark, tmp_path, monkeypatch
):
    first = [("a", "t", 1, date(2026, 11, 20)), ("b", "t", 2, date(2026, 11, 21))]
    commit_files(str(tmp_path), SCHEMA, PARTITION_BY, write_files(tmp_path, first), replacing({"a", "b"}), "run-1")
    again = [("a", "t", 5, date(2026, 11, 20)), ("b", "t", 6, date(2026, 11, 21))]
    assert commit_files(str(tmp_path), SCHEMA, PARTITION_BY, write_files(tmp_path, again), replacing({"a", "b"}),
                        "run-2") == 2  # fmt: skip
    # as Spark records a replaceWhere: a WRITE in Overwrite mode with its metrics, here one commit per cluster
    replaces = DeltaTable.forPath(spark, str(tmp_path)).history(2).orderBy("version").collect()
    assert [
        (r["operation"], r["operationParameters"]["mode"], r["userMetadata"],
         *(r["operationMetrics"][m] for m in ("numOutputRows", "numAddedFiles", "numRemovedFiles")))
        for r in replaces
    ] == [("WRITE", "Overwrite", "run-2", "1", "1", "1")] * 2  # fmt: skip

    # Another replay of the same new cluster commits between this one's reading of the table and its commit: a
    # commit rebased on it would add this replay's rows beside the other's. It is refused, as Spark refuses a
    # replaceWhere whose partitions another writer appended to (ConcurrentAppendException); the table keeps the
    # other's rows only, and this replay's error says what happened.
    from deltalake import DeltaTable as RustTable

    theirs, ours = (write_files(tmp_path, [("c", "t", n, date(2026, 11, 22))]) for n in (7, 8))
    commit = RustTable.create_write_transaction

    def other_writer_first(self, *args, **kwargs):
        monkeypatch.setattr(RustTable, "create_write_transaction", commit)
        commit_files(str(tmp_path), SCHEMA, PARTITION_BY, theirs, replacing({"c"}), "run-3")
        return commit(self, *args, **kwargs)

    monkeypatch.setattr(RustTable, "create_write_transaction", other_writer_first)
    with pytest.raises(ConcurrentReplaceError, match=r"changed while this run replaced its rows where cluster = 'c' "
                       r"\(another writer committed after version 2\)"):  # fmt: skip
        commit_files(str(tmp_path), SCHEMA, PARTITION_BY, ours, replacing({"c"}), "run-4")
    assert sorted(r["n"] for r in spark.read.format("delta").load(str(tmp_path)).collect()) == [5, 6, 7]


def test_nothing_to_add_or_remove_in_a_table_commits_nothing(spark, tmp_path):
    table = tmp_path / "table"
    commit_files(str(table), SCHEMA, PARTITION_BY, write_files(table, [("a", "t", 1, date(2026, 11, 20))]),
                 replacing({"a"}), "run-1")  # fmt: skip
    assert commit_files(str(table), SCHEMA, PARTITION_BY, [], replacing({"z"}), "run-2") == 0
    assert DeltaTable.forPath(spark, str(table)).history().count() == 1
    # a table that does not exist yet is created, empty, as Spark's first write of nothing creates it
    assert commit_files(str(tmp_path / "new"), SCHEMA, PARTITION_BY, [], replacing({"z"}), "run-3") == 0
    assert_df_equality(spark.read.format("delta").load(str(tmp_path / "new")), spark.createDataFrame([], SPARK_SCHEMA))


def test_partition_folders_are_named_and_logged_as_spark_names_them(spark, tmp_path):
    clusters = ["a b", "c=d", "e%f", "g/h", "i:j", "k#l", "m'n", "o{p}", "q^r", "ü", "plus+", "semi;", "y[z]"]
    rows = [(c, "t", i, date(2026, 11, 20)) for i, c in enumerate(clusters)]
    ours, theirs = tmp_path / "arrow", tmp_path / "spark"
    commit_files(str(ours), SCHEMA, PARTITION_BY, write_files(ours, rows), replacing(set(clusters)), "run-1")
    spark.createDataFrame(rows, SPARK_SCHEMA).write.format("delta").partitionBy(*PARTITION_BY).save(str(theirs))
    assert_df_equality(
        spark.read.format("delta").load(str(ours)), spark.createDataFrame(rows, SPARK_SCHEMA), ignore_row_order=True
    )
    folders = lambda root: sorted(p.name for p in root.iterdir() if p.name.startswith("cluster="))  # noqa: E731
    assert folders(ours) == folders(theirs) == sorted(f"cluster={escape_partition_value(c)}" for c in clusters)
    # and a second commit finds those files again to remove them
    commit_files(str(ours), SCHEMA, PARTITION_BY, [], replacing(set(clusters)), "run-2")
    assert spark.read.format("delta").load(str(ours)).count() == 0


def test_a_file_outside_the_replaced_partitions_is_refused(tmp_path):
    files = write_files(tmp_path, [("a", "t", 1, date(2026, 11, 20))])
    with pytest.raises(ValueError, match="outside the partitions this commit replaces"):
        commit_files(str(tmp_path), SCHEMA, PARTITION_BY, files, replacing({"b"}), "run-1")


def test_a_table_written_with_other_columns_is_a_clear_error(spark, tmp_path):
    spark.createDataFrame([("a", 1, date(2026, 11, 20))], "cluster string, n long, event_date date").write.format(
        "delta"
    ).partitionBy(*PARTITION_BY).save(str(tmp_path))
    files = write_files(tmp_path, [("a", "t", 1, date(2026, 11, 20))])
    with pytest.raises(ValueError, match=r"written by an older version\. Delete the folder"):
        commit_files(str(tmp_path), SCHEMA, PARTITION_BY, files, replacing({"a"}), "run-1")


def test_only_local_lakehouses_are_written_from_arrow_and_relative_paths_become_absolute(tmp_path, monkeypatch):
    assert [
        arrow_writable(x)
        for x in ("lakehouse", "/data/lh", "file:///data/lh", "s3a://b/lh", "dbfs:/lh", "abfss://c@a/lh")
    ] == [True, True, True, False, False, False]
    monkeypatch.chdir(tmp_path)  # executors resolve relative paths against their own folder: never send one
    assert local_path("lakehouse/silver/x") == str(tmp_path / "lakehouse/silver/x")
    assert local_path(f"file://{tmp_path}/y") == str(tmp_path / "y")


def test_auto_writes_from_arrow_only_where_a_commit_of_files_is_right(spark, tmp_path):
    from ackreplay.replay.stage import choose_writer

    lakehouse = str(tmp_path / "lakehouse")
    assert choose_writer("auto", lakehouse) == "arrow"  # no table yet: created by the commit
    assert [choose_writer("auto", root) for root in ("/dbfs/lh", "/Volumes/main/kafka/lh", "s3a://bucket/lh")] == [
        "spark"
    ] * 3
    assert choose_writer("auto", lakehouse, connect=True) == "spark"
    table = tmp_path / "lakehouse" / "silver" / "produce_replay"
    row = spark.createDataFrame([("a", "t", 1, date(2026, 11, 20))], SPARK_SCHEMA)
    row.write.format("delta").partitionBy(*PARTITION_BY).option("delta.enableDeletionVectors", "true").save(str(table))
    assert choose_writer("auto", lakehouse) == "arrow"  # a replace removes whole files
    # Databricks enables row tracking on new tables: committing files would not keep it
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    assert choose_writer("auto", lakehouse) == "spark"
    with pytest.raises(ValueError, match=r"has writer features a commit of the replay's own files would not keep "
                       r"\(domainMetadata, rowTracking\)\. Set replay.writer to spark"):  # fmt: skip
        choose_writer("arrow", lakehouse)
    # and a commit that delta-rs refuses is its error, not taken for a concurrent writer's
    with pytest.raises(Exception, match="Unsupported table features required") as refused:
        commit_files(str(table), SCHEMA, PARTITION_BY, [], replacing({"a"}), "run-1")
    assert not isinstance(refused.value, ConcurrentReplaceError)
