"""The send-times step of the ingest stage: `<cluster>/create-times/*` (kafka-dump-log output) and
`<cluster>/client/batches-*.csv*` (client batch logs) -> silver `batch_send_times`, their unusable lines
-> bronze `quarantine` (stage `send_times`); and, for clusters whose conf names their brokers
(`create_times_from_kafka`), the records' CreateTimes read from the topics themselves with Spark's Kafka
source. See transforms/send_times.py for the formats and the rules.

Like the other steps, a run replaces exactly the rows that came from the files it read, and the counts
reconcile: every line is parsed, unused or quarantined; the tables hold the parsed / quarantined ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.schemas import tables
from ackreplay.schemas.broker_logs import LEADER_EPOCHS
from ackreplay.storage.inputs import InputFile
from ackreplay.storage.lakehouse import read_table, replace_rows, source_files_predicate, sql_string, table_exists
from ackreplay.storage.line_reader import read_dump_logs, read_lines
from ackreplay.transforms.common import conform
from ackreplay.transforms.privacy import with_hashed_identities
from ackreplay.transforms.send_times import (
    CLIENT_BATCHES,
    CREATE_TIMES,
    SEND_TIMES,
    TOPIC_RECORDS,
    batch_send_times,
    classify_client_lines,
    dump_lines_classified,
    topic_batch_extents,
    topic_batches_wanted,
    topic_send_times,
    with_truncation,
)

log = logging.getLogger(__name__)
KINDS = (CREATE_TIMES, CLIENT_BATCHES)
_TOPIC_RECORDS_DDL = (
    "cluster string, topic string, partition int, offset bigint, timestamp timestamp, timestampType int, keyed boolean"
)


class SendTimesReconciliationError(RuntimeError):
    """Counts of the send-times step do not add up: something would have been lost silently."""


@dataclass
class SendTimesReport:
    """What the send-time ingest read: files, lines by (status, detail), rows written per table."""

    files: int = 0
    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # (status, detail) -> lines
    rows_written: dict[str, int] = field(default_factory=dict)

    def summary_lines(self) -> list[str]:
        by_status = {
            s: sum(n for (st, _), n in self.counts.items() if st == s) for s in ("parsed", "unused", "quarantined")
        }
        out = [
            f"send times: {self.files} files (kafka-dump-log output, client batch logs)",
            f"  lines: {sum(by_status.values()):,} = batches {by_status['parsed']:,} + unused {by_status['unused']:,}"
            f" + quarantined {by_status['quarantined']:,}",
        ]
        for (status, detail), n in sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0])):
            if status == "quarantined":
                out.append(f"    quarantined {n:>7,}  {detail}")
        return out


def ingest_send_times(
    spark: SparkSession, config: AppConfig, files: list[InputFile], lakehouse: str, run_id: str
) -> SendTimesReport:
    """Ingest send-time files into `batch_send_times` and `quarantine`; raise SendTimesReconciliationError
    when the counts do not add up."""
    unexpected = sorted({f.kind for f in files} - set(KINDS))
    if unexpected:
        raise ValueError(f"ingest_send_times reads {' and '.join(KINDS)} files, not {', '.join(unexpected)}")
    report = SendTimesReport(files=len(files))
    if not files:
        if not table_exists(spark, lakehouse, "batch_send_times"):
            replace_rows(
                spark.createDataFrame([], tables.BATCH_SEND_TIMES), lakehouse, "batch_send_times", "false", run_id
            )
        return report
    parts = []
    chunk_bytes, max_line_bytes = config.ingest.read_chunk_bytes, config.ingest.max_line_bytes
    dumps = [f for f in files if f.kind == CREATE_TIMES]
    if dumps:  # classified in the reading task, file by file
        parts.append(dump_lines_classified(read_dump_logs(spark, dumps, chunk_bytes, max_line_bytes)))
    client_logs = [f for f in files if f.kind == CLIENT_BATCHES]
    if client_logs:
        parts.append(classify_client_lines(read_lines(spark, client_logs, chunk_bytes, max_line_bytes)))
    classified = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    classified = classified.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        predicate = source_files_predicate(files)
        quarantined = classified.where(F.col("status") == "quarantined").select(
            "cluster", F.lit(None).cast("int").alias("broker_id"), F.lit(SEND_TIMES).alias("stage"), "source_file",
            "line_number", "line", F.col("detail").alias("reason"), F.to_date("t_send").alias("event_date"),
            F.lit(run_id).alias("ingest_run_id"),
        )  # fmt: skip
        report.rows_written["quarantine"] = replace_rows(
            conform(quarantined, tables.QUARANTINE), lakehouse, "quarantine",
            f"{predicate} AND stage IN ({sql_string(SEND_TIMES)})", run_id,
        )  # fmt: skip
        rows = batch_send_times(classified, run_id)
        if config.privacy.hash_identities:  # client ids hashed like produce_requests', so that they still match
            rows = with_hashed_identities(rows, config.privacy.salt(), ("client_id",))
        report.rows_written["batch_send_times"] = replace_rows(rows, lakehouse, "batch_send_times", predicate, run_id)
        by_status = classified.groupBy("status", "detail").agg(F.sum("lines").alias("n")).collect()
        per_file = (
            classified.groupBy("source_file")
            .agg(F.sum("lines").alias("lines"), F.max("line_number").alias("last"))
            .collect()
        )  # one row per file
    finally:
        classified.unpersist()
    report.counts = {(r["status"], r["detail"] or ""): r["n"] for r in by_status}
    problems = [
        f"{r['source_file']}: {r['lines']} lines read, last is {r['last']}" for r in per_file if r["lines"] != r["last"]
    ]
    for table, status in (("batch_send_times", "parsed"), ("quarantine", "quarantined")):
        expected = sum(n for (s, _), n in report.counts.items() if s == status)
        if report.rows_written[table] != expected:
            problems.append(f"{table}: {report.rows_written[table]} rows written, {expected} expected")
    if problems:
        raise SendTimesReconciliationError("send times do not reconcile: " + "; ".join(problems))
    return report


@dataclass
class TopicSendTimesReport:
    """The send times read from the topics themselves (`clusters.<name>.create_times_from_kafka`)."""

    clusters: list[str] = field(default_factory=list)
    partitions: int = 0
    batches: int = 0  # appended batches of this run's request-log files
    rows_written: int = 0
    problems: dict[str, int] = field(default_factory=dict)  # why a batch got no send time -> batches
    records_known: int = 0  # rows whose record count (and each record's send time) is known

    def summary_lines(self) -> list[str]:
        out = [
            f"send times from the topics of {', '.join(self.clusters)} (Spark's Kafka source): {self.partitions}"
            " partitions read",
            f"  batches: {self.batches:,} = with a send time {self.rows_written:,} + without"
            f" {sum(self.problems.values()):,}; record counts known for {self.records_known:,}",
        ]
        for problem, n in sorted(self.problems.items(), key=lambda kv: -kv[1]):
            out.append(f"    without {n:>7,}  {problem}")
        return out


def _topic_records(spark: SparkSession, cluster: str, options: dict[str, str], ranges: list) -> DataFrame:
    """The records of `ranges` ((topic, partition, first offset, end offset exclusive) rows) as Spark's Kafka
    source returns them, with the cluster's name."""
    import json

    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for r in ranges:
        assign.setdefault(r["topic"], []).append(r["partition"])
        starting.setdefault(r["topic"], {})[str(r["partition"])] = r["first_offset"]
        ending.setdefault(r["topic"], {})[str(r["partition"])] = r["end_offset"]
    reader = spark.read.format("kafka").options(**options)
    # failOnDataLoss false: offsets retention removed are skipped (their batches are counted as not in the topic)
    return (
        reader.option("assign", json.dumps(assign)).option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending)).option("failOnDataLoss", "false").load()
        .select(F.lit(cluster).alias("cluster"), "topic", "partition", "offset", "timestamp", "timestampType",
                F.col("key").isNotNull().alias("keyed"))
    )  # fmt: skip


def topic_clusters(config: AppConfig, request_files: list) -> list[str]:
    """The clusters of `request_files` whose send times are read from their topics (`create_times_from_kafka`)."""
    return sorted({f.cluster for f in request_files if config.cluster(f.cluster).create_times_from_kafka})


def ingest_topic_send_times(
    spark: SparkSession, config: AppConfig, request_files: list, lakehouse: str, run_id: str, read_records=None
) -> TopicSendTimesReport | None:
    """Send times of the batches of this run's request-log files, read from the topics with Spark's Kafka
    source for the clusters whose conf names them (`create_times_from_kafka`) -> `batch_send_times` (source
    `topic`; keyed by the request-log line of the produce, so a rerun replaces them with those files' rows).
    None when no cluster of the files reads its topics. `read_records(cluster, options, ranges)` stands in
    for the Kafka source (tests)."""
    clusters = topic_clusters(config, request_files)
    if not clusters:
        return None
    read_records = read_records or (lambda cluster, options, ranges: _topic_records(spark, cluster, options, ranges))
    files = [f for f in request_files if f.cluster in clusters]
    report = TopicSendTimesReport(clusters=clusters)
    produces = read_table(spark, lakehouse, "produce_requests").where(F.col("cluster").isin(clusters))
    if table_exists(spark, lakehouse, "leader_epochs"):
        epochs = read_table(spark, lakehouse, "leader_epochs").where(F.col("cluster").isin(clusters))
    else:
        epochs = spark.createDataFrame([], LEADER_EPOCHS)
    produces = with_truncation(produces, epochs).persist(StorageLevel.MEMORY_AND_DISK)
    predicate = source_files_predicate(files)
    try:
        extents = topic_batch_extents(produces)
        batches = topic_batches_wanted(produces.where(predicate))
        ranges = (
            batches.where(~F.coalesce("truncated", F.lit(False)))
            .join(extents, ["cluster", "topic", "partition", "base_offset"])
            .groupBy("cluster", "topic", "partition")
            .agg(F.min("base_offset").alias("first_offset"),
                 F.max(F.coalesce("end_offset", F.col("base_offset") + 1)).alias("end_offset"))
            .collect()  # a row per partition
        )  # fmt: skip
        report.partitions = len(ranges)
        parts = [
            read_records(c, config.cluster(c).create_times_from_kafka, [r for r in ranges if r["cluster"] == c])
            for c in clusters
            if any(r["cluster"] == c for r in ranges)
        ]
        records = reduce(DataFrame.unionByName, parts) if parts else spark.createDataFrame([], _TOPIC_RECORDS_DDL)
        rows = topic_send_times(records, extents, batches, run_id).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            written = rows.where(F.col("problem").isNull())
            if config.privacy.hash_identities:
                written = with_hashed_identities(written, config.privacy.salt(), ("client_id",))
            report.rows_written = replace_rows(
                conform(written, tables.BATCH_SEND_TIMES), lakehouse, "batch_send_times",
                f"{predicate} AND source = {sql_string(TOPIC_RECORDS)}", run_id,
            )  # fmt: skip
            counts = rows.groupBy("problem").agg(
                F.count("*").alias("n"), F.sum(F.col("records").isNotNull().cast("int")).alias("known"),
            ).collect()  # fmt: skip
        finally:
            rows.unpersist()
    finally:
        produces.unpersist()
    report.problems = {r["problem"]: r["n"] for r in counts if r["problem"] is not None}
    report.batches = sum(r["n"] for r in counts)
    kept = [r for r in counts if r["problem"] is None]
    report.records_known = kept[0]["known"] if kept else 0
    expected = report.batches - sum(report.problems.values())
    if report.rows_written != expected:
        raise SendTimesReconciliationError(
            f"send times from the topics: {report.rows_written} batch_send_times rows written, {expected} expected"
        )
    return report
