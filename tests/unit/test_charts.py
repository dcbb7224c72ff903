"""The report's Plotly figures from hand-made rows: what each trace, shade and tick holds."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from ackreplay.gold import charts

T0 = dt.datetime(2026, 11, 22, 18, 31)
S = dt.timedelta(seconds=1)


def test_symlog_scale_and_its_ticks_in_the_values_units():
    assert charts.symlog(0, 1) == 0.0
    assert charts.symlog(9, 1) == pytest.approx(1.0)
    assert charts.symlog(0.099, 1e-3) == pytest.approx(2.0)
    ticks, labels = charts.symlog_ticks(250, 1)
    assert labels == ["0", "1", "10", "100", "1,000"]  # up to the first power of ten at or above the largest
    assert ticks == pytest.approx([0.0, math.log10(2), math.log10(11), math.log10(101), math.log10(1001)])
    assert charts.symlog_ticks(0, 1e-3)[1] == ["0", "0.001"]
    assert [charts.nines(q) for q in (0.9, 0.99, 0.999)] == pytest.approx([1.0, 2.0, 3.0])


def test_overlapping_isr_spans_are_shaded_once():
    spans = [
        {"start": T0 + 10 * S, "end": T0 + 20 * S},
        {"start": T0, "end": T0 + 5 * S},
        {"start": T0 + 15 * S, "end": T0 + 30 * S},
        {"start": T0 + 30 * S, "end": None},  # open: ends where it starts (the caller cut it to the data)
        {"start": T0 + 40 * S, "end": T0 + 41 * S},
    ]
    assert charts.merged_spans(spans) == [
        {"start": T0, "end": T0 + 5 * S},
        {"start": T0 + 10 * S, "end": T0 + 30 * S},
        {"start": T0 + 40 * S, "end": T0 + 41 * S},
    ]


def test_latency_over_time_points_shades_and_leader_changes():
    policies = ["acks=all", "quorum=2"]
    rows = [
        {"policy": "acks=all", "slot_start": T0 + 5 * S, "p99_ms": 20.0, "p999_ms": 90.0},
        {"policy": "acks=all", "slot_start": T0, "p99_ms": 10.0, "p999_ms": None},
        {"policy": "quorum=2", "slot_start": T0, "p99_ms": 4.0, "p999_ms": None},
    ]
    spans = [
        {"start": T0 - 60 * S, "end": T0 + 2 * S},  # began before the data: cut to its first produce
        {"start": T0 + 1 * S, "end": T0 + 3 * S},
        {"start": T0 + 7 * S, "end": None},  # still open at the end: up to the last slot's end
    ]
    leaders = [{"t_log": T0 + 4 * S}, {"t_log": T0 - 30 * S}]
    fig = charts.latency_over_time("t", rows, spans, leaders, (T0, T0 + 5 * S), 5, policies, charts.Styles(policies))
    points = [(t.name, t.yaxis, list(t.x), list(t.y)) for t in fig.data if t.x[0] is not None]
    assert points == [
        ("acks=all", "y", [T0 + 5 * S], [90.0]),  # P999 on top, where the slot had enough records
        ("acks=all", "y2", [T0, T0 + 5 * S], [10.0, 20.0]),
        ("quorum=2", "y2", [T0], [4.0]),
    ]
    legend = [t.name for t in fig.data if t.showlegend is not False]
    # every policy once (quorum=2 has a P99 only), then the shades' and lines' entries
    assert legend == ["acks=all", "quorum=2", "a partition's ISR below its replicas", "leader change"]
    shades = [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"]
    lines = [s.x0 for s in fig.layout.shapes if s.type == "line"]
    # the first two spans merge; each shade and line on both panels
    assert sorted(set(shades)) == [(T0, T0 + 3 * S), (T0 + 7 * S, T0 + 10 * S)] and len(shades) == 4
    assert lines == [T0 + 4 * S] * 2
    assert [t.line.dash for t in fig.data[:2]] == ["solid", "solid"] and fig.data[2].line.dash == "dash"
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis2.type == "log"


def test_latency_cdf_plots_each_policy_by_its_nines():
    rows = [
        {"policy": "acks=1", "q": 0.5, "latency_ms": 2.0},
        {"policy": "acks=1", "q": 0.999, "latency_ms": 40.0},
        {"policy": "acks=all", "q": 0.9, "latency_ms": 0.0},  # not on a log axis
        {"policy": "acks=all", "q": 0.99, "latency_ms": 300.0},
        {"policy": "quorum=2", "q": 0.99, "latency_ms": None},
    ]
    broker = [
        {"policy": "acks=all", "q": 0.5, "broker_latency_ms": 3.0},
        {"policy": "acks=all", "q": 0.99, "broker_latency_ms": 80.0},
        {"policy": "acks=1", "q": 1.0, "broker_latency_ms": 9.0},  # the maximum: no room on a nines axis
    ]
    policies = ["acks=all", "quorum=2", "acks=1"]
    fig = charts.latency_cdf("t", rows, policies, charts.Styles(["acks=all", "acks=1"]), broker)
    assert [(t.name, list(t.x), list(t.customdata), t.visible) for t in fig.data] == [
        ("acks=all", [300.0], [0.99], None),
        ("acks=1", [2.0, 40.0], [0.5, 0.999], None),
        # the broker's view of the same produces: hidden until its legend entry is clicked
        ("acks=all, broker's view", [3.0, 80.0], [0.5, 0.99], "legendonly"),
    ]
    assert list(fig.data[1].y) == pytest.approx([math.log10(2), 3.0])
    assert (fig.data[2].line.dash, fig.data[2].line.color) == ("dot", fig.data[0].line.color)
    assert list(fig.layout.yaxis.ticktext) == ["0.5", "0.9", "0.99", "0.999", "0.9999"]
    assert fig.layout.xaxis.type == "log"


def test_p999_vs_risk_points_and_what_the_notes_say():
    rows = [
        {"policy": "acks=all", "n": 5000, "p999_ms": 700.0, "exposure_byte_ms": 0.0,
         "loss_kafka_election": 0, "loss_longest_log_election": 0},
        {"policy": "quorum=2", "n": 5000, "p999_ms": 300.0, "exposure_byte_ms": 0.0,
         "loss_kafka_election": 40, "loss_longest_log_election": 0},
        {"policy": "min.insync", "n": 5000, "p999_ms": 301.0, "exposure_byte_ms": 0.0,
         "loss_kafka_election": 40, "loss_longest_log_election": 0},
        {"policy": "acks=1", "n": 4990, "p999_ms": 20.0, "exposure_byte_ms": 3e7,
         "loss_kafka_election": 900, "loss_longest_log_election": 600},
        {"policy": "acks=all@lag=3000", "n": 10, "p999_ms": None, "exposure_byte_ms": 0.0,
         "loss_kafka_election": 0, "loss_longest_log_election": 0},
    ]  # fmt: skip
    policies = [r["policy"] for r in rows]
    fig = charts.p999_vs_risk("t", rows, charts.Styles(policies))
    left = [(t.name, list(t.customdata), list(t.y)) for t in fig.data if t.xaxis == "x"]
    right = [(t.name, list(t.customdata), list(t.y)) for t in fig.data if t.xaxis == "x2"]
    assert left == [
        ("acks=all", [0.0], [700.0]), ("quorum=2", [0.0], [300.0]), ("min.insync", [0.0], [301.0]),
        ("acks=1", [0.03], [20.0]),
    ]  # fmt: skip
    # per policy the longest-log election's loss (hollow), then Kafka's (filled, drawn over it)
    assert right == [
        ("acks=all", [0, 0], [700.0, 700.0]), ("quorum=2", [0, 40], [300.0, 300.0]),
        ("min.insync", [0, 40], [301.0, 301.0]), ("acks=1", [600, 900], [20.0, 20.0]),
    ]  # fmt: skip
    assert list(fig.data[1].marker.color) == ["white", charts.COLOURS[0]]
    assert list(fig.layout.xaxis2.ticktext) == ["0", "1", "10", "100", "1,000"]
    notes = [a.text for a in fig.layout.annotations if a.xref == "paper" and a.yref == "paper" and a.y < 0]
    assert notes == [
        "out of 4,990–5,000 acked batches per policy",
        "the same point within 1% (exposure): quorum=2 = min.insync",
        "the same point within 1% (acks lost): quorum=2 = min.insync",
        "no P999 (fewer than 1,000 acked records): acks=all@lag=3000",
    ]


def test_exposure_over_time_keeps_the_values_for_hover_and_draws_zero():
    rows = [
        {"policy": "acks=1", "window": "minute", "window_start": T0 + 60 * S, "exposure_byte_ms": 2e9,
         "under_min_isr_acks": 30, "loss_kafka_election": 7},
        {"policy": "acks=1", "window": "minute", "window_start": T0, "exposure_byte_ms": 0.0,
         "under_min_isr_acks": 0, "loss_kafka_election": 0},
    ]  # fmt: skip
    fig = charts.exposure_over_time("t", rows, ["acks=1"], charts.Styles(["acks=1"]))
    assert [(list(t.x), list(t.customdata)) for t in fig.data] == [
        ([T0, T0 + 60 * S], [0.0, 2.0]),  # MB·s
        ([T0, T0 + 60 * S], [0, 30]),
        ([T0, T0 + 60 * S], [0, 7]),
    ]
    assert list(fig.data[1].y) == pytest.approx([0.0, math.log10(31)])
    assert list(fig.layout.yaxis.ticktext) == ["0", "0.001", "0.01", "0.1", "1", "10"]
    assert fig.layout.xaxis3.title.text == "window start (minute windows, UTC)"
