"""What a scheduled run must know about an input file before ingesting it: a content fingerprint (to
tell a new or changed file from a copy of one already ingested) and the times of its first and last
lines (to select files by date).

The fingerprint is sha256 over the size of the decompressed content, its first MiB and its last MiB.
Broker logs are append-only and nearly every line carries a millisecond timestamp and request ids,
so two different logs do not share size, head and tail, and a log that grew changes size; hashing
every byte of GBs of logs would read them a second time for no gain. Compressed files are hashed
over their decompressed content, so that `kafka-request.log.2026-11-20-10` and a `.gz` copy of it
get the same fingerprint; a new `.gz` is therefore read whole (as the ingest does anyway), on the
executors, one Spark task per file.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from ackreplay.kafka_lines import LINE_STAMP_BYTES
from ackreplay.storage.filesystems import open_uri, s3a_settings
from ackreplay.storage.inputs import InputError, InputFile

SAMPLE_BYTES = 1 << 20
_READ_BYTES = 4 << 20
_FINGERPRINT_VERSION = b"ackreplay-fingerprint-1\n"
_MAX_TASKS = 512

# The stamp at the start of a log4j line (broker JVM local time, no zone).
# A Prometheus text sample with a timestamp (epoch milliseconds, UTC): `name{labels} value ts`.
_SAMPLE_TIME = re.compile(
    rb"^[A-Za-z_:][A-Za-z0-9_:]*(?:\{[^\n]*\})?[ \t]+\S+[ \t]+(\d{10,16})[ \t]*\r?$", re.MULTILINE
)
_TIME_PATTERN = {
    "request_log": LINE_STAMP_BYTES,
    "server_log": LINE_STAMP_BYTES,
    "state_change_log": LINE_STAMP_BYTES,
    "controller_log": LINE_STAMP_BYTES,
    "metrics": _SAMPLE_TIME,
}

_FACTS_ARROW = pa.schema(
    [
        ("uri", pa.string()),
        ("content_bytes", pa.int64()),
        ("fingerprint", pa.string()),
        ("first_time", pa.string()),
        ("last_time", pa.string()),
        ("detail", pa.string()),
        ("error", pa.string()),
    ]
)


@dataclass(frozen=True)
class FileFacts:
    """Fingerprint and time span of one file's content.

    `first_time`/`last_time` are the raw time text of the earliest line in the first MiB and the
    latest line in the last MiB: `yyyy-MM-dd HH:mm:ss,SSS` (or `,SSSSSS`) local time for broker logs, epoch
    milliseconds for metrics scrapes, None when no line has a readable time (and for topics.txt).
    """

    content_bytes: int
    fingerprint: str
    first_time: str | None
    last_time: str | None
    detail: str | None = None  # e.g. a gzip stream that ends early: the fingerprint covers what was read


def _sample_plain(filesystem, path: str, listed_size: int) -> tuple[bytes, bytes, int]:
    # Only the bytes up to the listed size: a live log may have grown since the listing.
    with filesystem.open_input_file(path) as f:
        size = min(listed_size, f.size())
        head = f.read_at(min(SAMPLE_BYTES, size), 0)
        tail_start = max(0, size - SAMPLE_BYTES)
        tail = f.read_at(size - tail_start, tail_start)
    return head, tail, size


def _sample_gzip(filesystem, path: str) -> tuple[bytes, bytes, int, str | None]:
    head, tail, size, detail = b"", b"", 0, None
    stream = pa.CompressedInputStream(filesystem.open_input_stream(path, compression=None), "gzip")
    try:
        while chunk := stream.read(_READ_BYTES):
            if len(head) < SAMPLE_BYTES:
                head += chunk[: SAMPLE_BYTES - len(head)]
            tail = (tail + chunk)[-SAMPLE_BYTES:]
            size += len(chunk)
    except OSError as exc:  # cut mid-stream: the ingest keeps the lines before the cut, so does the fingerprint
        detail = f"gzip stream ends early after {size} bytes: {exc}"
    finally:
        stream.close()
    return head, tail, size, detail


def _time_text(pattern: re.Pattern | None, data: bytes, last: bool) -> str | None:
    if pattern is None:
        return None
    found = [m.group(1).decode() for m in pattern.finditer(data)]
    if not found:
        return None
    # Times of one file are nearly ordered (threads interleave by milliseconds): take the extreme one.
    # Stamps compare as text in time order, also `,SSS` against `,SSSSSS` (a prefix sorts first).
    if pattern is _SAMPLE_TIME:
        return str(max(map(int, found)) if last else min(map(int, found)))
    return max(found) if last else min(found)


def read_facts(
    uri: str, compression: str, kind: str, listed_size: int, settings: Mapping[str, str] | None = None
) -> FileFacts:
    """Fingerprint and first/last line times of one file (raises OSError if it cannot be opened); an object
    store's file is opened with the Hadoop S3A `settings` (`filesystems.s3a_settings`)."""
    filesystem, path = open_uri(uri, settings)
    detail = None
    if compression == "gzip":
        head, tail, size, detail = _sample_gzip(filesystem, path)
    else:
        head, tail, size = _sample_plain(filesystem, path, listed_size)
    digest = hashlib.sha256(_FINGERPRINT_VERSION)
    digest.update(f"{size}\n".encode())
    digest.update(head)
    digest.update(tail)
    pattern = _TIME_PATTERN.get(kind)
    return FileFacts(
        size, digest.hexdigest(), _time_text(pattern, head, False), _time_text(pattern, tail, True), detail
    )


# A few small files are read on the driver, as Spark lists a few paths on the driver
# (spark.sql.sources.parallelPartitionDiscovery.threshold): a Spark job's fixed cost (scheduling, Python
# workers importing pyarrow) is seconds, reading a few MB is milliseconds. Bytes to read: the whole of a
# gzip file, the two samples of a plain one.
DRIVER_MAX_READ_BYTES = 64 << 20


def _bytes_to_read(f: InputFile) -> int:
    return f.size if f.compression == "gzip" else min(f.size, 2 * SAMPLE_BYTES)


def _facts_row(uri: str, compression: str, kind: str, size: int, settings: Mapping[str, str] | None = None) -> dict:
    try:
        return {"uri": uri, **read_facts(uri, compression, kind, size, settings).__dict__, "error": None}
    except OSError as exc:
        return {"uri": uri, "error": str(exc).splitlines()[0] if str(exc) else repr(exc)}


def collect_facts(
    spark: SparkSession, files: Sequence[InputFile], distributed: bool | None = None
) -> dict[str, FileFacts]:
    """`read_facts` of every file (by uri); an unreadable file is an InputError.

    On the executors, one Spark task per file, unless there is little to read
    (`DRIVER_MAX_READ_BYTES`; `distributed` decides instead when given). Collects one small row per
    file: the driver already holds the file listing.
    """
    if not files:
        return {}
    rows = [(f.uri, f.compression, f.kind, f.size) for f in files]
    settings = s3a_settings(spark)
    if distributed is None:
        distributed = sum(map(_bytes_to_read, files)) > DRIVER_MAX_READ_BYTES
    if distributed:
        collected = _collect_on_executors(spark, rows, settings)
    else:
        # pyarrow reads and inflates without the GIL: a thread per core
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            collected = [*pool.map(lambda row: _facts_row(row[0], row[1], row[2], row[3], settings), rows)]
    result = {}
    for row in collected:
        if row["error"] is not None:
            raise InputError(f"cannot read input file {row['uri']}: {row['error']}")
        result[row["uri"]] = FileFacts(
            row["content_bytes"], row["fingerprint"], row["first_time"], row["last_time"], row["detail"]
        )
    return result


def _collect_on_executors(spark: SparkSession, rows: list[tuple], settings: Mapping[str, str]) -> list:
    files_df = spark.createDataFrame(rows, "uri string, compression string, kind string, size bigint").repartition(
        min(len(rows), _MAX_TASKS)
    )

    def read_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = [_facts_row(**row, settings=settings) for batch in batches for row in batch.to_pylist()]
        yield pa.RecordBatch.from_pylist(out, schema=_FACTS_ARROW)

    return files_df.mapInArrow(read_partition, from_arrow_schema(_FACTS_ARROW)).collect()
