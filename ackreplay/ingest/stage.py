"""The ingest stage: raw files -> bronze `request_log_lines`, `quarantine` -> silver `produce_requests`,
`follower_fetches`, `partitions`.

A run replaces exactly the rows that came from the files it read (rows are keyed by their source
file, relative to the input root), so rerunning on the same files leaves identical tables, a later
run with new files adds to them, and a file that grew (the live `kafka-request.log`) is replaced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.ingest.broker_logs import BrokerLogReport, ingest_broker_logs
from ackreplay.ingest.metrics import MetricsReport, ingest_metrics
from ackreplay.ingest.send_times import KINDS as SEND_TIME_KINDS
from ackreplay.ingest.send_times import (
    SendTimesReport,
    TopicSendTimesReport,
    ingest_send_times,
    ingest_topic_send_times,
    topic_clusters,
)
from ackreplay.schemas import tables
from ackreplay.storage.filesystems import s3a_settings
from ackreplay.storage.inputs import (
    InputError,
    InputFile,
    InputInventory,
    discover_all,
    refuse_misplaced,
    skipped_lines,
)
from ackreplay.storage.lakehouse import read_table, replace_rows, source_files_predicate, table_exists
from ackreplay.storage.line_reader import read_lines, read_request_logs
from ackreplay.transforms.common import conform
from ackreplay.transforms.follower_fetches import build_follower_fetches
from ackreplay.transforms.privacy import with_hashed_identities
from ackreplay.transforms.request_log import (
    select_produce_requests,
    select_quarantine,
    select_request_log_lines,
    with_event_time,
    with_local_log_time,
)
from ackreplay.transforms.topics import build_partitions, with_topics_line_kind

log = logging.getLogger(__name__)


@contextmanager
def _step(label: str):
    """Log how long a step took (the run log shows progress through long stages)."""
    started = time.monotonic()
    log.info("%s ...", label)
    yield
    log.info("%s done in %.1f s", label, time.monotonic() - started)


class ReconciliationError(RuntimeError):
    """Counts between stages do not add up: something would have been lost silently."""


@dataclass
class IngestReport:
    """What one ingest run read and wrote: files by kind, lines by status, rows per table, and what it skipped."""

    run_id: str
    request_log_files: int
    topics_files: int
    ignored_files: list[str]
    misplaced_files: list[str] = field(default_factory=list)
    controller_files: list[str] = field(default_factory=list)
    line_status: dict[str, int] = field(default_factory=dict)  # parsed / quarantined / unused
    unused_detail: dict[str, int] = field(default_factory=dict)
    quarantine_reasons: dict[str, int] = field(default_factory=dict)
    clusters_without_topics: list[str] = field(default_factory=list)  # request logs, no topics.txt ever
    # request-log files with lines, every one of them quarantined: (source file, lines, most frequent reason)
    unreadable_files: list[tuple[str, int, str]] = field(default_factory=list)
    rows_written: dict[str, int] = field(default_factory=dict)
    topics_lines: dict[str, int] = field(default_factory=dict)  # header / partition / blank / unrecognised
    clusters: list[str] = field(default_factory=list)
    broker_logs: BrokerLogReport | None = None
    metrics: MetricsReport | None = None
    send_times: SendTimesReport | None = None
    topic_send_times: TopicSendTimesReport | None = None

    @property
    def total_lines(self) -> int:
        return sum(self.line_status.values())

    def summary_lines(self, detail: bool = True) -> list[str]:
        """What the ingest read and wrote; `detail`: with the unused lines by kind and the rows per table."""
        status = self.line_status
        out = [
            f"ingest run {self.run_id}: {self.request_log_files} request-log files, {self.topics_files} topics.txt",
            f"  request-log lines: {self.total_lines:,} = parsed {status.get('parsed', 0):,}"
            f" + quarantined {status.get('quarantined', 0):,} + unused {status.get('unused', 0):,}",
        ]
        if detail:
            for what, n in sorted(self.unused_detail.items(), key=lambda kv: -kv[1]):
                out.append(f"    unused   {n:>10,}  {what}")
        for reason, n in sorted(self.quarantine_reasons.items(), key=lambda kv: -kv[1]):
            out.append(f"    quarantined {n:>7,}  {reason}")
        if detail:
            for table, n in self.rows_written.items():
                out.append(f"  {table}: {n:,} rows written")
        if self.broker_logs is not None:
            out.extend(self.broker_logs.summary_lines(detail))
        if self.metrics is not None and self.metrics.files:
            out.extend(self.metrics.summary_lines(detail))
        if self.send_times is not None and self.send_times.files:
            out.extend(self.send_times.summary_lines())
        if self.topic_send_times is not None:
            out.extend(self.topic_send_times.summary_lines())
        if self.clusters_without_topics:
            out.append(
                f"  no topics.txt for {', '.join(self.clusters_without_topics)} (ingest.missing_topics: warning):"
                " topic ids unresolved, replicas and min ISR unknown"
            )
        if self.unreadable_files:
            out.append(
                f"  {len(self.unreadable_files):,} request-log file(s) with every line quarantined"
                " (ingest.unreadable_files: warning):"
            )
            out += [f"    {path}: {n:,} lines, most: {reason}" for path, n, reason in self.unreadable_files]
        out += skipped_lines(self.ignored_files, self.misplaced_files, self.controller_files)
        return out


def unreadable_files(by_file: dict[tuple[str, str, str], int]) -> list[tuple[str, int, str]]:
    """Files all of whose lines were quarantined, from line counts by (source file, status, detail):
    (file, lines, the most frequent reason), in file order."""
    lines: dict[str, int] = {}
    reasons: dict[str, dict[str, int]] = {}
    for (path, status, detail), n in by_file.items():
        lines[path] = lines.get(path, 0) + n
        if status == "quarantined":
            reasons.setdefault(path, {})[detail] = n
    out = []
    for path in sorted(reasons):
        if sum(reasons[path].values()) == lines[path]:
            reason = max(reasons[path].items(), key=lambda kv: (kv[1], kv[0]))[0]
            out.append((path, lines[path], reason))
    return out


def refuse_unreadable(files: list[tuple[str, int, str]], setting: str) -> None:
    """Stop the run on request logs with no line the parser could read (`ingest.unreadable_files: error`)."""
    if not files or setting != "error":
        return
    shown = "\n".join(f"  {path}: {n:,} lines, most: {reason}" for path, n, reason in files[:10])
    more = f"\n  ... and {len(files) - 10} more" if len(files) > 10 else ""
    raise InputError(
        f"{len(files)} request-log file(s) with no line the ingest could read, every one quarantined:\n{shown}{more}\n"
        "a request log is the `kafka.request.logger` at DEBUG of a Kafka 2.8+ broker (docs/recording-telemetry.md);"
        " the lines are in the quarantine table (stage request_log). Remove the files, or set"
        " ingest.unreadable_files: warning to go on without them"
    )


def _counts(df: DataFrame, *keys: str) -> dict:
    """A small grouped count (bounded by the number of distinct keys) as a dict."""
    rows = df.groupBy(*keys).count().collect()
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r["count"] for r in rows}


def ingest_topics(
    spark: SparkSession, config: AppConfig, files: list[InputFile], lakehouse: str, run_id: str, report: IngestReport
) -> None:
    """topics.txt files -> `partitions` (and their unrecognised lines -> `quarantine`), for the clusters read."""
    lines = with_topics_line_kind(
        read_lines(spark, files, config.ingest.read_chunk_bytes, config.ingest.max_line_bytes).withColumn(
            "ingest_run_id", F.lit(run_id)
        )
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        default_min_isr = {f.cluster: config.cluster(f.cluster).default_min_insync_replicas for f in files}
        predicate = source_files_predicate(files)
        report.rows_written["partitions"] = replace_rows(
            build_partitions(lines, default_min_isr), lakehouse, "partitions", predicate, run_id
        )
        quarantine = lines.filter(F.col("line_kind") == "unrecognised").withColumns(
            {
                "stage": F.lit("topics"),
                "reason": F.coalesce(F.col("read_error"), F.lit("unrecognised kafka-topics --describe line")),
                "event_date": F.lit(None).cast("date"),
            }
        )
        replace_rows(
            conform(quarantine, tables.QUARANTINE), lakehouse, "quarantine", predicate + " AND stage = 'topics'", run_id
        )
        report.topics_lines = _counts(lines, "line_kind")
        if report.topics_lines.get("partition", 0) != report.rows_written["partitions"]:
            raise ReconciliationError(
                f"topics.txt: {report.topics_lines.get('partition', 0)} partition lines but "
                f"{report.rows_written['partitions']} partitions rows written"
            )
    finally:
        lines.unpersist()


def _clusters_with_partitions(spark: SparkSession, lakehouse: str, clusters: list[str]) -> set[str]:
    """Which of `clusters` have rows in the partitions table (a topics.txt ingested, now or before)."""
    if not table_exists(spark, lakehouse, "partitions"):
        return set()
    partitions = read_table(spark, lakehouse, "partitions").filter(F.col("cluster").isin(clusters))
    return {r["cluster"] for r in partitions.select("cluster").distinct().collect()}


def refuse_missing_topics(clusters: list[str], setting: str) -> None:
    """Stop the run on clusters with request logs and no topics.txt (`ingest.missing_topics: error`)."""
    if not clusters:
        return
    if setting != "error":
        for cluster in clusters:
            log.warning(
                "cluster %s has no topics.txt: topic ids cannot be resolved and RF/min ISR are unknown", cluster
            )
        return
    raise InputError(
        f"{len(clusters)} cluster(s) with request logs and no topics.txt, in this input or ingested before: "
        f"{', '.join(clusters)}\n"
        "without it the topic ids of PRODUCE and FETCH v13+ lines cannot be resolved (those lines would be"
        " quarantined, the cluster left without produces) and each partition's replicas and min.insync.replicas"
        " are unknown. Add <input>/<cluster>/topics.txt (kafka-topics.sh --describe: docs/recording-telemetry.md),"
        " or set ingest.missing_topics: warning to go on without it"
    )


def _topic_ids(spark: SparkSession, lakehouse: str, clusters: list[str]) -> dict[str, str]:
    """ "cluster/topicId" -> topic name, from the partitions table (metadata: one row per topic)."""
    if not table_exists(spark, lakehouse, "partitions"):
        return {}
    partitions = read_table(spark, lakehouse, "partitions").filter(F.col("cluster").isin(clusters))
    rows = partitions.filter(F.col("topic_id").isNotNull()).select("cluster", "topic_id", "topic").distinct().collect()
    return {f"{r['cluster']}/{r['topic_id']}": r["topic"] for r in rows}


def with_event_times(rows_df: DataFrame, config: AppConfig) -> DataFrame:
    """`t_log` (UTC) and `event_date` of parsed request-log rows, from each cluster's zone and broker clocks."""
    return rows_df.transform(with_local_log_time).transform(with_event_time, *config.log_clocks())


def ingest_request_logs(
    spark: SparkSession, config: AppConfig, files: list[InputFile], lakehouse: str, run_id: str, report: IngestReport
) -> None:
    """Request-log files -> bronze `request_log_lines`, silver `produce_requests` and `follower_fetches`, and
    `quarantine`, replacing the rows of those files; the counts go to `report`."""
    clusters = sorted({f.cluster for f in files})
    topic_ids = _topic_ids(spark, lakehouse, clusters)
    # Read, classified and parsed in one pass over the files; the rows (line text for bronze, typed
    # columns for silver) are kept on disk for the four writes and the counts.
    rows = (
        read_request_logs(spark, files, config.ingest.read_chunk_bytes, config.ingest.max_line_bytes, topic_ids)
        .withColumn("ingest_run_id", F.lit(run_id))
        .transform(with_event_times, config)
        .persist(StorageLevel.DISK_ONLY)
    )
    try:
        predicate = source_files_predicate(files)
        with _step(f"reading and parsing {len(files)} request-log files into request_log_lines"):
            report.rows_written["request_log_lines"] = replace_rows(
                select_request_log_lines(rows), lakehouse, "request_log_lines", predicate, run_id
            )
        with _step("writing quarantine"):
            replace_rows(
                select_quarantine(rows), lakehouse, "quarantine", predicate + " AND stage = 'request_log'", run_id
            )
        with _step("writing produce_requests"):
            produce_requests = select_produce_requests(rows)
            if config.privacy.hash_identities:  # principals and client ids as salted hashes from silver on
                produce_requests = with_hashed_identities(produce_requests, config.privacy.salt())
            report.rows_written["produce_requests"] = replace_rows(
                produce_requests, lakehouse, "produce_requests", predicate, run_id
            )
        with _step("writing follower_fetches"):
            report.rows_written["follower_fetches"] = replace_rows(
                build_follower_fetches(rows), lakehouse, "follower_fetches", predicate, run_id
            )
        with _step("counting lines by file and status"):
            by_file = _counts(rows.filter(F.col("row_kind") == "line"), "source_file", "status", "detail")
    finally:
        rows.unpersist()
    for (_, status, detail), n in by_file.items():
        report.line_status[status] = report.line_status.get(status, 0) + n
        if status == "unused":
            report.unused_detail[detail] = report.unused_detail.get(detail, 0) + n
        elif status == "quarantined":
            report.quarantine_reasons[detail] = report.quarantine_reasons.get(detail, 0) + n
    report.unreadable_files = unreadable_files(by_file)
    if report.rows_written["request_log_lines"] != report.total_lines:
        raise ReconciliationError(
            f"{report.total_lines} request-log lines classified but {report.rows_written['request_log_lines']} "
            "bronze rows written"
        )


def run_ingest(
    spark: SparkSession, config: AppConfig, inputs: str | Sequence[str | InputFile], lakehouse: str
) -> IngestReport:
    """Ingest every request log and topics.txt under the input folder(s) into `lakehouse`."""
    inventory: InputInventory = discover_all([inputs] if isinstance(inputs, str) else list(inputs), s3a_settings(spark))
    refuse_misplaced(inventory.misplaced, config.ingest.misplaced_files)
    run_id = "ingest-" + inventory.fingerprint(
        ("request_log", "topics", "server_log", "state_change_log", "controller_log", "metrics", *SEND_TIME_KINDS)
    )
    request_files = inventory.of_kind("request_log")
    topics_files = inventory.of_kind("topics")
    report = IngestReport(
        run_id,
        len(request_files),
        len(topics_files),
        list(inventory.ignored),
        list(inventory.misplaced),
        list(inventory.controller_files),
    )
    if topics_files:
        ingest_topics(spark, config, topics_files, lakehouse, run_id, report)
    request_clusters = {f.cluster for f in request_files}
    missing = request_clusters - {f.cluster for f in topics_files}
    if missing:  # an earlier run may have ingested the cluster's topics.txt
        report.clusters_without_topics = sorted(missing - _clusters_with_partitions(spark, lakehouse, sorted(missing)))
        refuse_missing_topics(report.clusters_without_topics, config.ingest.missing_topics)
    if request_files:
        ingest_request_logs(spark, config, request_files, lakehouse, run_id, report)
        refuse_unreadable(report.unreadable_files, config.ingest.unreadable_files)
    broker_log_files = [
        f for kind in ("server_log", "state_change_log", "controller_log") for f in inventory.of_kind(kind)
    ]
    with _step(f"reading {len(broker_log_files)} server.log/state-change.log/controller.log files"):
        report.broker_logs = ingest_broker_logs(spark, config, broker_log_files, lakehouse, run_id)
    metrics_files = inventory.of_kind("metrics")
    with _step(f"reading {len(metrics_files)} metrics scrape files"):
        report.metrics = ingest_metrics(spark, config, metrics_files, lakehouse, run_id)
    send_time_files = [f for kind in SEND_TIME_KINDS for f in inventory.of_kind(kind)]
    with _step(f"reading {len(send_time_files)} send-time files"):
        report.send_times = ingest_send_times(spark, config, send_time_files, lakehouse, run_id)
    if topic_clusters(config, request_files):
        # after the broker logs: their leader epochs say which batches a leader change cut
        with _step("reading send times from the topics (Spark's Kafka source)"):
            report.topic_send_times = ingest_topic_send_times(spark, config, request_files, lakehouse, run_id)
    report.clusters = sorted({f.cluster for f in inventory.files})
    return report
