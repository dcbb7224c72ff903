"""Scheduled, incremental runs: the `ingested_files` ledger and what each stage has left to do.

Every input file a run ingests (or skips as a copy) gets a row in `ingested_files` with its size,
modification time, content fingerprint (ackreplay/storage/fingerprint.py), the UTC times of its first and
last lines, and the runs that covered it. The ledger describes exactly the rows in the tables: a row
with status `ingested` means the tables hold that version of the file.

A run then
- lists the input folders and keeps the files whose lines may fall in `--since`..`--until` (UTC dates,
  the tables' `event_date`; topics.txt always);
- ingests only new files and files whose content changed (a grown live log is re-ingested and its
  rows replaced by the ingest), unless `--full`;
- skips copies of a file whose rows are already in the tables or that this run ingests: same
  content fingerprint, same cluster and kind (a `.gz` copy of a rotated log, the same file in two
  input folders), and records them as `duplicate`;
- replays and aggregates the clusters that have files ingested since their last replay / gold run
  (`replay_run_id`/`gold_run_id` still null), so a late file of an earlier date, or a run that failed
  after its ingest, is picked up by the next run.

The ledger is written after the ingest commits and marked after the replay and gold commit, so a run
that fails at any point leaves work that the next run (a scheduler's retry) redoes; every step
replaces rows idempotently, so the retry converges to the tables of an uninterrupted run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.schemas.ledger import INGESTED_FILES
from ackreplay.storage.filesystems import s3a_settings
from ackreplay.storage.fingerprint import FileFacts, collect_facts
from ackreplay.storage.inputs import (
    InputError,
    InputFile,
    InputInventory,
    discover_inputs,
    refuse_misplaced,
    rotation_period,
    skipped_lines,
)
from ackreplay.storage.lakehouse import (
    TABLES,
    delta_sql_name,
    read_table,
    replace_rows,
    source_files_predicate,
    sql_string,
    table_exists,
)

log = logging.getLogger(__name__)

LEDGER = "ingested_files"
# Widening of a rotated file's period (from its name) before it is read: DST folds and broker clock
# offsets move lines by up to an hour; a file read needlessly is only filtered out after reading.
_NAME_PERIOD_MARGIN = timedelta(hours=1)
_LOG_TIME_FORMAT = "%Y-%m-%d %H:%M:%S,%f"  # %f reads `,SSS` and `,SSSSSS` stamps alike


@dataclass(frozen=True)
class DateRange:
    """Inclusive UTC dates (`None`: unbounded on that side)."""

    since: date | None = None
    until: date | None = None

    def __post_init__(self):
        if self.since and self.until and self.since > self.until:
            raise ValueError(f"--since {self.since} is after --until {self.until}")

    @property
    def bounded(self) -> bool:
        return self.since is not None or self.until is not None

    def _start(self) -> datetime | None:
        return datetime.combine(self.since, time()) if self.since else None

    def _end(self) -> datetime | None:  # exclusive
        return datetime.combine(self.until + timedelta(days=1), time()) if self.until else None

    def overlaps(self, first: datetime | None, last: datetime | None) -> bool:
        """Whether [first, last] (UTC) meets these dates; an unknown span always does."""
        if first is None or last is None:
            return True
        start, end = self._start(), self._end()
        return (start is None or last >= start) and (end is None or first < end)

    def overlaps_column(self, first: Column, last: Column) -> Column:
        start, end = self._start(), self._end()
        cond = first.isNull() | last.isNull()
        inside = F.lit(True)
        if start is not None:
            inside = inside & (last >= F.lit(start))
        if end is not None:
            inside = inside & (first < F.lit(end))
        return cond | inside

    def label(self) -> str:
        return f"{self.since or '…'}..{self.until or '…'}"


@dataclass(frozen=True)
class Listed:
    """A listed input file with its content facts (from the ledger when unchanged, else read now)."""

    file: InputFile
    facts: FileFacts
    first_utc: datetime | None
    last_utc: datetime | None
    previous: dict | None  # its ledger row, if any


@dataclass
class IngestPlan:
    """What a run does with each listed file."""

    dates: DateRange
    full: bool
    listed: int = 0
    to_ingest: list[Listed] = field(default_factory=list)
    new: int = 0
    changed: int = 0
    unchanged: int = 0  # in the dates, already in the tables (same size and time, or same content)
    outside_dates: int = 0
    duplicates: list[tuple[Listed, str]] = field(default_factory=list)  # (copy, source_file holding the rows)
    folder_copies: list[tuple[Listed, Listed]] = field(default_factory=list)  # same path in a later input folder
    restamped: list[Listed] = field(default_factory=list)  # same content under a new size/time: ledger updated
    demoted: list[Listed] = field(default_factory=list)  # ingested before, now found a copy: rows removed
    ignored: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    controller_files: list[str] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        scope = f" for {self.dates.label()}" if self.dates.bounded else ""
        mode = " (--full: every file re-ingested)" if self.full else ""
        out = [
            f"inputs{scope}{mode}: {self.listed:,} files listed; {len(self.to_ingest):,} to ingest "
            f"({self.new:,} new, {self.changed:,} changed), {self.unchanged:,} unchanged, "
            f"{len(self.duplicates) + len(self.folder_copies):,} duplicate copies skipped, "
            f"{self.outside_dates:,} outside the dates"
        ]
        skipped = [(c.file.uri, h) for c, h in self.duplicates] + [
            (c.file.uri, h.file.uri) for c, h in self.folder_copies
        ]
        for copy, holder in skipped[:20]:
            out.append(f"  skipped duplicate {copy}: same content as {holder}")
        if len(skipped) > 20:
            out.append(f"  ... and {len(skipped) - 20:,} more duplicates (ingested_files, status 'duplicate')")
        for listed in self.demoted:
            out.append(f"  rows of {listed.file.source_file} removed, if any: a copy of another file")
        out += skipped_lines(self.ignored, self.misplaced, self.controller_files)
        return out


def _micros(mtime_ns: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(microseconds=mtime_ns // 1000)


def _to_utc(local: datetime, f: InputFile, config: AppConfig) -> datetime:
    """A broker log's zone-less local time -> UTC, as the ingest does (cluster zone, broker clock offset)."""
    settings = config.cluster(f.cluster)
    utc = local.replace(tzinfo=ZoneInfo(settings.log_timezone)).astimezone(UTC).replace(tzinfo=None)
    offset_ms = settings.broker_clock_offsets_ms.get(f.broker_id, 0.0) if f.broker_id is not None else 0.0
    return utc - timedelta(milliseconds=offset_ms)


def _parse_time(text: str | None, f: InputFile, config: AppConfig) -> datetime | None:
    if text is None:
        return None
    if f.kind == "metrics":  # epoch milliseconds
        return datetime(1970, 1, 1) + timedelta(milliseconds=int(text))
    return _to_utc(datetime.strptime(text, _LOG_TIME_FORMAT), f, config)


def _outside_by_name(f: InputFile, dates: DateRange, config: AppConfig) -> bool:
    """True when a rotated log's name alone shows it holds no line of `dates` (it need not be read)."""
    period = rotation_period(f)
    if period is None or not dates.bounded:
        return False
    start, end = (_to_utc(t, f, config) for t in period)
    return not dates.overlaps(start - _NAME_PERIOD_MARGIN, end + _NAME_PERIOD_MARGIN)


def _ledger_rows(spark: SparkSession, lakehouse: str, column: str, values: Sequence[str]) -> list[dict]:
    """Ledger rows whose `column` is one of `values` (at most as many rows as the run lists files)."""
    if not values or not table_exists(spark, lakehouse, LEDGER):
        return []
    keys = spark.createDataFrame([(v,) for v in sorted(set(values))], f"{column} string")
    return [r.asDict() for r in read_table(spark, lakehouse, LEDGER).join(keys, [column], "left_semi").collect()]


def plan_ingest(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    roots: Sequence[str],
    dates: DateRange = DateRange(),
    full: bool = False,
) -> IngestPlan:
    """List `roots` and decide, file by file, what this run ingests, skips or records."""
    plan = IngestPlan(dates, full)
    files: list[InputFile] = []
    settings = s3a_settings(spark)
    for root in roots:
        inventory = discover_inputs(root, settings)
        files.extend(inventory.files)
        plan.ignored.extend(inventory.ignored)
        plan.misplaced.extend(inventory.misplaced)
        plan.controller_files.extend(inventory.controller_files)
    refuse_misplaced(plan.misplaced, config.ingest.misplaced_files)
    plan.listed = len(files)
    # A lakehouse written before the ledger existed: any file may already have rows.
    unknown_rows = not table_exists(spark, lakehouse, LEDGER) and any(
        table_exists(spark, lakehouse, name) for name in TABLES if name != LEDGER
    )
    previous = {
        r["source_file"]: r for r in _ledger_rows(spark, lakehouse, "source_file", [f.source_file for f in files])
    }

    def known(f: InputFile) -> dict | None:
        prev = previous.get(f.source_file)
        if prev and prev["size"] == f.size and prev["modified_at"] == _micros(f.mtime_ns):
            return prev
        return None

    to_read = [f for f in files if known(f) is None and not _outside_by_name(f, dates, config)]
    facts = collect_facts(spark, to_read)
    listed: list[Listed] = []
    for f in files:
        prev = known(f)
        if prev is not None:
            item = Listed(
                f,
                FileFacts(prev["content_bytes"], prev["fingerprint"], None, None, prev["detail"]),
                prev["first_event_time"],
                prev["last_event_time"],
                prev,
            )
        elif f.uri in facts:
            fa = facts[f.uri]
            item = Listed(
                f,
                fa,
                _parse_time(fa.first_time, f, config),
                _parse_time(fa.last_time, f, config),
                previous.get(f.source_file),
            )
        else:
            plan.outside_dates += 1
            continue
        if f.kind != "topics" and not dates.overlaps(item.first_utc, item.last_utc):
            plan.outside_dates += 1
            continue
        listed.append(item)

    # The same relative path in two input folders: one file if the content is the same, else an error.
    by_source: dict[str, Listed] = {}
    unique: list[Listed] = []
    for item in listed:
        first = by_source.get(item.file.source_file)
        if first is None:
            by_source[item.file.source_file] = item
            unique.append(item)
        elif first.facts.fingerprint == item.facts.fingerprint:
            plan.folder_copies.append((item, first))
        else:
            raise InputError(
                f"{item.file.source_file} is in two input folders with different content "
                f"({first.file.uri} and {item.file.uri}); cluster folder names must be unique across inputs"
            )

    # Which files hold rows in the tables after this run, per (cluster, kind, content)? Ledger rows
    # with status `ingested`, except files this run re-ingests with other content.
    needs_rows: list[Listed] = []
    for item in unique:
        prev = item.previous
        same_content = prev is not None and prev["fingerprint"] == item.facts.fingerprint
        if prev is not None and prev["status"] == "ingested" and same_content and not full:
            plan.unchanged += 1
            if known(item.file) is None:
                plan.restamped.append(item)
        else:
            needs_rows.append(item)
    changed_sources = {
        i.file.source_file
        for i in needs_rows
        if i.previous is not None and i.previous["fingerprint"] != i.facts.fingerprint
    }
    holders: dict[tuple[str, str, str], str] = {}
    ledger_copies = _ledger_rows(spark, lakehouse, "fingerprint", [i.facts.fingerprint for i in needs_rows])
    for row in sorted(ledger_copies, key=lambda r: r["source_file"]):  # the first path holds: deterministic
        if row["status"] == "ingested" and row["content_bytes"] > 0 and row["source_file"] not in changed_sources:
            holders.setdefault((row["cluster"], row["kind"], row["fingerprint"]), row["source_file"])
    for item in sorted(needs_rows, key=lambda i: i.file.source_file):
        f, prev = item.file, item.previous
        k = (f.cluster, f.kind, item.facts.fingerprint)
        holder = holders.get(k) if item.facts.content_bytes > 0 else None
        if holder is not None and holder != f.source_file:
            plan.duplicates.append((item, holder))
            if (prev is not None and prev["status"] == "ingested") or unknown_rows:
                plan.demoted.append(item)
            continue
        if item.facts.content_bytes > 0:
            holders[k] = f.source_file
        plan.to_ingest.append(item)
        if prev is None or prev["status"] != "ingested":
            plan.new += 1
        else:
            plan.changed += 1
    return plan


def _row(
    item: Listed, status: str, run_id: str, now: datetime, duplicate_of: str | None = None, keep_runs: bool = False
) -> dict:
    f, prev = item.file, item.previous or {}
    return {
        "cluster": f.cluster,
        "source_file": f.source_file,
        "broker_id": f.broker_id,
        "kind": f.kind,
        "path": f.uri,
        "size": f.size,
        "modified_at": _micros(f.mtime_ns),
        "compression": f.compression,
        "content_bytes": item.facts.content_bytes,
        "fingerprint": item.facts.fingerprint,
        "first_event_time": item.first_utc,
        "last_event_time": item.last_utc,
        "status": status,
        "duplicate_of": duplicate_of,
        "detail": item.facts.detail,
        "ingest_run_id": prev["ingest_run_id"] if keep_runs else run_id,
        "replay_run_id": prev.get("replay_run_id") if keep_runs else None,
        "gold_run_id": prev.get("gold_run_id") if keep_runs else None,
        "recorded_at": now,
    }


def record_plan(spark: SparkSession, lakehouse: str, plan: IngestPlan, run_id: str) -> int:
    """Write the ledger rows of the files this run ingested, skipped as copies or saw re-stamped."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [_row(i, "ingested", run_id, now) for i in plan.to_ingest]
    for item, holder in plan.duplicates:  # (copies in a second input folder share the first copy's row)
        prev = item.previous
        unchanged = (
            prev is not None
            and prev["status"] == "duplicate"
            and prev["duplicate_of"] == holder
            and prev["size"] == item.file.size
            and prev["modified_at"] == _micros(item.file.mtime_ns)
        )
        if not unchanged:
            rows.append(_row(item, "duplicate", run_id, now, duplicate_of=holder))
    rows.extend(_row(i, "ingested", run_id, now, keep_runs=True) for i in plan.restamped)
    if rows:
        df = spark.createDataFrame(rows, INGESTED_FILES)
        replace_rows(df, lakehouse, LEDGER, source_files_predicate(_Key.of(rows)), run_id)
    return len(rows)


@dataclass(frozen=True)
class _Key:
    cluster: str
    source_file: str

    @staticmethod
    def of(rows: list[dict]) -> list[_Key]:
        return [_Key(r["cluster"], r["source_file"]) for r in rows]


def remove_rows_of(spark: SparkSession, lakehouse: str, items: Sequence[Listed]) -> None:
    """Delete the rows of files found to be copies of another file from every table keyed by source file."""
    if not items:
        return
    predicate = source_files_predicate([i.file for i in items])
    for name in TABLES:
        # SQL rather than DeltaTable's API, which on Spark Connect needs Delta's plugin on the server
        if (
            name != LEDGER
            and table_exists(spark, lakehouse, name)
            and "source_file" in read_table(spark, lakehouse, name).columns
        ):
            spark.sql(f"DELETE FROM {delta_sql_name(lakehouse, name)} WHERE {predicate}")


def ingest_new_files(spark: SparkSession, config: AppConfig, lakehouse: str, plan: IngestPlan):
    """Ingest the plan's files (run_ingest on exactly those), remove demoted copies, write the ledger.

    Returns run_ingest's report, or None when there was nothing to ingest.
    """
    from ackreplay.ingest.stage import run_ingest

    report = None
    # Before the ingest: on a new lakehouse there is nothing to delete yet, and a retry deletes again.
    remove_rows_of(spark, lakehouse, plan.demoted)
    if plan.to_ingest:
        # run_ingest lists nothing itself when handed InputFiles (inputs.discover_all passes them through).
        report = run_ingest(spark, config, [i.file for i in plan.to_ingest], lakehouse)
        run_id = report.run_id
    else:
        recorded = [d.file for d, _ in plan.duplicates] + [r.file for r in plan.restamped]
        run_id = "ingest-" + InputInventory(tuple(recorded), ()).fingerprint()
    record_plan(spark, lakehouse, plan, run_id)
    return report


# --- downstream: what the replay and gold stages have left to do ------------------------------------


# A ledger row is pending for a stage until a run of that stage has covered its version of the file.
# Duplicates count too: a copy found later may have had its rows removed (`demoted`).
_PENDING = {"replay": "replay_run_id IS NULL", "gold": "replay_run_id IS NOT NULL AND gold_run_id IS NULL"}


def _pending(stage: str) -> Column:
    return F.expr(_PENDING[stage])


_STAGE_SOURCE = {"replay": "produce_requests", "gold": "produce_replay"}


@dataclass
class Scope:
    """The clusters a replay or gold run covers, and why."""

    stage: str
    clusters: list[str]
    reason: str
    dates: dict[str, tuple[date | None, date | None]] = field(default_factory=dict)  # pending files' UTC dates
    files: int = 0  # pending ledger rows
    # Pending rows recorded up to this time are covered (a run recording files meanwhile keeps its own).
    watermark: datetime = field(default_factory=lambda: datetime.now(UTC).replace(tzinfo=None))

    def replay_dates(self, requested: DateRange) -> dict[str, tuple[date | None, date | None]]:
        """The dates to replay per cluster: those of the pending files and one day either side (a produce
        just before midnight waits for fetches of the next day, and the ISR re-simulation of the next
        day starts from this one's fetches); else the requested dates; else none (whole clusters)."""
        if self.dates:
            day = timedelta(days=1)
            return {
                c: (first - day if first else None, last + day if last else None)
                for c, (first, last) in self.dates.items()
            }
        if requested.bounded:
            return {c: (requested.since, requested.until) for c in self.clusters}
        return {}

    def summary_line(self) -> str:
        if not self.clusters:
            return f"{self.stage}: nothing to do ({self.reason})"
        spans = [f"{c} ({d[0]}..{d[1]})" if (d := self.dates.get(c)) and d[0] else c for c in self.clusters]
        return f"{self.stage} of {', '.join(spans)}: {self.reason}"


def pending_scope(spark: SparkSession, lakehouse: str, stage: str, dates: DateRange = DateRange()) -> Scope | None:
    """Clusters with ledger rows that `stage` has not covered yet (on `dates`); None without a ledger."""
    if not table_exists(spark, lakehouse, LEDGER):
        return None
    scope = Scope(stage, [], "")
    pending = read_table(spark, lakehouse, LEDGER).filter(
        _pending(stage) & dates.overlaps_column(F.col("first_event_time"), F.col("last_event_time"))
    )
    per_cluster = (
        pending.groupBy("cluster")
        .agg(
            F.count("*").alias("files"),
            F.to_date(F.min("first_event_time")).alias("first_date"),
            F.to_date(F.max("last_event_time")).alias("last_date"),
        )
        .orderBy("cluster")
        .collect()
    )
    scope.clusters = [r["cluster"] for r in per_cluster]
    scope.dates = {r["cluster"]: (r["first_date"], r["last_date"]) for r in per_cluster}
    scope.files = sum(r["files"] for r in per_cluster)
    on_dates = f" on {dates.label()}" if dates.bounded else ""
    scope.reason = (
        f"{scope.files:,} input files ingested since the last {stage}{on_dates}"
        if scope.clusters
        else f"no newly ingested file waits for {stage}{on_dates}; --full redoes it"
    )
    return scope


def clusters_with_data(spark: SparkSession, lakehouse: str, table: str, dates: DateRange = DateRange()) -> list[str]:
    """Every cluster with rows in `table` (on `dates`, by event_date)."""
    df = read_table(spark, lakehouse, table)
    if dates.since:
        df = df.filter(F.col("event_date") >= F.lit(dates.since))
    if dates.until:
        df = df.filter(F.col("event_date") <= F.lit(dates.until))
    return sorted(r["cluster"] for r in df.select("cluster").distinct().collect())


def stage_scope(
    spark: SparkSession,
    lakehouse: str,
    stage: str,
    dates: DateRange = DateRange(),
    full: bool = False,
    clusters: Sequence[str] | None = None,
) -> Scope:
    """The clusters `stage` ("replay" or "gold") rebuilds: named ones, every one with data (`full`, or a
    lakehouse without a ledger), or those with files ingested since the stage last ran.

    The replay rebuilds only the dates of the scope (`Scope.replay_dates`); gold rebuilds whole clusters.
    """
    if clusters:
        return Scope(stage, sorted(set(clusters)), "clusters named with --cluster")
    pending = None if full else pending_scope(spark, lakehouse, stage, dates)
    if pending is not None:
        return pending
    on_dates = f" on {dates.label()}" if dates.bounded else ""
    source = _STAGE_SOURCE[stage]
    found = clusters_with_data(spark, lakehouse, source, dates)
    why = "--full" if full else "no ingested_files ledger in this lakehouse"
    reason = (
        f"every cluster with rows in {source}{on_dates} ({why})"
        if found
        else f"no cluster has rows in {source}{on_dates}"
    )
    return Scope(stage, found, reason)


def mark_done(spark: SparkSession, lakehouse: str, scope: Scope, run_id: str) -> None:
    """Record that `scope.stage` covered the pending files of its clusters (those recorded before it started).

    The replay rebuilds every date of a covered cluster's pending files (`Scope.replay_dates`) and gold
    whole clusters, so every pending file of a covered cluster is covered.
    """
    if not scope.clusters or not table_exists(spark, lakehouse, LEDGER):
        return
    clusters = ", ".join(map(sql_string, scope.clusters))
    # the session's time zone is UTC (ackreplay.session), the watermark a UTC time without zone
    spark.sql(
        f"UPDATE {delta_sql_name(lakehouse, LEDGER)} SET {scope.stage}_run_id = {sql_string(run_id)} "
        f"WHERE ({_PENDING[scope.stage]}) AND cluster IN ({clusters}) "
        f"AND recorded_at <= TIMESTAMP {sql_string(scope.watermark.isoformat(sep=' '))}"
    )
