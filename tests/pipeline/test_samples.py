"""The bundled real traces (data/samples/): every line accounted for, counts equal the lab's own.

Each trace's manifest.json holds counts taken independently of this pipeline: the producing client's
acknowledged batches per acks setting, and the lab's plain-`json` tally of each broker's request log.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from ackreplay.config import load_config
from ackreplay.ingest import run_ingest
from ackreplay.lakehouse import read_table

SAMPLES = sorted(p.parent for p in Path("data/samples").glob("*/manifest.json"))


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


@pytest.mark.parametrize("trace", SAMPLES, ids=[p.name for p in SAMPLES])
def test_real_trace_is_fully_accounted_for(spark, trace, tmp_path):
    manifest = json.loads((trace / "manifest.json").read_text())
    lakehouse = str(tmp_path / "lakehouse")
    report = run_ingest(spark, load_config("conf/local.yaml"), str(trace), lakehouse)

    brokers = manifest["counts"]["request_log"]
    assert report.total_lines == sum(b["lines"] for b in brokers.values())
    assert report.line_status.get("quarantined", 0) == 0
    assert report.unused_detail["FETCH from a consumer"] == sum(b["consumer_fetch"] for b in brokers.values())

    bronze = read_table(spark, lakehouse, "request_log_lines")
    follower_fetch_lines = bronze.filter("status = 'parsed' AND api_key_name = 'FETCH'").count()
    assert follower_fetch_lines == sum(b["follower_fetch"] for b in brokers.values())

    produce = read_table(spark, lakehouse, "produce_requests")
    ok = {r["acks"]: r["count"] for r in produce.filter("error_code = 0").groupBy("acks").count().collect()}
    client = manifest["counts"]["client"]
    assert ok[-1] == client["acks=all"]["batches_acked"]
    assert ok[1] == client["acks=1"]["batches_acked"]

    # Log times converted from the brokers' zone fall inside the workload's UTC window.
    start, end = _utc(manifest["workload"]["start_utc"]), _utc(manifest["workload"]["end_utc"])
    first, last = produce.agg(F.min("t_start"), F.max("t_log")).first()
    assert start - timedelta(seconds=5) <= first and last <= end + timedelta(seconds=5)
