"""The broker-log step of the ingest stage: `server.log*` + `state-change.log*` (+ the KRaft controllers'
`controller.log*`) -> silver `isr_changes`, `leader_epochs`, `follower_starts`, `broker_configs`,
`follower_leo_records`, `broker_registrations`, `metadata_deltas`, and their unparseable lines -> bronze
`quarantine` (stages `server_log`, `state_change_log`, `controller_log`).

These logs are mostly other messages: they are counted (`unused`) but not kept, unlike the request
log's lines, which all go to bronze. Like the request-log step, a run replaces exactly the rows that
came from the files it read, so reruns are idempotent and a grown file is replaced.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, available_timezones

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.schemas import tables
from ackreplay.schemas.broker_logs import (
    BROKER_CONFIGS,
    BROKER_REGISTRATIONS,
    FOLLOWER_LEO_RECORDS,
    FOLLOWER_STARTS,
    ISR_CHANGES,
    LEADER_EPOCHS,
    METADATA_DELTAS,
)
from ackreplay.storage.inputs import InputFile
from ackreplay.storage.lakehouse import (
    read_table,
    replace_rows,
    source_files_predicate,
    sql_string,
    table_exists,
)
from ackreplay.storage.line_reader import read_lines
from ackreplay.transforms.broker_logs import (
    APP_START_TIME,
    APP_VERSION,
    BROKER_REGISTRATION,
    BROKER_SETTING,
    CONFIG_DUMP,
    CONTROLLER_LOG,
    FOLLOWER_START,
    ISR_SHRINK,
    ISR_UPDATE,
    KAFKA_START_TIME_MS,
    LEADER_SKIP,
    LEADER_START,
    LEO_RECORD,
    METADATA_DELTA,
    SERVER_LOG,
    STATE_CHANGE_LOG,
    UNKNOWN_FORMAT,
    app_info_rows,
    broker_registration_rows,
    broker_setting_rows,
    build_broker_configs,
    build_broker_registrations,
    build_follower_leo_records,
    build_follower_starts,
    build_isr_changes,
    build_leader_epochs,
    build_metadata_deltas,
    isr_commit_events,
    with_broker_line_status,
    with_broker_message,
)
from ackreplay.transforms.common import conform
from ackreplay.transforms.request_log import with_event_time, with_log_fields

log = logging.getLogger(__name__)

# The silver tables this stage writes (with quarantine rows): created empty when there are no files.
BROKER_LOG_TABLES = (
    ("isr_changes", ISR_CHANGES), ("leader_epochs", LEADER_EPOCHS), ("follower_starts", FOLLOWER_STARTS),
    ("broker_configs", BROKER_CONFIGS), ("follower_leo_records", FOLLOWER_LEO_RECORDS),
    ("broker_registrations", BROKER_REGISTRATIONS), ("metadata_deltas", METADATA_DELTAS),
)  # fmt: skip

STAGES = (SERVER_LOG, STATE_CHANGE_LOG, CONTROLLER_LOG)
_STAGE_NAMES = {SERVER_LOG: "server.log", STATE_CHANGE_LOG: "state-change.log", CONTROLLER_LOG: "controller.log"}
_KINDS_OF_STAGE = {
    SERVER_LOG: (ISR_SHRINK, ISR_UPDATE, LEO_RECORD, CONFIG_DUMP, BROKER_SETTING, APP_VERSION, APP_START_TIME),
    STATE_CHANGE_LOG: (LEADER_START, LEADER_SKIP, FOLLOWER_START, METADATA_DELTA),
    CONTROLLER_LOG: (BROKER_REGISTRATION,),
}


class BrokerLogReconciliationError(RuntimeError):
    """Counts of the broker-log step do not add up: something would have been lost silently."""


class BrokerLogFormatError(ValueError):
    """A line of a kind the replay reads (an ISR change, a leadership) in a format the parser does not know."""


class LogTimeZoneError(ValueError):
    """The brokers' log times, read in the conf's zone, disagree by minutes or more with the epoch times the
    same brokers printed: the conf's `log_timezone` is not the zone their JVMs ran in."""


# A broker start's log stamp and the epoch time AppInfoParser prints with it come from the same clock
# milliseconds apart; a zone's offset is 30 minutes or more. Anything in between is neither.
ZONE_MISMATCH_MS = 10 * 60 * 1000


@dataclass
class LineCounts:
    """What became of the lines of one kind of log file."""

    parsed: int = 0
    unused: int = 0
    quarantined: int = 0

    @property
    def total(self) -> int:
        return self.parsed + self.unused + self.quarantined


@dataclass
class BrokerLogReport:
    """What the broker-log ingest read: files, lines by stage and status, rows per table."""

    run_id: str
    server_log_files: int = 0
    state_change_log_files: int = 0
    controller_log_files: int = 0
    server_log: LineCounts = field(default_factory=LineCounts)
    state_change_log: LineCounts = field(default_factory=LineCounts)
    controller_log: LineCounts = field(default_factory=LineCounts)
    parsed_detail: dict[str, int] = field(default_factory=dict)  # line kind -> lines
    unused_detail: dict[tuple[str, str], int] = field(default_factory=dict)  # (stage, what) -> lines
    quarantine_reasons: dict[tuple[str, str], int] = field(default_factory=dict)  # (stage, reason) -> lines
    rows_written: dict[str, int] = field(default_factory=dict)  # the BROKER_LOG_TABLES and quarantine
    isr_changes_by_kind: dict[tuple[str | None, str], int] = field(default_factory=dict)  # (change_kind, source)
    duplicate_commits: int = 0  # commit lines dropped because the other log had the same commit earlier
    shrinks_without_commit: int = 0  # "Shrinking ISR" proposals no committed ISR carried out
    settings_without_dump: int = 0  # setting lines with no "KafkaConfig values:" line before them in their file
    duplicate_registrations: int = 0  # registration records logged by more than one controller, kept once

    def counts(self, stage: str) -> LineCounts:
        return {
            SERVER_LOG: self.server_log, STATE_CHANGE_LOG: self.state_change_log, CONTROLLER_LOG: self.controller_log
        }[stage]  # fmt: skip

    def summary_lines(self, detail: bool = True) -> list[str]:
        """Lines read and kept; `detail`: with the lines by kind, the rows per table and the ISR changes."""
        out = [
            f"broker logs: {self.server_log_files} server.log files, {self.state_change_log_files} state-change.log "
            f"files, {self.controller_log_files} controller.log files"
        ]
        for stage in STAGES:
            c = self.counts(stage)
            out.append(
                f"  {_STAGE_NAMES[stage]} lines: {c.total:,} = parsed {c.parsed:,} + unused {c.unused:,}"
                f" + quarantined {c.quarantined:,}"
            )
            for kind in _KINDS_OF_STAGE[stage] if detail else ():
                if self.parsed_detail.get(kind):
                    out.append(f"    parsed      {self.parsed_detail[kind]:>7,}  {kind}")
            shown = (("unused", self.unused_detail),) if detail else ()
            for prefix, by_what in (*shown, ("quarantined", self.quarantine_reasons)):
                for (s, what), n in sorted(by_what.items(), key=lambda kv: -kv[1]):
                    if s == stage:
                        out.append(f"    {prefix:<11} {n:>7,}  {what}")
        if detail:
            for table, n in self.rows_written.items():
                out.append(f"  {table}: {n:,} rows written")
            by_kind = ", ".join(
                f"{kind or 'unknown'}/{source} {n:,}"
                for (kind, source), n in sorted(self.isr_changes_by_kind.items(), key=str)
            )
            if by_kind:
                out.append(f"    isr_changes by kind/source: {by_kind}")
            out.append(
                f"    {self.duplicate_commits:,} commits seen in both logs kept once; "
                f"{self.shrinks_without_commit:,} 'Shrinking ISR' proposals without a matching commit"
            )
        if self.duplicate_registrations:
            out.append(
                f"    {self.duplicate_registrations:,} broker registration records logged by several controllers kept"
                " once (the earliest line)"
            )
        if self.settings_without_dump:
            out.append(
                f"    {self.settings_without_dump:,} broker setting lines not kept: no 'KafkaConfig values:' line"
                " before them in their file (a dump cut by a log rotation)"
            )
        return out


def classify_broker_log_lines(lines_df: DataFrame, config: AppConfig) -> DataFrame:
    """Raw numbered lines with a `stage` -> lines with log fields, UTC times and a status (no I/O)."""
    return (
        lines_df.transform(with_log_fields)
        .transform(with_event_time, *config.log_clocks())
        .transform(with_broker_message)
        .transform(with_broker_line_status)
    )


def _commit_counts(classified: DataFrame) -> tuple[int, int]:
    """(commit lines, distinct commits) as the deduplication should see them."""
    events = isr_commit_events(classified)
    key = F.concat_ws(
        "/",
        "cluster",
        "topic",
        F.col("partition").cast("string"),
        F.col("broker_id").cast("string"),
        F.coalesce(
            F.col("partition_epoch").cast("string"),
            F.concat_ws(":", F.lit("line"), "source_file", F.col("line_number").cast("string")),
        ),
    )
    (row,) = events.agg(F.count(F.lit(1)).alias("n"), F.count_distinct(key).alias("distinct")).collect()
    return int(row["n"]), int(row["distinct"])


def ingest_broker_logs(
    spark: SparkSession, config: AppConfig, files: list[InputFile], lakehouse: str, run_id: str
) -> BrokerLogReport:
    """Ingest `server_log`, `state_change_log` and `controller_log` input files into the BROKER_LOG_TABLES and
    `quarantine`; raise BrokerLogReconciliationError when the counts do not add up."""
    unexpected = sorted({f.kind for f in files} - set(STAGES))
    if unexpected:
        raise ValueError(f"ingest_broker_logs reads {', '.join(STAGES)} files, not {', '.join(unexpected)}")
    report = BrokerLogReport(
        run_id,
        server_log_files=sum(f.kind == SERVER_LOG for f in files),
        state_change_log_files=sum(f.kind == STATE_CHANGE_LOG for f in files),
        controller_log_files=sum(f.kind == CONTROLLER_LOG for f in files),
    )
    if not files:
        # Nothing to replace; still create the (empty) tables so that readers find them.
        for table, schema in BROKER_LOG_TABLES:
            if not table_exists(spark, lakehouse, table):
                replace_rows(spark.createDataFrame([], schema), lakehouse, table, "false", run_id)
        return report
    sources = {stage: sorted(f.source_file for f in files if f.kind == stage) for stage in (SERVER_LOG, CONTROLLER_LOG)}
    lines = read_lines(spark, files, config.ingest.read_chunk_bytes, config.ingest.max_line_bytes).withColumns(
        {
            "ingest_run_id": F.lit(run_id),
            "stage": F.when(F.col("source_file").isin(sources[SERVER_LOG]), F.lit(SERVER_LOG))
            .when(F.col("source_file").isin(sources[CONTROLLER_LOG]), F.lit(CONTROLLER_LOG))
            .otherwise(F.lit(STATE_CHANGE_LOG)),
        }
    )
    # Most lines are other messages: cache only what the tables and counts need (the text of
    # quarantined lines, the message of parsed ones).
    status = F.col("status")
    classified = (
        classify_broker_log_lines(lines, config)
        .select(
            "cluster",
            "broker_id",
            "stage",
            "source_file",
            "line_number",
            F.when((status == "quarantined") | (F.col("line_kind") == BROKER_SETTING), F.col("line")).alias("line"),
            F.when(status == "parsed", F.col("message")).alias("message"),
            "status",
            "detail",
            "line_kind",
            "t_log",
            "event_date",
            "ingest_run_id",
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        # the counts come first: an unknown format must stop the run before anything is written
        by_status = classified.groupBy("stage", "status", "detail").count().collect()
        if any(r["status"] == "quarantined" and r["detail"].endswith(UNKNOWN_FORMAT) for r in by_status):
            _check_unknown_formats(classified, lines, config)
        if any(r["status"] == "parsed" and r["detail"] == APP_START_TIME for r in by_status):
            check_log_time_zone(classified, config)
        predicate = source_files_predicate(files)
        quarantine = classified.filter(F.col("status") == "quarantined").withColumn("reason", F.col("detail"))
        stage_list = ", ".join(map(sql_string, STAGES))
        log.info("writing quarantine rows of the broker logs")
        report.rows_written["quarantine"] = replace_rows(
            conform(quarantine, tables.QUARANTINE),
            lakehouse,
            "quarantine",
            f"{predicate} AND stage IN ({stage_list})",
            run_id,
        )
        silver = {
            "isr_changes": build_isr_changes,
            "leader_epochs": build_leader_epochs,
            "follower_starts": build_follower_starts,
            "broker_configs": build_broker_configs,
            "follower_leo_records": build_follower_leo_records,
            "broker_registrations": build_broker_registrations,
            "metadata_deltas": build_metadata_deltas,
        }
        for name, build in silver.items():
            log.info("writing %s", name)
            report.rows_written[name] = replace_rows(build(classified), lakehouse, name, predicate, run_id)

        per_file = (
            classified.groupBy("source_file")
            .agg(F.count(F.lit(1)).alias("lines"), F.max("line_number").alias("last"))
            .filter(F.col("lines") != F.col("last"))
            .collect()
        )
        commit_lines, distinct_commits = _commit_counts(classified)
        report.settings_without_dump = broker_setting_rows(classified).filter(F.col("t_log").isNull()).count()
        report.duplicate_registrations = _duplicate_registrations(classified)
    finally:
        classified.unpersist()

    for r in by_status:
        counts = report.counts(r["stage"])
        setattr(counts, r["status"], getattr(counts, r["status"]) + r["count"])
        if r["status"] == "parsed":
            report.parsed_detail[r["detail"]] = report.parsed_detail.get(r["detail"], 0) + r["count"]
        elif r["status"] == "unused":
            report.unused_detail[(r["stage"], r["detail"])] = r["count"]
        else:
            report.quarantine_reasons[(r["stage"], r["detail"])] = r["count"]
    report.duplicate_commits = commit_lines - distinct_commits

    written = read_table(spark, lakehouse, "isr_changes").filter(predicate)
    report.isr_changes_by_kind = {
        (r["change_kind"], r["source"]): r["count"] for r in written.groupBy("change_kind", "source").count().collect()
    }
    carried_out = written.filter(F.col("proposed_at").isNotNull()).count()
    report.shrinks_without_commit = report.parsed_detail.get(ISR_SHRINK, 0) - carried_out

    _reconcile(report, per_file, commit_lines)
    return report


def _duplicate_registrations(classified: DataFrame) -> int:
    """Registration lines beyond the first of each record: the n-th line of one content on each controller."""
    content = ["cluster", "broker_id", "broker_epoch", "record", "fenced", "in_controlled_shutdown"]
    rows = broker_registration_rows(classified).groupBy(*content, "controller_id").count()
    # the n-th copy of a content on each controller is one record: lines beyond the most any controller logged
    (row,) = (
        rows.groupBy(*content)
        .agg((F.sum("count") - F.max("count")).alias("extra"))
        .agg(F.coalesce(F.sum("extra"), F.lit(0)).alias("extra"))
        .collect()
    )
    return int(row["extra"])


def _check_unknown_formats(classified: DataFrame, lines: DataFrame, config: AppConfig, shown: int = 5) -> None:
    """Raise BrokerLogFormatError (or warn, `ingest.unknown_broker_log_lines`) naming the lines of a kind the
    replay reads whose format no pattern knows; the last line of a file is left out (a live log's last line
    may be cut short while the broker writes it)."""
    last = classified.groupBy("source_file").agg(F.max("line_number").alias("last_line"))
    unknown = (
        classified.filter((F.col("status") == "quarantined") & F.col("detail").endswith(UNKNOWN_FORMAT))
        .join(last, "source_file")
        .filter(F.col("line_number") < F.col("last_line"))
    )
    shown_rows = (
        unknown.orderBy("source_file", "line_number")
        .select("cluster", "broker_id", "source_file", "line_number", "detail", "line")
        .limit(shown)
        .collect()
    )
    if not shown_rows:
        return
    # AppInfoParser logs "Kafka version: <version>" to server.log when the broker starts
    versions = {
        (r["cluster"], r["broker_id"]): r["version"]
        for r in lines.filter(F.col("line").contains("Kafka version: "))
        .select("cluster", "broker_id", F.regexp_extract("line", r"Kafka version: (\S+)", 1).alias("version"))
        .distinct()
        .limit(100)
        .collect()
    }
    out = [
        f"{unknown.count():,} server.log/state-change.log/controller.log line(s) of a kind the replay reads (ISR"
        " changes, leaderships, broker registrations) in a format this parser does not know, e.g.:"
    ]
    for r in shown_rows:
        version = versions.get((r["cluster"], r["broker_id"]))
        logged = (
            f"the broker logged Kafka version {version}" if version else "no 'Kafka version:' line in its server.log"
        )
        out.append(f"  {r['source_file']} line {r['line_number']} ({logged}): {r['detail']}: {(r['line'] or '')[:300]}")
    out.append(
        "The replay would miss the ISR changes and leaderships these lines carry. docs/kafka-versions.md lists the"
        " formats known per Kafka release; `ingest.unknown_broker_log_lines: warning` quarantines them and goes on."
    )
    if config.ingest.unknown_broker_log_lines == "error":
        raise BrokerLogFormatError("\n".join(out))
    log.warning("%s", "\n".join(out))


def check_log_time_zone(classified: DataFrame, config: AppConfig) -> None:
    """Raise LogTimeZoneError when a cluster's broker starts, their log stamps read in the conf's
    `log_timezone`, are minutes or more away from the epoch time AppInfoParser logged with them
    ("Kafka startTimeMs: <ms>"): every time of that cluster would be off by it, and the producers' send
    times (epoch) would put hours into every latency."""
    starts = app_info_rows(classified).filter(F.col("setting") == KAFKA_START_TIME_MS)
    lead_ms = (F.unix_micros("t_log") / 1000 - F.col("value")).alias("lead_ms")
    rows = (
        starts.groupBy("cluster")
        .agg(
            F.percentile_approx(lead_ms, 0.5).alias("lead_ms"),
            F.min_by(F.struct("broker_id", "source_file", "line_number", "t_log", "value"), "t_log").alias("example"),
        )
        .filter(F.abs("lead_ms") >= ZONE_MISMATCH_MS)
        .collect()  # one row per cluster
    )
    if not rows:
        return
    out = []
    for r in sorted(rows, key=lambda r: r["cluster"]):
        zone = config.cluster(r["cluster"]).log_timezone
        started = dt.datetime.fromtimestamp(r["example"]["value"] / 1000, dt.UTC)
        configured = ZoneInfo(zone).utcoffset(started) or dt.timedelta(0)
        offset = configured + dt.timedelta(minutes=round(r["lead_ms"] / 60_000))
        zones = _zones_at(offset, started)
        out.append(
            f"{r['cluster']}: its brokers' log times, read in {zone} (log_timezone), are {_hours(r['lead_ms'])} "
            f"{'ahead of' if r['lead_ms'] > 0 else 'behind'} the epoch times they logged with them (AppInfoParser's"
            f" 'Kafka startTimeMs'; e.g. {r['example']['source_file']} line {r['example']['line_number']}: started"
            f" {started:%Y-%m-%d %H:%M:%S} UTC): their JVMs ran at UTC{_signed_hours(offset)}. Set"
            f" clusters.{r['cluster']}.log_timezone in the conf to their zone"
            + (f" (at UTC{_signed_hours(offset)} then: {', '.join(zones)})" if zones else "")
            + "."
        )
    raise LogTimeZoneError("\n".join(out))


def _hours(ms: float) -> str:
    minutes = round(abs(ms) / 60_000)
    return f"{minutes // 60}:{minutes % 60:02d} h"


def _signed_hours(offset: dt.timedelta) -> str:
    minutes = round(offset.total_seconds() / 60)
    return f"{'+' if minutes >= 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _zones_at(offset: dt.timedelta, at: dt.datetime, shown: int = 3) -> list[str]:
    """A few IANA zones (Area/City) at `offset` from UTC at `at`: examples for the message."""
    zones = sorted(z for z in available_timezones() if "/" in z and not z.startswith(("Etc/", "SystemV/")))
    return [z for z in zones if ZoneInfo(z).utcoffset(at) == offset][:shown]


def _reconcile(report: BrokerLogReport, incomplete_files: list, commit_lines: int) -> None:
    problems = [
        f"{r['source_file']}: {r['lines']} lines read but the last line is number {r['last']}" for r in incomplete_files
    ]
    parsed = report.parsed_detail
    if commit_lines != parsed.get(ISR_UPDATE, 0) + parsed.get(LEADER_SKIP, 0) + parsed.get(LEADER_START, 0):
        problems.append(f"{commit_lines} ISR commits extracted from {parsed} parsed lines")
    expected = {
        "quarantine": report.server_log.quarantined
        + report.state_change_log.quarantined
        + report.controller_log.quarantined,
        "isr_changes": commit_lines - report.duplicate_commits,
        "leader_epochs": parsed.get(LEADER_START, 0),
        "follower_starts": parsed.get(FOLLOWER_START, 0),
        "follower_leo_records": parsed.get(LEO_RECORD, 0),
        "broker_registrations": parsed.get(BROKER_REGISTRATION, 0) - report.duplicate_registrations,
        "metadata_deltas": parsed.get(METADATA_DELTA, 0),
        "broker_configs": parsed.get(BROKER_SETTING, 0)
        - report.settings_without_dump
        + 2 * parsed.get(APP_VERSION, 0)  # major and minor
        + parsed.get(APP_START_TIME, 0),
    }
    for table, n in expected.items():
        if report.rows_written.get(table) != n:
            problems.append(f"{table}: {report.rows_written.get(table)} rows written, {n} expected")
    if report.shrinks_without_commit < 0:
        problems.append(f"more commits carry a 'Shrinking ISR' proposal than there are such lines ({parsed})")
    if problems:
        raise BrokerLogReconciliationError("broker logs do not reconcile: " + "; ".join(problems))
