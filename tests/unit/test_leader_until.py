"""transforms.replay_inputs.build_epochs: until when each epoch's leader led it, on its own clock."""

from __future__ import annotations

import datetime as dt

from ackreplay.schemas.broker_logs import FOLLOWER_STARTS, LEADER_EPOCHS
from ackreplay.schemas.vocabulary import NEVER
from ackreplay.transforms.replay_inputs import build_epochs

T0 = dt.datetime(2026, 11, 26, 6, 51, 8)
T0_US = int(T0.replace(tzinfo=dt.UTC).timestamp() * 1_000_000)


def _at(ms: float) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


def us(ms: float) -> int:
    return T0_US + int(ms * 1000)


def _leader_epochs(spark, rows):
    """(partition, leader, epoch, start offset, at ms) as leader_epochs rows."""
    return spark.createDataFrame(
        [
            ("c", "t", None, p, leader, epoch, start, None, start, [leader], None, -1, _at(ms), "f", i, T0.date(), "r")
            for i, (p, leader, epoch, start, ms) in enumerate(rows)
        ],
        LEADER_EPOCHS,
    )


def _follower_starts(spark, rows):
    """(partition, broker, epoch it follows, its log end, at ms) as follower_starts rows."""
    return spark.createDataFrame(
        [
            ("c", "t", p, b, epoch, leo, None, leo, None, _at(ms), "f", i, T0.date(), "r")
            for i, (p, b, epoch, leo, ms) in enumerate(rows)
        ],
        FOLLOWER_STARTS,
    )


def _until(spark, epochs, follower_starts):
    fetched = spark.createDataFrame(
        [], "cluster string, topic string, partition int, leader_epoch int, leader_id int, epoch_start_us bigint"
    )
    out = build_epochs(epochs, fetched, follower_starts).orderBy("partition", "leader_epoch")
    return [
        (r["partition"], r["leader_epoch"], r["leader_id"], r["epoch_end_us"], r["leader_until_us"])
        for r in out.select("partition", "leader_epoch", "leader_id", "epoch_end_us", "leader_until_us").collect()
    ]


def test_a_leader_leads_until_its_own_follower_line_or_its_own_next_epoch(spark):
    """Partition 0: broker 2 leads epoch 0, broker 3 logs epoch 1 at 0 ms, broker 2 its follower line at 28 ms
    (a controlled shutdown: later than the new leader's line); broker 3 logs its follower line at 9 s
    (epoch 2 began on broker 2 at 8 s: earlier, a crash restart), broker 2's epoch 2 runs to the end.
    Partition 1: broker 1 leads epochs 0 and 1 (an epoch bump, no follower line): epoch 0 ends at its own
    epoch 1. Partition 2: no follower line at all: the next epoch's start. A follower line of another
    partition or from before the epoch's start does not count."""
    epochs = _leader_epochs(
        spark,
        [(0, 2, 0, 0, -60_000), (0, 3, 1, 14453, 0), (0, 2, 2, 15940, 8_000),
         (1, 1, 0, 0, -60_000), (1, 1, 1, 500, 100),
         (2, 1, 0, 0, -60_000), (2, 3, 1, 700, 200)],
    )  # fmt: skip
    follower = _follower_starts(
        spark, [(0, 2, 1, 14457, 28), (0, 3, 2, 15990, 9_000), (0, 2, 0, 0, -70_000), (1, 2, 1, 500, 150)]
    )
    assert _until(spark, epochs, follower) == [
        (0, 0, 2, us(0), us(28)),
        (0, 1, 3, us(8_000), us(9_000)),
        (0, 2, 2, NEVER, NEVER),
        (1, 0, 1, us(100), us(100)),
        (1, 1, 1, NEVER, NEVER),
        (2, 0, 1, us(200), us(200)),
        (2, 1, 3, NEVER, NEVER),
    ]
    # Without the table (an older lakehouse): the next epoch's start, as before.
    assert [(row[3], row[4]) for row in _until(spark, epochs, None)] == [
        (us(0), us(0)), (us(8_000), us(8_000)), (NEVER,) * 2, (us(100), us(100)), (NEVER,) * 2,
        (us(200), us(200)), (NEVER,) * 2,
    ]  # fmt: skip


def test_a_leader_that_lost_its_partition_without_handing_over_leads_until_its_last_request_line(spark):
    """Partition 0: broker 1 crashes after its last request-log line at 5 s; the controller fences it and
    broker 2 leads epoch 1 from 18 s; broker 1's lines after its restart (20 s) belong to no epoch of its
    own. Partition 1: broker 1 leads epochs 0 and 1 (an epoch bump, no follower line): it kept running, so
    epoch 0 ends at epoch 1. Partition 2: broker 3 hands over with its follower line at 30 ms: that line
    decides, not its request lines."""
    epochs = _leader_epochs(
        spark,
        [(0, 1, 0, 0, -60_000), (0, 2, 1, 900, 18_000),
         (1, 1, 0, 0, -60_000), (1, 1, 1, 500, 10_000),
         (2, 3, 0, 0, -60_000), (2, 1, 1, 700, 0)],
    )  # fmt: skip
    follower = _follower_starts(spark, [(0, 1, 1, 880, 20_500), (2, 3, 1, 700, 30)])
    lines = spark.createDataFrame(
        [("c", 1, _at(ms)) for ms in (-1_000, 4_000, 5_000, 20_100)] + [("c", 3, _at(ms)) for ms in (10, 25, 40)],
        "cluster string, broker_id int, t_local_done timestamp",
    )
    fetched = spark.createDataFrame(
        [], "cluster string, topic string, partition int, leader_epoch int, leader_id int, epoch_start_us bigint"
    )
    out = build_epochs(epochs, fetched, follower, lines).orderBy("partition", "leader_epoch")
    assert [(r["partition"], r["leader_epoch"], r["epoch_end_us"], r["leader_until_us"]) for r in out.collect()] == [
        (0, 0, us(18_000), us(5_000) + 1),
        (0, 1, NEVER, NEVER),
        (1, 0, us(10_000), us(10_000)),
        (1, 1, NEVER, NEVER),
        (2, 0, us(0), us(30)),
        (2, 1, NEVER, NEVER),
    ]


def test_a_broker_silent_for_longer_than_a_running_leader_ever_is_did_not_run(spark):
    """Broker 1 logs every 400 ms, then nothing from 2.0 s to 8.5 s (a stopped JVM), then goes on; a gap of
    exactly the threshold (1 s, from 10.0 s to 11.0 s) is not a silence, one of 1.0001 s is. Broker 2 logs
    twice, 30 s apart; broker 1 of another cluster is a broker of its own. The spans run from the last line
    before to the first after, to the microsecond, across the quarter-second bins the lines are reduced to."""
    from ackreplay.transforms.replay_inputs import broker_silences
    from tests.helpers import assert_df_equality

    times = [400 * i for i in range(6)] + [8_500.25, 9_000, 10_000, 11_000, 12_000.1]
    rows = [("c", 1, _at(ms)) for ms in times] + [("c", 2, _at(0)), ("c", 2, _at(30_000)), ("d", 1, _at(40_000))]
    lines = spark.createDataFrame(rows, "cluster string, broker_id int, t_local_done timestamp")
    expected = spark.createDataFrame(
        [("c", 1, us(2_000), us(8_500.25)), ("c", 1, us(11_000), us(12_000.1)), ("c", 2, us(0), us(30_000))],
        "cluster string, broker_id int, silent_from_us bigint, resumed_us bigint",
    )
    assert_df_equality(broker_silences(lines), expected, ignore_row_order=True, ignore_nullable=True)


def test_every_request_log_line_shows_the_broker_ran_not_only_produces_and_follower_fetches(spark):
    """pair-4.3.1-acks-all, broker 1 while follower 2 stalled: its acks=all producer was held (no PRODUCE
    completed for 3.3 s) and follower 3 was caught up, so its FETCHes were incremental ones listing no
    partition: lines in bronze only (`unused`). Taking those lines, the leader ran throughout; taking
    produce and follower-fetch rows alone made it look paused, and moved its isr-expiration check 98 ms
    late (README "The replay checks itself"). A quarantined line without a time counts for nothing."""
    from ackreplay.replay.stage import leader_silences, logged_lines

    bronze = [("c", 1, _at(400 * i), "parsed") for i in range(3)]  # produces and fetches until 0.8 s
    bronze += [("c", 1, _at(800 + 500 * i), "unused") for i in range(1, 9)]  # empty incremental FETCHes to 4.8 s
    bronze += [("c", 1, _at(5_000), "parsed"), ("c", 1, None, "quarantined")]
    lines = spark.createDataFrame(bronze, "cluster string, broker_id int, t_log timestamp, status string")
    assert leader_silences(logged_lines(lines), {}) == {}
    parsed_only = logged_lines(lines.where("status = 'parsed'"))
    silences = leader_silences(parsed_only, {})
    assert {k: v.tolist() for k, v in silences.items()} == {("c", 1): [[us(800), us(5_000) - 1]]}
