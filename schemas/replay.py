"""Contract of silver `produce_replay`: one row per (replayed produce, policy)."""

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _field(name: str, dtype: DataType, nullable: bool, comment: str) -> StructField:
    """A contract column with its description (the column's Delta comment)."""
    return StructField(name, dtype, nullable, {"comment": comment})


_KEY = [
    _field("cluster", StringType(), False, "Cluster of the replayed produce"),
    _field("topic", StringType(), False, "Topic of the produce"),
    _field("partition", IntegerType(), False, "Partition of the produce"),
    _field("leader_epoch", IntegerType(), False, "Leader epoch the batch was appended in"),
    _field("base_offset", LongType(), False, "Offset the leader appended the batch at (produce_requests.base_offset)"),
    _field("broker_id", IntegerType(), False, "The leader that appended the batch"),
    _field("bytes", IntegerType(), True, "Size of the batch's records in bytes (produce_requests.records_size_bytes)"),
    _field(
        "records",
        IntegerType(),
        True,
        "Records in the batch, from its send time's source (silver batch_send_times); null: unknown",
    ),
    _field("recorded_acks", IntegerType(), False, "acks the producer used, as recorded: -1 (all), 0 or 1"),
    _field(
        "policy",
        StringType(),
        False,
        "Ack policy replayed: acks=1, acks=all, min.insync, quorum=<Q> or acks=all@lag=<ms>",
    ),
    _field(
        "outcome",
        StringType(),
        False,
        "acked, not_enough_replicas, not_enough_replicas_after_append, timeout, not_leader or unreplayable",
    ),
]
_TIMES = {
    "t_start": "When the request reached the leader, as recorded (produce_requests.t_start)",
    "t_local_done": "When the leader appended the batch, as recorded: where the replayed wait for acks starts",
    "t_ack": "When the policy answered the batch: its ack, rejection, timeout deadline or the leadership's end (see "
    "outcome)",
    "t_ack_observed": "The broker's own recorded ack time (recorded acks=all produces only); null otherwise",
}
_VALUES = [
    _field("ack_wait_ms", DoubleType(), False, "t_ack - t_local_done, ms"),
    # ackreplay/replay/connections.py; a batch the policy rejected counts until its retry was acknowledged
    # (ackreplay/replay/retries.py). Null: the outcome says why; a rejected batch: not appended within its delivery
    # timeout or the leader's epoch
    _field(
        "latency_ms",
        DoubleType(),
        True,
        "Producer-visible latency, send() to ack, ms: the request replayed on its connection's chain from t_send (or "
        "its estimated arrival); null: not acknowledged to the producer",
    ),
    # t_response - t_start + response queue + send where the request kept its recorded start (a retried batch: its
    # last attempt's)
    _field(
        "broker_latency_ms",
        DoubleType(),
        True,
        "The broker's view of the request that carried the batch under the policy, from its replayed start to its "
        "response sent, ms; null as latency_ms",
    ),
    _field(
        "hol_wait_ms",
        DoubleType(),
        True,
        "Of latency_ms, the time spent in the socket behind the connection's previous responses, ms; null as "
        "latency_ms",
    ),
    _field(
        "copies_at_ack",
        IntegerType(),
        False,
        "Replicas holding the batch at t_ack, leader included; 0 when not acked",
    ),
    _field(
        "exposure_ms",
        DoubleType(),
        True,
        "Time from t_ack until the batch was on min.insync.replicas replicas, ms (inf: never in the data); null: "
        "not acked",
    ),
    _field(
        "full_replication_ms",
        DoubleType(),
        True,
        "Time from t_ack until the batch was on all replicas, ms (inf: never in the data); null: not acked",
    ),
    _field(
        "loss_kafka_election",
        BooleanType(),
        False,
        "A leader failure at t_ack loses the batch under Kafka's election, a follower counted as holding it once "
        "the leader knew: the most lost",
    ),
    _field(
        "loss_longest_log_election",
        BooleanType(),
        False,
        "A leader failure at t_ack loses the batch under the longest-log election (the live replica with the "
        "longest log): the most lost",
    ),
    # the same if a follower held each batch from when the leader sent it (the loss flags above count it
    # only once the leader knew): the least a leader failure at t_ack loses (README, "Loss as a range")
    _field(
        "loss_kafka_election_min",
        BooleanType(),
        False,
        "loss_kafka_election with a follower holding the batch from when the leader sent it: the least lost",
    ),
    _field(
        "loss_longest_log_election_min",
        BooleanType(),
        False,
        "loss_longest_log_election with a follower holding the batch from when the leader sent it: the least lost",
    ),
    _field(
        "offline_at_failure",
        BooleanType(),
        False,
        "No follower in the ISR at t_ack and no live eligible leader replica (KIP-966): a leader failure then "
        "leaves the partition offline (no loss flag set)",
    ),
    # how long after t_ack, in all, a leader failure would still have lost the batch, under each election
    # (most, and least as the loss flags; inf: until the end of the data; README, "Loss as a range")
    _field(
        "loss_window_kafka_ms",
        DoubleType(),
        True,
        "How long after t_ack, in all, a leader failure would have lost the batch under Kafka's election, at most, "
        "ms (inf: to the end of the data); null: not acked",
    ),
    _field(
        "loss_window_kafka_min_ms",
        DoubleType(),
        True,
        "loss_window_kafka_ms at least (a follower holding the batch from when the leader sent it), ms; null: not "
        "acked",
    ),
    _field(
        "loss_window_longest_ms",
        DoubleType(),
        True,
        "How long after t_ack, in all, a leader failure would have lost the batch under the longest-log election, "
        "at most, ms (inf: to the end of the data); null: not acked",
    ),
    _field(
        "loss_window_longest_min_ms",
        DoubleType(),
        True,
        "loss_window_longest_ms at least (a follower holding the batch from when the leader sent it), ms; null: "
        "not acked",
    ),
    _field(
        "isr_source",
        StringType(),
        False,
        "ISR the policy used: logs (committed ISR from the logs), assumed_full (no ISR line: every follower in sync) "
        "or simulated (acks=all@lag)",
    ),
    _field(
        "leo_source",
        StringType(),
        False,
        "Where the follower LEO timeline came from: follower_fetches (request log, ms) or jmx_metrics (scrapes, ~1 s)",
    ),
    _field("source_file", StringType(), False, "Request log file of the produce, relative to the input folder"),
    _field("line_number", LongType(), False, "1-based number of the produce's line in its request log"),
    _field("event_date", DateType(), True, "UTC date of the produce's request log line (produce_requests.event_date)"),
]

ISR_SOURCES = ["logs", "assumed_full", "simulated"]

PRODUCE_REPLAY = StructType(
    _KEY
    + [_field(name, TimestampType(), name == "t_ack_observed", comment) for name, comment in _TIMES.items()]
    + [
        _field(
            "t_response",
            TimestampType(),
            False,
            "When the broker would answer the whole request under the policy: the latest t_ack over its partitions "
            "(a request completes when all do; clients see this one)",
        )
    ]
    + [
        _field(
            "t_send",
            TimestampType(),
            True,
            "When the producer sent the batch: its first record's CreateTime (silver batch_send_times); null: unknown",
        )
    ]
    + _VALUES
    + [_field("replay_run_id", StringType(), False, "Id of the replay run that wrote the row")]
)

# The replay's self-check per cluster (ackreplay/replay/self_check.py), the latest replay's: gold refuses a
# cluster whose replay failed it unless the run accepted it (--accept-untrusted), and then marks its rows.
REPLAY_CHECKS = StructType(
    [
        _field("cluster", StringType(), False, "Cluster checked"),
        _field("replay_run_id", StringType(), False, "Id of the replay run checked (the cluster's latest)"),
        _field(
            "n",
            LongType(),
            False,
            "Recorded acks=all produces with the broker's ack (t_ack_observed): the check's sample",
        ),
        _field(
            "within_2ms",
            DoubleType(),
            True,
            "Share (0-1) of n that the replayed acks=all acks within 2 ms of the broker's ack; null: n = 0",
        ),
        _field(
            "p999_replayed_ms",
            DoubleType(),
            True,
            "P999 of the replayed acks=all ack wait (t_ack - t_local_done) over n, ms",
        ),
        _field(
            "p999_observed_ms",
            DoubleType(),
            True,
            "P999 of the broker's own ack wait (t_ack_observed - t_local_done) over n, ms",
        ),
        _field(
            "judged",
            StringType(),
            False,
            "judged, or why not: too few produces, JMX timeline, or no recorded acks=all produce",
        ),
        _field(
            "failures",
            StringType(),
            True,
            "The criteria the cluster failed, separated by '; '; null: passed or not judged",
        ),
        _field("trusted", BooleanType(), False, "Whether the cluster passed the check, or was not judged"),
        _field(
            "accepted_untrusted",
            BooleanType(),
            False,
            "Failed, and its produce_replay rows kept for gold anyway (--accept-untrusted, or the check switched off)",
        ),
        # The ISR re-simulated at the cluster's own replica.lag.time.max.ms (replay.lag_ms `own`) against the
        # recorded ISR, on the produces the replayed acks=all acks: the lag (null: not replayed), those
        # produces, the share the re-simulation acks within 2 ms of them, and both P999s of ack wait.
        _field(
            "isr_lag_ms",
            DoubleType(),
            True,
            "The cluster's own replica.lag.time.max.ms the ISR was re-simulated at, ms; null: not replayed",
        ),
        _field(
            "isr_n",
            LongType(),
            True,
            "Produces the replayed acks=all acks under the recorded ISR: the re-simulation check's sample",
        ),
        _field(
            "isr_within_2ms",
            DoubleType(),
            True,
            "Share (0-1) of isr_n that the re-simulated ISR acks within 2 ms of the recorded ISR's ack",
        ),
        _field(
            "isr_p999_resimulated_ms",
            DoubleType(),
            True,
            "P999 of ack wait under the re-simulated ISR over isr_n, ms",
        ),
        _field("isr_p999_recorded_ms", DoubleType(), True, "P999 of ack wait under the recorded ISR over isr_n, ms"),
        # The producers' linger.ms as replayed, and their requests that did not wait against it
        # (ackreplay/replay/send_delays.py): of the producers measured on enough requests, the one whose median delay
        # after its first record is furthest off linger.ms, that median, its requests, and whether it agrees (null:
        # no producer measured: no send times, or too few requests)
        _field(
            "linger_ms",
            DoubleType(),
            True,
            "The producers' linger.ms the cluster was replayed with (conf replay.producer or the cluster's own), ms",
        ),
        _field(
            "send_delay_client",
            StringType(),
            True,
            "client_id of the measured producer whose median send delay is furthest off linger_ms; null: none measured",
        ),
        _field(
            "send_delay_p50_ms",
            DoubleType(),
            True,
            "That producer's median delay from its first record's send to the request's start at the broker, ms",
        ),
        _field(
            "send_delay_requests",
            LongType(),
            True,
            "That producer's requests measured: those that did not wait behind a previous response",
        ),
        _field(
            "send_delay_agrees",
            BooleanType(),
            True,
            "Whether that median is about linger_ms (within 1 ms or 25% of it)",
        ),
    ]
)

# What the replay's group function returns when it writes produce_replay's data files itself
# (ackreplay/storage/arrow_delta.py): one row per file, for the driver's Delta commit and the run summary.
WRITTEN_FILE = StructType(
    [
        StructField("path", StringType(), False),  # relative to the table folder (delta-rs URI-encodes it in the log)
        StructField("size_bytes", LongType(), False),
        StructField("modification_time_ms", LongType(), False),
        StructField("partition_values", StringType(), False),  # JSON object: column -> value
        StructField("num_records", LongType(), False),
        StructField("stats", StringType(), False),  # Delta's statistics JSON
        StructField("outcome_counts", StringType(), False),  # JSON object: "policy|outcome" -> rows
        StructField("ground_truth", StringType(), False),  # JSON object: the ground truth's counts in the file
    ]
)
