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
    return StructType([StructField(name, dtype, nullable) for name, dtype, nullable in fields])


_WINDOW = (
    ("window", StringType(), False),  # minute | hour | day
    ("window_start", TimestampType(), False),
)

_LOSS_WINDOW_SUMS = (
    ("loss_window_kafka_batch_s", DoubleType(), False),
    ("loss_window_kafka_min_batch_s", DoubleType(), False),
    ("loss_window_longest_batch_s", DoubleType(), False),
    ("loss_window_longest_min_batch_s", DoubleType(), False),
    # acked batches losable until the end of the data (an infinite window) under each election, at most
    ("never_safe_kafka_acks", LongType(), False),
    ("never_safe_longest_acks", LongType(), False),
)

# Percentiles are Spark's exact `percentile` (linear interpolation between closest ranks, see
# transforms/gold.py). A percentile that needs more samples than the window has is null and flagged.
LATENCY_PERCENTILES = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("policy", StringType(), False),
    *_WINDOW,
    ("produces", LongType(), False),  # replayed produces of the window, any outcome
    ("n", LongType(), False),  # produces the producer saw acknowledged (POLICY_SUMMARY.n)
    # their records: the latency sample (per record, as producers count it; a batch of unknown size: one)
    ("acked_records", LongType(), False),
    ("p50_ms", DoubleType(), True),  # null when acked_records == 0
    ("p99_ms", DoubleType(), True),  # null when acked_records == 0
    ("p999_ms", DoubleType(), True),  # null when acked_records < 1000
    ("p9999_ms", DoubleType(), True),  # null when acked_records < 10000
    ("max_ms", DoubleType(), True),  # null when acked_records == 0
    ("p999_insufficient", BooleanType(), False),  # acked_records < 1000: no P999 given
    ("p9999_insufficient", BooleanType(), False),  # acked_records < 10000: no P9999 given
    ("gold_run_id", StringType(), False),
)

RISK_EXPOSURE = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("policy", StringType(), False),
    *_WINDOW,
    ("produces", LongType(), False),
    ("acked_batches", LongType(), False),
    ("acked_bytes", LongType(), False),
    # acked with copies_at_ack < the partition's min.insync.replicas (from `partitions`)
    ("under_min_isr_acks", LongType(), False),
    ("under_min_isr_bytes", LongType(), False),
    # acked batches whose partition is missing from `partitions` (not counted in under_min_isr_*)
    ("min_isr_unknown_acks", LongType(), False),
    ("exposure_byte_ms", DoubleType(), False),  # sum(bytes * exposure_ms) over finite exposure
    ("max_exposure_ms", DoubleType(), True),  # over finite exposure; null when no acked batch has one
    ("never_min_isr_acks", LongType(), False),  # exposure_ms = +inf: never on min ISR replicas in the data
    ("never_min_isr_bytes", LongType(), False),
    ("single_copy_acks", LongType(), False),  # copies_at_ack == 1 (only the leader held it)
    # acked batches a leader failure at t_ack loses: at most (the leader had not learned that a follower
    # holds them), and at least (no follower had been sent them)
    ("loss_kafka_election", LongType(), False),
    ("loss_longest_log_election", LongType(), False),
    ("loss_kafka_election_min", LongType(), False),
    ("loss_longest_log_election_min", LongType(), False),
    (
        "offline_at_failure_acks",
        LongType(),
        False,
    ),  # acked with nobody to elect (no ISR follower, no live ELR member): offline
    # batch·s a leader failure would have lost: the acked batches' loss windows summed (finite ones), most and
    # least, under each election; times a leader failure rate (per s) = the acked batches it loses on average
    *_LOSS_WINDOW_SUMS,
    # time from the ack until on all assigned replicas, over the acked batches that got there (exact p99)
    ("full_replication_p99_ms", DoubleType(), True),  # null when no acked batch got there
    ("full_replication_max_ms", DoubleType(), True),
    ("never_full_replication_acks", LongType(), False),  # full_replication_ms = +inf: not on all replicas in the data
    ("gold_run_id", StringType(), False),
)

AVAILABILITY = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("policy", StringType(), False),
    *_WINDOW,
    ("produces", LongType(), False),
    ("acked", LongType(), False),
    # not_enough_replicas (error 19) + not_enough_replicas_after_append (error 20)
    ("not_enough_replicas", LongType(), False),
    ("timeouts", LongType(), False),
    ("not_leader", LongType(), False),
    ("unreplayable", LongType(), False),
    # Time under min ISR (transforms/gold.py "Time under min ISR"): from the committed ISR of isr_changes
    # ('isr_changes'), or null for acks=all@lag=<ms>, whose re-simulated ISR is not stored ('not_stored').
    ("under_min_isr_source", StringType(), False),
    ("min_insync_replicas", IntegerType(), True),  # from `partitions`; null when it lacks the partition
    ("isr_known_ms", DoubleType(), True),  # time of the window the ISR was known (null: not_stored)
    ("under_min_isr_ms", DoubleType(), True),  # null: not_stored, min ISR unknown or no ISR known in the window
    # KIP-637 (transforms/gold.py "Routing around partitions below min ISR"), of the produces rejected at append:
    # another partition of the topic was writable then; summed wait until their own partition was writable
    # again; never writable again within the data. For acks=all@lag=<ms> writable as the replay found it at each
    # append (transforms/routing.py `sampled_states`).
    ("reroutable_rejections", LongType(), True),
    ("rejected_wait_ms", DoubleType(), True),
    ("reroutable_wait_ms", DoubleType(), True),  # the wait of the reroutable ones: what routing saves
    ("never_writable_rejections", LongType(), True),
    ("gold_run_id", StringType(), False),
)

# KIP-637's producer against today's, per (cluster, topic, policy, window) for acks=all, acks=all@lag=<ms> and
# min.insync (the policies that reject below min ISR): transforms/routing.py has the model.
ROUTING = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("policy", StringType(), False),
    *_WINDOW,
    ("partitioning", StringType(), False),  # keyed | keyless (conf `partitioning`): keyed records cannot move
    ("rejections", LongType(), False),  # at append (NotEnoughReplicas): replayed, plus the recorded ones
    ("recorded_rejections", LongType(), False),  # of them, real NOT_ENOUGH_REPLICAS responses in the request logs
    ("rerouted", LongType(), False),  # keyless, and another partition of the topic writable at the rejection
    ("rerouted_bytes", LongType(), False),
    ("held", LongType(), False),  # not rerouted; held until the partition was writable again
    ("never_writable", LongType(), False),  # not rerouted, and the partition not writable again within the data
    ("wait_today_ms", DoubleType(), False),  # summed wait until the own partition was writable again
    ("wait_kip637_ms", DoubleType(), False),  # the same of the batches not rerouted
    ("saved_wait_ms", DoubleType(), False),  # wait_today_ms - wait_kip637_ms
    ("buffer_byte_s_today", DoubleType(), False),  # bytes x wait (s) in the producer's buffer
    ("buffer_byte_s_kip637", DoubleType(), False),
    # latency (ms) at the partitions a rerouted batch could go to: the average over them (p50, p99, p999, max) and
    # the fastest one (p50, p99, p999), of the rerouted batches with a produce within 1 s on a target
    # (rerouted_latency_known)
    ("rerouted_latency_known", LongType(), False),
    ("rerouted_p50_ms", DoubleType(), True),
    ("rerouted_p99_ms", DoubleType(), True),
    ("rerouted_p999_ms", DoubleType(), True),
    ("rerouted_max_ms", DoubleType(), True),
    ("rerouted_fastest_p50_ms", DoubleType(), True),
    ("rerouted_fastest_p99_ms", DoubleType(), True),
    ("rerouted_fastest_p999_ms", DoubleType(), True),
    ("isr_known_ms", DoubleType(), True),  # time of the window the topic's ISR was known (null: none)
    ("no_writable_ms", DoubleType(), True),  # of it, with no writable partition: routing cannot help
    # today's cost as measured: the real rejections' batches, each linked to the retry that got it appended (its
    # rejections one batch, in the window of the first), their summed wait from the first rejection to that
    # retry's ack, and the model's wait of the same batches (until the partition was writable again); real
    # rejections no retry was found for (expired, or no client id)
    ("recorded_batches", LongType(), False),
    ("recorded_wait_ms", DoubleType(), False),
    ("recorded_model_wait_ms", DoubleType(), False),
    ("recorded_unlinked", LongType(), False),
    ("gold_run_id", StringType(), False),
)

POLICY_SUMMARY = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("policy", StringType(), False),
    ("policy_rank", IntegerType(), False),  # reading order: acks=all first, then the alternatives
    # the cluster's replay self-check (meta replay_checks): passed | not judged: <why> | FAILED, accepted
    # untrusted: <failures> (written only with --accept-untrusted); null: no self-check recorded
    ("self_check", StringType(), True),
    ("produces", LongType(), False),
    # produces the producer saw acknowledged: acked, or rejected and appended by a retry (ackreplay/replay/retries.py)
    ("n", LongType(), False),
    ("acked_records", LongType(), False),  # their records: the sample of p99_ms and p999_ms (LATENCY_PERCENTILES)
    ("p99_ms", DoubleType(), True),
    ("p999_ms", DoubleType(), True),  # null when acked_records < 1000
    ("p999_insufficient", BooleanType(), False),
    # the broker's view of the same acked produces (produce_replay.broker_latency_ms), and of the
    # producer's latency, the P999 of the wait behind earlier responses on the connection
    ("broker_p99_ms", DoubleType(), True),
    ("broker_p999_ms", DoubleType(), True),  # null when n < 1000
    ("hol_wait_p999_ms", DoubleType(), True),  # null when n < 1000
    # acked produces whose latency runs from their batch's send time (the rest: from the estimated arrival)
    ("send_time_known", LongType(), False),
    # acked produces whose record count is known (the rest count as one record each), and those whose
    # records each have their own send time (the rest: every record from the batch's first send)
    ("record_count_known", LongType(), False),
    ("record_sends_known", LongType(), False),
    ("p999_vs_acks_all_ms", DoubleType(), True),  # p999 - p999(acks=all); null when either is null
    ("p999_vs_acks_all_ratio", DoubleType(), True),  # p999 / p999(acks=all); null when either is null or 0
    ("acked_bytes", LongType(), False),
    ("under_min_isr_acks", LongType(), False),
    ("exposure_byte_ms", DoubleType(), False),
    ("max_exposure_ms", DoubleType(), True),
    ("never_min_isr_acks", LongType(), False),
    ("single_copy_acks", LongType(), False),
    ("loss_kafka_election", LongType(), False),
    ("loss_longest_log_election", LongType(), False),
    ("loss_kafka_election_min", LongType(), False),
    ("loss_longest_log_election_min", LongType(), False),
    (
        "offline_at_failure_acks",
        LongType(),
        False,
    ),  # acked with nobody to elect (no ISR follower, no live ELR member): offline
    *_LOSS_WINDOW_SUMS,
    ("not_enough_replicas", LongType(), False),
    # of them, those the producer's retries did not get appended within the data: not in the latency
    ("undelivered", LongType(), False),
    ("timeouts", LongType(), False),
    ("not_leader", LongType(), False),
    ("full_replication_p99_ms", DoubleType(), True),
    ("full_replication_max_ms", DoubleType(), True),
    ("never_full_replication_acks", LongType(), False),
    ("under_min_isr_ms", DoubleType(), True),  # summed over the topic's partitions (partition·ms)
    ("under_min_isr_source", StringType(), False),
    # KIP-637, summed from `availability`: rejections another partition could have taken,
    # and the wait of the rejected batches until their own partition was writable again, of all and of the
    # reroutable ones (what routing saves a producer of keyless records); both 0 where the topic's records are keyed
    # (`partitioning`: they cannot move)
    ("reroutable_rejections", LongType(), True),
    ("rejected_wait_ms", DoubleType(), True),
    ("reroutable_wait_ms", DoubleType(), True),
    # whether the topic's records were taken as keyless (as gold `routing`: keyed | keyless), and the longest time
    # a broker that led its produces logged no request line within its data (a paused or stopped broker:
    # transforms.replay_inputs.broker_silences; null: none over 1 s). With keyless records such a pause moves
    # them between partitions differently under each policy (ackreplay/gold/decision.py's caution)
    ("partitioning", StringType(), False),
    ("leader_silence_ms", DoubleType(), True),
    # keyless topics: the records' latency with Kafka's partitioner re-simulated under the policy (KIP-794: it moves
    # keyless records away from partitions whose queues back up, which differs with the policy;
    # ackreplay/replay/partitioner.py), pooled over `placed_draws` seeded draws, with the lowest and highest P99 and
    # P999 of a single draw; null for keyed topics and without request logs
    ("placed_records", LongType(), True),
    ("placed_draws", IntegerType(), True),
    ("placed_p50_ms", DoubleType(), True),
    ("placed_p99_ms", DoubleType(), True),
    ("placed_p999_ms", DoubleType(), True),  # null when fewer than 1000 records a draw
    ("placed_p99_low_ms", DoubleType(), True),
    ("placed_p99_high_ms", DoubleType(), True),
    ("placed_p999_low_ms", DoubleType(), True),
    ("placed_p999_high_ms", DoubleType(), True),
    ("gold_run_id", StringType(), False),
)
