"""The send-times step of the ingest stage: `<cluster>/create-times/*` (kafka-dump-log output) and
`<cluster>/client/batches-*.csv*` (client batch logs) -> silver `batch_send_times`, their unusable lines
-> bronze `quarantine` (stage `send_times`). See transforms/send_times.py for the formats.

Like the other steps, a run replaces exactly the rows that came from the files it read, and the counts
reconcile: every line is parsed, unused or quarantined; the tables hold the parsed / quarantined ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.inputs import InputFile
from ackreplay.lakehouse import replace_rows, source_files_predicate, sql_string, table_exists
from ackreplay.line_reader import read_dump_logs, read_lines
from schemas import tables
from transforms.common import conform
from transforms.privacy import with_hashed_identities
from transforms.send_times import (
    CLIENT_BATCHES,
    CREATE_TIMES,
    SEND_TIMES,
    batch_send_times,
    classify_client_lines,
    dump_lines_classified,
)

log = logging.getLogger(__name__)
KINDS = (CREATE_TIMES, CLIENT_BATCHES)


class SendTimesReconciliationError(RuntimeError):
    """Counts of the send-times step do not add up: something would have been lost silently."""


@dataclass
class SendTimesReport:
    files: int = 0
    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # (status, detail) -> lines
    rows_written: dict[str, int] = field(default_factory=dict)

    def summary_lines(self) -> list[str]:
        by_status = {s: sum(n for (st, _), n in self.counts.items() if st == s) for s in ("parsed", "unused", "quarantined")}
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
            replace_rows(spark.createDataFrame([], tables.BATCH_SEND_TIMES), lakehouse, "batch_send_times", "false", run_id)
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
        rows = classified.groupBy("status", "detail").agg(F.sum("lines").alias("n")).collect()  # per (status, reason)
        per_file = classified.groupBy("source_file").agg(
            F.sum("lines").alias("lines"), F.max("line_number").alias("last")
        ).collect()  # one row per file
    finally:
        classified.unpersist()
    report.counts = {(r["status"], r["detail"] or ""): r["n"] for r in rows}
    problems = [f"{r['source_file']}: {r['lines']} lines read, last is {r['last']}" for r in per_file if r["lines"] != r["last"]]
    for table, status in (("batch_send_times", "parsed"), ("quarantine", "quarantined")):
        expected = sum(n for (s, _), n in report.counts.items() if s == status)
        if report.rows_written[table] != expected:
            problems.append(f"{table}: {report.rows_written[table]} rows written, {expected} expected")
    if problems:
        raise SendTimesReconciliationError("send times do not reconcile: " + "; ".join(problems))
    return report
