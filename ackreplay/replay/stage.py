"""The replay stage: silver produce_requests, follower_fetches, isr_changes, leader_epochs, partitions
-> silver `produce_replay` (one row per replayed produce and policy).

Work is grouped by (cluster, leader broker, time bucket): produces on one side and the follower LEO
events on the other of a cogrouped `applyInArrow`, in which the NumPy kernel runs per (partition,
leader epoch). The small tables (partitions, leader epochs, ISR changes, source-file names) are
collected once and travel with the group function (`ReplayContext`). One shuffle per side; nothing that
grows with the produces is collected to the driver (the written files' descriptions are one row per
data file, as Spark's own writer reports them).

The groups write produce_replay's data files themselves with pyarrow and the driver commits them in one
Delta transaction (`replay.writer: arrow`, ackreplay/storage/arrow_delta.py), or return their rows to Spark's
Delta writer (`spark`: storage pyarrow cannot write, e.g. Unity Catalog volumes).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ackreplay.config import AppConfig, ProducerSettings
from ackreplay.kafka_lines import DEFAULT_REQUEST_TIMEOUT_MS
from ackreplay.replay.elr import ElrSetting, announced_levels, elr_settings, partition_elr_rows
from ackreplay.replay.groups import (
    PRODUCE_REPLAY_ARROW,
    REJECTED,
    REJECTED_REPLAYED,
    IsrProposals,
    PartitionEpochs,
    ProducerRules,
    ReplayContext,
    replay_group,
)
from ackreplay.replay.kafka_release import MinIsrRule, logged_releases, min_isr_rules
from ackreplay.replay.own_lag import OwnLag, own_lags
from ackreplay.replay.retries import RetrySettings
from ackreplay.replay.self_check import SelfCheck, ack_truth_columns, check_replay
from ackreplay.replay.send_delays import SendDelay
from ackreplay.replay.send_delays import cluster_columns as send_delay_columns
from ackreplay.replay.send_delays import measured as measured_send_delays
from ackreplay.replay.send_delays import summary_lines as send_delay_lines
from ackreplay.schemas.broker_logs import (
    BROKER_CONFIGS,
    BROKER_REGISTRATIONS,
    FOLLOWER_LEO_RECORDS,
    FOLLOWER_STARTS,
    ISR_CHANGES,
    LEADER_EPOCHS,
    METADATA_DELTAS,
)
from ackreplay.schemas.metrics import FOLLOWER_LEO_SAMPLES
from ackreplay.schemas.replay import PRODUCE_REPLAY, REPLAY_CHECKS, WRITTEN_FILE
from ackreplay.schemas.tables import BATCH_SEND_TIMES, REQUEST_LOG_LINES
from ackreplay.schemas.vocabulary import ACKS_1, ACKS_ALL, NEVER, Outcome
from ackreplay.session import is_connect
from ackreplay.storage.arrow_delta import (
    ArrowFileWriter,
    Conjunction,
    arrow_writable,
    commit_files,
    local_path,
    on_fuse_mount,
    unwritable_features,
)
from ackreplay.storage.inputs import InputError
from ackreplay.storage.lakehouse import (
    column_comments,
    read_table,
    replace_rows,
    sql_string,
    table_exists,
    table_path,
    table_spec,
)
from ackreplay.transforms.common import PerCluster, conform
from ackreplay.transforms.failovers import failover_truncations, leader_changes
from ackreplay.transforms.replay_inputs import (
    RUNNING_LEADER_MAX_SILENCE_US,
    appended,
    broker_silences,
    build_epochs,
    by_controller,
    event_side,
    fetch_events,
    fetched_epochs,
    leo_evidence,
    metric_events,
    partition_key,
    produce_side,
    rejected_below_min_isr,
    retry_episodes,
    send_delays,
    source_file_id,
    with_leader_epoch,
    with_recorded_leos,
    with_send_times,
)

log = logging.getLogger(__name__)

DAY_US = 86_400_000_000


@dataclass
class ReplayReport:
    """What one replay run did: produces replayed or skipped, rows per policy and outcome, the ground truth
    and the self-check, and per cluster where the follower evidence came from, its ELR setting and own lag."""

    run_id: str
    produces: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> produce rows not replayed
    replayed: int = 0
    policies: list[str] = field(default_factory=list)
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)  # (policy, outcome) -> rows
    ground_truth: dict[str, float | None] = field(default_factory=dict)
    # recorded acks=all produces the broker rejected with NOT_ENOUGH_REPLICAS, and how many of them the
    # replayed acks=all rejects (groups.rejection_truth), with either writer
    rejections: dict[str, int] = field(default_factory=dict)
    # cluster -> (recorded NOT_ENOUGH_REPLICAS produces, of them rejected by the replayed acks=all): judged by the
    # self-check
    rejections_by_cluster: dict[str, tuple[int, int]] = field(default_factory=dict)
    self_check: SelfCheck | None = None
    metric_clusters: list[str] = field(default_factory=list)  # replayed from JMX LEO scrapes (no FETCH lines)
    # cluster -> "Recorded replica ... (LEO)" lines of its leaders, which place the follower LEOs (with_recorded_leos)
    recorded_leo_lines: dict[str, int] = field(default_factory=dict)
    blind_clusters: list[str] = field(default_factory=list)  # produces, no follower evidence at all (warning mode)
    failovers: list[dict] = field(default_factory=list)  # transforms.failovers rows: leader changes that cut acks
    elr: dict[str, ElrSetting] = field(default_factory=dict)  # cluster -> keeps eligible leader replicas (elr.py)
    own_lags: dict[str, OwnLag] = field(default_factory=dict)  # cluster -> its own replica.lag.time.max.ms (`own`)
    min_isr_rules: dict[str, MinIsrRule] = field(default_factory=dict)  # cluster -> HW below min ISR (release)
    # cluster -> the replay.producer keys its own `producer` block sets (AppConfig.producer_of), where it sets any
    own_producers: dict[str, dict[str, float]] = field(default_factory=dict)
    # per cluster and producer client: its requests' delay after their first record, against linger.ms
    send_delays: list[SendDelay] = field(default_factory=list)
    # cluster -> (median ms from a controller's registration line to the brokers' applying it, samples):
    # metadata_apply_delays; a cluster with controller.log but none: absent (its spans start at the line)
    metadata_delays: dict[str, tuple[float, int]] = field(default_factory=dict)

    def summary_lines(self, detail: bool = True) -> list[str]:
        """The replay's counts, ground truth and self-check; `detail`: with each cluster's eligible leader
        replicas and own replica lag (the evidence the replay took them from)."""
        out = [
            f"replay run {self.run_id}: {self.produces:,} produce rows = replayed {self.replayed:,}"
            + "".join(f" + {n:,} {reason}" for reason, n in sorted(self.skipped.items()))
        ]
        if detail and any(s.enabled for s in self.elr.values()):
            out.append(
                "  eligible leader replicas (KIP-966: Kafka's election takes one when the ISR is the leader alone): "
                + "; ".join(f"{c} {'on' if s.enabled else 'off'} ({s.evidence})" for c, s in sorted(self.elr.items()))
            )
            for cluster, s in sorted(self.elr.items()):
                if s.printed:
                    gaps = (
                        f" ({s.after_gap:,} more follow a change no line shows, a skipped partition epoch: not "
                        "compared)"
                        if s.after_gap
                        else ""
                    )
                    out.append(
                        f"    {cluster}: Kafka's rule (PartitionChangeBuilder.maybePopulateTargetElr) derives the "
                        f"eligible replicas a registration line printed on {s.derived_equal:,} of {s.printed:,} commits"
                        f"{gaps}"
                    )
        if detail and self.min_isr_rules:
            out.append("  below min ISR (replay.strict_min_isr, by Kafka release):")
            out += [f"    {rule.line()}" for _, rule in sorted(self.min_isr_rules.items())]
        if detail and self.own_lags:
            out.append(
                "  own lag (replay.lag_ms `own`: the ISR re-simulated at each cluster's replica.lag.time.max.ms):"
            )
            out += [f"    {own.line()}" for _, own in sorted(self.own_lags.items())]
        if detail and self.metadata_delays:
            out.append(
                "  broker fencing and controlled shutdown as the leaders knew it (controller.log + the brokers' "
                "metadata deltas): "
                + "; ".join(
                    f"{c} {ms:.1f} ms after the controller's line (median of {n})"
                    for c, (ms, n) in sorted(self.metadata_delays.items())
                )
            )
        if self.own_producers:
            out.append(
                "  producers with their own settings (clusters.<name>.producer; the others: replay.producer): "
                + "; ".join(
                    f"{c} " + ", ".join(f"{k} {v:g}" for k, v in sorted(keys.items()))
                    for c, keys in sorted(self.own_producers.items())
                )
            )
        own_linger = [c for c, keys in self.own_producers.items() if "linger_ms" in keys]
        out += send_delay_lines(self.send_delays, own_linger, detail)
        if self.blind_clusters:
            out.append(
                f"  no follower evidence for {', '.join(self.blind_clusters)} (replay.missing_follower_evidence: "
                "warning):"
                " every produce waiting for a follower replays as a timeout"
            )
        if self.recorded_leo_lines:
            lines = ", ".join(f"{c} {n:,}" for c, n in sorted(self.recorded_leo_lines.items()))
            out.append(
                "  follower LEOs at the moments the leaders logged them (kafka.cluster.Partition at DEBUG: 'Recorded"
                f" replica ... log end offset (LEO)' lines): {lines}"
            )
        if self.metric_clusters:
            out.append(
                f"  no follower FETCH lines for {', '.join(self.metric_clusters)}: replayed from the JMX LEO scrapes "
                "(leo_source = jmx_metrics; ack times coarse, to about a scrape interval)"
            )
        if self.ground_truth:
            g = self.ground_truth
            out.append(
                f"  ground truth (recorded acks=all, replayed acks=all vs the broker's ack): n={int(g['n'] or 0):,}, "
                f"within 1 ms {_share(g['within_1ms'])}, within 2 ms {_share(g['within_2ms'])}; P999 of ack wait "
                f"{_ms(g['p999_replayed_ms'])} replayed vs {_ms(g['p999_observed_ms'])} observed"
            )
        if self.rejections.get("rejected"):
            r = self.rejections
            out.append(
                f"  rejections: {r['rejected']:,} recorded acks=all produces answered NOT_ENOUGH_REPLICAS, "
                f"{r['rejected_replayed']:,} of them rejected by the replayed acks=all (committed ISR below min ISR)"
            )
        if self.self_check is not None:
            out += self.self_check.summary_lines()
        if self.failovers:
            out.append(
                "  leader changes that cut acknowledged records (the new leader's start offset in the brokers' logs;"
                " the replay's follower timeline: lost at least, had the new leader appended the old leader's last"
                " FETCH answer, at most, had it held only what it had reported):"
            )
            for f in self.failovers:
                replayed = (
                    "unknown: no FETCH from it in that epoch"
                    if f["replayed_held_offset"] is None
                    else f"{f['acked_batches_replayed_lost_min']:,} to {f['acked_batches_replayed_lost_max']:,}"
                    f" (reported offset {f['replayed_held_offset']:,}, last response at"
                    f" {f['replayed_sent_until']:%H:%M:%S.%f})"
                )
                out.append(
                    f"    {f['cluster']} {f['topic']}-{f['partition']} epoch {f['old_epoch']}->{f['new_epoch']} "
                    f"(broker {f['old_leader']}->{f['new_leader']}, {f['t_new_epoch']:%H:%M:%S}): "
                    f"{f['acked_batches_truncated']:,} acks=1 batches acknowledged and lost (the log restarts at "
                    f"offset {f['new_start_offset']:,}); the replay's timeline: {replayed}"
                    + (
                        f"; {f['acked_all_batches_truncated']:,} acks=all batches lost"
                        if f["acked_all_batches_truncated"]
                        else ""
                    )
                )
        return out


# Session settings for the replay's write, restored afterwards.
REPLAY_WRITE_CONF = {
    # Schema merge: a lakehouse written before produce_replay gained a column (leo_source) takes it on.
    "spark.databricks.delta.schema.autoMerge.enabled": "true",
    # No byte limit on the Arrow batches sent to the group function (the row limit still applies): with
    # a limit, Spark measures the batch after every row (for the list columns the replay once sent, a
    # walk of the whole batch: 30 s of a 77 s 1M-produce replay, docs/benchmarks.md).
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    # Write each task's rows to their (cluster, event_date) files as they come instead of sorting the
    # task's whole output by the partition columns first (a task's rows span one or two dates).
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "4",
}


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"  # None: no broker ack observed


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


@contextmanager
def _session_conf(spark: SparkSession, settings: dict[str, str]):
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, earlier in previous.items():
            if earlier is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, earlier)


def _without_follower_evidence(produce: DataFrame, samples: DataFrame, clusters: list[str]) -> list[str]:
    """Of `clusters` (no follower FETCH lines), those with produces and no JMX LEO sample either."""
    in_scope = F.col("cluster").isin(clusters)
    sampled = samples.filter(in_scope & (F.col("metric") == "kafka_log_log_logendoffset")).select("cluster")
    producing = produce.filter(in_scope).select("cluster").distinct()
    return sorted(r["cluster"] for r in producing.join(sampled.distinct(), "cluster", "left_anti").collect())


def refuse_blind(clusters: list[str], setting: str) -> None:
    """Stop the replay on clusters with produces and no follower evidence (`replay.missing_follower_evidence`)."""
    if not clusters or setting != "error":
        return
    raise InputError(
        f"{len(clusters)} cluster(s) with produces and no follower evidence: {', '.join(clusters)}\n"
        "neither follower FETCH lines in their request logs (the kafka.request.logger at DEBUG logs them:"
        " docs/recording-telemetry.md) nor JMX LEO scrapes (<input>/<cluster>/metrics/*.prom) say when a follower"
        " had a batch, so every acks=all produce would replay as a timeout. Add either, or set"
        " replay.missing_follower_evidence: warning to replay them anyway"
    )


def _read_or_empty(spark: SparkSession, lakehouse: str, name: str, schema) -> DataFrame:
    if table_exists(spark, lakehouse, name):
        return read_table(spark, lakehouse, name)
    return spark.createDataFrame([], schema)


DateSpan = tuple[date | None, date | None]  # inclusive UTC dates; None: unbounded on that side


@dataclass(frozen=True)
class DateScope:
    """The rows a replay covers: per cluster, its inclusive UTC dates (a cluster without dates: all of it), in
    the three forms the stage needs, from one definition: a Column for reading, SQL for Delta's replaceWhere,
    and partition filters for the Arrow writer's delta-rs commits (one conjunction a cluster)."""

    clusters: tuple[str, ...]
    dates: Mapping[str, DateSpan]

    def widened(self, days: int) -> DateScope:
        """The same clusters with each bound moved `days` outwards."""
        margin = timedelta(days=days)
        spans = {}
        for cluster in self.clusters:
            first, last = self.dates.get(cluster, (None, None))
            spans[cluster] = (first - margin if first else None, last + margin if last else None)
        return DateScope(self.clusters, spans)

    def sql(self) -> str:
        terms = []
        for cluster in self.clusters:
            first, last = self.dates.get(cluster, (None, None))
            parts = [f"cluster = {sql_string(cluster)}"]
            parts += [f"event_date >= DATE'{first.isoformat()}'"] if first is not None else []
            parts += [f"event_date <= DATE'{last.isoformat()}'"] if last is not None else []
            terms.append("(" + " AND ".join(parts) + ")")
        return " OR ".join(terms) if terms else "false"

    def column(self) -> F.Column:
        return F.expr(self.sql())

    def partition_filters(self) -> list[Conjunction]:
        """The scope as partition filters on (`cluster`, `event_date` as text), one conjunction per cluster."""
        filters: list[Conjunction] = []
        for cluster in self.clusters:
            first, last = self.dates.get(cluster, (None, None))
            terms = [("cluster", "=", cluster)]
            terms += [("event_date", ">=", first.isoformat())] if first is not None else []
            terms += [("event_date", "<=", last.isoformat())] if last is not None else []
            filters.append(terms)
        return filters


def choose_writer(setting: str, lakehouse: str, connect: bool = False) -> str:
    """`replay.writer` resolved: arrow or spark. `auto` is arrow on a local filesystem of a classic session (on
    Spark Connect the workers and this process, which commits their files, need not share a filesystem), not on a
    Databricks FUSE mount, and not for an existing `produce_replay` with writer features that committing files
    would not keep (Databricks enables row tracking, in-commit timestamps and others by default)."""
    if setting == "auto":
        if not arrow_writable(lakehouse) or connect or on_fuse_mount(lakehouse):
            return "spark"
        return "spark" if unwritable_features(local_path(table_path(lakehouse, "produce_replay"))) else "arrow"
    if setting == "arrow" and not arrow_writable(lakehouse):
        raise ValueError(
            f"replay.writer is arrow, but the lakehouse {lakehouse} is not a local path: the Python workers "
            "cannot write there. Set replay.writer to spark (or auto)."
        )
    features = unwritable_features(local_path(table_path(lakehouse, "produce_replay"))) if setting == "arrow" else []
    if features:
        raise ValueError(
            f"replay.writer is arrow, but produce_replay in {lakehouse} has writer features a commit of the replay's "
            f"own files would not keep ({', '.join(features)}). Set replay.writer to spark (or auto)."
        )
    if setting == "arrow" and connect:
        raise ValueError(
            "replay.writer is arrow, but the session is a Spark Connect client: the server's workers write the "
            "files this process would commit. Set replay.writer to spark (or auto)."
        )
    return setting


@dataclass(frozen=True)
class _ProduceSummary:
    """What the produce rows in scope hold, from one small aggregation per source file."""

    source_files: dict[int, str]
    max_timeout_ms: int
    total: int
    skipped: dict[str, int]
    appended: int
    rejected: int  # acks=all produces the brokers rejected with NOT_ENOUGH_REPLICAS


def _summarize_produces(produce: DataFrame) -> _ProduceSummary:
    with_offset = F.coalesce(F.col("base_offset"), F.lit(-1)) >= 0
    rows = (
        produce.groupBy("source_file")
        .agg(
            F.first(source_file_id()).alias("source_file_id"),
            F.count("*").alias("rows"),
            F.count_if(F.col("acks") == 0).alias("acks0"),
            F.count_if((F.col("acks") != 0) & ~appended() & ~with_offset).alias("failed"),
            # an error with an offset: appended, then answered with an error while it waited (NOT_LEADER when the
            # leadership moved, NOT_ENOUGH_REPLICAS_AFTER_APPEND up to Kafka 3.6): in the log, not replayed
            F.count_if((F.col("acks") != 0) & ~appended() & with_offset).alias("answered_error"),
            F.max("timeout_ms").alias("max_timeout_ms"),
            F.count_if(rejected_below_min_isr()).alias("rejected"),
        )
        .collect()  # one row per source file
    )
    source_files = {int(r["source_file_id"]): r["source_file"] for r in rows}
    if len(source_files) != len(rows):
        raise ValueError("two source file names share a 64-bit hash; rename one of the input files")
    skipped = {
        "acks=0 (no offset)": sum(r["acks0"] for r in rows),
        "not appended (error response)": sum(r["failed"] for r in rows),
        "appended but answered with an error (not replayed)": sum(r["answered_error"] for r in rows),
    }
    total = sum(r["rows"] for r in rows)
    return _ProduceSummary(
        source_files=source_files,
        # no timeoutMs on any produce: the producer's default
        max_timeout_ms=max((r["max_timeout_ms"] or 0 for r in rows), default=0) or DEFAULT_REQUEST_TIMEOUT_MS,
        total=total,
        skipped={k: v for k, v in skipped.items() if v},
        appended=total - sum(skipped.values()),
        rejected=sum(r["rejected"] for r in rows),
    )


def _partition_epochs(epochs: DataFrame, partitions: DataFrame) -> dict[int, PartitionEpochs]:
    """pkey -> the partition's leader epochs (only partitions listed in `partitions`: others are not replayed)."""
    meta = partitions.select("cluster", "topic", "partition", "replicas", "min_insync_replicas")
    rows = (
        epochs.join(F.broadcast(meta), ["cluster", "topic", "partition"], "inner")
        .select(
            partition_key().alias("pkey"), "cluster", "topic", "partition", "replicas", "min_insync_replicas",
            "leader_epoch", "leader_id", "epoch_start_us", "epoch_end_us", "leader_until_us", "start_isr",
        )
        .collect()  # one row per (partition, leader epoch)
    )  # fmt: skip
    by_partition = defaultdict(list)
    for r in rows:
        by_partition[int(r["pkey"])].append(r)
    out = {}
    for pkey, group in by_partition.items():
        group.sort(key=lambda r: (r["epoch_start_us"], r["leader_epoch"]))
        first = group[0]
        out[pkey] = PartitionEpochs(
            cluster=first["cluster"],
            topic=first["topic"],
            partition=int(first["partition"]),
            replicas=tuple(int(x) for x in first["replicas"]),
            min_insync_replicas=int(first["min_insync_replicas"]),
            leader_epoch=np.array([r["leader_epoch"] for r in group], np.int32),
            leader=np.array([r["leader_id"] for r in group], np.int32),
            start_us=np.array([r["epoch_start_us"] for r in group], np.int64),
            end_us=np.array([r["epoch_end_us"] for r in group], np.int64),
            leader_until_us=np.array([r["leader_until_us"] for r in group], np.int64),
            start_isr=tuple(None if r["start_isr"] is None else tuple(r["start_isr"]) for r in group),
        )
    return out


def _isr_changes(
    isr_changes: DataFrame, epochs: DataFrame
) -> dict[tuple[int, int], tuple[np.ndarray, tuple, np.ndarray, tuple, tuple]]:
    """(pkey, leader epoch) -> the committed ISR changes the epoch's leader logged, by time: their times,
    ISRs, whether the controller alone made them (`by_controller`), the eligible leader replicas a
    registration line printed for them (None where none did) and their partition epochs (None: unknown).

    ISR lines from server.log carry no epoch: each is placed in the epoch its broker led at that time.
    """
    placed = with_leader_epoch(isr_changes.drop("leader_epoch"), epochs, F.unix_micros("t_log"))
    rows = placed.select(
        partition_key().alias("pkey"),
        "leader_epoch",
        F.unix_micros("t_log").alias("t_us"),
        "isr",
        by_controller().alias("by_controller"),
        "elr",
        "partition_epoch",
    ).collect()  # ISR changes are rare events: a few per partition and day
    by_epoch = defaultdict(list)
    for r in rows:
        key = (int(r["pkey"]), int(r["leader_epoch"]))
        elr = None if r["elr"] is None else tuple(r["elr"])
        by_epoch[key].append(
            (int(r["t_us"]), tuple(r["isr"] or ()), bool(r["by_controller"]), elr, r["partition_epoch"])
        )
    out = {}
    for key, changes in by_epoch.items():
        changes.sort(key=lambda c: c[0])  # stable: lines of the same instant keep their order
        out[key] = (
            np.array([c[0] for c in changes], np.int64),
            tuple(c[1] for c in changes),
            np.array([c[2] for c in changes], bool),
            tuple(c[3] for c in changes),
            tuple(c[4] for c in changes),
        )
    return out


def _elr_rows(
    partitions: Mapping[int, PartitionEpochs],
    changes: Mapping[tuple[int, int], tuple[np.ndarray, tuple, np.ndarray, tuple, tuple]],
    settings: Mapping[str, ElrSetting],
) -> dict[tuple[int, int], np.ndarray]:
    """(pkey, leader epoch) -> the kernel's `elr_membership`, for the partitions of clusters that keep
    eligible leader replicas (ackreplay/replay/elr.py)."""
    by_partition: dict[int, dict[int, tuple]] = defaultdict(dict)
    for (pkey, number), (times, isrs, _, printed, partition_epochs) in changes.items():
        by_partition[pkey][number] = (times, isrs, printed, partition_epochs)
    out = {}
    for pkey, part in partitions.items():
        setting = settings.get(part.cluster)
        if setting is None or not setting.enabled:
            continue
        epochs = [
            (int(part.leader_epoch[k]), int(part.leader[k]), int(part.start_us[k]), part.start_isr[k])
            for k in range(part.leader_epoch.size)
        ]
        rows = partition_elr_rows(part.replicas, part.min_insync_replicas, epochs, by_partition.get(pkey, {}), setting)
        out.update({(pkey, number): membership for number, membership in rows.items()})
    return out


def logged_lines(request_log_lines: DataFrame) -> DataFrame:
    """(cluster, broker_id, t_local_done): when each broker logged each request-log line, of any request.

    Every line is a sign that the broker ran: a FETCH of a caught-up follower whose incremental session
    lists no partition, or a consumer's, is in no silver table, and while an acks=all producer is held by a
    stalled follower such lines may be all a leader logs for seconds. (The silver rows' `t_local_done`,
    which comes before their line's time, says so earlier: both are used.)"""
    return request_log_lines.where(F.col("t_log").isNotNull()).select(
        "cluster", "broker_id", F.col("t_log").alias("t_local_done")
    )


def leader_silences(
    request_lines: DataFrame, proposals: Mapping[tuple[str, int], IsrProposals]
) -> dict[tuple[str, int], np.ndarray]:
    """(cluster, broker_id) -> int64 (S, 2), sorted: the spans in which the broker did not run
    (replay_inputs.broker_silences), from its last request line to its first isr-expiration check after.
    Rare events: a pause, a crash, a restart.

    A resumed JVM runs the overdue check at once (fixed rate), while its request handlers work off the
    requests that queued meanwhile; the logs order the two only when the check proposed a shrink
    (`proposals`, isr_proposals: "Shrinking ISR", within `RUNNING_LEADER_MAX_SILENCE_US` of the first line after the
    silence: 1.4 ms after it on the 4.1.1 lab trace, 62 ms on 3.9.1). Without such a line it is taken to
    have run before the first request after the silence was handled: on the 3.7.2 lab trace a leader
    stalled for 18 s (lag 10 s) proposed no shrink, although any append before its check would have put
    its followers out of sync."""
    by_broker = defaultdict(list)
    for r in broker_silences(request_lines).collect():
        key = (r["cluster"], int(r["broker_id"]))
        resumed = int(r["resumed_us"])
        times = proposals[key].times if key in proposals else np.empty(0, np.int64)
        i = int(np.searchsorted(times, resumed - 1))
        checked = resumed - 1
        if i < times.size and times[i] <= resumed + RUNNING_LEADER_MAX_SILENCE_US:
            checked = int(times[i])
        by_broker[key].append((int(r["silent_from_us"]), max(checked, int(r["silent_from_us"]) + 1)))
    return {key: np.array(sorted(spans), np.int64).reshape(-1, 2) for key, spans in by_broker.items()}


# A broker's delta line more than this after a controller's record is not taken as that record's application.
_DELTA_AFTER_RECORD_US = 1_000_000


def metadata_apply_delays(
    broker_registrations: DataFrame, metadata_deltas: DataFrame, clusters: list[str]
) -> dict[str, tuple[float, int]]:
    """cluster -> (median ms, samples): how long after a controller's registration line the brokers had the record
    in their metadata cache (`Partition.isReplicaIsrEligible` reads that cache, not the controller).

    Measured on the records that change partitions in the same batch: a broker entering controlled shutdown
    (`ReplicationControlManager.handleBrokerInControlledShutdown` moves its leaderships and shrinks its ISRs with
    the registration change) or fenced without one (`handleBrokerFenced`). Each broker logs its applying of that
    batch as its first "Transitioning N partition(s)" line after it (`metadata_deltas`; BrokerMetadataPublisher
    sets the cache just before). Only records with no other registration record within a second either side count,
    so the line is that batch's. The records that matter for ISR eligibility (an unfencing) change no partition and
    log nothing on the brokers: they take the cluster's median. One row per cluster reaches the driver."""
    regs = broker_registrations.filter(F.col("cluster").isin(clusters)).withColumn("t_us", F.unix_micros("t_log"))
    by_broker = Window.partitionBy("cluster", "broker_id").orderBy("t_us", "line_number")
    by_cluster = Window.partitionBy("cluster").orderBy("t_us", "line_number")
    fenced_while_serving = F.col("fenced") & ~F.col("was_shutting")
    changes = (
        regs.withColumn("was_shutting", F.coalesce(F.lag("in_controlled_shutdown").over(by_broker), F.lit(False)))
        .withColumn("gap_before", F.col("t_us") - F.lag("t_us").over(by_cluster))
        .withColumn("gap_after", F.lead("t_us").over(by_cluster) - F.col("t_us"))
        .filter(
            (F.col("in_controlled_shutdown") | (fenced_while_serving & (F.col("record") != "RegisterBrokerRecord")))
            & F.coalesce(F.col("gap_before") > _DELTA_AFTER_RECORD_US, F.lit(True))
            & F.coalesce(F.col("gap_after") > _DELTA_AFTER_RECORD_US, F.lit(True))
        )
        .select("cluster", F.col("t_us").alias("t_record"))
    )  # fmt: skip
    deltas = metadata_deltas.filter(F.col("cluster").isin(clusters)).select(
        "cluster", "broker_id", F.unix_micros("t_log").alias("t_delta")
    )
    samples = (
        changes.join(deltas, "cluster")
        .filter(F.col("t_delta") > F.col("t_record"))
        .filter(F.col("t_delta") <= F.col("t_record") + _DELTA_AFTER_RECORD_US)
        .groupBy("cluster", "t_record", "broker_id")
        .agg((F.min("t_delta") - F.col("t_record")).alias("delay_us"))
    )  # fmt: skip
    rows = samples.groupBy("cluster").agg(F.median("delay_us").alias("median_us"), F.count("*").alias("n")).collect()
    return {r["cluster"]: (float(r["median_us"]) / 1000.0, int(r["n"])) for r in rows}


def ineligible_spans(broker_registrations: DataFrame, clusters: list[str]) -> dict[tuple[str, int], np.ndarray]:
    """(cluster, broker_id) -> int64 (S, 2), sorted: when the broker could not join an ISR nor hold a leader's HW
    back outside it, by the controllers' registration records (`broker_registrations`): fenced, in controlled
    shutdown or unregistered, on the controller's clock (`Partition.isReplicaIsrEligible` reads the leader's
    metadata cache, which a record reaches later: metadata_apply_delays, the kernel's `ineligible_delay_us`). A
    broker's state before its first record is not known: no span. Brokers without records (ZooKeeper mode,
    no controller.log) are left out: the replay does not know. Rare events: a few per broker start and shutdown."""
    rows = (
        broker_registrations.filter(F.col("cluster").isin(clusters))
        .select(
            "cluster", "broker_id", F.unix_micros("t_log").alias("t_us"), "record", "fenced", "in_controlled_shutdown",
        )
        .orderBy("cluster", "broker_id", "t_us", "record")
        .collect()
    )  # fmt: skip
    spans: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    state: dict[tuple[str, int], tuple[bool, bool, bool]] = {}  # registered, fenced, in controlled shutdown
    since: dict[tuple[str, int], int | None] = {}  # ineligible since
    for r in rows:
        key, t = (r["cluster"], int(r["broker_id"])), int(r["t_us"])
        registered, fenced, shutting = state.get(key, (True, False, False))
        if r["record"] == "UnregisterBrokerRecord":
            registered = False
        else:
            registered = registered or r["record"] == "RegisterBrokerRecord"
            fenced = fenced if r["fenced"] is None else bool(r["fenced"])
            shutting = shutting if r["in_controlled_shutdown"] is None else bool(r["in_controlled_shutdown"])
        state[key] = (registered, fenced, shutting)
        ineligible, start = not registered or fenced or shutting, since.get(key)
        if ineligible and start is None:
            since[key] = t
        elif not ineligible and start is not None:
            if t > start:
                spans[key].append((start, t))
            since[key] = None
    for key, start in since.items():
        if start is not None:
            spans[key].append((start, NEVER))
    return {key: np.array(spans.get(key, []), np.int64).reshape(-1, 2) for key in state}


def isr_proposals(isr_changes: DataFrame) -> dict[tuple[str, int], IsrProposals]:
    """(cluster, broker_id) -> each "Shrinking ISR" the broker's isr-expiration task logged (`proposed_at`),
    its partition, and how long until its "ISR updated to" (the AlterPartition round trip to the controller,
    longer while the controller is busy: at startup, after a pause; and for a partition whose request waited
    for the broker's previous one). Rare events: a few per broker and day."""
    rows = (
        isr_changes.where(F.col("proposed_at").isNotNull())
        .select(
            "cluster", "broker_id", "topic", "partition", F.unix_micros("proposed_at").alias("t_us"),
            (F.unix_micros("t_log") - F.unix_micros("proposed_at")).alias("delay_us"),
        )
        .collect()
    )  # fmt: skip
    by_broker = defaultdict(list)
    for r in rows:
        by_broker[(r["cluster"], int(r["broker_id"]))].append(
            (int(r["t_us"]), max(int(r["delay_us"]), 0), r["topic"], int(r["partition"]))
        )
    out = {}
    for key, entries in by_broker.items():
        entries.sort()
        out[key] = IsrProposals(
            np.array([e[0] for e in entries], np.int64),
            np.array([e[1] for e in entries], np.int64),
            np.array([e[2] for e in entries], object),
            np.array([e[3] for e in entries], np.int64),
        )
    return out


def producer_rules(producer: ProducerSettings) -> ProducerRules:
    """A cluster's producer settings (AppConfig.producer_of) in the replay's units."""
    return ProducerRules(
        linger_us=round(producer.linger_ms * 1000),
        blocked_gap_us=round(producer.blocked_gap_ms * 1000),
        max_in_flight=producer.max_in_flight,
        retry=RetrySettings(
            backoff_us=round(producer.retry_backoff_ms * 1000),
            backoff_max_us=round(producer.retry_backoff_max_ms * 1000),
            delivery_timeout_us=round(producer.delivery_timeout_ms * 1000),
        ),
    )


def run_replay(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    clusters: list[str],
    run_id: str,
    dates: Mapping[str, DateSpan] | None = None,
    accept_untrusted: bool = False,
) -> ReplayReport:
    """Replay the produces of `clusters` and replace their rows of produce_replay: every produce, or with
    `dates` (cluster -> inclusive UTC dates) only the produces of those dates.

    A produce of a date waits for fetches of the next day at most (the request timeout and the ISR
    re-simulation's lag windows are far shorter than a day), so fetches are read one day either side.
    ISR changes and leader epochs are read whole: an epoch's ISR history can start days earlier.
    """
    settings = config.replay
    report = ReplayReport(run_id)
    dates = {c: span for c, span in (dates or {}).items() if c in clusters and span != (None, None)}
    scope = DateScope(tuple(clusters), dates)
    in_scope = scope.column()
    produce = read_table(spark, lakehouse, "produce_requests").filter(in_scope)
    fetch_dates = scope.widened(1).column()
    fetches = read_table(spark, lakehouse, "follower_fetches").filter(fetch_dates)
    in_scope_clusters = F.col("cluster").isin(clusters)
    bronze = _read_or_empty(spark, lakehouse, "request_log_lines", REQUEST_LOG_LINES).filter(in_scope_clusters)
    partitions = read_table(spark, lakehouse, "partitions").filter(in_scope_clusters)
    leader_epochs = _read_or_empty(spark, lakehouse, "leader_epochs", LEADER_EPOCHS).filter(in_scope_clusters)
    isr_changes = _read_or_empty(spark, lakehouse, "isr_changes", ISR_CHANGES).filter(in_scope_clusters)
    follower_starts = _read_or_empty(spark, lakehouse, "follower_starts", FOLLOWER_STARTS).filter(in_scope_clusters)
    broker_configs = _read_or_empty(spark, lakehouse, "broker_configs", BROKER_CONFIGS)
    # the brokers' own lag: re-simulated with `own`, and the maximal ISR's caught-up test in every replay
    logged_lags = own_lags(broker_configs, clusters, config.configured_lags(clusters))
    recorded_lag_ms = {c: own.lag_ms for c, own in logged_lags.items() if own.lag_ms is not None}
    if settings.own_lag:
        report.own_lags = logged_lags
    releases = logged_releases(broker_configs, clusters) if settings.strict_min_isr == "auto" else {}
    report.min_isr_rules = min_isr_rules(releases, clusters, settings.strict_min_isr)
    report.own_producers = {c: dict(config.cluster(c).producer) for c in clusters if config.cluster(c).producer}
    registrations = _read_or_empty(spark, lakehouse, "broker_registrations", BROKER_REGISTRATIONS)
    report.metadata_delays = metadata_apply_delays(
        registrations, _read_or_empty(spark, lakehouse, "metadata_deltas", METADATA_DELTAS), clusters
    )
    own_lag_ms = recorded_lag_ms if settings.own_lag else {}
    writer_kind = choose_writer(settings.writer, lakehouse, is_connect(spark))
    phases: dict[str, float] = {}
    mark = time.monotonic()

    summary = _summarize_produces(produce)
    report.produces = summary.total
    bucket_us = settings.bucket_seconds * 1_000_000
    lag_ms = settings.fixed_lags_ms
    all_lags = (*lag_ms, *own_lag_ms.values())
    # The ISR re-simulation of a bucket starts from the events of two lag windows before it.
    lookback_us = int(2 * max(all_lags, default=0.0) * 1000)
    if dates and summary.max_timeout_ms * 1000 + lookback_us >= DAY_US:
        raise ValueError(
            f"a replay by dates reads fetches one day either side, but the request timeout "
            f"({summary.max_timeout_ms} ms) plus two lag windows reach further: replay whole clusters (no dates) "
            "instead"
        )

    fetched = fetched_epochs(fetches).cache()  # small: a row per partition and leader epoch
    # the leaders' request-log lines bound a crashed leader's epoch (replay_inputs.with_leader_until)
    request_lines = produce.select("cluster", "broker_id", "t_local_done").unionByName(
        fetches.select("cluster", "broker_id", "t_local_done")
    )
    epochs = build_epochs(leader_epochs, fetched, follower_starts, request_lines).cache()
    # A cluster without follower FETCH lines (request log at INFO on the brokers) is replayed from the
    # followers' LEO scrapes instead: coarse (scrape interval), flagged in `leo_source`.
    fetch_clusters = {r["cluster"] for r in fetched.select("cluster").distinct().collect()}  # one row per cluster
    metric_clusters = sorted(set(clusters) - fetch_clusters)
    report.metric_clusters = metric_clusters
    events = fetch_events(leo_evidence(fetches), settings.fetch_update_fraction)
    leo_records = _read_or_empty(spark, lakehouse, "follower_leo_records", FOLLOWER_LEO_RECORDS).filter(
        fetch_dates & in_scope_clusters
    )
    report.recorded_leo_lines = {r["cluster"]: r["count"] for r in leo_records.groupBy("cluster").count().collect()}
    if report.recorded_leo_lines:
        events = with_recorded_leos(events, leo_records)
    if metric_clusters:
        samples = _read_or_empty(spark, lakehouse, "follower_leo_samples", FOLLOWER_LEO_SAMPLES)
        report.blind_clusters = _without_follower_evidence(produce, samples, metric_clusters)
        refuse_blind(report.blind_clusters, settings.missing_follower_evidence)
        events = events.unionByName(
            metric_events(samples.filter(DateScope(tuple(metric_clusters), dates).widened(1).column()), epochs),
            allowMissingColumns=True,
        )
        log.info("no follower FETCH lines for %s: replaying from JMX LEO samples", ", ".join(metric_clusters))

    target = table_path(lakehouse, "produce_replay")
    spec = table_spec("produce_replay")
    # what the ISR re-simulation takes from the logs besides the LEO timelines (rare events, collected)
    proposals = isr_proposals(isr_changes) if all_lags else {}
    partition_epochs = _partition_epochs(epochs, partitions)
    changes = _isr_changes(isr_changes, epochs)
    report.elr = elr_settings(
        clusters,
        {c: s.eligible_leader_replicas for c, s in config.clusters.items()},
        {
            partition_epochs[pkey].cluster
            for (pkey, _), change in changes.items()
            if pkey in partition_epochs and any(change[3])
        },
        announced_levels(bronze),
    )
    context = ReplayContext(
        quorum_sizes=tuple(settings.quorum_sizes),
        lag_ms=lag_ms,
        strict_min_isr={c: rule.strict for c, rule in report.min_isr_rules.items()},
        producer=producer_rules(settings.producer),
        cluster_producers={c: producer_rules(config.producer_of(c)) for c in clusters},
        run_id=run_id,
        partitions=partition_epochs,
        # the groups need the changes themselves; the printed ELRs and partition epochs served _elr_rows
        isr_changes={key: change[:3] for key, change in changes.items()},
        elr_rows=_elr_rows(partition_epochs, changes, report.elr),
        leader_silences=leader_silences(request_lines.unionByName(logged_lines(bronze.filter(fetch_dates))), proposals)
        if all_lags
        else {},
        own_lag_ms=own_lag_ms,
        recorded_lag_ms=recorded_lag_ms,
        isr_proposals=proposals,
        broker_ineligible=ineligible_spans(registrations, clusters),
        ineligible_delay_us={c: round(ms * 1000) for c, (ms, _) in report.metadata_delays.items()},
        source_files=summary.source_files,
        leo_sources={c: "jmx_metrics" for c in metric_clusters},
        writer=ArrowFileWriter(
            root=local_path(target),
            partition_by=spec.partition_by,
            stats_columns=spec.stats_columns,
            dictionary_columns=DICTIONARY_COLUMNS,
            statistics_columns=PARQUET_STATISTICS_COLUMNS,
            delta_encoded_columns=DELTA_ENCODED_COLUMNS,
        )
        if writer_kind == "arrow"
        else None,
    )

    def replay_fn(left: pa.Table, right: pa.Table) -> pa.Table:
        return replay_group(context, left, right)

    send_times = _read_or_empty(spark, lakehouse, "batch_send_times", BATCH_SEND_TIMES).filter(in_scope_clusters)
    appended_produces = produce.filter(appended() | rejected_below_min_isr())
    if not send_times.isEmpty():
        appended_produces = with_send_times(appended_produces, send_times)
        blocked_gap_ms = PerCluster(*config.producer_values("blocked_gap_ms"))
        report.send_delays = measured_send_delays(
            [r.asDict() for r in send_delays(appended_produces, blocked_gap_ms.column()).collect()],  # a row a client
            lambda cluster: config.producer_of(cluster).linger_ms,
        )
    if summary.rejected:
        # the batches whose latency a policy admitting a rejected attempt changes: few, joined by broadcast
        row_key = ["cluster", "topic", "partition", "source_file", "line_number"]
        episodes = retry_episodes(appended_produces).localCheckpoint()
        appended_produces = appended_produces.join(F.broadcast(episodes), row_key, "left")
    replayed = (
        produce_side(appended_produces, bucket_us)
        .groupBy("gid")
        .cogroup(event_side(events, bucket_us, summary.max_timeout_ms * 1000, lookback_us).groupBy("gid"))
        .applyInArrow(replay_fn, WRITTEN_FILE if writer_kind == "arrow" else PRODUCE_REPLAY)
    )
    phases["inputs"], mark = time.monotonic() - mark, time.monotonic()
    log.info("replaying produces of %s (%s writer) ...", ", ".join(clusters), writer_kind)
    with _session_conf(spark, REPLAY_WRITE_CONF):
        if writer_kind == "arrow":
            # one row per written data file, and one per group whose every produce was rejected (no path)
            files = [r.asDict() for r in replayed.collect()]
            phases["groups and data files"], mark = time.monotonic() - mark, time.monotonic()
            data_files = [f for f in files if f["path"]]
            commit_files(
                local_path(target), PRODUCE_REPLAY_ARROW, spec.partition_by, data_files, scope.partition_filters(),
                run_id, configuration={"delta.dataSkippingStatsColumns": ",".join(spec.stats_columns)},
                description=spec.description, comments=column_comments("produce_replay"),
            )  # fmt: skip
            outcomes: dict[tuple[str, str], int] = defaultdict(int)
            truth_counts: dict[str, int] = defaultdict(int)
            for f in files:
                for key, count in json.loads(f["outcome_counts"]).items():
                    policy, outcome = key.split("|")
                    outcomes[(policy, outcome)] += count
                for key, count in json.loads(f["ground_truth"]).items():
                    truth_counts[key] += count
            report.outcomes = dict(outcomes)
            report.rejections = {k: truth_counts[k] for k in (REJECTED, REJECTED_REPLAYED)}
            report.rejections_by_cluster = _rejections_per_cluster(truth_counts)
            phases["commit"] = time.monotonic() - mark
        else:
            replace_rows(conform(replayed, PRODUCE_REPLAY), lakehouse, "produce_replay", scope.sql(), run_id)
            phases["groups and Spark's write"], mark = time.monotonic() - mark, time.monotonic()
            truth_counts = (  # the summary counted the recorded rejections already: no query when there are none
                _rejections_beside_sparks_writer(
                    context, produce, appended_produces, events, bucket_us, summary.max_timeout_ms * 1000, lookback_us
                )
                if summary.rejected
                else {}
            )
            report.rejections = {k: truth_counts.get(k, 0) for k in (REJECTED, REJECTED_REPLAYED)}
            report.rejections_by_cluster = _rejections_per_cluster(truth_counts)
            phases["rejections"] = time.monotonic() - mark
    mark = time.monotonic()
    epochs.unpersist()
    fetched.unpersist()

    result = read_table(spark, lakehouse, "produce_replay").filter(in_scope)
    if writer_kind != "arrow":
        report.outcomes = {
            (r["policy"], r["outcome"]): r["count"] for r in result.groupBy("policy", "outcome").count().collect()
        }
    report.policies = sorted({p for p, _ in report.outcomes})
    report.replayed = sum(n for (policy, _), n in report.outcomes.items() if policy == ACKS_1.id)
    report.skipped = dict(summary.skipped)
    unplaced = summary.appended - report.replayed
    if unplaced:
        report.skipped["outside any known leader epoch or partition"] = unplaced
    report.ground_truth = _ground_truth(result, dict(truth_counts) if writer_kind == "arrow" else None)
    report.self_check = check_replay(
        result, isr_changes, settings.self_check, metric_clusters, own_lag_ms, report.rejections_by_cluster
    )
    # Leader changes are rare events: with none in scope (most small inputs) nothing was cut, and the query
    # that scans produce_replay and the fetches several times is not planned at all.
    if leader_changes(leader_epochs).isEmpty():
        report.failovers = []
    else:
        failovers = failover_truncations(leader_epochs, result, fetches)
        report.failovers = [
            r.asDict() for r in failovers.orderBy("cluster", "t_new_epoch", "topic", "partition").collect()
        ]
    verdict_rows = [
        {**row, **send_delay_columns(report.send_delays, row["cluster"], config.producer_of(row["cluster"]).linger_ms)}
        for row in report.self_check.rows(run_id, accept_untrusted, clusters)
    ]
    verdicts = spark.createDataFrame(verdict_rows, REPLAY_CHECKS)
    replace_rows(verdicts, lakehouse, "replay_checks", f"cluster IN ({', '.join(map(sql_string, clusters))})", run_id)
    phases["counts and ground truth"] = time.monotonic() - mark
    log.info("replay phases: %s", ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items()))
    return report


def _rejections_per_cluster(truth_counts: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """cluster -> (recorded NOT_ENOUGH_REPLICAS answers, of them rejected by the replayed acks=all)."""
    clusters = [key.removeprefix(f"{REJECTED}|") for key in truth_counts if key.startswith(f"{REJECTED}|")]
    return {c: (truth_counts[f"{REJECTED}|{c}"], truth_counts.get(f"{REJECTED_REPLAYED}|{c}", 0)) for c in clusters}


def _rejections_beside_sparks_writer(
    context: ReplayContext,
    produce: DataFrame,
    appended_produces: DataFrame,
    events: DataFrame,
    bucket_us: int,
    timeout_us: int,
    lookback_us: int,
) -> dict[str, int]:
    """The rejection ground truth when Spark's writer wrote produce_replay: the groups it returns rows to cannot
    also return counts, so the few groups holding a recorded NOT_ENOUGH_REPLICAS answer are replayed again for
    their counts alone (`ReplayContext.rejections_only`). Called only when the logs hold such an answer."""
    groups = F.broadcast(produce_side(produce.filter(rejected_below_min_isr()), bucket_us).select("gid").distinct())
    counts_only = dataclasses.replace(context, rejections_only=True, writer=None)

    def count_fn(left: pa.Table, right: pa.Table) -> pa.Table:
        return replay_group(counts_only, left, right)

    rows = (
        produce_side(appended_produces, bucket_us)
        .join(groups, "gid", "left_semi")
        .groupBy("gid")
        .cogroup(event_side(events, bucket_us, timeout_us, lookback_us).join(groups, "gid", "left_semi").groupBy("gid"))
        .applyInArrow(count_fn, WRITTEN_FILE)
        .select("ground_truth")
        .collect()
    )
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        for key, count in json.loads(row["ground_truth"]).items():
            totals[key] += count
    return dict(totals)


# produce_replay's columns worth a Parquet dictionary (few distinct values), and those readers filter on.
DICTIONARY_COLUMNS = (
    "topic", "partition", "leader_epoch", "broker_id", "bytes", "records", "recorded_acks", "policy", "outcome",
    "copies_at_ack", "isr_source", "leo_source", "source_file", "replay_run_id",
)  # fmt: skip
PARQUET_STATISTICS_COLUMNS = ("topic", "partition", "leader_epoch", "base_offset", "policy", "outcome", "t_local_done")
# Offsets, line numbers and times grow along a partition's rows: delta encoding halves the files and
# their writing time (measured on the 10M bench, docs/benchmarks.md); Spark reads it since 3.3.
DELTA_ENCODED_COLUMNS = (
    "base_offset",
    "line_number",
    "t_start",
    "t_local_done",
    "t_ack",
    "t_ack_observed",
    "t_response",
)


def exact_high_percentiles(
    df: DataFrame, columns: Mapping[str, F.Column], p: float, counts: Mapping[str, int] | None = None
) -> dict[str, float | None]:
    """Spark's exact `percentile` at a high `p` of each column, without sorting every value.

    `percentile` interpolates between the values at ranks floor and ceil of p * (n - 1); both lie among
    the top n - floor(p * (n - 1)) values (0.1% of the rows at p = 0.999), which Spark's top-k
    (`orderBy(...).limit(k)`, a bounded heap per task) finds in one pass. Only the two values come back
    to the driver. Nulls are ignored, as by `percentile`; None: the column has no values. `counts`: the
    columns' non-null counts when the caller has them (saves a pass).
    """
    if counts is None:
        (count_row,) = df.agg(*[F.count(col).alias(name) for name, col in columns.items()]).collect()
        counts = count_row.asDict()
    out: dict[str, float | None] = {}
    for name, col in columns.items():
        n = counts[name]
        if n == 0:
            out[name] = None
            continue
        position = (n - 1) * p
        lower, higher = math.floor(position), math.ceil(position)
        top = (
            df.select(col.alias("v"))
            .where(F.col("v").isNotNull())
            .orderBy(F.desc("v"))
            .limit(n - lower)
            .agg(F.slice(F.sort_array(F.collect_list("v")), 1, 2).alias("v"))
            .collect()[0]["v"]
        )  # the values at ranks lower and lower + 1
        if higher == lower:
            out[name] = float(top[0])
        else:  # as Percentile.getPercentile computes it
            out[name] = (higher - position) * top[0] + (position - lower) * top[1]
    return out


def _ground_truth(result: DataFrame, counts: Mapping[str, int] | None = None) -> dict[str, float | None]:
    """Replayed acks=all against the broker's own ack time, for the produces recorded with acks=all.

    `counts`: the groups' counts of those produces (`groups._truth_counts`), when they wrote the table;
    otherwise they are counted here. The P999s are exact either way (`exact_high_percentiles`).
    """
    truth = result.filter(
        (F.col("policy") == ACKS_ALL.id) & (F.col("recorded_acks") == -1) & (F.col("outcome") == Outcome.ACKED.label)
    ).select(*ack_truth_columns())
    if counts is None:
        (count_row,) = truth.agg(
            F.count("*").alias("n"),
            F.count("err_ms").alias("observed"),
            F.count_if(F.col("err_ms") <= 1).alias("within_1ms"),
            F.count_if(F.col("err_ms") <= 2).alias("within_2ms"),
        ).collect()
        counts = count_row.asDict()
    if not counts.get("n"):
        return {}
    observed = counts["observed"]
    waits = {"p999_replayed_ms": F.col("replayed_wait_ms"), "p999_observed_ms": F.col("observed_wait_ms")}
    return {
        "n": counts["n"],
        "within_1ms": counts["within_1ms"] / observed if observed else None,
        "within_2ms": counts["within_2ms"] / observed if observed else None,
        **exact_high_percentiles(truth, waits, 0.999, {"p999_replayed_ms": counts["n"], "p999_observed_ms": observed}),
    }
