"""The report: one self-contained `report.html` built from the gold tables, opening with the decision
(ackreplay/gold/decision.py), its charts interactive (Plotly: ackreplay/gold/charts.py) and drawn by the
plotly.js embedded once in the page, so it opens offline and can be mailed as one file.

Everything plotted is a small aggregate collected from gold tables; the latency CDF is a fixed set of
exact quantiles per policy computed in Spark (transforms/gold.py `latency_quantiles`), never the rows
of produce_replay.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackreplay.config import DecisionTarget
from ackreplay.gold import charts
from ackreplay.gold.decision import decide, decision_lines
from ackreplay.gold.stage import (
    SUMMARY_COLUMNS,
    format_number,
    read_record_sends,
    summary_cell,
    summary_rows,
)
from ackreplay.session import is_connect
from ackreplay.storage.arrow_delta import arrow_writable
from ackreplay.storage.filesystems import open_uri, s3a_settings
from ackreplay.storage.lakehouse import HadoopFiles, read_table, table_exists
from ackreplay.transforms.common import PerCluster, per_cluster
from ackreplay.transforms.gold import (
    P999_MIN_N,
    broker_latency_quantiles,
    cdf_probabilities,
    isr_segments,
    latency_quantiles,
    observed_until,
    policy_rank,
    record_latencies,
    reduced_isr_spans,
)

log = logging.getLogger(__name__)

CHARTS = (
    ("latency_over_time", "P99 and P999 latency over time per policy, with the ISR shrinks and leader changes"),
    ("latency_cdf", "Latency CDF per policy"),
    ("exposure_over_time", "Durability risk over time (exposure, acks below min ISR, acks lost to a leader failure)"),
    ("p999_vs_risk", "P999 latency vs durability risk (exposure below min ISR, acks lost to a leader failure)"),
)
# Every chart is drawn by the page's one copy of plotly.js; the mode bar keeps zoom, pan and PNG download.
_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def _slug(*parts: str) -> str:
    return "__".join(re.sub(r"[^A-Za-z0-9._-]+", "_", p) for p in parts)


# The time slots of the latency-over-time chart: the shortest that gives at most ~60 slots over the data.
_SLOT_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_SLOTS_WANTED = 60
P99_MIN_N = 100  # acked records a P99 is shown from (P999: transforms.gold.P999_MIN_N)


def slot_seconds(span_s: float) -> int:
    """The chart's slot length for data spanning `span_s` seconds."""
    return next((s for s in _SLOT_SECONDS if span_s / s <= _SLOTS_WANTED), _SLOT_SECONDS[-1])


def latency_over_time(
    spark: SparkSession,
    replay: DataFrame,
    record_sends: DataFrame | None,
    slots: dict[tuple[str, str], int],
    linger_ms: float | PerCluster = 0.0,
) -> list[dict]:
    """P99 and P999 of the records' latency per (cluster, topic, policy, slot of `slots[(cluster, topic)]`
    seconds, by the produce's `t_start`), each only where the slot holds enough records for it (100, 1000): a
    small aggregate, collected."""
    lengths = spark.createDataFrame(
        [(c, t, s * 1_000_000) for (c, t), s in slots.items()], "cluster string, topic string, slot_us long"
    )
    slot_us = F.col("slot_us")
    records = (
        record_latencies(replay, record_sends, linger_ms)
        .join(F.broadcast(lengths), ["cluster", "topic"])
        .withColumn("slot_start", F.timestamp_micros(F.floor(F.unix_micros("t_start") / slot_us) * slot_us))
    )
    return _tails(records, ["cluster", "topic", "policy", "slot_start"])


def _tails(records: DataFrame, keys: list[str]) -> list[dict]:
    """The acked records (`record_latencies` rows) and their P99 and P999 per `keys`, each only where enough
    records give it (100, 1,000): a small aggregate, collected."""
    rows = (
        records.groupBy(*keys)
        .agg(
            F.sum("records").alias("records"),
            F.percentile("record_latency_ms", [0.99, 0.999], F.col("records")).alias("_pct"),
        )
        .collect()
    )
    return [
        {
            **{key: r[key] for key in keys},
            "records": r["records"],
            "p99_ms": r["_pct"][0] if r["records"] >= P99_MIN_N else None,
            "p999_ms": r["_pct"][1] if r["records"] >= P999_MIN_N else None,
        }
        for r in rows
    ]


def latency_by_partition(
    replay: DataFrame, record_sends: DataFrame | None, linger_ms: float | PerCluster = 0.0
) -> list[dict]:
    """Per (cluster, topic, partition, policy): acked records and their P99 / P999 (`_tails`), for the report's
    drill-down: which partitions make a topic's tail."""
    return _tails(record_latencies(replay, record_sends, linger_ms), ["cluster", "topic", "partition", "policy"])


def _partition_section(
    rows: list[dict], spans: list[dict], leaders: list[dict], policies: list[str], data_range: tuple | None
) -> str:
    """The per-partition drill-down of one topic, folded: records, P99 / P999 per policy, how long the ISR was
    reduced and how many leader changes, within the data's time range."""
    first, last = data_range or (None, None)
    reduced: dict[int, float] = {}
    changes: dict[int, int] = {}
    for span in spans:
        start, end = span["start"], span["end"] or last or span["start"]
        if first is not None:
            start, end = max(start, first), min(end, last)
        if end > start:
            reduced[span["partition"]] = reduced.get(span["partition"], 0.0) + (end - start).total_seconds()
    for leader in leaders:
        if first is None or first <= leader["t_log"] <= last:
            changes[leader["partition"]] = changes.get(leader["partition"], 0) + 1
    by_partition: dict[int, dict[str, dict]] = {}
    for r in rows:
        by_partition.setdefault(r["partition"], {})[r["policy"]] = r
    header = ["partition", "acked records", *(f"{p} P99 / P999 ms" for p in policies)]
    header += ["ISR reduced s", "leader changes"]
    body = []
    for partition in sorted(by_partition):
        mine = by_partition[partition]
        records = max(r["records"] for r in mine.values())
        cells = [
            f"{format_number(mine[p]['p99_ms'])} / {format_number(mine[p]['p999_ms'])}" if p in mine else "-"
            for p in policies
        ]
        faults = [f"{reduced.get(partition, 0.0):,.1f}", str(changes.get(partition, 0))]
        body.append([str(partition), f"{records:,}", *cells, *faults])
    return (
        "<details><summary>Per partition: which partitions make the tail</summary>\n"
        + _html_table(header, body)
        + "\n<p class=\"note\">P99 from 100 acked records, P999 from 1,000 (else '-'); ISR reduced: seconds while the "
        "partition's ISR was smaller than its replicas, leader changes: leader starts after an earlier epoch, both "
        "within the data's time range.</p></details>\n"
    )


def routing_totals(spark: SparkSession, lakehouse: str, clusters: list[str]) -> list[dict]:
    """gold `routing` summed over its windows per (cluster, topic, policy): one small row each (the rerouted
    batches' P99 latency as the worst window's: percentiles do not add up across windows)."""
    if not clusters or not table_exists(spark, lakehouse, "routing"):
        return []
    # what the section shows
    sums = ["rejections", "recorded_rejections", "rerouted", "held", "never_writable", "wait_today_ms",
            "wait_kip637_ms", "buffer_byte_s_today", "buffer_byte_s_kip637", "rerouted_latency_known",
            "no_writable_ms", "recorded_batches", "recorded_wait_ms", "recorded_model_wait_ms",
            "recorded_unlinked"]  # fmt: skip
    rows = (
        read_table(spark, lakehouse, "routing")
        .filter(F.col("cluster").isin(clusters))
        .groupBy("cluster", "topic", "policy", "partitioning")
        .agg(
            *[F.sum(c).alias(c) for c in sums],
            F.max("rerouted_p99_ms").alias("rerouted_p99_ms"),
            F.max("rerouted_fastest_p99_ms").alias("rerouted_fastest_p99_ms"),
            F.max("rerouted_p999_ms").alias("rerouted_p999_ms"),
            F.max("rerouted_fastest_p999_ms").alias("rerouted_fastest_p999_ms"),
        )
        .orderBy("cluster", "topic", policy_rank(F.col("policy")), "policy")
        .collect()
    )
    return [r.asDict() for r in rows]


def _seconds(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:,.1f}"


def _routing_section(rows: list[dict]) -> str:
    """One topic's KIP-637 what-if (gold `routing`), folded: per policy that rejects below min ISR, what today's
    producer waits and what one that routes around such partitions would."""
    if not rows:
        return ""
    partitioning = rows[0]["partitioning"]
    if not any(r["rejections"] for r in rows):
        body = (
            f"<p>No produce was rejected below min ISR under {', '.join(r['policy'] for r in rows)}: routing around "
            "such partitions changes nothing on this topic"
            + (
                f" (no partition writable for {_seconds(max(r['no_writable_ms'] or 0 for r in rows))} s)."
                if any(r["no_writable_ms"] for r in rows)
                else "."
            )
            + "</p>\n"
        )
    else:
        header = ["policy", "rejections (recorded)", "rerouted", "held", "never writable", "wait today s",
                  "wait KIP-637 s", "buffer MB·s today → KIP-637", "rerouted P99 / P999 ms (fastest)",
                  "no writable partition s"]  # fmt: skip
        table = []
        for r in rows:
            latency = (
                f"{format_number(r['rerouted_p99_ms'])} / {format_number(r['rerouted_p999_ms'])} "
                f"({format_number(r['rerouted_fastest_p99_ms'])} / {format_number(r['rerouted_fastest_p999_ms'])})"
                if r["rerouted_latency_known"]
                else "-"
            )
            table.append([
                r["policy"], f"{r['rejections']:,} ({r['recorded_rejections']:,})", f"{r['rerouted']:,}",
                f"{r['held']:,}", f"{r['never_writable']:,}", _seconds(r["wait_today_ms"]),
                _seconds(r["wait_kip637_ms"]),
                f"{r['buffer_byte_s_today'] / 1e6:,.2f} → {r['buffer_byte_s_kip637'] / 1e6:,.2f}",
                latency, _seconds(r["no_writable_ms"]),
            ])  # fmt: skip
        body = _html_table(header, table)
        # the real rejections, the same under each policy of the recorded ISR (acks=all@lag's ISR is another)
        measured = max(rows, key=lambda r: r["recorded_rejections"])
        if measured["recorded_batches"] or measured["recorded_unlinked"]:
            body += (
                f"\n<p>Today's cost as measured: the real rejections belonged to {measured['recorded_batches']:,} "
                f"batches, each appended by a later retry; from their first rejection to that retry's ack they "
                f"waited {_seconds(measured['recorded_wait_ms'])} s in all, where the model's wait (until the "
                f"partition was writable again) is {_seconds(measured['recorded_model_wait_ms'])} s"
                + (
                    f"; {measured['recorded_unlinked']:,} real rejections had no retry in the logs (expired, or no "
                    "client id)."
                    if measured["recorded_unlinked"]
                    else "."
                )
                + "</p>"
            )
    return (
        "<details><summary>Routing around partitions below min ISR (KIP-637)</summary>\n"
        + body
        + f'\n<p class="note">Records on this topic are taken as <b>{html.escape(partitioning)}</b> (conf '
        "<code>partitioning</code>): keyed records cannot move and are held until their partition is writable "
        "again. Rejections: at append (NotEnoughReplicas), in parentheses the real ones in the request logs (given "
        "on the recorded ISR: acks=all and min.insync); rerouted: keyless and another partition writable then "
        "(acks=all@lag: as the replay found each partition at its appends, its ISR being the re-simulated one); "
        "wait: until the batch's own partition was writable again (today's retries wait that long at best); "
        "rerouted P99 / P999: the latency at the partitions it could go to, averaged over them (the fastest in "
        'parentheses), the worst window\'s (README, "Routing around partitions below min ISR").</p></details>\n'
    )


def fault_marks(
    spark: SparkSession, lakehouse: str, replay: DataFrame, clusters: list[str]
) -> tuple[list[dict], list[dict]]:
    """What the latency chart shades and marks, per (cluster, topic): the spans while some partition's ISR was
    smaller than its replicas (the committed ISR states of `isr_changes`, as gold reads them, until the end of
    `replay`'s data) and the leader changes (from
    `leader_epochs`, a leader's start after an earlier epoch). Small: a row per span or leader start."""
    in_scope = F.col("cluster").isin(clusters)
    spans: list[dict] = []
    if table_exists(spark, lakehouse, "isr_changes"):
        partitions = (
            read_table(spark, lakehouse, "partitions").filter(in_scope)
            if table_exists(spark, lakehouse, "partitions")
            else None
        )
        isr_changes = read_table(spark, lakehouse, "isr_changes").filter(in_scope)
        segments = isr_segments(isr_changes, observed_until(replay, isr_changes))
        spans = [r.asDict() for r in reduced_isr_spans(segments, partitions).collect()]
    leaders: list[dict] = []
    if table_exists(spark, lakehouse, "leader_epochs"):
        leaders = [
            r.asDict()
            for r in read_table(spark, lakehouse, "leader_epochs")
            .filter(in_scope & (F.col("previous_leader_epoch") >= 0))
            .select("cluster", "topic", "partition", "t_log")
            .collect()
        ]
    return spans, leaders


def _cell(row: dict, key: str, fmt: str) -> str:
    raw = row.get(key)
    if isinstance(raw, float) and math.isinf(raw):
        raw_text = "inf"
    elif isinstance(raw, str):
        raw_text = raw
    else:
        raw_text = "" if raw is None else repr(raw)
    align = "left" if key == "policy" else "right"
    return (
        f'<td class="{align}" data-key="{key}" data-value="{html.escape(raw_text)}">'
        f"{html.escape(summary_cell(row, key, fmt))}</td>"
    )


def _summary_table(rows: list[dict]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in SUMMARY_COLUMNS)
    body = "\n".join(
        f'<tr data-policy="{html.escape(r["policy"])}">'
        + "".join(_cell(r, k, f) for _, k, f in SUMMARY_COLUMNS)
        + "</tr>"
        for r in rows
    )
    return _wide_table(head, body)


_PLACED_COLUMNS = (
    ("policy", "policy", "{}"),
    ("p50 ms", "placed_p50_ms", "{:,.1f}"),
    ("p99 ms (single draws)", "placed_p99_ms", "{:,.1f}"),
    ("p999 ms (single draws)", "placed_p999_ms", "{:,.1f}"),
)


def _placement_table(rows: list[dict]) -> str:
    """For a keyless topic, the records' latency placed again by Kafka's partitioner under each policy, with
    what it rests on; empty for a keyed topic."""
    placed = [r for r in rows if r.get("placed_p99_ms") is not None]
    if not placed:
        return ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h, _, _ in _PLACED_COLUMNS)
    body = "\n".join("<tr>" + "".join(_cell(r, k, f) for _, k, f in _PLACED_COLUMNS) + "</tr>" for r in placed)
    return (
        "<h3>Keyless records placed again by Kafka's partitioner</h3>\n"
        '<p class="note">The records of this topic have no key, so where the producer put each one depends on how '
        "fast each partition's batches left, i.e. on the policy (KIP-794's adaptive partitioner). Here they are "
        f"placed again under each policy, record by record, {placed[0]['placed_draws']} seeded draws pooled; in "
        "brackets the lowest and highest single draw. The table above keeps each batch on its recorded partition. "
        'Where a leader of the topic paused, these are the better guide (README "Keyless records").</p>\n'
        + _wide_table(head, body)
    )


def _wide_table(head: str, body: str) -> str:
    """A table of the report's style (header row `head`, rows `body`) that scrolls sideways inside the page."""
    return f'<div class="wide"><table class="summary">\n<tr>{head}</tr>\n{body}\n</table></div>'


_CSS = """
body { font-family: sans-serif; margin: 2em; max-width: 1400px; }
section.decision { border: 2px solid #2c7; padding: 0.3em 1em; margin: 1em 0; background: #f4fff6; }
div.wide { overflow-x: auto; }
table.summary { border-collapse: collapse; font-size: 13px; }
table.summary th, table.summary td { border: 1px solid #ccc; padding: 3px 7px; }
table.summary th { background: #eee; }
td.right { text-align: right; font-variant-numeric: tabular-nums; }
div.chart { border: 1px solid #ddd; margin: 0.5em 0 1.5em; }
p.note { color: #444; font-size: 13px; max-width: 60em; }
p.untrusted { background: #fdd; border: 2px solid #c00; padding: 0.5em 1em; font-weight: bold; max-width: 60em; }
"""

_NOTES = (
    "Latency is what the producer sees, per record (as Kafka's ProducerPerformance counts it): from the "
    "record's send() to its batch's ack, each connection's requests replayed in order; n counts acked "
    "produces, records their records. The broker's view is per produce. Percentiles are Spark's exact "
    "<code>percentile</code> (position (n−1)·p, linear interpolation between the closest ranks); P999 is "
    "'-' with fewer than 1000 acked records. "
    "Δ and × compare P999 with the replayed <code>acks=all</code>. Exposure: bytes × ms from the ack "
    "until the batch is on min.insync.replicas replicas, finite windows only; 'never minISR' counts "
    "acked batches that never got there within the data. Loss: acked batches a leader failure at the ack "
    "would have lost, under Kafka's election (first live ISR member in assignment order) and under "
    "KIP-250's longest-log election (the live replica with the largest log, in the ISR or not); losable "
    "batch·s: how long after their acks a leader failure would still have lost them, summed (finite windows; "
    "times a leader failure rate per second, the acked batches such failures lose on average). All-replicas p99/max: "
    "time from the ack until the batch was on every assigned "
    "replica ('never all': not within the data). NER = NotEnoughReplicas rejections. &lt;minISR s: "
    "partition·seconds the committed ISR (server.log/state-change.log) was below min.insync.replicas, "
    "the same for every policy that keeps the recorded ISR; '-' for <code>acks=all@lag</code>, whose "
    "re-simulated ISR the replay does not store (its rejections are counted in NER)."
)


def linger_note(linger_ms: float | PerCluster, clusters: list[str]) -> str:
    """The producers' linger.ms the figures rest on, per cluster where they differ (conf `replay.producer`,
    `clusters.<name>.producer`)."""
    lingers = per_cluster(linger_ms)
    by_value: dict[float, list[str]] = {}
    for cluster in sorted(clusters):
        by_value.setdefault(lingers.of(cluster), []).append(cluster)
    if len(by_value) <= 1:
        (value,) = by_value or {lingers.default: []}
        settings = f"{value:g} ms"
    else:
        settings = "; ".join(f"{value:g} ms for {', '.join(names)}" for value, names in sorted(by_value.items()))
    return (
        f"The producers' linger.ms as replayed: {settings} (conf <code>replay.producer</code>, a cluster's own in "
        "<code>clusters.&lt;name&gt;.producer</code>): a request that waited behind a slower response left once "
        "its first batch had lingered that long, and a record sent after its batch left went in the next one."
    )


def _decision_section(summary: list[dict], target: DecisionTarget | None) -> str:
    """The decision as the report's first section: the overall sentence, then one item per topic."""
    lines = decision_lines(decide(summary, target), target)
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line.strip())}</li>\n" for line in lines[1:])
    return (
        f'<section class="decision" id="decision">\n<h2>Decision</h2>\n<p>{html.escape(lines[0])}</p>\n'
        f"<ul>\n{items}</ul>\n</section>\n"
    )


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "\n".join(
        "<tr>"
        + "".join(f'<td class="{"left" if i == 0 else "right"}">{html.escape(c)}</td>' for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return _wide_table(head, body)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def _accuracy_section(spark: SparkSession, lakehouse: str, clusters: list[str]) -> str:
    """How far the replay can be trusted: its self-check per cluster (the latest replay's `replay_checks`), the
    replayed acks=all against the brokers' own acks of the recorded acks=all produces."""
    if not clusters or not table_exists(spark, lakehouse, "replay_checks"):
        return ""
    checks = (
        read_table(spark, lakehouse, "replay_checks")
        .filter(F.col("cluster").isin(clusters))
        .orderBy("cluster")
        .collect()
    )
    rows = [
        [
            c["cluster"],
            f"{c['n']:,}",
            _pct(c["within_2ms"]),
            format_number(c["p999_replayed_ms"]),
            format_number(c["p999_observed_ms"]),
            "-" if c["isr_lag_ms"] is None else f"{_pct(c['isr_within_2ms'])} at {c['isr_lag_ms']:,.0f} ms",
            c["failures"] or ("passed" if c["judged"] == "judged" else f"not judged ({c['judged']})"),
            _send_delay(c.asDict()),
        ]
        for c in checks
    ]
    header = [
        "cluster", "recorded acks=all produces", "replayed within 2 ms of the broker's ack",
        "P999 of ack wait, replayed ms", "observed ms", "ISR re-simulated at its own lag, within 2 ms", "self-check",
        "producers' requests that did not wait, after their first record (median)",
    ]  # fmt: skip
    return (
        '<section id="accuracy">\n<h2>How far the replay can be trusted</h2>\n'
        '<p class="note">The replayed <code>acks=all</code> against the brokers\' own acks of the produces recorded '
        'with <code>acks=all</code> (README, "The replay checks itself"): a cluster that fails is refused unless the '
        "run accepted it, and its rows are marked UNTRUSTED. The last column checks the producers' linger.ms the "
        'what-ifs rest on against the requests that did not wait (README, "What the producer sees").</p>\n'
        + _html_table(header, rows)
        + "\n</section>\n"
    )


def _send_delay(check: dict) -> str:
    """The producer furthest off the linger.ms its cluster was replayed with (ackreplay/replay/send_delays.py); a
    lakehouse replayed before replay_checks had the columns shows none."""
    if check.get("send_delay_requests") is None:
        return "-"
    client = check["send_delay_client"] if check["send_delay_client"] is not None else "(no client id)"
    text = (
        f"{check['send_delay_p50_ms']:.1f} ms ({client}, {check['send_delay_requests']:,} requests); linger.ms "
        f"{check['linger_ms']:g} as replayed"
    )
    return text if check["send_delay_agrees"] else f"{text}: OFF, set the producers' linger.ms in the conf"


def _provenance_section(spark: SparkSession, lakehouse: str, clusters: list[str], summary: list[dict]) -> str:
    """What the report was made from: per cluster the input files, their bytes and time range and the runs that
    ingested, replayed and summed them (the `ingested_files` ledger), the policies, and the versions."""
    from importlib.metadata import PackageNotFoundError, version

    from ackreplay.config import DELTA_VERSION

    rows: list[list[str]] = []
    if clusters and table_exists(spark, lakehouse, "ingested_files"):
        files = (
            read_table(spark, lakehouse, "ingested_files")
            .filter(F.col("cluster").isin(clusters) & (F.col("status") == "ingested"))
            .groupBy("cluster")
            .agg(
                F.count("*").alias("files"),
                F.sum("content_bytes").alias("bytes"),
                F.min("first_event_time").alias("first"),
                F.max("last_event_time").alias("last"),
                F.array_sort(F.collect_set("kind")).alias("kinds"),
                F.array_sort(F.collect_set("ingest_run_id")).alias("ingest_runs"),
                F.array_sort(F.collect_set("replay_run_id")).alias("replay_runs"),
            )
            .orderBy("cluster")
            .collect()
        )
        rows = [
            [
                f["cluster"],
                f"{f['files']:,} ({', '.join(f['kinds'])})",
                f"{(f['bytes'] or 0) / 1e6:,.1f} MB",
                f"{f['first']:%Y-%m-%d %H:%M:%S} – {f['last']:%Y-%m-%d %H:%M:%S} UTC" if f["first"] else "-",
                ", ".join(f["ingest_runs"]),
                ", ".join(f["replay_runs"]) or "-",
            ]
            for f in files
        ]
    gold_runs = ", ".join(sorted({r["gold_run_id"] for r in summary if r.get("gold_run_id")}))
    try:
        ackreplay_version = version("ackreplay")
    except PackageNotFoundError:
        ackreplay_version = "unknown"
    header = ["cluster", "input files", "content", "time range", "ingest runs", "replay runs"]
    policies = ", ".join(dict.fromkeys(r["policy"] for r in summary))
    return (
        '\n<section id="provenance">\n<h2>How this report was made</h2>\n'
        + _html_table(header, rows)
        + f'\n<p class="note">gold runs: {html.escape(gold_runs or "-")}; policies: {html.escape(policies or "-")}; '
        f"ackreplay {html.escape(ackreplay_version)}, Spark {html.escape(spark.version)}, Delta {DELTA_VERSION}; "
        f"written {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M:%S} UTC from the lakehouse {html.escape(lakehouse)}.</p>\n"
        "</section>\n"
    )


@dataclass
class ReportData:
    """What the report shows, collected from the gold tables and produce_replay: small aggregates, a row
    per (cluster, topic, policy) and window, slot, quantile, partition, ISR span or leader change."""

    topics: list[tuple[str, str]]
    summary: list[dict]
    risk: list[dict]
    cdf: list[dict]
    broker_cdf: list[dict]
    over_time: list[dict]
    ranges: dict[tuple[str, str], tuple]
    slots: dict[tuple[str, str], int]
    spans: list[dict]
    leaders: list[dict]
    per_partition: list[dict]
    routed: list[dict]

    @property
    def clusters(self) -> list[str]:
        return sorted({c for c, _ in self.topics})

    def of(self, rows: list[dict], cluster: str, topic: str) -> list[dict]:
        return [r for r in rows if r["cluster"] == cluster and r["topic"] == topic]


def collect_report_data(spark: SparkSession, lakehouse: str, linger_ms: float | PerCluster = 0.0) -> ReportData:
    """The report's aggregates for every (cluster, topic) of `policy_summary`. `linger_ms`: the producers'
    linger.ms (`transforms.gold.record_latencies`)."""
    summary = summary_rows(read_table(spark, lakehouse, "policy_summary"))
    risk = [
        r.asDict()
        for r in read_table(spark, lakehouse, "risk_exposure")
        .select(
            "cluster",
            "topic",
            "policy",
            "window",
            "window_start",
            "exposure_byte_ms",
            "under_min_isr_acks",
            "loss_kafka_election",
        )
        .collect()
    ]
    topics = sorted({(r["cluster"], r["topic"]) for r in summary})
    clusters = sorted({c for c, _ in topics})
    replay = read_table(spark, lakehouse, "produce_replay")
    if topics:
        replay = replay.filter(F.col("cluster").isin(clusters))
    record_sends = read_record_sends(spark, lakehouse, F.col("cluster").isin(clusters))
    probabilities = cdf_probabilities(200)
    cdf = [r.asDict() for r in latency_quantiles(replay, probabilities, record_sends, linger_ms).collect()]
    broker_cdf = [r.asDict() for r in broker_latency_quantiles(replay, probabilities).collect()]
    ranges = {
        (r["cluster"], r["topic"]): (r["first"], r["last"])
        for r in replay.groupBy("cluster", "topic").agg(F.min("t_start").alias("first"), F.max("t_start").alias("last"))
        .collect()
    }  # fmt: skip
    slots = {key: slot_seconds((last - first).total_seconds()) for key, (first, last) in ranges.items()}
    spans, leaders = fault_marks(spark, lakehouse, replay, clusters)
    return ReportData(
        topics=topics,
        summary=summary,
        risk=risk,
        cdf=cdf,
        broker_cdf=broker_cdf,
        over_time=latency_over_time(spark, replay, record_sends, slots, linger_ms),
        ranges=ranges,
        slots=slots,
        spans=spans,
        leaders=leaders,
        per_partition=latency_by_partition(replay, record_sends, linger_ms),
        routed=routing_totals(spark, lakehouse, clusters),
    )


def topic_figures(data: ReportData, cluster: str, topic: str) -> dict:
    """The report's charts of one topic (`CHARTS`' names -> Plotly figures): also for a notebook to show."""
    rows = data.of(data.summary, cluster, topic)
    policies = [r["policy"] for r in rows]
    style = charts.Styles(policies)
    label = f"{cluster} / {topic}"
    spans, leaders = data.of(data.spans, cluster, topic), data.of(data.leaders, cluster, topic)
    return {
        "latency_over_time": charts.latency_over_time(
            f"Produce latency over time — {label}", data.of(data.over_time, cluster, topic), spans, leaders,
            data.ranges.get((cluster, topic)), data.slots.get((cluster, topic), 1), policies, style,
        ),
        "latency_cdf": charts.latency_cdf(
            f"Produce latency CDF per policy — {label}", data.of(data.cdf, cluster, topic), policies, style,
            data.of(data.broker_cdf, cluster, topic),
        ),
        "exposure_over_time": charts.exposure_over_time(
            f"Durability risk per window — {label}", data.of(data.risk, cluster, topic), policies, style
        ),
        "p999_vs_risk": charts.p999_vs_risk(f"P999 latency vs durability risk per policy — {label}", rows, style),
    }  # fmt: skip


def _chart_html(figure, div_id: str, name: str, caption: str) -> str:
    body = figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=_PLOTLY_CONFIG)
    return f'<h3>{html.escape(caption)}</h3>\n<div class="chart" data-chart="{name}">{body}</div>'


def build_report(
    spark: SparkSession,
    lakehouse: str,
    out_dir: str | Path | None = None,
    target: DecisionTarget | None = None,
    linger_ms: float | PerCluster = 0.0,
    data: ReportData | None = None,
) -> str:
    """Write report.html for every (cluster, topic) of the gold tables, opening with the decision for `target`
    (ackreplay/gold/decision.py); return where (a path, or a URI on object storage). `linger_ms`: the producers'
    linger.ms (`transforms.gold.record_latencies`); `data`: what :func:`collect_report_data` returned, if at hand."""
    from plotly.offline import get_plotlyjs

    out = str(out_dir) if out_dir is not None else f"{lakehouse.rstrip('/')}/report"
    data = data if data is not None else collect_report_data(spark, lakehouse, linger_ms)
    summary, clusters = data.summary, data.clusters
    producers = linger_note(linger_ms, clusters)
    sections = []
    for cluster, topic in data.topics:
        rows = data.of(data.summary, cluster, topic)
        policies = [r["policy"] for r in rows]
        figures = topic_figures(data, cluster, topic)
        slug = _slug(cluster, topic)
        chart_html = "\n".join(_chart_html(figures[name], f"{name}-{slug}", name, caption) for name, caption in CHARTS)
        drill_down = _partition_section(
            data.of(data.per_partition, cluster, topic), data.of(data.spans, cluster, topic),
            data.of(data.leaders, cluster, topic), policies, data.ranges.get((cluster, topic)),
        )  # fmt: skip
        sections.append(
            f'<section data-cluster="{html.escape(cluster)}" data-topic="{html.escape(topic)}">\n'
            f"<h2>{html.escape(cluster)} / {html.escape(topic)}</h2>\n{_summary_table(rows)}\n"
            f"{_placement_table(rows)}{drill_down}"
            f"{_routing_section(data.of(data.routed, cluster, topic))}{chart_html}\n</section>"
        )
    untrusted = sorted(
        {(r["cluster"], r["self_check"]) for r in summary if (r.get("self_check") or "").startswith("FAILED")}
    )
    warning = (
        '<p class="untrusted">UNTRUSTED: the replay\'s self-check failed on '
        + "; ".join(html.escape(f"{cluster} ({verdict})") for cluster, verdict in untrusted)
        + ". These results were written only because --accept-untrusted was given: they are not a basis "
        "for a decision (README, 'The replay checks itself').</p>\n"
        if untrusted
        else ""
    )
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>'
        + ("UNTRUSTED " if untrusted else "")
        + f"ackreplay report</title><style>{_CSS}</style>\n"
        + (f'<script type="text/javascript" id="plotly-js">{get_plotlyjs()}</script>\n' if sections else "")
        + f"</head><body>\n{warning}"
        "<h1>ackreplay: produce acknowledgement policies</h1>\n"
        + _decision_section(summary, target)
        + _accuracy_section(spark, lakehouse, clusters)
        + f'<p class="note">{_NOTES} {producers} Charts: hover a point for its values, drag to zoom (double-click to '
        "reset), click a policy in a legend to hide or show it.</p>\n"
        + ("\n".join(sections) or "<p>No gold rows.</p>")
        + _provenance_section(spark, lakehouse, clusters, summary)
        + "\n</body></html>\n"
    )
    path = _write_page(spark, out, page)
    log.info("report written to %s (%d topics)", path, len(data.topics))
    return path


def _write_page(spark: SparkSession, folder: str, page: str) -> str:
    """`folder`/report.html, whole or not at all: a local file is written beside it and moved into place; on
    an object store the upload becomes visible when it completes (Hadoop's `FileSystem.create`)."""
    if arrow_writable(folder):
        out = Path(folder.removeprefix("file://"))
        out.mkdir(parents=True, exist_ok=True)
        local = out / "report.html"
        partial = out / f".report.html.{os.getpid()}.tmp"
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, local)
        return str(local)
    uri = f"{folder.rstrip('/')}/report.html"
    if is_connect(spark):  # no driver JVM here: pyarrow's client for the store, with the session's S3A settings
        filesystem, path = open_uri(uri, s3a_settings(spark))
        with filesystem.open_output_stream(path) as stream:
            stream.write(page.encode("utf-8"))
        return uri
    HadoopFiles(spark, uri).write_bytes(uri, page.encode("utf-8"))
    return uri


__all__ = ["build_report", "collect_report_data", "topic_figures", "CHARTS", "ReportData", "policy_rank"]
