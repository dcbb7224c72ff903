"""The gold stage: silver `produce_replay` + `partitions` + `isr_changes` -> gold `latency_percentiles`,
`risk_exposure`, `availability` and `policy_summary` (transforms/gold.py holds the aggregates and
their definitions).

Each table is rewritten for the clusters of the run (`replaceWhere cluster IN (...)`), so a rerun
leaves identical tables. Only the small policy summary is collected, to print it.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from ackreplay.config import AppConfig, DecisionTarget
from ackreplay.gold.decision import decide, decision_lines, send_time_share
from ackreplay.replay.partitioner import PlacementSettings, ProducerConfig
from ackreplay.replay.self_check import ReplayUntrusted
from ackreplay.schemas.broker_logs import ISR_CHANGES
from ackreplay.schemas.gold import AVAILABILITY, LATENCY_PERCENTILES, POLICY_SUMMARY, RISK_EXPOSURE, ROUTING
from ackreplay.schemas.tables import PRODUCE_REQUESTS
from ackreplay.storage.lakehouse import read_table, replace_rows, sql_string, table_exists, table_path
from ackreplay.transforms.common import PerCluster, conform
from ackreplay.transforms.gold import (
    availability,
    isr_segments,
    latency_percentiles,
    leader_silence_by_topic,
    observed_until,
    policy_summary,
    record_sends_by_batch,
    risk_exposure,
)
from ackreplay.transforms.keyless import PLACEMENT, keyless_placement, placement_input, read_gaps
from ackreplay.transforms.routing import AUTO, KEYED, KEYLESS, routing, routing_states

log = logging.getLogger(__name__)

GOLD_CONTRACTS = {
    "latency_percentiles": LATENCY_PERCENTILES,
    "risk_exposure": RISK_EXPOSURE,
    "availability": AVAILABILITY,
    "routing": ROUTING,
    "policy_summary": POLICY_SUMMARY,
}
GOLD_TABLES = tuple(GOLD_CONTRACTS)


@dataclass
class GoldReport:
    """What one gold run wrote: rows per gold table, the policy summary and the target it is decided for."""

    run_id: str
    window: str
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows written for the run's clusters
    summary: list[dict] = field(default_factory=list)  # policy_summary rows, in reading order
    target: DecisionTarget | None = None  # the conf's report.target: the decision printed after the summary

    def summary_lines(self, detail: bool = True) -> list[str]:
        """Rows written, the policy summary and the decision; without `detail` the summary's main columns."""
        out = [
            f"gold run {self.run_id} ({self.window} windows): "
            + ", ".join(f"{name} {n:,} rows" for name, n in self.rows.items())
        ]
        out += format_summary(self.summary, SUMMARY_COLUMNS if detail else BRIEF_COLUMNS)
        out += decision_lines(decide(self.summary, self.target), self.target)
        return out


def format_number(value, fmt: str = "{:,.1f}") -> str:
    """A number as the summary prints it: '-' for none, 'inf' for infinity, else `fmt`."""
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return fmt.format(value)


SUMMARY_COLUMNS = (
    # (header, key, format)
    ("policy", "policy", "{}"),
    ("n", "n", "{:,}"),
    ("records", "acked_records", "{:,}"),
    ("p99 ms", "p99_ms", "{:,.1f}"),
    ("p999 ms", "p999_ms", "{:,.1f}"),
    ("Δp999 ms", "p999_vs_acks_all_ms", "{:+,.1f}"),
    ("p999 ×", "p999_vs_acks_all_ratio", "{:.2f}"),
    ("broker p999 ms", "broker_p999_ms", "{:,.1f}"),
    ("HOL p999 ms", "hol_wait_p999_ms", "{:,.1f}"),
    ("<minISR acks", "under_min_isr_acks", "{:,}"),
    ("exposure MB·s", "exposure_byte_ms", "{:,.1f}"),
    ("max exp ms", "max_exposure_ms", "{:,.1f}"),
    ("never minISR", "never_min_isr_acks", "{:,}"),
    ("1-copy acks", "single_copy_acks", "{:,}"),
    ("loss kafka", "loss_kafka_election", "{:,}"),
    ("loss longest", "loss_longest_log_election", "{:,}"),
    ("losable batch·s kafka", "loss_window_kafka_batch_s", "{:,.1f}"),
    ("losable batch·s longest", "loss_window_longest_batch_s", "{:,.1f}"),
    ("offline acks", "offline_at_failure_acks", "{:,}"),
    ("all-replicas p99 ms", "full_replication_p99_ms", "{:,.1f}"),
    ("all-replicas max ms", "full_replication_max_ms", "{:,.1f}"),
    ("never all", "never_full_replication_acks", "{:,}"),
    ("NER", "not_enough_replicas", "{:,}"),
    ("NER reroutable", "reroutable_rejections", "{:,}"),
    ("NER wait s", "rejected_wait_ms", "{:,.1f}"),
    ("KIP-637 saves s", "reroutable_wait_ms", "{:,.1f}"),
    ("timeouts", "timeouts", "{:,}"),
    ("not leader", "not_leader", "{:,}"),
    ("<minISR s", "under_min_isr_ms", "{:,.1f}"),
    ("placed p99 ms", "placed_p99_ms", "{:,.1f}"),
    ("placed p999 ms", "placed_p999_ms", "{:,.1f}"),
)

# keyless topics: the partitioner's re-simulation, printed with the lowest and highest single draw
PLACED_RANGE = {"placed_p99_ms": "placed_p99", "placed_p999_ms": "placed_p999"}


# acked batches a leader failure at the ack loses: the most, and the column with the least
LEAST_OF = {
    "loss_kafka_election": "loss_kafka_election_min",
    "loss_longest_log_election": "loss_longest_log_election_min",
    "loss_window_kafka_batch_s": "loss_window_kafka_min_batch_s",
    "loss_window_longest_batch_s": "loss_window_longest_min_batch_s",
}


def summary_cell(row: dict, key: str, fmt: str) -> str:
    """One policy_summary value as printed (text table and report.html use the same formatting)."""
    value = row.get(key)
    if key in LEAST_OF:  # printed as least–most (README, "Loss as a range")
        least = row.get(LEAST_OF[key])
        most = format_number(value, fmt)
        return most if least == value else f"{format_number(least, fmt)}–{most}"
    if key in PLACED_RANGE and value is not None:
        low, high = (row.get(f"{PLACED_RANGE[key]}_{end}_ms") for end in ("low", "high"))
        return f"{format_number(value, fmt)} ({format_number(low, fmt)}–{format_number(high, fmt)})"
    if key == "exposure_byte_ms" and value is not None:
        value = value / 1e9  # byte·ms -> MB·s
    if key in ("under_min_isr_ms", "rejected_wait_ms", "reroutable_wait_ms") and value is not None:
        value = value / 1e3  # (partition·)ms -> s
    return format_number(value, fmt)


# The console's summary without -v: latency, what a leader failure loses, what is rejected or times out.
BRIEF_COLUMNS = tuple(
    c
    for c in SUMMARY_COLUMNS
    if c[1]
    in (
        "policy", "n", "p99_ms", "p999_ms", "p999_vs_acks_all_ms", "broker_p999_ms", "under_min_isr_acks",
        "loss_kafka_election", "loss_longest_log_election", "not_enough_replicas", "timeouts",
    )
)  # fmt: skip
_BRIEF_LEGEND = (
    "n: produces the producer saw acked, retried ones too; p99, p999: producer-visible, per record, send() to ack;"
    " broker p999: per produce;"
    " Δ against the replayed acks=all; loss: acked batches a leader failure at the ack loses, least–most;"
    " NER: batches rejected with NotEnoughReplicas; -v and report.html: every column"
)


def placement_lines(block: list[dict], in_table: bool) -> list[str]:
    """For a keyless topic, the records' latency with the partitioner re-simulated under each policy (one line
    each, unless the table prints those columns already: `in_table`), and what it rests on."""
    placed = [r for r in block if r.get("placed_draws") is not None and r.get("placed_p99_ms") is not None]
    if not placed:
        return []
    out = [
        "    keyless records placed again by Kafka's partitioner under each policy (KIP-794,"
        f" {placed[0]['placed_draws']} seeded draws pooled; in brackets the lowest and highest single draw: a P99"
        " that moves between draws is set by where the partitioner happened to put a pause's records;"
        ' README "Keyless records")'
    ]
    if not in_table:
        width = max(len(r["policy"]) for r in placed)
        for r in placed:
            out.append(
                f"      {r['policy'].ljust(width)}  p50 {format_number(r['placed_p50_ms'])} ms"
                f"  p99 {summary_cell(r, 'placed_p99_ms', '{:,.1f}')} ms"
                f"  p999 {summary_cell(r, 'placed_p999_ms', '{:,.1f}')} ms"
            )
    return out


def format_summary(rows: list[dict], columns: tuple = SUMMARY_COLUMNS) -> list[str]:
    """The policy summary as a fixed-width text table of `columns`, one block per (cluster, topic)."""
    out: list[str] = []
    topics = sorted({(r["cluster"], r["topic"]) for r in rows})
    for cluster, topic in topics:
        block = [r for r in rows if (r["cluster"], r["topic"]) == (cluster, topic)]
        cells = [[h for h, _, _ in columns]] + [[summary_cell(r, key, fmt) for _, key, fmt in columns] for r in block]
        widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
        if columns is not SUMMARY_COLUMNS:
            out.append(f"  {cluster} / {topic}  ({_BRIEF_LEGEND})")
        else:
            out.append(
                f"  {cluster} / {topic}  (n: produces the producer saw acked, retried ones too; p99, p999:"
                " producer-visible, per record, send() to ack;"
                " broker p999: the broker's view per produce;"
                " HOL: waiting behind earlier responses on the connection; Δ and × against the replayed acks=all;"
                " loss: acked batches a leader failure at the ack loses, least–most; losable batch·s: how long after"
                " their acks a leader failure would still have lost them, summed (finite windows), least–most;"
                " offline: acked with no follower in the ISR and no live eligible leader replica, a failure leaves the"
                " partition without a leader; NER reroutable: rejections (NotEnoughReplicas) a KIP-637 producer"
                " of keyless records would have sent to another partition of the topic writable then (keyed records"
                " cannot move: 0); NER wait s: the rejected batches' summed wait until their own partition was"
                " writable again; KIP-637 saves s: that wait of the reroutable ones;"
                " '-': too few samples, or for <minISR s (partition·s under min ISR) an ISR not stored: acks=all@lag)"
            )
        share = send_time_share(block)
        if share is not None and share < 1:
            least = min(
                (r for r in block if r.get("n") and r.get("send_time_known") is not None),
                key=lambda r: r["send_time_known"] / r["n"],
            )
            # rounded down: a few produces without one never show as 100.0%
            percent = f"{math.floor(share * 1000) / 10:.1f}%"
            out.append(
                f"    send times (CreateTime or a client log) for {least['send_time_known']:,} of the "
                f"{least['n']:,} acked produces ({percent}) under {least['policy']}: the others' latency starts when"
                " the broker read their request, which misses the time they waited in the producer behind slower"
                ' responses (README "What the producer sees")'
            )
        verdict = block[0].get("self_check") or ""
        if verdict.startswith("FAILED"):
            out.append(
                f"    UNTRUSTED: the replay's self-check {verdict} (--accept-untrusted); not a basis for a decision"
            )
        for row in cells:
            out.append(
                "    "
                + "  ".join(
                    c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))
                )
            )
        out += placement_lines(block, columns is SUMMARY_COLUMNS)
    return out


def build_gold(
    replay: DataFrame,
    partitions: DataFrame,
    isr_changes: DataFrame,
    window: str,
    run_id: str,
    record_sends: DataFrame | None = None,
    produce_requests: DataFrame | None = None,
    keyless: Column | None = None,
    linger_ms: float | PerCluster = 0.0,
) -> dict[str, DataFrame]:
    """The four per-window gold frames (conformed to their contracts) from produce_replay, partitions,
    isr_changes, the records' send times (:func:`read_record_sends`), produce_requests (the recorded
    rejections) and which topics are keyless (:func:`keyless_topics`; None: all keyed); policy_summary is built
    from the availability rows once written (:func:`summary_frame`). `linger_ms`: the producers' linger.ms
    (`transforms.gold.record_latencies`)."""
    run = F.lit(run_id)
    # one row per committed ISR state, read by availability and routing several times: computed once
    segments = isr_segments(isr_changes, observed_until(replay, isr_changes)).localCheckpoint()
    # the same for each rejecting policy's writable partitions (acks=all@lag's from the replay's own rows)
    states = routing_states(replay, segments, partitions).localCheckpoint()
    if produce_requests is None:
        produce_requests = replay.sparkSession.createDataFrame([], PRODUCE_REQUESTS)
    frames = {
        "latency_percentiles": latency_percentiles(replay, window, record_sends, linger_ms),
        "risk_exposure": risk_exposure(replay, partitions, window),
        "availability": availability(replay, isr_changes, partitions, window, segments, states),
        "routing": routing(
            replay,
            produce_requests,
            segments,
            partitions,
            F.lit(False) if keyless is None else keyless,
            window,
            materialize=lambda rejections: rejections.localCheckpoint(),
            states=states,
        ),
    }
    return {name: conform(df.withColumn("gold_run_id", run), GOLD_CONTRACTS[name]) for name, df in frames.items()}


def keyless_in_records(batch_send_times: DataFrame | None) -> dict[tuple[str, str], bool]:
    """Per (cluster, topic) whose records' keys were seen (`batch_send_times.keyed_records`): True where none had a
    key, False where some had. Small: a row per topic."""
    if batch_send_times is None or "keyed_records" not in batch_send_times.columns:
        return {}
    seen = (
        batch_send_times.where(F.col("topic").isNotNull() & F.col("keyed_records").isNotNull())
        .groupBy("cluster", "topic")
        .agg(F.sum("keyed_records").alias("keyed"))
        .collect()
    )
    return {(r["cluster"], r["topic"]): r["keyed"] == 0 for r in seen}


def keyless_topics(config: AppConfig, seen: dict[tuple[str, str], bool] | None = None) -> Column:
    """True where a (cluster, topic) row's records have no key: ClusterSettings `topic_partitioning`, then
    `partitioning` (a cluster the conf does not name takes `default_cluster`'s); `auto` takes what the records
    showed (`seen`: :func:`keyless_in_records`), keyed where they showed nothing."""
    seen = seen or {}
    from_records = (
        F.coalesce(
            F.create_map(*[F.lit(v) for (c, t), k in sorted(seen.items()) for v in (f"{c}\x00{t}", k)])[
                F.concat_ws("\x00", F.col("cluster"), F.col("topic"))
            ],
            F.lit(False),
        )
        if seen
        else F.lit(False)
    )

    def chosen(partitioning: str) -> Column:
        return from_records if partitioning == AUTO else F.lit(partitioning == KEYLESS)

    def of(settings) -> Column:
        keyless = chosen(settings.partitioning)
        for topic, partitioning in sorted(settings.topic_partitioning.items()):
            keyless = F.when(F.col("topic") == F.lit(topic), chosen(partitioning)).otherwise(keyless)
        return keyless

    keyless = of(config.default_cluster)
    for name in sorted(config.clusters):
        keyless = F.when(F.col("cluster") == F.lit(name), of(config.cluster(name))).otherwise(keyless)
    return keyless


def may_have_keyless(config: AppConfig, seen: dict[tuple[str, str], bool] | None = None) -> bool:
    """Whether :func:`keyless_topics` can be true on any row: a conf that names keyless records, or `auto` with
    records seen without keys. False spares the runs of keyed topics the partitioner's Spark work."""
    settings = [config.default_cluster, *(config.cluster(name) for name in config.clusters)]
    choices = {s.partitioning for s in settings} | {p for s in settings for p in s.topic_partitioning.values()}
    return KEYLESS in choices or (AUTO in choices and any((seen or {}).values()))


def summary_frame(
    replay: DataFrame,
    partitions: DataFrame,
    available: DataFrame,
    run_id: str,
    record_sends: DataFrame | None = None,
    self_checks: dict[str, str] | None = None,
    linger_ms: float | PerCluster = 0.0,
    keyless: Column | None = None,
    request_lines: DataFrame | None = None,
    placement: DataFrame | None = None,
) -> DataFrame:
    """policy_summary conformed to its contract, from `available`: the availability rows this run wrote.
    `keyless`: which topics' records have no key (:func:`keyless_topics`; None: all keyed); `request_lines`:
    (cluster, broker_id, t_local_done) of the brokers' request lines, for `leader_silence_ms` (None: null);
    `placement`: :func:`placement_frame`'s rows (None: the `placed_*` columns null)."""
    summary = policy_summary(replay, partitions, available, record_sends, linger_ms).withColumn(
        "self_check", _verdict_of(self_checks)
    )
    keyless = F.lit(False) if keyless is None else keyless
    summary = summary.withColumn("partitioning", F.when(keyless, F.lit(KEYLESS)).otherwise(F.lit(KEYED)))
    # what KIP-637 reroutes and saves is a keyless producer's: keyed records cannot move (availability keeps the
    # keys-agnostic figures)
    for column, zero in (("reroutable_rejections", F.lit(0).cast("bigint")), ("reroutable_wait_ms", F.lit(0.0))):
        summary = summary.withColumn(column, F.when(keyless | F.col(column).isNull(), F.col(column)).otherwise(zero))
    if request_lines is not None:
        summary = summary.join(leader_silence_by_topic(replay, request_lines), ["cluster", "topic"], "left")
    else:
        summary = summary.withColumn("leader_silence_ms", F.lit(None).cast("double"))
    if placement is not None:
        summary = summary.join(placement, ["cluster", "topic", "policy"], "left")
    else:
        summary = summary.withColumns(
            {f.name: F.lit(None).cast(f.dataType) for f in PLACEMENT.fields if f.name.startswith("placed_")}
        )
    return conform(summary.withColumn("gold_run_id", F.lit(run_id)), POLICY_SUMMARY)


def _verdict_of(self_checks: dict[str, str] | None) -> Column:
    """policy_summary.self_check: the verdict of the row's cluster (null: none recorded)."""
    if not self_checks:
        return F.lit(None).cast("string")
    pairs = [F.lit(x) for cluster, verdict in sorted(self_checks.items()) for x in (cluster, verdict)]
    return F.element_at(F.create_map(*pairs), F.col("cluster"))


def self_check_verdicts(spark: SparkSession, lakehouse: str, clusters: list[str]) -> dict[str, str]:
    """cluster -> the latest replay's self-check as policy_summary states it; raises ReplayUntrusted for a
    cluster whose replay failed it and was not accepted (`--accept-untrusted`): gold is not written from it."""
    if not table_exists(spark, lakehouse, "replay_checks"):
        return {}
    rows = (
        read_table(spark, lakehouse, "replay_checks").filter(F.col("cluster").isin(clusters)).collect()
    )  # one per cluster
    refused = [r for r in rows if not r["trusted"] and not r["accepted_untrusted"]]
    if refused:
        raise ReplayUntrusted(
            "the latest replay of "
            + ", ".join(f"{r['cluster']} ({r['failures']})" for r in refused)
            + " failed its self-check: gold and the report are not written from it. Replay again with "
            "--accept-untrusted to write them marked untrusted (README, 'The replay checks itself')."
        )
    verdicts = {}
    for r in rows:
        if not r["trusted"]:
            verdicts[r["cluster"]] = f"FAILED, accepted untrusted: {r['failures']}"
        elif r["judged"] == "judged":
            verdicts[r["cluster"]] = "passed"
        else:
            verdicts[r["cluster"]] = f"not judged: {r['judged']}"
    return verdicts


def read_record_sends(spark: SparkSession, lakehouse: str, in_scope) -> DataFrame | None:
    """The batches whose records each have a send time (silver batch_send_times), None without that table."""
    if not table_exists(spark, lakehouse, "batch_send_times"):
        return None
    return record_sends_by_batch(read_table(spark, lakehouse, "batch_send_times").filter(in_scope))


def summary_rows(df: DataFrame) -> list[dict]:
    """policy_summary rows (small) on the driver, in reading order."""
    return [r.asDict() for r in df.orderBy("cluster", "topic", "policy_rank", "policy").collect()]


def check_contract(spark: SparkSession, lakehouse: str, name: str, contract) -> None:
    """Fail before writing when an existing gold table has other columns than its contract (written by
    an older version): replacing some clusters' rows cannot change the columns of the others'."""
    if not table_exists(spark, lakehouse, name):
        return
    have = [(f.name, f.dataType.simpleString()) for f in read_table(spark, lakehouse, name).schema.fields]
    want = [(f.name, f.dataType.simpleString()) for f in contract.fields]
    if have != want:
        missing = [n for n, _ in want if n not in dict(have)]
        extra = [n for n, _ in have if n not in dict(want)]
        raise ValueError(
            f"gold table {name} ({table_path(lakehouse, name)}) has other columns than its contract "
            f"(missing: {', '.join(missing) or '-'}; not in the contract: {', '.join(extra) or '-'}; or another "
            "order or type): it was written by an older version. Gold tables are rebuilt from produce_replay: "
            "delete that folder and rerun `ackreplay gold` for every cluster."
        )


def producers_per_cluster(config: AppConfig, setting: str) -> PerCluster:
    """`replay.producer.<setting>` per cluster: a named cluster's own where its `producer` block sets it."""
    return PerCluster(*config.producer_values(setting))


def placement_settings(config: AppConfig, cluster: str | None = None) -> PlacementSettings:
    """The settings of a cluster's producers (conf `replay.producer`, `clusters.<name>.producer`; None: a cluster
    the conf does not name) the partitioner's re-simulation follows."""
    producer = config.producer_of(cluster)
    return PlacementSettings(
        ProducerConfig(
            batch_size=producer.batch_size,
            linger_us=round(producer.linger_ms * 1000),
            max_in_flight=producer.max_in_flight,
        ),
        draws=producer.partitioner_draws,
    )


def placement_frame(
    replay: DataFrame,
    record_sends: DataFrame | None,
    produce_requests: DataFrame,
    follower_fetches: DataFrame | None,
    keyless: Column,
    config: AppConfig,
) -> DataFrame:
    """Per keyless (cluster, topic) and policy, the records' latency with the partitioner re-simulated
    (transforms/keyless.py). The brokers' request lines (produce and follower fetch) say when each read nothing."""
    starts = produce_requests.select("cluster", "broker_id", "t_start")
    if follower_fetches is not None:
        starts = starts.unionByName(follower_fetches.select("cluster", "broker_id", "t_start"))
    gaps = read_gaps(replay, produce_requests, starts, producers_per_cluster(config, "blocked_gap_ms"))
    inputs = placement_input(replay, record_sends, produce_requests, gaps, keyless)
    by_cluster = {name: placement_settings(config, name) for name in config.clusters}
    return keyless_placement(inputs, placement_settings(config), by_cluster)


def run_gold(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    clusters: list[str],
    run_id: str,
    window: str = "hour",
) -> GoldReport:
    """Rebuild the gold tables of `clusters` from produce_replay (`window`: minute | hour | day)."""
    report = GoldReport(run_id, window, target=config.report.target)
    in_scope = F.col("cluster").isin(clusters)
    # every gold frame reads produce_replay (each write plans its own Delta scans of it): read it once. Measured on
    # the 3.9.1 sample, warm runs in one process (2026-12-08): the gold step 14.9 s -> 12.6 s.
    replay = read_table(spark, lakehouse, "produce_replay").filter(in_scope).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        partitions = read_table(spark, lakehouse, "partitions").filter(in_scope)
        if table_exists(spark, lakehouse, "isr_changes"):
            isr_changes = read_table(spark, lakehouse, "isr_changes").filter(in_scope)
        else:
            # no server.log / state-change.log was ever ingested: time under min ISR is null (isr_known_ms 0)
            log.warning("no isr_changes table in %s: availability has no time under min ISR", lakehouse)
            isr_changes = spark.createDataFrame([], ISR_CHANGES)
        predicate = f"cluster IN ({', '.join(map(sql_string, clusters))})"
        self_checks = self_check_verdicts(spark, lakehouse, clusters)  # before anything is written
        record_sends = read_record_sends(spark, lakehouse, in_scope)
        seen_keys = keyless_in_records(
            read_table(spark, lakehouse, "batch_send_times").filter(in_scope)
            if table_exists(spark, lakehouse, "batch_send_times")
            else None
        )
        for name, contract in GOLD_CONTRACTS.items():
            check_contract(spark, lakehouse, name, contract)

        def write(name: str, df: DataFrame) -> None:
            started = time.monotonic()
            log.info("writing %s ...", name)
            # the write replaces exactly the rows of `clusters`: what it wrote is what the table holds of them
            report.rows[name] = replace_rows(df, lakehouse, name, predicate, run_id)
            log.info("writing %s done in %.1f s", name, time.monotonic() - started)

        produce_requests = (
            read_table(spark, lakehouse, "produce_requests").filter(in_scope)
            if table_exists(spark, lakehouse, "produce_requests")
            else None
        )
        linger_ms = producers_per_cluster(config, "linger_ms")
        frames = build_gold(
            replay, partitions, isr_changes, window, run_id, record_sends, produce_requests,
            keyless_topics(config, seen_keys), linger_ms,
        )  # fmt: skip
        for name, df in frames.items():
            write(name, df)
        # from the availability rows just written: planning and computing them again inside the summary's plan
        # cost as much as writing them (the two frames share no Spark work)
        written = read_table(spark, lakehouse, "availability").filter(in_scope)
        # every request line the leaders logged, for the time a leader did not run (leader_silence_ms)
        request_lines = [
            read_table(spark, lakehouse, name).filter(in_scope).select("cluster", "broker_id", "t_local_done")
            for name in ("produce_requests", "follower_fetches")
            if table_exists(spark, lakehouse, name)
        ]
        placement = None
        if produce_requests is not None and may_have_keyless(config, seen_keys):
            follower_fetches = (
                read_table(spark, lakehouse, "follower_fetches").filter(in_scope)
                if table_exists(spark, lakehouse, "follower_fetches")
                else None
            )
            placement = placement_frame(
                replay, record_sends, produce_requests, follower_fetches, keyless_topics(config, seen_keys), config
            )
        write(
            "policy_summary",
            summary_frame(
                replay, partitions, written, run_id, record_sends, self_checks, linger_ms,
                keyless_topics(config, seen_keys),
                reduce(DataFrame.unionByName, request_lines) if request_lines else None, placement,
            ),
        )  # fmt: skip
        report.summary = summary_rows(read_table(spark, lakehouse, "policy_summary").filter(in_scope))
        return report
    finally:
        replay.unpersist()
