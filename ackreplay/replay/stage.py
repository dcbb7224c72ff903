"""The replay stage: silver produce_requests, follower_fetches, isr_changes, leader_epochs, partitions
-> silver `produce_replay` (one row per replayed produce and policy).

Work is grouped by (cluster, leader broker, time bucket): produces on one side and the follower LEO
events, ISR changes and epoch meta rows on the other of a cogrouped `applyInArrow`, in which the
NumPy kernel runs per (partition, leader epoch). One shuffle per side; nothing is collected to the
driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.lakehouse import read_table, replace_rows, sql_string, table_exists
from ackreplay.replay.groups import policy_order, replay_broker_bucket
from ackreplay.replay.kernel import OUTCOME_NAMES
from schemas.broker_logs import ISR_CHANGES, LEADER_EPOCHS
from schemas.metrics import FOLLOWER_LEO_SAMPLES
from schemas.replay import ISR_SOURCES, PRODUCE_REPLAY, REPLAY_GROUP_OUTPUT
from transforms.common import conform
from transforms.replay_inputs import (
    PRODUCE_SIDE_COLUMNS,
    build_epochs,
    event_side,
    fetch_events,
    isr_side,
    leo_evidence,
    meta_side,
    metric_events,
    partition_key,
    produce_side,
    with_leader_epoch,
)

log = logging.getLogger(__name__)


@dataclass
class ReplayReport:
    run_id: str
    produces: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> produce rows not replayed
    replayed: int = 0
    policies: list[str] = field(default_factory=list)
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)  # (policy, outcome) -> rows
    ground_truth: dict[str, float] = field(default_factory=dict)
    metric_clusters: list[str] = field(default_factory=list)  # replayed from JMX LEO scrapes (no FETCH lines)

    def summary_lines(self) -> list[str]:
        out = [
            f"replay run {self.run_id}: {self.produces:,} produce rows = replayed {self.replayed:,}"
            + "".join(f" + {n:,} {reason}" for reason, n in sorted(self.skipped.items()))
        ]
        if self.metric_clusters:
            out.append(
                f"  no follower FETCH lines for {', '.join(self.metric_clusters)}: replayed from the JMX LEO scrapes "
                "(leo_source = jmx_metrics; ack times coarse, to about a scrape interval)"
            )
        if self.ground_truth:
            g = self.ground_truth
            out.append(
                f"  ground truth (recorded acks=all, replayed acks=all vs the broker's ack): n={int(g['n']):,}, "
                f"within 1 ms {g['within_1ms']:.2%}, within 2 ms {g['within_2ms']:.2%}; P999 of ack wait "
                f"{g['p999_replayed_ms']:.1f} ms replayed vs {g['p999_observed_ms']:.1f} ms observed"
            )
        return out


# Session settings for the replay's write, restored afterwards.
REPLAY_WRITE_CONF = {
    # Schema merge: a lakehouse written before produce_replay gained a column (leo_source) takes it on.
    "spark.databricks.delta.schema.autoMerge.enabled": "true",
    # No byte limit on the Arrow batches sent to the group function (the row limit still applies): with
    # a limit, Spark measures the batch after every row, and for list columns (the meta rows' replicas
    # and ISR) each measurement walks the whole batch, quadratic in the batch size. It cost 30 s of
    # the 77 s of a 1M-produce replay (docs/benchmarks.md).
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    # Write each task's rows to their (cluster, event_date) files as they come instead of sorting the
    # task's whole output by the partition columns first (a task's rows span one or two dates).
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "4",
}


@contextmanager
def _session_conf(spark: SparkSession, settings: dict[str, str]):
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _read_or_empty(spark: SparkSession, lakehouse: str, name: str, schema) -> DataFrame:
    if table_exists(spark, lakehouse, name):
        return read_table(spark, lakehouse, name)
    return spark.createDataFrame([], schema)


DateSpan = tuple[date | None, date | None]  # inclusive UTC dates; None: unbounded on that side


def _dates_filter(clusters: list[str], dates: Mapping[str, DateSpan], margin_days: int = 0) -> F.Column:
    """Rows of `clusters` on their dates (widened by `margin_days` each side); a cluster without dates: all."""
    margin = timedelta(days=margin_days)
    condition = F.lit(False)
    for cluster in clusters:
        first, last = dates.get(cluster, (None, None))
        term = F.col("cluster") == F.lit(cluster)
        if first is not None:
            term &= F.col("event_date") >= F.lit(first - margin)
        if last is not None:
            term &= F.col("event_date") <= F.lit(last + margin)
        condition |= term
    return condition


def _dates_predicate(clusters: list[str], dates: Mapping[str, DateSpan]) -> str:
    """The SQL form of `_dates_filter` (margin 0), for Delta's replaceWhere."""
    terms = []
    for cluster in clusters:
        first, last = dates.get(cluster, (None, None))
        parts = [f"cluster = {sql_string(cluster)}"]
        parts += [f"event_date >= DATE'{first.isoformat()}'"] if first is not None else []
        parts += [f"event_date <= DATE'{last.isoformat()}'"] if last is not None else []
        terms.append("(" + " AND ".join(parts) + ")")
    return " OR ".join(terms)


def run_replay(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    clusters: list[str],
    run_id: str,
    dates: Mapping[str, DateSpan] | None = None,
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
    in_scope = _dates_filter(clusters, dates)
    produce = read_table(spark, lakehouse, "produce_requests").filter(in_scope)
    fetches = read_table(spark, lakehouse, "follower_fetches").filter(_dates_filter(clusters, dates, margin_days=1))
    in_scope_clusters = F.col("cluster").isin(clusters)
    partitions = read_table(spark, lakehouse, "partitions").filter(in_scope_clusters)
    leader_epochs = _read_or_empty(spark, lakehouse, "leader_epochs", LEADER_EPOCHS).filter(in_scope_clusters)
    isr_changes = _read_or_empty(spark, lakehouse, "isr_changes", ISR_CHANGES).filter(in_scope_clusters)

    epochs = build_epochs(leader_epochs, fetches).cache()
    bucket_us = settings.bucket_seconds * 1_000_000
    max_timeout_ms = produce.agg(F.max("timeout_ms")).first()[0] or 30_000
    quorum_sizes = tuple(settings.quorum_sizes)
    lag_ms = tuple(float(x) for x in settings.lag_ms)
    strict_min_isr = settings.strict_min_isr
    # The ISR re-simulation of a bucket starts from the events of two lag windows before it.
    lookback_us = int(2 * max(lag_ms, default=0.0) * 1000)
    if dates and max_timeout_ms * 1000 + lookback_us >= 86_400_000_000:
        raise ValueError(
            f"a replay by dates reads fetches one day either side, but the request timeout ({max_timeout_ms} ms) "
            f"plus two lag windows reach further: replay whole clusters (no dates) instead"
        )

    appended = (F.col("acks") != 0) & (F.col("error_code") == 0) & (F.col("base_offset") >= 0)
    # Source files travel through Python as ids of this small dictionary.
    source_ids = (
        produce.select("source_file")
        .distinct()
        .withColumn("source_file_id", F.row_number().over(Window.orderBy("source_file")).cast("int"))
        .cache()
    )
    produces = produce_side(
        with_leader_epoch(produce.filter(appended), epochs, F.unix_micros("t_local_done")), source_ids, bucket_us
    ).cache()
    group_partitions = produces.select("gid", "cluster", "topic", "partition", "pkey", "leader_epoch").distinct().cache()
    events = fetch_events(
        with_leader_epoch(leo_evidence(fetches), epochs, F.unix_micros("t_dequeue")), settings.fetch_update_fraction
    )
    # A cluster without follower FETCH lines (request log at INFO on the brokers) is replayed from the
    # followers' LEO scrapes instead: coarse (scrape interval), flagged in `leo_source`.
    fetch_clusters = {r["cluster"] for r in fetches.select("cluster").distinct().collect()}  # one row per cluster
    metric_clusters = sorted(set(clusters) - fetch_clusters)
    report.metric_clusters = metric_clusters
    if metric_clusters:
        samples = _read_or_empty(spark, lakehouse, "follower_leo_samples", FOLLOWER_LEO_SAMPLES)
        events = events.unionByName(
            metric_events(samples.filter(_dates_filter(metric_clusters, dates, margin_days=1)), epochs)
        )
        log.info("no follower FETCH lines for %s: replaying from JMX LEO samples", ", ".join(metric_clusters))
    # ISR lines from server.log carry no epoch: place every change in the epoch of its leader at that time.
    isr_in_epochs = with_leader_epoch(isr_changes.drop("leader_epoch"), epochs, F.unix_micros("t_log"))
    right = (
        event_side(events, bucket_us, max_timeout_ms * 1000, lookback_us, group_partitions.select("gid").distinct())
        .unionByName(meta_side(group_partitions, epochs, partitions), allowMissingColumns=True)
        .unionByName(isr_side(isr_in_epochs, group_partitions), allowMissingColumns=True)
    )

    def replay_fn(left: pa.Table, right: pa.Table) -> pa.Table:
        return replay_broker_bucket(left, right, quorum_sizes, lag_ms, strict_min_isr)

    replayed = (
        produces.select(*PRODUCE_SIDE_COLUMNS)
        .groupBy("gid")
        .cogroup(right.groupBy("gid"))
        .applyInArrow(replay_fn, REPLAY_GROUP_OUTPUT)
    )
    partition_names = partitions.select("cluster", "topic", "partition", partition_key().alias("pkey"))
    names = lambda values: F.array(*[F.lit(v) for v in values])  # noqa: E731
    out = (
        replayed.join(F.broadcast(partition_names), ["pkey"], "inner")
        .join(F.broadcast(source_ids), ["source_file_id"], "inner")
        .withColumns(
            {
                **{
                    name: F.timestamp_micros(F.col(f"{name}_us"))
                    for name in ("t_start", "t_local_done", "t_ack", "t_ack_observed", "t_response")
                },
                "policy": F.element_at(names(policy_order(quorum_sizes, lag_ms)), F.col("policy_code") + 1),
                "outcome": F.element_at(
                    names([OUTCOME_NAMES[i] for i in sorted(OUTCOME_NAMES)]), F.col("outcome_code") + 1
                ),
                "isr_source": F.element_at(names(ISR_SOURCES), F.col("isr_source_code") + 1),
                "leo_source": F.when(F.col("cluster").isin(metric_clusters), F.lit("jmx_metrics")).otherwise(
                    F.lit("follower_fetches")
                ),
                "event_date": F.date_from_unix_date("event_day"),
                "replay_run_id": F.lit(run_id),
            }
        )
    )
    predicate = _dates_predicate(clusters, dates)
    started = time.monotonic()
    log.info("replaying produces of %s ...", ", ".join(clusters))
    with _session_conf(spark, REPLAY_WRITE_CONF):
        replace_rows(conform(out, PRODUCE_REPLAY), lakehouse, "produce_replay", predicate, run_id)
    log.info("replay done in %.1f s", time.monotonic() - started)
    for cached in (epochs, source_ids, produces, group_partitions):
        cached.unpersist()

    result = read_table(spark, lakehouse, "produce_replay").filter(in_scope)
    report.outcomes = {
        (r["policy"], r["outcome"]): r["count"] for r in result.groupBy("policy", "outcome").count().collect()
    }
    report.policies = sorted({p for p, _ in report.outcomes})
    skipped = produce.select(
        F.when(F.col("acks") == 0, F.lit("acks=0 (no offset)"))
        .when(~appended, F.lit("not appended (error response)"))
        .alias("reason")
    )
    counts = {r["reason"]: r["count"] for r in skipped.groupBy("reason").count().collect()}
    report.produces = sum(counts.values())
    report.replayed = result.filter(F.col("policy") == "acks=1").count()
    report.skipped = {k: v for k, v in counts.items() if k is not None}
    unplaced = counts.get(None, 0) - report.replayed
    if unplaced:
        report.skipped["outside any known leader epoch or partition"] = unplaced
    truth = result.filter(
        (F.col("policy") == "acks=all") & (F.col("recorded_acks") == -1) & (F.col("outcome") == "acked")
    ).select(
        (F.abs(F.unix_micros("t_response") - F.unix_micros("t_ack_observed")) / 1000.0).alias("err_ms"),
        ((F.unix_micros("t_response") - F.unix_micros("t_local_done")) / 1000.0).alias("replayed_wait_ms"),
        ((F.unix_micros("t_ack_observed") - F.unix_micros("t_local_done")) / 1000.0).alias("observed_wait_ms"),
    )
    g = truth.agg(
        F.count("*").alias("n"),
        F.avg((F.col("err_ms") <= 1).cast("double")).alias("within_1ms"),
        F.avg((F.col("err_ms") <= 2).cast("double")).alias("within_2ms"),
        F.percentile("replayed_wait_ms", 0.999).alias("p999_replayed_ms"),
        F.percentile("observed_wait_ms", 0.999).alias("p999_observed_ms"),
    ).first()
    if g["n"]:
        report.ground_truth = g.asDict()
    return report
