"""silver `produce_replay` (+ `partitions`) -> the gold aggregates. Pure DataFrame -> DataFrame.

Percentiles
-----------
Every percentile here is Spark's exact `percentile` aggregate (not `percentile_approx`). Its rank
definition: sort the n values of the group ascending, x[0] <= ... <= x[n-1]; for a fraction p the
position is h = (n - 1) * p and the result is x[floor h] + (h - floor h) * (x[ceil h] - x[floor h])
(linear interpolation between the closest ranks, Hyndman & Fan type 7, numpy's default). It is exact:
there is no rank error. It holds the group's distinct values in memory (a value -> count map per
group), which is fine for a (topic, policy, window) of a few million produces.

A P999 of fewer than 1000 samples is an interpolation between the largest values, not a tail
percentile: it is null with `p999_insufficient` set (likewise P9999 below 10000 samples).

The latency sample is the records of the produces the producer saw acknowledged (outcome `acked`, and a
batch the policy rejected that a retry got appended: ackreplay/replay/retries.py), as a producer counts it
(`ProducerPerformance` and the client's `record-queue-time`/callback metrics time each record from its
own `send()`): a record's latency is its batch's producer-visible `latency_ms` (from the batch's first
record's send to the ack, replayed on each connection's chain: ackreplay/replay/connections.py) less
how long after that first record it was sent (`record_sends` of silver `batch_send_times`, from the
records' CreateTimes). Without per-record send times every record of a batch counts with the batch's
first send (an upper bound), and a batch of unknown size counts as one record; `policy_summary` says
how many acked produces were in each case. Per batch the tail is a different number: a batch that
waited seconds behind a stalled connection holds most of the records sent meanwhile (measured on the
4.3.1 pair: P99 115 ms per batch, 4,893 ms per record). Rejected, timed-out and not-leader produces
are counted in `produces` and in `availability` (a rejected batch once, whether or not a retry got it appended;
`policy_summary.undelivered`: those none did). `policy_summary` keeps the broker's view of the same
produces next to it (`broker_p99_ms`, `broker_p999_ms`, per produce).

Time under min ISR
------------------
`availability.under_min_isr_ms` comes from the committed ISR of silver `isr_changes` (leader starts
included): each state holds from its `t_log` until the partition's next state, the last one until the
cluster's last recorded produce or ISR change; time before a partition's first state is unknown and
not counted (`isr_known_ms` is the time the ISR was known). The recorded ISR is the cluster's whatever
the producers' acks, so every policy gets that figure (only acks=all and min.insync reject under it),
except `acks=all@lag=<ms>`: its ISR is re-simulated inside the replay and not stored as a table, so
its time is null with `under_min_isr_source` = 'not_stored' (its rejections are still counted, and routed
from the replay's verdict at each append: transforms/routing.py).

Routing around partitions below min ISR (KIP-637)
-------------------------------------------------
`availability`'s routing columns and the `routing` table: transforms/routing.py.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.schemas.tables import RECORD_SENDS
from ackreplay.schemas.vocabulary import (
    ACKS_1,
    ACKS_ALL,
    LAG_PREFIX,
    MIN_INSYNC,
    QUORUM_PREFIX,
    READING_ORDER,
    Outcome,
    PolicyKind,
)
from ackreplay.transforms.common import PerCluster, per_cluster
from ackreplay.transforms.routing import routing_by_partition, routing_states
from ackreplay.transforms.windows import split_by_window, with_window

P999_MIN_N = 1000
P9999_MIN_N = 10000
ACKED = Outcome.ACKED.label
NOT_ENOUGH_REPLICAS = (Outcome.NOT_ENOUGH_REPLICAS.label, Outcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND.label)
RECORDED_POLICY = ACKS_ALL.id  # the baseline of policy_summary: the replayed acks=all
ISR_FROM_CHANGES = "isr_changes"  # under_min_isr_source: the committed ISR of silver isr_changes
ISR_NOT_STORED = "not_stored"  # ... acks=all@lag: the re-simulated ISR is not kept by the replay


def policy_rank(policy: Column) -> Column:
    """Reading order of a policy (`schemas.vocabulary.READING_ORDER`): acks=all, acks=all@lag=..., min.insync,
    quorum=..., acks=1, others."""
    rank = READING_ORDER
    return (
        F.when(policy == F.lit(ACKS_ALL.id), rank[PolicyKind.ACKS_ALL])
        .when(policy.startswith(LAG_PREFIX), rank[PolicyKind.ACKS_ALL_AT_LAG])
        .when(policy == F.lit(MIN_INSYNC.id), rank[PolicyKind.MIN_INSYNC])
        .when(policy.startswith(QUORUM_PREFIX), rank[PolicyKind.QUORUM])
        .when(policy == F.lit(ACKS_1.id), rank[PolicyKind.ACKS_1])
        .otherwise(len(rank))
        .cast("int")
    )


def _acked() -> Column:
    return F.col("outcome") == F.lit(ACKED)


def delivered() -> Column:
    """Acknowledged to the producer under the policy: acked, or rejected and appended by a retry (the replay gives
    such a batch a latency: ackreplay/replay/retries.py)."""
    return _acked() | (F.col("outcome").isin(*NOT_ENOUGH_REPLICAS) & F.col("latency_ms").isNotNull())


def _undelivered() -> Column:
    """Rejected, and not appended by the producer's retries within the data (no latency)."""
    return F.col("outcome").isin(*NOT_ENOUGH_REPLICAS) & F.col("latency_ms").isNull()


def _count_if(cond: Column) -> Column:
    return F.count_if(F.coalesce(cond, F.lit(False))).cast("bigint")


def _finite(column: str) -> Column:
    """Acked and `column` a finite number (null and NaN for not acked, +inf for never in the data)."""
    value = F.col(column)
    return _acked() & value.isNotNull() & ~F.isnan(value) & (value < F.lit(float("inf")))


def _finite_exposure() -> Column:
    return _finite("exposure_ms")


def _count_aggs() -> list[Column]:
    return [F.count("*").cast("bigint").alias("produces"), _count_if(delivered()).alias("n")]


BATCH_KEY = ["cluster", "topic", "partition", "base_offset"]


def record_sends_by_batch(send_times: DataFrame) -> DataFrame:
    """(cluster, topic, partition, base_offset, record_sends, send_leader_epoch): the batches of silver
    `batch_send_times` whose records each have a send time, once each (the earliest listing when dumped
    from several replicas), with the epoch that appended them (null: unknown)."""
    listing = F.min_by(F.struct("record_sends", F.col("leader_epoch").alias("epoch")), "t_send")
    return (
        send_times.where(F.col("topic").isNotNull() & F.col("record_sends").isNotNull())
        .groupBy(*BATCH_KEY)
        .agg(listing["record_sends"].alias("record_sends"), listing["epoch"].alias("send_leader_epoch"))
    )


def _record_latency(linger_ms: PerCluster) -> Column:
    """A record's latency: its batch's less how long after the batch's first record it was sent.

    Every record existed when its batch's request left the producer, except where a policy sent the batch
    earlier than recorded (ackreplay/replay/groups._early_batches: a batch held behind a retried one, which
    then gathered records until it was sent): a record sent after that went in a later batch, which left
    at the next multiple of `linger.ms` after the early one (the producer keeps sending that partition's
    batches as each lingers) and took as long at the broker (`broker_latency_ms`)."""
    after = F.coalesce(F.col("_send.after_ms"), F.lit(0.0))
    late = after - (F.col("latency_ms") - F.col("broker_latency_ms"))  # sent that long after its batch left
    linger = linger_ms.column()
    lingered = F.coalesce(F.pmod(-late, F.when(linger > 0, linger)), F.lit(0.0))  # linger.ms 0: sent at once
    sent_late = F.col("_send.after_ms").isNotNull() & (late > LATE_RECORD_MS)
    return F.when(sent_late, F.col("broker_latency_ms") + lingered).otherwise(F.col("latency_ms") - after)


# sent after its batch left, beyond what whole-millisecond CreateTimes against µs request times can show
LATE_RECORD_MS = 1.0


def record_latencies(
    replay: DataFrame, record_sends: DataFrame | None = None, linger_ms: float | PerCluster = 0.0
) -> DataFrame:
    """The acked produces' records (see the module docstring): their keys, partition and `t_start`, with
    `record_latency_ms` and `records`, how many records share that latency (rows of one batch differ by
    their send time). `record_sends`: the output of :func:`record_sends_by_batch`, None when there is none.
    `linger_ms`: the producers' `linger.ms` (conf `replay.producer.linger_ms`, a cluster's own in
    `clusters.<name>.producer`; :func:`_record_latency`)."""
    acked = replay.where(delivered())
    if record_sends is not None:
        # a listing of another epoch's batch at this offset (reused after a truncation) is not this one's
        other_epoch = F.coalesce(F.col("send_leader_epoch") != F.col("leader_epoch"), F.lit(False))
        acked = (
            acked.join(record_sends, BATCH_KEY, "left")
            .withColumn("record_sends", F.when(~other_epoch, F.col("record_sends")))
            .drop("send_leader_epoch")
        )
    else:
        acked = acked.withColumn("record_sends", F.lit(None).cast(RECORD_SENDS))
    sends = acked.select(
        "cluster",
        "topic",
        "partition",
        "policy",
        "t_start",
        "latency_ms",
        "broker_latency_ms",
        "records",
        F.posexplode_outer("record_sends").alias("_position", "_send"),
    )
    return sends.select(
        "cluster", "topic", "partition", "policy", "t_start",
        _record_latency(per_cluster(linger_ms)).alias("record_latency_ms"),
        F.coalesce(F.col("_send.records"), F.col("records"), F.lit(1)).cast("bigint").alias("records"),
        # one row of each batch whose records each have a send time (for counting those batches)
        (F.col("_position") == 0).alias("_batch_with_sends"),
    )  # fmt: skip


def _record_latency_aggs() -> list[Column]:
    """The record sample's size and exact percentiles, each record weighted once (see the module docstring)."""
    latency = F.col("record_latency_ms")
    return [
        F.sum("records").cast("bigint").alias("acked_records"),
        F.percentile(latency, [0.5, 0.99, 0.999, 0.9999], F.col("records")).alias("_pct"),
        F.max(latency).alias("max_ms"),
    ]


def _broker_view_aggs() -> list[Column]:
    """Next to the producer's view: the broker's latency of the same acked produces (exact P99, P999),
    the P999 of their wait behind earlier responses on the connection, and how many had a send time."""
    acked = delivered()
    return [
        F.percentile(F.when(acked, F.col("broker_latency_ms")), [0.99, 0.999]).alias("_broker"),
        F.percentile(F.when(acked, F.col("hol_wait_ms")), [0.999]).alias("_hol"),
        F.count_if(acked & F.col("t_send").isNotNull()).cast("bigint").alias("send_time_known"),
        F.count_if(acked & F.col("records").isNotNull()).cast("bigint").alias("record_count_known"),
    ]


def _percentile_columns() -> dict[str, Column]:
    n = F.col("acked_records")  # 0 where no produce was acked (filled by the callers)
    return {
        "p50_ms": F.when(n > 0, F.col("_pct")[0]),
        "p99_ms": F.when(n > 0, F.col("_pct")[1]),
        "p999_ms": F.when(n >= P999_MIN_N, F.col("_pct")[2]),
        "p9999_ms": F.when(n >= P9999_MIN_N, F.col("_pct")[3]),
        "p999_insufficient": n < P999_MIN_N,
        "p9999_insufficient": n < P9999_MIN_N,
    }


def latency_percentiles(
    replay: DataFrame, window: str = "hour", record_sends: DataFrame | None = None, linger_ms: float | PerCluster = 0.0
) -> DataFrame:
    """One row per (cluster, topic, policy, window): produces, n, acked_records, p50/p99/p999/p9999 and
    max of the records' latency (module docstring; `record_sends` as for :func:`record_latencies`).

    A window whose produces were all rejected has n = 0 and null percentiles.
    """
    keys = ["cluster", "topic", "policy", "window", "window_start"]
    records = with_window(record_latencies(replay, record_sends, linger_ms), window)
    records = records.groupBy(*keys).agg(*_record_latency_aggs())
    return (
        with_window(replay, window)
        .groupBy(*keys)
        .agg(*_count_aggs())
        .join(records, keys, "left")
        .fillna(0, subset=["acked_records"])
        .withColumns(_percentile_columns())
        .drop("_pct")
    )


def with_min_isr(replay: DataFrame, partitions: DataFrame) -> DataFrame:
    """Add `min_insync_replicas` of the produce's partition (null when `partitions` lacks it)."""
    mins = partitions.select("cluster", "topic", "partition", "min_insync_replicas").dropDuplicates(
        ["cluster", "topic", "partition"]
    )
    return replay.alias("r").join(mins.alias("p"), ["cluster", "topic", "partition"], how="left")


def _risk_aggs() -> list[Column]:
    acked = _acked()
    bytes_ = F.coalesce(F.col("bytes").cast("bigint"), F.lit(0).cast("bigint"))
    min_isr = F.col("min_insync_replicas")
    under = acked & min_isr.isNotNull() & (F.col("copies_at_ack") < min_isr)
    never = acked & (F.col("exposure_ms") == F.lit(float("inf")))
    return [
        _count_if(acked).alias("acked_batches"),
        F.coalesce(F.sum(F.when(acked, bytes_)), F.lit(0)).cast("bigint").alias("acked_bytes"),
        _count_if(under).alias("under_min_isr_acks"),
        F.coalesce(F.sum(F.when(under, bytes_)), F.lit(0)).cast("bigint").alias("under_min_isr_bytes"),
        _count_if(acked & min_isr.isNull()).alias("min_isr_unknown_acks"),
        F.coalesce(F.sum(F.when(_finite_exposure(), bytes_.cast("double") * F.col("exposure_ms"))), F.lit(0.0)).alias(
            "exposure_byte_ms"
        ),
        F.max(F.when(_finite_exposure(), F.col("exposure_ms"))).alias("max_exposure_ms"),
        _count_if(never).alias("never_min_isr_acks"),
        F.coalesce(F.sum(F.when(never, bytes_)), F.lit(0)).cast("bigint").alias("never_min_isr_bytes"),
        _count_if(acked & (F.col("copies_at_ack") == 1)).alias("single_copy_acks"),
        _count_if(acked & F.col("loss_kafka_election")).alias("loss_kafka_election"),
        _count_if(acked & F.col("loss_longest_log_election")).alias("loss_longest_log_election"),
        _count_if(acked & F.col("loss_kafka_election_min")).alias("loss_kafka_election_min"),
        _count_if(acked & F.col("loss_longest_log_election_min")).alias("loss_longest_log_election_min"),
        _count_if(acked & F.col("offline_at_failure")).alias("offline_at_failure_acks"),
        *_loss_window_aggs(),
        *_full_replication_aggs(),
    ]


def _loss_window_aggs() -> list[Column]:
    """The acked batches' loss windows summed in batch·seconds (finite ones), and those losable until the end
    of the data counted apart."""
    sums = [
        F.coalesce(
            F.sum(F.when(_finite(f"loss_window_{name}_ms"), F.col(f"loss_window_{name}_ms"))) / 1000.0, F.lit(0.0)
        ).alias(f"loss_window_{name}_batch_s")
        for name in ("kafka", "kafka_min", "longest", "longest_min")
    ]
    never = [
        _count_if(_acked() & (F.col(f"loss_window_{name}_ms") == F.lit(float("inf")))).alias(f"never_safe_{name}_acks")
        for name in ("kafka", "longest")
    ]
    return sums + never


def _full_replication_aggs() -> list[Column]:
    """Time from the ack until the batch was on all assigned replicas: exact p99 and max over the acked
    batches that got there (null when none did); those that never did within the data counted apart."""
    finite = F.when(_finite("full_replication_ms"), F.col("full_replication_ms"))
    return [
        F.percentile(finite, 0.99).alias("full_replication_p99_ms"),
        F.max(finite).alias("full_replication_max_ms"),
        _count_if(_acked() & (F.col("full_replication_ms") == F.lit(float("inf")))).alias(
            "never_full_replication_acks"
        ),
    ]


def risk_exposure(replay: DataFrame, partitions: DataFrame, window: str = "hour") -> DataFrame:
    """One row per (cluster, topic, policy, window): what the acknowledged batches risked.

    Under min ISR means `copies_at_ack` < the partition's `min.insync.replicas`; exposure byte·ms sums
    bytes * exposure_ms over finite exposures, and batches with exposure +inf (never on min ISR
    replicas within the data) are counted in `never_min_isr_acks` instead.
    """
    keys = ["cluster", "topic", "policy", "window", "window_start"]
    return (
        with_window(with_min_isr(replay, partitions), window)
        .groupBy(*keys)
        .agg(F.count("*").cast("bigint").alias("produces"), *_risk_aggs())
    )


def _failure_aggs() -> list[Column]:
    outcome = F.col("outcome")
    return [
        _count_if(outcome.isin(*NOT_ENOUGH_REPLICAS)).alias("not_enough_replicas"),
        _count_if(outcome == F.lit("timeout")).alias("timeouts"),
        _count_if(outcome == F.lit("not_leader")).alias("not_leader"),
        _count_if(outcome == F.lit("unreplayable")).alias("unreplayable"),
    ]


def observed_until(replay: DataFrame, isr_changes: DataFrame) -> DataFrame:
    """(cluster, end_us): the cluster's last recorded produce start or ISR change, in µs."""
    return (
        replay.select("cluster", F.unix_micros("t_start").alias("t_us"))
        .unionByName(isr_changes.select("cluster", F.unix_micros("t_log").alias("t_us")))
        .groupBy("cluster")
        .agg(F.max("t_us").alias("end_us"))
    )


def isr_segments(isr_changes: DataFrame, until: DataFrame) -> DataFrame:
    """Committed ISR states as intervals: (cluster, topic, partition, from_us, to_us, isr_size).

    A partition's states are ordered by log time; each holds until the next, the last one until the
    cluster's `end_us` (`until`, from :func:`observed_until`). A state logged with an older leader epoch
    than one already seen (a deposed leader still logging) is dropped: the newer leader's ISR stands.
    """
    partition = Window.partitionBy("cluster", "topic", "partition")
    ordered = partition.orderBy(
        "t_us",
        F.coalesce(F.col("leader_epoch"), F.lit(-1)),
        F.coalesce(F.col("partition_epoch"), F.lit(-1)),
        "source_file",
        "line_number",
    )
    earlier = ordered.rowsBetween(Window.unboundedPreceding, -1)
    states = (
        isr_changes.select(
            "cluster",
            "topic",
            "partition",
            "leader_epoch",
            "partition_epoch",
            "isr_size",
            "source_file",
            "line_number",
            F.unix_micros("t_log").alias("t_us"),
        )
        .withColumn("_newest_epoch", F.max("leader_epoch").over(earlier))
        .filter(
            F.col("leader_epoch").isNull()
            | F.col("_newest_epoch").isNull()
            | (F.col("leader_epoch") >= F.col("_newest_epoch"))
        )
    )
    return (
        states.withColumn("_next_us", F.lead("t_us").over(ordered))
        .join(until, ["cluster"], how="inner")
        .select(
            "cluster",
            "topic",
            "partition",
            F.col("t_us").alias("from_us"),
            F.coalesce(F.col("_next_us"), F.greatest(F.col("end_us"), F.col("t_us"))).alias("to_us"),
            "isr_size",
        )
    )


def isr_time_by_window(segments: DataFrame, partitions: DataFrame, window: str = "hour") -> DataFrame:
    """Per (cluster, topic, partition, window_start): ms the ISR was known and ms it was below the
    partition's min.insync.replicas (null when `partitions` lacks the partition)."""
    pieces = split_by_window(segments, window)
    mins = partitions.select("cluster", "topic", "partition", "min_insync_replicas").dropDuplicates(
        ["cluster", "topic", "partition"]
    )
    under = F.col("isr_size") < F.col("min_insync_replicas")
    return (
        pieces.join(mins, ["cluster", "topic", "partition"], how="left")
        .groupBy("cluster", "topic", "partition", F.timestamp_micros("window_us").alias("window_start"))
        .agg(
            F.first("min_insync_replicas").alias("min_insync_replicas"),
            (F.sum("overlap_us") / F.lit(1000.0)).alias("isr_known_ms"),
            (F.sum(F.when(under, F.col("overlap_us")).otherwise(F.lit(0))) / F.lit(1000.0)).alias("_under_ms"),
        )
        .withColumn("under_min_isr_ms", F.when(F.col("min_insync_replicas").isNotNull(), F.col("_under_ms")))
        .drop("_under_ms")
    )


def _isr_source(policy: Column) -> Column:
    """Where a policy's time under min ISR comes from (see the module docstring)."""
    return F.when(policy.startswith(LAG_PREFIX), F.lit(ISR_NOT_STORED)).otherwise(F.lit(ISR_FROM_CHANGES))


def availability(
    replay: DataFrame,
    isr_changes: DataFrame,
    partitions: DataFrame,
    window: str = "hour",
    segments: DataFrame | None = None,
    states: DataFrame | None = None,
) -> DataFrame:
    """One row per (cluster, topic, partition, policy, window): produces and how many failed, by error,
    and the time the partition's ISR was below min.insync.replicas (see the module docstring).
    `segments`: :func:`isr_segments` of `isr_changes` and `states`: `transforms.routing.routing_states` of them,
    when the caller has them already.

    Windows without produces but with a known ISR are kept (0 produces), for every policy replayed on
    the topic; topics without replayed produces are not covered.
    """
    keys = ["cluster", "topic", "partition", "policy", "window_start"]
    counts = (
        with_window(replay, window)
        .groupBy(*keys)
        .agg(F.count("*").cast("bigint").alias("produces"), _count_if(_acked()).alias("acked"), *_failure_aggs())
    )
    if segments is None:
        segments = isr_segments(isr_changes, observed_until(replay, isr_changes))
    isr_time = isr_time_by_window(segments, partitions, window)
    topic_policies = replay.select("cluster", "topic", "policy").distinct()
    isr_rows = isr_time.join(topic_policies, ["cluster", "topic"], how="inner")
    count_columns = ["produces", "acked", "not_enough_replicas", "timeouts", "not_leader", "unreplayable"]
    recorded_isr = _isr_source(F.col("policy")) == F.lit(ISR_FROM_CHANGES)
    known = F.coalesce(F.col("isr_known_ms"), F.lit(0.0))
    if states is None:
        states = routing_states(replay, segments, partitions)
    routed = routing_by_partition(replay, states, window)
    return (
        counts.join(isr_rows, keys, how="full")
        .join(routed, keys, how="left")
        .fillna(0, subset=count_columns)
        .withColumns(
            {
                "window": F.lit(window),
                "under_min_isr_source": _isr_source(F.col("policy")),
                "isr_known_ms": F.when(recorded_isr, known),
                # nothing known about the ISR in the window: no figure rather than a 0 that means nothing
                "under_min_isr_ms": F.when(recorded_isr & (known > 0), F.col("under_min_isr_ms")),
                "reroutable_rejections": F.coalesce(F.col("reroutable_rejections"), F.lit(0)),
                "rejected_wait_ms": F.coalesce(F.col("rejected_wait_ms"), F.lit(0.0)),
                "reroutable_wait_ms": F.coalesce(F.col("reroutable_wait_ms"), F.lit(0.0)),
                "never_writable_rejections": F.coalesce(F.col("never_writable_rejections"), F.lit(0)),
            }
        )
    )


def _isr_time_by_policy(availability_df: DataFrame) -> DataFrame:
    """(cluster, topic, policy): time under min ISR and the routing what-if summed over partitions and
    windows, and their source."""
    return availability_df.groupBy("cluster", "topic", "policy").agg(
        F.sum("under_min_isr_ms").alias("under_min_isr_ms"),
        F.first("under_min_isr_source").alias("under_min_isr_source"),
        F.sum("reroutable_rejections").alias("reroutable_rejections"),
        F.sum("rejected_wait_ms").alias("rejected_wait_ms"),
        F.sum("reroutable_wait_ms").alias("reroutable_wait_ms"),
    )


def leader_silence_by_topic(replay: DataFrame, request_lines: DataFrame) -> DataFrame:
    """(cluster, topic, leader_silence_ms): the longest span in which a broker that led the topic's produces logged
    no request line (`replay_inputs.broker_silences`: its JVM did not run), overlapping the topic's produces.
    `request_lines`: (cluster, broker_id, t_local_done) of every request the brokers logged. Topics without such
    a span have no row."""
    from ackreplay.transforms.replay_inputs import broker_silences

    led = replay.groupBy("cluster", "topic", "broker_id").agg(
        F.min(F.unix_micros("t_start")).alias("_first"), F.max(F.unix_micros("t_start")).alias("_last")
    )
    return (
        led.join(F.broadcast(broker_silences(request_lines)), ["cluster", "broker_id"])
        .where((F.col("silent_from_us") < F.col("_last")) & (F.col("resumed_us") > F.col("_first")))
        .groupBy("cluster", "topic")
        .agg((F.max(F.col("resumed_us") - F.col("silent_from_us")) / 1000).alias("leader_silence_ms"))
    )


def policy_summary(
    replay: DataFrame,
    partitions: DataFrame,
    availability_df: DataFrame,
    record_sends: DataFrame | None = None,
    linger_ms: float | PerCluster = 0.0,
) -> DataFrame:
    """One row per (cluster, topic, policy) over all the data: the decision table.

    P999 is exact over the whole run (percentiles of windows cannot be combined); the change of P999 is
    against the replayed `acks=all` of the same topic (null when that policy or either P999 is missing).
    Time under min ISR is the sum over the topic's partitions and windows of `availability_df` (the
    output of :func:`availability`): partition·ms.
    """
    keys = ["cluster", "topic", "policy"]
    records = (
        record_latencies(replay, record_sends, linger_ms)
        .groupBy(*keys)
        .agg(
            *_record_latency_aggs(),
            F.count_if(F.col("_batch_with_sends")).cast("bigint").alias("record_sends_known"),
        )
    )
    by_policy = (
        with_min_isr(replay, partitions)
        .groupBy(*keys)
        .agg(
            *_count_aggs(),
            *_broker_view_aggs(),
            *_risk_aggs(),
            *_failure_aggs(),
            _count_if(_undelivered()).alias("undelivered"),
        )
        .join(records, keys, "left")
        .fillna(0, subset=["acked_records", "record_sends_known"])
        .withColumns(_percentile_columns())
        .withColumns(
            {
                "broker_p99_ms": F.when(F.col("n") > 0, F.col("_broker")[0]),
                "broker_p999_ms": F.when(F.col("n") >= P999_MIN_N, F.col("_broker")[1]),
                "hol_wait_p999_ms": F.when(F.col("n") >= P999_MIN_N, F.col("_hol")[0]),
            }
        )
    )
    # the topic's acks=all P999 beside each of its policies: a window over the aggregate, not a self-join
    # (a join of `by_policy` with a filter of itself plans and computes the whole aggregate twice)
    base = F.max(F.when(F.col("policy") == F.lit(RECORDED_POLICY), F.col("p999_ms"))).over(
        Window.partitionBy("cluster", "topic")
    )
    return (
        by_policy.withColumn("_base_p999", base)
        .join(_isr_time_by_policy(availability_df), keys, how="left")
        .withColumns(
            {
                "policy_rank": policy_rank(F.col("policy")),
                "p999_vs_acks_all_ms": F.col("p999_ms") - F.col("_base_p999"),
                "p999_vs_acks_all_ratio": F.when(F.col("_base_p999") != 0, F.col("p999_ms") / F.col("_base_p999")),
                "under_min_isr_source": F.coalesce(F.col("under_min_isr_source"), _isr_source(F.col("policy"))),
            }
        )
        .drop("_pct", "_broker", "_hol", "_base_p999", "p50_ms", "p9999_ms", "p9999_insufficient", "max_ms")
    )


def cdf_probabilities(points: int = 200) -> list[float]:
    """`points` fractions for a latency CDF: even steps up to 0.99, then log-spaced into the tail (0.9999)."""
    body = points * 3 // 4
    tail = points - body
    out = [0.99 * (i + 1) / body for i in range(body)]
    out += [1 - 0.01 * 10 ** (-2 * (i + 1) / tail) for i in range(tail)]
    return out


def _quantile_rows(df: DataFrame, column: str, probabilities: list[float], weight: Column | None = None) -> DataFrame:
    """Exact quantiles of `column` per (cluster, topic, policy) (`weight`: each row's frequency), one row per
    fraction: (cluster, topic, policy, q, `column`)."""
    probs = [float(p) for p in probabilities]
    percentile = F.percentile(column, probs) if weight is None else F.percentile(column, probs, weight)
    return (
        df.groupBy("cluster", "topic", "policy")
        .agg(percentile.alias("_v"))
        .select(
            "cluster",
            "topic",
            "policy",
            F.posexplode(F.arrays_zip(F.array(*[F.lit(p) for p in probs]).alias("q"), F.col("_v").alias("v"))),
        )
        .select("cluster", "topic", "policy", F.col("col.q").alias("q"), F.col("col.v").alias(column))
    )


def latency_quantiles(
    replay: DataFrame,
    probabilities: list[float],
    record_sends: DataFrame | None = None,
    linger_ms: float | PerCluster = 0.0,
) -> DataFrame:
    """Exact quantiles of the records' latency per (cluster, topic, policy) (module docstring; `record_sends`
    as for :func:`record_latencies`): one row per fraction q."""
    records = record_latencies(replay, record_sends, linger_ms)
    return _quantile_rows(records, "record_latency_ms", probabilities, F.col("records")).withColumnRenamed(
        "record_latency_ms", "latency_ms"
    )


def broker_latency_quantiles(replay: DataFrame, probabilities: list[float]) -> DataFrame:
    """Exact quantiles of the broker's view per (cluster, topic, policy): `broker_latency_ms` of the produces the
    producer saw acknowledged, one per produce (the summary's broker P99/P999), one row per fraction q."""
    return _quantile_rows(replay.where(delivered()), "broker_latency_ms", probabilities)


def reduced_isr_spans(segments: DataFrame, partitions: DataFrame | None = None) -> DataFrame:
    """(cluster, topic, partition, start, end): each span while a partition's committed ISR was smaller than its
    full size, from :func:`isr_segments` (consecutive reduced states merged; the last ends where the cluster's
    data does). The full size is the partition's replicas (`partitions`, when it has them) or else the largest
    ISR logged for it."""
    keys = ["cluster", "topic", "partition"]
    full = segments.groupBy(*keys).agg(F.max("isr_size").alias("full_size"))
    if partitions is not None and "replicas" in partitions.columns:
        assigned = partitions.select(*keys, F.size("replicas").alias("_assigned")).dropDuplicates(keys)
        full = full.join(assigned, keys, "left").select(
            *keys, F.greatest("full_size", F.coalesce("_assigned", F.lit(0))).alias("full_size")
        )
    in_time = Window.partitionBy(*keys).orderBy("from_us").rowsBetween(Window.unboundedPreceding, 0)
    reduced = F.col("isr_size") < F.col("full_size")
    runs = (
        segments.join(full, keys)
        # a run of reduced states shares the count of full states before it
        .withColumn("_run", F.sum((~reduced).cast("int")).over(in_time))
        .filter(reduced)
    )
    return (
        runs.groupBy(*keys, "_run")
        .agg(F.timestamp_micros(F.min("from_us")).alias("start"), F.timestamp_micros(F.max("to_us")).alias("end"))
        .drop("_run")
    )
