"""The metrics step of the ingest stage: `<cluster>/metrics/*.prom` -> silver `follower_leo_samples`,
and the unparseable lines of used metrics -> bronze `quarantine` (stage `metrics`).

Most lines are other metrics and comments: they are counted (`unused`) but not kept. Like the other
steps, a run replaces exactly the rows that came from the files it read (reruns are idempotent, a
grown file is replaced), and the counts must reconcile: every line is parsed, unused or quarantined,
and the tables hold exactly the parsed / quarantined lines.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.schemas import tables
from ackreplay.schemas.metrics import FOLLOWER_LEO_SAMPLES
from ackreplay.storage.inputs import InputFile
from ackreplay.storage.lakehouse import read_table, replace_rows, source_files_predicate, sql_string, table_exists
from ackreplay.storage.line_reader import read_lines
from ackreplay.transforms.common import conform
from ackreplay.transforms.metrics import METRICS, build_follower_leo_samples, classify_metric_lines, metric_quarantine

log = logging.getLogger(__name__)


class MetricsReconciliationError(RuntimeError):
    """Counts of the metrics step do not add up: something would have been lost silently."""


@dataclass
class MetricsReport:
    """What the metrics ingest read: scrape files and their lines by status (parsed per metric, unused, quarantined)."""

    run_id: str
    files: int = 0
    parsed: int = 0
    unused: int = 0
    quarantined: int = 0
    parsed_detail: dict[str, int] = field(default_factory=dict)  # metric -> samples
    unused_detail: dict[str, int] = field(default_factory=dict)  # what -> lines
    quarantine_reasons: dict[str, int] = field(default_factory=dict)  # reason -> lines
    rows_written: dict[str, int] = field(default_factory=dict)  # follower_leo_samples, quarantine
    granularity_ms: dict[str, float | None] = field(default_factory=dict)  # source file -> scrape interval

    @property
    def total(self) -> int:
        return self.parsed + self.unused + self.quarantined

    def summary_lines(self, detail: bool = True) -> list[str]:
        """Lines read and kept; `detail`: with the lines by metric, the rows written and the scrape intervals."""
        out = [
            f"metrics: {self.files} scrape files",
            f"  lines: {self.total:,} = parsed {self.parsed:,} + unused {self.unused:,} + quarantined "
            f"{self.quarantined:,}",
        ]
        shown = (("parsed", self.parsed_detail), ("unused", self.unused_detail)) if detail else ()
        for prefix, by_what in (*shown, ("quarantined", self.quarantine_reasons)):
            for what, n in sorted(by_what.items(), key=lambda kv: (-kv[1], kv[0])):
                out.append(f"    {prefix:<11} {n:>7,}  {what}")
        if not detail:
            return out
        for table, n in self.rows_written.items():
            out.append(f"  {table}: {n:,} rows written")
        if self.granularity_ms:
            intervals = ", ".join(
                f"{path.rsplit('/', 1)[-1]} {'-' if ms is None else f'{ms:,.0f} ms'}"
                for path, ms in sorted(self.granularity_ms.items())
            )
            out.append(f"    scrape interval (median): {intervals}")
        return out


def ingest_metrics(
    spark: SparkSession, config: AppConfig, files: list[InputFile], lakehouse: str, run_id: str
) -> MetricsReport:
    """Ingest `metrics` input files into `follower_leo_samples` and `quarantine`; raise
    MetricsReconciliationError when the counts do not add up."""
    unexpected = sorted({f.kind for f in files} - {METRICS})
    if unexpected:
        raise ValueError(f"ingest_metrics reads metrics files, not {', '.join(unexpected)}")
    report = MetricsReport(run_id, files=len(files))
    if not files:
        # Nothing to replace; still create the (empty) table so that readers find it.
        if not table_exists(spark, lakehouse, "follower_leo_samples"):
            replace_rows(
                spark.createDataFrame([], FOLLOWER_LEO_SAMPLES), lakehouse, "follower_leo_samples", "false", run_id
            )
        return report
    lines = read_lines(spark, files, config.ingest.read_chunk_bytes, config.ingest.max_line_bytes).withColumn(
        "ingest_run_id", F.lit(run_id)
    )
    status = F.col("status")
    classified = (
        classify_metric_lines(lines)
        .select(
            "cluster", "broker_id", "source_file", "line_number",
            F.when(status == "quarantined", F.col("line")).alias("line"),
            "status", "detail", "metric", "topic", "partition", "client_id", "leader_id", "value", "t_ms",
            "t_sample", "event_date", "ingest_run_id",
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )  # fmt: skip
    try:
        predicate = source_files_predicate(files)
        log.info("writing quarantine rows of the metrics")
        report.rows_written["quarantine"] = replace_rows(
            conform(metric_quarantine(classified), tables.QUARANTINE),
            lakehouse,
            "quarantine",
            f"{predicate} AND stage IN ({sql_string(METRICS)})",
            run_id,
        )
        log.info("writing follower_leo_samples")
        samples = build_follower_leo_samples(classified)
        report.rows_written["follower_leo_samples"] = replace_rows(
            samples, lakehouse, "follower_leo_samples", predicate, run_id
        )

        by_status = classified.groupBy("status", "detail").count().collect()
        per_file = (
            classified.groupBy("source_file")
            .agg(F.count(F.lit(1)).alias("lines"), F.max("line_number").alias("last"))
            .collect()
        )
    finally:
        classified.unpersist()
    written = read_table(spark, lakehouse, "follower_leo_samples").filter(predicate)
    report.granularity_ms = {
        r["source_file"]: r["g"]
        for r in written.groupBy("source_file").agg(F.max("granularity_ms").alias("g")).collect()
    }
    for r in by_status:
        setattr(report, r["status"], getattr(report, r["status"]) + r["count"])
        detail = {"parsed": report.parsed_detail, "unused": report.unused_detail}.get(
            r["status"], report.quarantine_reasons
        )
        detail[r["detail"]] = detail.get(r["detail"], 0) + r["count"]
    _reconcile(report, per_file)
    return report


def _reconcile(report: MetricsReport, per_file: list) -> None:
    problems = [
        f"{r['source_file']}: {r['lines']} lines read but the last line is number {r['last']}"
        for r in per_file
        if r["lines"] != r["last"]
    ]
    lines_read = sum(r["lines"] for r in per_file)
    if lines_read != report.total:
        problems.append(f"{lines_read} lines read, {report.total} classified")
    for table, n in (("follower_leo_samples", report.parsed), ("quarantine", report.quarantined)):
        if report.rows_written.get(table) != n:
            problems.append(f"{table}: {report.rows_written.get(table)} rows written, {n} expected")
    if problems:
        raise MetricsReconciliationError("metrics do not reconcile: " + "; ".join(problems))
