"""Hostile and broken input through the ingest (and replay) stages: nothing lost, clear reasons.

One input folder, one cluster per kind of trouble, ingested once (module fixture). Covered elsewhere,
not repeated here:
- empty or missing input folder: tests/pipeline/test_ingest_stage.py::test_empty_input_folder_is_a_clear_error
- a file that vanished before reading: tests/pipeline/test_ingest_stage.py::test_a_file_that_vanished_before_reading_fails_naming_it
- unknown key / wrong type / unknown zone in the conf: tests/unit/test_config.py, and through the command
  (exit 2 before Spark) tests/pipeline/test_cli.py::test_bad_conf_exits_2_naming_the_key and below
- invalid UTF-8 and NUL bytes inside a line: tests/unit/test_line_reader.py
"""

from __future__ import annotations

import gzip
import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from ackreplay.cli import main
from ackreplay.config import parse_config
from ackreplay.ingest.request_log_parser import UNKNOWN_TOPIC_ID as UNKNOWN_TOPIC_ID_REASON
from ackreplay.ingest.stage import run_ingest
from ackreplay.kafka_lines import (
    Client,
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    log_time,
    produce_body,
    request_log_line,
    topics_describe,
)
from ackreplay.quality.runner import QualityError, run_quality
from ackreplay.replay.stage import run_replay
from ackreplay.storage.lakehouse import read_table

T0 = datetime(2026, 11, 20, 12, 0, 0)
TOPIC_ID = "9X2k7vQJTiGq5lq6w3xZ1A"
UNKNOWN_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
GARBAGE = random.Random(7).randbytes(50_000)
MAX_LINE_BYTES = 4096


def _produce(i: int, offset: int, ts: datetime, partition: int = 0, acks: int = -1, **kw) -> str:
    return request_log_line(
        ts, produce_body(9, i, acks, "orders", [ProducePartition(partition, 100, offset)], Timing(remote=1.0), **kw)
    )


def _fetch(i: int, follower: int, offset: int, ts: datetime) -> str:
    topic = FetchTopic("orders", TOPIC_ID, [FetchPartition(0, offset, high_watermark=offset)])
    return request_log_line(ts, fetch_body(12, i, follower, [topic], Timing()))


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _lines(*lines: str) -> str:
    return "\n".join(lines) + "\n"


TOPICS = topics_describe("orders", TOPIC_ID, [[1, 2, 3], [1, 2, 3]], {"min.insync.replicas": "2"})
HUGE = _produce(1, 1, T0, client=Client(client_id="x" * (3 * MAX_LINE_BYTES)))


@pytest.fixture(scope="module")
def hostile(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    # two ingest runs into one lakehouse: request-log trouble, then broker-log trouble (one run with both
    # trips the broker-log reconciliation: see test_quarantined_request_lines_next_to_clean_broker_logs)
    inp, inp_broker_logs = root / "input", root / "input-broker-logs"
    for cluster in ("garbage", "cut", "huge", "gz", "skew", "unknown_id"):
        _write(inp / cluster / "topics.txt", TOPICS)
    for cluster in ("tz", "nofetch"):
        _write(inp_broker_logs / cluster / "topics.txt", TOPICS)
    _write(inp / "garbage" / "broker-1" / "kafka-request.log", GARBAGE)
    good = [_produce(i, i, T0 + timedelta(milliseconds=10 * i)) for i in range(4)]
    _write(
        inp / "cut" / "broker-1" / "kafka-request.log",
        good[0] + "\n" + good[1][:90] + "\n" + good[2] + "\n" + good[3][:-40],
    )
    _write(inp / "huge" / "broker-1" / "kafka-request.log", _lines(good[0], HUGE, good[2]))
    whole = gzip.compress(_lines(*[_produce(i, i, T0 + timedelta(milliseconds=i)) for i in range(2000)]).encode())
    _write(inp / "gz" / "broker-1" / "kafka-request.log.2026-11-20-12.gz", whole[: len(whole) // 2])
    # broker 2's clock runs 3 s ahead: the same instant is logged 3 s later there
    _write(inp / "skew" / "broker-1" / "kafka-request.log", _lines(_produce(1, 10, T0)))
    _write(
        inp / "skew" / "broker-2" / "kafka-request.log", _lines(_produce(1, 20, T0 + timedelta(seconds=3), partition=1))
    )
    # brokers log UTC, the conf claims Asia/Tokyo (UTC+9): lastCaughtUpTimeMs (epoch ms) gives it away
    caught_up_ms = int((T0 - timedelta(seconds=3) - datetime(1970, 1, 1)).total_seconds() * 1000)
    _write(
        inp_broker_logs / "tz" / "broker-1" / "server.log",
        _lines(
            f"[{log_time(T0)}] INFO [Partition orders-0 broker=1] Shrinking ISR from 1,2,3 to 1,3. Leader: "
            f"(highWatermark: 10, endOffset: 12). Out of sync replicas: (brokerId: 2, endOffset: 10, "
            f"lastCaughtUpTimeMs: {caught_up_ms}). (kafka.cluster.Partition)",
            f"[{log_time(T0 + timedelta(milliseconds=20))}] INFO [Partition orders-0 broker=1] ISR updated to 1,3  "
            "and version updated to 1 (kafka.cluster.Partition)",
        ),
    )
    _write(
        inp / "unknown_id" / "broker-1" / "kafka-request.log",
        _lines(
            request_log_line(
                T0, produce_body(13, 1, -1, "?", [ProducePartition(0, 100, 0)], Timing(), topic_id=UNKNOWN_TOPIC_ID)
            ),
            request_log_line(
                T0, produce_body(13, 2, -1, "orders", [ProducePartition(0, 100, 0)], Timing(), topic_id=TOPIC_ID)
            ),
        ),
    )
    # partition 0's followers fetch; partition 1's never do (acks=1 produces, so the broker acked them)
    nofetch = []
    for i in range(20):
        ts = T0 + timedelta(milliseconds=50 * i)
        nofetch += [_produce(2 * i, i, ts, partition=0, acks=1), _produce(2 * i + 1, i, ts, partition=1, acks=1)]
        nofetch += [_fetch(i, f, i + 1, ts + timedelta(milliseconds=5)) for f in (2, 3)]
    _write(inp_broker_logs / "nofetch" / "broker-1" / "kafka-request.log", _lines(*nofetch))
    leader_start = (
        "INFO [Broker id=1] Leader orders-{p} with topic id Some("
        + TOPIC_ID
        + ") starts at leader epoch 0 from offset 0"
        " with partition epoch 0, high watermark 0, ISR [1,2,3], adding replicas [] and removing replicas [] ."
        " Previous leader None and previous leader epoch was -1. (state.change.logger)"
    )
    _write(
        inp_broker_logs / "nofetch" / "broker-1" / "state-change.log",
        _lines(*[f"[{log_time(T0 - timedelta(seconds=1))}] " + leader_start.format(p=p) for p in (0, 1)]),
    )
    config = parse_config(
        {
            # the garbage cluster's one file has no readable line: listed, not refused (the test below refuses it)
            "ingest": {"max_line_bytes": MAX_LINE_BYTES, "read_chunk_bytes": 8192, "unreadable_files": "warning"},
            "clusters": {"skew": {"broker_clock_offsets_ms": {2: 3000}}, "tz": {"log_timezone": "Asia/Tokyo"}},
            "replay": {"quorum_sizes": [2], "lag_ms": [3000]},
        }
    )
    lakehouse = str(root / "lakehouse")
    reports = [run_ingest(spark, config, str(folder), lakehouse) for folder in (inp, inp_broker_logs)]
    return config, lakehouse, reports[0]


def _bronze(spark, lakehouse: str, cluster: str):
    return read_table(spark, lakehouse, "request_log_lines").filter(F.col("cluster") == cluster)


def _status(spark, lakehouse: str, cluster: str) -> dict[str, int]:
    return {r["status"]: r["count"] for r in _bronze(spark, lakehouse, cluster).groupBy("status").count().collect()}


def test_binary_garbage_is_quarantined_line_by_line(spark, hostile):
    _, lakehouse, report = hostile
    expected_lines = GARBAGE.count(b"\n") + (0 if GARBAGE.endswith(b"\n") else 1)
    assert _status(spark, lakehouse, "garbage") == {"quarantined": expected_lines}
    quarantine = read_table(spark, lakehouse, "quarantine").filter("cluster = 'garbage'")
    assert quarantine.count() == expected_lines
    assert quarantine.filter(F.col("reason").isNull()).count() == 0
    # with ingest.unreadable_files: warning the file is listed with its most frequent reason, and only it
    top = quarantine.groupBy("reason").count().orderBy(F.desc("count"), F.desc("reason")).first()["reason"]
    assert report.unreadable_files == [("garbage/broker-1/kafka-request.log", expected_lines, top)]
    assert f"    garbage/broker-1/kafka-request.log: {expected_lines:,} lines, most: {top}" in report.summary_lines()


def test_a_request_log_with_no_readable_line_stops_the_run_naming_it(spark, tmp_path, capsys):
    """Random bytes where a request log should be: every line quarantined would leave the cluster without
    produces, so the ingest stops (exit 2) naming the file and the way on; the lines stay in quarantine."""
    inp = tmp_path / "input"
    _write(inp / "garbage" / "topics.txt", TOPICS)
    _write(inp / "garbage" / "broker-1" / "kafka-request.log", GARBAGE)
    _write(inp / "fine" / "topics.txt", TOPICS)
    _write(inp / "fine" / "broker-1" / "kafka-request.log", _lines(_produce(1, 0, T0)))
    lakehouse = str(tmp_path / "lakehouse")
    assert main(["ingest", "--input", str(inp), "--lakehouse", lakehouse]) == 2
    err = capsys.readouterr().err
    lines = GARBAGE.count(b"\n") + (0 if GARBAGE.endswith(b"\n") else 1)
    assert (
        f"1 request-log file(s) with no line the ingest could read, every one quarantined:\n  garbage/broker-1/kafka-request.log: {lines:,} lines, most: "
        in err
    )
    assert "set ingest.unreadable_files: warning to go on without them" in err
    assert read_table(spark, lakehouse, "quarantine").filter("cluster = 'garbage'").count() == lines


def test_lines_cut_mid_json_are_quarantined_and_their_neighbours_kept(spark, hostile):
    _, lakehouse, _ = hostile
    rows = {r["line_number"]: (r["status"], r["detail"]) for r in _bronze(spark, lakehouse, "cut").collect()}
    assert sorted(rows) == [1, 2, 3, 4]
    assert rows[1][0] == rows[3][0] == "parsed"
    for cut in (2, 4):
        assert rows[cut][0] == "quarantined"
    produce = read_table(spark, lakehouse, "produce_requests").filter("cluster = 'cut'")
    assert sorted(r["base_offset"] for r in produce.collect()) == [0, 2]


def test_a_huge_line_is_quarantined_with_its_first_bytes_kept(spark, hostile):
    _, lakehouse, _ = hostile
    rows = {r["line_number"]: r for r in _bronze(spark, lakehouse, "huge").collect()}
    assert [rows[n]["status"] for n in (1, 2, 3)] == ["parsed", "quarantined", "parsed"]
    assert f"exceeds ingest.max_line_bytes={MAX_LINE_BYTES}" in rows[2]["detail"]
    assert rows[2]["line"] == HUGE[:MAX_LINE_BYTES]


def test_a_gzip_cut_mid_stream_keeps_the_lines_before_the_cut(spark, hostile):
    _, lakehouse, _ = hostile
    status = _status(spark, lakehouse, "gz")
    assert status["quarantined"] == 1 and 0 < status["parsed"] < 2000
    produce = read_table(spark, lakehouse, "produce_requests").filter("cluster = 'gz'")
    # the lines kept are the first ones, in order: offsets 0..n-1
    assert sorted(r["base_offset"] for r in produce.collect()) == list(range(status["parsed"]))


def test_broker_clock_offsets_align_brokers_whose_clocks_disagree(spark, hostile):
    _, lakehouse, _ = hostile
    produce = read_table(spark, lakehouse, "produce_requests").filter("cluster = 'skew'")
    times = {r["broker_id"]: r["t_log"] for r in produce.collect()}
    assert times == {1: T0, 2: T0}


def test_a_topic_id_missing_from_topics_txt_is_quarantined_with_the_reason(spark, hostile):
    _, lakehouse, _ = hostile
    rows = {r["line_number"]: r for r in _bronze(spark, lakehouse, "unknown_id").collect()}
    assert (rows[1]["status"], rows[1]["detail"]) == ("quarantined", UNKNOWN_TOPIC_ID_REASON)
    assert rows[2]["status"] == "parsed"
    # the quarantine row keeps the line, so the id that is missing from topics.txt can be read off it
    [quarantined] = read_table(spark, lakehouse, "quarantine").filter("cluster = 'unknown_id'").collect()
    assert quarantined["reason"] == UNKNOWN_TOPIC_ID_REASON and UNKNOWN_TOPIC_ID in quarantined["line"]


def test_a_wrong_time_zone_is_caught_by_the_clock_consistency_check(spark, hostile):
    config, lakehouse, report = hostile
    quality = run_quality(spark, config, lakehouse, "ingest", ["tz"], "hostile-tz")
    [first, second] = [o for o in quality.outcomes if o.check == "isr_changes.clock_consistent"]
    assert (first.success, second.success) == (False, True)  # 9 h before the true time: "caught up in the future"
    assert first.severity == "warning" and first.unexpected_count == 1
    [row] = first.sample_rows
    assert row["min_caught_up_lead_ms"] == -9 * 3600 * 1000 + 3000


def test_the_other_hostile_clusters_pass_every_blocking_check(spark, hostile):
    config, lakehouse, report = hostile
    clusters = ["garbage", "cut", "huge", "gz", "skew", "unknown_id", "nofetch"]
    quality = run_quality(spark, config, lakehouse, "ingest", clusters, "hostile-ingest")
    assert quality.blocking_failures == []
    assert all(c.ok for c in quality.counts)


def test_a_partition_whose_followers_never_fetch_times_out_under_acks_all(spark, hostile):
    config, lakehouse, _ = hostile
    replay = run_replay(spark, config, lakehouse, ["nofetch"], run_id="hostile-replay")
    assert replay.replayed == 40 and replay.skipped == {}
    out = read_table(spark, lakehouse, "produce_replay").filter("cluster = 'nofetch'")
    outcomes = {
        (r["partition"], r["policy"], r["outcome"]): r["count"]
        for r in out.groupBy("partition", "policy", "outcome").count().collect()
    }
    assert outcomes[(1, "acks=1", "acked")] == 20
    for policy in ("acks=all", "min.insync", "quorum=2"):
        assert outcomes[(1, policy, "timeout")] == 20
        assert (1, policy, "acked") not in outcomes
    assert outcomes[(0, "acks=all", "acked")] == 20
    run_quality(spark, config, lakehouse, "replay", ["nofetch"], "hostile-replay")  # no blocking failure


def test_a_cluster_with_produces_and_no_follower_evidence_is_refused_by_the_replay(spark, hostile, tmp_path):
    """The skew cluster has PRODUCE lines and neither follower FETCH lines nor LEO scrapes: nothing says when a
    follower had a batch, so the replay stops naming it; `replay.missing_follower_evidence: warning` replays it
    and says so."""
    import shutil

    from ackreplay.storage.inputs import InputError

    config, lakehouse, _ = hostile
    with pytest.raises(InputError, match=r"^1 cluster\(s\) with produces and no follower evidence: skew\n"):
        run_replay(spark, config, lakehouse, ["skew"], run_id="hostile-blind")
    copy = str(shutil.copytree(lakehouse, tmp_path / "lakehouse"))
    lenient = config.model_copy(
        update={"replay": config.replay.model_copy(update={"missing_follower_evidence": "warning"})}
    )
    report = run_replay(spark, lenient, copy, ["skew"], run_id="hostile-blind")
    assert report.blind_clusters == ["skew"]
    assert (
        "  no follower evidence for skew (replay.missing_follower_evidence: warning): every produce waiting for"
        " a follower replays as a timeout" in report.summary_lines()
    )
    # its broker logged no leadership either (no state-change.log): its two produces fall in no leader epoch
    assert (report.replayed, report.skipped) == (0, {"outside any known leader epoch or partition": 2})


def test_conf_errors_name_the_key_before_spark_starts(tmp_path, capsys):
    conf = tmp_path / "bad.yaml"
    conf.write_text(
        "ingest:\n  max_line_bytes: lots\nquality:\n  checks:\n    produce_requests.no_such_check: warning\n"
    )
    assert main(["ingest", "--input", str(tmp_path), "--conf", str(conf)]) == 2
    err = capsys.readouterr().err
    assert "key 'ingest.max_line_bytes'" in err and "unknown check(s) produce_requests.no_such_check" in err


def test_a_blocking_failure_names_table_check_and_rows(spark, hostile):
    config, lakehouse, _ = hostile
    strict = parse_config({**config.model_dump(), "quality": {"checks": {"isr_changes.clock_consistent": "blocking"}}})
    with pytest.raises(QualityError, match=r"isr_changes: isr_changes\.clock_consistent .*min_caught_up_lead_ms"):
        run_quality(spark, strict, lakehouse, "ingest", ["tz"], "hostile-tz-strict")


def test_quarantined_request_lines_next_to_clean_broker_logs(spark, tmp_path):
    inp = tmp_path / "input"
    _write(inp / "c1" / "topics.txt", TOPICS)
    _write(inp / "c1" / "broker-1" / "kafka-request.log", _lines(_produce(1, 0, T0), "\x00 not a log line"))
    _write(
        inp / "c1" / "broker-1" / "server.log",
        _lines(
            f"[{log_time(T0)}] INFO [Partition orders-0 broker=1] ISR updated to 1,3  and version updated to 1"
            " (kafka.cluster.Partition)"
        ),
    )
    report = run_ingest(spark, parse_config({}), str(inp), str(tmp_path / "lakehouse"))
    assert report.line_status == {"parsed": 1, "quarantined": 1}


def test_a_cluster_without_topics_txt_stops_the_run_before_its_request_logs_are_read(spark, tmp_path, capsys):
    """Request logs naming topics by id and no topics.txt: every such line would be quarantined and the cluster
    left without produces, so the ingest stops (exit 2) naming the cluster and the file it needs; a topics.txt
    ingested by an earlier run counts, and `ingest.missing_topics: warning` goes on. About a minute: four
    ingest commands, three of which write every ingest table (each a few Delta commits), are the case."""
    inp = tmp_path / "input"
    by_id = request_log_line(
        T0, produce_body(13, 1, -1, "?", [ProducePartition(0, 100, 0)], Timing(), topic_id=TOPIC_ID)
    )
    _write(inp / "c9" / "broker-1" / "kafka-request.log", _lines(by_id, _produce(2, 1, T0)))  # by id, by name
    lakehouse = str(tmp_path / "lakehouse")
    assert main(["ingest", "--input", str(inp), "--lakehouse", lakehouse]) == 2
    err = capsys.readouterr().err
    assert "1 cluster(s) with request logs and no topics.txt, in this input or ingested before: c9\n" in err
    assert "Add <input>/<cluster>/topics.txt" in err and "ingest.missing_topics: warning" in err
    assert not (tmp_path / "lakehouse" / "bronze").exists()  # stopped before the request logs were read

    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("ingest:\n  missing_topics: warning\n")
    assert main(["ingest", "--input", str(inp), "--lakehouse", lakehouse, "--conf", str(lenient)]) == 0
    out = capsys.readouterr().out
    assert "no topics.txt for c9 (ingest.missing_topics: warning)" in out
    assert f"quarantined       1  {UNKNOWN_TOPIC_ID_REASON}" in out

    # topics.txt arrives in a later input: the cluster has it from then on, later request logs alone are fine
    later = tmp_path / "later"
    _write(later / "c9" / "topics.txt", TOPICS)
    assert main(["ingest", "--input", str(later), "--lakehouse", lakehouse]) == 0
    more = tmp_path / "more"
    _write(more / "c9" / "broker-1" / "kafka-request.log.1", _lines(by_id))
    assert main(["ingest", "--input", str(more), "--lakehouse", lakehouse]) == 0
    assert "no topics.txt" not in capsys.readouterr().out
