"""A generated trace through the pipeline: every line parses, and the replay reproduces the generated acks.

The generator follows the replay's rules (ackreplay/synth/model.py), so replaying `acks=all` must
give the generated broker ack (`t_local_done + remoteTimeMs`) to the microsecond, apart from the
few produces whose response falls into the same millisecond as an ISR change line; and the injected
stall past replica.lag.time.max.ms must show up as exactly the generated ack-time spike.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from pyspark.sql import functions as F

from ackreplay.config import load_config
from ackreplay.ingest.stage import run_ingest
from ackreplay.replay.stage import run_replay
from ackreplay.storage.lakehouse import read_table
from ackreplay.synth import SynthParams, generate
from tests.helpers import assert_df_equality

PARAMS = SynthParams(
    produces=4000,
    seed=3,
    produce_rate=300.0,
    replica_lag_time_max_ms=1000,
    metrics_interval_ms=1000,
    consumer_fetches_per_produce=0.05,
)


@pytest.fixture(scope="module")
def synth_run(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("synth")
    generated = generate(PARAMS, root / "input")
    lakehouse = str(root / "lakehouse")
    config = load_config("conf/local.yaml")
    config = config.model_copy(update={"replay": config.replay.model_copy(update={"lag_ms": [1000]})})
    ingest = run_ingest(spark, config, str(root / "input"), lakehouse)
    replay = run_replay(spark, config, lakehouse, ingest.clusters, run_id="test")
    return generated, lakehouse, ingest, replay


def test_generated_files_parse_with_nothing_quarantined(synth_run):
    generated, _, ingest, _ = synth_run
    assert ingest.total_lines == generated.request_log_lines
    assert ingest.line_status.get("quarantined", 0) == 0
    assert ingest.unused_detail == {
        "FETCH from a consumer": int(PARAMS.produces * PARAMS.consumer_fetches_per_produce),
        "METADATA": int(PARAMS.produces * PARAMS.metadata_per_produce),
    }
    assert ingest.rows_written["produce_requests"] == PARAMS.produces
    assert ingest.broker_logs.server_log.quarantined == 0
    assert ingest.broker_logs.state_change_log.quarantined == 0
    assert (ingest.metrics.files, ingest.metrics.quarantined) == (PARAMS.brokers, 0)
    assert ingest.metrics.parsed_detail["kafka_log_log_logendoffset"] > 0


def test_isr_changes_and_epochs_are_the_generated_ones(spark, synth_run):
    generated, lakehouse, _, _ = synth_run
    trace = generated.trace
    changes = read_table(spark, lakehouse, "isr_changes").filter("change_kind != 'leader_start'")
    got = sorted(
        (r["change_kind"], r["t_log"])
        for r in changes.select("change_kind", F.unix_micros("t_log").alias("t_log")).collect()
    )
    assert got == sorted((c.kind, c.t_commit) for c in trace.isr_changes)
    epochs = read_table(spark, lakehouse, "leader_epochs")
    assert epochs.count() == len(trace.epochs)
    moved = (
        epochs.filter("leader_epoch = 1")
        .select("broker_id", "epoch_start_offset", F.unix_micros("t_log").alias("t"))
        .first()
    )
    new = trace.epochs[-1]
    assert (moved["broker_id"], moved["epoch_start_offset"], moved["t"]) == (new.leader, new.start_offset, new.t_begin)


def test_replayed_acks_all_is_the_generated_ack(synth_run):
    generated, _, _, replay = synth_run
    trace = generated.trace
    appended = int((trace.p_error == 0).sum())
    assert replay.replayed == appended
    truth = replay.ground_truth
    assert truth["n"] == int(((trace.p_acks == -1) & (trace.p_error == 0)).sum())
    assert truth["within_1ms"] >= 0.999
    assert truth["p999_replayed_ms"] == pytest.approx(truth["p999_observed_ms"], abs=1.0)


def test_the_injected_stall_is_the_ack_time_spike(spark, synth_run):
    generated, lakehouse, _, _ = synth_run
    trace = generated.trace
    lag_ms = PARAMS.replica_lag_time_max_ms
    ((_, start, end),) = trace.long_stalls
    spike = (
        read_table(spark, lakehouse, "produce_replay")
        .filter((F.col("policy") == "acks=all") & (F.col("outcome") == "acked") & (F.col("ack_wait_ms") > lag_ms / 2))
        .select(F.unix_micros("t_local_done").alias("t"), "ack_wait_ms", "partition", "topic")
        .collect()
    )
    # Every appended produce is replayed under acks=all (acks=1 ones as the counterfactual): its
    # generated acks=all ack is when the high watermark passed it.
    wait_us = trace.p_replicated - trace.p_t_local_done
    expected = (trace.p_error == 0) & (wait_us > lag_ms * 500)
    assert len(spike) == int(expected.sum()) > 0
    # Appended during the stall, or just before it and not yet fetched (one round trip: < 50 ms).
    assert all(start - 50_000 <= r["t"] <= end for r in spike)
    shrunk = {
        (
            trace.topic_names[trace.epochs[c.eid].partition // PARAMS.partitions],
            trace.epochs[c.eid].partition % PARAMS.partitions,
        )
        for c in trace.isr_changes
        if c.kind == "shrink"
    }
    assert {(r["topic"], r["partition"]) for r in spike} <= shrunk
    assert max(r["ack_wait_ms"] for r in spike) == pytest.approx(wait_us[expected].max() / 1000, abs=1.0)
    # Everything else stays fast: the spike is the stall, not noise.
    assert np.median(trace.p_remote[(trace.p_acks == -1) & ~expected]) < lag_ms * 1000 / 20


def test_spark_and_arrow_writers_write_the_same_produce_replay(spark, synth_run, tmp_path):
    # replay.writer: spark (Spark's Delta writer, for storage the Python workers cannot write) gives the
    # very rows the default Arrow writer gave, run id aside, and the same run summary.
    _, lakehouse, ingest, arrow_report = synth_run
    copy = str(tmp_path / "lakehouse")
    shutil.copytree(lakehouse, copy)
    shutil.rmtree(f"{copy}/silver/produce_replay")
    config = load_config("conf/local.yaml")
    replay = config.replay.model_copy(update={"lag_ms": [1000], "writer": "spark"})
    spark_report = run_replay(
        spark, config.model_copy(update={"replay": replay}), copy, ingest.clusters, run_id="spark"
    )
    assert (spark_report.replayed, spark_report.outcomes, spark_report.skipped) == (
        arrow_report.replayed,
        arrow_report.outcomes,
        arrow_report.skipped,
    )
    assert spark_report.ground_truth == pytest.approx(arrow_report.ground_truth)
    assert_df_equality(
        read_table(spark, copy, "produce_replay").drop("replay_run_id"),
        read_table(spark, lakehouse, "produce_replay").drop("replay_run_id"),
        ignore_row_order=True,
    )
