"""Data-quality checks between stages on a small lakehouse: clean data passes and is recorded in
dq_results, broken data fails naming the table, check and rows, and the command writes nothing downstream."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from pyspark.sql import functions as F

from ackreplay.cli import main
from ackreplay.config import parse_config
from ackreplay.gold.stage import run_gold
from ackreplay.ingest.stage import run_ingest
from ackreplay.kafka_lines import ProducePartition, Timing, produce_body, request_log_line, topics_describe
from ackreplay.quality.catalog import STAGE_TABLES
from ackreplay.quality.runner import QualityError, run_quality
from ackreplay.replay.stage import run_replay
from ackreplay.schemas.replay import PRODUCE_REPLAY
from ackreplay.storage.lakehouse import read_table, replace_rows, table_exists
from ackreplay.transforms.common import conform
from tests.helpers import TOPIC_ID
from tests.pipeline.test_ingest_stage import T0, _hour_of_lines, _write

CONFIG = parse_config({"replay": {"quorum_sizes": [2], "lag_ms": [3000]}})


@pytest.fixture(scope="module")
def lakehouse(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("dq")
    inp = root / "input"
    _write(inp / "c1" / "broker-1" / "kafka-request.log", _hour_of_lines(T0, 30, 0))
    (inp / "c1" / "topics.txt").write_text(
        topics_describe("orders", TOPIC_ID, [[1, 2, 3]], {"min.insync.replicas": "2"})
    )
    lakehouse = str(root / "lakehouse")
    ingest = run_ingest(spark, CONFIG, str(inp), lakehouse)
    reports = {"ingest": run_quality(spark, CONFIG, lakehouse, "ingest", ["c1"], ingest.run_id)}
    run_replay(spark, CONFIG, lakehouse, ["c1"], run_id="replay-1")
    reports["replay"] = run_quality(spark, CONFIG, lakehouse, "replay", ["c1"], "replay-1")
    run_gold(spark, CONFIG, lakehouse, ["c1"], "gold-1", "hour")
    reports["gold"] = run_quality(spark, CONFIG, lakehouse, "gold", ["c1"], "gold-1")
    return lakehouse, reports


def test_clean_stages_pass_and_are_recorded(spark, lakehouse):
    root, reports = lakehouse
    for stage, report in reports.items():
        assert report.failures == [], stage
        assert report.tables == list(STAGE_TABLES[stage])
    counts = {c.name: (c.left, c.right) for c in reports["ingest"].counts}
    assert counts["reconcile.produce_lines"] == (30, 30)
    assert counts["reconcile.fetch_lines"] == (30, 30)
    assert counts["reconcile.bronze_status"] == (61, 61)
    # the printed line names each part and the parts add up to the total it prints
    bronze = next(c for c in reports["ingest"].counts if c.name == "reconcile.bronze_status")
    parts = [int(n.replace(",", "")) for n in re.findall(r"(?:parsed|quarantined|unused) ([\d,]+)", bronze.right_label)]
    assert len(parts) == 3 and sum(parts) == 61
    replay_counts = {c.name: (c.left, c.right) for c in reports["replay"].counts}
    # the first produce comes before any follower fetch: outside a known leader epoch, counted, not replayed
    assert replay_counts["reconcile.replayed"] == (29, 30)
    assert "(1 outside any known leader epoch or partition)" in reports["replay"].summary_lines()[2]
    assert replay_counts["reconcile.policy_rows[acks=all@lag=3000]"] == (29, 29)
    gold_counts = [c for c in reports["gold"].counts if c.name == "reconcile.policy_summary.produces"]
    assert {c.left_label.split(":")[0] for c in gold_counts} == {
        "acks=1",
        "acks=all",
        "min.insync",
        "quorum=2",
        "acks=all@lag=3000",
    }
    assert all(c.left == c.right == 29 for c in gold_counts)

    results = read_table(spark, root, "dq_results")
    per_stage = {r["stage"]: r["count"] for r in results.groupBy("stage").count().collect()}
    assert per_stage == {stage: len(report.outcomes) for stage, report in reports.items()}
    assert results.filter(~F.col("success")).count() == 0
    row = results.filter("check_name = 'produce_requests.times_ordered'").orderBy("arguments").first()
    assert (row["table_name"], row["severity"], row["element_count"], row["unexpected_count"]) == (
        "produce_requests",
        "blocking",
        30,
        0,
    )


def test_a_rerun_of_the_same_stage_run_replaces_its_results(spark, lakehouse):
    root, reports = lakehouse
    before = read_table(spark, root, "dq_results").filter("stage = 'replay'").count()
    run_quality(spark, CONFIG, root, "replay", ["c1"], "replay-1")
    assert read_table(spark, root, "dq_results").filter("stage = 'replay'").count() == before


def test_broken_replay_rows_fail_naming_table_check_and_rows(spark, lakehouse, tmp_path):
    root, _ = lakehouse
    broken_root = str(tmp_path / "broken")
    replay = read_table(spark, root, "produce_replay")
    duplicated = replay.filter("policy = 'quorum=2' AND base_offset = 7")
    over_rf = replay.filter("policy = 'acks=1' AND base_offset = 3").withColumn("copies_at_ack", F.lit(4))
    broken = replay.filter("NOT (policy = 'acks=1' AND base_offset = 3)").unionByName(duplicated).unionByName(over_rf)
    replace_rows(conform(broken, PRODUCE_REPLAY), broken_root, "produce_replay", "cluster = 'c1'", "broken")
    replace_rows(read_table(spark, root, "produce_requests"), broken_root, "produce_requests", "cluster = 'c1'", "x")
    replace_rows(read_table(spark, root, "partitions"), broken_root, "partitions", "cluster = 'c1'", "x")

    with pytest.raises(QualityError) as failure:
        run_quality(spark, CONFIG, broken_root, "replay", ["c1"], "replay-broken")
    message = str(failure.value)
    assert "after replay (run replay-broken); nothing downstream was written" in message
    assert "produce_replay: produce_replay.unique_batch_policy" in message
    assert '"base_offset": 7' in message and '"policy": "quorum=2"' in message
    assert "produce_replay.copies" in message and '"copies_at_ack": 4' in message
    assert "reconcile.policy_rows[quorum=2]" in message  # 31 quorum=2 rows against 30 acks=1 rows

    failed = read_table(spark, broken_root, "dq_results").filter(~F.col("success"))
    by_check = {r["check_name"]: r for r in failed.collect()}
    assert by_check["produce_replay.unique_batch_policy"]["unexpected_count"] == 2
    assert by_check["produce_replay.copies"]["unexpected_count"] == 1
    assert '"copies_at_ack": 4' in by_check["produce_replay.copies"]["sample_rows"]


def test_a_blocking_ingest_failure_stops_the_command_before_the_replay(spark, tmp_path, capsys):
    inp = tmp_path / "input"
    # topics.txt does not list the topic the producer wrote to
    line = request_log_line(T0, produce_body(9, 1, 1, "payments", [ProducePartition(0, 100, 5)], Timing()))
    _write(
        inp / "c1" / "broker-1" / "kafka-request.log",
        [
            line,
            request_log_line(
                T0 + timedelta(seconds=1), produce_body(9, 2, 1, "payments", [ProducePartition(0, 100, 6)], Timing())
            ),
        ],
    )
    (inp / "c1" / "topics.txt").write_text(topics_describe("orders", TOPIC_ID, [[1, 2, 3]], {}))
    conf = tmp_path / "strict.yaml"
    conf.write_text(
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\n"
        "quality:\n  checks:\n    produce_requests.partition_known: blocking\n"
    )
    lakehouse = str(tmp_path / "lakehouse")
    assert main(["run", "--input", str(inp), "--lakehouse", lakehouse, "--conf", str(conf)]) == 1
    err = capsys.readouterr().err
    assert "produce_requests: produce_requests.partition_known" in err
    assert '"topic": "payments"' in err
    assert table_exists(spark, lakehouse, "produce_requests")
    assert not table_exists(spark, lakehouse, "produce_replay")
    failed = read_table(spark, lakehouse, "dq_results").filter(~F.col("success")).select("check_name").collect()
    assert [r["check_name"] for r in failed] == ["produce_requests.partition_known"]
