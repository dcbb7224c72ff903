"""Handing a table to other tools as CSV or Parquet."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructType

from ackreplay.lakehouse import read_table


def export_table(spark: SparkSession, lakehouse: str, table: str, fmt: str, out: str) -> None:
    """Write `table` to the folder `out`; CSV gets a header and nested columns as JSON text."""
    df = read_table(spark, lakehouse, table)
    if fmt == "csv":
        nested = (ArrayType, MapType, StructType)
        df = df.select(
            *[
                F.to_json(F.col(f.name)).alias(f.name) if isinstance(f.dataType, nested) else F.col(f.name)
                for f in df.schema.fields
            ]
        )
        df.write.mode("overwrite").option("header", True).csv(out)
    else:
        df.write.mode("overwrite").parquet(out)
