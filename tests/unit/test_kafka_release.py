"""Each cluster's Kafka release from its brokers' logs (ackreplay/replay/kafka_release.py) and the rule below
min ISR it decides, and the ingest's refusal of a conf whose log_timezone is not the brokers' zone
(ackreplay/ingest/broker_logs.check_log_time_zone), on hand-made rows."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from pyspark.sql import functions as F

from ackreplay.config import parse_config
from ackreplay.ingest.broker_logs import LogTimeZoneError, check_log_time_zone
from ackreplay.replay.kafka_release import logged_releases, min_isr_rules
from tests.unit.test_broker_logs import classify, log_frame


def _configs(spark, rows):
    return spark.createDataFrame(
        [(c, b, s, v, datetime.fromisoformat(t), "f", n) for c, b, s, v, t, n in rows],
        "cluster string, broker_id int, setting string, value bigint, t_log timestamp, source_file string,"
        " line_number bigint",
    )


def test_the_rule_below_min_isr_follows_each_clusters_release(spark):
    rows = [
        # old: every broker last started on 3.6 (broker 1 was 3.5 before)
        ("old", 1, "kafka.version.major", 3, "2026-11-01 10:00:00", 1),
        ("old", 1, "kafka.version.minor", 5, "2026-11-01 10:00:00", 1),
        ("old", 1, "kafka.version.major", 3, "2026-11-02 10:00:00", 9),
        ("old", 1, "kafka.version.minor", 6, "2026-11-02 10:00:00", 9),
        ("old", 2, "kafka.version.major", 3, "2026-11-02 10:00:00", 1),
        ("old", 2, "kafka.version.minor", 6, "2026-11-02 10:00:00", 1),
        ("old", 2, "replica.lag.time.max.ms", 30000, "2026-11-02 10:00:00", 2),
        # new: 4.1
        ("new", 1, "kafka.version.major", 4, "2026-11-02 10:00:00", 1),
        ("new", 1, "kafka.version.minor", 1, "2026-11-02 10:00:00", 1),
        # rolling: an upgrade from 3.6 to 3.7 half done
        ("rolling", 1, "kafka.version.major", 3, "2026-11-02 10:00:00", 1),
        ("rolling", 1, "kafka.version.minor", 6, "2026-11-02 10:00:00", 1),
        ("rolling", 2, "kafka.version.major", 3, "2026-11-02 10:00:00", 1),
        ("rolling", 2, "kafka.version.minor", 7, "2026-11-02 10:00:00", 1),
    ]
    clusters = ["old", "new", "rolling", "silent"]
    releases = logged_releases(_configs(spark, rows), clusters)
    assert releases == {"old": {1: (3, 6), 2: (3, 6)}, "new": {1: (4, 1)}, "rolling": {1: (3, 6), 2: (3, 7)}}
    rules = min_isr_rules(releases, clusters, "auto")
    assert {c: r.strict for c, r in rules.items()} == {"old": False, "new": True, "rolling": True, "silent": True}
    assert rules["old"].line() == (
        "old: the HW advances below min ISR (NOT_ENOUGH_REPLICAS_AFTER_APPEND); Kafka 3.6 (brokers 1, 2, at their"
        " last start)"
    )
    assert (
        rules["rolling"].note
        == "its brokers logged releases on both sides of 3.7 (1: 3.6, 2: 3.7): 3.7+'s rule assumed"
    )
    assert rules["silent"].note == "no 'Kafka version:' line in its server.log files: Kafka 3.7+'s rule assumed"
    forced = min_isr_rules(releases, clusters, False)
    assert {r.strict for r in forced.values()} == {False}
    assert forced["new"].note == "replay.strict_min_isr: false"


START_LINES = [
    "[2026-11-29 17:40:37,932] INFO Kafka version: 3.6.2 (org.apache.kafka.common.utils.AppInfoParser)",
    "[2026-11-29 17:40:37,932] INFO Kafka startTimeMs: 1795954237932 (org.apache.kafka.common.utils.AppInfoParser)",
]


def _classified(spark, zone):
    frame = log_frame(spark, START_LINES, "server_log").withColumn("cluster", F.lit("c1"))
    return classify(frame, {"c1": zone}).withColumns(
        {"ingest_run_id": F.lit("r1"), "event_date": F.lit(date(2026, 11, 29))}
    )


def test_a_log_timezone_that_is_not_the_brokers_zone_stops_the_ingest(spark):
    """The broker's stamp 17:40:37.932 read in UTC is 5:30 h after its own epoch startTimeMs (12:10:37.932 UTC):
    its JVM ran at UTC+05:30. Read in Asia/Kolkata the two agree to the millisecond."""
    with pytest.raises(LogTimeZoneError) as error:
        check_log_time_zone(_classified(spark, "UTC"), parse_config({"clusters": {"c1": {"log_timezone": "UTC"}}}))
    assert str(error.value) == (
        "c1: its brokers' log times, read in UTC (log_timezone), are 5:30 h ahead of the epoch times they logged with"
        " them (AppInfoParser's 'Kafka startTimeMs'; e.g. c1/broker-1/server.log line 2: started 2026-11-29 12:10:37"
        " UTC): their JVMs ran at UTC+05:30. Set clusters.c1.log_timezone in the conf to their zone (at UTC+05:30"
        " then: Asia/Calcutta, Asia/Colombo, Asia/Kolkata)."
    )
    kolkata = parse_config({"clusters": {"c1": {"log_timezone": "Asia/Kolkata"}}})
    assert check_log_time_zone(_classified(spark, "Asia/Kolkata"), kolkata) is None


def test_the_replay_counts_appended_batches_answered_with_an_error_apart(spark):
    """The replay's candidates are the appended batches acknowledged without error. A produce answered with an
    error and an offset was appended first (NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, on the 3.6.2 corpus trace;
    NOT_LEADER_OR_FOLLOWER, 6, when the leadership moved while it waited): in the log, not replayed, and
    counted apart from the errors that appended nothing (NOT_ENOUGH_REPLICAS, 19, has no offset)."""
    from ackreplay.replay.stage import _summarize_produces

    rows = [(0, 0, 10), (-1, 0, 11), (1, 0, 12), (-1, 19, -1), (-1, 20, 13), (-1, 6, 14), (1, 6, -1), (-1, 6, None)]
    produce = spark.createDataFrame(
        [(acks, error, offset, "c1/broker-1/kafka-request.log", 100) for acks, error, offset in rows],
        "acks int, error_code int, base_offset bigint, source_file string, timeout_ms int",
    )
    summary = _summarize_produces(produce)
    assert (summary.total, summary.appended) == (8, 2)
    assert summary.skipped == {
        "acks=0 (no offset)": 1,
        "appended but answered with an error (not replayed)": 2,
        "not appended (error response)": 3,
    }
