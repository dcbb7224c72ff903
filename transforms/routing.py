"""Routing around partitions below min ISR (KIP-637): the gold `routing` table and `availability`'s routing
columns. Pure DataFrame -> DataFrame.

KIP-637 proposes that an acks=all producer learn each topic's `min.insync.replicas` from the metadata and
not send to a partition whose ISR is below it. Kafka never implemented it. Today the producer sends, the
leader rejects the batch before appending it (`Partition.appendRecordsToLeader` throws
NotEnoughReplicasException when the committed ISR, `partitionState.isr`, is smaller than min ISR), and the
producer retries every `retry.backoff.ms` until the ISR recovers or `delivery.timeout.ms` expires, holding
the batch in its buffer meanwhile.

The model, per rejection a policy gives at append (outcome `not_enough_replicas`; one rejected after its
append, `..._after_append`, was sent while its partition was writable, so KIP-637 would have sent it too):

* A partition is *writable* while its committed ISR (silver `isr_changes`, as :func:`transforms.gold.isr_segments`
  orders it) is at or above its min ISR (`partitions`). A partition with no ISR line in the logs, or no min
  ISR, is not known to be writable. Under `acks=all@lag=<ms>` the committed ISR is the one the replay
  re-simulates for that lag, which it does not store; what it stores is its verdict at each append of the
  partition (rejected or not: the same check, `Partition.appendRecordsToLeader`, on that ISR), so there a
  partition is writable from an append the policy accepted until its next rejected one, and not writable from
  a rejected append until its next accepted one (:func:`sampled_states`): the ISR changed somewhere between
  the two appends, and the model takes the later one. Known from the partition's first append to its last.
* *Reroutable*: another partition of the same topic was writable at the moment of the rejection
  (`t_local_done`). A KIP-637 producer of keyless records sends the batch there; one of keyed records cannot
  move it (the key picks the partition) and holds it until its partition is writable again. Request logs
  do not say whether records had keys: `partitioning` per topic in the conf (`keyed` unless set).
* *Wait*: from the rejection until the batch's own partition is writable again: what today's retries wait
  (at best: a retry lands up to `retry.backoff.ms` later), and what a KIP-637 producer holds a batch it does
  not reroute. Never writable again within the data: no wait figure, counted apart.
* *Where a rerouted batch lands*: for each partition writable at that moment, the replayed producer-visible
  latency (`latency_ms`, same policy) of that partition's acked produce nearest in time, within
  `NEAREST_WITHIN_US`; the table gives the fastest such partition and the average over them (which one a
  real partitioner picks is not modelled: the sticky partitioner picks one at random per batch).

The ground truth behind it: under the recorded policy, every real NOT_ENOUGH_REPLICAS response in the
request logs is a rejection the replay must give (`ackreplay.replay.self_check`, the rejection truth). Those
produces have no offset and are not in `produce_replay`; the `routing` table counts them from
`produce_requests` (`recorded_rejections`) next to the replayed ones, under acks=all and min.insync, which
reject at append under the same rule on the recorded ISR (not under acks=all@lag, whose ISR differs). Each
attempt counts as a rejection, but a producer's retries of one rejected batch (linked by `linked_retries`) wait
once: the waits and buffer byte-seconds count a batch's first attempt only.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.schemas.vocabulary import ACKS_ALL, LAG_PREFIX, MIN_INSYNC, Outcome
from ackreplay.transforms.replay_inputs import linked_retries, rejected_below_min_isr
from ackreplay.transforms.windows import split_by_window, with_window

REJECTED_AT_APPEND = Outcome.NOT_ENOUGH_REPLICAS.label
ACKED = Outcome.ACKED.label
# the policies that reject below min ISR on the recorded ISR; acks=all@lag=<ms> rejects on the ISR it re-simulates
RECORDED_ISR_POLICIES = (ACKS_ALL.id, MIN_INSYNC.id)
# how far from a rejection a produce on another partition may be to stand for what that partition gave then
NEAREST_WITHIN_US = 1_000_000
# one rejection under one policy: a produce-request line names each (topic, partition) once
REJECTION_KEY = ["cluster", "topic", "partition", "policy", "source_file", "line_number"]
KEYED, KEYLESS = "keyed", "keyless"
AUTO = "auto"  # the conf's choice: from the records' keys where the send-time input shows them


def rejects_below_min_isr(policy: Column) -> Column:
    """Whether a policy rejects a produce at append when its partition's committed ISR is below min ISR."""
    return policy.isin(*RECORDED_ISR_POLICIES) | policy.startswith(LAG_PREFIX)


def sampled_states(replay: DataFrame) -> DataFrame:
    """(cluster, topic, partition, policy, from_us, to_us, writable) for the acks=all@lag policies: the writability
    the replay found at each append (`t_local_done`; rejected at append or not), as runs of equal verdicts, each from
    its first append until the next run's first (the partition's last run until its last append). A partition the
    policy never rejected on is one writable run: aggregated, not ordered."""
    keys = ["cluster", "topic", "partition", "policy"]
    appends = replay.filter(F.col("policy").startswith(LAG_PREFIX)).select(
        *keys,
        F.unix_micros("t_local_done").alias("t_us"),
        (F.col("outcome") != F.lit(REJECTED_AT_APPEND)).alias("writable"),
    )
    per_partition = appends.groupBy(*keys).agg(
        F.min("t_us").alias("from_us"), F.max("t_us").alias("to_us"), F.count_if(~F.col("writable")).alias("_rejected")
    )
    always = per_partition.filter(F.col("_rejected") == 0).select(
        *keys, "from_us", "to_us", F.lit(True).alias("writable")
    )
    dipped = F.broadcast(per_partition.filter(F.col("_rejected") > 0).select(*keys, F.col("to_us").alias("_last_us")))
    in_order = Window.partitionBy(*keys).orderBy("t_us", "writable")
    runs = (
        appends.join(dipped, keys)
        .withColumn("_previous", F.lag("writable").over(in_order))
        .filter(F.col("_previous").isNull() | (F.col("_previous") != F.col("writable")))
        .withColumn("_next_us", F.lead("t_us").over(in_order))
        .select(*keys, F.col("t_us").alias("from_us"), F.coalesce("_next_us", "_last_us").alias("to_us"), "writable")
    )
    return always.unionByName(runs)


def routing_states(replay: DataFrame, segments: DataFrame, partitions: DataFrame) -> DataFrame:
    """(cluster, topic, partition, policy, from_us, to_us, writable): what each policy that rejects below min ISR
    knew of each partition's writability over time. acks=all and min.insync: the committed ISR states
    (`transforms.gold.isr_segments`) against the partition's min.insync.replicas (not writable where it has none),
    for the topics the policy replayed; acks=all@lag: :func:`sampled_states`. Small: a row per ISR state or run."""
    keys = ["cluster", "topic", "partition"]
    mins = partitions.select(*keys, "min_insync_replicas").dropDuplicates(keys)
    policies = replay.filter(F.col("policy").isin(*RECORDED_ISR_POLICIES)).select("cluster", "topic", "policy")
    recorded = (
        segments.join(mins, keys, "left")
        .join(policies.distinct(), ["cluster", "topic"])
        .select(
            *keys,
            "policy",
            "from_us",
            "to_us",
            F.coalesce(F.col("isr_size") >= F.col("min_insync_replicas"), F.lit(False)).alias("writable"),
        )
    )
    return recorded.unionByName(sampled_states(replay))


def rejection_targets(rejections: DataFrame, states: DataFrame) -> DataFrame:
    """Per rejection (its `REJECTION_KEY` columns and any other columns of `rejections`, which must hold
    `t_us`, the rejection's time in µs): `targets`, the other partitions of the topic writable at `t_us` under
    the same policy (sorted; `states`: :func:`routing_states`), and `writable_again_us`, when its own partition
    was next writable (null: not within the data). Rejections are rare: a join of them with the topic's writable
    spans."""
    writable = states.filter("writable")
    r, w = rejections.alias("r"), F.broadcast(writable).alias("w")  # a few rows per ISR change
    other = (F.col("w.partition") != F.col("r.partition")) & (F.col("w.from_us") <= F.col("r.t_us"))
    other = other & (F.col("r.t_us") < F.col("w.to_us"))
    own = (F.col("w.partition") == F.col("r.partition")) & (F.col("w.to_us") > F.col("r.t_us"))
    same_topic = (F.col("r.cluster") == F.col("w.cluster")) & (F.col("r.topic") == F.col("w.topic"))
    matched = r.join(w, same_topic & (F.col("r.policy") == F.col("w.policy")) & (other | own), "left")
    return matched.groupBy(*[F.col(f"r.{c}") for c in rejections.columns]).agg(
        F.array_sort(F.collect_set(F.when(other, F.col("w.partition")))).alias("targets"),
        F.min(F.when(own, F.greatest(F.col("w.from_us"), F.col("r.t_us")))).alias("writable_again_us"),
    )


def wait_ms() -> Column:
    """A rejection's wait until its own partition was writable again (null: never within the data)."""
    return (F.col("writable_again_us") - F.col("t_us")) / F.lit(1000.0)


def routing_by_partition(replay: DataFrame, states: DataFrame, window: str = "hour") -> DataFrame:
    """`availability`'s routing columns per (cluster, topic, partition, policy, window_start), over the produces
    a policy rejected at append: how many had another partition writable then (`reroutable_rejections`,
    whatever the topic's partitioning), their summed wait until their own partition was writable again
    (`rejected_wait_ms`, and of the reroutable ones `reroutable_wait_ms`) and how many had no such moment within
    the data (`never_writable_rejections`). `states`: :func:`routing_states`."""
    rejected = with_window(replay.filter(F.col("outcome") == F.lit(REJECTED_AT_APPEND)), window).select(
        *REJECTION_KEY, "window_start", F.unix_micros("t_local_done").alias("t_us")
    )
    per = rejection_targets(rejected, states)
    reroutable = F.size("targets") > 0
    return per.groupBy("cluster", "topic", "partition", "policy", "window_start").agg(
        F.count_if(reroutable).cast("bigint").alias("reroutable_rejections"),
        F.sum(wait_ms()).alias("rejected_wait_ms"),
        F.sum(F.when(reroutable, wait_ms())).alias("reroutable_wait_ms"),
        F.count_if(F.col("writable_again_us").isNull()).cast("bigint").alias("never_writable_rejections"),
    )


def target_latencies(per_rejection: DataFrame, replay: DataFrame) -> DataFrame:
    """(REJECTION_KEY, fastest_ms, average_ms): for each rejection with `targets`, the replayed latency on each
    target partition (the same policy's acked produce there nearest to `t_us` by its `t_start`, within
    `NEAREST_WITHIN_US`), the least and the mean over the targets that have one."""
    second = F.floor(F.col("t_us") / F.lit(1_000_000))
    wanted = (
        per_rejection.select(*REJECTION_KEY, "t_us", F.explode("targets").alias("target"))
        # the produces within NEAREST_WITHIN_US lie in this second or the next or previous one
        .withColumn("_second", F.explode(F.array(second - 1, second, second + 1)))
    )
    acked = replay.filter(F.col("outcome") == F.lit(ACKED)).select(
        "cluster",
        "topic",
        F.col("partition").alias("target"),
        "policy",
        F.unix_micros("t_start").alias("_at_us"),
        F.col("latency_ms").alias("_latency_ms"),
    )
    acked = acked.withColumn("_second", F.floor(F.col("_at_us") / F.lit(1_000_000)))
    distance = F.abs(F.col("_at_us") - F.col("t_us"))
    # the rejections' side is small: broadcast, so the produces are read once and not shuffled
    near = acked.join(F.broadcast(wanted), ["cluster", "topic", "target", "policy", "_second"]).filter(
        distance <= F.lit(NEAREST_WITHIN_US)
    )
    # the nearest produce; a tie of distances goes to the earlier one, then the lower latency
    nearest = near.groupBy(*REJECTION_KEY, "target").agg(
        F.min_by("_latency_ms", F.struct(distance, F.col("_at_us"), F.col("_latency_ms"))).alias("_latency_ms")
    )
    return nearest.groupBy(*REJECTION_KEY).agg(
        F.min("_latency_ms").alias("fastest_ms"), F.avg("_latency_ms").alias("average_ms")
    )


def no_writable_time(states: DataFrame, window: str) -> DataFrame:
    """(cluster, topic, policy, window_start, isr_known_ms, no_writable_ms): per window, how long the topic's ISR
    was known under the policy (from its first ISR state to the end of its data; `states`: :func:`routing_states`)
    and, of that, how long no partition of it was writable."""
    topic = ["cluster", "topic", "policy"]
    known = states.groupBy(*topic).agg(F.min("from_us").alias("from_us"), F.max("to_us").alias("to_us"))
    in_order = Window.partitionBy(*topic).orderBy("from_us", "to_us")
    covered_until = F.max("to_us").over(in_order.rowsBetween(Window.unboundedPreceding, -1))
    spans = states.filter("writable").select(*topic, "from_us", "to_us")
    # the gaps between writable spans (a span starting after every earlier one ended), and before the first
    # and after the last within the known time; a topic never writable is one gap
    inner = spans.withColumn("_covered_until", covered_until).filter(F.col("_covered_until") < F.col("from_us"))
    inner = inner.select(*topic, F.col("_covered_until").alias("from_us"), F.col("from_us").alias("to_us"))
    bounds = spans.groupBy(*topic).agg(F.min("from_us").alias("_first_us"), F.max("to_us").alias("_last_us"))
    edges = known.join(bounds, topic, "left")
    before = edges.select(*topic, "from_us", F.coalesce("_first_us", "to_us").alias("to_us"))
    after = edges.filter(F.col("_last_us").isNotNull()).select(*topic, F.col("_last_us").alias("from_us"), "to_us")
    gaps = inner.unionByName(before).unionByName(after)
    known_time = split_by_window(known, window).groupBy(*topic, "window_us").agg(F.sum("overlap_us").alias("_known"))
    gap_time = split_by_window(gaps, window).groupBy(*topic, "window_us").agg(F.sum("overlap_us").alias("_gap"))
    return known_time.join(gap_time, [*topic, "window_us"], "left").select(
        *topic,
        F.timestamp_micros("window_us").alias("window_start"),
        (F.col("_known") / F.lit(1000.0)).alias("isr_known_ms"),
        (F.coalesce(F.col("_gap"), F.lit(0)) / F.lit(1000.0)).alias("no_writable_ms"),
    )


def routing(
    replay: DataFrame,
    produce_requests: DataFrame,
    segments: DataFrame,
    partitions: DataFrame,
    keyless: Column,
    window: str = "hour",
    materialize: Callable[[DataFrame], DataFrame] = lambda df: df,
    states: DataFrame | None = None,
) -> DataFrame:
    """The gold `routing` rows: per (cluster, topic, policy that rejects below min ISR, window) the rejections at
    append and what a KIP-637 producer would have done with them (module docstring). `keyless`: a boolean
    over `cluster` and `topic`, true where the topic's records have no key (conf `partitioning`).

    Rows cover every window the replay or the topic's ISR states reach, with zeros where nothing was rejected.
    `materialize`: applied to the per-rejection rows, which three aggregates read (the gold stage computes
    them once: `DataFrame.localCheckpoint`). `states`: :func:`routing_states` of `segments`, when the caller
    has them already."""
    topic = ["cluster", "topic"]
    keys = [*topic, "policy", "window_start"]
    routed = rejects_below_min_isr(F.col("policy"))
    # the replay's (topic, policy, window)s, read once for the routed policies and the windows they cover
    replayed_windows = with_window(replay.select(*topic, "policy", "t_start"), window).groupBy(*keys).count()
    policies = replayed_windows.filter(routed).select(*topic, "policy").distinct()
    replayed = replay.filter((F.col("outcome") == F.lit(REJECTED_AT_APPEND)) & routed).select(
        *REJECTION_KEY,
        "t_start",
        "t_local_done",
        "bytes",
        F.lit(False).alias("recorded"),
        *[F.lit(None).cast(t).alias(c) for c, t in (("retry_file", "string"), ("retry_line", "bigint"),
                                                    ("retry_ack_us", "bigint"))],
    )  # fmt: skip
    retry = ["cluster", "topic", "partition", "source_file", "line_number"]
    recorded = (
        produce_requests.filter(rejected_below_min_isr())
        .join(policies.filter(F.col("policy").isin(*RECORDED_ISR_POLICIES)), topic)
        .join(linked_retries(produce_requests), retry, "left")
        .select(
            *REJECTION_KEY,
            "t_start",
            "t_local_done",
            F.col("records_size_bytes").alias("bytes"),
            F.lit(True).alias("recorded"),
            "retry_file",
            "retry_line",
            "retry_ack_us",
        )
    )
    rejections = with_window(replayed.unionByName(recorded), window).select(
        *REJECTION_KEY, "window_start", "bytes", "recorded", F.unix_micros("t_local_done").alias("t_us"),
        "retry_file", "retry_line", "retry_ack_us",
    )  # fmt: skip
    if states is None:
        states = routing_states(replay, segments, partitions)
    per = rejection_targets(rejections, states).withColumn("_keyless", keyless)
    rerouted = F.col("_keyless") & (F.size("targets") > 0)
    per = materialize(per.join(target_latencies(per.filter(rerouted), replay), REJECTION_KEY, "left"))
    held = ~rerouted & F.col("writable_again_us").isNotNull()
    # a batch's wait counts once: the later attempts of a linked batch (its retries, rejected again) wait
    # within its first attempt's wait, and a KIP-637 producer would not have made them
    attempts = Window.partitionBy("cluster", "topic", "partition", "policy", "retry_file", "retry_line").orderBy(
        "t_us", "source_file", "line_number"
    )
    first_attempt = F.col("retry_line").isNull() | (F.row_number().over(attempts) == 1)
    per = per.withColumn("_first_attempt", first_attempt)
    own_wait = F.when(F.col("_first_attempt"), wait_ms())
    held_wait = F.when(~rerouted, own_wait)
    byte_seconds = F.col("bytes").cast("double") / F.lit(1000.0)
    average, fastest = F.when(rerouted, F.col("average_ms")), F.when(rerouted, F.col("fastest_ms"))
    counts = per.groupBy(*keys).agg(
        F.count("*").cast("bigint").alias("rejections"),
        F.count_if("recorded").cast("bigint").alias("recorded_rejections"),
        F.count_if(rerouted).cast("bigint").alias("rerouted"),
        F.coalesce(F.sum(F.when(rerouted, F.col("bytes"))), F.lit(0)).cast("bigint").alias("rerouted_bytes"),
        F.count_if(held).cast("bigint").alias("held"),
        F.count_if(~rerouted & F.col("writable_again_us").isNull()).cast("bigint").alias("never_writable"),
        F.coalesce(F.sum(own_wait), F.lit(0.0)).alias("wait_today_ms"),
        F.coalesce(F.sum(held_wait), F.lit(0.0)).alias("wait_kip637_ms"),
        F.coalesce(F.sum(own_wait * byte_seconds), F.lit(0.0)).alias("buffer_byte_s_today"),
        F.coalesce(F.sum(held_wait * byte_seconds), F.lit(0.0)).alias("buffer_byte_s_kip637"),
        F.count_if(average.isNotNull()).cast("bigint").alias("rerouted_latency_known"),
        F.percentile(average, [0.5, 0.99, 0.999]).alias("_average"),
        F.max(average).alias("rerouted_max_ms"),
        F.percentile(fastest, [0.5, 0.99, 0.999]).alias("_fastest"),
        F.count_if(F.col("recorded") & F.col("retry_line").isNull()).cast("bigint").alias("recorded_unlinked"),
    )
    # today's cost as measured: each real rejection's batch linked to the retry that got it appended (its
    # rejections one batch, counted in the window of the first), from that first rejection to the retry's ack;
    # next to it the model's wait of the same batches (until the partition was writable again)
    batches = (
        per.filter(F.col("retry_line").isNotNull())
        .groupBy("cluster", "topic", "partition", "policy", "retry_file", "retry_line")
        .agg(
            F.min_by(F.struct("window_start", "t_us", "writable_again_us"), "t_us").alias("_first"),
            F.max("retry_ack_us").alias("retry_ack_us"),
        )
        .select("cluster", "topic", "policy", "_first.*", "retry_ack_us")
        .groupBy(*keys)
        .agg(
            F.count("*").cast("bigint").alias("recorded_batches"),
            F.sum((F.col("retry_ack_us") - F.col("t_us")) / F.lit(1000.0)).alias("recorded_wait_ms"),
            F.sum(wait_ms()).alias("recorded_model_wait_ms"),
        )
    )
    isr_time = no_writable_time(states, window)
    windows = (
        replayed_windows.select(*topic, "window_start").unionByName(isr_time.select(*topic, "window_start")).distinct()
    )
    zero_counts = ["rejections", "recorded_rejections", "rerouted", "rerouted_bytes", "held", "never_writable",
                   "rerouted_latency_known", "recorded_batches", "recorded_unlinked"]  # fmt: skip
    zero_sums = ["wait_today_ms", "wait_kip637_ms", "buffer_byte_s_today", "buffer_byte_s_kip637", "recorded_wait_ms",
                 "recorded_model_wait_ms"]  # fmt: skip
    return (
        windows.join(policies, topic)
        .join(counts, keys, "left")
        .join(batches, keys, "left")
        .join(isr_time, keys, "left")
        .fillna(0, subset=zero_counts)
        .fillna(0.0, subset=zero_sums)
        .withColumns(
            {
                "window": F.lit(window),
                "partitioning": F.when(keyless, F.lit(KEYLESS)).otherwise(F.lit(KEYED)),
                "rerouted_p50_ms": F.col("_average")[0],
                "rerouted_p99_ms": F.col("_average")[1],
                "rerouted_p999_ms": F.col("_average")[2],
                "rerouted_fastest_p50_ms": F.col("_fastest")[0],
                "rerouted_fastest_p99_ms": F.col("_fastest")[1],
                "rerouted_fastest_p999_ms": F.col("_fastest")[2],
                "saved_wait_ms": F.col("wait_today_ms") - F.col("wait_kip637_ms"),
            }
        )
        .drop("_average", "_fastest")
    )
