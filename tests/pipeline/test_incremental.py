"""Scheduled runs through the `ackreplay` command: date ranges, incremental ingest through the
`ingested_files` ledger, late files, duplicate copies, and retries after a failure.

The reference is one run over all the files: whatever the order and overlap of the runs, the tables
must end up equal to it (chispa), except for the run-id columns that name the run that wrote a row.

Why some tests take a minute: each is a sequence of whole `ackreplay run`s (up to five) in the test's
Spark session, with the data-quality checks off (test_dq.py has those).
"""

from __future__ import annotations

import gzip
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType

from ackreplay import pipeline
from ackreplay.cli import main
from ackreplay.config import load_config
from ackreplay.kafka_lines import (
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    produce_body,
    request_log_line,
    topics_describe,
)
from ackreplay.storage.lakehouse import read_table
from tests.conftest import spark_conf_yaml
from tests.helpers import assert_df_equality

# Hourly rotated request logs of one UTC broker on three UTC dates, in offset order.
HOURS = (
    datetime(2026, 11, 19, 23),
    datetime(2026, 11, 20, 0),
    datetime(2026, 11, 20, 23),
    datetime(2026, 11, 21, 0),
)
PRODUCES_PER_HOUR = 12
TABLES = (
    "request_log_lines",
    "quarantine",
    "produce_requests",
    "follower_fetches",
    "partitions",
    "produce_replay",
    "latency_percentiles",
    "risk_exposure",
    "availability",
    "routing",
    "policy_summary",
)

CONF = (
    """
lakehouse: {lakehouse}
spark:
  master: local[2]
  log_level: ERROR
  conf:
"""
    + spark_conf_yaml()
    + """replay:
  quorum_sizes: [2]
  lag_ms: []
quality:
  enabled: false  # the checks have their own tests (test_dq.py); these runs test scheduling, quickly
"""
)


def _hour_name(hour: datetime) -> str:
    return f"kafka-request.log.{hour:%Y-%m-%d-%H}"


def _hour_lines(index: int) -> str:
    """Produces to orders-0 every 4 s (acks=all), each followed 1 ms later by both followers' fetches past it."""
    start = HOURS[index]
    lines = []
    for i in range(PRODUCES_PER_HOUR):
        offset = index * PRODUCES_PER_HOUR + i
        ts = start + timedelta(seconds=4 * i + 1)
        body = produce_body(9, offset, -1, "orders", [ProducePartition(0, 200, offset)], Timing(remote=2.0))
        lines.append(request_log_line(ts, body))
        for follower in (2, 3):
            fetch = fetch_body(
                12, offset, follower, [FetchTopic("orders", "", [FetchPartition(0, offset + 1)])], Timing()
            )
            lines.append(request_log_line(ts + timedelta(milliseconds=1), fetch))
    return "\n".join(lines) + "\n"


def _write_hour(root: Path, index: int, gz: bool = False, name: str | None = None) -> Path:
    path = root / "c1" / "broker-1" / (name or _hour_name(HOURS[index]) + (".gz" if gz else ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _hour_lines(index).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def _write_topics(root: Path) -> None:
    (root / "c1").mkdir(parents=True, exist_ok=True)
    (root / "c1" / "topics.txt").write_text(topics_describe("orders", None, [[1, 2, 3]], {"min.insync.replicas": "2"}))


def _input(root: Path, hours: tuple[int, ...]) -> Path:
    _write_topics(root)
    for index in hours:
        _write_hour(root, index)
    return root


def _conf(tmp_path: Path, lakehouse: Path) -> str:
    conf = tmp_path / f"conf-{lakehouse.name}.yaml"
    conf.write_text(CONF.format(lakehouse=lakehouse))
    return str(conf)


def _ackreplay(command: str, conf: str, *args: str) -> int:
    return main([command, "--conf", conf, *args])


def _comparable(spark, lakehouse: str, name: str):
    """A table without the columns naming the run that wrote a row; maps and arrays as JSON (chispa sorts rows)."""
    df = read_table(spark, lakehouse, name)
    kept = [f for f in df.schema if not f.name.endswith("run_id")]
    return df.select(
        *[
            F.to_json(f.name).alias(f.name) if isinstance(f.dataType, (MapType, ArrayType)) else F.col(f.name)
            for f in kept
        ]
    )


def _assert_same_tables(spark, actual: str, expected: str) -> None:
    for name in TABLES:
        assert_df_equality(_comparable(spark, actual, name), _comparable(spark, expected, name), ignore_row_order=True)


def _ledger(spark, lakehouse: str) -> dict[str, tuple]:
    rows = read_table(spark, lakehouse, "ingested_files").collect()
    return {
        r["source_file"]: (r["status"], r["duplicate_of"], r["replay_run_id"] is not None, r["gold_run_id"] is not None)
        for r in rows
    }


@pytest.fixture(scope="module")
def single_pipeline_run(spark, tmp_path_factory):
    """The reference: one run over every hour, through the pipeline API (what `ackreplay run` calls): its
    lakehouse, its RunResult and the lines it echoed."""
    base = tmp_path_factory.mktemp("single")
    lakehouse = base / "lakehouse"
    echoed: list[str] = []
    config = load_config(_conf(base, lakehouse))
    result = pipeline.run(
        spark, config, str(lakehouse), [str(_input(base / "input", (0, 1, 2, 3)))], echo=echoed.append
    )
    return str(lakehouse), result, "\n".join(echoed)


@pytest.fixture(scope="module")
def single_run(single_pipeline_run) -> str:
    return single_pipeline_run[0]


def test_the_pipeline_api_runs_every_stage_and_returns_each_ones_report(single_pipeline_run):
    lakehouse, result, echoed = single_pipeline_run
    assert result.ingest.rows_written["produce_requests"] == 4 * PRODUCES_PER_HOUR
    assert result.replay.scope.clusters == result.gold.scope.clusters == ["c1"]
    # the first produce comes before the partition's first follower FETCH: outside any (fetch-derived) epoch
    assert result.replay.report.replayed == 4 * PRODUCES_PER_HOUR - 1
    assert result.replay.report.skipped == {"outside any known leader epoch or partition": 1}
    assert result.replay.run_id.startswith("replay-") and result.gold.run_id.startswith("gold-")
    assert result.gold.report.rows["policy_summary"] == 4  # one topic, four policies (quorum=2 besides the three)
    assert result.report_html == f"{lakehouse}/report/report.html" and Path(result.report_html).stat().st_size > 0
    assert list(result.steps.seconds) == [
        "listing and fingerprinting inputs",
        "ingest",
        "checks after ingest",
        "replay",
        "checks after replay",
        "gold",
        "checks after gold",
        "report",
    ]
    assert "5 files listed; 5 to ingest (5 new, 0 changed)" in echoed, echoed
    assert "replay of c1 (2026-11-19..2026-11-21): 5 input files ingested since the last replay" in echoed, echoed
    assert echoed.endswith(f"report: {result.report_html}")


def test_overlapping_date_ranges_and_a_late_file_equal_one_run_over_their_union(spark, single_run, tmp_path, capsys):
    """Runs over overlapping date ranges and a file that arrives late give the tables of one run over their
    union, and a run with nothing new changes no table. About a minute: three whole `ackreplay run`s."""
    inputs = _input(tmp_path / "input", (0, 2, 3))
    lakehouse = tmp_path / "lakehouse"
    conf = _conf(tmp_path, lakehouse)
    assert _ackreplay("run", conf, "--input", str(inputs), "--until", "2026-11-20") == 0
    first = capsys.readouterr().out
    # 2026-11-21 00:00 holds no line of 11-19 or 11-20; 2026-11-20 23:00 does (topics.txt has no date)
    assert "4 files listed; 3 to ingest (3 new, 0 changed), 0 unchanged, 0 duplicate copies skipped, 1 outside" in first
    # 2026-11-20 00:00 arrives late, after 2026-11-20 was processed; the next run overlaps on 2026-11-20.
    _write_hour(inputs, 1)
    assert _ackreplay("run", conf, "--input", str(inputs), "--since", "2026-11-20") == 0
    second = capsys.readouterr().out
    assert (
        "5 files listed; 2 to ingest (2 new, 0 changed), 2 unchanged, 0 duplicate copies skipped, 1 outside" in second
    )
    assert "replay of c1 (2026-11-20..2026-11-21): 2 input files ingested since the last replay" in second
    _assert_same_tables(spark, str(lakehouse), single_run)
    assert set(_ledger(spark, str(lakehouse)).values()) == {("ingested", None, True, True)}

    # Nothing new: every stage says so and leaves the tables alone.
    history = {
        name: f"DESCRIBE HISTORY delta.`{lakehouse}/{layer}/{name}`"
        for name, layer in (("produce_requests", "silver"), ("produce_replay", "silver"), ("policy_summary", "gold"))
    }
    versions = {name: spark.sql(query).count() for name, query in history.items()}
    assert _ackreplay("run", conf, "--input", str(inputs)) == 0
    third = capsys.readouterr().out
    assert "0 to ingest" in third and "replay: nothing to do" in third and "report: unchanged" in third
    assert versions == {name: spark.sql(query).count() for name, query in history.items()}


def test_duplicate_copies_are_ingested_once_and_reported(spark, tmp_path, capsys):
    """A .gz copy and a copy in a second input folder are ingested once, and the run says so; the tables equal
    a run over the originals. About a minute: three ingest commands (the module's docstring)."""
    reference = _input(tmp_path / "reference", (0, 1))
    inputs = _input(tmp_path / "input", (0, 1))
    _write_hour(inputs, 1, gz=True)  # kafka-request.log.2026-11-20-00 and a .gz copy of it
    other = tmp_path / "other"  # the same file in a second input folder
    _write_hour(other, 0)
    conf_ref, conf = _conf(tmp_path, tmp_path / "lh_ref"), _conf(tmp_path, tmp_path / "lh")
    assert _ackreplay("ingest", conf_ref, "--input", str(reference)) == 0
    capsys.readouterr()
    assert _ackreplay("ingest", conf, "--input", str(inputs), str(other)) == 0
    out = capsys.readouterr().out
    assert "5 files listed; 3 to ingest (3 new, 0 changed), 0 unchanged, 2 duplicate copies skipped" in out
    gz = "c1/broker-1/kafka-request.log.2026-11-20-00"
    assert f"skipped duplicate {inputs / gz}.gz: same content as {gz}" in out
    first_hour = "c1/broker-1/kafka-request.log.2026-11-19-23"
    assert f"skipped duplicate {other / first_hour}: same content as {inputs / first_hour}" in out
    for name in ("request_log_lines", "produce_requests", "follower_fetches"):
        assert_df_equality(
            _comparable(spark, str(tmp_path / "lh"), name),
            _comparable(spark, str(tmp_path / "lh_ref"), name),
            ignore_row_order=True,
        )
    ledger = _ledger(spark, str(tmp_path / "lh"))
    assert ledger[gz + ".gz"][:2] == ("duplicate", gz)
    assert ledger[gz][0] == "ingested"
    assert len(ledger) == 4  # the copy in the second folder has the same path: one ledger row

    # The original is deleted after its copy was compressed: the copy stays a duplicate, rows stay.
    (inputs / gz).unlink()
    assert _ackreplay("ingest", conf, "--input", str(inputs)) == 0
    assert "0 to ingest (0 new, 0 changed), 2 unchanged, 1 duplicate copies skipped" in capsys.readouterr().out
    assert read_table(spark, str(tmp_path / "lh"), "produce_requests").count() == 2 * PRODUCES_PER_HOUR


def test_a_live_log_that_grew_or_rotated_is_reingested_not_counted_twice(spark, tmp_path, capsys):
    inputs = _input(tmp_path / "input", ())
    live = inputs / "c1" / "broker-1" / "kafka-request.log"
    live.parent.mkdir(parents=True)
    live.write_text(_hour_lines(0)[: len(_hour_lines(0)) // 2].rsplit("\n", 1)[0] + "\n")
    conf = _conf(tmp_path, tmp_path / "lh")
    assert _ackreplay("ingest", conf, "--input", str(inputs)) == 0
    half = read_table(spark, str(tmp_path / "lh"), "request_log_lines").count()
    live.write_text(_hour_lines(0))  # grew to the whole hour
    capsys.readouterr()
    assert _ackreplay("ingest", conf, "--input", str(inputs)) == 0
    assert "1 to ingest (0 new, 1 changed)" in capsys.readouterr().out
    lines = read_table(spark, str(tmp_path / "lh"), "request_log_lines")
    assert half < lines.count() == 3 * PRODUCES_PER_HOUR
    # Rotation: the hour moves to its dated name unchanged (same content as the ledger's live file) and
    # the live file starts the next hour. The rotated file is not a copy: the live file's rows get replaced.
    shutil.move(live, inputs / "c1" / "broker-1" / _hour_name(HOURS[0]))
    live.write_text(_hour_lines(1))
    assert _ackreplay("ingest", conf, "--input", str(inputs)) == 0
    assert "2 to ingest (1 new, 1 changed), 1 unchanged, 0 duplicate copies skipped" in capsys.readouterr().out
    per_file = {
        r["source_file"]: r["count"]
        for r in read_table(spark, str(tmp_path / "lh"), "produce_requests").groupBy("source_file").count().collect()
    }
    assert per_file == {
        "c1/broker-1/" + _hour_name(HOURS[0]): PRODUCES_PER_HOUR,
        "c1/broker-1/kafka-request.log": PRODUCES_PER_HOUR,
    }
    # A broker whose log was just created holds no line yet: it ingests as zero lines (the tables'
    # last commits wrote rows, but this replace matches no file and commits nothing) and the rest stays.
    empty = inputs / "c1" / "broker-2" / "kafka-request.log"
    empty.parent.mkdir()
    empty.touch()
    assert _ackreplay("ingest", conf, "--input", str(inputs), "-v") == 0  # -v: the rows written per table too
    out = capsys.readouterr().out
    assert "1 to ingest (1 new, 0 changed), 3 unchanged" in out
    assert "request-log lines: 0 = parsed 0 + quarantined 0 + unused 0" in out
    assert "request_log_lines: 0 rows written" in out
    assert read_table(spark, str(tmp_path / "lh"), "request_log_lines").count() == 6 * PRODUCES_PER_HOUR


def test_a_retry_after_a_failure_converges_to_the_tables_of_an_uninterrupted_run(
    spark, single_run, tmp_path, monkeypatch, capsys
):
    import ackreplay.gold.stage
    import ackreplay.replay.stage

    inputs = _input(tmp_path / "input", (0, 1, 2, 3))
    lakehouse = tmp_path / "lakehouse"
    conf = _conf(tmp_path, lakehouse)

    def crash(*args, **kwargs):
        raise RuntimeError("executor lost\nsecond line of a long trace")

    # The replay fails after the ingest committed: the ledger keeps the files waiting for a replay.
    with monkeypatch.context() as patch:
        patch.setattr(ackreplay.replay.stage, "run_replay", crash)
        assert _ackreplay("run", conf, "--input", str(inputs)) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "error: ackreplay run failed: RuntimeError: executor lost"
    assert set(_ledger(spark, str(lakehouse)).values()) == {("ingested", None, False, False)}
    # The retry ingests nothing, replays, then the gold stage fails: the replay is kept, gold waits.
    with monkeypatch.context() as patch:
        patch.setattr(ackreplay.gold.stage, "run_gold", crash)
        assert _ackreplay("run", conf, "--input", str(inputs)) == 1
    assert set(_ledger(spark, str(lakehouse)).values()) == {("ingested", None, True, False)}
    capsys.readouterr()
    assert _ackreplay("run", conf, "--input", str(inputs)) == 0
    out = capsys.readouterr().out
    assert "0 to ingest" in out and "replay: nothing to do" in out and "gold of c1" in out
    _assert_same_tables(spark, str(lakehouse), single_run)
    assert set(_ledger(spark, str(lakehouse)).values()) == {("ingested", None, True, True)}


def test_bad_dates_and_missing_input_exit_2_with_one_line(tmp_path, capsys):
    conf = _conf(tmp_path, tmp_path / "lh")
    assert _ackreplay("run", conf, "--input", str(tmp_path), "--since", "2026-11-21", "--until", "2026-11-20") == 2
    assert capsys.readouterr().err == "error: --since 2026-11-21 is after --until 2026-11-20\n"
    assert _ackreplay("ingest", conf, "--input", str(tmp_path / "missing")) == 2
    err = capsys.readouterr().err
    assert err == f"error: input folder {tmp_path / 'missing'} does not exist or is not a folder\n"
    assert not (tmp_path / "lh" / "meta" / "ingested_files").exists()


def test_replay_and_gold_commands_without_new_work_do_nothing(spark, single_run, tmp_path, capsys):
    conf = _conf(tmp_path, Path(single_run))
    versions = spark.sql(f"DESCRIBE HISTORY delta.`{single_run}/silver/produce_replay`").count()
    assert _ackreplay("replay", conf, "--since", "2026-11-20") == 0
    assert "replay: nothing to do (no newly ingested file waits for replay on 2026-11-20..…; --full redoes it)" in (
        capsys.readouterr().out
    )
    assert _ackreplay("gold", conf, "--full", "--since", "2026-12-01") == 0
    assert "gold: nothing to do (no cluster has rows in produce_replay on 2026-12-01..…)" in capsys.readouterr().out
    assert spark.sql(f"DESCRIBE HISTORY delta.`{single_run}/silver/produce_replay`").count() == versions


def test_a_replay_by_dates_replaces_only_the_produces_of_those_dates(spark, single_run, tmp_path, capsys):
    lakehouse = tmp_path / "lakehouse"
    shutil.copytree(single_run, lakehouse)
    conf = _conf(tmp_path, lakehouse)
    run_ids = lambda path: {  # noqa: E731
        str(r["event_date"]): r["replay_run_id"]
        for r in read_table(spark, str(path), "produce_replay")
        .select("event_date", "replay_run_id")
        .distinct()
        .collect()
    }
    before = run_ids(lakehouse)
    assert sorted(before) == ["2026-11-19", "2026-11-20", "2026-11-21"]

    assert _ackreplay("replay", conf, "--full", "--since", "2026-11-20", "--until", "2026-11-20") == 0
    out = capsys.readouterr().out
    assert f"replayed {2 * PRODUCES_PER_HOUR:,}" in out  # the two hours of 2026-11-20, not all four

    after = run_ids(lakehouse)
    assert after["2026-11-19"] == before["2026-11-19"] and after["2026-11-21"] == before["2026-11-21"]
    assert after["2026-11-20"] != before["2026-11-20"]
    assert_df_equality(
        _comparable(spark, str(lakehouse), "produce_replay"),
        _comparable(spark, single_run, "produce_replay"),
        ignore_row_order=True,
    )
