"""The producers' requests that did not wait, measured against the linger.ms the replay takes for them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ackreplay.replay.send_delays import MIN_REQUESTS, SendDelay, cluster_columns, measured, summary_lines
from ackreplay.transforms.common import PerCluster
from ackreplay.transforms.replay_inputs import send_delays
from tests.helpers import assert_df_equality

T0 = datetime(2026, 11, 20, 10, 0, 0)
PRODUCES = StructType(
    [
        StructField("cluster", StringType()),
        StructField("broker_id", IntegerType()),
        StructField("connection", StringType()),
        StructField("source_file", StringType()),
        StructField("line_number", LongType()),
        StructField("client_id", StringType()),
        StructField("t_start", TimestampType()),
        StructField("t_log", TimestampType()),
        StructField("t_send", TimestampType()),
    ]
)


def _ms(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def test_the_delay_after_the_first_record_of_each_request_that_did_not_wait(spark):
    def batch(cluster, connection, line, start_ms, log_ms, send_ms):
        send = None if send_ms is None else _ms(send_ms)
        return (cluster, 1, connection, "f", line, "p", _ms(start_ms), _ms(log_ms), send)

    rows = [
        batch("c", "A", 1, 0.0, 2.0, -5.0),  # the connection's first request: what it waited behind is unknown
        batch("c", "A", 2, 10.0, 12.0, 5.0),  # 8 ms after the previous response: did not wait; 5 ms after
        batch("c", "A", 2, 10.0, 12.0, 6.0),  # ... its first record (the request's other batch came later)
        batch("c", "A", 3, 12.5, 20.0, 11.0),  # 0.5 ms after the previous response: it waited
        batch("c", "A", 4, 30.0, 32.0, 25.0),
        batch("c", "A", 4, 30.0, 32.0, None),  # a batch without a send time: the request's first record unknown
        batch("c", "A", 5, 50.0, 52.0, 44.0),  # did not wait: 6 ms
        batch("c", None, 9, 90.0, 92.0, 80.0),  # no connection logged: no chain
        batch("d", "B", 1, 0.0, 1.0, -1.0),
        batch("d", "B", 2, 8.0, 9.0, 3.0),  # 7 ms after the previous response, within d's gap of 10 ms: it waited
    ]
    produces = spark.createDataFrame(rows, PRODUCES)

    measured_delays = send_delays(produces, PerCluster(1.0, {"d": 10.0}).column())

    expected = spark.createDataFrame(
        [("c", "p", 2, 5.0, 5.0, 6.0)],
        StructType(
            [
                StructField("cluster", StringType()),
                StructField("client_id", StringType()),
                StructField("requests", LongType()),
                StructField("p10_ms", DoubleType()),
                StructField("p50_ms", DoubleType()),
                StructField("p90_ms", DoubleType()),
            ]
        ),
    )
    assert_df_equality(measured_delays, expected, ignore_nullable=True)


def _delay(p50_ms: float, linger_ms: float, requests: int = 500, client: str = "p") -> SendDelay:
    return SendDelay("c", client, requests, p50_ms - 0.4, p50_ms, p50_ms + 0.4, linger_ms)


@pytest.mark.parametrize(
    ("p50_ms", "linger_ms", "agrees"),
    [
        (4.9, 5.0, True),  # the lab's producers (linger.ms 5)
        (0.7, 0.0, True),  # ProducerPerformance with linger.ms 0 on the perf-fast traces
        (0.7, 5.0, False),  # the same replayed with linger.ms 5
        (5.3, 0.0, False),
        (80.0, 100.0, True),  # within a quarter of a long linger.ms
        (60.0, 100.0, False),
    ],
)
def test_a_median_off_linger_ms_by_more_than_a_millisecond_or_a_quarter_disagrees(p50_ms, linger_ms, agrees):
    assert _delay(p50_ms, linger_ms).agrees is agrees


def test_too_few_requests_are_not_judged():
    few = _delay(0.7, 5.0, requests=MIN_REQUESTS - 1)
    assert not few.judged and few.agrees


def test_the_warning_names_the_cluster_the_client_and_the_key_to_set():
    rows = [
        {"cluster": "c", "client_id": "fast", "requests": 2_000, "p10_ms": 0.3, "p50_ms": 0.7, "p90_ms": 1.1},
        {"cluster": "c", "client_id": "lab", "requests": 150, "p10_ms": 4.5, "p50_ms": 5.0, "p90_ms": 5.6},
        {"cluster": "own", "client_id": None, "requests": 300, "p10_ms": 4.5, "p50_ms": 9.0, "p90_ms": 9.5},
    ]
    delays = measured(rows, lambda cluster: 5.0)

    quiet = summary_lines(delays, own_settings=["own"], detail=False)

    assert quiet == [
        "  warning: c: requests that did not wait reached the broker this long after their first record: fast median"
        " 0.7 ms (P10-P90 0.3-1.1 ms, 2,000 requests); linger.ms is replayed as 5, and the what-ifs take a waiting"
        " request's arrival from it. Set replay.producer.linger_ms or clusters.c.producer.linger_ms to the producers'"
        " linger.ms (a median well below it: their batches filled first; above it: a slow sender or network)",
        "  warning: own: requests that did not wait reached the broker this long after their first record: (no client"
        " id) median 9.0 ms (P10-P90 4.5-9.5 ms, 300 requests); linger.ms is replayed as 5, and the what-ifs take a"
        " waiting request's arrival from it. Set clusters.own.producer.linger_ms to the producers' linger.ms (a median"
        " well below it: their batches filled first; above it: a slow sender or network)",
    ]
    detailed = summary_lines(delays, own_settings=["own"], detail=True)
    assert detailed[1:3] == [
        "    c (linger.ms 5): fast median 0.7 ms (P10-P90 0.3-1.1 ms, 2,000 requests); lab median 5.0 ms (P10-P90"
        " 4.5-5.6 ms, 150 requests)",
        "    own (linger.ms 5): (no client id) median 9.0 ms (P10-P90 4.5-9.5 ms, 300 requests)",
    ]
    assert detailed[3:] == quiet
    assert summary_lines(measured(rows[1:2], lambda cluster: 5.0), [], detail=False) == []


def test_replay_checks_keep_the_producer_furthest_off_linger_ms():
    rows = [
        {"cluster": "c", "client_id": "lab", "requests": 900, "p10_ms": 4.5, "p50_ms": 5.0, "p90_ms": 5.6},
        {"cluster": "c", "client_id": "fast", "requests": 2_000, "p10_ms": 0.3, "p50_ms": 0.7, "p90_ms": 1.1},
        {"cluster": "c", "client_id": "rare", "requests": 10, "p10_ms": 20.0, "p50_ms": 30.0, "p90_ms": 40.0},
    ]
    delays = measured(rows, lambda cluster: 5.0)

    assert cluster_columns(delays, "c", 5.0) == {
        "linger_ms": 5.0,
        "send_delay_client": "fast",
        "send_delay_p50_ms": 0.7,
        "send_delay_requests": 2_000,
        "send_delay_agrees": False,
    }
    assert cluster_columns(delays, "other", 0.0) == {
        "linger_ms": 0.0,
        "send_delay_client": None,
        "send_delay_p50_ms": None,
        "send_delay_requests": None,
        "send_delay_agrees": None,
    }


def test_the_reports_accuracy_table_shows_the_producer_and_whether_it_agrees():
    from ackreplay.gold.report import _send_delay

    measured_off = {"linger_ms": 5.0, "send_delay_client": "fast", "send_delay_p50_ms": 0.7,
                    "send_delay_requests": 2_000, "send_delay_agrees": False}  # fmt: skip
    assert _send_delay(measured_off) == (
        "0.7 ms (fast, 2,000 requests); linger.ms 5 as replayed: OFF, set the producers' linger.ms in the conf"
    )
    agreeing = {**measured_off, "send_delay_p50_ms": 4.9, "send_delay_agrees": True}
    assert _send_delay(agreeing) == "4.9 ms (fast, 2,000 requests); linger.ms 5 as replayed"
    assert _send_delay({"linger_ms": 5.0, "send_delay_requests": None}) == "-"
    assert _send_delay({"cluster": "replayed by an older release"}) == "-"
