"""Handing a table to other tools as CSV or Parquet, without ever deleting what a user owns.

By default the table becomes one file (`--out produce_requests.csv`): Spark writes it from one task
(`coalesce(1)`, nothing collected to the driver) into a hidden folder next to it, and the part file is
then moved into place, so a killed export leaves no half-written file under the chosen name. With
`parts=True` the output is Spark's folder of part files. An existing file or a non-empty folder is
refused unless `replace`; even then a folder is replaced only if all it holds is an earlier Spark
output (part files and their bookkeeping), never a folder with other files in it.

CSV follows RFC 4180 as Python's `csv` and pandas read it (a quote inside a field doubled, not
backslash-escaped as Spark does by default), timestamps keep the tables' microseconds (ISO 8601, UTC),
nested columns are JSON text.
"""

from __future__ import annotations

import re
import uuid

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructType

from ackreplay.session import is_connect
from ackreplay.storage.lakehouse import HadoopFiles, read_table

CSV_OPTIONS = {
    "header": "true",
    "escape": '"',  # RFC 4180: "" inside a quoted field
    # Spark's CSV writer trims fields by default: a value is written as it is
    "ignoreLeadingWhiteSpace": "false",
    "ignoreTrailingWhiteSpace": "false",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
# What a Spark write leaves in its output folder besides the data (committers' markers, checksums).
_SPARK_OUTPUT = re.compile(r"^(part-.*|_SUCCESS|_committed_.*|_started_.*|\..*\.crc)$")


class ExportRefused(ValueError):
    """The export would overwrite or delete something it did not write."""


def export_table(
    spark: SparkSession, lakehouse: str, table: str, fmt: str, out: str, parts: bool = False, replace: bool = False
) -> str:
    """Write `table` to `out` (one file, or a folder of part files with `parts`); what was written."""
    if is_connect(spark):
        raise ExportRefused(
            "export moves and checks files through the driver's Hadoop filesystem, which a Spark Connect client "
            "does not have: run it with a classic session (without --remote / SPARK_REMOTE), or read the table "
            "with spark.read.format('delta')"
        )
    df = _exportable(read_table(spark, lakehouse, table), fmt)
    fs = HadoopFiles(spark, out, raw_local=True)
    given, out = out, fs.qualified(out)
    _check_target(fs, out, given, parts, replace)
    staging = f"{fs.parent(out)}/.{fs.name(out)}.ackreplay-export-{uuid.uuid4().hex[:12]}"
    writer = (df if parts else df.coalesce(1)).write.mode("errorifexists")
    if fmt == "csv":
        writer.options(**CSV_OPTIONS).csv(staging)
    else:
        writer.parquet(staging)
    try:
        if parts:
            if fs.exists(out):
                fs.delete(out, recursive=True)  # _check_target made sure it only holds an earlier output
            fs.rename(staging, out)
        else:
            written = [p for p in fs.children(staging) if fs.name(p).startswith("part-")]
            if len(written) != 1:
                raise OSError(f"the export of {table} wrote {len(written)} part files instead of one")
            (part,) = written
            if fs.exists(out):
                fs.delete(out, recursive=False)
            fs.rename(part, out)
    finally:
        if fs.exists(staging):
            fs.delete(staging, recursive=True)  # our own hidden folder
    return given


def _exportable(df: DataFrame, fmt: str) -> DataFrame:
    if fmt != "csv":
        return df
    nested = (ArrayType, MapType, StructType)
    return df.select(
        *[
            F.to_json(F.col(f.name)).alias(f.name) if isinstance(f.dataType, nested) else F.col(f.name)
            for f in df.schema
        ]
    )


def _check_target(fs: HadoopFiles, out: str, shown_as: str, parts: bool, replace: bool) -> None:
    if not fs.exists(out):
        return
    if not parts:
        if fs.is_dir(out):
            raise ExportRefused(
                f"{shown_as} is a folder: name the file to write (or pass --parts to write part files into a folder)"
            )
        if not replace:
            raise ExportRefused(f"{shown_as} exists: pass --replace to replace it")
        return
    if not fs.is_dir(out):
        raise ExportRefused(f"{shown_as} is a file, not a folder")
    entries = [fs.name(p) for p in fs.children(out)]
    if not entries:
        return
    if not replace:
        raise ExportRefused(
            f"{shown_as} is not empty ({len(entries)} entries): pass --replace to replace an earlier export"
        )
    foreign = sorted(e for e in entries if not _SPARK_OUTPUT.match(e))
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ExportRefused(f"{shown_as} holds files an export did not write ({shown}): choose another folder")
