"""transforms.failovers: leader changes that cut acknowledged records, from the logs and from the replay's
follower timeline."""

from __future__ import annotations

import datetime as dt

from chispa import assert_df_equality

from transforms.failovers import failover_truncations

T0 = dt.datetime(2026, 11, 26, 1, 33, 0)


def _epochs(spark, rows):
    return spark.createDataFrame(
        [("c", "t", p, new, e, start, old, old_e, T0) for p, new, e, start, old, old_e in rows],
        "cluster string, topic string, partition int, broker_id int, leader_epoch int, epoch_start_offset bigint, "
        "previous_leader int, previous_leader_epoch int, t_log timestamp",
    )


def _replay(spark, rows):
    """(partition, leader_epoch, broker_id, base_offset, records, recorded_acks, acked) as produce_replay rows."""
    out = []
    for p, e, b, base, n, acks, acked in rows:
        out.append(("c", "t", p, e, b, base, n, acks, "acks=1", "acked" if acked else "not_leader", T0 if acks == -1 and acked else None))
        out.append(("c", "t", p, e, b, base, n, acks, "acks=all", "acked", None))  # other policies are not read
    return spark.createDataFrame(
        out,
        "cluster string, topic string, partition int, leader_epoch int, broker_id int, base_offset bigint, records int, "
        "recorded_acks int, policy string, outcome string, t_ack_observed timestamp",
    )


def _fetches(spark, rows):
    return spark.createDataFrame(
        [("c", "t", p, leader, follower, epoch, offset) for p, leader, follower, epoch, offset in rows],
        "cluster string, topic string, partition int, broker_id int, follower_id int, current_leader_epoch int, "
        "fetch_offset bigint",
    )


def test_the_cut_batches_by_the_new_epochs_start_and_by_what_the_new_leader_last_reported(spark):
    epochs = _epochs(spark, [
        (0, 1, 0, 0, None, -1),  # the first epoch: no previous leader
        (0, 2, 1, 12, 1, 0),  # broker 1 -> 2, the new log starts at 12
        (1, 1, 0, 0, None, -1),
        (1, 2, 1, 20, 1, 0),  # broker 1 -> 2 at the old leader's end: nothing cut
    ])  # fmt: skip
    replay = _replay(spark, [
        (0, 0, 1, 10, 1, 1, True),  # below the new start: kept
        (0, 0, 1, 11, 1, -1, True),  # acks=all, kept
        (0, 0, 1, 12, 3, 1, True),  # cut (acks=1, acked)
        (0, 0, 1, 15, 2, -1, False),  # acks=all not acked by the broker: cut, but no ack was lost
        (0, 0, 1, 17, 1, 1, True),  # cut
        (0, 1, 2, 12, 1, 1, True),  # the new epoch reuses offset 12: not the old epoch's
        (1, 0, 1, 19, 1, 1, True),
    ])  # fmt: skip
    fetches = _fetches(spark, [
        (0, 1, 2, 0, 9), (0, 1, 2, 0, 11),  # the new leader last reported 11 in the old epoch
        (0, 1, 3, 0, 12),
        (1, 1, 2, 0, 20),
    ])  # fmt: skip
    expected = spark.createDataFrame(
        [("c", "t", 0, 0, 1, 1, 2, T0, 12, 11, 2, 0, 2, 4)],
        "cluster string, topic string, partition int, old_epoch int, old_leader int, new_epoch int, new_leader int, "
        "t_new_epoch timestamp, new_start_offset bigint, replayed_held_offset bigint, acked_batches_truncated bigint, "
        "acked_all_batches_truncated bigint, acked_batches_replayed_lost bigint, acked_records_truncated bigint",
    )
    assert_df_equality(failover_truncations(epochs, replay, fetches), expected, ignore_nullable=True)


def test_without_a_fetch_from_the_new_leader_in_the_old_epoch_the_timeline_cannot_say(spark):
    epochs = _epochs(spark, [(0, 3, 4, 5, 1, 3)])
    replay = _replay(spark, [(0, 3, 1, 5, 2, 1, True), (0, 3, 1, 3, 1, 1, True)])
    got = failover_truncations(epochs, replay, _fetches(spark, [(0, 1, 2, 3, 4)])).collect()
    assert [(r["replayed_held_offset"], r["acked_batches_truncated"], r["acked_batches_replayed_lost"]) for r in got] == [
        (None, 1, None)
    ]
