"""Real traces of other Kafka versions (data/corpus/), beyond the two bundled samples.

trace-4.3.1-newyork: Kafka 4.3.1 (KRaft, 3 brokers, RF 3, min ISR 2, replica.lag.time.max.ms 5 s), short
follower stalls, an 8 s stall of broker 1 and two controlled shutdowns with restarts (manifest.json).
From 4.2 on a leader prints its skipped become-leader state changes with the partition's
PartitionRegistration (Partition.makeLeader, docs/kafka-versions.md); those lines carry the ISR commits
of the controlled shutdowns, so each of them must parse. The whole trace's replay is in README
("Kafka versions"); here its broker logs, which need no replay.

pair-4.3.1-acks-all, pair-4.3.1-acks-1: the lab's own producer, the same seeded faults once with acks=all and
once with acks=1 (a what-if checked against a real run). perf-4.3.1-acks-all, perf-4.3.1-acks-1: the same
with Kafka's ProducerPerformance as the client, whose printed percentiles are the ground truth.
trace-4.2.2-tokyo, trace-4.4.0-utc: the oldest and newest release with the 4.2+ become-leader line, recorded
like trace-4.3.1-newyork. trace-4.4.0-utc-micros: 4.4.0 again, its brokers logging to the microsecond.
minisr3-4.4.0-utc-micros: Kafka 4.4.0 with min.insync.replicas 3 = RF: a controlled shutdown holds acks=all below min ISR.
trace-3.7.2-utc: Kafka 3.7.2 (log4j 1), 12 partitions, replica.lag.time.max.ms 10 s, lz4 compression, an 18 s
leader stall past the lag time and a controlled shutdown. trace-4.0.2-saopaulo: Kafka 4.0.2, 3 partitions,
min ISR 1, replica.lag.time.max.ms 30 s (Kafka's default), a controlled shutdown and a leader crash.

Line counts are taken with plain gzip + substring counts, independently of the pipeline.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from ackreplay.config import AppConfig, load_config
from ackreplay.ingest.broker_logs import ingest_broker_logs
from ackreplay.storage.inputs import discover_inputs
from ackreplay.storage.lakehouse import read_table
from tests.conftest import SAMPLE_CONF, recorded_policies_config, spark_defaults_for_large_data

REPO = Path(__file__).resolve().parents[2]
TRACE_431 = REPO / "data/corpus/trace-4.3.1-newyork"


def _lines_containing(trace: Path, log: str, *texts: str) -> int:
    """Lines of the trace's `log` files that contain every one of `texts`."""
    return sum(
        sum(all(text in line for text in texts) for line in gzip.open(path, "rt", errors="replace"))
        for path in sorted(trace.glob(f"*/broker-*/{log}*"))
    )


def test_kafka_4_3_broker_logs_parse_line_for_line(spark, tmp_path):
    inventory = discover_inputs(str(TRACE_431))
    files = inventory.of_kind("server_log") + inventory.of_kind("state_change_log")
    lakehouse = str(tmp_path / "lakehouse")
    report = ingest_broker_logs(spark, load_config(SAMPLE_CONF), files, lakehouse, "corpus")

    skipped = _lines_containing(TRACE_431, "state-change.log", "Skipped the become-leader state change for ")
    in_registration_form = _lines_containing(
        TRACE_431,
        "state-change.log",
        "Skipped the become-leader state change for ",
        ", partition registration PartitionRegistration(",
    )
    assert skipped == in_registration_form == 188  # every one in the 4.2+ form
    assert report.parsed_detail["leader_skip"] == skipped
    assert report.server_log.quarantined == report.state_change_log.quarantined == 0
    assert report.parsed_detail["isr_shrink"] == _lines_containing(TRACE_431, "server.log", "Shrinking ISR from ") == 6
    assert report.parsed_detail["isr_update"] == _lines_containing(TRACE_431, "server.log", "ISR updated to ") == 55
    assert report.isr_changes_by_kind == {
        ("expand", "server_log"): 52,
        ("expand", "state_change_log"): 66,
        ("leader_start", "state_change_log"): 130,
        ("shrink", "server_log"): 3,
        ("shrink", "state_change_log"): 67,
    }
    assert report.duplicate_commits == 55 and report.shrinks_without_commit == 0

    # The controlled shutdown of broker 2 (19:25:41.380 UTC): the controller removes it from the ISR of the
    # lab topic's partitions it follows, and their leaders learn it from the metadata log only (state-change.log).
    isr = read_table(spark, lakehouse, "isr_changes")
    removed = (
        isr.where("topic = 'ackreplay-lab' AND change_kind = 'shrink' AND source = 'state_change_log'")
        .where("NOT array_contains(isr, 2)")
        .where("t_log BETWEEN '2026-11-25 19:25:41.380' AND '2026-11-25 19:25:44.310'")
        .select("partition", "broker_id")
        .distinct()
        .collect()
    )
    assert sorted((r["partition"], r["broker_id"]) for r in removed) == [(1, 3), (2, 1), (3, 1), (4, 3)]


def test_isr_lines_in_an_unknown_format_stop_the_run_naming_file_line_and_version(spark, tmp_path):
    """The 4.3.1 trace with its skipped become-leader lines in a format no release printed (as a release
    after 4.4 might change them): the ISR commits they carry would be lost, so the ingest stops and names
    them; `ingest.unknown_broker_log_lines: warning` quarantines them instead."""
    import shutil

    import pytest

    from ackreplay.ingest.broker_logs import BrokerLogFormatError

    trace = tmp_path / "trace"
    broker = trace / "lab-4.3.1" / "broker-1"
    broker.mkdir(parents=True)
    shutil.copy(TRACE_431 / "lab-4.3.1/broker-1/server.log.gz", broker)
    lines = gzip.open(TRACE_431 / "lab-4.3.1/broker-1/state-change.log.gz", "rt").read().splitlines(keepends=True)
    garbled = [
        line.replace(", partition registration PartitionRegistration(", ", registration Registration(")
        if "Skipped the become-leader state change" in line
        else line
        for line in lines
    ]
    changed = [i + 1 for i, (a, b) in enumerate(zip(lines, garbled, strict=False)) if a != b]
    assert len(changed) == 113 and changed[-1] < len(
        lines
    )  # broker 1's skipped become-leader lines, none the last line
    (broker / "state-change.log").write_text("".join(garbled))
    inventory = discover_inputs(str(trace))
    files = inventory.of_kind("server_log") + inventory.of_kind("state_change_log")
    config = load_config(SAMPLE_CONF)

    with pytest.raises(BrokerLogFormatError) as failure:
        ingest_broker_logs(spark, config, files, str(tmp_path / "lakehouse"), "corpus")
    message = str(failure.value)
    assert message.startswith("113 server.log/state-change.log/controller.log line(s) of a kind the replay reads")
    assert (
        f"  lab-4.3.1/broker-1/state-change.log line {changed[0]} (the broker logged Kafka version 4.3.1): "
        "'Skipped the become-leader' line in no known format (cut short?): [2026-11-25 "
    ) in message
    assert "ingest.unknown_broker_log_lines: warning" in message

    lenient = config.model_copy(
        update={"ingest": config.ingest.model_copy(update={"unknown_broker_log_lines": "warning"})}
    )
    report = ingest_broker_logs(spark, lenient, files, str(tmp_path / "lakehouse"), "corpus")
    assert report.state_change_log.quarantined == 113
    assert report.quarantine_reasons == {
        ("state_change_log", "'Skipped the become-leader' line in no known format (cut short?)"): 113
    }


PAIR = {"acks=all": REPO / "data/corpus/pair-4.3.1-acks-all", "acks=1": REPO / "data/corpus/pair-4.3.1-acks-1"}


def _record_quantiles(spark, lakehouse: str, quantiles: list[float]) -> dict[tuple[str, str], list[float]]:
    """(cluster, policy) -> gold's per-record latency quantiles (`latency_quantiles`, the report's CDF), in order."""
    from pyspark.sql import functions as F

    from ackreplay.gold.stage import read_record_sends
    from ackreplay.transforms.gold import latency_quantiles

    replay = read_table(spark, lakehouse, "produce_replay")
    out: dict[tuple[str, str], list[float]] = {}
    for r in (
        latency_quantiles(replay, quantiles, read_record_sends(spark, lakehouse, F.lit(True))).orderBy("q").collect()
    ):
        out.setdefault((r["cluster"], r["policy"]), []).append(r["latency_ms"])
    return out


def _create_times(trace: Path) -> dict[tuple[int, int], int]:
    """(partition, offset) -> the record's CreateTime (ms), read from the trace's kafka-dump-log output."""
    import re

    times, partition = {}, None
    for path in trace.glob("*/create-times/*.gz"):
        with gzip.open(path, "rt") as lines:
            for line in lines:
                if line.startswith("Dumping "):
                    partition = int(re.search(r"-(\d+)/[^/]+$", line.strip()).group(1))
                elif line.startswith("| offset: "):
                    offset, ms = re.match(r"\| offset: (\d+) CreateTime: (\d+)", line).groups()
                    times[(partition, int(offset))] = int(ms)
    return times


PERF_TEST = {"acks=all": REPO / "data/corpus/perf-4.3.1-acks-all", "acks=1": REPO / "data/corpus/perf-4.3.1-acks-1"}
# ProducerPerformance at 1,500 records/s of 1 KB, linger 0, lz4, lag time 6 s, a 9.5 s pause of a leader (Kafka 4.4.0)
PERF_FAST = {
    "acks=all": REPO / "data/corpus/perf-fast-4.4.0-acks-all",
    "acks=1": REPO / "data/corpus/perf-fast-4.4.0-acks-1",
}
PERF_FAST_CLUSTERS = {"acks=all": "perf-fast-4.4.0", "acks=1": "perf-fast-4.4.0-acks-1"}
VERSION_TRACES = {
    "lab-3.6.2": REPO / "data/corpus/keyless-rf2-3.6.2-kolkata",
    "lab-3.7.2": REPO / "data/corpus/trace-3.7.2-utc",
    "lab-3.8.1": REPO / "data/corpus/trace-3.8.1-sydney",
    "lab-4.0.2": REPO / "data/corpus/trace-4.0.2-saopaulo",
    "lab-4.2.2": REPO / "data/corpus/trace-4.2.2-tokyo",
    "lab-4.4.0": REPO / "data/corpus/trace-4.4.0-utc",
    "lab-4.4.0-us": REPO / "data/corpus/trace-4.4.0-utc-micros",
}


CRASH_TRACE = REPO / "data/corpus/crash-4.4.0-utc-micros"
MIN_ISR_TRACE = REPO / "data/corpus/minisr3-4.4.0-utc-micros"


@dataclass
class CorpusRun:
    lakehouse: str
    self_check: dict  # cluster -> ClusterTruth of the recorded acks=all
    quantiles: dict[tuple[str, str], list[float]]  # (cluster, policy) -> per-record P50, P99, P999
    failovers: list[dict]  # the replay's leader changes that cut acknowledged records (transforms.failovers)
    rejections: dict  # the replay's rejection ground truth (stage.ReplayReport.rejections)
    elr: dict  # cluster -> elr.ElrSetting: keeps eligible leader replicas, and the rule against the printed ones
    send_delays: list  # replay.send_delays.SendDelay per cluster and producer client


def with_each_traces_producers(config: AppConfig, traces: list[Path]) -> AppConfig:
    """`config` with each trace's cluster given its producers' linger.ms as the trace's manifest records it (conf
    `clusters.<name>.producer`): 0 for the perf-fast pair, whose ProducerPerformance ran with linger.ms=0, Kafka's
    default 5 for the others."""
    clusters = dict(config.clusters)
    for trace in traces:
        manifest = json.loads((trace / "manifest.json").read_text())
        linger_ms = manifest["workload"]["producer_configs"]["linger.ms"]
        name = manifest["cluster"]
        clusters[name] = config.cluster(name).model_copy(update={"producer": {"linger_ms": linger_ms}})
    return config.model_copy(update={"clusters": clusters})


CORPUS_TRACES = [
    *PAIR.values(), *PERF_TEST.values(), *PERF_FAST.values(), *VERSION_TRACES.values(), CRASH_TRACE, MIN_ISR_TRACE
]  # fmt: skip


@pytest.fixture(scope="module")
def corpus_run(spark, tmp_path_factory) -> CorpusRun:
    """The pair, ProducerPerformance and version traces ingested and replayed together, once for this
    module: one ingest and one replay of fifteen traces (about 2 GB of logs unpacked) instead of one per test, since a
    pipeline run's fixed cost (Spark jobs, Delta commits) is most of a small trace's time. Besides the
    recorded policies, each trace's ISR is re-simulated at its own replica.lag.time.max.ms (`own`), which
    the self-check judges (test_the_isr_resimulated_at_each_traces_own_lag_acks_as_its_recorded_isr)."""
    from ackreplay.ingest.stage import run_ingest
    from ackreplay.replay.stage import run_replay

    recorded = recorded_policies_config()
    config = recorded.model_copy(update={"replay": recorded.replay.model_copy(update={"lag_ms": ["own"]})})
    config = with_each_traces_producers(config, CORPUS_TRACES)
    lakehouse = str(tmp_path_factory.mktemp("corpus") / "lakehouse")
    traces = CORPUS_TRACES
    # Every input file but the JMX-exporter scrapes: the replay reads follower LEO samples only for a cluster
    # without follower FETCH lines (ackreplay/replay/stage.py), every corpus trace has them, and no test here
    # reads the samples. The scrapes of every corpus trace carry the same metric names as the bundled traces',
    # whose parsing test_metrics_samples.py checks line for line.
    files = [f for trace in traces for f in discover_inputs(str(trace)).files if f.kind != "metrics"]
    ingest = run_ingest(spark, config, files, lakehouse)
    assert len(ingest.clusters) == len(traces), ingest.clusters
    assert ingest.metrics is not None and not ingest.metrics.files
    with spark_defaults_for_large_data(spark):
        report = run_replay(spark, config, lakehouse, ingest.clusters, run_id="corpus")
    return CorpusRun(
        lakehouse,
        {c.cluster: c for c in report.self_check.clusters},
        _record_quantiles(spark, lakehouse, [0.5, 0.99, 0.999]),
        report.failovers,
        report.rejections,
        report.elr,
        report.send_delays,
    )


def test_every_producers_requests_show_the_linger_ms_its_manifest_records(corpus_run):
    """The requests that did not wait reached the broker about `linger.ms` after their first record, for every
    producer of every corpus trace, each replayed with its manifest's linger.ms (0 for the perf-fast pair, 5 for
    the others): no warning. Replayed with the other value (5 for 0, 0 for 5), every producer's median is off."""
    from ackreplay.replay.send_delays import measured, summary_lines

    by_cluster = {
        (d.cluster, d.client_id): (d.linger_ms, d.requests, round(d.p50_ms, 1)) for d in corpus_run.send_delays
    }
    clusters_with_clients = {cluster for cluster, _ in by_cluster}
    assert clusters_with_clients == {json.loads((t / "manifest.json").read_text())["cluster"] for t in CORPUS_TRACES}
    assert all(d.judged and d.agrees for d in corpus_run.send_delays), by_cluster
    assert summary_lines(corpus_run.send_delays, [], detail=False) == []
    medians = sorted({(linger, p50) for linger, _, p50 in by_cluster.values()})
    assert {linger for linger, _ in medians} == {0.0, 5.0}
    assert max(p50 for linger, p50 in medians if linger == 0.0) <= 1.0
    assert min(p50 for linger, p50 in medians if linger == 5.0) >= 4.0

    swapped = measured(
        [dataclasses.asdict(d) for d in corpus_run.send_delays],
        lambda cluster: 5.0 if any(d.cluster == cluster and d.linger_ms == 0 for d in corpus_run.send_delays) else 0.0,
    )
    assert not [d for d in swapped if d.agrees]
    assert len(summary_lines(swapped, [], detail=False)) == len(clusters_with_clients)


def test_a_what_if_predicts_the_paired_real_run(spark, corpus_run):
    """The lab recorded the same workload and seeded fault schedule (6.5 s follower stall, short stalls,
    a leader's controlled shutdown) twice on Kafka 4.3.1, once with the producer on acks=all and once on
    acks=1 (lab.record_trace --seed 7 --acks1-share 0 / 1). Replaying each trace under the other's policy
    must predict the other run's producer latency as its client saw it, per record (as ProducerPerformance
    counts: from each record's send() to its batch's ack callback; measured here from the client's ack time
    and the record's CreateTime in the dump): P50 and P999 within 10%, P99 within 12%. The prediction is gold's own
    per-record quantiles (`latency_quantiles`, the report's CDF). Per batch it does not hold: a producer
    held up by acks=all fills fewer, bigger batches, so the acks=1 run's batches replayed under acks=all put
    3 s at the P99 where the real acks=all run had 115 ms; the replay does not re-batch (README "What the
    producer sees"). Reads the module's corpus run.

    Why the acks=all P99 is 10.8% low (4,363 ms predicted, 4,893 ms measured): the prediction keeps the
    acks=1 run's ISR shrinks, and Kafka's shrinks depend on the producer. In the acks=1 run broker 3
    shrank partitions 1 and 5 4.5 s into the 6.5 s follower stall; in the real acks=all run it shrank
    partition 1 at 5.9 s (one isr-expiration period later: `ReplicaManager` runs `maybeShrinkIsr` every
    replica.lag.time.max.ms / 2) and never partition 5, whose batch was acked when the follower resumed
    (6.7 s). Records held up on broker 3's connection meanwhile make up the P99. Not tuned: issue 21 (ISR
    re-simulation under the what-if policy)."""
    import csv

    import numpy as np

    measured = {}
    for recorded, trace in PAIR.items():
        (path,) = trace.glob("*/client/batches-*.csv.gz")
        created = _create_times(trace)
        per_record = [
            int(r["ack_us"]) / 1000 - created[(int(r["partition"]), offset)]
            for r in csv.DictReader(gzip.open(path, "rt"))
            for offset in range(int(r["base_offset"]), int(r["base_offset"]) + int(r["records"]))
        ]
        assert len(per_record) in (26_997, 26_998)
        measured[recorded] = np.percentile(per_record, [50, 99, 99.9])
    replay = read_table(spark, corpus_run.lakehouse, "produce_replay").where(F.col("cluster").startswith("pair-"))
    # every batch of the acks=all run acks under acks=1; of the acks=1 run's, one does not under acks=all:
    # partition 0 offset 8650, appended 54 ms into its leader's controlled shutdown, whose ack the real
    # producer never saw either (the lab's consistency check), replays as not_leader
    acked = replay.where("outcome = 'acked'").groupBy("cluster", "policy").count().collect()
    assert {(r["cluster"], r["policy"]): r["count"] for r in acked if r["policy"] in PAIR} == {
        ("pair-acks-all", "acks=all"): 21_670, ("pair-acks-all", "acks=1"): 21_670,
        ("pair-acks-1", "acks=all"): 22_927, ("pair-acks-1", "acks=1"): 22_928,
    }  # fmt: skip
    for recorded, other in (("acks=all", "acks=1"), ("acks=1", "acks=all")):
        predicted = np.array(corpus_run.quantiles[(f"pair-{recorded.replace('=', '-')}", other)])
        error = predicted / measured[other] - 1
        assert all(abs(error) <= [0.10, 0.12, 0.10]), (recorded, other, predicted, measured[other])


def _truth_figures(corpus_run, cluster: str) -> tuple:
    """A cluster's broker-side ground truth: (recorded acks=all produces, within 2 ms, P999 replayed, observed)."""
    truth = corpus_run.self_check[cluster]
    return truth.n, round(truth.within_2ms, 4), round(truth.p999_replayed_ms, 1), round(truth.p999_observed_ms, 1)


def _printed_steady_state(traces: dict[str, Path], records: int) -> dict[str, list[int]]:
    """acks -> ProducerPerformance's printed steady-state P50, P99, P999 (ms) of each trace, as its manifest keeps
    them; each run counted `records` records after its warm-up."""
    import json

    printed = {}
    for acks, trace in traces.items():
        steady = json.loads((trace / "manifest.json").read_text())["workload"]["perf_test"]["steady_state"]
        assert steady["records"] == records
        printed[acks] = [steady["p50_ms"], steady["p99_ms"], steady["p999_ms"]]
    return printed


def test_kafkas_producer_performance_measured_what_the_replay_predicts(corpus_run):
    """Kafka's own producer benchmark, `ProducerPerformance` (kafka-producer-perf-test), was the client of two
    lab runs on Kafka 4.3.1 with the same seeded faults as the pair above, once with acks=all and once with
    acks=1 (lab.record_trace --client perf-test --seed 7 --acks1-share 0 / 1). Its printed steady-state
    P50 / P99 / P999 (`Stats.printTotal`: per record, from before `send()` to the callback, int ms) are the
    ground truth, and gold's per-record quantiles (`latency_quantiles`) must give them: under the recorded
    policy P99 and P999 within 2% (measured: within 0.3%), under the other policy within 10% (measured:
    5.9-6.5%), P50 within 1 ms (the tool truncates to whole ms). Reads the module's corpus run."""
    # the broker-side ground truth of the acks=all trace (README, "Kafka versions")
    assert _truth_figures(corpus_run, "perf-acks-all") == (10_251, 0.9982, 53.5, 53.9)
    printed = _printed_steady_state(PERF_TEST, 27_000)
    assert printed == {"acks=all": [5, 4359, 6329], "acks=1": [5, 4143, 5911]}
    for recorded in PERF_TEST:
        for policy, tolerance in ((recorded, 0.02), ({"acks=all": "acks=1", "acks=1": "acks=all"}[recorded], 0.10)):
            predicted = corpus_run.quantiles[(f"perf-{recorded.replace('=', '-')}", policy)]
            (p50, p99, p999), (m50, m99, m999) = predicted, printed[policy]
            assert abs(p50 - m50) <= 1, (recorded, policy, p50, m50)
            assert abs(p99 / m99 - 1) <= tolerance and abs(p999 / m999 - 1) <= tolerance, (recorded, policy, p99, p999)


def test_kafkas_producer_performance_at_a_higher_rate_and_where_the_what_if_breaks(corpus_run):
    """ProducerPerformance at 1,500 records/s of 1 KB, linger.ms 0, lz4, on Kafka 4.4.0 with lag time 6 s, a
    9.5 s pause of broker 1 (a leader, and a follower of every other partition) and a leader's controlled
    shutdown, once on acks=all and once on acks=1 (lab.record_trace --client perf-test --rate 1500 --seed 51;
    manifest.json has the command). Under the recorded policy gold's per-record quantiles give the tool's
    printed steady-state P50 within 1 ms and P99/P999 within 0.1% (asserted: 2%). Across policies the P999
    holds (+1.8%, -5.8%) and the P99 does not, for a reason outside the replay's rules: the records are keyless,
    and Kafka's partitioner (KIP-794, `BuiltInPartitioner`, adaptive by queue size) put them where the recorded
    policy let the queues drain. On acks=1 it moved the traffic off the paused leader's partitions (about 1,050
    of the 14,000 records sent during the pause went there), so replayed under acks=all too few records wait
    for the pause (P99 6,302 ms against the acks=all run's 8,648 ms); on acks=all every partition waited for
    the paused follower and a third of the records stayed on the leader's partitions, so replayed under acks=1
    they still wait for its pause (P99 6,924 ms against the acks=1 run's 77 ms). The replay keeps each batch's
    partition (README "What the producer sees"); the figures are pinned so that a model of the partitioner
    shows here. Reads the module's corpus run."""
    assert _truth_figures(corpus_run, PERF_FAST_CLUSTERS["acks=all"]) == (25_873, 0.9989, 43.6, 43.8)
    printed = _printed_steady_state(PERF_FAST, 135_000)
    assert printed == {"acks=all": [1, 8648, 9619], "acks=1": [0, 77, 9060]}
    for recorded, cluster in PERF_FAST_CLUSTERS.items():
        (p50, p99, p999), (m50, m99, m999) = corpus_run.quantiles[(cluster, recorded)], printed[recorded]
        assert abs(p50 - m50) <= 1 and abs(p99 / m99 - 1) <= 0.02 and abs(p999 / m999 - 1) <= 0.02, (
            recorded, p50, p99, p999,
        )  # fmt: skip
    across = {
        recorded: [round(q, 1) for q in corpus_run.quantiles[(cluster, {"acks=all": "acks=1", "acks=1": "acks=all"}[recorded])]]
        for recorded, cluster in PERF_FAST_CLUSTERS.items()
    }  # fmt: skip
    assert across == {"acks=all": [1.1, 6924.0, 9224.1], "acks=1": [1.7, 6302.4, 9065.1]}
    assert abs(across["acks=all"][2] / printed["acks=1"][2] - 1) <= 0.10
    assert abs(across["acks=1"][2] / printed["acks=all"][2] - 1) <= 0.10


def test_keyless_records_placed_again_by_the_partitioner_predict_the_other_runs_client(spark, corpus_run):
    """Gold and the decision of the two perf-fast traces and of a lab trace with keyed records. ProducerPerformance's
    keyless records (taken as keyless from the dumps, `partitioning: auto`) went through broker 1's 9.5 s pause, so
    their decision says that another policy's P99 can be far off on the recorded placement (the test above measures
    how far) and points at the records placed again by Kafka's partitioner under each policy (policy_summary
    `placed_*`, ackreplay/replay/partitioner.py, with the producer's own linger.ms 0); the keyed lab trace, whose
    brokers paused and restarted too, carries no such caution and has no placed figures.

    Placed again, each run's records predict the other run's client (ProducerPerformance's printed steady state):
    the P999 within 10% both ways; the acks=1 client's P99 (77 ms) lies within the P99s of single draws from the
    acks=all trace replayed under acks=1 (the recorded placement put 6,924 ms there), the pooled P99 (127 ms) is
    where the partitioner's draws put the pause's records on average (a P99 at the edge of 1% of the records
    sent during a pause moves between draws, and so between real runs). The acks=1 trace under acks=all gives a P99
    17% under the acks=all client's (7,200 against 8,648 ms) as the recorded placement did (6,302 ms): the
    follower's ISR removal came at another point of the isr-expiration period in the two runs (`ReplicaManager`
    checks every replica.lag.time.max.ms / 2), which no placement changes. Writes gold into the module's
    lakehouse. Why it takes one to two minutes: gold of three clusters, whose placement replays the producer of two
    135,000-record traces under each of their four policies, five seeded draws each."""
    from ackreplay.gold.decision import decide
    from ackreplay.gold.stage import run_gold

    config = with_each_traces_producers(load_config(SAMPLE_CONF), CORPUS_TRACES)
    clusters = [*PERF_FAST_CLUSTERS.values(), "lab-4.4.0"]
    gold = run_gold(spark, config, corpus_run.lakehouse, clusters, "corpus-gold", window="minute")
    silences = {r["cluster"]: (r["partitioning"], round(r["leader_silence_ms"] / 1000, 1)) for r in gold.summary}
    assert silences == LEADER_SILENCES
    cautions = {d.cluster: d.keyless_leader_silence_ms is not None for d in decide(gold.summary, None)}
    assert cautions == {"perf-fast-4.4.0": True, "perf-fast-4.4.0-acks-1": True, "lab-4.4.0": False}
    placed = {
        (r["cluster"], r["policy"]): tuple(
            round(r[f"placed_{q}_ms"], 1)
            for q in ("p50", "p99", "p99_low", "p99_high", "p999", "p999_low", "p999_high")
        )
        for r in gold.summary
        if r["placed_draws"] is not None
    }
    assert placed == PLACED_PERF_FAST
    assert {r["placed_records"] for r in gold.summary if r["cluster"] == "lab-4.4.0"} == {None}
    printed = _printed_steady_state(PERF_FAST, 135_000)
    for recorded, cluster in PERF_FAST_CLUSTERS.items():
        other = {"acks=all": "acks=1", "acks=1": "acks=all"}[recorded]
        p50, p99, p99_low, p99_high, p999, _, _ = placed[(cluster, other)]
        assert abs(p999 / printed[other][2] - 1) <= 0.10, (recorded, p999)
    assert PLACED_PERF_FAST[(PERF_FAST_CLUSTERS["acks=all"], "acks=1")][2] <= printed["acks=1"][1]
    assert PLACED_PERF_FAST[(PERF_FAST_CLUSTERS["acks=all"], "acks=1")][3] >= printed["acks=1"][1]


# (cluster, policy) -> placed P50, P99 (pooled, lowest and highest draw), P999 (likewise), ms
PLACED_PERF_FAST = {
    ("perf-fast-4.4.0", "acks=all"): (1.6, 8630.9, 8553.6, 8663.8, 9454.0, 9401.8, 9528.1),
    ("perf-fast-4.4.0", "acks=1"): (1.1, 127.4, 33.6, 409.9, 9099.6, 9014.2, 9249.6),
    ("perf-fast-4.4.0", "acks=all@lag=6000"): (1.6, 8630.9, 8553.6, 8663.8, 9454.0, 9401.8, 9528.1),
    ("perf-fast-4.4.0", "min.insync"): (1.4, 143.2, 84.4, 279.8, 9146.4, 9038.7, 9300.8),
    ("perf-fast-4.4.0-acks-1", "min.insync"): (1.4, 1683.2, 1428.6, 1828.0, 9337.7, 9254.6, 9421.3),
    ("perf-fast-4.4.0-acks-1", "acks=all@lag=6000"): (1.5, 7333.0, 7273.5, 7420.4, 9426.4, 9370.9, 9459.0),
    ("perf-fast-4.4.0-acks-1", "acks=all"): (1.5, 7200.2, 7139.2, 7283.2, 9371.3, 9278.6, 9459.0),
    ("perf-fast-4.4.0-acks-1", "acks=1"): (0.8, 29.7, 15.3, 75.9, 9143.4, 9062.2, 9220.1),
}


def test_keyless_records_placed_again_on_the_traces_without_a_leader_pause(spark, corpus_run):
    """The partitioner's placement on the other keyless traces, with their producers' linger.ms 5 (the conf's
    default): the 4.3.1 ProducerPerformance pair, whose long stall was a follower's, and the 3.6.2 trace, whose
    RF 2 partitions fell below min ISR 2 for seconds while the lab's two Java producers (acks=all and acks=1, one
    client id each, placed apart) kept sending. On the 3.6.2 trace under acks=all the records placed again give
    the acks=all client's P99 and P999 within 5% (15,007 and 16,568 ms, from the client's ack times and the
    records' CreateTimes; the placed figures also hold the acks=1 producer's records, 15% of them, under
    acks=all): batches rejected below min ISR wait, in the placement, for the partition's next acknowledgement,
    as the producer's retries did. On the 4.3.1 pair the placement is no better than the
    recorded placement (no leader paused, so the recorded policy's placement is already the partitioner's
    under both): across policies P99 and P999 within 10% of the other run's client (as the recorded placement),
    and under the recorded acks=1 its P99 is 19% under the client's (3,350 against 4,143 ms, single draws
    2,640-4,229 ms), the model's own error where a few hundred records decide the P99. The placement alone (gold's
    `placement_frame`), from the module's corpus run."""
    import csv

    import numpy as np

    from ackreplay.gold.stage import keyless_in_records, keyless_topics, placement_frame, read_record_sends

    config = with_each_traces_producers(load_config(SAMPLE_CONF), CORPUS_TRACES)
    in_scope = F.col("cluster").isin("perf-acks-all", "perf-acks-1", "lab-3.6.2")
    tables = {
        name: read_table(spark, corpus_run.lakehouse, name).where(in_scope)
        for name in ("produce_replay", "produce_requests", "follower_fetches", "batch_send_times")
    }
    placement = placement_frame(
        tables["produce_replay"].where(F.col("policy").isin("acks=all", "acks=1")),
        read_record_sends(spark, corpus_run.lakehouse, in_scope),
        tables["produce_requests"],
        tables["follower_fetches"],
        keyless_topics(config, keyless_in_records(tables["batch_send_times"])),
        config,
    )
    placed = {
        (r["cluster"], r["policy"]): tuple(round(r[f"placed_{q}_ms"], 1) for q in ("p50", "p99", "p999"))
        for r in placement.collect()
    }
    assert placed == {
        ("perf-acks-all", "acks=all"): (5.8, 4468.3, 6158.7),
        ("perf-acks-all", "acks=1"): (5.5, 3780.7, 6123.4),
        ("perf-acks-1", "acks=all"): (6.0, 4439.4, 6438.8),
        ("perf-acks-1", "acks=1"): (5.4, 3349.7, 6378.1),
        ("lab-3.6.2", "acks=all"): (6.3, 14861.1, 16072.0),
        ("lab-3.6.2", "acks=1"): (5.5, 3881.2, 6114.5),
    }
    printed = _printed_steady_state(PERF_TEST, 27_000)
    for recorded, other in (("acks=all", "acks=1"), ("acks=1", "acks=all")):
        _, p99, p999 = placed[(f"perf-{recorded.replace('=', '-')}", other)]
        assert abs(p99 / printed[other][1] - 1) <= 0.10 and abs(p999 / printed[other][2] - 1) <= 0.10, (recorded, p99)
    trace = VERSION_TRACES["lab-3.6.2"]
    created = _create_times(trace)
    per_record = [
        int(r["ack_us"]) / 1000 - created[(int(r["partition"]), offset)]
        for path in trace.glob("*/client/batches-lab-producer-acks-all.csv.gz")
        for r in csv.DictReader(gzip.open(path, "rt"))
        for offset in range(int(r["base_offset"]), int(r["base_offset"]) + int(r["records"]))
    ]
    measured = np.percentile(per_record, [99, 99.9])
    _, p99, p999 = placed[("lab-3.6.2", "acks=all")]
    assert all(abs(np.array([p99, p999]) / measured - 1) <= 0.05), (measured, p99, p999)


def test_every_kafka_version_trace_passes_the_replays_ground_truth(spark, corpus_run):
    """Real traces of 3.7, 4.0 and of the oldest and newest release with the 4.2+ become-leader line
    (manifest.json has each command), one of them with the brokers' log4j2 stamps to the microsecond
    (trace-4.4.0-utc-micros, --log-stamp us): every broker-log line parses, and the replayed acks=all
    reproduces the brokers' own acks (the self-check's figures, exactly, and its verdict). Reads the
    module's corpus run."""
    quarantined = (
        read_table(spark, corpus_run.lakehouse, "quarantine")
        .where(F.col("cluster").isin(list(VERSION_TRACES)))
        .groupBy("cluster", "stage")
        .count()
        .collect()
    )
    assert quarantined == []
    figures = {
        c.cluster: (c.n, round(c.within_2ms, 4), round(c.p999_replayed_ms, 1), round(c.p999_observed_ms, 1), c.passed)
        for cluster, c in corpus_run.self_check.items()
        if cluster in VERSION_TRACES
    }
    assert figures == EXPECTED_VERSION_FIGURES
    # With microsecond stamps no time is cut to the millisecond, so within 1 ms measures the rules alone
    # (README "Ground truth": what is left is where inside a FETCH's handling the leader records the LEO).
    from ackreplay.replay.self_check import truth_rows

    micros = truth_rows(read_table(spark, corpus_run.lakehouse, "produce_replay")).where("cluster = 'lab-4.4.0-us'")
    within_1ms = micros.agg(F.avg((F.col("err_ms") <= 1).cast("double"))).first()[0]
    assert round(within_1ms, 4) == 0.9890


# (n, within 2 ms, P999 of ack wait replayed and observed in ms, passed) per cluster, measured 2026-11-25
EXPECTED_VERSION_FIGURES = {
    "lab-3.6.2": (10_122, 0.9982, 18.2, 17.6, True),  # measured 2026-11-29
    "lab-3.7.2": (17_843, 0.9981, 47.0, 47.6, True),  # measured 2026-11-26
    "lab-3.8.1": (24_557, 0.9958, 129.3, 125.8, True),  # measured 2026-11-29
    "lab-4.0.2": (11_029, 0.9982, 568.9, 569.0, True),  # measured 2026-11-29
    "lab-4.2.2": (24_682, 0.9975, 121.2, 120.5, True),
    "lab-4.4.0": (24_760, 0.9967, 73.3, 72.9, True),
    "lab-4.4.0-us": (18_193, 0.9966, 69.1, 69.1, True),  # measured 2026-11-26
}


# The corpus traces whose lab clients logged every acked batch and whose dump has each record's CreateTime.
CLIENT_TRACES = {
    "pair-acks-all": PAIR["acks=all"],
    "pair-acks-1": PAIR["acks=1"],
    "lab-3.6.2": VERSION_TRACES["lab-3.6.2"],
    "lab-3.7.2": VERSION_TRACES["lab-3.7.2"],
    "lab-3.8.1": VERSION_TRACES["lab-3.8.1"],
    "lab-4.2.2": VERSION_TRACES["lab-4.2.2"],
    "lab-4.4.0": VERSION_TRACES["lab-4.4.0"],
    "lab-4.4.0-us": VERSION_TRACES["lab-4.4.0-us"],
}


def test_every_lab_client_measured_per_record_what_its_own_policy_replays(spark, corpus_run):
    """Each lab producer of each corpus trace with client logs, under the policy it ran with: the
    replayed per-record latency (gold's `latency_quantiles` over that producer's produces) against what it
    measured per record, from the record's CreateTime (its send(), `KafkaProducer.doSend`) to the batch's
    ack callback (`ack_us` of the client log). P50 within 1 ms, P99 and P999 within 10% (the project's
    target for producer-visible latency). The 4.2.2 and 4.4.0 traces mix an acks=all and an acks=1
    producer on the same brokers, so each one's records wait behind the other's on shared connections."""
    import csv

    import numpy as np

    from ackreplay.gold.stage import read_record_sends
    from ackreplay.transforms.gold import latency_quantiles

    recorded = F.when(F.col("recorded_acks") == -1, "acks=all").otherwise("acks=1")
    requests = read_table(spark, corpus_run.lakehouse, "produce_requests").select(
        "source_file", "line_number", "partition", "client_id"
    )
    replay = (
        read_table(spark, corpus_run.lakehouse, "produce_replay")
        .where(F.col("cluster").isin(list(CLIENT_TRACES)) & (F.col("policy") == recorded))
        .join(requests, ["source_file", "line_number", "partition"])
        .withColumn("policy", F.concat_ws(" ", "client_id", "policy"))  # one group per producer
    )
    predicted: dict[tuple[str, str], list[float]] = {}
    sends = read_record_sends(spark, corpus_run.lakehouse, F.col("cluster").isin(list(CLIENT_TRACES)))
    for r in latency_quantiles(replay, [0.5, 0.99, 0.999], sends).orderBy("q").collect():
        predicted.setdefault((r["cluster"], r["policy"].split(" ")[0]), []).append(r["latency_ms"])
    measured = {}
    for cluster, trace in CLIENT_TRACES.items():
        created = _create_times(trace)
        for path in trace.glob("*/client/batches-*.csv.gz"):
            rows = list(csv.DictReader(gzip.open(path, "rt")))
            per_record = [
                int(r["ack_us"]) / 1000 - created[(int(r["partition"]), offset)]
                for r in rows
                for offset in range(int(r["base_offset"]), int(r["base_offset"]) + int(r["records"]))
            ]
            measured[(cluster, rows[0]["client_id"])] = np.percentile(per_record, [50, 99, 99.9])
    assert sorted(predicted) == sorted(measured)
    for key, (m50, m99, m999) in sorted(measured.items()):
        p50, p99, p999 = predicted[key]
        assert abs(p50 - m50) <= 1.0, (key, p50, m50)
        assert abs(p99 / m99 - 1) <= 0.10 and abs(p999 / m999 - 1) <= 0.10, (key, (p99, p999), (m99, m999))


def _client_batches_missing_from_the_log(trace: Path) -> int:
    """Batches the trace's producers saw acknowledged that the final log does not hold, counted without the
    pipeline: a client batch (partition, base offset, records, value bytes, acks) against the batch at that
    offset in the kafka-dump-log output (record count, summed value sizes, producer id -1 = acks=1)."""
    import csv
    import re

    logged, batch = {}, None
    for path in trace.glob("*/create-times/*.gz"):
        partition = int(re.search(r"-(\d+)\.txt\.gz$", path.name).group(1))
        for line in gzip.open(path, "rt"):
            if line.startswith("baseOffset: "):
                m = re.match(r"baseOffset: (\d+) lastOffset: \d+ count: (\d+) .*producerId: (-?\d+)", line)
                batch = (partition, int(m.group(1)))
                logged[batch] = [int(m.group(2)), m.group(3) == "-1", 0]
            elif line.startswith("| offset: "):
                logged[batch][2] += int(re.search(r"valueSize: (\d+)", line).group(1))
    missing = 0
    for path in trace.glob("*/client/batches-*.csv.gz"):
        for r in csv.DictReader(gzip.open(path, "rt")):
            found = logged.get((int(r["partition"]), int(r["base_offset"])))
            missing += found != [int(r["records"]), r["acks"] == "1", int(r["value_bytes"])]
    return missing


def test_a_leader_crash_loses_what_the_brokers_logs_say_within_the_replays_range(corpus_run):
    """Kafka 4.4.0, two leader crashes (lab.record_trace --crashes 2 --acks1-share 0.5 --session-timeout-ms
    6000 --leader-down-s 8 --seed 46): both followers of a partition paused for 1.5 s, its leader SIGKILLed
    1 s into the pause, restarted 8 s later. Every acks=1 batch the leader acknowledged meanwhile is lost
    when a follower is elected (the restarted broker truncates to the new leader's log).

    Ground truth, without the pipeline: 162 batches the producers saw acknowledged are not in the final
    log. The pipeline finds the same 162 from the brokers' logs alone (each new epoch's start offset in
    state-change.log against the old leader's acknowledged produces; transforms.failovers), on six
    leader changes (the second crash killed the leader of four partitions). The replay's follower
    timeline bounds each from both sides: at most what the new leader had not reported in its last FETCH
    (one batch more on two of them: it had appended the response that carried the batch at the offset
    it reported), at least what the old leader appended after it answered the new leader's last FETCH
    request (equal to the truth on all six: the second crash's pair shows that an answer is built at the
    old leader's first append on any partition of the fetch session, partition 0's 12,600, which is why
    partition 4's 13,576, appended 12 ms later, was not carried)."""
    assert _client_batches_missing_from_the_log(CRASH_TRACE) == 162
    rows = [
        (f["partition"], f["old_epoch"], f["old_leader"], f["new_leader"], f["new_start_offset"],
         f["replayed_held_offset"], f["acked_batches_truncated"], f["acked_batches_replayed_lost_min"],
         f["acked_batches_replayed_lost_max"], f["acked_all_batches_truncated"])
        for f in corpus_run.failovers if f["cluster"] == "lab-4.4.0-crash" and f["topic"] == "ackreplay-lab"
    ]  # fmt: skip
    assert sorted(rows) == [
        (0, 0, 1, 2, 11_195, 11_194, 24, 24, 25, 0),
        (0, 1, 2, 1, 12_601, 12_600, 29, 29, 30, 0),
        (1, 0, 2, 3, 9_832, 9_831, 26, 26, 26, 0),
        (4, 0, 1, 2, 12_056, 12_056, 32, 32, 32, 0),
        (4, 1, 2, 1, 13_576, 13_576, 28, 28, 28, 0),
        (5, 0, 2, 3, 10_457, 10_457, 23, 23, 23, 0),
    ]
    assert sum(r[6] for r in rows) == 162


def test_every_trace_loses_the_acknowledged_batches_its_logs_say_within_the_replays_range(corpus_run):
    """On every corpus trace with client logs, the acknowledged batches missing from the final log (client
    logs against kafka-dump-log, without the pipeline) are those the brokers' logs say each leader change
    cut, and the replay's range contains each leader change's figure. Besides the crashes, controlled
    shutdowns lose acks=1 batches too: the old leader appends and acknowledges until it learns it is no
    longer the leader, and the new leader starts from its own log end (trace-4.4.0-utc: 2 and 1 batches,
    where the range is 0 to 2 and 0 to 1: the new leader had stopped fetching before it appended the
    last answer; pair-4.3.1-acks-1: 1 batch; trace-4.0.2-saopaulo: 2, besides its crash's 43 and 26). The
    old leader appends those after the new leader logged its epoch's start, until it logs its own
    "Follower ... starts" line (Partition.makeFollower): placed by the new leader's line they fell
    outside every epoch and the brokers' logs gave 69 of the 4.0.2 trace's 71."""
    traces = {
        "pair-acks-1": PAIR["acks=1"], "pair-acks-all": PAIR["acks=all"], "lab-3.6.2": VERSION_TRACES["lab-3.6.2"],
        "lab-3.7.2": VERSION_TRACES["lab-3.7.2"], "lab-3.8.1": VERSION_TRACES["lab-3.8.1"],
        "lab-4.0.2": VERSION_TRACES["lab-4.0.2"], "lab-4.2.2": VERSION_TRACES["lab-4.2.2"],
        "lab-4.4.0": VERSION_TRACES["lab-4.4.0"], "lab-4.4.0-us": VERSION_TRACES["lab-4.4.0-us"],
        "lab-4.4.0-crash": CRASH_TRACE,
    }  # fmt: skip
    lost = {cluster: _client_batches_missing_from_the_log(trace) for cluster, trace in traces.items()}
    assert lost == {
        "pair-acks-1": 1, "pair-acks-all": 0, "lab-3.6.2": 0, "lab-3.7.2": 0, "lab-3.8.1": 0, "lab-4.0.2": 71, "lab-4.2.2": 0, "lab-4.4.0": 3,
        "lab-4.4.0-us": 0, "lab-4.4.0-crash": 162,
    }  # fmt: skip
    from_logs = {cluster: 0 for cluster in traces}
    for f in corpus_run.failovers:  # the ProducerPerformance traces have no client logs: checked by the range only
        if f["cluster"] in from_logs:
            from_logs[f["cluster"]] += f["acked_batches_truncated"]
        assert (
            f["acked_batches_replayed_lost_min"] <= f["acked_batches_truncated"] <= f["acked_batches_replayed_lost_max"]
        ), f
    assert from_logs == lost


def test_acks_all_held_below_min_isr_is_acknowledged_when_the_isr_is_whole_again(spark, corpus_run):
    """Kafka 4.4.0 with min.insync.replicas 3 = RF (manifest.json has the command): the controlled shutdown
    of broker 1 left every ISR at [2, 3] (broker 1 in the ELR, KIP-966) for 28.5 s. Kafka >= 3.7 does not
    advance the HW while the ISR is below min ISR, so the acks=all requests appended just before the
    shrink waited until broker 1 rejoined (Partition.maybeIncrementLeaderHW; the replay's strict_min_isr)
    and were acknowledged then, 28.5 s later: the replay gives each within 0.3 ms. No produce was rejected
    (NOT_ENOUGH_REPLICAS): the producer's requests in flight were all held, so it sent none while the ISR
    was short, and the replay rejects none of the appended ones either.

    The trace's ack ground truth is 97.69% within 2 ms, below the other 4.4.0 traces: it was recorded on a
    machine whose core is about 2.5 times slower, where the followers' FETCH handling took 2-3 times
    longer (local time P90 1.03 ms, P99 5.1 ms against 0.41 and 1.6 ms on trace-4.4.0-utc), and the
    replay places a follower's LEO inside that time (README, "Ground truth")."""
    from ackreplay.replay.self_check import truth_rows

    check = corpus_run.self_check["minisr3-4.4.0"]
    assert (check.n, round(check.within_2ms, 4), round(check.p999_replayed_ms, 1), round(check.p999_observed_ms, 1),
            check.passed) == (10_377, 0.9769, 444.1, 444.0, True)  # fmt: skip
    truth = truth_rows(read_table(spark, corpus_run.lakehouse, "produce_replay")).where("cluster = 'minisr3-4.4.0'")
    held = truth.where("observed_wait_ms > 20000").select("observed_wait_ms", "err_ms").collect()
    assert len(held) == 3 and all(28_400 < r["observed_wait_ms"] < 28_500 and r["err_ms"] <= 0.3 for r in held)
    produce = read_table(spark, corpus_run.lakehouse, "produce_requests").where("cluster = 'minisr3-4.4.0'")
    assert produce.where("error_code = 19").count() == 0
    # the corpus's real rejections are the 3.6.2 trace's (test_real_rejections_of_keyless_producers_...)
    assert corpus_run.rejections == {"rejected": 682, "rejected_replayed": 681}
    replay = read_table(spark, corpus_run.lakehouse, "produce_replay").where("cluster = 'minisr3-4.4.0'")
    assert replay.where("policy = 'acks=all' AND recorded_acks = -1 AND outcome = 'not_enough_replicas'").count() == 0
    # what the acks=1 producer appended while the ISR was short, acks=all would have rejected
    assert (
        replay.where("policy = 'acks=all' AND recorded_acks = 1 AND outcome = 'not_enough_replicas'").count() == 1_346
    )


# cluster -> acks=all's (rejections, of them real, rerouted had the records no key, no writable partition s)
ROUTING_FIGURES = {
    "lab-3.6.2": (1_171, 682, 1_171, 0.0),
    "lab-3.7.2": (0, 0, 0, 0.0),
    "lab-3.8.1": (0, 0, 0, 0.0),
    "lab-4.0.2": (0, 0, 0, 0.0),
    "lab-4.2.2": (1, 0, 1, 0.0),
    "lab-4.4.0": (1, 0, 1, 0.0),
    "lab-4.4.0-crash": (0, 0, 0, 0.0),
    "lab-4.4.0-us": (0, 0, 0, 0.0),
    "minisr3-4.4.0": (1_346, 0, 75, 28.3),
    "pair-acks-1": (0, 0, 0, 0.0),
    "pair-acks-all": (0, 0, 0, 0.0),
    "perf-acks-1": (0, 0, 0, 0.0),
    "perf-acks-all": (0, 0, 0, 0.0),
    "perf-fast-4.4.0": (0, 0, 0, 0.0),
    "perf-fast-4.4.0-acks-1": (4, 0, 4, 0.0),
}


def test_routing_around_partitions_below_min_isr_on_every_corpus_trace(spark, corpus_run):
    """KIP-637's what-if (gold `routing`, computed here from the module's tables with every topic taken as
    keyless: keyed records would all be held). The keyless 3.6.2 trace's are checked in
    test_real_rejections_of_keyless_producers_and_what_kip_637_would_have_done. minisr3 (min ISR 3 = RF): 1,346 batches
    acks=all would have rejected, none a real NOT_ENOUGH_REPLICAS answer (the acks=all producer's requests were
    held, README "Routing around partitions below min ISR"); 75 could have moved to a partition writable
    then, saving 115 s of waiting, and for 28.3 s no partition was writable. The 4.2.2 and 4.4.0 traces have one
    rejection each (an acks=1 produce appended while its ISR was short), which another partition could have
    taken; the other traces reject nothing."""
    from ackreplay.gold.stage import build_gold

    lakehouse = corpus_run.lakehouse
    frames = build_gold(
        read_table(spark, lakehouse, "produce_replay"),
        read_table(spark, lakehouse, "partitions"),
        read_table(spark, lakehouse, "isr_changes"),
        "minute",
        "keyless",
        produce_requests=read_table(spark, lakehouse, "produce_requests"),
        keyless=F.lit(True),
    )
    totals = (
        frames["routing"]
        .filter("policy = 'acks=all'")
        .groupBy("cluster")
        .agg(
            *[F.sum(c).alias(c) for c in ("rejections", "recorded_rejections", "rerouted", "held", "saved_wait_ms")],
            (F.sum("no_writable_ms") / 1000).alias("no_writable_s"),
        )
        .collect()
    )
    figures = {
        r["cluster"]: (r["rejections"], r["recorded_rejections"], r["rerouted"], round(r["no_writable_s"], 1))
        for r in totals
    }
    assert figures == ROUTING_FIGURES
    (minisr3,) = [r for r in totals if r["cluster"] == "minisr3-4.4.0"]
    assert (minisr3["held"], round(minisr3["saved_wait_ms"] / 1000, 1)) == (1_271, 115.0)


# policy -> (rejections, real ones, rerouted, held, never writable, real rejected batches, real rejections with
# no retry in the logs, wait saved s, the real batches' wait as measured s and as modelled s, no writable s)
KEYLESS_TRACE_ROUTING = {
    "acks=all": (1_171, 682, 1_171, 0, 0, 17, 0, 4_498.45, 159.08, 157.13, 0.0),
    "min.insync": (1_171, 682, 1_171, 0, 0, 17, 0, 4_498.45, 159.08, 157.13, 0.0),
    # the ISR re-simulated at the cluster's own 3 s: the replay's own verdicts at each append (the real answers
    # count under the recorded ISR only): 488 rejections where acks=all has 489 besides the real ones, 2% less wait
    # saved, each with another partition accepted around it
    "acks=all@lag=3000": (488, 0, 488, 0, 0, 0, 0, 4_254.35, 0.0, 0.0, 0.0),
}


def test_real_rejections_of_keyless_producers_and_what_kip_637_would_have_done(spark, corpus_run):
    """Kafka 3.6.2, RF 2 and min.insync.replicas 2, keyless lab producers (data/corpus/keyless-rf2-3.6.2-kolkata,
    manifest.json has the command): a broker paused past the lag limit, and later shut down and restarted,
    took the partitions it replicates below min ISR while the others stayed writable, and the brokers
    answered 682 acks=all requests NOT_ENOUGH_REPLICAS. The replay rejects 681 of them, and no appended
    acks=all produce (the self-check's "0 not acked"). The one it misses was dequeued at 12:13:36.8397 and
    answered at .8556 (16 ms of local time); partition 1's expansion was committed in between, at .848
    (Partition.appendRecordsToLeader checks the ISR when the append starts; the replay checks it when the
    local handling ended). The replay applies Kafka 3.6's rule, under which the HW advances below min ISR
    (replay.strict_min_isr auto, from the brokers' "Kafka version: 3.6.2").

    Gold routing with conf/local.yaml's `partitioning: auto`, which takes the cluster's records as keyless from its
    kafka-dump-log output (every record's keySize -1): the rejected batches that could
    have gone to a partition writable then, what they waited, and the producers' retries as measured. Every one
    of the 1,171 rejections (the 682 real ones, and 489 acks=1 batches acks=all would have rejected) had another
    partition writable (RF 2: the partitions the paused broker does not replicate), 1.66 MB in all. The 682
    real answers were 17 batches, each retried every retry.backoff.ms until its partition was writable again
    and then appended: 159.08 s from their first rejections to the retries' acks, where the model says 157.13 s
    (until writable again); a KIP-637 producer would have sent them, and the acks=1 producer's 489, elsewhere,
    saving 4,498 s of waiting in the producers' buffers. Under acks=all@lag=3000, the ISR the replay re-simulates at
    the cluster's own lag, the same holds for its own 488 rejections."""
    from ackreplay.gold.stage import build_gold, keyless_in_records, keyless_topics

    check = corpus_run.self_check["lab-3.6.2"]
    assert (check.n, check.not_acked, check.passed) == (10_122, 0, True)
    lakehouse = corpus_run.lakehouse
    in_trace = F.col("cluster") == "lab-3.6.2"
    frames = build_gold(
        read_table(spark, lakehouse, "produce_replay").where(in_trace),
        read_table(spark, lakehouse, "partitions").where(in_trace),
        read_table(spark, lakehouse, "isr_changes").where(in_trace),
        "minute",
        "keyless",
        produce_requests=read_table(spark, lakehouse, "produce_requests").where(in_trace),
        keyless=keyless_topics(
            load_config(SAMPLE_CONF),
            keyless_in_records(read_table(spark, lakehouse, "batch_send_times").where(in_trace)),
        ),
    )
    columns = ("rejections", "recorded_rejections", "rerouted", "held", "never_writable", "recorded_batches",
               "recorded_unlinked")  # fmt: skip
    totals = {
        r["policy"]: (
            *(r[c] for c in columns),
            round(r["saved_wait_ms"] / 1000, 2),
            round(r["recorded_wait_ms"] / 1000, 2),
            round(r["recorded_model_wait_ms"] / 1000, 2),
            round(r["no_writable_ms"] / 1000, 1),
        )
        for r in frames["routing"]
        .groupBy("policy")
        .agg(
            *[
                F.sum(c).alias(c)
                for c in (*columns, "saved_wait_ms", "recorded_wait_ms", "recorded_model_wait_ms", "no_writable_ms")
            ]
        )  # fmt: skip
        .collect()
    }
    assert totals == KEYLESS_TRACE_ROUTING


def test_partitioning_auto_reads_whether_records_have_keys_from_every_corpus_dump(spark, corpus_run):
    """Every corpus trace's kafka-dump-log output prints each record's keySize: ProducerPerformance's records
    (the perf traces) and the keyless lab producers' (3.6.2) have none, the lab's other producers draw one of
    1,000 keys. `partitioning: auto` (the default) takes that for KIP-637's what-if."""
    from ackreplay.gold.stage import keyless_in_records

    keyless = {"lab-3.6.2", "perf-acks-1", "perf-acks-all", "perf-fast-4.4.0", "perf-fast-4.4.0-acks-1"}
    keyed = {"lab-3.7.2", "lab-3.8.1", "lab-4.0.2", "lab-4.2.2", "lab-4.4.0", "lab-4.4.0-crash",
             "lab-4.4.0-us", "minisr3-4.4.0", "pair-acks-1", "pair-acks-all"}  # fmt: skip
    seen = keyless_in_records(read_table(spark, corpus_run.lakehouse, "batch_send_times"))
    assert seen == {(c, "ackreplay-lab"): c in keyless for c in keyless | keyed}


# cluster -> (how its records were taken, the longest time a leader of its produces did not run, s)
LEADER_SILENCES = {
    # the lab trace's longest: a broker's controlled shutdown and restart (its 8 s stall is the next longest)
    "perf-fast-4.4.0": ("keyless", 9.5), "perf-fast-4.4.0-acks-1": ("keyless", 9.6), "lab-4.4.0": ("keyed", 24.3),
}  # fmt: skip


# cluster -> (commits whose printed eligible leader replicas Kafka's rule derives, commits that print them and
# follow the partition's previous commit in the logs, those that follow a commit no line shows)
PRINTED_ELR = {
    "lab-4.2.2": (184, 184, 0), "lab-4.4.0": (190, 190, 0), "lab-4.4.0-crash": (172, 172, 0),
    "lab-4.4.0-us": (186, 186, 37), "minisr3-4.4.0": (149, 149, 0), "pair-acks-1": (101, 101, 0),
    "pair-acks-all": (104, 104, 0), "perf-acks-1": (18, 18, 0), "perf-acks-all": (18, 18, 0),
    "perf-fast-4.4.0": (16, 16, 0), "perf-fast-4.4.0-acks-1": (21, 21, 0),
}  # fmt: skip


def _per_record_quantiles(
    spark, lakehouse: str, policy: str, client_id: str, cluster: str = "lab-3.6.2"
) -> list[float]:
    """P50, P99, P999 of a trace's records of one producer replayed under `policy`, ms."""
    from ackreplay.gold.stage import read_record_sends
    from ackreplay.transforms.gold import latency_quantiles

    in_trace = F.col("cluster") == cluster
    requests = read_table(spark, lakehouse, "produce_requests").where(in_trace)
    replay = (
        read_table(spark, lakehouse, "produce_replay")
        .where(in_trace & (F.col("policy") == policy))
        .join(requests.select("source_file", "line_number", "partition", "client_id"),
              ["source_file", "line_number", "partition"])
        .where(F.col("client_id") == client_id)
    )  # fmt: skip
    sends = read_record_sends(spark, lakehouse, in_trace)
    rows = latency_quantiles(replay, [0.5, 0.99, 0.999], sends, linger_ms=5.0).orderBy("q").collect()
    return [round(r["latency_ms"], 1) for r in rows]


def _measured_per_record(client_id: str, trace: Path = VERSION_TRACES["lab-3.6.2"]) -> list[float]:
    """P50, P99, P999 the producer `client_id` of a trace measured per record (CreateTime to the ack its callback
    saw), ms."""
    import csv

    import numpy as np

    created = _create_times(trace)
    [client] = trace.glob(f"*/client/batches-{client_id}.csv.gz")
    batches = list(csv.DictReader(gzip.open(client, "rt")))
    per_record = [
        int(b["ack_us"]) / 1000 - created[(int(b["partition"]), offset)]
        for b in batches
        for offset in range(int(b["base_offset"]), int(b["base_offset"]) + int(b["records"]))
    ]
    return np.round(np.percentile(per_record, [50, 99, 99.9]), 1).tolist()


def test_rejected_batches_under_acks_1_against_the_acks_1_producer_of_the_same_faults(spark, corpus_run):
    """The keyless 3.6.2 trace's acks=all producer had 17 batches rejected (NOT_ENOUGH_REPLICAS) for up to 16 s
    and 65 batches held behind them in its RecordAccumulator. acks=1 does not check min ISR: replayed under it,
    each rejected batch is appended at its first attempt and the held ones leave once they have lingered
    (groups._admitted_attempts, retry_episodes). Its records then wait what the acks=1 producer that ran on the
    same brokers through the same stalls and shutdown measured, P99 and P999 within 10% (two producers of
    different load: not the same number). Before the rule its acks=1 P99 was 14,995 ms, the retries kept."""
    replayed = _per_record_quantiles(spark, corpus_run.lakehouse, "acks=1", "lab-producer-acks-all")
    assert replayed == [4.5, 3_422.8, 6_307.9]
    measured = _measured_per_record("lab-producer-acks-1")
    assert measured == [6.2, 3_662.3, 5_801.3]
    assert abs(replayed[1] / measured[1] - 1) <= 0.10 and abs(replayed[2] / measured[2] - 1) <= 0.10


def test_batches_acks_all_rejects_are_retried_against_the_acks_all_producer_of_the_same_faults(spark, corpus_run):
    """The reverse: the keyless 3.6.2 trace's acks=1 producer's batches the brokers appended while the ISR was
    below min ISR are rejected under acks=all; its Java 3.6.2 client would retry each every retry.backoff.ms and
    hold what it created meanwhile behind it (ackreplay/replay/retries.py, rules from the client's source).
    Replayed so, its records wait what the acks=all producer that ran on the same brokers through the same
    faults measured, P50, P99 and P999 within 5% (two producers of different load). Counted as rejections and
    left out of the latency, as before the rule, its acks=all P99 was 4,170 ms."""
    replayed = _per_record_quantiles(spark, corpus_run.lakehouse, "acks=all", "lab-producer-acks-1")
    assert replayed == [6.6, 15_052.6, 16_406.0]
    measured = _measured_per_record("lab-producer-acks-all")
    assert measured == [6.3, 15_006.5, 16_567.6]
    assert all(abs(r / m - 1) <= 0.05 for r, m in zip(replayed, measured, strict=True))
    # every rejected batch delivered: nothing left out of the latency
    # 489 rejected at append under each, and under acks=all 88 answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (3.6)
    rejected = F.col("outcome").isin("not_enough_replicas", "not_enough_replicas_after_append")
    undelivered = (
        read_table(spark, corpus_run.lakehouse, "produce_replay")
        .where((F.col("cluster") == "lab-3.6.2") & F.col("policy").isin("acks=all", "min.insync"))
        .agg(F.count_if(rejected & F.col("latency_ms").isNull()), F.count_if(rejected))
        .first()
    )
    assert tuple(undelivered) == (0, 489 + 88 + 489)


def test_batches_acks_all_rejects_on_a_4_4_cluster_below_min_isr_against_its_acks_all_producer(spark, corpus_run):
    """The same on the min-ISR-3 trace (Kafka 4.4.0 clients: KIP-580's exponential back-off, 100 ms doubling to
    1 s): the controlled shutdown left every ISR below min ISR for 28.5 s; the acks=all producer's requests in
    flight were held that long (3.7+ holds the HW below min ISR), the acks=1 producer kept sending, and acks=all
    rejects 1,346 of its batches. Retried, its records wait what the acks=all producer measured, P99 and P999
    within 1%. (P50 is each producer's own: the acks=all one waited ~100 ms per batch on that slower machine.)
    Left out of the latency, as before the rule, that P99 was 7,842 ms."""
    replayed = _per_record_quantiles(spark, corpus_run.lakehouse, "acks=all", "lab-producer-acks-1", "minisr3-4.4.0")
    assert replayed == [74.6, 28_138.9, 29_206.5]
    measured = _measured_per_record("lab-producer-acks-all", MIN_ISR_TRACE)
    assert measured == [112.0, 28_281.2, 29_145.3]
    assert all(abs(r / m - 1) <= 0.01 for r, m in zip(replayed[1:], measured[1:], strict=True))


def test_a_backlog_after_a_long_hold_drains_under_a_faster_policy(spark, corpus_run):
    """The min-ISR-3 trace's acks=all producer had its requests held 28.5 s (the HW held below min ISR), and its
    records piled up behind them. Under acks=1 those requests are answered at once and the backlog drains: the
    connection's next requests (read 0.2 to 1.3 ms after each response on that slow core, one right after a
    replay-bucket boundary) leave once their first batch lingered, the batches created later in later requests
    (connections._leave_with_the_first_batch). Its records then wait what the acks=1 producer of the same run
    measured, P99 and P999 within 2%. Before, the chain broke at the 1.3 ms turnaround and at the bucket
    boundary: P99 27,650.6 ms (+429%)."""
    replayed = _per_record_quantiles(spark, corpus_run.lakehouse, "acks=1", "lab-producer-acks-all", "minisr3-4.4.0")
    assert replayed == [5.7, 5_294.5, 7_874.7]
    measured = _measured_per_record("lab-producer-acks-1", MIN_ISR_TRACE)
    assert measured == [7.6, 5_223.8, 7_892.4]
    assert all(abs(r / m - 1) <= 0.02 for r, m in zip(replayed[1:], measured[1:], strict=True))


def test_eligible_leader_replicas_where_the_cluster_keeps_them(corpus_run):
    """KIP-966: the brokers of every 4.1+ trace announce `eligible.leader.replicas.version` 1 as finalized in their
    API_VERSIONS responses (3.7.2, 3.8.1 and 4.0.2 list finalized features without it), and on every 4.2+ trace Kafka's
    rule (PartitionChangeBuilder.maybePopulateTargetElr), applied to the committed ISRs in time order, derives the
    eligible replicas each registration line prints, on every commit that prints them and follows the
    partition's previous commit in the logs: 1,122 of 1,122. On trace-4.4.0-utc-micros 37 printed commits
    follow one no line shows (a skipped partition epoch: two changes applied at once, the last logged), and
    the rule, seeing the two as one, differs on 4 of them (the lab stopping brokers 1 and 2 at the end;
    README, "Loss as a range")."""
    settings = corpus_run.elr
    assert sorted(c for c, s in settings.items() if not s.enabled) == [
        "lab-3.6.2",
        "lab-3.7.2",
        "lab-3.8.1",
        "lab-4.0.2",
    ]
    assert settings["minisr3-4.4.0"].evidence == "state-change.log registrations list eligible leader replicas"
    assert (
        settings["lab-3.7.2"].evidence
        == "brokers announce eligible.leader.replicas.version 0 in API_VERSIONS responses"
    )
    printed = {c: (s.derived_equal, s.printed, s.after_gap) for c, s in settings.items() if s.printed}
    assert printed == PRINTED_ELR


def test_the_ground_truth_by_window_of_every_corpus_trace(spark, corpus_run):
    """The self-check's figures per trace and per window (the 15 s after a leader change, an ISR expansion or
    an ISR shrink of the produce's partition, or "quiet": ackreplay/replay/self_check.py), on every corpus
    trace in the module's run: the project's bar is 98% within 2 ms in every window with 500 produces or
    more. Where it is not met (listed in BELOW_THE_BAR) the misses are the FETCH LEO placement inside a slow
    local time (README, "Ground truth"), not tuned away. Reads the module's corpus run."""
    from ackreplay.replay.self_check import _figures, truth_rows, with_window

    truth = truth_rows(read_table(spark, corpus_run.lakehouse, "produce_replay"))
    rows = _figures(with_window(truth, read_table(spark, corpus_run.lakehouse, "isr_changes")), ["cluster", "window"])
    figures = {(r["cluster"], r["window"]): (r["n"], round(r["within_2ms"], 4)) for r in rows}
    assert figures == EXPECTED_WINDOW_FIGURES
    below = {key for key, (n, within) in figures.items() if n >= 500 and within < 0.98}
    assert below == BELOW_THE_BAR


# (n, within 2 ms) per corpus trace and window of the self-check, measured 2026-11-29 (the module's corpus run
# inside make test). n counts the recorded acks=all produces with the broker's ack in that window.
EXPECTED_WINDOW_FIGURES = {
    ("lab-3.6.2", "after an ISR expansion"): (1_827, 0.9984),
    ("lab-3.6.2", "after an ISR shrink"): (1, 1.0),
    ("lab-3.6.2", "quiet"): (8_294, 0.9982),
    ("lab-3.7.2", "after a leader change"): (1_223, 0.9959),
    ("lab-3.7.2", "after an ISR expansion"): (4_642, 0.9985),
    ("lab-3.7.2", "after an ISR shrink"): (3_141, 0.9990),
    ("lab-3.7.2", "quiet"): (8_837, 0.9978),
    ("lab-3.8.1", "after a leader change"): (3_325, 0.9913),
    ("lab-3.8.1", "after an ISR expansion"): (7_083, 0.9973),
    ("lab-3.8.1", "after an ISR shrink"): (3_422, 0.9944),
    ("lab-3.8.1", "quiet"): (10_727, 0.9966),
    ("lab-4.0.2", "after a leader change"): (974, 0.9959),
    ("lab-4.0.2", "after an ISR expansion"): (2_346, 0.9966),
    ("lab-4.0.2", "after an ISR shrink"): (1_143, 0.9939),
    ("lab-4.0.2", "quiet"): (6_566, 0.9998),
    ("lab-4.2.2", "after a leader change"): (3_100, 0.9945),
    ("lab-4.2.2", "after an ISR expansion"): (7_482, 0.9969),
    ("lab-4.2.2", "after an ISR shrink"): (3_670, 0.9975),
    ("lab-4.2.2", "quiet"): (10_430, 0.9988),
    ("lab-4.4.0", "after a leader change"): (3_221, 0.9938),
    ("lab-4.4.0", "after an ISR expansion"): (7_097, 0.9979),
    ("lab-4.4.0", "after an ISR shrink"): (3_685, 0.9940),
    ("lab-4.4.0", "quiet"): (10_757, 0.9977),
    ("lab-4.4.0-crash", "after a leader change"): (1_018, 0.9912),
    ("lab-4.4.0-crash", "after an ISR expansion"): (4_070, 0.9985),
    ("lab-4.4.0-crash", "after an ISR shrink"): (1_010, 0.9980),
    ("lab-4.4.0-crash", "quiet"): (10_623, 0.9994),
    ("lab-4.4.0-us", "after a leader change"): (2_486, 0.9912),
    ("lab-4.4.0-us", "after an ISR expansion"): (5_018, 0.9972),
    ("lab-4.4.0-us", "after an ISR shrink"): (2_528, 0.9976),
    ("lab-4.4.0-us", "quiet"): (8_161, 0.9975),
    ("minisr3-4.4.0", "after an ISR expansion"): (5_287, 0.9714),
    ("minisr3-4.4.0", "quiet"): (5_090, 0.9825),
    ("pair-acks-all", "after a leader change"): (1_234, 0.9992),
    ("pair-acks-all", "after an ISR expansion"): (6_516, 0.9985),
    ("pair-acks-all", "after an ISR shrink"): (2_814, 0.9979),
    ("pair-acks-all", "quiet"): (11_106, 0.9985),
    ("perf-acks-all", "after a leader change"): (597, 1.0),
    ("perf-acks-all", "after an ISR expansion"): (2_989, 0.9977),
    ("perf-acks-all", "after an ISR shrink"): (1_409, 0.9972),
    ("perf-acks-all", "quiet"): (5_256, 0.9987),
    ("perf-fast-4.4.0", "after a leader change"): (1_602, 0.9994),
    ("perf-fast-4.4.0", "after an ISR expansion"): (7_152, 0.9986),
    ("perf-fast-4.4.0", "after an ISR shrink"): (3_511, 0.9994),
    ("perf-fast-4.4.0", "quiet"): (13_608, 0.9988),
}
# The one window under the bar: the min-ISR-3 trace, recorded on a core 2.5 times slower, whose followers'
# FETCH handling took 2-3 times longer (test_acks_all_held_below_min_isr_is_acknowledged_when_the_isr_is_whole_again).
BELOW_THE_BAR = {("minisr3-4.4.0", "after an ISR expansion")}


def test_the_isr_resimulated_at_each_traces_own_lag_acks_as_its_recorded_isr(corpus_run):
    """Issue 21's consistency rule on every corpus trace, as the self-check applies it to every run: the ISR
    re-simulated from the followers' LEO timelines at the replica.lag.time.max.ms the brokers logged at start
    (3, 5, 10 and 30 s here, `broker_configs`) acks the produces the recorded ISR acks within 2 ms (>= 98%)
    and with the same P999 of ack wait (within 10%). Per cluster: (lag, produces, within 2 ms, P999
    re-simulated and recorded in ms, passed). Reads the module's corpus run."""
    figures = {
        cluster: (
            c.isr["lag_ms"], c.isr["n"], round(c.isr["within_2ms"], 4), round(c.isr["p999_resimulated_ms"], 1),
            round(c.isr["p999_recorded_ms"], 1), c.passed,
        )
        for cluster, c in corpus_run.self_check.items()
    }  # fmt: skip
    assert figures == EXPECTED_ISR_FIGURES


# measured 2026-11-30. Before the leaders' silences counted every request-log line, pair-acks-all and perf-acks-all
# failed here (P999 88.1 vs 78.4 ms, 61.0 vs 50.9 ms): their leaders logged only empty incremental FETCHes
# while the acks=all producer was held by the stalled follower, looked paused, and checked 98 ms late. Before a
# re-simulated shrink proposed in the run that logged the partition's own proposal committed when the log says
# (the broker's one AlterPartition request in flight: README "The replay checks itself"), a shrink queued behind
# another partition's took that one's round trip: 98.35-99.96% within 2 ms, P999 up to 0.8% low (3.7.2 98.6%,
# 12,865.8 ms), and the perf-fast acks=1 trace failed (96.26%). Before the re-simulation counted an ISR-eligible,
# caught-up follower in the HW on leaders that logged no "Shrinking ISR" (2026-12-07), 4.0.2 was at 99.88% (its
# restarted brokers, re-added only at their FETCH that reached the HW), perf-acks-1 99.88%, perf-fast 99.66%.
EXPECTED_ISR_FIGURES = {
    "lab-3.6.2": (3000.0, 13_461, 1.0, 241.5, 241.5, True),
    "lab-3.7.2": (10000.0, 21_619, 1.0, 12894.2, 12894.2, True),
    "lab-3.8.1": (5000.0, 29_818, 1.0, 5858.3, 5858.3, True),
    "lab-4.0.2": (30000.0, 22_433, 1.0, 3067.7, 3067.7, True),
    "lab-4.2.2": (5000.0, 29_941, 0.9975, 4606.7, 4606.4, True),
    "lab-4.4.0": (5000.0, 30_029, 0.9974, 5093.9, 5093.9, True),
    "lab-4.4.0-crash": (5000.0, 34_667, 0.9932, 4359.9, 4359.9, True),
    "lab-4.4.0-us": (5000.0, 21_721, 0.996, 5419.2, 5419.2, True),
    "minisr3-4.4.0": (5000.0, 12_932, 0.9842, 7840.9, 7822.1, True),
    "pair-acks-1": (3000.0, 22_927, 0.9984, 4208.0, 4208.0, True),
    "pair-acks-all": (3000.0, 21_670, 0.9993, 78.4, 78.4, True),
    "perf-acks-1": (3000.0, 10_717, 0.999, 3889.0, 3889.0, True),
    "perf-acks-all": (3000.0, 10_251, 0.9992, 50.9, 50.9, True),
    "perf-fast-4.4.0": (6000.0, 25_873, 0.9967, 43.6, 43.6, True),
    "perf-fast-4.4.0-acks-1": (6000.0, 28_253, 0.9972, 6718.0, 6717.8, True),
}


def _dump_records(spark, trace: Path, cluster: str, ranges: list):
    """What Spark's Kafka source returns for `ranges` (topic, partition, first offset, end offset) of the
    trace's topic as it was when recorded: every record line of its kafka-dump-log output (partition,
    offset, CreateTime), with the Kafka source's columns."""
    text = spark.read.text(str(next(trace.glob("*/create-times")))).withColumn("file", F.input_file_name())
    name = F.regexp_extract("file", r"/([^/]+)-(\d+)\.txt\.gz$", 1)
    records = text.where(F.col("value").startswith("| offset: ")).select(
        F.lit(cluster).alias("cluster"), name.alias("topic"),
        F.regexp_extract("file", r"-(\d+)\.txt\.gz$", 1).cast("int").alias("partition"),
        F.regexp_extract("value", r"^\| offset: (\d+)", 1).cast("bigint").alias("offset"),
        F.timestamp_millis(F.regexp_extract("value", r" CreateTime: (\d+)", 1).cast("bigint")).alias("timestamp"),
        F.lit(0).alias("timestampType"),
    )  # fmt: skip
    wanted = spark.createDataFrame(
        [(r["topic"], r["partition"], r["first_offset"], r["end_offset"]) for r in ranges],
        "topic string, partition int, first_offset bigint, end_offset bigint",
    )
    return (
        records.join(F.broadcast(wanted), ["topic", "partition"])
        .where((F.col("offset") >= F.col("first_offset")) & (F.col("offset") < F.col("end_offset")))
        .drop("first_offset", "end_offset")
    )


def test_send_times_read_from_the_topic_equal_the_dumps_batch_for_batch(spark, corpus_run, tmp_path):
    """The send-times step reading the topics themselves (Spark's Kafka source; here the records the
    trace's kafka-dump-log output lists, as the topic held them when recorded) on the leader-crash trace
    (SIGKILLed leaders: truncated batches, a retry a new leader answered from its duplicate check): every batch it gives a send time to has the dump's batch of the same epoch, with the
    same send time, and the same records and per-record send times wherever it counts them (all but each
    partition's last batch). The batches a leader change cut get none, as in the dump, which does not list them.
    One batch is named with a later epoch than the dump's: its acks=all response was an error (the leader
    changed while it waited), and the next leader answered the retry from its duplicate check with
    the first append's offset; that retry is the only produce without an error, and it gets the batch's
    first send time (its latency runs from the first attempt). Reads the module's corpus run."""
    import shutil

    from ackreplay.ingest.send_times import ingest_topic_send_times
    from ackreplay.storage.lakehouse import table_path
    from ackreplay.transforms.send_times import TRUNCATED

    lakehouse = str(tmp_path / "lakehouse")
    for name in ("produce_requests", "leader_epochs", "batch_send_times"):
        shutil.copytree(table_path(corpus_run.lakehouse, name), table_path(lakehouse, name))
    traces = {"lab-4.4.0-crash": CRASH_TRACE}  # the 4.2.2 trace gives the same (two retries): 29,942 batches, all equal
    config = recorded_policies_config()
    kafka = {"kafka.bootstrap.servers": "127.0.0.1:9"}  # never contacted: the stand-in reads the dumps
    config = config.model_copy(update={"clusters": {c: config.cluster(c).model_copy(update={"create_times_from_kafka": kafka})
                                                    for c in traces}})  # fmt: skip
    from ackreplay.storage.inputs import discover_all

    files = [f for f in discover_all([str(t) for t in traces.values()]).of_kind("request_log")]
    report = ingest_topic_send_times(
        spark,
        config,
        files,
        lakehouse,
        "topic-check",
        read_records=lambda cluster, options, ranges: _dump_records(spark, traces[cluster], cluster, ranges),
    )
    rows = read_table(spark, lakehouse, "batch_send_times").where(F.col("cluster").isin(list(traces)))
    topic, dump = rows.where("source = 'topic'").alias("t"), rows.where("source = 'create_time'").alias("d")
    joined = topic.join(dump, ["cluster", "topic", "partition", "base_offset"], "left")  # one surviving batch an offset
    same = (F.col("t.t_send") == F.col("d.t_send")) & (
        F.col("t.records").isNull() | ((F.col("t.records") == F.col("d.records"))
                                       & (F.to_json("t.record_sends") == F.to_json("d.record_sends"))))  # fmt: skip
    figures = joined.groupBy("cluster").agg(
        F.count("*").alias("rows"), F.sum(F.col("d.t_send").isNull().cast("int")).alias("not_in_dump"),
        F.sum((~same).cast("int")).alias("differ"), F.sum(F.col("t.records").isNotNull().cast("int")).alias("counted"),
        F.sum((F.col("t.leader_epoch") > F.col("d.leader_epoch")).cast("int")).alias("retried"),
        F.sum((F.col("t.leader_epoch") < F.col("d.leader_epoch")).cast("int")).alias("earlier_epoch"),
    ).orderBy("cluster").collect()  # fmt: skip
    # retried: a batch whose acks=all response was an error (the leader changed while it waited) and whose
    # retry the next leader answered from its duplicate check with the first append's offset: the only
    # produce without an error is the retry, so its epoch is named, and its latency runs from the first send
    assert [tuple(r) for r in figures] == [("lab-4.4.0-crash", 34_669, 0, 0, 34_663, 1, 0)]
    assert (report.partitions, report.batches, report.rows_written, report.problems) == (
        6,
        34_831,
        34_669,
        {TRUNCATED: 162},
    )


LEO_TRACES = {
    "leo-4.4.0": REPO / "data/corpus/leo-4.4.0-utc-micros",
    "leo-3.9.1": REPO / "data/corpus/leo-3.9.1-utc",
}


def test_the_leaders_own_lines_say_when_each_followers_offset_was_recorded(spark, tmp_path):
    """Two lab recordings with `kafka.cluster.Partition` at DEBUG (`lab.record_trace --leo-lines`, no consumer group, the
    same workload and faults; each manifest.json has its command): Kafka 4.4.0 with µs stamps and Kafka 3.9.1 with
    Kafka's ms stamps. Every "Recorded replica ... log end offset (LEO)" line of the leaders' server.log (counted here
    with gzip) is a `follower_leo_records` row, the replay places the follower LEOs at those lines instead of inside
    the FETCHes' local times, and reproduces the brokers' own acks: on 4.4.0 99.75% within 2 ms and 99.32% within 1 ms
    of 13,310, P999 of ack wait 110.9 vs 109.9 ms; on 3.9.1 99.61% and 97.56% of 13,425, 65.8 vs 66.1 ms. From the
    FETCH lines alone (the same lakehouses without the table) they were 99.69% / 99.20% / 110.4 ms and
    99.48% / 98.15% / 66.1 ms (README "Ground truth": on ms stamps the two stamps' cuts, not the placement, bound
    "within 1 ms"). Its own ingest and replay of both (about 3 minutes): the corpus run's tests read every other
    trace's figures, and these are not there."""
    from ackreplay.ingest.stage import run_ingest
    from ackreplay.replay.self_check import truth_rows
    from ackreplay.replay.stage import run_replay

    lines = {
        cluster: sum(
            gzip.decompress(p.read_bytes()).count(b"] Recorded replica ") for p in trace.glob("*/broker-*/server.log*")
        )
        for cluster, trace in LEO_TRACES.items()
    }
    assert lines == {"leo-4.4.0": 175_472, "leo-3.9.1": 170_796}
    config = recorded_policies_config()
    lakehouse = str(tmp_path / "lakehouse")
    ingest = run_ingest(spark, config, [str(trace) for trace in LEO_TRACES.values()], lakehouse)
    assert ingest.broker_logs.rows_written["follower_leo_records"] == sum(lines.values())
    assert ingest.broker_logs.server_log.quarantined == 0
    report = run_replay(spark, config, lakehouse, ingest.clusters, run_id="leo")
    assert report.recorded_leo_lines == lines
    figures = {
        truth.cluster: (
            truth.n,
            round(truth.within_2ms, 4),
            round(truth.p999_replayed_ms, 1),
            round(truth.p999_observed_ms, 1),
        )
        for truth in report.self_check.clusters
    }
    assert [truth.cluster for truth in report.self_check.clusters if not truth.passed] == []
    assert figures == {"leo-4.4.0": (13_310, 0.9979, 110.9, 109.9), "leo-3.9.1": (13_425, 0.9961, 65.8, 66.1)}
    within_1ms = (
        truth_rows(read_table(spark, lakehouse, "produce_replay"))
        .groupBy("cluster")
        .agg(F.round(F.avg((F.col("err_ms") <= 1).cast("double")), 4).alias("share"))
    )
    assert {r["cluster"]: r["share"] for r in within_1ms.collect()} == {"leo-4.4.0": 0.9938, "leo-3.9.1": 0.9756}
