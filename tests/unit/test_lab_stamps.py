"""The lab's log-line stamps (`--log-stamp`), tested without starting Kafka: options, the log4j2
template every appender shares, and the lab's own readers of stamps."""

import gzip
from datetime import UTC, datetime

import pytest
import yaml

from lab.check import parse_request_line
from lab.cluster import TEMPLATES, ClusterSpec, LabCluster, LabError, check_log_stamp
from lab.record_trace import gzip_request_log_from, local_log_stamp, parse_args
from tests.helpers import REAL_PRODUCE, micros

T_WALL = datetime(2026, 11, 22, 2, 32, 36, 597408, tzinfo=UTC).timestamp()


def _args(*extra: str):
    return parse_args(["--out", "/tmp/unused", *extra])


def test_log_stamp_defaults_to_microseconds_on_kafka_4_only():
    assert _args("--kafka-version", "4.4.0").log_stamp == "us"
    assert _args("--kafka-version", "3.9.1").log_stamp == "ms"
    assert _args("--kafka-version", "4.4.0", "--log-stamp", "ms").log_stamp == "ms"


def test_microsecond_stamps_on_kafka_3_are_refused(capsys):
    with pytest.raises(SystemExit):
        _args("--kafka-version", "3.9.1", "--log-stamp", "us")
    assert "microsecond log stamps need Kafka 4.x (log4j2)" in capsys.readouterr().err
    with pytest.raises(LabError, match="reload4j"):
        check_log_stamp("3.9.1", "us")
    check_log_stamp("4.1.1", "us")


def test_every_appender_of_the_log4j2_template_takes_the_date_pattern_from_the_lab():
    config = yaml.safe_load((TEMPLATES / "log4j2.yaml").read_text())["Configuration"]
    properties = {p["name"]: p["value"] for p in config["Properties"]["Property"]}
    # lab/cluster.py sets ackreplay.logDatePattern=DEFAULT_MICROS for --log-stamp us; unset, `%d{DEFAULT}` = `[%d]`
    assert properties["logPattern"] == "[%d{${sys:ackreplay.logDatePattern:-DEFAULT}}] %p %m (%c)%n"
    appenders = config["Appenders"]["RollingFile"]
    assert {a["name"] for a in appenders} >= {
        "KafkaAppender",
        "StateChangeAppender",
        "RequestAppender",
        "ControllerAppender",
    }
    assert {a["PatternLayout"]["pattern"] for a in appenders} == {"${logPattern}"}


@pytest.mark.parametrize(("log_stamp", "pattern"), [("us", "DEFAULT_MICROS"), ("ms", "DEFAULT")])
def test_brokers_and_controller_get_the_date_pattern_of_their_log_stamp(log_stamp, pattern):
    cluster = object.__new__(LabCluster)  # the JVM options only: no jars, no ports
    cluster.spec, cluster.v4 = ClusterSpec("4.4.0", log_stamp=log_stamp), True
    assert cluster._log4j_opts()[1:] == [f"-Dackreplay.logDatePattern={pattern}", "-Dackreplay.partitionLogLevel=INFO"]
    assert len(cluster._log4j_opts(tools=True)) == 1  # the tools' console log keeps its own layout


def test_leo_lines_put_the_partition_logger_at_debug_in_either_log4j():
    for version, v4 in (("4.4.0", True), ("3.9.1", False)):
        cluster = object.__new__(LabCluster)
        cluster.spec, cluster.v4 = ClusterSpec(version, leo_lines=True), v4
        assert cluster._log4j_opts()[-1] == "-Dackreplay.partitionLogLevel=DEBUG"


def test_local_log_stamps_in_either_layout():
    assert local_log_stamp(T_WALL, "UTC") == "[2026-11-22 02:32:36,597]"
    assert local_log_stamp(T_WALL, "UTC", "us") == "[2026-11-22 02:32:36,597408]"
    assert local_log_stamp(T_WALL, "Europe/Berlin", "us") == "[2026-11-22 03:32:36,597408]"


@pytest.mark.parametrize(
    ("layout", "stamps"),
    [
        ("ms", ["2026-11-22 02:32:36,596", "2026-11-22 02:32:36,597", "2026-11-22 02:32:36,598"]),
        ("us", ["2026-11-22 02:32:36,597407", "2026-11-22 02:32:36,597408", "2026-11-22 02:32:36,597409"]),
        # a millisecond first stamp against microsecond lines: the `]` must not take part in the comparison
        ("ms", ["2026-11-22 02:32:36,596999", "2026-11-22 02:32:36,597000", "2026-11-22 02:32:36,597001"]),
    ],
    ids=["ms", "us", "ms-first-us-lines"],
)
def test_the_request_log_is_cut_at_the_first_stamp_in_either_layout(tmp_path, layout, stamps):
    src = tmp_path / "kafka-request.log"
    src.write_text("".join(f"[{s}] DEBUG Completed request:{{}} (kafka.request.logger)\n" for s in stamps) + "\tmore\n")
    first = local_log_stamp(T_WALL, "UTC", layout)
    kept, _ = gzip_request_log_from(src, tmp_path / "out.gz", first)
    lines = gzip.decompress((tmp_path / "out.gz").read_bytes()).decode().splitlines()
    assert kept == 3 and [line[1 : line.find("]")] for line in lines[:2]] == stamps[1:]
    assert lines[2] == "\tmore"  # a continuation line goes with its line


def test_the_lab_check_reads_microsecond_request_lines():
    time, level, body = parse_request_line(micros(REAL_PRODUCE, "408"))
    assert (time, level, body["response"]["responses"][0]["partitionResponses"][0]["baseOffset"]) == (
        "2026-11-23 21:12:37,300408",
        "DEBUG",
        6540,
    )
    assert parse_request_line(REAL_PRODUCE)[0] == "2026-11-23 21:12:37,300"
