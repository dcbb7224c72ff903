"""Column contracts of the gold tables (design.md, "Data flow" and "Durability risk").

All of them are aggregates of silver `produce_replay` (plus `partitions` for min.insync.replicas and
`isr_changes` for the time under min ISR).
Durations are DOUBLE milliseconds; `window_start` is the UTC start of a `window` ("minute", "hour" or
"day") that holds the produce's `t_start`.
"""

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _schema(*fields: tuple) -> StructType:
    """A contract from (name, type, nullable, description) tuples; the description is the column's Delta comment."""
    return StructType(
        [StructField(name, dtype, nullable, {"comment": comment}) for name, dtype, nullable, comment in fields]
    )


_WINDOW = (
    ("window", StringType(), False, "Window size: minute, hour or day (conf gold.window)"),
    ("window_start", TimestampType(), False, "UTC start of the window holding the produces' t_start"),
)

_LOSS_WINDOW_SUMS = (
    (
        "loss_window_kafka_batch_s",
        DoubleType(),
        False,
        "Acked batches' finite loss windows under Kafka's election summed, at most, batch-seconds",
    ),
    (
        "loss_window_kafka_min_batch_s",
        DoubleType(),
        False,
        "Acked batches' finite loss windows under Kafka's election summed, at least, batch-seconds",
    ),
    (
        "loss_window_longest_batch_s",
        DoubleType(),
        False,
        "Acked batches' finite loss windows under the longest-log election summed, at most, batch-seconds",
    ),
    (
        "loss_window_longest_min_batch_s",
        DoubleType(),
        False,
        "Acked batches' finite loss windows under the longest-log election summed, at least, batch-seconds",
    ),
    # acked batches losable until the end of the data (an infinite window) under each election, at most
    (
        "never_safe_kafka_acks",
        LongType(),
        False,
        "Acked batches losable under Kafka's election until the end of the data (an infinite loss window), at most",
    ),
    (
        "never_safe_longest_acks",
        LongType(),
        False,
        "Acked batches losable under the longest-log election until the end of the data, at most",
    ),
)

# time from the ack until on all assigned replicas, over the acked batches that got there (exact p99)
_FULL_REPLICATION = (
    (
        "full_replication_p99_ms",
        DoubleType(),
        True,
        "P99 of the time from the ack until on all replicas, over the acked batches that got there, ms; null: none did",
    ),
    (
        "full_replication_max_ms",
        DoubleType(),
        True,
        "Longest time from the ack until on all replicas, over the acked batches that got there, ms; null: none did",
    ),
)

_LOSSES = (
    # acked batches a leader failure at t_ack loses: at most (the leader had not learned that a follower
    # holds them), and at least (no follower had been sent them)
    (
        "loss_kafka_election",
        LongType(),
        False,
        "Acked batches a leader failure at t_ack loses under Kafka's election, at most",
    ),
    (
        "loss_longest_log_election",
        LongType(),
        False,
        "Acked batches a leader failure at t_ack loses under the longest-log election, at most",
    ),
    (
        "loss_kafka_election_min",
        LongType(),
        False,
        "Acked batches a leader failure at t_ack loses under Kafka's election, at least",
    ),
    (
        "loss_longest_log_election_min",
        LongType(),
        False,
        "Acked batches a leader failure at t_ack loses under the longest-log election, at least",
    ),
    (
        "offline_at_failure_acks",
        LongType(),
        False,
        "Acked batches with nobody to elect at t_ack (no ISR follower, no live ELR member): a failure leaves the "
        "partition offline",
    ),
)

# Percentiles are Spark's exact `percentile` (linear interpolation between closest ranks, see
# transforms/gold.py). A percentile that needs more samples than the window has is null and flagged.
LATENCY_PERCENTILES = _schema(
    ("cluster", StringType(), False, "Cluster of the produces"),
    ("topic", StringType(), False, "Topic of the produces"),
    ("policy", StringType(), False, "Ack policy replayed (produce_replay.policy)"),
    *_WINDOW,
    ("produces", LongType(), False, "Replayed produces of the window, any outcome"),
    (
        "n",
        LongType(),
        False,
        "Produces the producer saw acknowledged: acked, or rejected and appended by a retry (as policy_summary.n)",
    ),
    (
        "acked_records",
        LongType(),
        False,
        "Records of those produces: the latency sample, per record as producers count it (a batch of unknown size: "
        "one)",
    ),
    ("p50_ms", DoubleType(), True, "P50 of producer-visible latency per record, ms; null when acked_records = 0"),
    ("p99_ms", DoubleType(), True, "P99 of producer-visible latency per record, ms; null when acked_records = 0"),
    ("p999_ms", DoubleType(), True, "P999 of producer-visible latency per record, ms; null when acked_records < 1000"),
    (
        "p9999_ms",
        DoubleType(),
        True,
        "P9999 of producer-visible latency per record, ms; null when acked_records < 10000",
    ),
    ("max_ms", DoubleType(), True, "Highest producer-visible latency of a record, ms; null when acked_records = 0"),
    ("p999_insufficient", BooleanType(), False, "acked_records < 1000: no P999 given"),
    ("p9999_insufficient", BooleanType(), False, "acked_records < 10000: no P9999 given"),
    ("gold_run_id", StringType(), False, "Id of the gold run that wrote the row"),
)

RISK_EXPOSURE = _schema(
    ("cluster", StringType(), False, "Cluster of the produces"),
    ("topic", StringType(), False, "Topic of the produces"),
    ("policy", StringType(), False, "Ack policy replayed (produce_replay.policy)"),
    *_WINDOW,
    ("produces", LongType(), False, "Replayed produces of the window, any outcome"),
    ("acked_batches", LongType(), False, "Batches the policy acked (outcome acked)"),
    ("acked_bytes", LongType(), False, "Bytes of the acked batches"),
    (
        "under_min_isr_acks",
        LongType(),
        False,
        "Acked batches with copies_at_ack < the partition's min.insync.replicas (from partitions)",
    ),
    ("under_min_isr_bytes", LongType(), False, "Bytes of the batches counted in under_min_isr_acks"),
    (
        "min_isr_unknown_acks",
        LongType(),
        False,
        "Acked batches whose partition is missing from partitions (not counted in under_min_isr_*)",
    ),
    (
        "exposure_byte_ms",
        DoubleType(),
        False,
        "sum(bytes * exposure_ms) over the acked batches with a finite exposure, byte-ms",
    ),
    (
        "max_exposure_ms",
        DoubleType(),
        True,
        "Longest finite exposure of an acked batch, ms; null when no acked batch has one",
    ),
    (
        "never_min_isr_acks",
        LongType(),
        False,
        "Acked batches with exposure_ms = +inf: never on min.insync.replicas replicas in the data",
    ),
    ("never_min_isr_bytes", LongType(), False, "Bytes of the batches counted in never_min_isr_acks"),
    ("single_copy_acks", LongType(), False, "Acked batches with copies_at_ack = 1 (only the leader held them)"),
    *_LOSSES,
    # batch·s a leader failure would have lost: the acked batches' loss windows summed (finite ones), most and
    # least, under each election; times a leader failure rate (per s) = the acked batches it loses on average
    *_LOSS_WINDOW_SUMS,
    *_FULL_REPLICATION,
    (
        "never_full_replication_acks",
        LongType(),
        False,
        "Acked batches with full_replication_ms = +inf: not on all replicas in the data",
    ),
    ("gold_run_id", StringType(), False, "Id of the gold run that wrote the row"),
)

AVAILABILITY = _schema(
    ("cluster", StringType(), False, "Cluster of the partition"),
    ("topic", StringType(), False, "Topic of the partition"),
    ("partition", IntegerType(), False, "Partition"),
    ("policy", StringType(), False, "Ack policy replayed (produce_replay.policy)"),
    *_WINDOW,
    ("produces", LongType(), False, "Replayed produces of the window, any outcome (0: a window with only ISR time)"),
    ("acked", LongType(), False, "Produces the policy acked"),
    (
        "not_enough_replicas",
        LongType(),
        False,
        "Produces rejected for too few in-sync replicas: not_enough_replicas (error 19) + ..._after_append (error 20)",
    ),
    ("timeouts", LongType(), False, "Produces not acked within the request's timeout (error 7)"),
    ("not_leader", LongType(), False, "Produces whose leader lost its leadership while they waited (error 6)"),
    (
        "unreplayable",
        LongType(),
        False,
        "Produces with outcome unreplayable: a failed recorded append whose outcome the trace cannot tell, or a "
        "policy that is no setting of the partition (quorum=<Q>, Q >= RF)",
    ),
    # Time under min ISR (transforms/gold.py "Time under min ISR"): from the committed ISR of isr_changes
    # ('isr_changes'), or null for acks=all@lag=<ms>, whose re-simulated ISR is not stored ('not_stored').
    (
        "under_min_isr_source",
        StringType(),
        False,
        "Where the time under min ISR comes from: isr_changes, or not_stored (acks=all@lag=<ms>: its ISR is not "
        "stored)",
    ),
    (
        "min_insync_replicas",
        IntegerType(),
        True,
        "The partition's min.insync.replicas (from partitions); null when partitions lacks the partition",
    ),
    (
        "isr_known_ms",
        DoubleType(),
        True,
        "Time of the window the partition's ISR was known, ms; null: not_stored",
    ),
    (
        "under_min_isr_ms",
        DoubleType(),
        True,
        "Time of the window the committed ISR was below min.insync.replicas, ms; null: not_stored, min ISR unknown "
        "or no ISR known",
    ),
    # KIP-637 (transforms/gold.py "Routing around partitions below min ISR"), of the produces rejected at append:
    # another partition of the topic was writable then; summed wait until their own partition was writable
    # again; never writable again within the data. For acks=all@lag=<ms> writable as the replay found it at each
    # append (transforms/routing.py `sampled_states`).
    (
        "reroutable_rejections",
        LongType(),
        True,
        "Produces rejected at append while another partition of the topic was writable (KIP-637), whatever the "
        "partitioning",
    ),
    (
        "rejected_wait_ms",
        DoubleType(),
        True,
        "The rejected produces' summed wait until their own partition was writable again, ms",
    ),
    (
        "reroutable_wait_ms",
        DoubleType(),
        True,
        "The wait of the reroutable rejections, summed, ms: what routing saves",
    ),
    (
        "never_writable_rejections",
        LongType(),
        True,
        "Produces rejected at append whose partition was not writable again within the data",
    ),
    ("gold_run_id", StringType(), False, "Id of the gold run that wrote the row"),
)

# KIP-637's producer against today's, per (cluster, topic, policy, window) for acks=all, acks=all@lag=<ms> and
# min.insync (the policies that reject below min ISR): transforms/routing.py has the model.
ROUTING = _schema(
    ("cluster", StringType(), False, "Cluster of the topic"),
    ("topic", StringType(), False, "Topic"),
    ("policy", StringType(), False, "Ack policy: acks=all, acks=all@lag=<ms> or min.insync"),
    *_WINDOW,
    (
        "partitioning",
        StringType(),
        False,
        "keyed or keyless: how the topic's records were taken (conf partitioning); keyed records cannot move",
    ),
    (
        "rejections",
        LongType(),
        False,
        "Rejections at append (NotEnoughReplicas): the replayed ones plus the recorded ones",
    ),
    (
        "recorded_rejections",
        LongType(),
        False,
        "Of the rejections, real NOT_ENOUGH_REPLICAS responses in the request logs",
    ),
    (
        "rerouted",
        LongType(),
        False,
        "Rejections of keyless records with another partition of the topic writable then: KIP-637 reroutes them",
    ),
    ("rerouted_bytes", LongType(), False, "Bytes of the rerouted batches"),
    ("held", LongType(), False, "Rejections not rerouted, held until their partition was writable again"),
    (
        "never_writable",
        LongType(),
        False,
        "Rejections not rerouted whose partition was not writable again within the data",
    ),
    (
        "wait_today_ms",
        DoubleType(),
        False,
        "Today's summed wait of the rejected batches until their own partition was writable again, ms",
    ),
    (
        "wait_kip637_ms",
        DoubleType(),
        False,
        "KIP-637's summed wait: that of the batches not rerouted, ms",
    ),
    ("saved_wait_ms", DoubleType(), False, "wait_today_ms - wait_kip637_ms"),
    (
        "buffer_byte_s_today",
        DoubleType(),
        False,
        "Today's bytes x wait (s) the rejected batches spent in the producer's buffer, byte-seconds",
    ),
    (
        "buffer_byte_s_kip637",
        DoubleType(),
        False,
        "KIP-637's bytes x wait (s) in the producer's buffer: of the batches not rerouted, byte-seconds",
    ),
    # latency (ms) at the partitions a rerouted batch could go to: the average over them (p50, p99, p999, max) and
    # the fastest one (p50, p99, p999), of the rerouted batches with a produce within 1 s on a target
    # (rerouted_latency_known)
    (
        "rerouted_latency_known",
        LongType(),
        False,
        "Rerouted batches with a produce within 1 s on a partition they could go to: the rerouted_* sample",
    ),
    (
        "rerouted_p50_ms",
        DoubleType(),
        True,
        "P50 of the average latency at the partitions a rerouted batch could go to, ms; null: none known",
    ),
    (
        "rerouted_p99_ms",
        DoubleType(),
        True,
        "P99 of the average latency at the partitions a rerouted batch could go to, ms; null: none known",
    ),
    (
        "rerouted_p999_ms",
        DoubleType(),
        True,
        "P999 of the average latency at the partitions a rerouted batch could go to, ms; null: none known",
    ),
    (
        "rerouted_max_ms",
        DoubleType(),
        True,
        "Highest average latency at the partitions a rerouted batch could go to, ms; null: none known",
    ),
    (
        "rerouted_fastest_p50_ms",
        DoubleType(),
        True,
        "P50 of the latency at the fastest partition a rerouted batch could go to, ms; null: none known",
    ),
    (
        "rerouted_fastest_p99_ms",
        DoubleType(),
        True,
        "P99 of the latency at the fastest partition a rerouted batch could go to, ms; null: none known",
    ),
    (
        "rerouted_fastest_p999_ms",
        DoubleType(),
        True,
        "P999 of the latency at the fastest partition a rerouted batch could go to, ms; null: none known",
    ),
    (
        "isr_known_ms",
        DoubleType(),
        True,
        "Time of the window the topic's ISR was known under the policy, ms; null: none",
    ),
    (
        "no_writable_ms",
        DoubleType(),
        True,
        "Of isr_known_ms, the time with no writable partition (routing cannot help), ms",
    ),
    # today's cost as measured: the real rejections' batches, each linked to the retry that got it appended (its
    # rejections one batch, in the window of the first), their summed wait from the first rejection to that
    # retry's ack, and the model's wait of the same batches (until the partition was writable again); real
    # rejections no retry was found for (expired, or no client id)
    (
        "recorded_batches",
        LongType(),
        False,
        "Batches of the real rejections, each linked to the retry that got it appended (counted in its first "
        "rejection's window)",
    ),
    (
        "recorded_wait_ms",
        DoubleType(),
        False,
        "Those batches' summed wait from the first rejection to the linked retry's ack, ms",
    ),
    (
        "recorded_model_wait_ms",
        DoubleType(),
        False,
        "The model's wait of the same batches (until the partition was writable again), summed, ms",
    ),
    (
        "recorded_unlinked",
        LongType(),
        False,
        "Real rejections no retry was found for (expired, or no client id)",
    ),
    ("gold_run_id", StringType(), False, "Id of the gold run that wrote the row"),
)

POLICY_SUMMARY = _schema(
    ("cluster", StringType(), False, "Cluster of the topic"),
    ("topic", StringType(), False, "Topic"),
    ("policy", StringType(), False, "Ack policy replayed (produce_replay.policy)"),
    (
        "policy_rank",
        IntegerType(),
        False,
        "Reading order of the policy: acks=all first, then the alternatives",
    ),
    (
        "self_check",
        StringType(),
        True,
        "The cluster's replay self-check: passed | not judged: <why> | FAILED, accepted untrusted: <failures>; null: "
        "none recorded",
    ),
    ("produces", LongType(), False, "Replayed produces over the whole run, any outcome"),
    (
        "n",
        LongType(),
        False,
        "Produces the producer saw acknowledged: acked, or rejected and appended by a retry",
    ),
    (
        "acked_records",
        LongType(),
        False,
        "Records of those produces: the sample of p99_ms and p999_ms (a batch of unknown size: one)",
    ),
    ("p99_ms", DoubleType(), True, "P99 of producer-visible latency per record over the run, ms; null: no record"),
    (
        "p999_ms",
        DoubleType(),
        True,
        "P999 of producer-visible latency per record over the run, ms; null when acked_records < 1000",
    ),
    ("p999_insufficient", BooleanType(), False, "acked_records < 1000: no P999 given"),
    # the broker's view of the same acked produces (produce_replay.broker_latency_ms), and of the
    # producer's latency, the P999 of the wait behind earlier responses on the connection
    (
        "broker_p99_ms",
        DoubleType(),
        True,
        "P99 of the broker's latency (produce_replay.broker_latency_ms) of the acknowledged produces, ms; null: n = 0",
    ),
    (
        "broker_p999_ms",
        DoubleType(),
        True,
        "P999 of the broker's latency of the acknowledged produces, ms; null when n < 1000",
    ),
    (
        "hol_wait_p999_ms",
        DoubleType(),
        True,
        "P999 of the wait behind earlier responses on the connection (hol_wait_ms), ms; null when n < 1000",
    ),
    (
        "send_time_known",
        LongType(),
        False,
        "Acknowledged produces whose latency runs from their batch's send time (the rest: from the estimated arrival)",
    ),
    # acked produces whose record count is known (the rest count as one record each), and those whose
    # records each have their own send time (the rest: every record from the batch's first send)
    (
        "record_count_known",
        LongType(),
        False,
        "Acknowledged produces whose record count is known (the rest count as one record each)",
    ),
    (
        "record_sends_known",
        LongType(),
        False,
        "Acknowledged produces whose records each have their own send time (the rest: from the batch's first send)",
    ),
    (
        "p999_vs_acks_all_ms",
        DoubleType(),
        True,
        "p999_ms - the topic's acks=all p999_ms, ms; null when either is null",
    ),
    (
        "p999_vs_acks_all_ratio",
        DoubleType(),
        True,
        "p999_ms / the topic's acks=all p999_ms; null when either is null or 0",
    ),
    ("acked_bytes", LongType(), False, "Bytes of the batches the policy acked"),
    (
        "under_min_isr_acks",
        LongType(),
        False,
        "Acked batches with copies_at_ack < the partition's min.insync.replicas",
    ),
    (
        "exposure_byte_ms",
        DoubleType(),
        False,
        "sum(bytes * exposure_ms) over the acked batches with a finite exposure, byte-ms",
    ),
    (
        "max_exposure_ms",
        DoubleType(),
        True,
        "Longest finite exposure of an acked batch, ms; null when no acked batch has one",
    ),
    (
        "never_min_isr_acks",
        LongType(),
        False,
        "Acked batches never on min.insync.replicas replicas in the data (exposure_ms = +inf)",
    ),
    ("single_copy_acks", LongType(), False, "Acked batches only the leader held at the ack (copies_at_ack = 1)"),
    *_LOSSES,
    *_LOSS_WINDOW_SUMS,
    (
        "not_enough_replicas",
        LongType(),
        False,
        "Produces rejected for too few in-sync replicas (errors 19 and 20)",
    ),
    (
        "undelivered",
        LongType(),
        False,
        "Of not_enough_replicas, those the producer's retries did not get appended within the data: not in the latency",
    ),
    ("timeouts", LongType(), False, "Produces not acked within the request's timeout (error 7)"),
    ("not_leader", LongType(), False, "Produces whose leader lost its leadership while they waited (error 6)"),
    *_FULL_REPLICATION,
    (
        "never_full_replication_acks",
        LongType(),
        False,
        "Acked batches not on all replicas in the data (full_replication_ms = +inf)",
    ),
    (
        "under_min_isr_ms",
        DoubleType(),
        True,
        "Time the topic's partitions were below min ISR, summed over its partitions and windows (partition-ms); "
        "null: not_stored, or no figure in any window",
    ),
    (
        "under_min_isr_source",
        StringType(),
        False,
        "Where under_min_isr_ms comes from: isr_changes, or not_stored (acks=all@lag=<ms>)",
    ),
    # KIP-637, summed from `availability`: rejections another partition could have taken,
    # and the wait of the rejected batches until their own partition was writable again, of all and of the
    # reroutable ones (what routing saves a producer of keyless records); both 0 where the topic's records are keyed
    # (`partitioning`: they cannot move)
    (
        "reroutable_rejections",
        LongType(),
        True,
        "Rejections at append another partition of the topic could have taken (KIP-637), summed from availability; "
        "0 for keyed topics",
    ),
    (
        "rejected_wait_ms",
        DoubleType(),
        True,
        "The rejected batches' summed wait until their own partition was writable again, ms",
    ),
    (
        "reroutable_wait_ms",
        DoubleType(),
        True,
        "Of rejected_wait_ms, the reroutable batches' wait: what routing saves a producer of keyless records, ms; 0 "
        "for keyed topics",
    ),
    # whether the topic's records were taken as keyless (as gold `routing`: keyed | keyless), and the longest time
    # a broker that led its produces logged no request line within its data (a paused or stopped broker:
    # transforms.replay_inputs.broker_silences; null: none over 1 s). With keyless records such a pause moves
    # them between partitions differently under each policy (ackreplay/gold/decision.py's caution)
    (
        "partitioning",
        StringType(),
        False,
        "keyed or keyless: how the topic's records were taken (as gold routing)",
    ),
    (
        "leader_silence_ms",
        DoubleType(),
        True,
        "Longest time a broker that led the topic's produces logged no request line (a paused or stopped broker), "
        "ms; null: none over 1 s",
    ),
    # keyless topics: the records' latency with Kafka's partitioner re-simulated under the policy (KIP-794: it moves
    # keyless records away from partitions whose queues back up, which differs with the policy;
    # ackreplay/replay/partitioner.py), pooled over `placed_draws` seeded draws, with the lowest and highest P99 and
    # P999 of a single draw; null for keyed topics and without request logs
    (
        "placed_records",
        LongType(),
        True,
        "Records placed again by Kafka's partitioner under the policy, over all draws; null: keyed topic or no "
        "request logs",
    ),
    ("placed_draws", IntegerType(), True, "Seeded draws of the partitioner pooled in the placed_* figures"),
    ("placed_p50_ms", DoubleType(), True, "P50 of the placed records' latency, pooled over the draws, ms"),
    ("placed_p99_ms", DoubleType(), True, "P99 of the placed records' latency, pooled over the draws, ms"),
    (
        "placed_p999_ms",
        DoubleType(),
        True,
        "P999 of the placed records' latency, pooled over the draws, ms; null when fewer than 1000 records a draw",
    ),
    ("placed_p99_low_ms", DoubleType(), True, "Lowest P99 of the placed records' latency in a single draw, ms"),
    ("placed_p99_high_ms", DoubleType(), True, "Highest P99 of the placed records' latency in a single draw, ms"),
    ("placed_p999_low_ms", DoubleType(), True, "Lowest P999 of the placed records' latency in a single draw, ms"),
    ("placed_p999_high_ms", DoubleType(), True, "Highest P999 of the placed records' latency in a single draw, ms"),
    ("gold_run_id", StringType(), False, "Id of the gold run that wrote the row"),
)
