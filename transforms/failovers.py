"""Leader changes that cut acknowledged records: what the brokers' logs say was lost, next to what the
replay's follower timeline says the new leader held. Pure DataFrame -> DataFrame.

When a partition's leadership moves (a crash, a controlled shutdown, a preferred-leader election),
the new leader's log ends where it ends: its state-change.log line for the new epoch gives that offset
(`leader_epochs.epoch_start_offset`, the `LeaderEpochFileCache` start of the epoch), and every replica
that had more truncates to it when it follows the new leader (`Partition.makeFollower`, truncation by
leader epoch, KIP-101/KIP-279). So the records of the old epoch at or past that offset are gone, and
those the old leader had acknowledged (acks=1; acks=all only under unclean election) are acknowledged
records lost: a real loss, read from the logs alone.

The replay's follower timeline bounds that loss from both sides:
- at most (`acked_batches_replayed_lost_max`): the new leader holds what it last reported, the
  `fetchOffset` of its last FETCH to the old leader in the old epoch (`replayed_held_offset`; the
  leader learns a follower's log end only from its next FETCH, `Partition.updateFollowerFetchState`);
- at least (`acked_batches_replayed_lost_min`): the new leader also appended the response to its last
  FETCH, which carried what the old leader had appended when it answered (`replayed_sent_until`).
  Followers fetch in an incremental fetch session (KIP-227): a request that omits a partition still
  reads it (`KafkaApis.handleFetchRequest` iterates `fetchContext.foreachPartition`), and a request
  waiting in purgatory is answered as soon as any partition of the session has new data
  (`DelayedFetch.tryComplete`: accumulated bytes >= `minBytes`, 1 for followers). So the last response was built at
  its own `t_local_done + remoteTime` when the last request listed partitions, else at the old leader's
  first append after that request on any partition the pair fetched (at most `maxWaitMs` later).
The truth (the new epoch's start offset) lies between the two.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackreplay.schemas.vocabulary import ACKS_1, Outcome

_PARTITION = ["cluster", "topic", "partition"]


def failover_truncations(leader_epochs: DataFrame, replay: DataFrame, fetches: DataFrame) -> DataFrame:
    """One row per leader change whose new leader started below the old leader's acknowledged records:
    (cluster, topic, partition, old_epoch, old_leader, new_epoch, new_leader, t_new_epoch,
    new_start_offset, replayed_held_offset, replayed_sent_until, acked_batches_truncated,
    acked_all_batches_truncated, acked_batches_replayed_lost_min, acked_batches_replayed_lost_max,
    acked_records_truncated).

    `replay`: produce_replay (one row per produce: its `acks=1` rows); `fetches`: follower_fetches.
    `acked_batches_truncated`: batches of recorded-acks=1 produces of the old epoch acknowledged and cut
    (based at or past `new_start_offset`); `acked_all_batches_truncated`: the same for acks=all produces
    the broker acknowledged (0 unless an unclean election); `acked_batches_replayed_lost_max`: the acks=1
    batches at or past `replayed_held_offset`, the new leader's last FETCH offset to the old leader in
    the old epoch; `acked_batches_replayed_lost_min`: those the old leader appended after
    `replayed_sent_until`, when it built its last FETCH response to the new leader (all three null when
    the new leader sent no FETCH in that epoch: a cluster replayed from JMX scrapes, or a FETCH version
    without the leader epoch); `acked_records_truncated`: the cut batches' records where their counts
    are known. Counted in batches: after a truncation the new epoch reuses the offsets, so a
    (partition, base offset) names two batches and per-batch inputs keyed by it (record counts, send
    times) can belong to the other one.
    """
    changes = leader_changes(leader_epochs)
    # a row per leader change: the fetches and produces of the ended epochs are picked by joining it first
    ended = F.broadcast(changes.select(*_PARTITION, "old_epoch", "old_leader", "new_leader", "t_new_epoch"))
    held = (
        fetches.select(
            *_PARTITION,
            F.col("broker_id").alias("old_leader"),
            F.col("follower_id").alias("new_leader"),
            F.col("current_leader_epoch").alias("old_epoch"),
            "fetch_offset",
            "t_dequeue",
        )
        .join(ended, [*_PARTITION, "old_leader", "new_leader", "old_epoch"])
        .where(F.col("t_dequeue") <= F.col("t_new_epoch"))  # what it reported before the new epoch began
        .groupBy(*_PARTITION, "old_leader", "new_leader", "old_epoch")
        .agg(F.max("fetch_offset").alias("replayed_held_offset"))
    )
    appends = replay.where(F.col("policy") == ACKS_1.id).select(
        "cluster", "topic", "partition", F.col("broker_id").alias("old_leader"), "t_local_done"
    )
    sent = _last_response_built(changes, fetches, appends)
    # the broker's own acks: a recorded acks=1 produce is acked once appended (its acks=1 row is acked);
    # a recorded acks=all produce, when its PRODUCE line has the broker's ack time
    broker_acked = F.when(F.col("recorded_acks") == 1, F.col("outcome") == Outcome.ACKED.label).otherwise(
        (F.col("recorded_acks") == -1) & F.col("t_ack_observed").isNotNull()
    )
    acked_at_epoch = (
        replay.where((F.col("policy") == ACKS_1.id) & broker_acked)
        .select(
            *_PARTITION,
            F.col("leader_epoch").alias("old_epoch"),
            F.col("broker_id").alias("old_leader"),
            "recorded_acks",
            "base_offset",
            "records",
            F.col("t_local_done").alias("t_appended"),
        )
        .join(ended.drop("new_leader", "t_new_epoch"), [*_PARTITION, "old_epoch", "old_leader"], "left_semi")
    )
    joined = (
        changes.join(held, [*_PARTITION, "old_leader", "new_leader", "old_epoch"], "left")
        .join(sent, ["cluster", "old_leader", "new_leader", "t_new_epoch"], "left")
        .join(acked_at_epoch, [*_PARTITION, "old_epoch", "old_leader"])
    )
    # a batch is cut whole (truncation is at a batch boundary): its base offset decides
    cut = F.col("base_offset") >= F.col("new_start_offset")
    acks1 = F.col("recorded_acks") == 1
    held_offset = F.col("replayed_held_offset")  # null: no FETCH from the new leader, the timeline cannot say
    known = held_offset.isNotNull()
    return (
        joined.groupBy(*_PARTITION, "old_epoch", "old_leader", "new_epoch", "new_leader", "t_new_epoch",
                       "new_start_offset", "replayed_held_offset", "replayed_sent_until")
        .agg(
            F.count_if(cut & acks1).alias("acked_batches_truncated"),
            F.count_if(cut & ~acks1).alias("acked_all_batches_truncated"),
            F.when(known, F.count_if((F.col("t_appended") > F.col("replayed_sent_until")) & acks1)).alias(
                "acked_batches_replayed_lost_min"
            ),
            F.when(known, F.count_if((F.col("base_offset") >= held_offset) & acks1)).alias(
                "acked_batches_replayed_lost_max"
            ),
            # records where the batch's count is known (silver batch_send_times)
            F.sum(F.when(cut & acks1, F.col("records"))).cast("bigint").alias("acked_records_truncated"),
        )
        .where(
            (F.col("acked_batches_truncated") > 0)
            | (F.col("acked_all_batches_truncated") > 0)
            | (F.col("acked_batches_replayed_lost_max") > 0)
        )
        .select(
            *_PARTITION, "old_epoch", "old_leader", "new_epoch", "new_leader", "t_new_epoch", "new_start_offset",
            "replayed_held_offset", F.when(known, F.col("replayed_sent_until")).alias("replayed_sent_until"),
            "acked_batches_truncated", "acked_all_batches_truncated", "acked_batches_replayed_lost_min",
            "acked_batches_replayed_lost_max", "acked_records_truncated",
        )
    )  # fmt: skip


def leader_changes(leader_epochs: DataFrame) -> DataFrame:
    """One row per leader change of `leader_epochs`: a new epoch led by another broker than the one before
    (cluster, topic, partition, old_epoch, old_leader, new_epoch, new_leader, t_new_epoch, new_start_offset)."""
    return (
        leader_epochs.where(F.col("previous_leader").isNotNull() & (F.col("previous_leader") != F.col("broker_id")))
        .select(
            *_PARTITION,
            F.col("previous_leader_epoch").alias("old_epoch"),
            F.col("previous_leader").alias("old_leader"),
            F.col("leader_epoch").alias("new_epoch"),
            F.col("broker_id").alias("new_leader"),
            F.col("t_log").alias("t_new_epoch"),
            F.col("epoch_start_offset").alias("new_start_offset"),
        )
        .dropDuplicates([*_PARTITION, "old_epoch", "new_epoch"])
    )


def _micros_later(ts: Column, ms: Column) -> Column:
    return F.timestamp_micros(F.unix_micros(ts) + F.round(ms * 1000).cast("bigint"))


def _last_response_built(changes: DataFrame, fetches: DataFrame, appends: DataFrame) -> DataFrame:
    """(cluster, old_leader, new_leader, t_new_epoch, replayed_sent_until): when the old leader built its
    last FETCH response to the new leader before the new epoch, the response that carried what the old
    leader had appended by then.

    The pair's last request is the latest `carried_until` of its fetch session (a request that omitted
    a partition still read it). When that request listed partitions, its line gives when it was
    answered (`t_local_done` + remote time: the purgatory wait); else it was answered at the old
    leader's first append after it on a partition the pair fetched, or when `maxWaitMs` ran out.
    """
    failovers = F.broadcast(changes.select("cluster", "old_leader", "new_leader", "t_new_epoch").distinct())
    pair = ["cluster", "old_leader", "new_leader", "t_new_epoch"]
    rows = (
        fetches.select(
            "cluster",
            F.col("broker_id").alias("old_leader"),
            F.col("follower_id").alias("new_leader"),
            "topic",
            "partition",
            "t_dequeue",
            "carried_until",
            "carried_requests",
            _micros_later(F.col("t_local_done"), F.col("remote_time_ms")).alias("t_answered"),
            "max_wait_ms",
        )
        .join(failovers, ["cluster", "old_leader", "new_leader"])
        .where(F.col("t_dequeue") <= F.col("t_new_epoch"))
    )
    last = rows.groupBy(*pair).agg(
        F.max("carried_until").alias("t_last_request"), F.max("max_wait_ms").alias("max_wait_ms")
    )
    listed = (
        rows.join(last.select(*pair, "t_last_request"), pair)
        .where((F.col("carried_requests") == 0) & (F.col("t_dequeue") == F.col("t_last_request")))
        .groupBy(*pair)
        .agg(F.max("t_answered").alias("t_listed_answered"))
    )
    first_append = (
        appends.join(
            rows.select(*pair, "topic", "partition").distinct(), ["cluster", "old_leader", "topic", "partition"]
        )
        .join(last.select(*pair, "t_last_request"), pair)
        .where(F.col("t_local_done") > F.col("t_last_request"))
        .groupBy(*pair)
        .agg(F.min("t_local_done").alias("t_first_append"))
    )
    timeout = _micros_later(F.col("t_last_request"), F.coalesce(F.col("max_wait_ms"), F.lit(0)).cast("double"))
    return (
        last.join(listed, pair, "left")
        .join(first_append, pair, "left")
        .select(
            *pair,
            F.coalesce(
                F.col("t_listed_answered"), F.least(F.coalesce(F.col("t_first_append"), timeout), timeout)
            ).alias("replayed_sent_until"),
        )
    )
