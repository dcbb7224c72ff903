"""transforms.replay_inputs.with_recorded_leos: the leaders' own "Recorded replica ... (LEO)" lines place the follower
LEOs instead of the FETCH lines' local times, over the seconds they cover (chispa)."""

from __future__ import annotations

import datetime as dt

from ackreplay.schemas.broker_logs import FOLLOWER_LEO_RECORDS
from ackreplay.transforms.replay_inputs import with_recorded_leos
from tests.helpers import assert_df_equality

T0 = dt.datetime(2026, 12, 7, 0, 53, 0)
T0_US = int(T0.replace(tzinfo=dt.UTC).timestamp() * 1_000_000)
EVENTS = "cluster string, broker_id int, topic string, partition int, follower_id int, offset bigint, t_us bigint"


def us(ms: float) -> int:
    return T0_US + round(ms * 1000)


def _records(spark, rows):
    """(leader, partition, follower, LEO, at ms) as follower_leo_records rows."""
    return spark.createDataFrame(
        [
            ("c", "t", p, leader, follower, leo, 0, at, "f", i, T0.date(), "r")
            for i, (leader, p, follower, leo, ms) in enumerate(rows)
            for at in [T0 + dt.timedelta(milliseconds=ms)]
        ],
        FOLLOWER_LEO_RECORDS,
    )


def test_the_leaders_lines_replace_fetch_events_in_the_seconds_they_cover(spark):
    # FETCH events of leader 1 in second 0 (covered by its lines) and second 2 (not covered: the logger was at INFO
    # then), and of leader 2 in second 0 (it logged none).
    events = spark.createDataFrame(
        [
            ("c", 1, "t", 0, 2, 100, us(10.5)),
            ("c", 1, "t", 0, 3, 100, us(999.9)),
            ("c", 1, "t", 0, 2, 140, us(2_400)),
            ("c", 2, "t", 1, 1, 50, us(300)),
        ],
        EVENTS,
    )
    records = _records(spark, [(1, 0, 2, 100, 10.731), (1, 0, 3, 100, 11.002), (1, 0, 2, 120, 1_020.25)])
    expected = spark.createDataFrame(
        [
            ("c", 1, "t", 0, 2, 140, us(2_400)),
            ("c", 2, "t", 1, 1, 50, us(300)),
            ("c", 1, "t", 0, 2, 100, us(10.731)),
            ("c", 1, "t", 0, 3, 100, us(11.002)),
            ("c", 1, "t", 0, 2, 120, us(1_020.25)),
        ],
        EVENTS,
    )
    actual = with_recorded_leos(events, records)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True, ignore_column_order=True)


def test_epochs_placed_already_are_kept(spark):
    events = spark.createDataFrame(
        [("c", 1, "t", 0, 5, 2, 100, us(3_500))], EVENTS.replace("int, follower", "int, leader_epoch int, follower")
    )
    records = _records(spark, [(1, 0, 2, 120, 1_020.25)]).selectExpr("*", "5 AS leader_epoch")
    actual = with_recorded_leos(events, records).orderBy("t_us")
    assert [tuple(r) for r in actual.select("leader_epoch", "offset", "t_us").collect()] == [
        (5, 120, us(1_020.25)),
        (5, 100, us(3_500)),
    ]
