"""Contract of silver `produce_replay`: one row per (replayed produce, policy)."""

from pyspark.sql.types import (
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

_KEY = [
    StructField("cluster", StringType(), False),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("leader_epoch", IntegerType(), False),
    StructField("base_offset", LongType(), False),
    StructField("broker_id", IntegerType(), False),  # the leader
    StructField("bytes", IntegerType(), True),
    # records in the batch, from its send time's source (silver batch_send_times); null: unknown
    StructField("records", IntegerType(), True),
    StructField("recorded_acks", IntegerType(), False),  # what the producer used
    StructField("policy", StringType(), False),
    StructField("outcome", StringType(), False),  # acked | not_enough_replicas | timeout | not_leader | ...
]
_TIMES = ["t_start", "t_local_done", "t_ack", "t_ack_observed"]
# t_response: when the broker would answer the whole request, i.e. the latest t_ack over the request's
# partitions (a produce request completes when all its partitions do); clients see this one.
_VALUES = [
    StructField("ack_wait_ms", DoubleType(), False),  # t_ack - t_local_done
    # producer-visible, send() to ack (ackreplay/replay/connections.py): the request replayed on its
    # connection's chain, from t_send (from the request's estimated arrival when t_send is unknown); a batch the
    # policy rejected counts until its retry was acknowledged (ackreplay/replay/retries.py). Null: the producer
    # does not see the batch acknowledged under the policy (the outcome says why; a rejected batch: not
    # appended within its delivery timeout or the leader's epoch)
    StructField("latency_ms", DoubleType(), True),
    # the broker's view of the request that carried the batch under the policy, from its replayed start to its
    # response sent: t_response - t_start + response queue + send where the request kept its recorded start
    # (a retried batch: its last attempt's); null as latency_ms
    StructField("broker_latency_ms", DoubleType(), True),
    # of latency_ms, the time spent in the socket behind the connection's previous responses; null as latency_ms
    StructField("hol_wait_ms", DoubleType(), True),
    StructField("copies_at_ack", IntegerType(), False),  # leader included; 0 when not acked
    StructField("exposure_ms", DoubleType(), True),  # until on min.insync.replicas replicas (inf: never in the data)
    StructField("full_replication_ms", DoubleType(), True),  # until on all replicas
    StructField("loss_kafka_election", BooleanType(), False),
    StructField("loss_longest_log_election", BooleanType(), False),
    # the same if a follower held each batch from when the leader sent it (the loss flags above count it
    # only once the leader knew): the least a leader failure at t_ack loses (README, "Loss as a range")
    StructField("loss_kafka_election_min", BooleanType(), False),
    StructField("loss_longest_log_election_min", BooleanType(), False),
    # no follower in the ISR at t_ack and no live eligible leader replica (KIP-966): a leader failure then leaves
    # the partition offline (no loss flag set)
    StructField("offline_at_failure", BooleanType(), False),
    # how long after t_ack, in all, a leader failure would still have lost the batch, under each election
    # (most, and least as the loss flags; inf: until the end of the data; README, "Loss as a range")
    StructField("loss_window_kafka_ms", DoubleType(), True),
    StructField("loss_window_kafka_min_ms", DoubleType(), True),
    StructField("loss_window_longest_ms", DoubleType(), True),
    StructField("loss_window_longest_min_ms", DoubleType(), True),
    StructField("isr_source", StringType(), False),  # logs | assumed_full | simulated
    # where the follower LEO timeline came from: follower_fetches (request log, ms) | jmx_metrics (scrapes, ~1 s)
    StructField("leo_source", StringType(), False),
    StructField("source_file", StringType(), False),
    StructField("line_number", LongType(), False),
    StructField("event_date", DateType(), True),
]

ISR_SOURCES = ["logs", "assumed_full", "simulated"]

PRODUCE_REPLAY = StructType(
    _KEY
    + [StructField(name, TimestampType(), name == "t_ack_observed") for name in _TIMES]
    + [StructField("t_response", TimestampType(), False)]
    # when the producer sent the batch: its first record's CreateTime (silver batch_send_times); null: unknown
    + [StructField("t_send", TimestampType(), True)]
    + _VALUES
    + [StructField("replay_run_id", StringType(), False)]
)

# The replay's self-check per cluster (ackreplay/replay/self_check.py), the latest replay's: gold refuses a
# cluster whose replay failed it unless the run accepted it (--accept-untrusted), and then marks its rows.
REPLAY_CHECKS = StructType(
    [
        StructField("cluster", StringType(), False),
        StructField("replay_run_id", StringType(), False),
        StructField("n", LongType(), False),  # recorded acks=all produces with the broker's ack
        StructField("within_2ms", DoubleType(), True),  # null: n = 0
        StructField("p999_replayed_ms", DoubleType(), True),
        StructField("p999_observed_ms", DoubleType(), True),
        # judged | too few produces | JMX timeline | no recorded acks=all produce
        StructField("judged", StringType(), False),
        StructField("failures", StringType(), True),  # null: passed or not judged
        StructField("trusted", BooleanType(), False),  # passed, or not judged
        # failed, and its produce_replay rows kept for gold anyway (--accept-untrusted, or the check switched off)
        StructField("accepted_untrusted", BooleanType(), False),
        # The ISR re-simulated at the cluster's own replica.lag.time.max.ms (replay.lag_ms `own`) against the
        # recorded ISR, on the produces the replayed acks=all acks: the lag (null: not replayed), those
        # produces, the share the re-simulation acks within 2 ms of them, and both P999s of ack wait.
        StructField("isr_lag_ms", DoubleType(), True),
        StructField("isr_n", LongType(), True),
        StructField("isr_within_2ms", DoubleType(), True),
        StructField("isr_p999_resimulated_ms", DoubleType(), True),
        StructField("isr_p999_recorded_ms", DoubleType(), True),
        # The producers' linger.ms as replayed, and their requests that did not wait against it
        # (ackreplay/replay/send_delays.py): of the producers measured on enough requests, the one whose median delay
        # after its first record is furthest off linger.ms, that median, its requests, and whether it agrees (null:
        # no producer measured: no send times, or too few requests)
        StructField("linger_ms", DoubleType(), True),
        StructField("send_delay_client", StringType(), True),
        StructField("send_delay_p50_ms", DoubleType(), True),
        StructField("send_delay_requests", LongType(), True),
        StructField("send_delay_agrees", BooleanType(), True),
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
