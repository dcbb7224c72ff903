"""Running the checks of a stage with Great Expectations 1.x on the Spark DataFrames, and the verdict.

Per table: one GX validation of its schema checks (metadata only); its other checks on the frame of
ackreplay/quality/frames.py, counted in one Spark job by `quality.counts` (GX's own definitions, checked
against GX in the tests; a type it does not know goes to GX). Every expectation that fails is handed to
GX, which counts it again and samples a handful of offending rows (GX applies a `limit`): what is
recorded for a failure is GX's result. Then the reconciliation counts. Every result goes to
`dq_results`; a blocking failure raises QualityError after that write, so the caller writes nothing
downstream.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ackreplay.config import AppConfig
from ackreplay.quality.catalog import BLOCKING, ROW_IDS, STAGE_TABLES, WARNING, Check, margin_sources, plan_for
from ackreplay.quality.counts import countable, expectation_counts
from ackreplay.quality.frames import CONTRACTS, check_frame, with_margins
from ackreplay.quality.reconcile import STAGE_COUNTS, Count
from ackreplay.schemas.dq import DQ_RESULTS
from ackreplay.storage.lakehouse import read_table, replace_rows, sql_string, table_exists

log = logging.getLogger(__name__)

COUNTS_ONLY = {"result_format": "BASIC", "partial_unexpected_count": 0}


class QualityError(RuntimeError):
    """A blocking data-quality check or a reconciliation count failed."""


@dataclass
class Outcome:
    """The result of one expectation (or one reconciliation count)."""

    check: str
    table: str
    severity: str
    expectation: str
    arguments: dict
    success: bool
    element_count: int | None = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    observed_value: Any = None
    sample_rows: list[dict] | None = None
    error: str | None = None

    def describe(self) -> str:
        args = ", ".join(
            f"{k}={v}" for k, v in self.arguments.items() if k not in ("batch_id", "condition_parser") and v is not None
        )
        text = f"{self.check} [{self.expectation}({args})]"
        if self.error:
            return f"{text}: could not run: {self.error}"
        if self.unexpected_count is not None:
            text += f": {self.unexpected_count:,} of {self.element_count:,} rows"
        elif self.observed_value is not None:
            text += f": observed {json.dumps(self.observed_value, default=str)[:300]}"
        if self.sample_rows:
            text += "; e.g. " + "; ".join(json.dumps(r, default=str) for r in self.sample_rows)
        return text


@dataclass
class QualityReport:
    """The checks and counts after one stage run, and their outcome."""

    run_id: str
    stage: str
    clusters: list[str]
    outcomes: list[Outcome] = field(default_factory=list)
    counts: list[Count] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    skipped_tables: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.success]

    @property
    def blocking_failures(self) -> list[Outcome]:
        return [o for o in self.failures if o.severity == BLOCKING]

    def summary_lines(self, detail: bool = True) -> list[str]:
        """The checks' outcome; `detail`: with every reconciliation count whose sides differ for a stated reason."""
        failed = self.failures
        warnings = [o for o in failed if o.severity == WARNING]
        expectations = [o for o in self.outcomes if o.expectation != "reconciliation"]
        out = [
            f"data quality after {self.stage} ({self.run_id}): {len(self.tables)} tables, {len(expectations)}"
            f" expectations, {len(self.counts)} counts: {len(self.outcomes) - len(failed)} passed,"
            f" {len(warnings)} warnings, {len(self.blocking_failures)} blocking failures ({self.seconds:.1f} s)"
        ]
        out += [f"  {o.severity}: {o.describe()}" for o in failed]
        if self.skipped_tables:
            out.append(f"  not checked (table not written yet): {', '.join(self.skipped_tables)}")
        if self.counts:
            # the counts that hold with both sides equal are summed up (each is a row of dq_results)
            shown = [c for c in self.counts if not c.ok or c.left != c.right]
            equal = len(self.counts) - len(shown)
            if not detail:
                explained = sum(1 for c in shown if c.ok)
                out.append(
                    f"  reconciliation: {equal} of {len(self.counts)} counts equal"
                    + (f", {explained} differ as expected (-v: how)" if explained else "")
                )
                shown = [c for c in shown if not c.ok]
            else:
                out.append(
                    f"  reconciliation: {equal} of {len(self.counts)} counts equal" + (", and:" if shown else "")
                )
            out += [f"    {c.describe()}" for c in shown]
        return out


def gx_frames():
    """The GX batch definition (in an ephemeral context) every table's frame is validated through (the
    frame is a batch parameter). Suites are validated on the batch (`Batch.validate`) without being
    registered: registering a suite, an asset and a validation definition per table stores and copies
    them (1.8 of 22.9 s of a warm run's ingest checks)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    # persist=False: GX would cache each frame it is handed; most of a table's expectations never reach it
    source = context.data_sources.add_spark(name="ackreplay", persist=False)
    return source.add_dataframe_asset(name="table").add_batch_definition_whole_dataframe("whole")


def _schema_expectations(contract: StructType) -> list[tuple[str, dict]]:
    # a set, not an ordered list: a column a later contract adds sits last in a table written before it
    # (lakehouse.replace_rows merges the schema), and readers select columns by name
    columns = ("ExpectTableColumnsToMatchSet", {"column_set": contract.fieldNames(), "exact_match": True})
    out: list[tuple[str, dict]] = [columns]
    out += [("ExpectColumnValuesToBeOfType", {"column": f.name, "type_": type(f.dataType).__name__}) for f in contract]
    return out


def _required_expectations(contract: StructType) -> list[tuple[str, dict]]:
    # what the contract declares non-null; Spark's own writes keep a cast column nullable, so nothing else checks it
    return [("ExpectColumnValuesToNotBeNull", {"column": f.name}) for f in contract if not f.nullable]


def _validate(whole, name: str, df: DataFrame, expectations: list, result_format: dict):
    """Run `expectations` (GX expectation objects) on `df`; the suite's validation result."""
    import great_expectations as gx

    suite = gx.ExpectationSuite(name=f"{name}-suite", expectations=expectations)
    return whole.get_batch(batch_parameters={"dataframe": df}).validate(suite, result_format=result_format)


def _build(class_name: str, kwargs: dict, meta: dict):
    import great_expectations as gx

    return getattr(gx.expectations, class_name)(**kwargs, meta=meta)


def _exception_message(info: dict) -> str | None:
    """The message of an expectation that could not run: GX reports it either flat or per failed metric."""
    if info.get("raised_exception"):
        return info.get("exception_message") or "exception"
    nested = [v for v in info.values() if isinstance(v, dict) and v.get("raised_exception")]
    return "; ".join(sorted({v.get("exception_message") or "exception" for v in nested})) or None


def _outcome(result, checks: dict[str, tuple[Check, str]], table: str) -> tuple[Outcome, str]:
    config = result.expectation_config
    check, severity = checks[config.meta["check"]]
    body = result.result or {}
    error = _exception_message(result.exception_info or {})
    arguments = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
    return (
        Outcome(
            check=check.name,
            table=table,
            severity=severity,
            expectation=config.type,
            arguments=arguments,
            success=bool(result.success) and error is None,
            element_count=body.get("element_count"),
            unexpected_count=body.get("unexpected_count"),
            unexpected_percent=body.get("unexpected_percent"),
            observed_value=body.get("observed_value"),
            error=error,
        ),
        config.meta["key"],
    )


def check_table(
    whole, table: str, df: DataFrame, partitions_df: DataFrame | None, config: AppConfig, policies: list[str]
) -> list[Outcome]:
    """Every enabled check of `table` on `df` (its rows in scope)."""
    plan = plan_for(table, config.quality.checks)
    by_name = {check.name: (check, severity) for check, severity in plan.checks}
    schema_exps, value_keys, built = [], [], {}
    for check, _ in plan.checks:
        # a schema check: columns and types validated by GX on the frame's schema, and the contract's
        # non-null columns counted with the value checks (one Spark job for all of them)
        typed = _schema_expectations(CONTRACTS[table]) if check.schema else []
        valued = _required_expectations(CONTRACTS[table]) if check.schema else list(check.expectations)
        for i, (class_name, kwargs) in enumerate(typed + valued):
            key = f"{check.name}#{i}"
            built[key] = (class_name, kwargs, {"check": check.name, "key": key})
            if i < len(typed):
                schema_exps.append(_build(*built[key]))
            else:
                value_keys.append(key)
    outcomes: dict[str, Outcome] = {}
    if schema_exps:
        result = _validate(whole, f"{table}-schema", df, schema_exps, COUNTS_ONLY)
        outcomes.update({key: o for o, key in (_outcome(r, by_name, table) for r in result.results)})
    if value_keys:
        specs = [built[key][:2] for key in value_keys]
        margins = sorted({kwargs["column"] for _, kwargs in specs if margin_sources(kwargs.get("column", ""))})
        frame = with_margins(check_frame(table, df, partitions_df, policies), margins)
        # only what the checks read (not the bronze line text, say)
        frame = frame.select(*_columns_read(specs, frame.columns, ROW_IDS.get(table, ())))
        counted = _counted(frame, value_keys, built, by_name, table)
        outcomes.update(counted)
        rest = [k for k in value_keys if k not in counted]
        if rest:
            result = _validate(whole, table, frame, [_build(*built[k]) for k in rest], COUNTS_ONLY)
            outcomes.update({key: o for o, key in (_outcome(r, by_name, table) for r in result.results)})
        failed = [
            k
            for k in value_keys
            if not outcomes[k].success and outcomes[k].error is None and outcomes[k].unexpected_count
        ]
        if failed:
            ids = [c for c in ROW_IDS.get(table, ()) if c in frame.columns]
            # a failed pair check's rows show both columns, not only their margin
            for key in failed:
                ids += [c for c in margin_sources(built[key][1].get("column", "")) if c not in ids]
            sample_format = {
                "result_format": "SUMMARY",
                "partial_unexpected_count": config.quality.sample_rows,
                "unexpected_index_column_names": ids,
            }
            # GX is the reference for what failed: its counts are recorded, with its sample rows
            again = _validate(whole, f"{table}-samples", frame, [_build(*built[k]) for k in failed], sample_format)
            for r in again.results:
                outcome, key = _outcome(r, by_name, table)
                ours = counted.get(key, outcome)
                if (ours.unexpected_count, ours.element_count) != (outcome.unexpected_count, outcome.element_count):
                    log.warning("%s: GX counts %s of %s rows, quality.counts %s of %s", key, outcome.unexpected_count,
                                outcome.element_count, ours.unexpected_count, ours.element_count)  # fmt: skip
                rows = (r.result or {}).get("partial_unexpected_index_list")
                outcome.sample_rows = rows[: config.quality.sample_rows] if rows else None
                outcomes[key] = outcome
    return [outcomes[k] for k in built if k in outcomes]


def _counted(frame: DataFrame, keys: list[str], built: dict, checks: dict, table: str) -> dict[str, Outcome]:
    """Outcomes of the expectations of `keys` that `quality.counts` computes, from one Spark job. One that
    reads a column the frame lacks is left to GX, which names the column."""
    present = set(frame.columns)
    keys = [k for k in keys if countable(*built[k][:2]) and set(_columns_of(built[k][1])) <= present]
    try:
        counts = expectation_counts(frame, [built[k][:2] for k in keys])
    except AnalysisException:  # a row condition that does not parse: GX reports it per expectation
        return {}
    out = {}
    for key, c in zip(keys, counts, strict=True):
        config = _build(*built[key]).configuration
        check, severity = checks[config.meta["check"]]
        out[key] = Outcome(
            check=check.name,
            table=table,
            severity=severity,
            expectation=config.type,
            arguments={k: v for k, v in config.kwargs.items() if k != "batch_id"},
            success=c.success,
            element_count=c.element_count,
            unexpected_count=c.unexpected_count,
            unexpected_percent=c.unexpected_percent,
        )
    return out


def _columns_of(kwargs: dict) -> list[str]:
    return [kwargs["column"]] if "column" in kwargs else list(kwargs.get("column_list", ()))


def _columns_read(specs: list[tuple[str, dict]], columns: list[str], row_ids: tuple[str, ...]) -> list[str]:
    """The columns of `columns` that expectations read (arguments and row conditions) or that identify a row."""
    wanted = set(row_ids)
    for _, kwargs in specs:
        if "column" in kwargs:
            wanted.add(kwargs["column"])
        wanted.update(margin_sources(kwargs.get("column", "")))  # a margin's columns, for its sample rows
        wanted.update(kwargs.get("column_list", ()))
        wanted.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", kwargs.get("row_condition") or ""))
    return [c for c in columns if c in wanted]


def _count_outcome(count: Count) -> Outcome:
    return Outcome(
        check=count.name,
        table=count.table,
        severity=BLOCKING,
        expectation="reconciliation",
        arguments={
            "cluster": count.cluster,
            "left": count.left_label,
            "relation": count.relation,
            "right": count.right_label,
        },
        success=count.ok,
        observed_value={"left": count.left, "right": count.right},
    )


def _results_frame(spark: SparkSession, report: QualityReport) -> DataFrame:
    """dq_results rows of a run (one per expectation and count: bounded by the catalog, not the data)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        (
            report.run_id,
            report.stage,
            report.clusters,
            o.table,
            o.check,
            o.severity,
            o.expectation,
            json.dumps(o.arguments, default=str, sort_keys=True),
            o.success,
            o.element_count,
            o.unexpected_count,
            float(o.unexpected_percent) if o.unexpected_percent is not None else None,
            json.dumps(o.observed_value, default=str) if o.observed_value is not None else None,
            json.dumps(o.sample_rows, default=str) if o.sample_rows else None,
            o.error,
            now,
        )
        for o in report.outcomes
    ]
    return spark.createDataFrame(rows, DQ_RESULTS)


def run_quality(
    spark: SparkSession, config: AppConfig, lakehouse: str, stage: str, clusters: list[str], run_id: str
) -> QualityReport:
    """Check the tables `stage` wrote for `clusters`, reconcile the counts, record it all in dq_results.

    Raises QualityError (after recording) when a blocking check or a count fails.
    """
    report = QualityReport(run_id, stage, sorted(clusters))
    if not config.quality.enabled:
        return report
    started = time.monotonic()
    whole = gx_frames()
    in_scope = F.col("cluster").isin(report.clusters)
    partitions = (
        read_table(spark, lakehouse, "partitions").filter(in_scope)
        if table_exists(spark, lakehouse, "partitions")
        else None
    )
    policies = _policies(spark, lakehouse, config, report.clusters) if "produce_replay" in STAGE_TABLES[stage] else []
    for table in STAGE_TABLES[stage]:
        if not table_exists(spark, lakehouse, table):
            report.skipped_tables.append(table)
            continue
        table_started = time.monotonic()
        df = read_table(spark, lakehouse, table).filter(in_scope)
        report.outcomes += check_table(whole, table, df, partitions, config, policies)
        report.tables.append(table)
        log.info("checked %s in %.1f s", table, time.monotonic() - table_started)
    report.counts = STAGE_COUNTS[stage](spark, lakehouse, report.clusters)
    report.outcomes += [_count_outcome(c) for c in report.counts]
    report.seconds = time.monotonic() - started
    predicate = f"stage = {sql_string(stage)} AND dq_run_id = {sql_string(run_id)}"
    replace_rows(_results_frame(spark, report), lakehouse, "dq_results", predicate, run_id)
    if report.blocking_failures:
        raise QualityError(_failure_message(report))
    return report


def _policies(spark: SparkSession, lakehouse: str, config: AppConfig, clusters: list[str]) -> list[str]:
    """The configured policies, with the own lags (replay.lag_ms `own`) of `clusters`."""
    from ackreplay.replay.own_lag import own_lags
    from ackreplay.schemas.broker_logs import BROKER_CONFIGS
    from ackreplay.schemas.vocabulary import policy_order

    lags = config.replay.fixed_lags_ms
    if config.replay.own_lag:
        logged = (
            read_table(spark, lakehouse, "broker_configs") if table_exists(spark, lakehouse, "broker_configs")
            else spark.createDataFrame([], BROKER_CONFIGS)
        )  # fmt: skip
        own = own_lags(logged, clusters, config.configured_lags(clusters))
        lags += tuple(o.lag_ms for o in own.values() if o.lag_ms is not None)
    return policy_order(tuple(config.replay.quorum_sizes), tuple(dict.fromkeys(lags)))


def _failure_message(report: QualityReport) -> str:
    failed = report.blocking_failures
    lines = [
        f"data quality: {len(failed)} blocking check(s) failed after {report.stage} (run {report.run_id});"
        " nothing downstream was written"
    ]
    lines += [f"  {o.table}: {o.describe()}" for o in failed[:10]]
    if len(failed) > 10:
        lines.append(f"  ... and {len(failed) - 10} more")
    lines.append(
        "details: table dq_results (dq_run_id above); a check can be made a warning with quality.checks in the conf"
    )
    return "\n".join(lines)
