"""The bundled real traces (data/samples/), end to end: ingest and replay.

Each trace's manifest.json holds counts taken independently of this pipeline: the producing client's
acknowledged batches per acks setting, and the lab's plain-`json` tally of each broker's request log.
The broker's own ack time of every recorded acks=all produce is the replay's ground truth.
"""

from __future__ import annotations

import csv
import gzip
import html
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import functions as F

from ackreplay.replay.stage import run_replay
from ackreplay.storage.lakehouse import read_table, table_path
from tests.conftest import SAMPLES, recorded_policies_config

POLICIES = {"acks=1", "acks=all", "min.insync", "quorum=2", "acks=all@lag=3000", "acks=all@lag=30000"}
# Measured on the bundled traces (README, "Ground truth": 99.46% and 98.85%); the project's target is
# 99% within 2 ms. 121 of the 4.1.1 trace's 301 misses are on the restarted (cold) broker 2 in the 15 s
# after it took its partitions back by preferred-leader election, when its FETCH handling took 9-20 ms.
MIN_WITHIN_2MS = {"trace-3.9.1-utc": 0.99, "trace-4.1.1-berlin": 0.985}
# Replayed minus observed ack time (1st, 99th percentile) when the LEO timeline comes from ~1 s scrapes.
METRICS_ERROR_MS = (-50.0, 2_000.0)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


@pytest.fixture(scope="module", params=SAMPLES, ids=[p.name for p in SAMPLES])
def trace_run(request, sample_run):
    run = sample_run(request.param)  # shared with the other sample tests (tests/conftest.py)
    return run.trace, run.manifest, run.lakehouse, run.ingest, run.replay


def test_every_line_is_accounted_for(spark, trace_run):
    _, manifest, lakehouse, report, _ = trace_run
    brokers = manifest["counts"]["request_log"]
    assert report.total_lines == sum(b["lines"] for b in brokers.values())
    assert report.line_status.get("quarantined", 0) == 0
    assert report.unused_detail["FETCH from a consumer"] == sum(b["consumer_fetch"] for b in brokers.values())
    bronze = read_table(spark, lakehouse, "request_log_lines")
    follower_fetch_lines = bronze.filter("status = 'parsed' AND api_key_name = 'FETCH'").count()
    assert follower_fetch_lines == sum(b["follower_fetch"] for b in brokers.values())
    assert report.broker_logs.server_log.quarantined == 0
    assert report.broker_logs.state_change_log.quarantined == 0


def test_produce_counts_equal_the_clients_acknowledged_batches(spark, trace_run):
    _, manifest, lakehouse, _, _ = trace_run
    produce = read_table(spark, lakehouse, "produce_requests")
    ok = {r["acks"]: r["count"] for r in produce.filter("error_code = 0").groupBy("acks").count().collect()}
    client = manifest["counts"]["client"]
    assert ok[-1] == client["acks=all"]["batches_acked"]
    assert ok[1] == client["acks=1"]["batches_acked"]
    # Log times converted from the brokers' zone fall inside the workload's UTC window.
    start, end = _utc(manifest["workload"]["start_utc"]), _utc(manifest["workload"]["end_utc"])
    first, last = produce.agg(F.min("t_start"), F.max("t_log")).first()
    assert start - timedelta(seconds=5) <= first and last <= end + timedelta(seconds=5)


def test_replay_covers_every_appended_produce_under_every_policy(spark, trace_run):
    _, _, lakehouse, _, replay = trace_run
    produce = read_table(spark, lakehouse, "produce_requests")
    appended = produce.filter("acks != 0 AND error_code = 0").count()
    assert replay.replayed == appended
    assert replay.produces == replay.replayed + sum(replay.skipped.values())
    assert set(replay.policies) == POLICIES
    out = read_table(spark, lakehouse, "produce_replay")
    assert out.count() == appended * len(POLICIES)


# (rejections, of them real, no writable partition ms; keyless: rerouted, their bytes, saved wait ms, worst-window
# P99 of the latency there averaged over the writable partitions and at the fastest one) per trace, acks=all
ROUTING_FIGURES = {
    "trace-3.9.1-utc": (0, 0, 0.0, 0, 0, 0.0, None, None),
    "trace-4.1.1-berlin": (15, 10, 16.0, 15, 132_975, 1247.2, 1587.6, 150.7),
}
# acks=all@lag=<ms>, keyed: (rejections, of them real, held, their wait s, no writable partition s) per policy; the
# ISR is the replay's own, known at its appends (transforms/routing.py `sampled_states`); real rejections count
# under the recorded ISR's policies only
LAG_ROUTING_FIGURES = {
    "trace-3.9.1-utc": {"acks=all@lag=3000": (0, 0, 0, 0.0, 0.0), "acks=all@lag=30000": (0, 0, 0, 0.0, 0.0)},
    "trace-4.1.1-berlin": {"acks=all@lag=3000": (2, 0, 2, 0.37, 0.0), "acks=all@lag=30000": (0, 0, 0, 0.0, 0.0)},
}
# today's cost as measured: (batches of the real rejections linked to their retry, their wait to the retry's ack
# ms, the model's wait of the same batches ms, real rejections without a retry)
MEASURED_RETRIES = {"trace-3.9.1-utc": (0, 0.0, 0.0, 0), "trace-4.1.1-berlin": (10, 2046.2, 524.4, 0)}


def test_routing_around_partitions_below_min_isr_on_the_real_rejections(spark, sample_run, trace_run):
    """KIP-637's what-if (gold `routing`) on the real traces. The lab's producers draw keys (lab.record_trace
    --keys), so with the default `partitioning: keyed` nothing moves: the 4.1.1 trace's 15 acks=all rejections
    (the broker's 10 NOT_ENOUGH_REPLICAS answers, and 5 acks=1 produces acks=all would have rejected) are held
    until their partitions are writable again, 1.25 s in all, as today. Had the records no key, each could have
    gone to another partition, which was writable at every one of them; the latency there comes from the
    replayed produces on those partitions within 1 s. The 3.9.1 trace rejects nothing: its rows are zeros."""
    from ackreplay.gold.stage import build_gold

    trace = trace_run[0]
    run = sample_run(trace, gold=True)
    rejections, real, no_writable, rerouted, rerouted_bytes, saved, p99, fastest = ROUTING_FIGURES[trace.name]
    summed = (
        "rejections",
        "recorded_rejections",
        "rerouted",
        "held",
        "wait_today_ms",
        "wait_kip637_ms",
        "no_writable_ms",
        "recorded_batches",
        "recorded_wait_ms",
        "recorded_model_wait_ms",
        "recorded_unlinked",
    )
    keyed = read_table(spark, run.lakehouse, "routing").groupBy("policy", "partitioning").agg(
        *[F.sum(c).alias(c) for c in summed]
    )  # fmt: skip
    held_ms = round(saved, 1)  # today's wait of every rejected batch, all of it saved when they can move
    rows = {r["policy"]: r for r in keyed.collect()}
    # the policies that reject below min ISR: on the recorded ISR, and on the ISR re-simulated at each lag
    assert sorted(rows) == ["acks=all", "acks=all@lag=3000", "acks=all@lag=30000", "min.insync"]
    at_lag = {
        policy: (row["rejections"], row["recorded_rejections"], row["held"], round(row["wait_today_ms"] / 1000, 2),
                 round(row["no_writable_ms"] / 1000, 2))
        for policy, row in rows.items() if policy.startswith("acks=all@lag=")
    }  # fmt: skip
    assert at_lag == LAG_ROUTING_FIGURES[trace.name]
    for row in (rows["acks=all"], rows["min.insync"]):
        assert (row["partitioning"], row["rejections"], row["recorded_rejections"], row["rerouted"], row["held"]) == (
            "keyed", rejections, real, 0, rejections
        )  # fmt: skip
        assert round(row["wait_today_ms"], 1) == round(row["wait_kip637_ms"], 1) == held_ms
        assert round(row["no_writable_ms"], 1) == no_writable
        # Each of the 4.1.1 trace's ten real rejections was one batch, appended by the client's next try: 2.05 s
        # from the rejections to the retries' acks in all, four times the model's 0.52 s until the partitions were
        # writable again, since a retry comes retry.backoff.ms later and then waits for its own ack (the model's
        # wait is a lower bound of today's: README "Routing around partitions below min ISR"). The real
        # rejections are the same under both policies.
        measured = (row["recorded_batches"], round(row["recorded_wait_ms"], 1), round(row["recorded_model_wait_ms"], 1),
                    row["recorded_unlinked"])  # fmt: skip
        assert measured == MEASURED_RETRIES[trace.name]

    # the same rows had the records no key: computed from the tables gold read, not written
    replay = read_table(spark, run.lakehouse, "produce_replay")
    frames = build_gold(
        replay,
        read_table(spark, run.lakehouse, "partitions"),
        read_table(spark, run.lakehouse, "isr_changes"),
        "minute",
        "keyless",
        produce_requests=read_table(spark, run.lakehouse, "produce_requests"),
        keyless=F.lit(True),
    )
    keyless = (
        frames["routing"]
        .filter("policy = 'acks=all'")
        .agg(
            F.sum("rerouted").alias("rerouted"),
            F.sum("rerouted_bytes").alias("rerouted_bytes"),
            F.sum("held").alias("held"),
            F.sum("saved_wait_ms").alias("saved"),
            F.max("rerouted_p99_ms").alias("p99"),
            F.max("rerouted_fastest_p99_ms").alias("fastest"),
            F.sum("rerouted_latency_known").alias("known"),
        )
        .first()
    )
    assert (keyless["rerouted"], keyless["rerouted_bytes"], keyless["held"], keyless["known"]) == (
        rerouted,
        rerouted_bytes,
        rejections - rerouted,
        rerouted,
    )
    assert round(keyless["saved"], 1) == saved
    # at the cluster's own lag the re-simulated ISR rejects what it held keyed above, each with another partition
    # accepted around it
    (lag_rerouted,) = frames["routing"].filter("policy = 'acks=all@lag=3000'").agg(F.sum("rerouted")).first()
    assert lag_rerouted == LAG_ROUTING_FIGURES[trace.name]["acks=all@lag=3000"][0]
    assert (keyless["p99"] and round(keyless["p99"], 1), keyless["fastest"] and round(keyless["fastest"], 1)) == (
        p99,
        fastest,
    )


def test_spark_writer_counts_the_rejections_too(spark, sample_run, tmp_path):
    """Spark's writer (object storage, Spark Connect, clusters) returns no counts beside the rows it writes: the
    replay groups holding the 4.1.1 trace's ten real NOT_ENOUGH_REPLICAS answers are replayed again for their
    counts alone, and the self-check judges the same figures as with the replay's own writer."""
    run = sample_run(next(t for t in SAMPLES if t.name == "trace-4.1.1-berlin"))
    lakehouse = run.copy_lakehouse(tmp_path / "lakehouse")
    config = recorded_policies_config()
    config = config.model_copy(update={"replay": config.replay.model_copy(update={"writer": "spark"})})
    report = run_replay(spark, config, lakehouse, run.ingest.clusters, run_id="spark-writer")
    assert report.rejections == {"rejected": 10, "rejected_replayed": 10} == run.replay.rejections
    assert report.rejections_by_cluster == {"lab-4.1.1": (10, 10)}
    [cluster] = report.self_check.clusters
    assert cluster.rejections == (10, 10)


def test_replayed_acks_all_matches_the_brokers_ack(trace_run):
    trace, _, _, _, replay = trace_run
    truth = replay.ground_truth
    assert truth["n"] > 20_000
    assert truth["within_2ms"] >= MIN_WITHIN_2MS[trace.name]
    # the replayed P999 of ack wait is within 5% of the broker's own
    assert abs(truth["p999_replayed_ms"] / truth["p999_observed_ms"] - 1) <= 0.05
    [cluster] = replay.self_check.clusters  # the gate judges the trace and lets it through
    assert (cluster.judged, cluster.failures, cluster.n) == ("judged", (), truth["n"])


SEND_DELAYS = {  # client -> (requests that did not wait, their median delay after the first record in ms)
    "trace-3.9.1-utc": {"lab-producer-acks-1": (5_398, 5.0), "lab-producer-acks-all": (20_351, 4.9)},
    "trace-4.1.1-berlin": {"lab-producer-acks-1": (5_399, 5.1), "lab-producer-acks-all": (18_681, 4.9)},
}


def test_the_producers_requests_show_the_linger_ms_they_are_replayed_with(spark, trace_run):
    """The lab's producers ran with linger.ms 5 (the manifest) and conf/local.yaml replays them so: their requests
    that did not wait reached the broker about 5 ms after their first record, and the replay prints no warning."""
    trace, manifest, lakehouse, _, replay = trace_run
    assert manifest["workload"]["producer_configs"]["linger.ms"] == 5
    measured = {d.client_id: (d.requests, round(d.p50_ms, 1)) for d in replay.send_delays}
    assert measured == SEND_DELAYS[trace.name]
    assert all(d.linger_ms == 5 and d.agrees for d in replay.send_delays)
    assert not [line for line in replay.summary_lines(detail=False) if "linger.ms" in line]
    # replay_checks keeps the producer furthest off it, for the report's accuracy table
    (check,) = read_table(spark, lakehouse, "replay_checks").collect()
    furthest = SEND_DELAYS[trace.name][check["send_delay_client"]]
    assert (check["linger_ms"], check["send_delay_requests"], round(check["send_delay_p50_ms"], 1)) == (5.0, *furthest)
    assert check["send_delay_agrees"] is True


def test_every_real_not_enough_replicas_rejection_is_replayed_as_one(spark, trace_run):
    # The 4.1.1 trace's resumed leader dropped both followers of its two partitions (ISR [1], min ISR 2,
    # for 0.26 and 0.29 s) and answered ten acks=all requests NOT_ENOUGH_REPLICAS; the committed ISR the
    # replay reads from the logs was below min ISR at every one of them. The reverse (no appended acks=all
    # produce replayed as rejected) is part of the ground truth above: such a produce would be a miss.
    _, _, lakehouse, _, replay = trace_run
    produce = read_table(spark, lakehouse, "produce_requests")
    real = produce.filter("acks = -1 AND error_code = 19").count()
    assert replay.rejections == {"rejected": real, "rejected_replayed": real}
    assert real == {"lab-3.9.1": 0, "lab-4.1.1": 10}[produce.first()["cluster"]]
    out = read_table(spark, lakehouse, "produce_replay")
    assert out.filter("policy = 'acks=all' AND recorded_acks = -1 AND outcome = 'not_enough_replicas'").count() == 0


def test_the_isr_resimulated_at_the_clusters_own_lag_acks_as_the_recorded_one(spark, trace_run):
    """`acks=all@lag=<replica.lag.time.max.ms the cluster ran with>` re-simulates the ISR from the
    followers' LEO timelines (the controller's removals, the leader's own check times, commit delays and
    pauses from the logs); at the cluster's own lag its acks must be those of `acks=all` under the
    recorded ISR. Measured 2026-11-26: 3.9.1 99.81% within 2 ms, P999 of ack wait 2,883 vs 2,913 ms;
    4.1.1 99.68%, 2,442 vs 2,473 ms."""
    _, manifest, lakehouse, _, _ = trace_run
    lag = manifest["configs"]["broker"]["replica.lag.time.max.ms"]
    key = ["topic", "partition", "leader_epoch", "base_offset"]
    replay = read_table(spark, lakehouse, "produce_replay")

    def acks(policy: str, name: str):
        wait = (F.unix_micros("t_ack") - F.unix_micros("t_local_done")) / 1000
        return replay.where((F.col("policy") == policy) & (F.col("outcome") == "acked")).select(*key, wait.alias(name))

    both = acks("acks=all", "recorded").join(acks(f"acks=all@lag={lag}", "resimulated"), key)
    n, within, p999_recorded, p999_resimulated = both.agg(
        F.count("*"),
        F.avg((F.abs(F.col("resimulated") - F.col("recorded")) <= 2).cast("double")),
        F.percentile("recorded", 0.999),
        F.percentile("resimulated", 0.999),
    ).first()
    assert n > 30_000
    assert within >= 0.995
    assert abs(p999_resimulated / p999_recorded - 1) <= 0.05


def _client_batches(trace) -> dict[tuple[str, int, int], float]:
    """(client id, partition, base offset) -> what the lab's producer measured, send() to ack callback (ms)."""
    out = {}
    for f in trace.glob("*/client/batches-*.csv.gz"):
        with gzip.open(f, "rt") as fh:
            for r in csv.DictReader(fh):
                key = (r["client_id"], int(r["partition"]), int(r["base_offset"]))
                out[key] = (int(r["ack_us"]) - int(r["first_send_us"])) / 1000
    return out


def test_replayed_producer_latency_matches_what_the_clients_measured(spark, trace_run):
    """Under the recorded policy, the replayed producer-visible latency of every batch against the lab
    producer's own send()-to-callback time: P50 within 2 ms, P99 and P999 within 10% (README "What the
    producer sees"). The producers' send times are an input (the client logs' first_send_us, as a
    record's CreateTime would give them); their ack times are not."""
    trace, manifest, lakehouse, _, _ = trace_run
    client = _client_batches(trace)
    recorded = F.when(F.col("recorded_acks") == -1, "acks=all").otherwise("acks=1")
    replayed = (
        read_table(spark, lakehouse, "produce_replay")
        .join(
            read_table(spark, lakehouse, "produce_requests").select(
                "source_file", "line_number", "partition", "client_id"
            ),
            ["source_file", "line_number", "partition"],
        )
        .where(F.col("policy") == recorded)
        .select("client_id", "partition", "base_offset", "latency_ms", "t_send")
        .collect()
    )  # fmt: skip  (one row per batch of a 150 s trace)
    assert all(r["t_send"] is not None for r in replayed)
    for client_id, acks in (("lab-producer-acks-all", "acks=all"), ("lab-producer-acks-1", "acks=1")):
        mine = {(r["partition"], r["base_offset"]): r["latency_ms"] for r in replayed if r["client_id"] == client_id}
        theirs = {(p, o): ms for (c, p, o), ms in client.items() if c == client_id}
        assert mine.keys() == theirs.keys()
        assert len(mine) == manifest["counts"]["client"][acks]["batches_acked"]
        keys = sorted(mine)
        ours = np.percentile([mine[k] for k in keys], [50, 99, 99.9])
        real = np.percentile([theirs[k] for k in keys], [50, 99, 99.9])
        assert abs(ours[0] - real[0]) <= 2.0, (client_id, ours, real)
        assert np.all(np.abs(ours[1:] / real[1:] - 1) <= 0.10), (client_id, ours, real)


def test_a_replay_its_ground_truth_contradicts_is_refused(spark, sample_run, tmp_path, capsys):
    """The 3.9.1 trace with its broker logs withheld: no ISR changes, so the replay waits for followers
    the controller had removed from the ISR; the self-check refuses it (exit 3, figures printed), and gold
    refuses the cluster even when named. With --accept-untrusted the replay goes through and gold, the
    console and the report's first line say the results are untrusted. About two minutes: two replays of a
    real trace (refused, then accepted) and gold and the report twice, each a step of the command as users run it."""
    import yaml

    from ackreplay.cli import main

    run = sample_run(next(p for p in SAMPLES if p.name == "trace-3.9.1-utc"))
    copy = run.copy_lakehouse(tmp_path / "lakehouse")
    for table in ("isr_changes", "leader_epochs"):
        spark.sql(f"DELETE FROM delta.`{table_path(copy, table)}`")
    conf = yaml.safe_load(open("conf/local.yaml"))
    conf["quality"]["enabled"] = False  # the gate is the replay's own, not a data-quality check
    conf["replay"]["lag_ms"] = conf["replay"]["quorum_sizes"] = []  # the verdict is on acks=all: no what-ifs
    (tmp_path / "conf.yaml").write_text(yaml.safe_dump(conf))
    capsys.readouterr()
    assert main(["replay", "--lakehouse", copy, "--conf", str(tmp_path / "conf.yaml")]) == 3
    out, err = capsys.readouterr()
    assert "lab-3.9.1: n=26,332, 84.12% within 2 ms, 0 not acked" in out
    assert "FAILED: 84.12% within 2 ms < 97%; P999 off by more than 10%" in out
    assert "where the misses fall" in out
    assert err.startswith("error: the replay's ground truth contradicts it on lab-3.9.1")
    conf_args = ["--lakehouse", copy, "--conf", str(tmp_path / "conf.yaml")]
    assert main(["gold", "--cluster", "lab-3.9.1", *conf_args]) == 3
    out, err = capsys.readouterr()
    assert err.startswith("error: the latest replay of lab-3.9.1 (84.12% within 2 ms < 97%; P999 off by more than 10%)")
    verdict = "FAILED, accepted untrusted: 84.12% within 2 ms < 97%; P999 off by more than 10%"

    assert main(["replay", "--accept-untrusted", *conf_args]) == 0
    assert (
        "--accept-untrusted: gold and the report of lab-3.9.1 are written marked UNTRUSTED" in capsys.readouterr().out
    )
    assert main(["gold", *conf_args]) == 0
    assert f"UNTRUSTED: the replay's self-check {verdict}" in capsys.readouterr().out
    verdicts = read_table(spark, copy, "policy_summary").select("cluster", "self_check").distinct().collect()
    assert [tuple(r) for r in verdicts] == [("lab-3.9.1", verdict)]
    assert main(["report", *conf_args]) == 0
    page = (Path(copy) / "report" / "report.html").read_text()
    assert "<title>UNTRUSTED ackreplay report</title>" in page
    assert (
        '<body>\n<p class="untrusted">UNTRUSTED: the replay\'s self-check failed on lab-3.9.1 (' + html.escape(verdict)
        in page
    )


def test_every_data_quality_check_passes_on_a_real_trace(spark, sample_run, tmp_path):
    """The data-quality checks of every stage, with conf/local.yaml's severities, on the 3.9.1 trace's
    session run (ingest, replay and gold): no expectation fails and every reconciliation count holds.
    The checks' behaviour on broken data is test_dq.py's and test_hostile_inputs.py's; this is the one
    place they meet a real trace (the standalone cluster's run of the same trace skips them). About 100 s in
    the suite: 810 expectations over 17 tables, each table's counted in one Spark job, plus 60 counts."""
    from ackreplay.config import load_config
    from ackreplay.quality.runner import run_quality
    from tests.conftest import SAMPLE_CONF

    run = sample_run(next(p for p in SAMPLES if p.name == "trace-3.9.1-utc"), gold=True)
    lakehouse = run.copy_lakehouse(tmp_path / "lakehouse")  # dq_results is written into it
    config = load_config(SAMPLE_CONF)
    figures = {}
    for stage in ("ingest", "replay", "gold"):
        report = run_quality(spark, config, lakehouse, stage, run.ingest.clusters, f"dq-{stage}")
        assert report.failures == [], "\n".join(report.summary_lines())
        assert all(c.ok for c in report.counts)
        expectations = sum(o.expectation != "reconciliation" for o in report.outcomes)
        figures[stage] = (len(report.tables), expectations, len(report.counts), report.skipped_tables)
    # the schema checks' not-null expectations are the contracts' non-null columns: 144, 25 and 111
    assert figures == {
        "ingest": (13, 453, 5, []),
        "replay": (1, 90, 7, []),
        "gold": (5, 325, 48, []),
    }
    recorded = read_table(spark, lakehouse, "dq_results").groupBy("stage").count().collect()
    assert {r["stage"]: r["count"] for r in recorded} == {"ingest": 458, "replay": 97, "gold": 373}


def test_policy_invariants_hold_on_real_data(spark, trace_run):
    _, _, lakehouse, _, _ = trace_run
    out = read_table(spark, lakehouse, "produce_replay")
    wide = (
        out.groupBy("source_file", "line_number", "partition")
        .pivot("policy", sorted(POLICIES))
        .agg(F.first(F.unix_micros("t_ack")))
    )
    violations = wide.filter(
        (F.col("`acks=1`") > F.col("`quorum=2`")) | (F.col("`acks=1`") > F.col("`acks=all`"))
    ).count()
    assert violations == 0
    acked = out.filter("outcome = 'acked'")
    too_few = acked.filter(
        ((F.col("policy") == "quorum=2") & (F.col("copies_at_ack") < 2))
        | ((F.col("policy") == "min.insync") & (F.col("copies_at_ack") < 2))
        | ((F.col("policy") == "acks=1") & (F.col("copies_at_ack") < 1))
    ).count()
    assert too_few == 0
    assert acked.filter("exposure_ms < 0 OR full_replication_ms < 0").count() == 0


def test_a_cluster_without_fetch_lines_is_replayed_from_its_jmx_leo_samples(spark, trace_run, tmp_path):
    """Brokers whose request log is not at DEBUG have no follower FETCH lines: the replay falls back to
    the followers' scraped LEOs (about one sample per second), flagged as such and coarser."""
    _, _, lakehouse, ingest, replay = trace_run
    copy = str(tmp_path / "lakehouse")
    shutil.copytree(lakehouse, copy)  # the shared run's lakehouse stays as it is
    spark.sql(f"DELETE FROM delta.`{table_path(copy, 'follower_fetches')}`")
    # acks=all and acks=1 are what it checks: the quorum and lag what-ifs are not replayed
    from_metrics = run_replay(spark, recorded_policies_config(), copy, ingest.clusters, run_id="metrics")
    assert from_metrics.replayed == replay.replayed
    out = read_table(spark, copy, "produce_replay")
    assert [r[0] for r in out.select("leo_source").distinct().collect()] == ["jmx_metrics"]
    acked = out.filter("policy = 'acks=all' AND recorded_acks = -1 AND outcome = 'acked'")
    err_ms = (F.unix_micros("t_response") - F.unix_micros("t_ack_observed")) / 1000.0
    low, high = acked.select(F.percentile(err_ms, [0.01, 0.99])).first()[0]
    # A sample shows the follower's own LEO, so the replayed ack can precede the broker's (which waits
    # for the follower's next FETCH) by a fetch round trip, and trail it by about a scrape interval.
    assert METRICS_ERROR_MS[0] <= low and high <= METRICS_ERROR_MS[1]
