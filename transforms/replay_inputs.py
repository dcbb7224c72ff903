"""Silver tables -> the rows each replay group needs, keyed by (cluster, topic, partition, leader epoch, bucket).

A group is one time bucket of one leader epoch of one partition, so a hot partition splits across
tasks and memory per task stays bounded. A group carries its produces, the follower LEO events from
one bucket before it (lookback for the lag window) to `horizon` buckets after it (the request
timeout), the epoch's ISR timeline, and the partition's assignment.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

EPOCH_END_NEVER = 2**62  # µs: "still leader at the end of the data"
GROUP_KEY = ["cluster", "topic", "partition", "leader_epoch", "bucket"]
KIND_PRODUCE, KIND_FETCH, KIND_ISR, KIND_META = 0, 1, 2, 3
# What crosses into Python is numeric (Arrow moves numeric columns without per-value work); strings
# and arrays travel once per group on the meta row, and source files as ids of a small dictionary.


def with_group_id(df: DataFrame) -> DataFrame:
    """`group_id`: a 64-bit hash of the group key, carried through Python instead of the strings."""
    return df.withColumn("group_id", F.xxhash64(*GROUP_KEY))


def _micros(col: str) -> F.Column:
    return F.unix_micros(F.col(col))


def build_epochs(leader_epochs_df: DataFrame, follower_fetches_df: DataFrame) -> DataFrame:
    """Leadership spans: (cluster, topic, partition, leader_epoch, leader_id, epoch_start_us, epoch_end_us, start_isr).

    From `leader_epochs` (state-change.log); epochs seen only in follower fetches (their
    `currentLeaderEpoch`, e.g. when state-change.log was rotated away) start at their first fetch and
    have an unknown start ISR (null: all replicas assumed).
    """
    logged = leader_epochs_df.select(
        "cluster",
        "topic",
        "partition",
        "leader_epoch",
        F.col("broker_id").alias("leader_id"),
        _micros("t_log").alias("epoch_start_us"),
        F.col("isr").alias("start_isr"),
        F.lit("state_change_log").alias("epoch_source"),
    )
    seen = (
        follower_fetches_df.filter(F.col("current_leader_epoch").isNotNull())
        .groupBy("cluster", "topic", "partition", F.col("current_leader_epoch").alias("leader_epoch"))
        .agg(F.min_by("broker_id", "t_dequeue").alias("leader_id"), F.min(_micros("t_dequeue")).alias("epoch_start_us"))
        .join(logged.select("cluster", "topic", "partition", "leader_epoch"), ["cluster", "topic", "partition", "leader_epoch"], "left_anti")
        .select(
            "cluster",
            "topic",
            "partition",
            "leader_epoch",
            "leader_id",
            "epoch_start_us",
            F.lit(None).cast("array<int>").alias("start_isr"),
            F.lit("follower_fetches").alias("epoch_source"),
        )
    )
    # Several lines can announce the same epoch (a restarted broker re-logs it): keep the first.
    first = Window.partitionBy("cluster", "topic", "partition", "leader_epoch").orderBy("epoch_start_us")
    epochs = (
        logged.unionByName(seen)
        .withColumn("rank", F.row_number().over(first))
        .filter(F.col("rank") == 1)
        .drop("rank")
    )
    following = Window.partitionBy("cluster", "topic", "partition").orderBy("epoch_start_us", "leader_epoch")
    return epochs.withColumn(
        "epoch_end_us", F.coalesce(F.lead("epoch_start_us").over(following), F.lit(EPOCH_END_NEVER))
    )


def with_leader_epoch(df: DataFrame, epochs_df: DataFrame, time_us: F.Column) -> DataFrame:
    """Attach the leadership span in force at `time_us` on the row's broker (inner join: rows outside any
    known span of their broker are dropped; the caller counts them)."""
    e = epochs_df.alias("e")
    joined = df.withColumn("_t_us", time_us).alias("d").join(
        F.broadcast(e),
        (F.col("d.cluster") == F.col("e.cluster"))
        & (F.col("d.topic") == F.col("e.topic"))
        & (F.col("d.partition") == F.col("e.partition"))
        & (F.col("d.broker_id") == F.col("e.leader_id"))
        & (F.col("d._t_us") >= F.col("e.epoch_start_us"))
        & (F.col("d._t_us") < F.col("e.epoch_end_us")),
        "inner",
    )
    return joined.select(
        "d.*", "e.leader_epoch", "e.epoch_start_us", "e.epoch_end_us", "e.start_isr", "e.epoch_source"
    ).drop("_t_us")


def bucket_of(time_us: F.Column, bucket_us: int) -> F.Column:
    return F.floor(time_us / F.lit(bucket_us)).cast("bigint")


def produce_rows(produces_df: DataFrame, source_ids_df: DataFrame, bucket_us: int) -> DataFrame:
    """Replayable produces (appended: error 0, base offset known) as numeric group rows.

    `source_ids_df` maps source_file -> source_file_id (a small dictionary, broadcast).
    """
    return with_group_id(
        produces_df.join(F.broadcast(source_ids_df), ["source_file"], "inner").select(
            *GROUP_KEY[:-1],
            bucket_of(_micros("t_local_done"), bucket_us).alias("bucket"),
            F.lit(KIND_PRODUCE).cast("tinyint").alias("kind"),
            _micros("t_local_done").alias("t_us"),
            F.col("base_offset").alias("offset"),
            F.lit(None).cast("int").alias("follower_id"),
            "acks",
            "timeout_ms",
            "records_size_bytes",
            _micros("t_start").alias("t_start_us"),
            _micros("t_ack_observed").alias("t_ack_observed_us"),
            "response_queue_time_ms",
            "send_time_ms",
            "source_file_id",
            "line_number",
            F.unix_date("event_date").alias("event_day"),
        )
    )


def meta_rows(group_keys_df: DataFrame, epochs_df: DataFrame, partitions_df: DataFrame) -> DataFrame:
    """One row per group with what is constant in it: leader, assignment, min ISR, epoch bounds, start ISR."""
    meta = partitions_df.select("cluster", "topic", "partition", "replicas", "min_insync_replicas")
    epochs = epochs_df.select(
        "cluster", "topic", "partition", "leader_epoch", "leader_id", "epoch_start_us", "epoch_end_us", "start_isr"
    )
    return (
        group_keys_df.join(F.broadcast(epochs), ["cluster", "topic", "partition", "leader_epoch"], "inner")
        .join(F.broadcast(meta), ["cluster", "topic", "partition"], "inner")
        .select(
            *GROUP_KEY,
            "group_id",
            F.lit(KIND_META).cast("tinyint").alias("kind"),
            F.col("leader_id").alias("broker_id"),
            "replicas",
            "min_insync_replicas",
            "epoch_start_us",
            "epoch_end_us",
            F.col("start_isr").alias("isr"),
        )
    )


def fetch_event_rows(
    fetches_df: DataFrame, bucket_us: int, horizon_buckets: int, update_fraction: float = 0.0
) -> DataFrame:
    """Follower LEO events, copied into every bucket that needs them: one bucket later (lookback) and
    `horizon_buckets` earlier (produces still waiting).

    The leader learns `fetch_offset` while handling the FETCH, between `t_dequeue` and `t_local_done`
    (it reads the partitions listed before this one first): the event is placed `update_fraction` of
    the way through that interval. A listing that later incremental requests carried over (the
    partition was idle, so the follower did not re-send it) adds a second event with the same offset
    at `carried_until`: the leader still saw the follower fetching at that offset, which keeps it
    caught up in the ISR re-simulation.
    """
    dequeue, local_done = _micros("t_dequeue"), _micros("t_local_done")
    learned = dequeue + F.round((local_done - dequeue) * F.lit(update_fraction)).cast("bigint")
    times = F.when(
        F.col("carried_requests") > 0, F.array(learned, _micros("carried_until"))
    ).otherwise(F.array(learned))
    events = fetches_df.select(*GROUP_KEY[:-1], "follower_id", "fetch_offset", F.explode(times).alias("t_us"))
    own = bucket_of(F.col("t_us"), bucket_us)
    return events.select(
        *GROUP_KEY[:-1],
        F.explode(F.sequence(own - F.lit(horizon_buckets), own + F.lit(1))).alias("bucket"),
        F.lit(KIND_FETCH).cast("tinyint").alias("kind"),
        "t_us",
        F.col("fetch_offset").alias("offset"),
        "follower_id",
    )


def isr_rows(isr_changes_df: DataFrame, group_keys_df: DataFrame) -> DataFrame:
    """The epoch's committed ISR changes, copied into each of the epoch's groups (they are few)."""
    changes = isr_changes_df.select(
        "cluster", "topic", "partition", "leader_epoch", _micros("t_log").alias("t_us"), "isr"
    )
    return group_keys_df.join(changes, ["cluster", "topic", "partition", "leader_epoch"], "inner").select(
        *GROUP_KEY, "group_id", F.lit(KIND_ISR).cast("tinyint").alias("kind"), "t_us", "isr"
    )


def with_request_response(replayed_df: DataFrame) -> DataFrame:
    """`t_response_us`: the broker answers a produce request when all its partitions are done, so each
    policy's response time is the latest `t_ack_us` over the request's rows (same source line);
    `latency_ms` becomes the client-visible latency of that response."""
    request = Window.partitionBy("source_file_id", "line_number", "policy_code")
    t_response_us = F.max("t_ack_us").over(request)
    return replayed_df.withColumns(
        {
            "t_response_us": t_response_us,
            "latency_ms": F.col("latency_ms") + (t_response_us - F.col("t_ack_us")) / 1000.0,
        }
    )
