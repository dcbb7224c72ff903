"""Request-log lines: classification, event times, PRODUCE rows (chispa)."""

from datetime import datetime

from pyspark.sql import functions as F

from ackreplay.kafka_lines import (
    Client,
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    other_body,
    produce_body,
    request_log_line,
)
from ackreplay.transforms.request_log import (
    select_produce_requests,
    with_event_time,
    with_local_log_time,
)
from tests.helpers import (
    REAL_PRODUCE,
    REAL_TOPIC_IDS,
    TOPIC_ID,
    TOPIC_IDS,
    assert_df_equality,
    lines_frame,
    micros,
    parse_request_log_lines,
)

T0 = datetime(2026, 11, 20, 13, 0, 0, 317000)
UNKNOWN_ID = "ZZZZZZZZZZZZZZZZZZZZZZ"


def parse(df, zones=None, offsets=None, topic_ids=TOPIC_IDS):
    """Every output row of the parser (lines and silver rows), with UTC times."""
    return (
        df.transform(parse_request_log_lines, topic_ids)
        .transform(with_local_log_time)
        .transform(with_event_time, zones or {}, "UTC", offsets or {})
    )


def classify(df, zones=None, offsets=None):
    """The `line` rows: one per input line."""
    return parse(df, zones, offsets).filter(F.col("row_kind") == "line")


def fetch(version, replica_id, topic="orders", topic_id=TOPIC_ID):
    return request_log_line(
        T0, fetch_body(version, 7, replica_id, [FetchTopic(topic, topic_id, [FetchPartition(0, 10)])], Timing())
    )


def test_every_line_gets_a_status_and_reason(spark):
    produce = lambda **kw: request_log_line(  # noqa: E731
        T0,
        produce_body(
            kw.pop("version", 9), 1, kw.pop("acks", -1), "orders", [ProducePartition(0, 100, 5)], Timing(), **kw
        ),
    )
    lines = [
        produce(),  # 1 Produce v9, topic name
        produce(version=13, topic_id=TOPIC_ID),  # 2 Produce v13, topic id
        produce(version=13, topic_id=UNKNOWN_ID),  # 3 unknown topic id
        produce(acks=0),  # 4 acks=0: "response":""
        fetch(12, 2),  # 5 follower, replicaId
        fetch(17, 3),  # 6 follower, replicaState
        fetch(17, -1),  # 7 consumer, no replicaState
        fetch(11, -1),  # 8 consumer, replicaId -1
        fetch(16, 1, "__cluster_metadata", "AAAAAAAAAAAAAAAAAAAAAQ"),  # 9 KRaft metadata log
        request_log_line(T0, other_body("METADATA", 3, 12, 9)),  # 10
        produce()[:200],  # 11 cut mid-JSON
        "\x00\x01binary garbage",  # 12
        "[2026-11-20 13:00:00,317] TRACE Processor 3 received request: x (kafka.network.RequestChannel$)",  # 13
        "[2026-11-20 13:00:00,317] INFO Something else (kafka.server.KafkaApis)",  # 14
        "[2026-11-20 13:00:00,317] DEBUG Completed request:RequestHeader(apiKey=PRODUCE, apiVersion=8) -- "
        "{acks=-1,timeout=30000,numPartitions=1} (kafka.request.logger)",  # 15
        produce().replace('"correlationId":1', '"correlationId":"one"'),  # 16
        fetch(13, 2, topic_id=UNKNOWN_ID),  # 17
        produce(),  # 18 (flagged by the reader)
    ]
    df = classify(lines_frame(spark, lines, errors={18: "invalid UTF-8 at byte 3"}))
    actual = df.select("line_number", "status", "detail", "api_key_name", "follower_id")
    expected = spark.createDataFrame(
        [
            (1, "parsed", None, "PRODUCE", None),
            (2, "parsed", None, "PRODUCE", None),
            (3, "quarantined", "unknown topic id (not in topics.txt)", "PRODUCE", None),
            (4, "parsed", None, "PRODUCE", None),
            (5, "parsed", None, "FETCH", 2),
            (6, "parsed", None, "FETCH", 3),
            (7, "unused", "FETCH from a consumer", "FETCH", None),
            (8, "unused", "FETCH from a consumer", "FETCH", None),  # classified from its header
            (9, "unused", "FETCH of __cluster_metadata", "FETCH", 1),
            (10, "unused", "METADATA", "METADATA", None),
            (11, "quarantined", "malformed or truncated JSON", "PRODUCE", None),  # header still readable
            (
                12,
                "quarantined",
                "not a log4j line '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)' (or ',SSSSSS')",
                None,
                None,
            ),
            (13, "unused", "RequestChannel trace line", None, None),
            (14, "quarantined", "not a 'Completed request:' line", None, None),
            (15, "quarantined", "pre-2.8 text request log format is not supported", None, None),
            (16, "quarantined", "JSON field of an unexpected type", "PRODUCE", None),
            (17, "quarantined", "unknown topic id (not in topics.txt)", "FETCH", 2),
            (18, "quarantined", "invalid UTF-8 at byte 3", "PRODUCE", None),
        ],
        "line_number bigint, status string, detail string, api_key_name string, follower_id int",
    )
    assert_df_equality(actual, expected, ignore_nullable=True)  # nullability follows the expressions


def test_log_time_is_converted_from_the_cluster_zone_and_broker_clock(spark):
    line = request_log_line(T0, other_body("METADATA", 3, 12, 9))
    df = lines_frame(spark, [line, line], broker_id=1).unionByName(lines_frame(spark, [line], broker_id=2))
    out = classify(df, zones={"c1": "Europe/Berlin"}, offsets={"c1/1": 250.0})
    actual = out.select("broker_id", "line_number", "t_log", "event_date")
    expected = spark.createDataFrame(
        [
            (1, 1, datetime(2026, 11, 20, 12, 0, 0, 67000), datetime(2026, 11, 20).date()),
            (1, 2, datetime(2026, 11, 20, 12, 0, 0, 67000), datetime(2026, 11, 20).date()),
            (2, 1, datetime(2026, 11, 20, 12, 0, 0, 317000), datetime(2026, 11, 20).date()),
        ],
        "broker_id int, line_number bigint, t_log timestamp, event_date date",
    )
    assert_df_equality(actual, expected, ignore_nullable=True)


def test_undated_lines_take_the_date_of_the_files_first_line(spark):
    df = lines_frame(spark, ["garbage"]).withColumn("first_log_time", F.lit("2026-11-19 23:30:00,000"))
    out = classify(df, zones={"c1": "America/New_York"})
    row = out.select("t_log", "event_date").first()
    assert row["t_log"] is None
    assert str(row["event_date"]) == "2026-11-20"  # 23:30 in New York is 04:30 UTC the next day


def test_produce_rows_carry_offsets_errors_and_derived_times(spark):
    timing = Timing(request_queue=0.081, local=0.934, remote=6.201, response_queue=0.043, send=0.153)
    lines = [
        request_log_line(
            T0,
            produce_body(
                9,
                48213,
                -1,
                "orders",
                [ProducePartition(3, 15872, 1842213), ProducePartition(4, 100, error_code=19)],
                timing,
                Client(client_id="order-svc", connection="10.0.0.5:9092-10.0.0.9:41000-2"),
            ),
        ),
        request_log_line(
            T0, produce_body(13, 2, 1, "orders", [ProducePartition(0, 50, 7)], Timing(), topic_id=TOPIC_ID)
        ),
        request_log_line(T0, produce_body(9, 3, 0, "orders", [ProducePartition(1, 60)], Timing())),
    ]
    out = select_produce_requests(parse(lines_frame(spark, lines)))
    actual = out.select(
        "line_number",
        "topic",
        "topic_id",
        "partition",
        "acks",
        "records_size_bytes",
        "error_code",
        "base_offset",
        "t_start",
        "t_dequeue",
        "t_local_done",
        "t_ack_observed",
        "connection",
    )
    ts = lambda us: datetime(2026, 11, 20, 13, 0, 0, us)  # noqa: E731
    conn, default_conn = "10.0.0.5:9092-10.0.0.9:41000-2", Client().connection
    expected = spark.createDataFrame(
        [
            # total 7.412 ms before 13:00:00.317; +0.081 queue; +0.934 local; +6.201 remote
            (1, "orders", None, 3, -1, 15872, 0, 1842213, ts(309588), ts(309669), ts(310603), ts(316804), conn),
            (1, "orders", None, 4, -1, 100, 19, -1, ts(309588), ts(309669), ts(310603), ts(316804), conn),
            (2, "orders", TOPIC_ID, 0, 1, 50, 0, 7, ts(316320), ts(316370), ts(316870), None, default_conn),
            (3, "orders", None, 1, 0, 60, None, None, ts(316320), ts(316370), ts(316870), None, default_conn),
        ],
        "line_number bigint, topic string, topic_id string, partition int, acks int, records_size_bytes int, "
        "error_code int, base_offset bigint, t_start timestamp, t_dequeue timestamp, t_local_done timestamp, "
        "t_ack_observed timestamp, connection string",
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)


def test_microsecond_stamps_carry_into_every_derived_time(spark):
    # The real 4.1.1 line (Europe/Berlin, CET) with its `,300` stamp and as log4j2 %d{DEFAULT_MICROS}
    # writes it, `,300123`: every time derived from it moves by the same 123 µs, nothing else changes.
    df = lines_frame(spark, [REAL_PRODUCE, micros(REAL_PRODUCE, "123")])
    rows = parse(df, zones={"c1": "Europe/Berlin"}, topic_ids=REAL_TOPIC_IDS)
    out = select_produce_requests(rows)
    actual = out.select(
        "line_number", "partition", "base_offset", "t_log", "t_start", "t_dequeue", "t_local_done", "t_ack_observed"
    )
    ts = lambda us: datetime(2026, 11, 23, 20, 12, 37, us)  # noqa: E731
    # total 30.423 ms before the log time; +0.295 queue; +1.949 local; +27.99 remote
    ms_line = (ts(300000), ts(269577), ts(269872), ts(271821), ts(299811))
    us_line = (ts(300123), ts(269700), ts(269995), ts(271944), ts(299934))
    expected = spark.createDataFrame(
        [
            (1, 2, 6194, *ms_line),
            (1, 3, 6540, *ms_line),
            (2, 2, 6194, *us_line),
            (2, 3, 6540, *us_line),
        ],
        "line_number bigint, partition int, base_offset bigint, t_log timestamp, t_start timestamp, "
        "t_dequeue timestamp, t_local_done timestamp, t_ack_observed timestamp",
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
    # apart from the times, the two lines give the same rows
    same = [
        c
        for c in out.columns
        if c not in ("line_number", "t_log", "t_start", "t_dequeue", "t_local_done", "t_ack_observed", "event_date")
    ]
    assert_df_equality(
        out.filter("line_number = 1").select(*same),
        out.filter("line_number = 2").select(*same),
        ignore_row_order=True,
    )


def test_undated_lines_take_the_date_of_a_microsecond_first_line(spark):
    df = lines_frame(spark, ["garbage"]).withColumn("first_log_time", F.lit("2026-11-19 23:59:59,999999"))
    row = classify(df, zones={"c1": "UTC"}).select("t_log", "event_date").first()
    assert row["t_log"] is None
    assert str(row["event_date"]) == "2026-11-19"
