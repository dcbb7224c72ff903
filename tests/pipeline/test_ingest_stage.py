"""The ingest stage on an input folder: every line accounted for, idempotent reruns, file-level replacement."""

from __future__ import annotations

import gzip
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from ackreplay.config import parse_config
from ackreplay.ingest.stage import run_ingest
from ackreplay.kafka_lines import (
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    other_body,
    produce_body,
    request_log_line,
    topics_describe,
)
from ackreplay.quality.catalog import STAGE_TABLES
from ackreplay.storage.inputs import InputError, InputFile
from ackreplay.storage.lakehouse import read_table, table_exists
from ackreplay.storage.line_reader import read_lines
from tests.helpers import TOPIC_ID, assert_df_equality

CONFIG = parse_config({"clusters": {"c1": {"log_timezone": "Europe/Berlin"}}})
T0 = datetime(2026, 11, 20, 12, 0, 0)


def _hour_of_lines(start: datetime, n: int, first_offset: int) -> list[str]:
    lines = []
    for i in range(n):
        ts = start + timedelta(milliseconds=20 * i)
        lines.append(
            request_log_line(
                ts,
                produce_body(
                    13,
                    i,
                    -1,
                    "orders",
                    [ProducePartition(0, 100, first_offset + i)],
                    Timing(remote=1.5),
                    topic_id=TOPIC_ID,
                ),
            )
        )
        lines.append(
            request_log_line(
                ts,
                fetch_body(
                    17,
                    i,
                    2,
                    [FetchTopic("orders", TOPIC_ID, [FetchPartition(0, first_offset + i)])],
                    Timing(),
                    session_id=5,
                    session_epoch=i + 1,
                ),
            )
        )
    lines.append(request_log_line(start, other_body("METADATA", 3, 12, 1)))
    return lines


def _write(path: Path, lines: list[str], gz: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)


@pytest.fixture()
def input_dir(tmp_path: Path) -> Path:
    root = tmp_path / "input"
    broker1, broker2 = root / "c1" / "broker-1", root / "c1" / "broker-2"
    _write(broker1 / "kafka-request.log.2026-11-20-12.gz", _hour_of_lines(T0, 10, 0), gz=True)
    _write(broker1 / "kafka-request.log", _hour_of_lines(T0 + timedelta(hours=1), 5, 10))
    bad = _hour_of_lines(T0, 3, 0) + ["\x00garbage", request_log_line(T0, other_body("METADATA", 3, 12, 1))[:120]]
    _write(broker2 / "kafka-request.log.2026-11-20-12", bad)
    (root / "c1" / "topics.txt").write_text(
        topics_describe("orders", TOPIC_ID, [[1, 2, 3]], {"min.insync.replicas": "2"})
    )
    (root / "README.txt").write_text("not an input")
    return root


# What this input's ingest writes at least; the tables of inputs it lacks (scrapes, dumps) may be absent.
WRITTEN_HERE = {
    "request_log_lines",
    "quarantine",
    "produce_requests",
    "follower_fetches",
    "partitions",
    "isr_changes",
    "leader_epochs",
    "follower_starts",
}


def _snapshot(spark, lakehouse: str) -> dict:
    """Every table the ingest wrote (the data-quality catalog's ingest tables), with map columns as JSON text
    (chispa sorts rows; maps cannot be sorted)."""
    written = [name for name in STAGE_TABLES["ingest"] if table_exists(spark, lakehouse, name)]
    assert set(written) >= WRITTEN_HERE
    out = {}
    for name in written:
        df = read_table(spark, lakehouse, name)
        out[name] = df.select(
            *[F.to_json(f.name).alias(f.name) if isinstance(f.dataType, MapType) else F.col(f.name) for f in df.schema]
        )
    return out


def test_every_line_is_accounted_for_and_reruns_are_idempotent(spark, input_dir, tmp_path):
    lakehouse = str(tmp_path / "lakehouse")
    report = run_ingest(spark, CONFIG, str(input_dir), lakehouse)
    # 10*2+1 + 5*2+1 + 3*2+1+2 lines written above
    assert report.total_lines == 41
    assert report.line_status == {"parsed": 36, "unused": 3, "quarantined": 2}
    assert report.quarantine_reasons == {
        "not a log4j line '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)' (or ',SSSSSS')": 1,
        "malformed or truncated JSON": 1,
    }
    assert report.ignored_files == ["README.txt"]
    assert report.rows_written == {
        "partitions": 1,
        "request_log_lines": 41,
        "produce_requests": 18,
        "follower_fetches": 18,
    }
    bronze = read_table(spark, lakehouse, "request_log_lines")
    by_status = {r["status"]: r["count"] for r in bronze.groupBy("status").count().collect()}
    assert by_status == report.line_status
    quarantine = read_table(spark, lakehouse, "quarantine")
    assert quarantine.count() == 2
    assert {r["line_number"] for r in quarantine.collect()} == {8, 9}
    # Berlin 12:00 is 11:00 UTC
    first = read_table(spark, lakehouse, "produce_requests").agg(F.min("t_log")).first()[0]
    assert first == datetime(2026, 11, 20, 11, 0, 0)

    before = {name: df.localCheckpoint() for name, df in _snapshot(spark, lakehouse).items()}
    again = run_ingest(spark, CONFIG, str(input_dir), lakehouse)
    assert again.run_id == report.run_id and again.line_status == report.line_status
    for name, df in _snapshot(spark, lakehouse).items():
        assert_df_equality(df, before[name], ignore_row_order=True)


def test_a_later_run_adds_new_files_and_replaces_grown_ones(spark, input_dir, tmp_path):
    lakehouse = str(tmp_path / "lakehouse")
    run_ingest(spark, CONFIG, str(input_dir), lakehouse)
    # the live file was rotated and a new live file started; the rotated hour moved to another folder run
    later = tmp_path / "later"
    broker1 = later / "c1" / "broker-1"
    _write(broker1 / "kafka-request.log", _hour_of_lines(T0 + timedelta(hours=2), 4, 20))
    (later / "c1" / "topics.txt").write_text((input_dir / "c1" / "topics.txt").read_text())
    run_ingest(spark, CONFIG, str(later), lakehouse)
    produce = read_table(spark, lakehouse, "produce_requests")
    per_file = {r["source_file"]: r["count"] for r in produce.groupBy("source_file").count().collect()}
    assert per_file == {
        "c1/broker-1/kafka-request.log.2026-11-20-12.gz": 10,
        "c1/broker-1/kafka-request.log": 4,  # replaced, not appended: 5 old rows gone
        "c1/broker-2/kafka-request.log.2026-11-20-12": 3,
    }


def test_empty_input_folder_is_a_clear_error(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no input files under"):
        run_ingest(spark, CONFIG, str(tmp_path / "empty"), str(tmp_path / "lakehouse"))
    with pytest.raises(InputError, match="does not exist"):
        run_ingest(spark, CONFIG, str(tmp_path / "missing"), str(tmp_path / "lakehouse"))


def test_a_file_that_vanished_before_reading_fails_naming_it(spark, tmp_path):
    gone = InputFile("c1", 1, "request_log", "c1/broker-1/kafka-request.log", str(tmp_path / "gone.log"), 10, 0, "none")
    with pytest.raises(Exception, match="cannot read input file .*gone.log"):
        read_lines(spark, [gone], 1 << 20, 1 << 20).count()


def test_identities_are_hashed_in_silver_when_the_privacy_switch_is_on(spark, input_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_INGEST_SALT", "s3cret")
    config = parse_config({"privacy": {"hash_identities": True, "salt_env": "TEST_INGEST_SALT"}})
    plain_lh, hashed_lh = str(tmp_path / "plain"), str(tmp_path / "hashed")
    run_ingest(spark, CONFIG, str(input_dir), plain_lh)
    run_ingest(spark, config, str(input_dir), hashed_lh)
    key = ["source_file", "line_number", "partition"]
    identities = ("client_id", "principal", "connection")
    plain = read_table(spark, plain_lh, "produce_requests").select(*key, *identities)
    hashed = read_table(spark, hashed_lh, "produce_requests").select(*key, *identities)
    expected = plain.select(
        *key,
        *[F.when(F.col(c).isNull(), F.lit(None)).otherwise(F.sha2(F.concat(F.lit("s3cret:"), F.col(c)), 256)).alias(c)
          for c in identities],
    )  # fmt: skip
    assert plain.filter(F.col("client_id").isNotNull() & F.col("connection").isNotNull()).count() > 0
    assert_df_equality(hashed, expected, ignore_row_order=True, ignore_nullable=True)
