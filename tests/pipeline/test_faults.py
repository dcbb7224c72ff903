"""Fault injection: `ackreplay run` killed (SIGKILL) while a Delta write is in progress leaves every table
at a committed version, and a rerun produces the same tables as a run that was never interrupted.

One sequence, as an operator's scheduler would meet it: a run killed mid-ingest (Spark's Delta writer,
`produce_requests`), its retry killed mid-replay (the replay's own writer, `produce_replay`), and a third run
that completes. Why it takes minutes: two child JVMs that are killed and three whole runs in the test's session
(the first run, the clean run and the final rerun). The input spans DAYS event dates, so that each
killed write has many data files to write after the first one: the kill lands at the first new file
(polled every 20 ms), the write's last file and its commit come later: an uninterrupted produce_requests
write took 0.8 s from its first to its last of 20 files (10 dates, 2 tasks), then committed, on a
loaded 2-core machine; the killed runs had written 1 file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from ackreplay.cli import main
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
from ackreplay.storage.lakehouse import TABLES, read_table, table_exists, table_path
from tests.conftest import CHILD_JVM_OPTIONS, spark_conf_yaml
from tests.helpers import TOPIC_ID, assert_df_equality
from tests.pipeline.test_ingest_stage import T0, _write

# Columns naming the run that wrote a row: they differ between the interrupted and the clean lakehouse
# by construction (time-based run ids; the first ingest there read fewer files).
RUN_COLUMNS = ("ingest_run_id", "replay_run_id", "gold_run_id")
COMPARED = [name for name in TABLES if name not in ("dq_results", "ingested_files")]
# event dates of the input: one data file per date and task in the ingest's writes, one replay group a day
DAYS = 10


def _lines(broker: int, days: int, first_offset: int) -> list[str]:
    """A burst of 12 produces (one a second) and their follower fetches on each of `days` days: many
    event_date partitions make a slow write, and one burst a day keeps the replay's groups (time
    buckets) and their data files to about one per day."""
    lines = []
    for i in range(days * 12):
        ts = T0 + timedelta(days=i // 12, seconds=i % 12, milliseconds=broker)
        offset = first_offset + i
        lines.append(
            request_log_line(
                ts,
                produce_body(
                    13,
                    i,
                    -1,
                    "orders",
                    [ProducePartition(broker - 1, 100, offset)],
                    Timing(remote=1.0),
                    topic_id=TOPIC_ID,
                ),
            )
        )
        for follower in {1, 2, 3} - {broker}:
            topic = FetchTopic("orders", TOPIC_ID, [FetchPartition(broker - 1, offset + 1)])
            lines.append(
                request_log_line(ts + timedelta(milliseconds=1), fetch_body(17, i, follower, [topic], Timing()))
            )
    return lines


def _conf(tmp_path: Path) -> str:
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        "spark:\n  master: local[2]\n  log_level: ERROR\n  conf:\n"
        # the test session's settings, in the killed run's child JVM
        + spark_conf_yaml({"spark.driver.memory": "1g", "spark.driver.extraJavaOptions": CHILD_JVM_OPTIONS})
        + "replay:\n  quorum_sizes: [2]\n  lag_ms: [3000]\n"
        # this test is about atomic commits; the checks between stages are tested in test_dq.py
        "quality:\n  enabled: false\n"
    )
    return str(conf)


def _parquet_files(lakehouse: str, name: str) -> set[Path]:
    root = Path(table_path(lakehouse, name))
    return {p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts} if root.exists() else set()


def _version(spark, lakehouse: str, name: str) -> int:
    return DeltaTable.forPath(spark, table_path(lakehouse, name)).history(1).first()["version"]


def _comparable(spark, lakehouse: str, name: str):
    df = read_table(spark, lakehouse, name).drop(*RUN_COLUMNS)
    # chispa sorts rows, and maps cannot be sorted: compare them as JSON text
    return df.select(
        *[F.to_json(f.name).alias(f.name) if isinstance(f.dataType, MapType) else F.col(f.name) for f in df.schema]
    )


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """The second input, the conf, the lakehouse after the first run (the test continues it) and the clean run
    over the second input."""
    root = tmp_path_factory.mktemp("faults")
    first, second = root / "first", root / "second"
    topics = topics_describe("orders", TOPIC_ID, [[1, 2, 3], [2, 3, 1]], {"min.insync.replicas": "2"})
    for folder in (first, second):
        _write(folder / "c1" / "broker-1" / "kafka-request.log.2026-11-20-12", _lines(1, DAYS, 0))
        (folder / "c1" / "topics.txt").write_text(topics)
    _write(second / "c1" / "broker-2" / "kafka-request.log.2026-11-20-12", _lines(2, DAYS, 0))
    conf = _conf(root)
    after_first, clean = str(root / "after-first"), str(root / "clean")
    assert main(["run", "--input", str(first), "--lakehouse", after_first, "--conf", conf]) == 0
    assert main(["run", "--input", str(second), "--lakehouse", clean, "--conf", conf]) == 0
    return second, conf, after_first, clean


def _kill_mid_write(spark, lakehouse: str, second: Path, conf: str, killed_table: str) -> None:
    """`ackreplay run` on `second` in a child process, killed once `killed_table`'s new data files appear (its
    write's tasks run, its commit has not happened); then every table is at a committed version, the killed
    table as before the run, and no stage after it wrote anything."""
    before = {name: _version(spark, lakehouse, name) for name in COMPARED if table_exists(spark, lakehouse, name)}
    killed_before = _comparable(spark, lakehouse, killed_table).localCheckpoint()
    files_before = _parquet_files(lakehouse, killed_table)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ackreplay.cli",
            "run",
            "--input",
            str(second),
            "--lakehouse",
            lakehouse,
            "--conf",
            conf,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 900
    try:
        while not (_parquet_files(lakehouse, killed_table) - files_before):
            assert proc.poll() is None, f"the run ended before its {killed_table} write was seen"
            assert time.monotonic() < deadline, f"no {killed_table} write within 15 minutes"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM: nothing gets to clean up
        proc.wait()

    # data files of the killed write are on disk, but no commit references them
    assert _parquet_files(lakehouse, killed_table) - files_before
    assert _version(spark, lakehouse, killed_table) == before[killed_table]
    assert_df_equality(_comparable(spark, lakehouse, killed_table), killed_before, ignore_row_order=True)
    for name, version in before.items():  # every table is readable at a committed version, none beyond the killed stage
        assert _version(spark, lakehouse, name) >= version
        read_table(spark, lakehouse, name).count()
    for name in ("produce_replay", "latency_percentiles", "policy_summary"):  # the stages after it did not run
        assert _version(spark, lakehouse, name) == before[name], name


def test_runs_killed_mid_write_leave_committed_tables_and_the_rerun_equals_a_clean_run(spark, runs):
    second, conf, lakehouse, clean = runs  # the killed runs continue the first run's lakehouse
    # produce_requests: Spark's Delta writer (ingest); produce_replay: the replay's Python workers write the
    # data files and the driver commits them with delta-rs (ackreplay/storage/arrow_delta.py). The second
    # run is the retry of the first: it ingests the files the killed one did not finish, then is killed itself.
    _kill_mid_write(spark, lakehouse, second, conf, "produce_requests")
    _kill_mid_write(spark, lakehouse, second, conf, "produce_replay")

    assert main(["run", "--input", str(second), "--lakehouse", lakehouse, "--conf", conf]) == 0
    for name in COMPARED:
        assert table_exists(spark, clean, name) == table_exists(spark, lakehouse, name), name
        if table_exists(spark, clean, name):
            assert_df_equality(
                _comparable(spark, lakehouse, name), _comparable(spark, clean, name), ignore_row_order=True
            )
