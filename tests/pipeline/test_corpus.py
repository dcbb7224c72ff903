"""Real traces of other Kafka versions (data/corpus/), beyond the two bundled samples.

trace-4.3.1-newyork: Kafka 4.3.1 (KRaft, 3 brokers, RF 3, min ISR 2, replica.lag.time.max.ms 5 s), short
follower stalls, an 8 s stall of broker 1 and two controlled shutdowns with restarts (manifest.json).
From 4.2 on a leader prints its skipped become-leader state changes with the partition's
PartitionRegistration (Partition.makeLeader, docs/kafka-versions.md); those lines carry the ISR commits
of the controlled shutdowns, so each of them must parse. The whole trace's replay is in README
("Kafka versions"); here its broker logs, which need no replay.

Line counts are taken with plain gzip + substring counts, independently of the pipeline.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from ackreplay.broker_logs import ingest_broker_logs
from ackreplay.config import load_config
from ackreplay.inputs import discover_inputs
from ackreplay.lakehouse import read_table
from tests.conftest import SAMPLE_CONF

REPO = Path(__file__).resolve().parents[2]
TRACE_431 = REPO / "data/corpus/trace-4.3.1-newyork"


def _lines_containing(trace: Path, log: str, text: str) -> int:
    return sum(
        sum(text in line for line in gzip.open(path, "rt", errors="replace"))
        for path in sorted(trace.glob(f"*/broker-*/{log}*"))
    )


def test_kafka_4_3_broker_logs_parse_line_for_line(spark, tmp_path):
    inventory = discover_inputs(str(TRACE_431))
    files = inventory.of_kind("server_log") + inventory.of_kind("state_change_log")
    lakehouse = str(tmp_path / "lakehouse")
    report = ingest_broker_logs(spark, load_config(SAMPLE_CONF), files, lakehouse, "corpus")

    skipped = _lines_containing(TRACE_431, "state-change.log", "Skipped the become-leader state change for ")
    in_registration_form = _lines_containing(TRACE_431, "state-change.log", ", partition registration PartitionRegistration(")
    assert skipped == 188 and in_registration_form >= skipped  # every one in the 4.2+ form
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
