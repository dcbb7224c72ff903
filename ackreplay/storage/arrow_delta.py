"""A Delta table's data files written from Arrow on the executors, committed in one transaction on the driver.

Spark's Delta writer turns every row into a JVM row and encodes it value by value with parquet-mr; for
the replay's output (five rows per produce, 28 columns) that write alone took 102 s of a 10M-produce
replay on the 2-core machine, against 10 s for the whole DuckDB peer (docs/benchmarks.md). The replay's
rows already exist as Arrow tables in the Python workers, so there they are written with pyarrow's
C++ Parquet writer instead (about ten times less CPU per row), and only a description of each file
(path, size, partition values, row count, Delta statistics) goes back to Spark.

`ArrowFileWriter` (picklable, used inside a Spark task) writes the files where Spark would: under the
table's folder, one Hive-style folder per partition value (`cluster=<c>/event_date=<d>/`, escaped as
Spark escapes them), named `part-<uuid>.c000.snappy.parquet`, partition columns left out of the file.
`commit_files` (driver) adds them to the Delta log and removes the files of the partitions they
replace, in one transaction written with delta-rs (`deltalake`, the Rust implementation of the same
protocol delta-spark reads and writes). Until that commit the files are invisible: a run killed
midway leaves the table at its last version (the orphaned files are what `VACUUM` removes).

Only for tables on a local or mounted filesystem (`arrow_writable`); elsewhere the replay uses
Spark's writer (`replay.writer` in conf).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# Characters Spark escapes in a partition folder name (ExternalCatalogUtils.escapePathName).
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 32)}
# Delta truncates string statistics longer than this; longer values are left out of our statistics.
_MAX_STATS_STRING = 32


def escape_partition_value(value: str) -> str:
    """A partition value as Spark writes it in a folder name (`a=b` -> `a%3Db`)."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in value)


def arrow_writable(root: str) -> bool:
    """Whether `root` is a folder pyarrow writes to directly: a plain path or a file:// URI."""
    scheme = urlparse(root).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(root: str) -> str:
    """`root` (a path or file:// URI) as an absolute local path: executors resolve relative paths
    against their own working folder, not the driver's."""
    parsed = urlparse(root)
    return os.path.abspath(parsed.path if parsed.scheme == "file" else root)


def _stat_value(value):
    if isinstance(value, str) and len(value) > _MAX_STATS_STRING:
        return None
    return value


def delta_stats(table: pa.Table, columns: Sequence[str]) -> str:
    """Delta's per-file statistics JSON (numRecords, minValues, maxValues, nullCount) for `columns`."""
    mins, maxs, nulls = {}, {}, {}
    for name in columns:
        if name not in table.column_names:
            continue
        col = table.column(name)
        if pa.types.is_dictionary(col.type):  # bounds of the values used, from the (small) dictionary
            col = col.combine_chunks()
            valid = col.indices.drop_null().to_numpy()
            used = np.flatnonzero(np.bincount(valid, minlength=len(col.dictionary)))
            col = col.dictionary.take(pa.array(used, pa.int32()))
        nulls[name] = table.column(name).null_count
        bounds = pc.min_max(col)
        low, high = _stat_value(bounds["min"].as_py()), _stat_value(bounds["max"].as_py())
        if low is not None and high is not None:
            mins[name], maxs[name] = low, high
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}, default=str
    )


@dataclass(frozen=True)
class ArrowFileWriter:
    """Writes Arrow tables as Parquet data files of one Delta table (inside Spark tasks)."""

    root: str  # absolute local path of the table folder
    partition_by: tuple[str, ...]
    stats_columns: tuple[str, ...]
    dictionary_columns: tuple[str, ...] = ()  # columns worth dictionary-encoding (few distinct values)
    statistics_columns: tuple[str, ...] = ()  # columns with Parquet row-group statistics (readers filter on)
    delta_encoded_columns: tuple[str, ...] = ()  # integer/timestamp columns written DELTA_BINARY_PACKED

    def write(self, partition_values: Mapping[str, str], row_groups: Sequence[pa.Table]) -> dict:
        """Write one file of one partition, one Parquet row group per table of `row_groups` (all of one
        schema, without the partition columns), and return its description: path (relative to the table), size_bytes,
        modification_time_ms, partition_values (JSON), num_records, stats (Delta statistics JSON)."""
        folder = "/".join(f"{k}={escape_partition_value(partition_values[k])}" for k in self.partition_by)
        relative = (
            f"{folder}/part-{uuid.uuid4()}.c000.snappy.parquet"
            if folder
            else f"part-{uuid.uuid4()}.c000.snappy.parquet"
        )
        target = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        schema = row_groups[0].schema
        rows = 0
        with pq.ParquetWriter(
            target,
            schema,
            compression="snappy",
            use_dictionary=[c for c in self.dictionary_columns if c in schema.names],
            write_statistics=[c for c in self.statistics_columns if c in schema.names],
            column_encoding={c: "DELTA_BINARY_PACKED" for c in self.delta_encoded_columns if c in schema.names} or None,
        ) as writer:
            for part in row_groups:
                if part.num_rows:
                    writer.write_table(part, row_group_size=max(part.num_rows, 1))
                    rows += part.num_rows
        whole = pa.concat_tables(row_groups) if len(row_groups) > 1 else row_groups[0]
        stat = os.stat(target)
        return {
            "path": relative,
            "size_bytes": stat.st_size,
            "modification_time_ms": int(stat.st_mtime * 1000),
            "partition_values": json.dumps(dict(partition_values), sort_keys=True),
            "num_records": rows,
            "stats": delta_stats(whole, self.stats_columns),
        }


def delta_schema(schema: pa.Schema) -> pa.Schema:
    """The table schema as Spark records it for a path-based write: every column nullable, plain types."""
    fields = []
    for f in schema:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        fields.append(pa.field(f.name, t, nullable=True))
    return pa.schema(fields)


def commit_files(
    root: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    files: Sequence[Mapping],
    replaces: Callable[[Mapping[str, str]], bool],
    run_id: str,
    configuration: Mapping[str, str] | None = None,
) -> int:
    """Commit `files` (ArrowFileWriter descriptions) to the Delta table at `root` in one transaction that
    also removes every current file whose partition values `replaces`; create the table if needed.
    Returns the rows added. Nothing to add or remove in an existing table: no commit (as Spark's empty
    replaceWhere).

    `schema` is the table's full schema (partition columns included, in table order). A table written by
    an older version with other columns is an error naming what to do, not a silent schema change.
    """
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import AddAction, CommitProperties, RemoveAction, create_table_with_add_actions

    table_schema = delta_schema(schema)
    now_ms = int(time.time() * 1000)
    adds = [
        AddAction(f["path"], int(f["size_bytes"]), json.loads(f["partition_values"]), int(f["modification_time_ms"]),
                  True, f["stats"])
        for f in files
    ]  # fmt: skip
    for f in files:
        if not replaces(json.loads(f["partition_values"])):
            raise ValueError(f"written file {f['path']} is outside the partitions this commit replaces")
    rows = sum(int(f["num_records"]) for f in files)
    metrics = {"numFiles": str(len(adds)), "numOutputRows": str(rows),
               "numOutputBytes": str(sum(int(f["size_bytes"]) for f in files))}  # fmt: skip
    properties = CommitProperties(custom_metadata={"userMetadata": run_id, "operationMetrics": metrics})
    if not DeltaTable.is_deltatable(root):  # created even when empty, as Spark's first write creates it
        create_table_with_add_actions(
            root, DeltaSchema.from_arrow(table_schema), adds, mode="error", partition_by=list(partition_by),
            configuration=dict(configuration or {}), commit_properties=properties,
        )  # fmt: skip
        return rows
    table = DeltaTable(root)
    current = pa.schema(table.schema().to_arrow())
    if [(f.name, f.type) for f in current] != [(f.name, f.type) for f in table_schema]:
        raise ValueError(
            f"table {root} has columns {', '.join(current.names)}, not the current contract's "
            f"({', '.join(table_schema.names)}): it was written by an older version. Delete the folder and "
            "replay again (ackreplay replay --full)."
        )
    existing = pa.table(table.get_add_actions(flatten=True))
    removes = []
    if existing.num_rows:
        part_columns = [existing.column(f"partition.{k}").cast(pa.string()).to_pylist() for k in partition_by]
        for i, (path, size) in enumerate(
            zip(existing.column("path").to_pylist(), existing.column("size_bytes").to_pylist(), strict=False)
        ):
            values = {k: part_columns[j][i] for j, k in enumerate(partition_by)}
            if replaces(values):
                # the log's path is URI-encoded; delta-rs encodes what it is given
                removes.append(RemoveAction(unquote(path), True, now_ms, int(size), values))
    if not adds and not removes:
        return 0
    table.create_write_transaction(
        [*adds, *removes], "append", table_schema, list(partition_by), commit_properties=properties
    )
    return rows
