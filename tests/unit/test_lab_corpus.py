"""`make corpus`: every committed trace recorded again with the command its manifest names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.record_corpus import record_command, traces_under
from lab.record_trace import parse_args

REPO = Path(__file__).resolve().parents[2]


def test_a_re_recording_pins_what_the_lab_defaulted_to_when_the_trace_was_recorded(tmp_path):
    """The 3.9.1 sample was recorded before --warmup-s and --log-stamp had today's defaults (150 s, µs on 4.x):
    its manifest's warm-up and the ms stamp of a manifest without `configs.log_stamp` are passed explicitly."""
    manifest = json.loads((REPO / "data/samples/trace-3.9.1-utc/manifest.json").read_text())
    argv = record_command(manifest, tmp_path / "trace-3.9.1-utc")
    assert argv == [
        "-m", "lab.record_trace", "--kafka-version", "3.9.1", "--timezone", "UTC", "--duration-s", "150",
        "--rate", "250", "--seed", "391", "--warmup-s", "60", "--log-stamp", "ms", "--out", str(tmp_path / "trace-3.9.1-utc"),
    ]  # fmt: skip
    micros = json.loads((REPO / "data/corpus/trace-4.4.0-utc-micros/manifest.json").read_text())
    assert record_command(micros, tmp_path / "x")[-4:-2] == ["--log-stamp", "us"]


def test_every_committed_trace_has_a_command_the_lab_accepts(tmp_path):
    traces = traces_under([REPO / "data/samples", REPO / "data/corpus"])
    assert len(traces) >= 11
    for trace in traces:
        argv = record_command(json.loads((trace / "manifest.json").read_text()), tmp_path / trace.name)
        args = parse_args(argv[2:])
        assert args.out == tmp_path / trace.name, trace


def test_a_manifest_of_another_tool_is_refused():
    with pytest.raises(ValueError, match="not a lab recording"):
        record_command({"command": "kafka-producer-perf-test --topic t", "workload": {"warmup_s": 0}}, Path("/x"))
