"""transforms.failovers: leader changes that cut acknowledged records, from the logs and from the replay's
follower timeline."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import functions as F

from ackreplay.transforms.failovers import failover_truncations
from tests.helpers import assert_df_equality

T0 = dt.datetime(2026, 11, 26, 1, 33, 0)


def _epochs(spark, rows):
    return spark.createDataFrame(
        [("c", "t", p, new, e, start, old, old_e, T0) for p, new, e, start, old, old_e in rows],
        "cluster string, topic string, partition int, broker_id int, leader_epoch int, epoch_start_offset bigint, "
        "previous_leader int, previous_leader_epoch int, t_log timestamp",
    )


def _at(ms: float) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


def _replay(spark, rows):
    """(partition, leader_epoch, broker_id, base_offset, records, recorded_acks, acked, appended at ms after T0)
    as produce_replay rows."""
    out = []
    for p, e, b, base, n, acks, acked, ms in rows:
        observed = _at(ms + 5) if acks == -1 and acked else None
        out.append(("c", "t", p, e, b, base, n, acks, "acks=1", "acked" if acked else "not_leader", _at(ms), observed))
        out.append(("c", "t", p, e, b, base, n, acks, "acks=all", "acked", _at(ms), None))  # other policies: not read
    return spark.createDataFrame(
        out,
        "cluster string, topic string, partition int, leader_epoch int, broker_id int, base_offset bigint, records int, "
        "recorded_acks int, policy string, outcome string, t_local_done timestamp, t_ack_observed timestamp",
    )


def _fetches(spark, rows):
    """(partition, leader, follower, epoch, fetch_offset, dequeued at ms, remote ms, carried requests, carried
    until ms) as follower_fetches rows (local time 0.1 ms, maxWaitMs 500)."""
    return spark.createDataFrame(
        [
            ("c", "t", p, leader, follower, epoch, offset, _at(ms), _at(ms + 0.1), remote, carried, _at(until), 500)
            for p, leader, follower, epoch, offset, ms, remote, carried, until in rows
        ],
        "cluster string, topic string, partition int, broker_id int, follower_id int, current_leader_epoch int, "
        "fetch_offset bigint, t_dequeue timestamp, t_local_done timestamp, remote_time_ms double, "
        "carried_requests int, carried_until timestamp, max_wait_ms int",
    )


_COLUMNS = (
    "cluster string, topic string, partition int, old_epoch int, old_leader int, new_epoch int, new_leader int, "
    "t_new_epoch timestamp, new_start_offset bigint, replayed_held_offset bigint, replayed_sent_until timestamp, "
    "acked_batches_truncated bigint, acked_all_batches_truncated bigint, acked_batches_replayed_lost_min bigint, "
    "acked_batches_replayed_lost_max bigint, acked_records_truncated bigint"
)


def test_the_cut_batches_by_the_new_epochs_start_and_the_replays_range_from_the_new_leaders_fetches(spark):
    """The log says 12..17 were cut (3 acks=1 batches). The new leader last reported 11 (at most 4 lost: 11
    too); its last request (listed, answered after 2 ms in purgatory, at 52.1 ms) carried what was
    appended by then: 11 and 12, so at least 1 lost (17)."""
    epochs = _epochs(spark, [
        (0, 1, 0, 0, None, -1),  # the first epoch: no previous leader
        (0, 2, 1, 12, 1, 0),  # broker 1 -> 2, the new log starts at 12
        (1, 1, 0, 0, None, -1),
        (1, 2, 1, 20, 1, 0),  # broker 1 -> 2 at the old leader's end: nothing cut
    ])  # fmt: skip
    replay = _replay(spark, [
        (0, 0, 1, 10, 1, 1, True, 10),  # below the new start: kept
        (0, 0, 1, 11, 1, 1, True, 45),  # acks=1, reported as not held yet, but carried by the last response
        (0, 0, 1, 12, 3, 1, True, 52),  # cut (acks=1, acked), carried by the last response
        (0, 0, 1, 15, 2, -1, False, 60),  # acks=all not acked by the broker: cut, but no ack was lost
        (0, 0, 1, 17, 1, 1, True, 70),  # cut, appended after the last response
        (0, 1, 2, 12, 1, 1, True, 900),  # the new epoch reuses offset 12: not the old epoch's
        (1, 0, 1, 19, 1, 1, True, 40),
    ])  # fmt: skip
    fetches = _fetches(spark, [
        (0, 1, 2, 0, 9, 20, 0.0, 0, 20), (0, 1, 2, 0, 11, 50, 2.0, 0, 50),  # the new leader last reported 11
        (0, 1, 3, 0, 12, 51, 0.0, 0, 51),  # another follower
        (1, 1, 2, 0, 20, 30, 0.0, 0, 30),
        (0, 1, 2, 0, 17, 2000, 0.0, 0, 2000),  # after the new epoch (T0): not the old epoch's session
    ])  # fmt: skip
    epochs = epochs.withColumn("t_log", F.lit(_at(1000)))
    expected = spark.createDataFrame([("c", "t", 0, 0, 1, 1, 2, _at(1000), 12, 11, _at(52.1), 2, 0, 1, 3, 4)], _COLUMNS)
    assert_df_equality(failover_truncations(epochs, replay, fetches), expected, ignore_nullable=True)


def test_a_last_request_that_listed_no_partition_is_answered_at_the_first_append_of_the_session(spark):
    """The new leader's last request (dequeued at 100 ms) omitted partition 0 (carried in the fetch session
    from the row of 80 ms): it waited in purgatory until the old leader's next append on any partition the
    pair fetched, partition 1's at 104 ms, so it carried partition 0's batch of 103 ms, not that of 110 ms."""
    epochs = _epochs(spark, [(0, 2, 1, 5, 1, 0)]).withColumn("t_log", F.lit(_at(1000)))
    replay = _replay(spark, [
        (0, 0, 1, 4, 1, 1, True, 90),
        (0, 0, 1, 5, 1, 1, True, 103),  # carried by the last response
        (0, 0, 1, 6, 1, 1, True, 110),
        (0, 0, 1, 7, 1, 1, True, 120),
        (1, 0, 1, 50, 1, 1, True, 102.5),  # the first append after the last request: before 103 (partition 0)
    ])  # fmt: skip
    fetches = _fetches(spark, [(0, 1, 2, 0, 4, 80, 1.0, 2, 100), (1, 1, 2, 0, 50, 60, 0.0, 3, 100)])
    got = failover_truncations(epochs, replay, fetches).collect()
    assert [(r["replayed_sent_until"], r["acked_batches_truncated"], r["acked_batches_replayed_lost_min"],
             r["acked_batches_replayed_lost_max"]) for r in got] == [(_at(102.5), 3, 3, 4)]  # fmt: skip


def test_without_a_fetch_from_the_new_leader_in_the_old_epoch_the_timeline_cannot_say(spark):
    epochs = _epochs(spark, [(0, 3, 4, 5, 1, 3)])
    replay = _replay(spark, [(0, 3, 1, 5, 2, 1, True, -20), (0, 3, 1, 3, 1, 1, True, -30)])
    got = failover_truncations(epochs, replay, _fetches(spark, [(0, 1, 2, 3, 4, -50, 0.0, 0, -50)])).collect()
    assert [
        (r["replayed_held_offset"], r["replayed_sent_until"], r["acked_batches_truncated"],
         r["acked_batches_replayed_lost_min"], r["acked_batches_replayed_lost_max"])
        for r in got
    ] == [(None, None, 1, None, None)]  # fmt: skip


def test_the_replay_summary_prints_each_failover_with_the_replays_range():
    from ackreplay.replay.stage import ReplayReport

    change = {
        "cluster": "c", "topic": "t", "partition": 0, "old_epoch": 0, "new_epoch": 1, "old_leader": 1, "new_leader": 2,
        "t_new_epoch": _at(1000), "new_start_offset": 11_195, "replayed_held_offset": 11_194,
        "replayed_sent_until": _at(52.1), "acked_batches_truncated": 24, "acked_all_batches_truncated": 0,
        "acked_batches_replayed_lost_min": 24, "acked_batches_replayed_lost_max": 25, "acked_records_truncated": 30,
    }  # fmt: skip
    unknown = {**change, "replayed_held_offset": None, "replayed_sent_until": None,
               "acked_batches_replayed_lost_min": None, "acked_batches_replayed_lost_max": None}  # fmt: skip
    lines = ReplayReport("r", failovers=[change, unknown]).summary_lines()
    assert lines[-2:] == [
        "    c t-0 epoch 0->1 (broker 1->2, 01:33:01): 24 acks=1 batches acknowledged and lost (the log restarts at "
        "offset 11,195); the replay's timeline: 24 to 25 (reported offset 11,194, last response at 01:33:00.052100)",
        "    c t-0 epoch 0->1 (broker 1->2, 01:33:01): 24 acks=1 batches acknowledged and lost (the log restarts at "
        "offset 11,195); the replay's timeline: unknown: no FETCH from it in that epoch",
    ]


def test_leader_changes_are_the_epochs_another_broker_took_over(spark):
    """The replay looks for cut records only where `leader_changes` has a row (none: the query is skipped)."""
    from ackreplay.transforms.failovers import leader_changes

    epochs = _epochs(
        spark,
        [
            (0, 1, 0, 0, None, None),  # the first epoch seen: no previous leader
            (0, 2, 1, 40, 1, 0),  # broker 2 took over from broker 1: a change
            (0, 2, 1, 40, 1, 0),  # the same line in both logs: one change
            (1, 3, 5, 90, 3, 4),  # a new epoch on the same leader: not a change
        ],
    )
    expected = spark.createDataFrame(
        [("c", "t", 0, 0, 1, 1, 2, T0, 40)],
        "cluster string, topic string, partition int, old_epoch int, old_leader int, new_epoch int, new_leader int, "
        "t_new_epoch timestamp, new_start_offset bigint",
    )
    assert_df_equality(leader_changes(epochs), expected, ignore_nullable=True)
    assert leader_changes(epochs.where(F.col("partition") == 1)).isEmpty()
