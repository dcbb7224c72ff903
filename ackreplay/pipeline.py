"""The pipeline as functions: what the `ackreplay` command, the spark-submit jobs, the notebook and the tests call.

A stage function works on the clusters in its scope and returns its report; what the console shows is each
report's `summary_lines()`, sent to `echo` as the stage ends (`print` by default; pass a function of your own
in a notebook, or `lambda line: None` for silence). `run` chains the stages as `ackreplay run` does:

    ingest (new and changed input files) -> checks -> replay (clusters with newly ingested files) -> checks
    -> gold -> checks -> report

Each stage's checks (`ackreplay.quality`) run on what it wrote and raise `QualityError` on a blocking failure,
so nothing downstream is written; a replay whose self-check fails raises `ReplayUntrusted` unless
`accept_untrusted`. The ledger (`ingested_files`) records what each stage covered only once it succeeded, so a
rerun after a failure redoes exactly what is missing (README, "Scheduling").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from ackreplay.config import AppConfig, DecisionTarget
from ackreplay.ledger import DateRange, Scope, mark_done, stage_scope
from ackreplay.replay.self_check import ReplayUntrusted
from ackreplay.transforms.common import PerCluster

Echo = Callable[[str], None]


class StepTimes:
    """Wall time per step of a command, printed at its end (where a run's time goes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - started

    def summary_lines(self, total: float, detail: bool = True) -> list[str]:
        """A line per step (`detail`), or all of them on one line."""
        rest = total - sum(self.seconds.values())
        if not detail:
            steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.seconds.items())
            return [f"time by step: {steps}, other {rest:.1f} s"]
        width = max(map(len, self.seconds), default=0)
        lines = [f"time by step (of {total:.1f} s):"]
        lines += [f"  {name:<{width}}  {seconds:6.1f} s" for name, seconds in self.seconds.items()]
        lines.append(f"  {'other':<{width}}  {rest:6.1f} s")
        return lines


@dataclass
class StageRun:
    """A replay or gold stage as it ran: its scope (which clusters, and why), its run id and its report (None when
    the scope was empty)."""

    scope: Scope
    run_id: str | None = None
    report: object | None = None  # ReplayReport / GoldReport


@dataclass
class RunResult:
    """What `run` did, stage by stage (None: the stage had nothing to do)."""

    ingest: object | None = None  # ackreplay.ingest.stage.IngestReport
    replay: StageRun | None = None
    gold: StageRun | None = None
    report_html: str | None = None  # a path, or a URI on object storage
    steps: StepTimes = field(default_factory=StepTimes)


def check_quality(spark: SparkSession, config: AppConfig, lakehouse: str, stage: str, clusters: list[str], run_id: str,
                  echo: Echo = print, detail: bool = True):  # fmt: skip
    """Data-quality checks of what `stage` wrote; a blocking failure raises QualityError before the next stage."""
    from ackreplay.quality.runner import run_quality

    report = run_quality(spark, config, lakehouse, stage, clusters, run_id)
    _echo_lines(echo, report.summary_lines(detail))
    return report


def ingest(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    inputs: Sequence[str],
    dates: DateRange = DateRange(),
    full: bool = False,
    echo: Echo = print,
    steps: StepTimes | None = None,
    detail: bool = True,
):
    """Ingest the new and changed files under `inputs` (every file on `dates` when `full`) and check what was
    written; the IngestReport, or None when no file needed ingesting. `detail`: the summaries echoed in full
    (every line kind, row count and reconciliation), else their main lines."""
    from ackreplay.ledger import ingest_new_files, plan_ingest

    steps = steps or StepTimes()
    with steps.timed("listing and fingerprinting inputs"):
        plan = plan_ingest(spark, config, lakehouse, list(inputs), dates, full)
    _echo_lines(echo, plan.summary_lines())
    with steps.timed("ingest"):
        report = ingest_new_files(spark, config, lakehouse, plan)
    if report is not None:
        _echo_lines(echo, report.summary_lines(detail))
        with steps.timed("checks after ingest"):
            check_quality(spark, config, lakehouse, "ingest", report.clusters, report.run_id, echo, detail)
    return report


def replay(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    dates: DateRange = DateRange(),
    full: bool = False,
    clusters: Sequence[str] | None = None,
    accept_untrusted: bool = False,
    echo: Echo = print,
    steps: StepTimes | None = None,
    detail: bool = True,
) -> StageRun:
    """Replay the clusters in scope (named, every one when `full`, else those with newly ingested files) under
    every configured policy, check it, and record it in the ledger. Raises ReplayUntrusted when the replay's
    self-check fails on a cluster and `accept_untrusted` is off."""
    from ackreplay.replay.stage import run_replay

    steps = steps or StepTimes()
    stage = _scoped(spark, lakehouse, "replay", dates, full, clusters, echo)
    if stage.run_id is None:
        return stage
    scope = stage.scope
    with steps.timed("replay"):
        stage.report = run_replay(
            spark, config, lakehouse, scope.clusters, run_id=stage.run_id, dates=scope.replay_dates(dates),
            accept_untrusted=accept_untrusted,
        )  # fmt: skip
    _echo_lines(echo, stage.report.summary_lines(detail))
    check = stage.report.self_check
    failed = check.failed if check is not None else []
    if check is not None and failed and config.replay.self_check.enabled:
        if not accept_untrusted:
            raise ReplayUntrusted(check.refusal())
        names = ", ".join(c.cluster for c in failed)
        echo(f"  --accept-untrusted: gold and the report of {names} are written marked UNTRUSTED")
    with steps.timed("checks after replay"):
        check_quality(spark, config, lakehouse, "replay", scope.clusters, stage.run_id, echo, detail)
    mark_done(spark, lakehouse, scope, stage.run_id)
    return stage


def gold(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    dates: DateRange = DateRange(),
    full: bool = False,
    clusters: Sequence[str] | None = None,
    mark: bool = True,
    echo: Echo = print,
    steps: StepTimes | None = None,
    detail: bool = True,
) -> StageRun:
    """Rebuild the gold tables of the clusters in scope and check them; `mark`: record it in the ledger now
    (`run` marks gold only once the report is written, so a retry rebuilds a report that failed)."""
    from ackreplay.gold.stage import run_gold

    steps = steps or StepTimes()
    stage = _scoped(spark, lakehouse, "gold", dates, full, clusters, echo)
    if stage.run_id is None:
        return stage
    scope = stage.scope
    with steps.timed("gold"):
        stage.report = run_gold(spark, config, lakehouse, scope.clusters, stage.run_id, config.gold.window)
    _echo_lines(echo, stage.report.summary_lines(detail))
    with steps.timed("checks after gold"):
        check_quality(spark, config, lakehouse, "gold", scope.clusters, stage.run_id, echo, detail)
    if mark:
        mark_done(spark, lakehouse, scope, stage.run_id)
    return stage


def report(
    spark: SparkSession,
    lakehouse: str,
    out_dir: str | Path | None = None,
    target: DecisionTarget | None = None,
    linger_ms: float | PerCluster = 0.0,
) -> str:
    """Charts and report.html from the gold tables (default folder: <lakehouse>/report), opening with the
    decision for `target` (the conf's `report.target`); the html's path. `linger_ms`: the producers' linger.ms
    (`ackreplay.gold.stage.producers_per_cluster`)."""
    from ackreplay.gold.report import build_report

    return build_report(spark, lakehouse, out_dir, target, linger_ms)


def run(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    inputs: Sequence[str],
    dates: DateRange = DateRange(),
    full: bool = False,
    accept_untrusted: bool = False,
    echo: Echo = print,
    steps: StepTimes | None = None,
    detail: bool = True,
) -> RunResult:
    """Every stage in order on `inputs`, as `ackreplay run`: only new work unless `full` (README, "Scheduling").
    `steps`: where to add the stages' times (a caller timing more than the run itself)."""
    result = RunResult(steps=steps or StepTimes())
    steps = result.steps
    result.ingest = ingest(spark, config, lakehouse, inputs, dates, full, echo, steps, detail)
    result.replay = replay(spark, config, lakehouse, dates, full, None, accept_untrusted, echo, steps, detail)
    result.gold = gold(spark, config, lakehouse, dates, full, None, False, echo, steps, detail)
    if not result.gold.scope.clusters:
        echo("report: unchanged (no gold table was rebuilt)")
        return result
    with steps.timed("report"):
        from ackreplay.gold.stage import producers_per_cluster

        lingers = producers_per_cluster(config, "linger_ms")
        result.report_html = report(spark, lakehouse, target=config.report.target, linger_ms=lingers)
    echo(f"report: {result.report_html}")
    assert result.gold.run_id is not None  # a gold stage with clusters in scope has a run id
    mark_done(spark, lakehouse, result.gold.scope, result.gold.run_id)  # after the report: a retry rebuilds it
    return result


def _scoped(spark: SparkSession, lakehouse: str, stage: str, dates: DateRange, full: bool,
            clusters: Sequence[str] | None, echo: Echo) -> StageRun:  # fmt: skip
    """The stage's scope, echoed; a run id when it has clusters to work on."""
    scope = stage_scope(spark, lakehouse, stage, dates, full, clusters)
    echo(scope.summary_line())
    return StageRun(scope, f"{stage}-{int(time.time())}" if scope.clusters else None)


def _echo_lines(echo: Echo, lines: Sequence[str]) -> None:
    echo("\n".join(lines))
