"""The replay stage: silver produce_requests, follower_fetches, isr_changes, leader_epochs, partitions
-> silver `produce_replay` (one row per replayed produce and policy).

Work is grouped by (cluster, topic, partition, leader epoch, time bucket) and each group runs the
NumPy kernel inside `applyInPandas`; nothing is collected to the driver.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.lakehouse import read_table, replace_rows, sql_string, table_exists
from ackreplay.replay.groups import policy_order, replay_group
from ackreplay.replay.kernel import OUTCOME_NAMES
from schemas.broker_logs import ISR_CHANGES, LEADER_EPOCHS
from schemas.replay import ISR_SOURCES, PRODUCE_REPLAY, REPLAY_GROUP_OUTPUT
from transforms.common import conform
from transforms.replay_inputs import (
    GROUP_KEY,
    build_epochs,
    fetch_event_rows,
    isr_rows,
    meta_rows,
    produce_rows,
    with_group_id,
    with_leader_epoch,
    with_request_response,
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

    def summary_lines(self) -> list[str]:
        out = [
            f"replay run {self.run_id}: {self.produces:,} produce rows = replayed {self.replayed:,}"
            + "".join(f" + {n:,} {reason}" for reason, n in sorted(self.skipped.items()))
        ]
        if self.ground_truth:
            g = self.ground_truth
            out.append(
                f"  ground truth (recorded acks=all, replayed acks=all vs the broker's ack): n={int(g['n']):,}, "
                f"within 1 ms {g['within_1ms']:.2%}, within 2 ms {g['within_2ms']:.2%}; P999 of ack wait "
                f"{g['p999_replayed_ms']:.1f} ms replayed vs {g['p999_observed_ms']:.1f} ms observed"
            )
        return out


def _read_or_empty(spark: SparkSession, lakehouse: str, name: str, schema) -> DataFrame:
    if table_exists(spark, lakehouse, name):
        return read_table(spark, lakehouse, name)
    return spark.createDataFrame([], schema)


def run_replay(spark: SparkSession, config: AppConfig, lakehouse: str, clusters: list[str], run_id: str) -> ReplayReport:
    """Replay every produce of `clusters` and replace their rows of produce_replay."""
    settings = config.replay
    report = ReplayReport(run_id)
    in_scope = F.col("cluster").isin(clusters)
    produce = read_table(spark, lakehouse, "produce_requests").filter(in_scope)
    fetches = read_table(spark, lakehouse, "follower_fetches").filter(in_scope)
    partitions = read_table(spark, lakehouse, "partitions").filter(in_scope)
    leader_epochs = _read_or_empty(spark, lakehouse, "leader_epochs", LEADER_EPOCHS).filter(in_scope)
    isr_changes = _read_or_empty(spark, lakehouse, "isr_changes", ISR_CHANGES).filter(in_scope)

    epochs = build_epochs(leader_epochs, fetches).cache()
    bucket_us = settings.bucket_seconds * 1_000_000
    max_timeout_ms = produce.agg(F.max("timeout_ms")).first()[0] or 30_000
    horizon = max(1, math.ceil(max_timeout_ms * 1000 / bucket_us))

    appended = (F.col("acks") != 0) & (F.col("error_code") == 0) & (F.col("base_offset") >= 0)
    candidates = produce.filter(appended)
    # Source files travel through Python as ids of this small dictionary.
    source_ids = (
        produce.select("source_file")
        .distinct()
        .withColumn("source_file_id", F.row_number().over(Window.orderBy("source_file")).cast("int"))
        .cache()
    )
    produces_in_epochs = with_leader_epoch(candidates, epochs, F.unix_micros("t_local_done"))
    group_produces = produce_rows(produces_in_epochs, source_ids, bucket_us)
    group_keys = group_produces.select(*GROUP_KEY, "group_id").distinct().cache()
    events = with_leader_epoch(
        fetches.filter((F.coalesce("partition_error_code", F.lit(0)) == 0) & ~F.col("diverging_epoch")),
        epochs,
        F.unix_micros("t_dequeue"),
    )
    # Events copied into a neighbouring bucket that has no produce are not needed.
    group_events = with_group_id(fetch_event_rows(events, bucket_us, horizon, settings.fetch_update_fraction)).join(
        group_keys.select("group_id"), ["group_id"], "left_semi"
    )
    # ISR lines from server.log carry no epoch: place every change in the epoch of its leader at that time.
    isr_in_epochs = with_leader_epoch(isr_changes.drop("leader_epoch"), epochs, F.unix_micros("t_log"))
    group_isr = isr_rows(isr_in_epochs, group_keys)
    group_meta = meta_rows(group_keys, epochs, partitions)
    rows = (
        group_produces.drop(*GROUP_KEY)
        .unionByName(group_events.drop(*GROUP_KEY), allowMissingColumns=True)
        .unionByName(group_isr.drop(*GROUP_KEY), allowMissingColumns=True)
        .unionByName(group_meta.drop(*GROUP_KEY), allowMissingColumns=True)
    )
    quorum_sizes = tuple(settings.quorum_sizes)
    lag_ms = tuple(float(x) for x in settings.lag_ms)
    strict_min_isr = settings.strict_min_isr

    def replay_fn(pdf: pd.DataFrame) -> pd.DataFrame:
        return replay_group(pdf, quorum_sizes, lag_ms, strict_min_isr)

    replayed = rows.groupBy("group_id").applyInPandas(replay_fn, REPLAY_GROUP_OUTPUT)
    names = lambda values: F.array(*[F.lit(v) for v in values])  # noqa: E731
    out = (
        with_request_response(replayed)
        .join(group_keys.drop("bucket"), ["group_id"], "inner")
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
                "event_date": F.date_from_unix_date("event_day"),
                "replay_run_id": F.lit(run_id),
            }
        )
    )
    predicate = f"cluster IN ({', '.join(map(sql_string, clusters))})"
    started = time.monotonic()
    log.info("replaying produces of %s ...", ", ".join(clusters))
    replace_rows(conform(out, PRODUCE_REPLAY), lakehouse, "produce_replay", predicate, run_id)
    log.info("replay done in %.1f s", time.monotonic() - started)
    epochs.unpersist()
    source_ids.unpersist()
    group_keys.unpersist()

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
