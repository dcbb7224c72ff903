"""Follower FETCH lines -> follower_fetches, including incremental fetch-session carry-over (chispa)."""

from datetime import datetime, timedelta

from ackreplay.kafka_lines import FetchPartition, FetchTopic, Timing, fetch_body, request_log_line
from ackreplay.transforms.follower_fetches import build_follower_fetches
from ackreplay.transforms.request_log import with_event_time, with_local_log_time
from tests.helpers import TOPIC_ID, TOPIC_IDS, assert_df_equality, lines_frame, parse_request_log_lines

T0 = datetime(2026, 11, 20, 13, 0, 0)


def _at(line_number: int) -> datetime:
    return T0 + timedelta(milliseconds=10 * line_number)


def _dequeued(line_number: int) -> datetime:
    # Timing(): total 0.68 ms, request queue 0.05 ms -> t_dequeue = T - 0.63 ms
    return _at(line_number) - timedelta(microseconds=630)


def _fetch(line, version, replica, partitions, session_id, epoch, response_session_id=None, forgotten=None, error=0):
    topic = FetchTopic("orders", TOPIC_ID, [FetchPartition(p, o, high_watermark=o) for p, o in partitions])
    forgotten_topics = (
        [FetchTopic("orders", TOPIC_ID, [FetchPartition(p, 0) for p in forgotten])] if forgotten else None
    )
    body = fetch_body(
        version,
        epoch,
        replica,
        [topic] if partitions else [],
        Timing(),
        session_id=session_id,
        session_epoch=epoch,
        response_session_id=response_session_id,
        forgotten=forgotten_topics,
        error_code=error,
    )
    return request_log_line(_at(line), body)


def test_partitions_absent_from_incremental_requests_keep_their_offset(spark):
    lines = [
        _fetch(1, 17, 2, [(0, 10), (1, 20)], 0, 0, response_session_id=77),  # new session 77
        _fetch(2, 17, 2, [(0, 15)], 77, 1),  # p1 unchanged
        _fetch(3, 17, 2, [], 77, 2, forgotten=[1]),  # p1 leaves the session
        _fetch(4, 17, 2, [(1, 25)], 77, 3),  # p1 back
        _fetch(5, 17, 2, [(0, 30)], 77, 0, response_session_id=88),  # new session 88 replaces 77
        _fetch(6, 17, 2, [], 88, 1),
        _fetch(7, 11, 3, [(0, 5)], 0, -1),  # sessionless (Fetch v11), follower 3
        _fetch(8, 17, 2, [(0, 40)], 88, 5, error=71),  # rejected: INVALID_FETCH_SESSION_EPOCH
    ]
    parsed = (
        lines_frame(spark, lines)
        .transform(parse_request_log_lines, TOPIC_IDS)
        .transform(with_local_log_time)
        .transform(with_event_time, {}, "UTC", {})
    )
    out = build_follower_fetches(parsed)
    actual = out.select(
        "line_number",
        "follower_id",
        "partition",
        "fetch_offset",
        "session_id",
        "session_epoch",
        "request_error_code",
        "high_watermark",
        "carried_requests",
        "carried_until",
    )
    d = _dequeued
    expected = spark.createDataFrame(
        [
            (1, 2, 0, 10, 77, 0, 0, 10, 0, d(1)),  # re-listed at epoch 1
            (1, 2, 1, 20, 77, 0, 0, 20, 1, d(2)),  # omitted at epoch 1, forgotten at epoch 2
            (2, 2, 0, 15, 77, 1, 0, 15, 2, d(4)),  # omitted at epochs 2 and 3, until session 77 ends
            (4, 2, 1, 25, 77, 3, 0, 25, 0, d(4)),
            (5, 2, 0, 30, 88, 0, 0, 30, 1, d(6)),  # the rejected request 8 does not extend session 88
            (7, 3, 0, 5, 0, -1, 0, 5, 0, d(7)),
            (8, 2, 0, 40, 0, 5, 71, 40, 0, d(8)),
        ],
        "line_number bigint, follower_id int, partition int, fetch_offset bigint, session_id int, "
        "session_epoch int, request_error_code int, high_watermark bigint, carried_requests int, "
        "carried_until timestamp",
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
    topics = {(r["topic"], r["topic_id"]) for r in out.select("topic", "topic_id").distinct().collect()}
    assert topics == {("orders", TOPIC_ID), ("orders", None)}  # v11 names the topic, v13+ gives its id
