"""Input files as a scheduled run sees them: rotation periods from names, content fingerprints, the
times of first and last lines, UTC date ranges."""

from __future__ import annotations

import gzip
from datetime import date, datetime
from pathlib import Path

import pytest

from ackreplay.config import parse_config
from ackreplay.ledger import DateRange, _outside_by_name, _parse_time
from ackreplay.storage.fingerprint import SAMPLE_BYTES, FileFacts, collect_facts, read_facts
from ackreplay.storage.inputs import InputError, InputFile, discover_all, rotation_period
from tests.helpers import assert_df_equality

CONFIG = parse_config(
    {"clusters": {"berlin": {"log_timezone": "Europe/Berlin", "broker_clock_offsets_ms": {2: 1500.0}}}}
)


def _file(
    name: str, kind: str = "request_log", cluster: str = "c1", broker_id: int | None = 1, uri: str = ""
) -> InputFile:
    folder = f"broker-{broker_id}" if broker_id is not None else "metrics"
    return InputFile(
        cluster, broker_id, kind, f"{cluster}/{folder}/{name}", uri or f"/in/{cluster}/{folder}/{name}", 1, 0, "none"
    )


def _log(lines: list[tuple[str, str]]) -> bytes:
    return "".join(f"[{ts}] INFO {text} (kafka.request.logger)\n" for ts, text in lines).encode()


@pytest.mark.parametrize(
    ("name", "period"),
    [
        ("kafka-request.log.2026-11-20-10", (datetime(2026, 11, 20, 10), datetime(2026, 11, 20, 11))),
        ("kafka-request.log.2026-11-20-23.gz", (datetime(2026, 11, 20, 23), datetime(2026, 11, 21, 0))),
        ("server.log.2026-11-20", (datetime(2026, 11, 20), datetime(2026, 11, 21))),
        ("kafka-request.log", None),
        ("kafka-request.log.gz", None),
        ("kafka-request.log.2026-13-01-10", None),
        ("kafka-request.log.2026-11-20-24", None),
    ],
)
def test_rotation_period_from_the_name(name, period):
    kind = "server_log" if name.startswith("server") else "request_log"
    assert rotation_period(_file(name, kind)) == period


def test_topics_and_metrics_have_no_rotation_period():
    assert rotation_period(_file("topics.txt", "topics", broker_id=None)) is None
    assert rotation_period(_file("broker-1.prom.2026-11-20", "metrics", broker_id=None)) is None


def test_a_gzip_copy_has_the_fingerprint_of_its_plain_original(tmp_path: Path):
    data = _log([(f"2026-11-20 10:{m:02d}:00,{ms:03d}", f"request {m} {ms}") for m in range(60) for ms in range(1000)])
    assert len(data) > 2 * SAMPLE_BYTES  # head and tail are samples, not the whole file
    plain, copy = tmp_path / "kafka-request.log.2026-11-20-10", tmp_path / "kafka-request.log.2026-11-20-10.gz"
    plain.write_bytes(data)
    copy.write_bytes(gzip.compress(data))
    original = read_facts(str(plain), "none", "request_log", len(data))
    assert original == read_facts(str(copy), "gzip", "request_log", copy.stat().st_size)
    assert original == FileFacts(len(data), original.fingerprint, "2026-11-20 10:00:00,000", "2026-11-20 10:59:00,999")


def test_the_fingerprint_changes_with_the_size_the_head_or_the_tail(tmp_path: Path):
    lines = [(f"2026-11-20 10:00:{s:02d},000", f"request {s}") for s in range(60)]
    base = tmp_path / "base"
    base.write_bytes(_log(lines))
    fingerprint = read_facts(str(base), "none", "request_log", base.stat().st_size).fingerprint
    for changed in (
        lines + [("2026-11-20 10:01:00,000", "one more")],
        [("2026-11-20 10:00:00,000", "request X")] + lines[1:],
    ):
        other = tmp_path / "other"
        other.write_bytes(_log(changed))
        assert read_facts(str(other), "none", "request_log", other.stat().st_size).fingerprint != fingerprint


def test_a_live_log_is_fingerprinted_up_to_its_listed_size(tmp_path: Path):
    live = tmp_path / "kafka-request.log"
    first = _log([("2026-11-20 10:00:00,000", "a"), ("2026-11-20 10:00:01,000", "b")])
    live.write_bytes(first)
    listed = read_facts(str(live), "none", "request_log", len(first))
    live.write_bytes(first + _log([("2026-11-20 10:00:02,000", "c")]))  # grew after the listing
    assert read_facts(str(live), "none", "request_log", len(first)) == listed
    assert listed.last_time == "2026-11-20 10:00:01,000"


def test_times_are_the_earliest_of_the_head_and_latest_of_the_tail(tmp_path: Path):
    # threads interleave: a line can carry an earlier time than the one before it
    log = tmp_path / "server.log"
    log.write_bytes(
        b"continuation of nothing\n"
        + _log([("2026-11-20 10:00:00,005", "x"), ("2026-11-20 10:00:00,001", "y"), ("2026-11-20 10:00:09,000", "z")])
        + b"\tat a.stack.Trace(line)\n"
        + _log([("2026-11-20 10:00:08,000", "w")])
    )
    facts = read_facts(str(log), "none", "server_log", log.stat().st_size)
    assert (facts.first_time, facts.last_time) == ("2026-11-20 10:00:00,001", "2026-11-20 10:00:09,000")


def test_microsecond_stamps_give_microsecond_first_and_last_times(tmp_path: Path):
    # log4j2 %d{DEFAULT_MICROS} (Kafka 4.x): `,SSSSSS` stamps, read whole and converted to the µs.
    log = tmp_path / "state-change.log"
    log.write_bytes(
        _log(
            [
                ("2026-11-21 00:30:00,000250", "x"),
                ("2026-11-21 00:30:00,000249", "y"),
                ("2026-11-21 00:30:09,999999", "z"),
            ]
        )
    )
    facts = read_facts(str(log), "none", "state_change_log", log.stat().st_size)
    assert (facts.first_time, facts.last_time) == ("2026-11-21 00:30:00,000249", "2026-11-21 00:30:09,999999")
    berlin = _file("state-change.log", "state_change_log", cluster="berlin", broker_id=1)
    assert _parse_time(facts.first_time, berlin, CONFIG) == datetime(2026, 11, 20, 23, 30, 0, 249)
    assert _parse_time(facts.last_time, berlin, CONFIG) == datetime(2026, 11, 20, 23, 30, 9, 999999)
    # a file holding both layouts: the stamps still order as times
    mixed = tmp_path / "server.log"
    mixed.write_bytes(
        _log([("2026-11-20 10:00:00,124", "a"), ("2026-11-20 10:00:00,123999", "b"), ("2026-11-20 10:00:00,123", "c")])
    )
    facts = read_facts(str(mixed), "none", "server_log", mixed.stat().st_size)
    assert (facts.first_time, facts.last_time) == ("2026-11-20 10:00:00,123", "2026-11-20 10:00:00,124")


def test_metrics_times_are_sample_timestamps_and_topics_have_none(tmp_path: Path):
    prom = tmp_path / "broker-1.prom"
    prom.write_text(
        "# HELP kafka_log_log_logendoffset x\n# TYPE kafka_log_log_logendoffset gauge\n"
        'kafka_log_log_logendoffset{partition="0",topic="t"} 10.0 1795316277275\n'
        'kafka_log_log_logendoffset{partition="0",topic="t"} 12.0 1795316287275\n'
        "kafka_server_replicamanager_underreplicatedpartitions 0.0\n"
    )
    facts = read_facts(str(prom), "none", "metrics", prom.stat().st_size)
    assert (facts.first_time, facts.last_time) == ("1795316277275", "1795316287275")
    metrics = _file("broker-1.prom", "metrics", broker_id=None)
    assert _parse_time(facts.first_time, metrics, CONFIG) == datetime(2026, 11, 22, 2, 57, 57, 275000)
    topics = tmp_path / "topics.txt"
    topics.write_text("Topic: t\tTopicId: x\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n")
    topics_facts = read_facts(str(topics), "none", "topics", topics.stat().st_size)
    assert (topics_facts.first_time, topics_facts.last_time) == (None, None)


def test_a_gzip_cut_mid_stream_is_fingerprinted_up_to_the_cut(tmp_path: Path):
    data = _log([(f"2026-11-20 10:00:{s % 60:02d},000", f"request {s}") for s in range(200_000)])
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(data)[:-1000])
    facts = read_facts(str(cut), "gzip", "request_log", cut.stat().st_size)
    assert facts.content_bytes < len(data)
    assert facts.detail.startswith(f"gzip stream ends early after {facts.content_bytes} bytes")
    assert read_facts(str(cut), "gzip", "request_log", cut.stat().st_size) == facts  # deterministic


def test_log_times_convert_with_the_cluster_zone_and_broker_clock_offset():
    assert _parse_time("2026-11-20 10:00:00,250", _file("x", cluster="c1"), CONFIG) == datetime(
        2026, 11, 20, 10, 0, 0, 250000
    )
    berlin = _file("x", cluster="berlin", broker_id=1)
    assert _parse_time("2026-11-21 00:30:00,000", berlin, CONFIG) == datetime(2026, 11, 20, 23, 30)
    fast_clock = _file("x", cluster="berlin", broker_id=2)  # runs 1.5 s ahead
    assert _parse_time("2026-11-21 00:30:00,000", fast_clock, CONFIG) == datetime(2026, 11, 20, 23, 29, 58, 500000)
    assert _parse_time(None, berlin, CONFIG) is None


def test_date_ranges_are_inclusive_utc_dates():
    nov20 = DateRange(date(2026, 11, 20), date(2026, 11, 20))
    assert nov20.overlaps(datetime(2026, 11, 19, 23, 59), datetime(2026, 11, 20, 0, 0))
    assert nov20.overlaps(datetime(2026, 11, 20, 23, 59, 59, 999999), datetime(2026, 11, 21, 1))
    assert not nov20.overlaps(datetime(2026, 11, 21), datetime(2026, 11, 21, 1))
    assert not nov20.overlaps(datetime(2026, 11, 19, 22), datetime(2026, 11, 19, 23, 59, 59, 999999))
    assert nov20.overlaps(None, None)  # a file without a readable time is never left out
    assert DateRange(since=date(2026, 11, 20)).overlaps(datetime(2030, 1, 1), datetime(2030, 1, 1))
    assert not DateRange(until=date(2026, 11, 20)).overlaps(datetime(2030, 1, 1), datetime(2030, 1, 1))
    assert DateRange().overlaps(datetime(1999, 1, 1), datetime(1999, 1, 1))
    with pytest.raises(ValueError, match="--since 2026-11-21 is after --until 2026-11-20"):
        DateRange(date(2026, 11, 21), date(2026, 11, 20))


def test_date_range_column_matches_the_python_rule(spark):
    rows = [
        ("before", datetime(2026, 11, 19, 22), datetime(2026, 11, 19, 23, 59)),
        ("spans midnight", datetime(2026, 11, 19, 23, 30), datetime(2026, 11, 20, 0, 30)),
        ("inside", datetime(2026, 11, 20, 5), datetime(2026, 11, 20, 6)),
        ("after", datetime(2026, 11, 21), datetime(2026, 11, 21, 1)),
        ("unknown", None, None),
    ]
    df = spark.createDataFrame(rows, "name string, first timestamp, last timestamp")
    nov20 = DateRange(date(2026, 11, 20), date(2026, 11, 20))
    expected = spark.createDataFrame([r for r in rows if nov20.overlaps(r[1], r[2])], df.schema)
    assert [r[0] for r in expected.collect()] == ["spans midnight", "inside", "unknown"]
    assert_df_equality(df.filter(nov20.overlaps_column(df["first"], df["last"])), expected)


def test_rotated_files_outside_the_dates_are_left_unread_by_their_name():
    until_nov20 = DateRange(until=date(2026, 11, 20))
    # UTC: 2026-11-21 00:00 may hold a line of 11-20 once clocks and DST are allowed for (read it); 02:00 cannot
    assert not _outside_by_name(_file("kafka-request.log.2026-11-21-00"), until_nov20, CONFIG)
    assert _outside_by_name(_file("kafka-request.log.2026-11-21-02.gz"), until_nov20, CONFIG)
    # Berlin 2026-11-21 00:00 is 2026-11-20 23:00 UTC: inside
    assert not _outside_by_name(_file("kafka-request.log.2026-11-21-00", cluster="berlin"), until_nov20, CONFIG)
    assert _outside_by_name(_file("kafka-request.log.2026-11-21-03", cluster="berlin"), until_nov20, CONFIG)
    # the live log, topics.txt and unbounded runs are never decided by name
    assert not _outside_by_name(_file("kafka-request.log"), until_nov20, CONFIG)
    assert not _outside_by_name(_file("kafka-request.log.2026-11-25-00"), DateRange(), CONFIG)


def test_selected_files_pass_through_discover_all(tmp_path: Path):
    a, b = _file("kafka-request.log.2026-11-20-10"), _file("kafka-request.log.2026-11-20-11")
    assert discover_all([a, b]).files == (a, b)
    with pytest.raises(InputError, match="kafka-request.log.2026-11-20-10 is in two input folders"):
        discover_all([a, _file("kafka-request.log.2026-11-20-10", uri="/elsewhere/x")])
    with pytest.raises(InputError, match="no input files selected"):
        discover_all([])


@pytest.mark.parametrize("distributed", [True, False], ids=["on the executors", "on the driver"])
def test_collect_facts_reads_every_file_and_names_an_unreadable_one(spark, tmp_path: Path, distributed):
    log = tmp_path / "kafka-request.log"
    log.write_bytes(_log([("2026-11-20 10:00:00,000", "a")]))
    packed = tmp_path / "kafka-request.log.1"
    packed.write_bytes(gzip.compress(_log([("2026-11-20 09:00:00,000", "b"), ("2026-11-20 09:59:59,999", "c")])))
    present = InputFile(
        "c1", 1, "request_log", "c1/broker-1/kafka-request.log", str(log), log.stat().st_size, 0, "none"
    )
    gz = InputFile("c1", 1, "request_log", "c1/broker-1/kafka-request.log.1", str(packed), packed.stat().st_size, 0,
                   "gzip")  # fmt: skip
    assert collect_facts(spark, [present, gz], distributed) == {
        str(log): read_facts(str(log), "none", "request_log", log.stat().st_size),
        str(packed): FileFacts(
            len(_log([("2026-11-20 09:00:00,000", "b"), ("2026-11-20 09:59:59,999", "c")])),
            read_facts(str(packed), "gzip", "request_log", packed.stat().st_size).fingerprint,
            "2026-11-20 09:00:00,000",
            "2026-11-20 09:59:59,999",
        ),
    }
    gone = InputFile("c1", 1, "request_log", "c1/broker-1/gone.log", str(tmp_path / "gone.log"), 10, 0, "none")
    with pytest.raises(InputError, match=f"cannot read input file {tmp_path / 'gone.log'}"):
        collect_facts(spark, [present, gone], distributed)


def test_little_to_read_is_read_on_the_driver_much_on_the_executors(spark, tmp_path: Path, monkeypatch):
    from ackreplay.storage import fingerprint

    log = tmp_path / "kafka-request.log"
    log.write_bytes(_log([("2026-11-20 10:00:00,000", "a")]))
    small = InputFile("c1", 1, "request_log", "c1/broker-1/kafka-request.log", str(log), log.stat().st_size, 0, "none")
    used = []
    monkeypatch.setattr(
        fingerprint, "_collect_on_executors", lambda spark, rows, settings: used.append(len(rows)) or []
    )
    collect_facts(spark, [small])
    assert used == []
    # a plain file counts its two samples only; a gzip file its whole size
    big = InputFile("c1", 1, "request_log", "c1/broker-1/big.log", str(log), 10 << 30, 0, "none")
    collect_facts(spark, [big] * 32)
    assert used == []
    collect_facts(spark, [big] * 33)
    assert used == [33]
    packed = InputFile("c1", 1, "request_log", "c1/broker-1/big.log.gz", str(log), (64 << 20) + 1, 0, "gzip")
    collect_facts(spark, [packed])
    assert used == [33, 1]


def test_files_named_like_inputs_outside_the_layout_stop_the_run_unless_allowed(tmp_path: Path):
    from ackreplay.storage.inputs import discover_inputs, refuse_misplaced, skipped_lines

    for rel in (
        "c1/broker-1/kafka-request.log",
        "c1/topics.txt",
        "c1/kafka-request.log.gz",
        "c1/logs/server.log",
        "c1/controller-100/kafka-request.log.gz",
        "c1/controller-100/controller.log",
        "c1/README.md",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    inventory = discover_inputs(str(tmp_path))
    # a controller's controller.log is read (the brokers' registrations), the rest of its folder is not
    assert [(f.source_file, f.kind, f.broker_id) for f in inventory.files] == [
        ("c1/broker-1/kafka-request.log", "request_log", 1),
        ("c1/controller-100/controller.log", "controller_log", 100),
        ("c1/topics.txt", "topics", None),
    ]
    assert inventory.misplaced == ("c1/kafka-request.log.gz", "c1/logs/server.log")
    assert inventory.controller_files == ("c1/controller-100/kafka-request.log.gz",)
    assert inventory.ignored == ("c1/README.md",)

    with pytest.raises(InputError) as refused:
        refuse_misplaced(inventory.misplaced, "error")
    message = str(refused.value)
    assert message.startswith(
        "2 input file(s) named like logs the replay reads are not where it reads them:\n"
        "  c1/kafka-request.log.gz\n  c1/logs/server.log\n"
    )
    assert "--allow-skipped" in message
    refuse_misplaced(inventory.misplaced, "warning")
    assert skipped_lines(inventory.ignored, inventory.misplaced, inventory.controller_files) == [
        "  2 files named like inputs but outside the layout, not read: c1/kafka-request.log.gz, c1/logs/server.log",
        "  1 files of KRaft controllers (controller-<id>/) other than controller.log not read: controllers lead no"
        " data partitions",
        "  1 other files outside the input layout not read, e.g. c1/README.md",
    ]


def test_a_request_log_is_unreadable_only_when_every_line_was_quarantined():
    from ackreplay.ingest.stage import unreadable_files

    counts = {
        ("c/broker-1/a.log", "quarantined", "not a log4j line"): 7,
        ("c/broker-1/a.log", "quarantined", "malformed or truncated JSON"): 2,
        ("c/broker-1/b.log", "quarantined", "malformed or truncated JSON"): 3,
        ("c/broker-1/b.log", "parsed", None): 1,  # one readable line: not unreadable
        ("c/broker-2/c.log", "unused", "FETCH from a consumer"): 5,
        ("c/broker-2/d.log", "quarantined", "x"): 4,
        ("c/broker-2/d.log", "quarantined", "y"): 4,  # a tie: the reason sorting last
    }
    assert unreadable_files(counts) == [
        ("c/broker-1/a.log", 9, "not a log4j line"),
        ("c/broker-2/d.log", 8, "y"),
    ]
