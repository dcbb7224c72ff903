"""Reading raw text files into numbered lines, on the executors.

Spark's text source does not number lines, and a gzip file that ends mid-stream makes it fail the
whole job. This reader runs as `mapInArrow` over a one-row-per-file DataFrame: each task streams its files,
one at a time, with pyarrow (gzip detected by magic bytes), splits lines in C, and emits Arrow batches of
(file, line number, text); for request logs the same task also classifies and parses the lines
(`read_request_logs`), so the text crosses from Python to Spark once. Problems stay attached to the
line they concern (`read_error`) so that the ingestion can quarantine them instead of losing them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from ackreplay.kafka_lines import LINE_STAMP_BYTES
from ackreplay.session import is_connect
from ackreplay.storage.filesystems import open_uri, s3a_settings
from ackreplay.storage.inputs import InputFile

# What the Python reader emits; cluster, broker and file are looked up from `file_index` in Spark.
READER_SCHEMA = pa.schema(
    [
        ("file_index", pa.int32()),
        ("line_number", pa.int64()),
        ("line", pa.string()),
        ("line_bytes", pa.int32()),
        ("read_error", pa.string()),
        ("first_log_time", pa.string()),
    ]
)
# `read_lines`' rows: the reader's, with the file's cluster, broker and path in place of its index.
LINES_SCHEMA = StructType(
    [
        StructField("cluster", StringType()),
        StructField("broker_id", IntegerType()),
        StructField("source_file", StringType()),
        *[f for f in from_arrow_schema(READER_SCHEMA).fields if f.name != "file_index"],
    ]
)


def _open(uri: str, compression: str, settings: Mapping[str, str] | None = None):
    filesystem, path = open_uri(uri, settings)
    try:
        raw = filesystem.open_input_stream(path, compression=None)
    except OSError as exc:
        raise OSError(f"cannot read input file {uri}: {exc}") from None
    return pa.CompressedInputStream(raw, "gzip") if compression == "gzip" else raw


def _decode(lines: list[bytes], max_line_bytes: int) -> tuple[pa.Array, pa.Array, list[str | None]]:
    """Arrow text, byte lengths and per-line errors for a list of raw lines (terminator removed)."""
    raw = pa.array(lines, type=pa.binary())
    lengths = pc.binary_length(raw).cast(pa.int32())
    errors: list[str | None] = [None] * len(lines)
    oversized = pc.greater(lengths, max_line_bytes)
    clean = not pc.any(oversized).as_py()
    if clean:
        try:
            text = raw.cast(pa.string())  # validates UTF-8 in C
        except pa.ArrowInvalid:
            clean = False
    if not clean:
        decoded = []
        for i, line in enumerate(lines):
            kept = line
            if len(line) > max_line_bytes:
                errors[i] = (
                    f"line of {len(line)} bytes exceeds ingest.max_line_bytes={max_line_bytes}; first bytes kept"
                )
                kept = line[:max_line_bytes]
            try:
                decoded.append(kept.decode("utf-8"))
            except UnicodeDecodeError as exc:
                decoded.append(kept.decode("utf-8", errors="replace"))
                errors[i] = errors[i] or f"invalid UTF-8 at byte {exc.start}"
        text = pa.array(decoded, type=pa.string())
    if pc.any(pc.ends_with(text, "\r")).as_py():  # CRLF files
        text = pc.utf8_rtrim(text, characters="\r")
    return text, lengths, errors


def iter_file_lines(
    file_row: dict,
    chunk_bytes: int,
    max_line_bytes: int,
    batch_lines: int = 65536,
    settings: Mapping[str, str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stream one file as Arrow batches of numbered lines (1-based line numbers); an object store's file is
    opened with the Hadoop S3A `settings` (`filesystems.s3a_settings`)."""
    stream = _open(file_row["uri"], file_row["compression"], settings)
    carry = b""
    carry_overflow = 0  # bytes of an oversized line dropped beyond max_line_bytes
    next_line = 1
    first_log_time: str | None = None
    read_error: str | None = None

    def batch(lines: list[bytes], errors_extra: dict[int, str] | None = None) -> pa.RecordBatch:
        nonlocal next_line
        text, lengths, errors = _decode(lines, max_line_bytes)
        for i, err in (errors_extra or {}).items():
            errors[i] = err
        n = len(lines)
        numbers = pa.array(np.arange(next_line, next_line + n, dtype=np.int64))
        next_line += n
        return pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(file_row["file_index"], pa.int32()), n),
                numbers,
                text,
                lengths,
                pa.array(errors, pa.string()),
                pa.repeat(pa.scalar(first_log_time, pa.string()), n),
            ],
            schema=READER_SCHEMA,
        )

    try:
        while True:
            chunk = stream.read(chunk_bytes)
            if not chunk:
                break
            if first_log_time is None and (m := LINE_STAMP_BYTES.search(carry + chunk[:65536])):
                first_log_time = m.group(1).decode()
            if carry_overflow and b"\n" not in chunk:
                carry_overflow += len(chunk)
                continue
            parts = (carry + chunk).split(b"\n")
            carry = parts.pop()
            extra: dict[int, str] = {}
            if carry_overflow and parts:
                extra[0] = (
                    f"line of {len(parts[0]) + carry_overflow} bytes exceeds "
                    f"ingest.max_line_bytes={max_line_bytes}; first bytes kept"
                )
                parts[0] = parts[0][:max_line_bytes]
                carry_overflow = 0
            if len(carry) > max_line_bytes:
                carry_overflow = len(carry) - max_line_bytes
                carry = carry[:max_line_bytes]
            for start in range(0, len(parts), batch_lines):
                piece = parts[start : start + batch_lines]
                piece_extra = {i - start: e for i, e in extra.items() if start <= i < start + batch_lines}
                yield batch(piece, piece_extra)
    except OSError as exc:  # e.g. a gzip stream cut short: keep what was read, flag the tail
        read_error = f"file unreadable after line {next_line - 1 + (1 if carry else 0)}: {exc}"
    finally:
        stream.close()
    if carry or carry_overflow or read_error:
        extra = {}
        if read_error:
            extra[0] = read_error
        elif carry_overflow:
            extra[0] = (
                f"line of {len(carry) + carry_overflow} bytes exceeds ingest.max_line_bytes={max_line_bytes}; "
                "first bytes kept"
            )
        yield batch([carry], extra)


def read_order(sizes: Sequence[int], tasks: int) -> list[int]:
    """File indexes in the order `spark.range(n, numPartitions=tasks)` hands them to its tasks, so that each
    task reads about as many bytes: the biggest file first, each into the task with the fewest bytes so far
    that has room. Spark's range gives task i the ids [i*n // tasks, (i+1)*n // tasks) (`RangeExec`)."""
    n = len(sizes)
    room = [(i + 1) * n // tasks - i * n // tasks for i in range(tasks)]
    loads = [0] * tasks
    members: list[list[int]] = [[] for _ in range(tasks)]
    for index in sorted(range(n), key=lambda i: -sizes[i]):
        task = min((t for t in range(tasks) if len(members[t]) < room[t]), key=lambda t: (loads[t], t))
        members[task].append(index)
        loads[task] += sizes[index]
    return [index for task in members for index in task]


def _map_files(
    spark: SparkSession,
    files: Sequence[InputFile],
    read_file: Callable[[dict], Iterator[pa.RecordBatch]],
    schema: StructType,
    columns: Sequence[str],
) -> DataFrame:
    """`read_file(file row)` for every file, with cluster, broker and file looked up: at most two tasks per core
    of the session, each reading whole files in turn. A Python task has a fixed cost (tens of ms), and a
    cluster's broker logs, scrapes and dumps are many small files."""
    file_structs = F.array(
        *[
            F.struct(
                F.lit(i).alias("file_index"),
                F.lit(f.cluster).alias("cluster"),
                F.lit(f.broker_id).cast("int").alias("broker_id"),
                F.lit(f.source_file).alias("source_file"),
                F.lit(f.uri).alias("uri"),
                F.lit(f.compression).alias("compression"),
            )
            for i, f in enumerate(files)
        ]
    )
    tasks = min(len(files), 2 * session_cores(spark))
    order = F.array(*[F.lit(i) for i in read_order([f.size for f in files], tasks)])
    files_df = (
        spark.range(0, len(files), 1, numPartitions=tasks)
        .select(F.element_at(file_structs, F.element_at(order, F.col("id").cast("int") + 1) + 1).alias("f"))
        .select("f.file_index", "f.cluster", "f.uri", "f.compression")
    )

    def read_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for file_batch in batches:
            for row in file_batch.to_pylist():
                yield from read_file(row)

    file_of_line = F.element_at(file_structs, F.col("file_index") + 1)
    return files_df.mapInArrow(read_partition, schema).select(
        file_of_line["cluster"].alias("cluster"),
        file_of_line["broker_id"].alias("broker_id"),
        file_of_line["source_file"].alias("source_file"),
        *columns,
    )


def session_cores(spark: SparkSession) -> int:
    """The cores the session's tasks run on: Spark's default parallelism; on Spark Connect, which does not say,
    `spark.default.parallelism` if the server set it, else its shuffle partitions (sized to its cores)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    setting = spark.conf.get("spark.default.parallelism", None) or spark.conf.get("spark.sql.shuffle.partitions")
    return max(1, int(setting or 1))


def read_lines(spark: SparkSession, files: Sequence[InputFile], chunk_bytes: int, max_line_bytes: int) -> DataFrame:
    """A DataFrame of every line of `files` (each file read by one task, `_map_files`)."""
    if not files:
        return spark.createDataFrame([], LINES_SCHEMA)

    settings = s3a_settings(spark)

    def read_file(row: dict) -> Iterator[pa.RecordBatch]:
        return iter_file_lines(row, chunk_bytes, max_line_bytes, settings=settings)

    columns = ["line_number", "line", "line_bytes", "read_error", "first_log_time"]
    return _map_files(spark, files, read_file, from_arrow_schema(READER_SCHEMA), columns)


def read_request_logs(
    spark: SparkSession, files: Sequence[InputFile], chunk_bytes: int, max_line_bytes: int, topic_ids: dict[str, str]
) -> DataFrame:
    """Every line of request-log `files`, classified and parsed in the reading task.

    One `line` row per line (text, status, detail) and the silver rows of parsed PRODUCE and
    follower FETCH lines (see `schemas.request_log.PARSED_ROW_FIELDS`), each file read by one task.
    `topic_ids` maps "cluster/topicId" -> topic name.
    """
    from ackreplay.ingest.request_log_parser import parsed_batches
    from ackreplay.schemas.request_log import PARSED_ROW_FIELDS, PARSED_ROW_SPARK_SCHEMA

    settings = s3a_settings(spark)

    def read_file(row: dict) -> Iterator[pa.RecordBatch]:
        for batch in iter_file_lines(row, chunk_bytes, max_line_bytes, settings=settings):
            n = batch.num_rows
            yield from parsed_batches(
                batch.select(["file_index", "line_number", "first_log_time"]),
                batch.column("line"),
                batch.column("line_bytes"),
                batch.column("read_error"),
                pa.repeat(pa.scalar(row["cluster"], pa.string()), n),
                topic_ids,
            )

    origin = from_arrow_schema(
        pa.schema([READER_SCHEMA.field(n) for n in ("file_index", "line_number", "first_log_time")])
    )
    schema = StructType([*origin.fields, *PARSED_ROW_SPARK_SCHEMA.fields])
    columns = ["line_number", "first_log_time", *[name for name, _ in PARSED_ROW_FIELDS]]
    return _map_files(spark, files, read_file, schema, columns)


def read_dump_logs(spark: SparkSession, files: Sequence[InputFile], chunk_bytes: int, max_line_bytes: int) -> DataFrame:
    """The lines of kafka-dump-log output `files`, classified in the reading task (one per file) by
    `ackreplay.ingest.dump_log_parser` (`FOLDED_SCHEMA`: the text of quarantined lines only, unused lines folded
    into one row per detail that says how many `lines` it stands for)."""
    from ackreplay.ingest.dump_log_parser import FOLDED_SCHEMA, DumpLogClassifier, fold_unused_lines

    settings = s3a_settings(spark)

    def read_file(row: dict) -> Iterator[pa.RecordBatch]:
        classifier = DumpLogClassifier()
        index = pa.scalar(row["file_index"], pa.int32())

        def with_file(part: pa.Table | None) -> Iterator[pa.RecordBatch]:
            if part is not None and part.num_rows:
                part = fold_unused_lines(part)
                table = part.add_column(0, "file_index", pa.repeat(index, part.num_rows))
                yield from table.to_batches()

        for batch in iter_file_lines(row, chunk_bytes, max_line_bytes, settings=settings):
            yield from with_file(
                classifier.feed(batch.column("line_number"), batch.column("line"), batch.column("read_error"))
            )
        yield from with_file(classifier.finish())

    schema = StructType([StructField("file_index", IntegerType()), *from_arrow_schema(FOLDED_SCHEMA).fields])
    return _map_files(spark, files, read_file, schema, FOLDED_SCHEMA.names)
