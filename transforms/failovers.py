"""Leader changes that cut acknowledged records: what the brokers' logs say was lost, next to what the
replay's follower timeline says the new leader held. Pure DataFrame -> DataFrame.

When a partition's leadership moves (a crash, a controlled shutdown, a preferred-leader election),
the new leader's log ends where it ends: its state-change.log line for the new epoch gives that offset
(`leader_epochs.epoch_start_offset`, the `LeaderEpochFileCache` start of the epoch), and every replica
that had more truncates to it when it follows the new leader (`Partition.makeFollower`, truncation by
leader epoch, KIP-101/KIP-279). So the records of the old epoch at or past that offset are gone, and
those the old leader had acknowledged (acks=1; acks=all only under unclean election) are acknowledged
records lost: a real loss, read from the logs alone.

The replay's loss flags rest on when each follower held each batch, which it learns from the
followers' FETCH offsets (`fetch_events`): a follower is counted as holding what it reported in its
last FETCH to the old leader. The follower may have appended more (the response to that FETCH) before
the leader died, and the new epoch's start offset says how much: `replayed_held_offset` against
`new_start_offset` is that difference, per failover.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

_PARTITION = ["cluster", "topic", "partition"]


def failover_truncations(leader_epochs: DataFrame, replay: DataFrame, fetches: DataFrame) -> DataFrame:
    """One row per leader change whose new leader started below the old leader's acknowledged records:
    (cluster, topic, partition, old_epoch, old_leader, new_epoch, new_leader, t_new_epoch,
    new_start_offset, replayed_held_offset, acked_batches_truncated, acked_all_batches_truncated,
    acked_batches_replayed_lost, acked_records_truncated).

    `replay`: produce_replay (one row per produce: its `acks=1` rows); `fetches`: follower_fetches.
    `acked_batches_truncated`: batches of recorded-acks=1 produces of the old epoch acknowledged and cut
    (based at or past `new_start_offset`); `acked_all_batches_truncated`: the same for acks=all produces
    the broker acknowledged (0 unless an unclean election); `acked_batches_replayed_lost`: the acks=1
    batches at or past `replayed_held_offset`, the new leader's last FETCH offset to the old leader in
    the old epoch (both null when it sent none: a cluster replayed from JMX scrapes, or a FETCH version
    without the leader epoch); `acked_records_truncated`: the cut batches' records where
    their counts are known. Counted in batches: after a truncation the new epoch reuses the offsets, so
    a (partition, base offset) names two batches and per-batch inputs keyed by it (record counts, send
    times) can belong to the other one.
    """
    changes = leader_epochs.where(
        F.col("previous_leader").isNotNull() & (F.col("previous_leader") != F.col("broker_id"))
    ).select(
        *_PARTITION,
        F.col("previous_leader_epoch").alias("old_epoch"),
        F.col("previous_leader").alias("old_leader"),
        F.col("leader_epoch").alias("new_epoch"),
        F.col("broker_id").alias("new_leader"),
        F.col("t_log").alias("t_new_epoch"),
        F.col("epoch_start_offset").alias("new_start_offset"),
    ).dropDuplicates([*_PARTITION, "old_epoch", "new_epoch"])
    # a row per leader change: the fetches and produces of the ended epochs are picked by joining it first
    ended = F.broadcast(changes.select(*_PARTITION, "old_epoch", "old_leader", "new_leader"))
    held = (
        fetches.select(
            *_PARTITION,
            F.col("broker_id").alias("old_leader"),
            F.col("follower_id").alias("new_leader"),
            F.col("current_leader_epoch").alias("old_epoch"),
            "fetch_offset",
        )
        .join(ended, [*_PARTITION, "old_leader", "new_leader", "old_epoch"], "left_semi")
        .groupBy(*_PARTITION, "old_leader", "new_leader", "old_epoch")
        .agg(F.max("fetch_offset").alias("replayed_held_offset"))
    )
    # the broker's own acks: a recorded acks=1 produce is acked once appended (its acks=1 row is acked);
    # a recorded acks=all produce, when its PRODUCE line has the broker's ack time
    broker_acked = F.when(F.col("recorded_acks") == 1, F.col("outcome") == "acked").otherwise(
        (F.col("recorded_acks") == -1) & F.col("t_ack_observed").isNotNull()
    )
    acked_at_epoch = (
        replay.where((F.col("policy") == "acks=1") & broker_acked)
        .select(
            *_PARTITION,
            F.col("leader_epoch").alias("old_epoch"),
            F.col("broker_id").alias("old_leader"),
            "recorded_acks",
            "base_offset",
            "records",
        )
        .join(ended.drop("new_leader"), [*_PARTITION, "old_epoch", "old_leader"], "left_semi")
    )
    joined = changes.join(held, [*_PARTITION, "old_leader", "new_leader", "old_epoch"], "left").join(
        acked_at_epoch, [*_PARTITION, "old_epoch", "old_leader"]
    )
    # a batch is cut whole (truncation is at a batch boundary): its base offset decides
    cut = F.col("base_offset") >= F.col("new_start_offset")
    acks1 = F.col("recorded_acks") == 1
    held_offset = F.col("replayed_held_offset")  # null: no FETCH from the new leader, the timeline cannot say
    return (
        joined.groupBy(*_PARTITION, "old_epoch", "old_leader", "new_epoch", "new_leader", "t_new_epoch",
                       "new_start_offset", "replayed_held_offset")
        .agg(
            F.count_if(cut & acks1).alias("acked_batches_truncated"),
            F.count_if(cut & ~acks1).alias("acked_all_batches_truncated"),
            F.when(held_offset.isNotNull(), F.count_if((F.col("base_offset") >= held_offset) & acks1)).alias(
                "acked_batches_replayed_lost"
            ),
            # records where the batch's count is known (silver batch_send_times)
            F.sum(F.when(cut & acks1, F.col("records"))).cast("bigint").alias("acked_records_truncated"),
        )
        .where(
            (F.col("acked_batches_truncated") > 0)
            | (F.col("acked_all_batches_truncated") > 0)
            | (F.col("acked_batches_replayed_lost") > 0)
        )
    )  # fmt: skip
