"""Contract of `dq_results`: one row per (data-quality run, expectation) and per reconciliation count.

A run is one stage's check (`dq_run_id` = the stage's run id, `stage` = ingest | replay | gold); a
rerun of the same stage run replaces its rows. See README, "Data quality".
"""

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _field(name: str, dtype: DataType, nullable: bool, comment: str) -> StructField:
    """A contract column with its description (the column's Delta comment)."""
    return StructField(name, dtype, nullable, {"comment": comment})


DQ_RESULTS = StructType(
    [
        _field("dq_run_id", StringType(), False, "Run id of the stage run checked (its ingest, replay or gold run id)"),
        _field("stage", StringType(), False, "Stage checked: ingest, replay or gold"),
        _field("clusters", ArrayType(StringType(), False), False, "The clusters the run checked"),
        _field(
            "table_name",
            StringType(),
            False,
            "Table the check is about (a reconciliation count: the table it is recorded under)",
        ),
        _field(
            "check_name",
            StringType(),
            False,
            "Name of the check: <table>.<check> (ackreplay/quality/catalog.py) or reconcile.<count>",
        ),
        _field("severity", StringType(), False, "blocking (a failure stops the command) or warning"),
        _field(
            "expectation",
            StringType(),
            False,
            "GX expectation type (expect_column_values_to_be_between, ...) or reconciliation",
        ),
        _field("arguments", StringType(), True, "JSON: the expectation's arguments, or a count's sides and relation"),
        _field("success", BooleanType(), False, "Whether the check passed"),
        _field("element_count", LongType(), True, "Rows checked (after the row condition); null: not a row count"),
        _field("unexpected_count", LongType(), True, "Rows failing the expectation; null: not a row count"),
        _field(
            "unexpected_percent",
            DoubleType(),
            True,
            "unexpected_count as a percentage (0-100) of element_count; null: not a row count",
        ),
        _field(
            "observed_value",
            StringType(),
            True,
            "JSON: a table-level observation, or the two counts of a reconciliation",
        ),
        _field(
            "sample_rows",
            StringType(),
            True,
            "JSON: a few offending rows (ids and the values checked), for failed checks only",
        ),
        _field(
            "error",
            StringType(),
            True,
            "Why the check could not run (missing column, ...); null when it ran",
        ),
        _field("checked_at", TimestampType(), False, "When the run recorded its results (UTC)"),
    ]
)
