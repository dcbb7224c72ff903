"""Every column of every lakehouse table contract (schemas/) carries a description in its metadata, {"comment": ...},
which Delta stores as the column's comment (DESCRIBE shows it). The contracts only: no Spark session."""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql.types import StructType

from ackreplay.schemas.broker_logs import (
    BROKER_CONFIGS,
    BROKER_REGISTRATIONS,
    FOLLOWER_LEO_RECORDS,
    FOLLOWER_STARTS,
    ISR_CHANGES,
    LEADER_EPOCHS,
    METADATA_DELTAS,
)
from ackreplay.schemas.dq import DQ_RESULTS
from ackreplay.schemas.gold import AVAILABILITY, LATENCY_PERCENTILES, POLICY_SUMMARY, RISK_EXPOSURE, ROUTING
from ackreplay.schemas.ledger import INGESTED_FILES
from ackreplay.schemas.metrics import FOLLOWER_LEO_SAMPLES
from ackreplay.schemas.replay import PRODUCE_REPLAY, REPLAY_CHECKS
from ackreplay.schemas.tables import (
    BATCH_SEND_TIMES,
    FOLLOWER_FETCHES,
    PARTITIONS,
    PRODUCE_REQUESTS,
    QUARANTINE,
    REQUEST_LOG_LINES,
)

CONTRACTS = {
    "request_log_lines": REQUEST_LOG_LINES,
    "quarantine": QUARANTINE,
    "produce_requests": PRODUCE_REQUESTS,
    "follower_fetches": FOLLOWER_FETCHES,
    "batch_send_times": BATCH_SEND_TIMES,
    "partitions": PARTITIONS,
    "isr_changes": ISR_CHANGES,
    "leader_epochs": LEADER_EPOCHS,
    "follower_starts": FOLLOWER_STARTS,
    "follower_leo_records": FOLLOWER_LEO_RECORDS,
    "broker_configs": BROKER_CONFIGS,
    "broker_registrations": BROKER_REGISTRATIONS,
    "metadata_deltas": METADATA_DELTAS,
    "follower_leo_samples": FOLLOWER_LEO_SAMPLES,
    "produce_replay": PRODUCE_REPLAY,
    "replay_checks": REPLAY_CHECKS,
    "latency_percentiles": LATENCY_PERCENTILES,
    "risk_exposure": RISK_EXPOSURE,
    "availability": AVAILABILITY,
    "routing": ROUTING,
    "policy_summary": POLICY_SUMMARY,
    "ingested_files": INGESTED_FILES,
    "dq_results": DQ_RESULTS,
}
MAX_COMMENT = 200
# (table, description) pairs that may name more than one column: columns that are genuinely the same thing
SHARED: frozenset[tuple[str, str]] = frozenset()


@pytest.mark.parametrize("table", sorted(CONTRACTS))
def test_every_column_of_a_contract_has_its_own_short_description(table):
    contract: StructType = CONTRACTS[table]
    comments = {f.name: f.metadata.get("comment") for f in contract.fields}
    missing = [name for name, text in comments.items() if not isinstance(text, str) or not text.strip()]
    assert not missing, f"{table}: columns without a description: {missing}"
    long = {name: len(text) for name, text in comments.items() if len(text) > MAX_COMMENT}
    assert not long, f"{table}: descriptions longer than {MAX_COMMENT} characters: {long}"
    repeated = [text for text, n in Counter(comments.values()).items() if n > 1 and (table, text) not in SHARED]
    assert not repeated, f"{table}: one description for several columns: {repeated}"
