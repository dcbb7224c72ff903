"""Quality checks: the catalog, check frames, GX counts and offending-row samples, reconciliation counts."""

from __future__ import annotations

import pytest
from chispa import assert_column_equality
from pyspark.sql.types import StructField, StructType

from ackreplay.config import parse_config
from ackreplay.quality.catalog import (
    BLOCKING,
    CHECKS,
    ROW_IDS,
    STAGE_TABLES,
    WARNING,
    margin_sources,
    plan_for,
)
from ackreplay.quality.frames import CONTRACTS, required_copies
from ackreplay.quality.reconcile import Count
from ackreplay.quality.runner import QualityReport, check_table, gx_frames
from ackreplay.schemas.tables import PARTITIONS


def test_every_checked_table_has_a_contract_row_ids_and_a_schema_check():
    tables = {t for stage in STAGE_TABLES.values() for t in stage}
    assert tables == set(CONTRACTS) == set(ROW_IDS)
    assert {c.table for c in CHECKS.values()} == tables
    assert all(f"{t}.schema" in CHECKS for t in tables)
    for table, ids in ROW_IDS.items():
        assert set(ids) <= set(CONTRACTS[table].fieldNames()), table


def test_conf_overrides_severity_and_turns_checks_off():
    default = dict((c.name, s) for c, s in plan_for("partitions", {}).checks)
    assert default == {
        "partitions.schema": BLOCKING,
        "partitions.unique_partition": BLOCKING,
        "partitions.replication": BLOCKING,
        "partitions.min_isr_le_rf": WARNING,
    }
    overridden = plan_for("partitions", {"partitions.replication": "warning", "partitions.min_isr_le_rf": "off"})
    assert dict((c.name, s) for c, s in overridden.checks) == {
        "partitions.schema": BLOCKING,
        "partitions.unique_partition": BLOCKING,
        "partitions.replication": WARNING,
    }


def test_required_copies_per_policy(spark):
    df = spark.createDataFrame(
        [
            ("quorum=2", 2, 2),
            ("quorum=3", 2, 3),
            ("min.insync", 2, 2),
            ("min.insync", None, None),
            ("acks=1", 2, 1),
            ("acks=all", 3, 1),
            ("acks=all@lag=3000", 3, 1),
            (None, 2, 1),
        ],
        "policy string, min_insync_replicas int, expected int",
    ).withColumn("required", required_copies())
    assert_column_equality(df, "required", "expected")


def _partition(topic: str, partition: int, replicas: list[int], rf: int, min_isr: int) -> tuple:
    return (
        "c1",
        topic,
        None,
        partition,
        replicas,
        rf,
        min_isr,
        "topic",
        replicas[0],
        replicas,
        [],
        {},
        "c1/topics.txt",
        partition + 2,
        "run-1",
    )


def test_failed_checks_count_rows_and_sample_them_by_row_id(spark):
    df = spark.createDataFrame(
        [
            _partition("orders", 0, [1, 2, 3], 3, 2),
            _partition("orders", 1, [2, 3], 3, 2),  # RF says 3, two replicas assigned
            _partition("orders", 1, [2, 3], 2, 2),  # the same partition twice
            _partition("audit", 0, [1], 1, 2),  # min ISR above RF: a warning
        ],
        PARTITIONS,
    )
    whole = gx_frames()
    outcomes = check_table(whole, "partitions", df, None, parse_config({}), [])
    by_check: dict[str, list] = {}
    for o in outcomes:
        by_check.setdefault(o.check, []).append(o)
    assert all(o.success for o in by_check["partitions.schema"])
    # the column list, a type per column, and no nulls in each column the contract declares non-null
    required = [f.name for f in PARTITIONS.fields if not f.nullable]
    assert len(required) == 10
    assert len(by_check["partitions.schema"]) == 1 + len(PARTITIONS.fields) + len(required)

    [unique] = by_check["partitions.unique_partition"]
    assert (unique.success, unique.element_count, unique.unexpected_count) == (False, 4, 2)
    assert unique.severity == BLOCKING
    assert sorted(r["partition"] for r in unique.sample_rows) == [1, 1]

    rf_equal, replicas_distinct, rf_min, min_isr_min = by_check["partitions.replication"]
    assert (rf_equal.success, rf_equal.unexpected_count) == (False, 1)
    assert rf_equal.expectation == "expect_column_values_to_be_between"
    assert rf_equal.arguments == {"column": "replication_factor_minus_replica_count", "min_value": 0, "max_value": 0}
    [row] = rf_equal.sample_rows
    assert (row["topic"], row["partition"], row["replication_factor"], row["replica_count"]) == ("orders", 1, 3, 2)
    assert replicas_distinct.success and rf_min.success and min_isr_min.success
    assert replicas_distinct.sample_rows is None

    [min_isr] = by_check["partitions.min_isr_le_rf"]
    assert (min_isr.success, min_isr.severity, min_isr.unexpected_count) == (False, WARNING, 1)
    assert [r["topic"] for r in min_isr.sample_rows] == ["audit"]
    assert "partitions.replication" in rf_equal.describe() and "orders" in rf_equal.describe()


def test_a_null_where_the_contract_says_non_null_fails_the_schema_check(spark):
    # Spark keeps a cast column nullable, so a frame can hold nulls its contract rules out
    nullable = StructType([StructField(f.name, f.dataType, True) for f in PARTITIONS.fields])
    rows = [_partition("orders", 0, [1, 2, 3], 3, 2), _partition(None, 1, [1, 2, 3], 3, 2)]
    df = spark.createDataFrame(rows, nullable)
    outcomes = check_table(gx_frames(), "partitions", df, None, parse_config({}), [])
    failed = [o for o in outcomes if o.check == "partitions.schema" and not o.success]
    assert [(o.expectation, o.arguments, o.unexpected_count, o.severity) for o in failed] == [
        ("expect_column_values_to_not_be_null", {"column": "topic"}, 1, BLOCKING)
    ]
    assert [r["partition"] for r in failed[0].sample_rows] == [1]


def test_a_check_on_a_missing_column_fails_with_the_error(spark):
    df = spark.createDataFrame([_partition("orders", 0, [1, 2, 3], 3, 2)], PARTITIONS).drop("min_insync_replicas")
    whole = gx_frames()
    outcomes = check_table(whole, "partitions", df, None, parse_config({}), [])
    columns = next(o for o in outcomes if o.expectation == "expect_table_columns_to_match_set")
    assert not columns.success
    broken = [o for o in outcomes if o.error]
    assert broken and all(not o.success for o in broken)
    # exactly the expectations that read the missing column could not run
    reads_it = [
        o
        for o in outcomes
        if "min_insync_replicas" in (o.arguments.get("column"), *margin_sources(o.arguments.get("column", "")))
    ]
    # its type, not null (the contract), min ISR >= 1, and min ISR <= RF (on their margin)
    assert [(o.expectation, o.arguments["column"]) for o in reads_it] == [
        ("expect_column_values_to_be_of_type", "min_insync_replicas"),
        ("expect_column_values_to_not_be_null", "min_insync_replicas"),
        ("expect_column_values_to_be_between", "min_insync_replicas"),
        ("expect_column_values_to_be_between", "replication_factor_minus_min_insync_replicas"),
    ]
    assert {id(o) for o in broken} == {id(o) for o in reads_it}


def test_columns_in_another_order_match_the_contract(spark):
    # a table written before a column was added to its contract has that column last
    df = spark.createDataFrame([_partition("orders", 0, [1, 2, 3], 3, 2)], PARTITIONS)
    moved = df.select(*[c for c in df.columns if c != "cluster"], "cluster")
    whole = gx_frames()
    outcomes = check_table(whole, "partitions", moved, None, parse_config({}), [])
    columns = next(o for o in outcomes if o.expectation == "expect_table_columns_to_match_set")
    assert columns.success
    whole = gx_frames()
    missing = check_table(whole, "partitions", moved.drop("cluster"), None, parse_config({}), [])
    assert not next(o for o in missing if o.expectation == "expect_table_columns_to_match_set").success


@pytest.mark.parametrize(
    ("left", "relation", "right", "ok"),
    [(5, "=", 5, True), (4, "=", 5, False), (4, "<=", 5, True), (6, "<=", 5, False)],
)
def test_reconciliation_counts(left, relation, right, ok):
    count = Count("reconcile.x", "t", "c1", "a", left, relation, "b", right, "dropped")
    assert count.ok is ok
    assert count.describe().endswith("ok" if ok else "MISMATCH")
    if ok and left != right:
        assert "(1 dropped)" in count.describe()


def test_the_console_lists_only_the_counts_that_differ():
    counts = [
        Count("reconcile.a", "t", "c1", "lines", 7, "=", "rows", 7),
        Count("reconcile.b", "t", "c1", "replayed", 29, "<=", "appended", 30, "outside any epoch"),
        Count("reconcile.c", "t", "c1", "lines", 7, "=", "rows", 7),
        Count("reconcile.d", "t", "c1", "quarantined", 2, "=", "quarantine rows", 1),
    ]
    assert QualityReport("r", "ingest", ["c1"], counts=counts).summary_lines()[1:] == [
        "  reconciliation: 2 of 4 counts equal, and:",
        "    c1: replayed 29 <= appended 30 (1 outside any epoch)  ok",
        "    c1: quarantined 2 = quarantine rows 1  MISMATCH",
    ]
    assert QualityReport("r", "ingest", ["c1"], counts=counts[:1]).summary_lines()[1:] == [
        "  reconciliation: 1 of 1 counts equal"
    ]
    # without -v: the counts that differ for a stated reason are only counted; a mismatch is always shown
    assert QualityReport("r", "ingest", ["c1"], counts=counts).summary_lines(detail=False)[1:] == [
        "  reconciliation: 2 of 4 counts equal, 1 differ as expected (-v: how)",
        "    c1: quarantined 2 = quarantine rows 1  MISMATCH",
    ]


def test_partitions_frame_counts_assigned_and_distinct_replicas(spark):
    from ackreplay.quality.frames import check_frame

    df = spark.createDataFrame([_partition("orders", 0, [1, 1, 2], 3, 2)], PARTITIONS)
    frame = check_frame("partitions", df, None, [])
    assert frame.columns == PARTITIONS.fieldNames() + ["replica_count", "distinct_replica_count"]
    assert tuple(frame.select("replica_count", "distinct_replica_count").first()) == (3, 2)
