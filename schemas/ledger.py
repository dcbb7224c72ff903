"""Column contract of `ingested_files`: the ledger of input files a scheduled run has seen.

One row per input file (its path relative to the input folder, the identity every table keys rows
by), rewritten when the file changes. See ackreplay/ledger.py.
"""

from pyspark.sql.types import IntegerType, LongType, StringType, TimestampType

from ackreplay.schemas.tables import _schema

INGESTED_FILES = _schema(
    ("cluster", StringType(), False, "Cluster the input file belongs to"),
    (
        "source_file",
        StringType(),
        False,
        "Path relative to the input folder: the rows' source_file, the file's identity in every table",
    ),
    (
        "broker_id",
        IntegerType(),
        True,
        "Broker (or controller) whose file it is; null for files of no broker (topics.txt, metrics, send-time files)",
    ),
    (
        "kind",
        StringType(),
        False,
        "request_log, server_log, state_change_log, controller_log, topics, metrics, create_times or client_batches",
    ),
    ("path", StringType(), False, "Where the file was read (absolute path or URI)"),
    ("size", LongType(), False, "Size of the file on storage, bytes"),
    ("modified_at", TimestampType(), False, "The file's modification time on storage"),
    ("compression", StringType(), False, "gzip or none (from the file's magic bytes)"),
    ("content_bytes", LongType(), False, "Size of the decompressed content, bytes"),
    (
        "fingerprint",
        StringType(),
        False,
        "sha256 of the content's size, first MiB and last MiB: what tells a changed or copied file",
    ),
    (
        "first_event_time",
        TimestampType(),
        True,
        "UTC time of the file's first line; null: no readable time",
    ),
    ("last_event_time", TimestampType(), True, "UTC time of the file's last line; null: no readable time"),
    (
        "status",
        StringType(),
        False,
        "ingested (its rows are in the tables) or duplicate (same content as duplicate_of, not ingested)",
    ),
    (
        "duplicate_of",
        StringType(),
        True,
        "source_file of the copy whose rows are in the tables; null unless a duplicate",
    ),
    ("detail", StringType(), True, "A problem found reading the file (e.g. a gzip stream that ends early); null: none"),
    (
        "ingest_run_id",
        StringType(),
        False,
        "The ingest run that ingested (or skipped) this version of the file",
    ),
    (
        "replay_run_id",
        StringType(),
        True,
        "The replay run that covered this version's rows; null until a replay has",
    ),
    (
        "gold_run_id",
        StringType(),
        True,
        "The gold run that covered this version (gold tables and report); null until one has",
    ),
    ("recorded_at", TimestampType(), False, "When this ledger row was written (UTC)"),
)
