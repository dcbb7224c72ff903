"""The report's charts as Plotly figures, built from the small aggregates the report collects (rows as dicts):
interactive in the page (hover values, zoom, a policy hidden by a click on its legend entry), drawn by the
plotly.js the report embeds once, so the page works offline and can be mailed as one file.

Plotly has no symlog or logit axis. Where a count or an exposure spans decades and may be 0, values are drawn
on a symmetric log scale computed here (`symlog`: log10(1 + v / threshold)) with ticks labelled in the
values' own units; the CDF's vertical axis is the number of nines of the fraction (−log10(1 − q)), which
gives the body and each decade of the tail equal room. Hover always shows the values themselves.
"""

from __future__ import annotations

import datetime as dt
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ackreplay.transforms.gold import P999_MIN_N

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
SYMBOLS = ["circle", "square", "triangle-up", "diamond", "triangle-down", "cross", "x", "star", "triangle-left"]
# Policies that coincide (min.insync and quorum=2 on RF 3 / min ISR 2) stay visible: dash patterns differ.
DASHES = ["solid", "dash", "dashdot", "dot", "longdash", "longdashdot"]
ISR_SHADE = "#f0a030"
LEADER_LINE = "#7a3db8"
NOTE_COLOUR = "#555555"
CDF_TICKS = (0.5, 0.9, 0.99, 0.999, 0.9999)


class Styles:
    """One colour, marker and dash per policy, the same in every chart (policies in reading order)."""

    def __init__(self, policies: list[str]):
        self.policies = list(policies)
        self.index = {p: i for i, p in enumerate(self.policies)}

    def colour(self, policy: str) -> str:
        return COLOURS[self.index[policy] % len(COLOURS)]

    def symbol(self, policy: str) -> str:
        return SYMBOLS[self.index[policy] % len(SYMBOLS)]

    def dash(self, policy: str) -> str:
        return DASHES[self.index[policy] % len(DASHES)]


def coinciding(series: dict[str, list[tuple]]) -> str:
    """'a = b' for policies whose plotted points agree within 1% (their lines hide each other)."""
    groups: list[list[str]] = []
    for policy, pts in series.items():
        for group in groups:
            other = series[group[0]]
            if len(other) == len(pts) and all(
                a[0] == b[0] and abs(a[1] - b[1]) <= 0.01 * max(abs(a[1]), abs(b[1]))
                for a, b in zip(other, pts, strict=False)
            ):
                group.append(policy)
                break
        else:
            groups.append([policy])
    return "; ".join(" = ".join(g) for g in groups if len(g) > 1)


def symlog(value: float, threshold: float) -> float:
    """The symmetric log scale of `value` (>= 0 here: counts and exposures): linear below `threshold`, log above."""
    return math.copysign(math.log10(1 + abs(value) / threshold), value)


def symlog_ticks(largest: float, threshold: float) -> tuple[list[float], list[str]]:
    """Tick positions on the `symlog` scale and their labels in the values' units: 0, then each power of ten from
    `threshold` up to the first at or above `largest`."""
    values = [0.0]
    tick = threshold
    while True:
        values.append(tick)
        if tick >= largest:
            break
        tick *= 10
    return [symlog(v, threshold) for v in values], [f"{v:,.6g}" for v in values]


def merged_spans(spans: list[dict]) -> list[dict]:
    """The time covered by any of `spans` (start, end; end None: open) as disjoint spans: one shade per stretch of
    time, however many partitions' ISRs were reduced in it (overlapping shades would darken with their number)."""
    merged: list[dict] = []
    for span in sorted(spans, key=lambda x: x["start"]):
        end = span["end"] or span["start"]
        if merged and span["start"] <= merged[-1]["end"]:
            merged[-1]["end"] = max(merged[-1]["end"], end)
        else:
            merged.append({"start": span["start"], "end": end})
    return merged


def nines(q: float) -> float:
    """The CDF's vertical position of fraction `q`: its number of nines (0.9 -> 1, 0.999 -> 3)."""
    return -math.log10(1 - q)


def _legend_only(fig: go.Figure, name: str, **marker) -> None:
    """A legend entry for something drawn as shapes (shaded spans, vertical lines), which have none."""
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, marker=marker, hoverinfo="skip"))


def _note(fig: go.Figure, text: str, y: float = -0.16, x: float = 0.0) -> None:
    if text:
        fig.add_annotation(
            text=text, xref="paper", yref="paper", x=x, y=y, xanchor="left", showarrow=False,
            font={"size": 11, "color": NOTE_COLOUR},
        )  # fmt: skip


def latency_over_time(
    title: str,
    rows: list[dict],
    spans: list[dict],
    leaders: list[dict],
    data_range: tuple | None,
    slot_s: int,
    policies: list[str],
    style: Styles,
) -> go.Figure:
    """P999 (top) and P99 (bottom) per slot and policy over the data's time range, the spans while a partition's
    ISR was below its replicas shaded and the leader changes marked on both (what happened before the first
    produce is cut off)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    first, last = data_range or (None, None)
    if first is not None:
        last = last + dt.timedelta(seconds=slot_s)
        spans = [
            {**x, "start": max(x["start"], first), "end": min(x["end"] or last, last)}
            for x in spans
            if x["start"] < last and (x["end"] is None or x["end"] > first)
        ]
        leaders = [x for x in leaders if first <= x["t_log"] <= last]
    notes = []
    in_legend: set[str] = set()  # a policy's first trace, whichever panel (one with too few records has no P999)
    for row, key, label in ((1, "p999_ms", "P999"), (2, "p99_ms", "P99")):
        series = {}
        for policy in policies:
            pts = sorted((r["slot_start"], r[key]) for r in rows if r["policy"] == policy and r[key] is not None)
            if not pts:
                continue
            series[policy] = pts
            fig.add_trace(
                go.Scatter(
                    x=[t for t, _ in pts], y=[v for _, v in pts], name=policy, legendgroup=policy,
                    showlegend=policy not in in_legend, mode="lines+markers",
                    line={"color": style.colour(policy), "dash": style.dash(policy), "width": 1.5},
                    marker={"symbol": style.symbol(policy), "size": 5},
                    hovertemplate=f"{policy}<br>%{{x|%Y-%m-%d %H:%M:%S}} UTC<br>{label} %{{y:,.1f}} ms<extra></extra>",
                ),
                row=row, col=1,
            )  # fmt: skip
            in_legend.add(policy)
        same = coinciding(series)
        if same:
            notes.append(f"{label}: lines on top of each other: {same}")
        fig.update_yaxes(type="log", title_text=f"{label} per {slot_s:,} s (ms, log)", row=row, col=1)
    for span in merged_spans(spans):
        fig.add_vrect(
            x0=span["start"], x1=span["end"] or span["start"], fillcolor=ISR_SHADE, opacity=0.18, line_width=0,
            row="all", col=1,
        )  # fmt: skip
    for leader in leaders:
        fig.add_vline(x=leader["t_log"], line={"color": LEADER_LINE, "width": 1, "dash": "dot"}, row="all", col=1)
    if spans:
        _legend_only(
            fig, "a partition's ISR below its replicas", symbol="square", size=12, color=ISR_SHADE, opacity=0.4
        )
    if leaders:
        _legend_only(fig, "leader change", symbol="line-ns-open", size=12, color=LEADER_LINE)
    if first is not None:
        fig.update_xaxes(range=[first, last])
    fig.update_xaxes(title_text="time of the produce (UTC)", row=2, col=1)
    fig.update_layout(
        title={"text": f"{title}<br><sup>a point per {slot_s:,} s slot: P999 where it holds 1,000 acked records or "
               "more, P99 100</sup>"},
        height=640, hovermode="closest", margin={"b": 110},
    )  # fmt: skip
    _note(fig, "; ".join(notes), y=-0.17)
    return fig


def latency_cdf(
    title: str, rows: list[dict], policies: list[str], style: Styles, broker_rows: list[dict] | None = None
) -> go.Figure:
    """The fraction of acked records at or below each latency, per policy: latency on a log scale, the fraction
    by its nines (0.5, 0.9, 0.99, 0.999 evenly spaced), so the tail is where the room is. `broker_rows`: the
    broker's view of the same produces (per produce, `broker_latency_ms`), drawn thin and dotted, hidden until
    its legend entry is clicked."""
    fig = go.Figure()
    series = {}
    for policy in policies:
        pts = sorted((r["q"], r["latency_ms"]) for r in rows if r["policy"] == policy and r["latency_ms"] is not None)
        pts = [(q, v) for q, v in pts if v > 0 and q < 1]
        if not pts:
            continue
        series[policy] = [(q, v) for q, v in pts]
        fig.add_trace(
            go.Scatter(
                x=[v for _, v in pts], y=[nines(q) for q, _ in pts], customdata=[q for q, _ in pts], name=policy,
                mode="lines", line={"color": style.colour(policy), "dash": style.dash(policy), "width": 1.8},
                hovertemplate=f"{policy}<br>%{{customdata:.4%}} of records ≤ %{{x:,.1f}} ms<extra></extra>",
            )
        )  # fmt: skip
    for policy in policies:
        pts = sorted(
            (r["q"], r["broker_latency_ms"])
            for r in broker_rows or []
            if r["policy"] == policy and r["broker_latency_ms"] is not None
        )
        pts = [(q, v) for q, v in pts if v > 0 and q < 1]
        if not pts:
            continue
        fig.add_trace(
            go.Scatter(
                x=[v for _, v in pts], y=[nines(q) for q, _ in pts], customdata=[q for q, _ in pts],
                name=f"{policy}, broker's view", mode="lines", visible="legendonly",
                line={"color": style.colour(policy), "dash": "dot", "width": 1},
                hovertemplate=f"{policy}, broker's view<br>%{{customdata:.4%}} of produces ≤ %{{x:,.1f}} ms"
                "<extra></extra>",
            )
        )  # fmt: skip
    fig.update_xaxes(type="log", title_text="producer-visible latency per record, send() to ack (ms, log)")
    fig.update_yaxes(
        title_text="fraction of acked records ≤ latency<br>(broker's view: of acked produces)",
        tickvals=[nines(q) for q in CDF_TICKS], ticktext=[f"{q:g}" for q in CDF_TICKS], range=[0, nines(0.9999)],
    )  # fmt: skip
    fig.update_layout(title={"text": title}, height=480, hovermode="closest")
    same = coinciding({p: [(q, v) for q, v in pts] for p, pts in series.items()})
    _note(fig, f"lines on top of each other: {same}" if same else "", y=-0.2)
    return fig


EXPOSURE_PANELS = (
    ("exposure_byte_ms", 1e-9, 1e-3, "exposure (MB·s acked on<br>< min ISR replicas)"),
    ("under_min_isr_acks", 1, 1, "acked batches held by<br>< min ISR replicas"),
    # min.insync and quorum ack on min ISR replicas, yet not always on the one Kafka would elect
    ("loss_kafka_election", 1, 1, "acked batches lost had the<br>leader failed at the ack<br>(Kafka's election)"),
)


def exposure_over_time(title: str, rows: list[dict], policies: list[str], style: Styles) -> go.Figure:
    """Per window and policy: exposure below min ISR, acks held by fewer than min ISR replicas, and acks a leader
    failure at the ack would have lost, each on a symmetric log scale (0 stays visible)."""
    fig = make_subplots(rows=len(EXPOSURE_PANELS), cols=1, shared_xaxes=True, vertical_spacing=0.05)
    window = rows[0]["window"] if rows else "hour"
    for row, (key, scale, threshold, label) in enumerate(EXPOSURE_PANELS, start=1):
        largest = 0.0
        for policy in policies:
            mine = sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["window_start"])
            if not mine:
                continue
            values = [r[key] * scale for r in mine]
            largest = max(largest, *values)
            fig.add_trace(
                go.Scatter(
                    x=[r["window_start"] for r in mine], y=[symlog(v, threshold) for v in values], customdata=values,
                    name=policy, legendgroup=policy, showlegend=row == 1, mode="lines+markers",
                    line={"color": style.colour(policy), "dash": style.dash(policy), "width": 1.5},
                    marker={"symbol": style.symbol(policy), "size": 6},
                    hovertemplate=f"{policy}<br>%{{x|%Y-%m-%d %H:%M}} UTC<br>%{{customdata:,.6g}}<extra></extra>",
                ),
                row=row, col=1,
            )  # fmt: skip
        tickvals, ticktext = symlog_ticks(largest, threshold)
        fig.update_yaxes(title_text=label, tickvals=tickvals, ticktext=ticktext, row=row, col=1)
    fig.update_xaxes(title_text=f"window start ({window} windows, UTC)", row=len(EXPOSURE_PANELS), col=1)
    fig.update_layout(title={"text": title}, height=720, hovermode="closest")
    return fig


def _label_groups(points: list[tuple[str, float, float]]) -> list[str]:
    """'a = b' for policies whose points coincide within 1% (one hides the other)."""
    groups: dict[tuple[float, float], list[str]] = {}
    for policy, x, y in points:
        key = next(
            (k for k in groups if abs(k[0] - x) <= 1e-9 + 0.01 * abs(x) and abs(k[1] - y) <= 0.01 * abs(y)), (x, y)
        )
        groups.setdefault(key, []).append(policy)
    return [" = ".join(names) for names in groups.values() if len(names) > 1]


def p999_vs_risk(title: str, rows: list[dict], style: Styles) -> go.Figure:
    """P999 against two risk measures, one point per policy. Exposure alone hides policies that ack on min ISR
    replicas but not on the replica Kafka would elect (min.insync, quorum): the right panel counts the acks a
    leader failure at the ack would have lost, under Kafka's election (filled) and a longest-log election
    (hollow)."""
    fig = make_subplots(
        rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
        subplot_titles=("P999 vs exposure below min ISR", "P999 vs acks lost to a leader failure"),
    )  # fmt: skip
    plotted = [r for r in rows if r["p999_ms"] is not None]
    exposure = [(r["policy"], r["exposure_byte_ms"] / 1e9, r["p999_ms"]) for r in plotted]
    kafka = [(r["policy"], float(r["loss_kafka_election"]), r["p999_ms"]) for r in plotted]
    largest_mb_s = max((x for _, x, _ in exposure), default=0.0)
    largest_loss = max(
        (float(max(r["loss_kafka_election"], r["loss_longest_log_election"])) for r in plotted), default=0.0
    )
    for r, (_, mb_s, y) in zip(plotted, exposure, strict=True):
        policy = r["policy"]
        colour, symbol = style.colour(policy), style.symbol(policy)
        k, longest = r["loss_kafka_election"], r["loss_longest_log_election"]
        fig.add_trace(
            go.Scatter(
                x=[symlog(mb_s, 1e-3)], y=[y], customdata=[mb_s], name=policy, legendgroup=policy, mode="markers",
                marker={"color": colour, "symbol": symbol, "size": 12, "opacity": 0.85},
                hovertemplate=f"{policy}<br>P999 %{{y:,.1f}} ms<br>exposure %{{customdata:,.6g}} MB·s<extra></extra>",
            ),
            row=1, col=1,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                # the longest-log point first, so Kafka's (filled) is drawn over it where they coincide
                x=[symlog(longest, 1), symlog(k, 1)], y=[y, y], customdata=[longest, k], name=policy,
                legendgroup=policy, showlegend=False, mode="lines+markers",
                line={"color": colour, "width": 1},
                marker={
                    "color": ["white", colour], "symbol": symbol, "size": 12, "line": {"color": colour, "width": 2}
                },
                hovertemplate=(
                    f"{policy}<br>P999 %{{y:,.1f}} ms<br>%{{customdata:,}} acked batches lost<extra>"
                    "filled: Kafka's election, hollow: longest log</extra>"
                ),
            ),
            row=1, col=2,
        )  # fmt: skip
    for col, (largest, threshold) in ((1, (largest_mb_s, 1e-3)), (2, (largest_loss, 1.0))):
        tickvals, ticktext = symlog_ticks(largest, threshold)
        fig.update_xaxes(
            tickvals=tickvals, ticktext=ticktext, range=[-0.05 * tickvals[-1], tickvals[-1] * 1.08], row=1, col=col
        )
    fig.update_xaxes(title_text="exposure: MB·s acked on fewer than min.insync.replicas replicas", row=1, col=1)
    fig.update_xaxes(
        title_text="acked batches lost had the leader failed at the ack, at most<br>"
        "filled: Kafka's election (first ISR member in assignment order); hollow: longest log (any live replica)",
        row=1, col=2,
    )  # fmt: skip
    fig.update_yaxes(type="log", title_text="P999 produce latency (ms, log)", row=1, col=1)
    notes = []
    acked = [r["n"] for r in plotted]
    if acked:
        low, high = min(acked), max(acked)
        notes.append(f"out of {low:,}" + (f"–{high:,}" if high != low else "") + " acked batches per policy")
    for panel, points in (("exposure", exposure), ("acks lost", kafka)):
        same = _label_groups(points)
        if same:
            notes.append(f"the same point within 1% ({panel}): " + "; ".join(same))
    skipped = [r["policy"] for r in rows if r["p999_ms"] is None]
    if skipped:
        notes.append(f"no P999 (fewer than {P999_MIN_N:,} acked records): " + ", ".join(skipped))
    fig.update_layout(title={"text": title}, height=560, hovermode="closest", margin={"b": 170})
    for i, note in enumerate(notes):
        _note(fig, note, y=-0.36 - 0.07 * i)
    return fig


__all__ = ["Styles", "exposure_over_time", "latency_cdf", "latency_over_time", "p999_vs_risk", "symlog"]
