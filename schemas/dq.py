"""Contract of `dq_results`: one row per (data-quality run, expectation) and per reconciliation count.

A run is one stage's check (`dq_run_id` = the stage's run id, `stage` = ingest | replay | gold); a
rerun of the same stage run replaces its rows. See README, "Data quality".
"""

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

DQ_RESULTS = StructType(
    [
        StructField("dq_run_id", StringType(), False),
        StructField("stage", StringType(), False),  # ingest | replay | gold
        StructField("clusters", ArrayType(StringType(), False), False),  # the clusters the run checked
        StructField("table_name", StringType(), False),
        StructField("check_name", StringType(), False),  # <table>.<check> (catalog.py) or reconcile.<count>
        StructField("severity", StringType(), False),  # blocking | warning
        # GX expectation type (expect_column_values_to_be_between, ...) or `reconciliation`
        StructField("expectation", StringType(), False),
        StructField("arguments", StringType(), True),  # JSON: the expectation's arguments
        StructField("success", BooleanType(), False),
        StructField("element_count", LongType(), True),  # rows checked (after the row condition)
        StructField("unexpected_count", LongType(), True),  # rows failing it
        StructField("unexpected_percent", DoubleType(), True),
        StructField("observed_value", StringType(), True),  # JSON: table-level observation or the two counts
        StructField("sample_rows", StringType(), True),  # JSON: a few offending rows (ids + values) when failed
        StructField("error", StringType(), True),  # the check could not run (missing column, ...)
        StructField("checked_at", TimestampType(), False),
    ]
)
