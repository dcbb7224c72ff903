"""JMX-exporter scrape lines: classification and follower_leo_samples (chispa).

Real lines are copied from the first 3.9.1 lab recording's metrics/broker-2.prom (2026-11-22; broker 2
follows partitions 2 and 5 of leader 1 and 1 and 3 of leader 3); the malformed ones are made up.
"""

from datetime import date, datetime

from pyspark.sql import functions as F

from ackreplay.storage.line_reader import LINES_SCHEMA
from ackreplay.transforms.metrics import build_follower_leo_samples, classify_metric_lines, metric_quarantine
from tests.helpers import assert_df_equality

FILE = "lab/metrics/broker-2.prom"
LEO = "kafka_log_log_logendoffset"
LAG = "kafka_server_fetcherlagmetrics_consumerlag"
T1, T2 = 1795315387520, 1795315388561  # two scrapes, 1041 ms apart

REAL = [
    f"# HELP {LEO} Attribute exposed for management kafka.log:name=LogEndOffset,type=Log,attribute=Value",  # 1
    f"# TYPE {LEO} gauge",  # 2
    f'{LEO}{{partition="5",topic="ackreplay-lab"}} 1030.0 {T1}',  # 3
    f'{LAG}{{clientId="ReplicaFetcherThread-0-1",partition="5",topic="ackreplay-lab"}} 16.0 {T1}',  # 4
    f'kafka_cluster_partition_insyncreplicascount{{partition="0",topic="ackreplay-lab"}} 3.0 {T1}',  # 5
    f"kafka_server_replicamanager_leadercount 2.0 {T1}",  # 6
    "",  # 7: an empty scrape (broker paused)
    f'{LEO}{{partition="5",topic="ackreplay-lab"}} 1046.0 {T2}',  # 8
    f'{LAG}{{clientId="ReplicaFetcherThread-0-1",partition="5",topic="ackreplay-lab"}} 0.0 {T2}',  # 9
]
MALFORMED = [
    f'{LEO}{{partition="5",topic="ackreplay-lab"',  # 10: cut short
    f'{LEO}{{partition="5"}} 1046.0 {T2}',  # 11: no topic
    f'{LEO}{{partition="p5",topic="ackreplay-lab"}} 1046.0 {T2}',  # 12: partition not an integer
    f'{LEO}{{partition="5",topic="ackreplay-lab"}} NaN {T2}',  # 13
    f'{LEO}{{partition="5",topic="ackreplay-lab"}} 1046.5 {T2}',  # 14
    f'{LEO}{{partition="5",topic="ackreplay-lab"}} 1046.0 1795315388',  # 15: seconds, not ms
    f'{LEO}{{partition="5",topic="ackreplay-lab"}} 1046.0',  # 16: no timestamp, no scrape mark before it
    f"# scrape_timestamp_ms {T2 + 1000}",  # 17: a scrape mark
    f'{LEO}{{topic="ackreplay-lab",partition="5"}} 1.05e3',  # 18: no timestamp -> the mark's; labels reordered
    f'{LAG}{{clientId="ReplicaAlterLogDirsThread-0",partition="5",topic="ackreplay-lab"}} 3 {T2 + 1000}',  # 19
    "# some other comment",  # 20
    "garbage",  # 21
]


def _frame(spark, lines, source_file=FILE, errors=None):
    errors = errors or {}
    rows = [("c1", None, source_file, i, text, len(text), errors.get(i), None) for i, text in enumerate(lines, start=1)]
    return spark.createDataFrame(rows, LINES_SCHEMA).withColumn("ingest_run_id", F.lit("test-run"))


def test_every_line_gets_a_status_and_reason(spark):
    classified = classify_metric_lines(_frame(spark, REAL + MALFORMED, errors={9: "invalid UTF-8 at byte 3"}))
    actual = classified.select("line_number", "status", "detail").orderBy("line_number")
    expected = spark.createDataFrame(
        [
            (1, "unused", "HELP / TYPE comment"),
            (2, "unused", "HELP / TYPE comment"),
            (3, "parsed", LEO),
            (4, "parsed", LAG),
            (5, "unused", "other metric"),
            (6, "unused", "other metric"),
            (7, "unused", "blank line (empty scrape)"),
            (8, "parsed", LEO),
            (9, "quarantined", "invalid UTF-8 at byte 3"),
            (10, "quarantined", f"'{LEO}' line is not a sample 'name{{labels}} value [timestamp]' (cut short?)"),
            (11, "quarantined", f"'{LEO}' sample without a topic label"),
            (12, "quarantined", f"'{LEO}' sample without an integer partition label"),
            (13, "quarantined", "value 'NaN' is not an integer (bigint)"),
            (14, "quarantined", "value '1046.5' is not an integer (bigint)"),
            (15, "quarantined", "timestamp '1795315388' is not milliseconds since the epoch"),
            (16, "quarantined", "sample without a timestamp and no scrape time marked before it in the file"),
            (17, "unused", "scrape time mark"),
            (18, "parsed", LEO),
            (19, "parsed", LAG),
            (20, "unused", "comment"),
            (21, "unused", "not a sample line"),
        ],
        "line_number bigint, status string, detail string",
    )
    assert_df_equality(actual, expected, ignore_nullable=True)
    quarantine = metric_quarantine(classified).select("broker_id", "stage", "line_number").distinct()
    assert {tuple(r) for r in quarantine.select("broker_id", "stage").distinct().collect()} == {(2, "metrics")}


def test_follower_leo_samples_rows(spark):
    classified = classify_metric_lines(_frame(spark, REAL + MALFORMED))
    columns = (
        "cluster", "broker_id", "metric", "topic", "partition", "client_id", "leader_id", "value", "t_sample",
        "granularity_ms", "sample_gap_ms", "line_number", "event_date",
    )  # fmt: skip
    actual = build_follower_leo_samples(classified).select(*columns).orderBy("line_number")
    t1, t2, t3 = (datetime.utcfromtimestamp(ms / 1000) for ms in (T1, T2, T2 + 1000))
    client = "ReplicaFetcherThread-0-1"
    day = date(2026, 11, 22)
    # scrape times 1041 ms then 1000 ms apart: median 1020.5
    g = 1020.5
    expected = spark.createDataFrame(
        [
            ("c1", 2, LEO, "ackreplay-lab", 5, None, None, 1030, t1, g, None, 3, day),
            ("c1", 2, LAG, "ackreplay-lab", 5, client, 1, 16, t1, g, None, 4, day),
            ("c1", 2, LEO, "ackreplay-lab", 5, None, None, 1046, t2, g, 1041.0, 8, day),
            ("c1", 2, LAG, "ackreplay-lab", 5, client, 1, 0, t2, g, 1041.0, 9, day),
            ("c1", 2, LEO, "ackreplay-lab", 5, None, None, 1050, t3, g, 1000.0, 18, day),
            ("c1", 2, LAG, "ackreplay-lab", 5, "ReplicaAlterLogDirsThread-0", None, 3, t3, g, None, 19, day),
        ],
        "cluster string, broker_id int, metric string, topic string, partition int, client_id string, leader_id int, "
        "value bigint, t_sample timestamp, granularity_ms double, sample_gap_ms double, line_number bigint, "
        "event_date date",
    )
    assert_df_equality(actual, expected, ignore_nullable=True)


def test_a_file_not_named_after_its_broker_is_quarantined(spark):
    classified = classify_metric_lines(_frame(spark, REAL[:4], source_file="lab/metrics/scrape.prom"))
    rows = {(r["line_number"], r["status"]) for r in classified.collect()}
    assert rows == {(1, "unused"), (2, "unused"), (3, "quarantined"), (4, "quarantined")}
    reasons = {r["detail"] for r in classified.filter("status = 'quarantined'").collect()}
    assert reasons == {"scraped broker unknown: the file is not named broker-<id>.prom"}
