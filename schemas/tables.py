"""Column contracts of the lakehouse tables (see design.md, "Data flow").

Times are TIMESTAMP (UTC, microseconds); durations are DOUBLE milliseconds.
"""

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

RECORD_SENDS = ArrayType(
    StructType([StructField("after_ms", IntegerType(), True), StructField("records", IntegerType(), True)]), True
)


def _schema(*fields: tuple) -> StructType:
    return StructType([StructField(name, dtype, nullable) for name, dtype, nullable in fields])


_LINE_ORIGIN = (
    ("source_file", StringType(), False),
    ("line_number", LongType(), False),
    ("event_date", DateType(), True),
    ("ingest_run_id", StringType(), False),
)

REQUEST_LOG_LINES = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), False),
    ("source_file", StringType(), False),
    ("line_number", LongType(), False),
    ("line", StringType(), True),
    ("line_bytes", IntegerType(), True),
    ("status", StringType(), False),  # parsed | quarantined | unused
    ("detail", StringType(), True),  # quarantine reason, or what an unused line is
    ("api_key_name", StringType(), True),
    ("t_log", TimestampType(), True),
    ("event_date", DateType(), True),
    ("ingest_run_id", StringType(), False),
)

QUARANTINE = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), True),
    ("stage", StringType(), False),  # request_log | topics
    ("source_file", StringType(), False),
    ("line_number", LongType(), False),
    ("line", StringType(), True),
    ("reason", StringType(), False),
    ("event_date", DateType(), True),
    ("ingest_run_id", StringType(), False),
)

_TIMING = (
    ("t_log", TimestampType(), False),
    ("t_start", TimestampType(), False),
    ("t_dequeue", TimestampType(), False),
    ("t_local_done", TimestampType(), False),
)
_RAW_TIMES = (
    ("total_time_ms", DoubleType(), False),
    ("request_queue_time_ms", DoubleType(), False),
    ("local_time_ms", DoubleType(), False),
    ("remote_time_ms", DoubleType(), False),
    ("throttle_time_ms", LongType(), True),
    ("response_queue_time_ms", DoubleType(), False),
    ("send_time_ms", DoubleType(), False),
)

PRODUCE_REQUESTS = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), False),  # the leader that logged it
    ("topic", StringType(), False),
    ("topic_id", StringType(), True),
    ("partition", IntegerType(), False),
    ("api_version", IntegerType(), False),
    ("client_id", StringType(), True),
    ("correlation_id", IntegerType(), False),
    ("transactional_id", StringType(), True),
    ("acks", IntegerType(), False),
    ("timeout_ms", IntegerType(), False),
    ("records_size_bytes", IntegerType(), True),
    ("error_code", IntegerType(), True),  # null for acks=0 (no response)
    ("error_message", StringType(), True),
    ("base_offset", LongType(), True),  # null for acks=0, -1 on errors
    ("log_append_time_ms", LongType(), True),
    ("log_start_offset", LongType(), True),
    *_TIMING,
    ("t_ack_observed", TimestampType(), True),  # the broker's own ack time, recorded acks=all only
    *_RAW_TIMES,
    ("principal", StringType(), True),
    ("listener", StringType(), True),
    # SocketServer's connection id (local addr-remote addr-index): the broker reads one request of a
    # connection at a time, so produces of one connection are a chain (docs/producer-view.md)
    ("connection", StringType(), True),
    ("client_software_name", StringType(), True),
    ("client_software_version", StringType(), True),
    *_LINE_ORIGIN,
)

FOLLOWER_FETCHES = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), False),  # the leader that logged it
    ("follower_id", IntegerType(), False),
    ("topic", StringType(), False),
    ("topic_id", StringType(), True),
    ("partition", IntegerType(), False),
    ("fetch_offset", LongType(), False),  # the follower's LEO as the leader learns it at t_dequeue
    ("current_leader_epoch", IntegerType(), True),
    ("last_fetched_epoch", IntegerType(), True),
    ("follower_log_start_offset", LongType(), True),
    # Later requests of the same incremental fetch session that omitted the partition: the leader kept
    # this offset for them, until `carried_until` (= t_dequeue when none).
    ("carried_requests", IntegerType(), False),
    ("carried_until", TimestampType(), False),
    ("session_id", IntegerType(), True),
    ("session_epoch", IntegerType(), True),
    ("request_error_code", IntegerType(), True),
    ("partition_error_code", IntegerType(), True),  # null when the response omitted the partition
    ("high_watermark", LongType(), True),
    ("diverging_epoch", BooleanType(), False),
    ("api_version", IntegerType(), False),
    ("correlation_id", IntegerType(), False),
    ("max_wait_ms", IntegerType(), True),
    *_TIMING,
    ("total_time_ms", DoubleType(), False),
    # > 0: the response waited in purgatory (DelayedFetch), so every partition was read without error
    # when the request was handled; a partition error in it arose at completion (leader change).
    ("remote_time_ms", DoubleType(), False),
    *_LINE_ORIGIN,
)

# When the producer sent each batch: the CreateTime of the batch's first record (the producer's send()
# clock unless the application set the timestamp), from `kafka-dump-log --deep-iteration` output, or an
# instrumented client's own log of its batches (the lab's producers). Keyed like produce_requests.
BATCH_SEND_TIMES = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), True),  # null: a client log without topics (then client_id is set)
    ("client_id", StringType(), True),  # set for client logs: their batches match that client's produces
    ("partition", IntegerType(), False),
    ("base_offset", LongType(), False),
    ("records", IntegerType(), True),
    # the epoch of the leader that appended it (kafka-dump-log's partitionLeaderEpoch); null: client logs.
    # After a truncation the next epoch reuses the offsets: the batch matches produces of this epoch only.
    ("leader_epoch", IntegerType(), True),
    ("t_send", TimestampType(), False),
    # create_time (kafka-dump-log) | client_log | topic (read from the topic with Spark's Kafka source)
    ("source", StringType(), False),
    # when each record was sent: ms after t_send, with how many records share that ms, in time order (the
    # records' own CreateTimes, printed by kafka-dump-log --deep-iteration); null: only the batch's is known
    ("record_sends", RECORD_SENDS, True),
    # how many of its records have a key (kafka-dump-log --deep-iteration's keySize >= 0, or the topic's records
    # read with a key); null: not known (client logs, or not every record seen). Keyless records can move to
    # another partition (gold `routing`, KIP-637)
    ("keyed_records", IntegerType(), True),
    *_LINE_ORIGIN,
)

PARTITIONS = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("topic_id", StringType(), True),
    ("partition", IntegerType(), False),
    ("replicas", ArrayType(IntegerType()), False),  # assignment order (election preference)
    ("replication_factor", IntegerType(), False),
    ("min_insync_replicas", IntegerType(), False),
    ("min_insync_replicas_source", StringType(), False),  # topic | cluster_default
    ("leader_at_describe", IntegerType(), True),
    ("isr_at_describe", ArrayType(IntegerType()), True),
    ("elr_at_describe", ArrayType(IntegerType()), True),
    ("topic_configs", MapType(StringType(), StringType()), True),
    ("source_file", StringType(), False),
    ("line_number", LongType(), False),
    ("ingest_run_id", StringType(), False),
)
