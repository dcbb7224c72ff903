"""Follower FETCH lines -> follower_fetches, including incremental fetch-session carry-over (chispa)."""

from datetime import datetime

from chispa import assert_df_equality

from ackreplay.kafka_lines import FetchPartition, FetchTopic, Timing, fetch_body, request_log_line
from tests.helpers import TOPIC_ID, TOPIC_IDS, lines_frame
from transforms.follower_fetches import build_follower_fetches
from transforms.request_log import with_event_time, with_line_status, with_log_fields, with_parsed_json

T0 = datetime(2026, 11, 20, 13, 0, 0)


def _fetch(version, replica, partitions, session_id, epoch, response_session_id=None, forgotten=None, error=0):
    topic = FetchTopic("orders", TOPIC_ID, [FetchPartition(p, o, high_watermark=o) for p, o in partitions])
    forgotten_topics = [FetchTopic("orders", TOPIC_ID, [FetchPartition(p, 0) for p in forgotten])] if forgotten else None
    body = fetch_body(
        version, epoch, replica, [topic] if partitions else [], Timing(), session_id=session_id,
        session_epoch=epoch, response_session_id=response_session_id, forgotten=forgotten_topics, error_code=error,
    )
    return request_log_line(T0, body)


def test_partitions_absent_from_incremental_requests_keep_their_offset(spark):
    lines = [
        _fetch(17, 2, [(0, 10), (1, 20)], 0, 0, response_session_id=77),  # 1 new session 77
        _fetch(17, 2, [(0, 15)], 77, 1),  # 2 p1 unchanged
        _fetch(17, 2, [], 77, 2, forgotten=[1]),  # 3 p1 leaves the session
        _fetch(17, 2, [(1, 25)], 77, 3),  # 4 p1 back
        _fetch(17, 2, [(0, 30)], 77, 0, response_session_id=88),  # 5 new session 88 replaces 77
        _fetch(17, 2, [], 88, 1),  # 6
        _fetch(11, 3, [(0, 5)], 0, -1),  # 7 sessionless (Fetch v11), follower 3
        _fetch(17, 2, [(0, 40)], 88, 5, error=71),  # 8 rejected: INVALID_FETCH_SESSION_EPOCH
    ]
    classified = (
        lines_frame(spark, lines)
        .transform(with_log_fields)
        .transform(with_event_time, {}, "UTC", {})
        .transform(with_parsed_json)
        .transform(with_line_status, TOPIC_IDS)
    )
    out = build_follower_fetches(classified, TOPIC_IDS)
    actual = out.select(
        "line_number", "follower_id", "partition", "fetch_offset", "carried_over", "session_id", "session_epoch",
        "request_error_code", "high_watermark",
    )
    expected = spark.createDataFrame(
        [
            (1, 2, 0, 10, False, 77, 0, 0, 10),
            (1, 2, 1, 20, False, 77, 0, 0, 20),
            (2, 2, 0, 15, False, 77, 1, 0, 15),
            (2, 2, 1, 20, True, 77, 1, 0, None),
            (3, 2, 0, 15, True, 77, 2, 0, None),
            (4, 2, 1, 25, False, 77, 3, 0, 25),
            (4, 2, 0, 15, True, 77, 3, 0, None),
            (5, 2, 0, 30, False, 88, 0, 0, 30),
            (6, 2, 0, 30, True, 88, 1, 0, None),
            (7, 3, 0, 5, False, 0, -1, 0, 5),
            (8, 2, 0, 40, False, 0, 5, 71, 40),
        ],
        "line_number bigint, follower_id int, partition int, fetch_offset bigint, carried_over boolean, "
        "session_id int, session_epoch int, request_error_code int, high_watermark bigint",
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
    topics = {(r["topic"], r["topic_id"]) for r in out.select("topic", "topic_id").distinct().collect()}
    assert topics == {("orders", TOPIC_ID), ("orders", None)}  # v11 names the topic, v13+ gives its id
