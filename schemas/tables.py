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
    """A contract from (name, type, nullable, description) tuples; the description is the column's Delta comment."""
    return StructType(
        [StructField(name, dtype, nullable, {"comment": comment}) for name, dtype, nullable, comment in fields]
    )


_LINE_ORIGIN = (
    (
        "source_file",
        StringType(),
        False,
        "Input file the row was read from, relative to the input folder (<cluster>/...): the identity rows are "
        "keyed by",
    ),
    ("line_number", LongType(), False, "1-based number of the row's line in its source file (decompressed)"),
    (
        "event_date",
        DateType(),
        True,
        "UTC date of the row's event time (a line without a readable time: of its file's first timed line); "
        "null when neither is known",
    ),
    ("ingest_run_id", StringType(), False, "Id of the ingest run that wrote the row"),
)

REQUEST_LOG_LINES = _schema(
    ("cluster", StringType(), False, "Cluster the request log belongs to (the input folder's <cluster>)"),
    ("broker_id", IntegerType(), False, "Broker that wrote the request log (its broker-<id> folder)"),
    (
        "source_file",
        StringType(),
        False,
        "Request log file the line was read from, relative to the input folder",
    ),
    ("line_number", LongType(), False, "1-based number of the line in its file (decompressed)"),
    (
        "line",
        StringType(),
        True,
        "Text of the line (an oversized line: its first ingest.max_line_bytes bytes; invalid UTF-8 replaced)",
    ),
    ("line_bytes", IntegerType(), True, "Length of the raw line in bytes, without its line terminator"),
    ("status", StringType(), False, "parsed (it yields silver rows), quarantined (unusable) or unused (not needed)"),
    (
        "detail",
        StringType(),
        True,
        "The quarantine reason, or what an unused line is (its request type, e.g. a consumer fetch); null for "
        "parsed lines",
    ),
    (
        "api_key_name",
        StringType(),
        True,
        "Request type the line names (requestApiKeyName, e.g. PRODUCE, FETCH); null when it names none",
    ),
    (
        "t_log",
        TimestampType(),
        True,
        "Log time of the line (UTC, microseconds), from the broker's local stamp; null when it has no readable time",
    ),
    (
        "event_date",
        DateType(),
        True,
        "UTC date of t_log (a line without a readable time: of its file's first timed line)",
    ),
    ("ingest_run_id", StringType(), False, "Id of the ingest run that wrote the row"),
)

QUARANTINE = _schema(
    ("cluster", StringType(), False, "Cluster the input file belongs to"),
    (
        "broker_id",
        IntegerType(),
        True,
        "Broker (or KRaft controller) whose file holds the line; null for files of no broker (topics.txt, "
        "send-time files)",
    ),
    (
        "stage",
        StringType(),
        False,
        "Input the line came from: request_log, topics, server_log, state_change_log, controller_log, metrics or "
        "send_times",
    ),
    ("source_file", StringType(), False, "Input file of the line, relative to the input folder"),
    ("line_number", LongType(), False, "1-based number of the line in its file (decompressed)"),
    ("line", StringType(), True, "Text of the line as read (an oversized line: its first bytes)"),
    ("reason", StringType(), False, "Why the line could not be used (malformed, truncated, unknown topic id, ...)"),
    (
        "event_date",
        DateType(),
        True,
        "UTC date of the line's log time, or of its file's first timed line; null: not known",
    ),
    ("ingest_run_id", StringType(), False, "Id of the ingest run that wrote the row"),
)

_TIMING = (
    ("t_log", TimestampType(), False, "When the broker logged the completed request (the request log line's time)"),
    ("t_start", TimestampType(), False, "When the request reached the broker: t_log - total_time_ms"),
    (
        "t_dequeue",
        TimestampType(),
        False,
        "When a request handler took the request from the request queue: t_start + request_queue_time_ms",
    ),
    (
        "t_local_done",
        TimestampType(),
        False,
        "When the broker finished the request locally (a produce: appended to the leader's log): t_dequeue + "
        "local_time_ms",
    ),
)
_RAW_TIMES = (
    ("total_time_ms", DoubleType(), False, "The line's totalTimeMs: from the request's arrival to its response sent"),
    ("request_queue_time_ms", DoubleType(), False, "The line's requestQueueTimeMs: time in the request queue"),
    ("local_time_ms", DoubleType(), False, "The line's localTimeMs: time the leader spent handling it locally"),
    (
        "remote_time_ms",
        DoubleType(),
        False,
        "The line's remoteTimeMs: time waiting in purgatory (acks=all: for the followers to replicate the batch)",
    ),
    ("throttle_time_ms", LongType(), True, "The line's throttleTimeMs: quota throttle time; null when not logged"),
    ("response_queue_time_ms", DoubleType(), False, "The line's responseQueueTimeMs: time in the response queue"),
    ("send_time_ms", DoubleType(), False, "The line's sendTimeMs: time to send the response"),
)

PRODUCE_REQUESTS = _schema(
    ("cluster", StringType(), False, "Cluster of the broker that logged the request"),
    ("broker_id", IntegerType(), False, "The leader that logged the request"),
    ("topic", StringType(), False, "Topic of the partition (named by the line, or resolved from its topic id)"),
    ("topic_id", StringType(), True, "Topic id the request names the topic by; null when it names it by name"),
    ("partition", IntegerType(), False, "Partition the batch was produced to"),
    ("api_version", IntegerType(), False, "Produce request version"),
    ("client_id", StringType(), True, "Producer's client.id (hashed with privacy.hash_identities)"),
    ("correlation_id", IntegerType(), False, "Request's correlation id on its connection"),
    (
        "transactional_id",
        StringType(),
        True,
        "Producer's transactional.id; null for non-transactional producers (hashed with privacy.hash_identities)",
    ),
    ("acks", IntegerType(), False, "acks the producer used: -1 (all), 0 or 1"),
    ("timeout_ms", IntegerType(), False, "Request's timeoutMs: how long the leader may wait for the acks"),
    ("records_size_bytes", IntegerType(), True, "Size in bytes of the partition's record batch in the request"),
    (
        "error_code",
        IntegerType(),
        True,
        "Partition's error code in the response (0: none); null for acks=0 (no response)",
    ),
    ("error_message", StringType(), True, "Partition's error message in the response; null when none"),
    (
        "base_offset",
        LongType(),
        True,
        "Offset the leader appended the batch at; null for acks=0, -1 on errors",
    ),
    (
        "log_append_time_ms",
        LongType(),
        True,
        "Response's logAppendTimeMs (epoch ms; -1 unless the topic uses LogAppendTime); null without a response",
    ),
    ("log_start_offset", LongType(), True, "Partition's log start offset in the response; null without a response"),
    *_TIMING,
    (
        "t_ack_observed",
        TimestampType(),
        True,
        "The broker's own ack time, t_local_done + remote_time_ms; recorded for acks=all only (null otherwise)",
    ),
    *_RAW_TIMES,
    ("principal", StringType(), True, "Authenticated principal of the client (hashed with privacy.hash_identities)"),
    ("listener", StringType(), True, "Broker listener the request came in on"),
    # the broker reads one request of a connection at a time, so produces of one connection are a chain
    # (docs/producer-view.md)
    (
        "connection",
        StringType(),
        True,
        "SocketServer's connection id (local addr-remote addr-index) the request came on (hashed with "
        "privacy.hash_identities)",
    ),
    ("client_software_name", StringType(), True, "Client library name the producer reported (KIP-511)"),
    ("client_software_version", StringType(), True, "Client library version the producer reported (KIP-511)"),
    *_LINE_ORIGIN,
)

FOLLOWER_FETCHES = _schema(
    ("cluster", StringType(), False, "Cluster of the leader that logged the fetch"),
    ("broker_id", IntegerType(), False, "The leader that logged the fetch"),
    ("follower_id", IntegerType(), False, "Broker id of the follower that sent the fetch"),
    ("topic", StringType(), False, "Topic of the listed partition (named by the line, or resolved from its topic id)"),
    ("topic_id", StringType(), True, "Topic id the request names the topic by; null when it names it by name"),
    ("partition", IntegerType(), False, "Partition listed in the fetch"),
    (
        "fetch_offset",
        LongType(),
        False,
        "The partition's fetchOffset: the follower's LEO as the leader learns it at t_dequeue",
    ),
    (
        "current_leader_epoch",
        IntegerType(),
        True,
        "Leader epoch the follower believes current (currentLeaderEpoch); null when the request has none",
    ),
    (
        "last_fetched_epoch",
        IntegerType(),
        True,
        "Epoch of the last record the follower fetched (lastFetchedEpoch); null when the request has none",
    ),
    ("follower_log_start_offset", LongType(), True, "Follower's log start offset as the request gives it"),
    # Later requests of the same incremental fetch session that omitted the partition: the leader kept
    # this offset for them, until `carried_until` (= t_dequeue when none).
    (
        "carried_requests",
        IntegerType(),
        False,
        "Later requests of the same fetch session that omitted the partition, for which the leader kept this offset",
    ),
    (
        "carried_until",
        TimestampType(),
        False,
        "t_dequeue of the last of those requests (this row's t_dequeue when none): until when the offset held",
    ),
    ("session_id", IntegerType(), True, "Incremental fetch session id (KIP-227); 0 for sessionless or failed requests"),
    ("session_epoch", IntegerType(), True, "Request's sessionEpoch (0 opens a session, -1 sessionless)"),
    ("request_error_code", IntegerType(), True, "Top-level error code of the fetch response (0: none)"),
    (
        "partition_error_code",
        IntegerType(),
        True,
        "Partition's error code in the response; null when the response omitted the partition",
    ),
    (
        "high_watermark",
        LongType(),
        True,
        "High watermark the leader returned for the partition; null when the response omitted it",
    ),
    (
        "diverging_epoch",
        BooleanType(),
        False,
        "True when the response told the follower its log diverged from the leader's (divergingEpoch set)",
    ),
    ("api_version", IntegerType(), False, "Fetch request version"),
    ("correlation_id", IntegerType(), False, "Request's correlation id on its connection"),
    ("max_wait_ms", IntegerType(), True, "Request's maxWaitMs: how long the leader may hold it for data"),
    *_TIMING,
    ("total_time_ms", DoubleType(), False, "The line's totalTimeMs: from the request's arrival to its response sent"),
    (
        "remote_time_ms",
        DoubleType(),
        False,
        "Time in purgatory (DelayedFetch); > 0: every partition was read without error when handled, so a partition "
        "error arose at completion",
    ),
    *_LINE_ORIGIN,
)

# When the producer sent each batch: the CreateTime of the batch's first record (the producer's send()
# clock unless the application set the timestamp), from `kafka-dump-log --deep-iteration` output, or an
# instrumented client's own log of its batches (the lab's producers). Keyed like produce_requests.
BATCH_SEND_TIMES = _schema(
    ("cluster", StringType(), False, "Cluster the batch was produced to"),
    ("topic", StringType(), True, "Topic of the batch; null for a client log without topics (then client_id is set)"),
    (
        "client_id",
        StringType(),
        True,
        "Producer's client.id, set for client logs: their batches match that client's produces",
    ),
    ("partition", IntegerType(), False, "Partition of the batch"),
    ("base_offset", LongType(), False, "Offset of the batch's first record"),
    ("records", IntegerType(), True, "Records in the batch; null when not known"),
    # After a truncation the next epoch reuses the offsets: the batch matches produces of this epoch only.
    (
        "leader_epoch",
        IntegerType(),
        True,
        "Epoch of the leader that appended the batch (kafka-dump-log's partitionLeaderEpoch, or the produce's for "
        "topic rows); null for client logs",
    ),
    (
        "t_send",
        TimestampType(),
        False,
        "When the producer sent the batch: its first record's CreateTime, or the client log's send time",
    ),
    (
        "source",
        StringType(),
        False,
        "create_time (kafka-dump-log), client_log, or topic (read from the topic with Spark's Kafka source)",
    ),
    # the records' own CreateTimes, printed by kafka-dump-log --deep-iteration
    (
        "record_sends",
        RECORD_SENDS,
        True,
        "When each record was sent: ms after t_send with how many records share that ms, in time order; null when "
        "only the batch's time is known",
    ),
    # kafka-dump-log --deep-iteration's keySize >= 0, or the topic's records read with a key. Keyless records can
    # move to another partition (gold `routing`, KIP-637)
    (
        "keyed_records",
        IntegerType(),
        True,
        "How many of the batch's records have a key; null when not known (client logs, or not every record seen)",
    ),
    *_LINE_ORIGIN,
)

PARTITIONS = _schema(
    ("cluster", StringType(), False, "Cluster the topics.txt describes"),
    ("topic", StringType(), False, "Topic name"),
    ("topic_id", StringType(), True, "Topic id (TopicId:); null when topics.txt does not print it (before 2.8)"),
    ("partition", IntegerType(), False, "Partition number"),
    (
        "replicas",
        ArrayType(IntegerType()),
        False,
        "Assigned replicas' broker ids in assignment order (election preference)",
    ),
    (
        "replication_factor",
        IntegerType(),
        False,
        "Topic's ReplicationFactor (the replica count when its header line is missing)",
    ),
    (
        "min_insync_replicas",
        IntegerType(),
        False,
        "Effective min.insync.replicas: the topic's override, else the conf's "
        "clusters.<name>.default_min_insync_replicas (default 1)",
    ),
    (
        "min_insync_replicas_source",
        StringType(),
        False,
        "Where min_insync_replicas comes from: topic (an override) or cluster_default",
    ),
    (
        "leader_at_describe",
        IntegerType(),
        True,
        "Leader when kafka-topics --describe ran; -1 for none",
    ),
    ("isr_at_describe", ArrayType(IntegerType()), True, "ISR when kafka-topics --describe ran, as printed"),
    (
        "elr_at_describe",
        ArrayType(IntegerType()),
        True,
        "Eligible leader replicas (KIP-966) when describe ran; null when not printed (tools before 3.7)",
    ),
    (
        "topic_configs",
        MapType(StringType(), StringType()),
        True,
        "Topic config overrides from the Configs: field, name -> value; null when none printed",
    ),
    ("source_file", StringType(), False, "The topics.txt the row was read from, relative to the input folder"),
    ("line_number", LongType(), False, "1-based number of the partition's line in topics.txt"),
    ("ingest_run_id", StringType(), False, "Id of the ingest run that wrote the row"),
)
