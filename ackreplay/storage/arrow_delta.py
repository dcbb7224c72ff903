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
replace, in one overwrite transaction per cluster written with delta-rs (`deltalake`, the Rust
implementation of the same protocol delta-spark reads and writes). Until that commit the files are
invisible: a run killed midway leaves the table at its last version (the orphaned files are what `VACUUM` removes).

Only for tables on a local or mounted filesystem (`arrow_writable`); elsewhere the replay uses
Spark's writer (`replay.writer` in conf).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

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


# Databricks mounts its object storage at these local paths through FUSE: writable by pyarrow, but a commit
# there is a commit on object storage, which Spark's writer makes with the storage's own guarantees.
_FUSE_ROOTS = ("/dbfs/", "/Volumes/")

# Writer features of an existing table that a commit of these files keeps right: those of a plain table
# (the legacy appendOnly and invariants, which the replay's tables do not use), deletion vectors (a replace
# removes whole files) and timestampNtz. Others need the writer to do more than add and remove files (row
# tracking, in-commit timestamps, clustering, type widening, check constraints, generated or identity
# columns, column mapping); delta-rs refuses some and would not maintain the rest.
ARROW_WRITER_FEATURES = frozenset({"appendOnly", "invariants", "deletionVectors", "timestampNtz"})


def on_fuse_mount(root: str) -> bool:
    """Whether `root` is a Databricks FUSE path (/dbfs/..., /Volumes/...)."""
    path = local_path(root) + "/"
    return path.startswith(_FUSE_ROOTS)


def unwritable_features(root: str) -> list[str]:
    """The writer features of the Delta table at `root` that a commit of Arrow-written files would not keep
    (none for a table that does not exist yet)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(root):
        return []
    protocol = DeltaTable(root).protocol()
    if protocol.writer_features is None:  # legacy protocol: versions 3-6 add constraints, generated columns ...
        return [f"writer version {protocol.min_writer_version}"] if protocol.min_writer_version > 2 else []
    return sorted(set(protocol.writer_features) - ARROW_WRITER_FEATURES)


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


def delta_schema(schema: pa.Schema, comments: Mapping[str, str] | None = None) -> pa.Schema:
    """The table schema as Spark records it for a path-based write: every column nullable, plain types, and
    the column descriptions of `comments` (Delta's column comments)."""
    fields = []
    for f in schema:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        comment = (comments or {}).get(f.name)
        fields.append(pa.field(f.name, t, nullable=True, metadata={"comment": comment} if comment else None))
    return pa.schema(fields)


# One partition filter of a replace: (column, operator, value) terms that all hold, as delta-rs takes them;
# operators "=", ">=", "<=" on partition values as text (ISO dates sort as text).
Conjunction = Sequence[tuple[str, str, str]]


def in_conjunction(values: Mapping[str, str | None], conjunction: Conjunction) -> bool:
    """Whether a data file with these partition values lies in `conjunction` (a null value lies in none)."""
    for column, operator, bound in conjunction:
        value = values.get(column)
        if value is None:
            return False
        if not {"=": value == bound, ">=": value >= bound, "<=": value <= bound}[operator]:
            return False
    return True


class ConcurrentReplaceError(RuntimeError):
    """Another writer committed to the table while this replace was being prepared."""


def commit_files(
    root: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    files: Sequence[Mapping],
    replaces: Sequence[Conjunction],
    run_id: str,
    configuration: Mapping[str, str] | None = None,
    description: str = "",
    comments: Mapping[str, str] | None = None,
) -> int:
    """Replace the rows of the Delta table at `root` in the partitions `replaces` names (a disjunction of
    conjunctions) with `files` (ArrowFileWriter descriptions); create the table if needed. Returns the rows added.

    Each conjunction is one Delta commit recorded as Spark records a replaceWhere: a WRITE in Overwrite mode whose
    removes are the files of the named partitions (delta-rs derives them from the filter). A commit is made
    against the table version it was prepared from and never rebased: a writer that committed in between (a
    concurrent replay of the same partitions, whose rows this commit would otherwise add beside its own) makes it
    fail with ConcurrentReplaceError, as Spark's replaceWhere fails with ConcurrentAppendException. Nothing to
    add or remove: no commit (as Spark's empty replaceWhere).

    `schema` is the table's full schema (partition columns included, in table order); a table this commit creates
    takes `description` and the column descriptions of `comments` (name -> text). A table written by
    an older version with other columns is an error naming what to do, not a silent schema change.
    """
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import AddAction, CommitProperties, create_table_with_add_actions

    table_schema = delta_schema(schema, comments)
    adds_of: list[list[tuple[AddAction, int, int]]] = [[] for _ in replaces]
    for f in files:
        values = json.loads(f["partition_values"])
        owner = next((i for i, conjunction in enumerate(replaces) if in_conjunction(values, conjunction)), None)
        if owner is None:
            raise ValueError(f"written file {f['path']} is outside the partitions this commit replaces")
        action = AddAction(f["path"], int(f["size_bytes"]), values, int(f["modification_time_ms"]), True, f["stats"])
        adds_of[owner].append((action, int(f["num_records"]), int(f["size_bytes"])))

    def properties(added: list[tuple[AddAction, int, int]], removed_sizes: Sequence[int] = ()) -> CommitProperties:
        # the metrics Spark's replaceWhere records (delta-rs records none for these commits)
        metrics = {"numFiles": str(len(added)), "numAddedFiles": str(len(added)),
                   "numOutputRows": str(sum(a[1] for a in added)), "numOutputBytes": str(sum(a[2] for a in added)),
                   "numRemovedFiles": str(len(removed_sizes)), "numRemovedBytes": str(sum(removed_sizes))}  # fmt: skip
        return CommitProperties(
            custom_metadata={"userMetadata": run_id, "operationMetrics": metrics}, max_commit_retries=0
        )

    rows = sum(int(f["num_records"]) for f in files)
    if not DeltaTable.is_deltatable(root):  # created even when empty, as Spark's first write creates it
        every = [a for added in adds_of for a in added]
        create_table_with_add_actions(
            root, DeltaSchema.from_arrow(table_schema), [a[0] for a in every], mode="error",
            partition_by=list(partition_by), description=description or None,
            configuration=dict(configuration or {}), commit_properties=properties(every),
        )  # fmt: skip
        return rows
    committed: list[str] = []
    for conjunction, added in zip(replaces, adds_of, strict=True):
        table = DeltaTable(root)
        current = pa.schema(table.schema().to_arrow())
        if [(f.name, f.type) for f in current] != [(f.name, f.type) for f in table_schema]:
            raise ValueError(
                f"table {root} has columns {', '.join(current.names)}, not the current contract's "
                f"({', '.join(table_schema.names)}): it was written by an older version. Delete the folder and "
                "replay again (ackreplay replay --full)."
            )
        existing = pa.table(table.get_add_actions(flatten=True))
        columns = {k: existing.column(f"partition.{k}").cast(pa.string()).to_pylist() for k in partition_by}
        sizes = existing.column("size_bytes").to_pylist() if existing.num_rows else []
        held = [
            sizes[i]
            for i in range(existing.num_rows)
            if in_conjunction({k: columns[k][i] for k in partition_by}, conjunction)
        ]
        if not added and not held:
            continue
        read_version = table.version()
        try:
            table.create_write_transaction(
                [a[0] for a in added], "overwrite", table_schema, list(partition_by), list(conjunction),
                commit_properties=properties(added, held),
            )  # fmt: skip
        except CommitFailedError as exc:
            if DeltaTable(root).version() == read_version:  # not a commit in between: delta-rs refused this one
                raise
            done = f"; its replace where {' and where '.join(committed)} was committed" if committed else ""
            raise ConcurrentReplaceError(
                f"table {root} changed while this run replaced its rows where {_as_text(conjunction)} (another "
                f"writer committed after version {read_version}){done}: run it again when the other is done ({exc})"
            ) from None
        committed.append(_as_text(conjunction))
    return rows


def _as_text(conjunction: Conjunction) -> str:
    return " AND ".join(f"{column} {operator} {bound!r}" for column, operator, bound in conjunction)
