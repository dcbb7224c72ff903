"""The metrics step on the bundled real traces (data/samples/*/<cluster>/metrics/broker-<id>.prom):
every line accounted for, and the scraped follower LEO consistent with the FETCH offsets the leaders
logged (follower_fetches, from the request logs).

Line counts are taken here with plain Python, independently of the pipeline.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from ackreplay.config import load_config
from ackreplay.ingest.metrics import ingest_metrics
from ackreplay.storage.inputs import discover_inputs
from ackreplay.storage.lakehouse import read_table
from tests.conftest import SAMPLES

USED = re.compile(r"^(kafka_log_log_logendoffset|kafka_server_fetcherlagmetrics_consumerlag)\{")


@pytest.fixture(scope="module", params=SAMPLES, ids=[p.name for p in SAMPLES])
def trace_run(request, sample_run):
    run = sample_run(request.param)  # the trace's one pipeline run of the session (tests/conftest.py)
    return run.trace, run.lakehouse, run.ingest.metrics


def _independent_counts(trace: Path) -> dict[str, int]:
    counts = {"files": 0, "lines": 0, "used": 0}
    for path in sorted(trace.glob("*/metrics/*.prom")):
        counts["files"] += 1
        for line in path.read_text().splitlines():
            counts["lines"] += 1
            counts["used"] += bool(USED.match(line))
    return counts


def test_every_line_is_accounted_for(spark, trace_run):
    trace, lakehouse, report = trace_run
    expected = _independent_counts(trace)
    print("\n".join(report.summary_lines()))
    assert report.files == expected["files"] == 3
    assert report.total == expected["lines"]
    assert report.parsed == expected["used"]
    assert report.quarantined == 0
    assert report.unused == expected["lines"] - expected["used"]
    assert report.rows_written == {"quarantine": 0, "follower_leo_samples": expected["used"]}
    samples = read_table(spark, lakehouse, "follower_leo_samples")
    assert samples.count() == expected["used"]
    # about one scrape a second
    assert all(900 <= ms <= 1200 for ms in report.granularity_ms.values()), report.granularity_ms
    # consumerlag comes from ReplicaFetcherThread-0-<leader> on followers only
    lag = samples.filter(F.col("metric") == "kafka_server_fetcherlagmetrics_consumerlag")
    assert lag.filter(F.col("leader_id").isNull() | (F.col("leader_id") == F.col("broker_id"))).count() == 0


def test_rerun_replaces_the_rows(spark, trace_run, tmp_path):
    trace, shared, report = trace_run
    lakehouse = str(tmp_path / "lakehouse")
    shutil.copytree(shared, lakehouse)  # the shared run's lakehouse stays as it is
    files = discover_inputs(str(trace)).of_kind("metrics")
    again = ingest_metrics(spark, load_config("conf/local.yaml"), files, lakehouse, run_id="test-metrics-2")
    assert (again.parsed, again.unused, again.quarantined) == (report.parsed, report.unused, report.quarantined)
    assert read_table(spark, lakehouse, "follower_leo_samples").count() == report.parsed


# (follower, partition, scraped LEO, fetchOffset seen before) where a follower truncated between the two
TRUNCATED = {"trace-3.9.1-utc": [], "trace-4.1.1-berlin": [(3, 0, 12672, 12673)]}


def _leo_vs_fetches(spark, lakehouse: str):
    """Every scraped follower LEO sample with the highest fetchOffset its leader had seen from it one
    scrape interval (granularity_ms) or more before the sample."""
    fetches = read_table(spark, lakehouse, "follower_fetches")
    leo = read_table(spark, lakehouse, "follower_leo_samples").filter(F.col("metric") == "kafka_log_log_logendoffset")
    s, f = leo.alias("s"), fetches.alias("f")
    joined = s.join(
        f,
        (F.col("s.cluster") == F.col("f.cluster"))
        & (F.col("s.broker_id") == F.col("f.follower_id"))
        & (F.col("s.topic") == F.col("f.topic"))
        & (F.col("s.partition") == F.col("f.partition"))
        & (
            F.unix_micros(F.col("f.t_dequeue"))
            <= F.unix_micros(F.col("s.t_sample")) - (F.col("s.granularity_ms") * 1000).cast("bigint")
        ),
        "inner",
    )
    return joined.groupBy(
        F.col("s.broker_id").alias("follower"), F.col("s.topic").alias("topic"), F.col("s.partition").alias("partition"),
        F.col("s.t_sample").alias("t_sample"), F.col("s.value").alias("leo"),
    ).agg(F.max("f.fetch_offset").alias("fetched_before"))  # fmt: skip


def test_scraped_follower_leo_is_consistent_with_the_fetch_offsets(spark, trace_run):
    """A follower's FETCH carries its LEO at sending time, before the leader dequeues it; a scrape
    reads the LEO before its timestamp. So the LEO scraped at t is at least every fetchOffset the
    leader saw from that follower at t - one scrape interval or earlier, unless the follower truncated
    in between. One scrape of the 4.1.1 trace caught that: when the restarted broker 2 took partition 0
    back (preferred leader, epoch 2), follower 3, its leader of epoch 1, truncated 12673 -> 12672 (the
    acks=all batch it had appended at 12672 failed with NOT_LEADER_OR_FOLLOWER and was retried on 2)."""
    trace, lakehouse, _ = trace_run
    pairs = _leo_vs_fetches(spark, lakehouse).cache()
    try:
        n = pairs.count()
        assert n > 1500  # every follower, every partition, most scrapes (1,902 / 1,918)
        below = pairs.filter(F.col("leo") < F.col("fetched_before")).collect()
        assert (
            sorted((r["follower"], r["partition"], r["leo"], r["fetched_before"]) for r in below)
            == TRUNCATED[trace.name]
        )
        # and it is a close match, not a trivially loose bound: at most scrapes the follower is within
        # a few hundred records of what the leader had seen from it one interval earlier
        ahead = pairs.select((F.col("leo") - F.col("fetched_before")).alias("d"))
        p50, p90 = ahead.approxQuantile("d", [0.5, 0.9], 0.0)
        print(f"scraped LEO - fetchOffset seen >= 1 scrape earlier: n={n}, p50={p50}, p90={p90}")
        assert p50 < 500
    finally:
        pairs.unpersist()


def test_one_follower_timeline(spark, trace_run):
    """One follower and partition of each trace, step by step: follower 2 of partition 1 (leader 1) in
    the 3.9.1 trace, follower 1 of partition 1 (leader 3) in the 4.1.1 trace - the brokers of the long
    stall. During the stall the scraper gets no answer from the stalled broker: a gap in its samples."""
    trace, lakehouse, _ = trace_run
    follower, partition = (2, 1) if "3.9.1" in trace.name else (1, 1)
    pairs = (
        _leo_vs_fetches(spark, lakehouse)
        .filter((F.col("follower") == follower) & (F.col("partition") == partition))
        .orderBy("t_sample")
        .collect()
    )
    assert len(pairs) > 100
    assert all(r["leo"] >= r["fetched_before"] for r in pairs)
    leo = [r["leo"] for r in pairs]
    assert leo == sorted(leo)  # monotonic: no truncation
    samples = (
        read_table(spark, lakehouse, "follower_leo_samples")
        .filter(
            (F.col("broker_id") == follower) & (F.col("partition") == partition)
            & (F.col("metric") == "kafka_log_log_logendoffset")
        )
        .agg(F.max("sample_gap_ms").alias("max_gap"), F.max("granularity_ms").alias("g"))
        .first()
    )  # fmt: skip
    print(
        f"{trace.name}: follower {follower} partition {partition}: max gap {samples['max_gap']} ms, interval {samples['g']} ms"
    )
    assert samples["max_gap"] > 5 * samples["g"]  # the long stall (6.5 s) shows as a gap
