"""Column contract of `ingested_files`: the ledger of input files a scheduled run has seen.

One row per input file (its path relative to the input folder, the identity every table keys rows
by), rewritten when the file changes. See ackreplay/ledger.py.
"""

from pyspark.sql.types import IntegerType, LongType, StringType, TimestampType

from ackreplay.schemas.tables import _schema

INGESTED_FILES = _schema(
    ("cluster", StringType(), False),
    ("source_file", StringType(), False),  # relative to the input folder: the rows' `source_file`
    ("broker_id", IntegerType(), True),  # null for topics.txt and metrics scrapes
    ("kind", StringType(), False),  # request_log | server_log | state_change_log | topics | metrics
    ("path", StringType(), False),  # where it was read (absolute path or URI)
    ("size", LongType(), False),  # bytes on storage
    ("modified_at", TimestampType(), False),  # modification time (UTC, microseconds)
    ("compression", StringType(), False),  # gzip | none (from the magic bytes)
    ("content_bytes", LongType(), False),  # decompressed size
    ("fingerprint", StringType(), False),  # sha256(content size, first MiB, last MiB) of the content
    ("first_event_time", TimestampType(), True),  # UTC time of the first line (null: no readable time)
    ("last_event_time", TimestampType(), True),  # UTC time of the last line
    # ingested: its rows are in the tables; duplicate: same content as `duplicate_of`, not ingested
    ("status", StringType(), False),
    ("duplicate_of", StringType(), True),  # source_file of the copy whose rows are in the tables
    ("detail", StringType(), True),  # e.g. a gzip stream that ends early
    ("ingest_run_id", StringType(), False),  # the run that ingested (or skipped) this version of the file
    ("replay_run_id", StringType(), True),  # null until a replay has covered this version's rows
    ("gold_run_id", StringType(), True),  # null until the gold tables (and report) have covered it
    ("recorded_at", TimestampType(), False),
)
