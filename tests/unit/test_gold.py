"""produce_replay -> gold aggregates (chispa, hand-computed values).

Percentile arithmetic (Spark's exact `percentile`, position h = (n - 1) * p, linear interpolation):
for latencies [1, 2, 3, 103]: p50 h = 1.5 -> 2.5; p99 h = 2.97 -> 3 + 0.97 * 100 = 100.0.
For 1..1000: p999 h = 998.001 -> 999 + 0.001 * 1 = 999.001. For 0.5, 1, ..., 500: p999 = 499.5005.
"""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F

from ackreplay.schemas.broker_logs import ISR_CHANGES
from ackreplay.schemas.replay import PRODUCE_REPLAY
from ackreplay.schemas.tables import BATCH_SEND_TIMES
from ackreplay.transforms.common import PerCluster, conform
from ackreplay.transforms.gold import (
    availability,
    cdf_probabilities,
    latency_percentiles,
    latency_quantiles,
    policy_summary,
    record_sends_by_batch,
    risk_exposure,
    with_window,
)
from tests.helpers import assert_approx_df_equality, assert_df_equality

INF = float("inf")
T10 = dt.datetime(2026, 11, 20, 10, 0, 0)
T11 = dt.datetime(2026, 11, 20, 11, 0, 0)


def _row(
    policy="acks=all",
    outcome="acked",
    latency=1.0,
    t=T10,
    partition=0,
    copies=3,
    exposure=0.0,
    nbytes=100,
    loss_k=False,
    loss_l=False,
    topic="orders",
    cluster="c1",
    full=None,
    loss_k_min=None,
    loss_l_min=None,
    offline=False,
    window_k=0.0,
    window_l=0.0,
    window_k_min=None,
    window_l_min=None,
    offset=0,
    retried=False,
):
    """A produce_replay row; a row not acked has no latency unless `retried` (a retry got it appended)."""
    delivered = outcome == "acked" or retried
    return {
        "cluster": cluster,
        "topic": topic,
        "partition": partition,
        "leader_epoch": 0,
        "base_offset": offset,
        "broker_id": 1,
        "bytes": nbytes,
        "records": None,
        "recorded_acks": -1,
        "policy": policy,
        "outcome": outcome,
        "t_start": t,
        "t_local_done": t,
        "t_ack": t,
        "t_ack_observed": None,
        "t_response": t,
        "ack_wait_ms": 0.0,
        "latency_ms": latency if delivered else None,
        "broker_latency_ms": latency if delivered else None,
        "hol_wait_ms": 0.0 if delivered else None,
        "t_send": None,
        "copies_at_ack": copies if outcome == "acked" else 0,
        "exposure_ms": exposure if outcome == "acked" else None,
        "full_replication_ms": full if outcome == "acked" else None,
        "loss_kafka_election": loss_k,
        "loss_longest_log_election": loss_l,
        "loss_kafka_election_min": loss_k if loss_k_min is None else loss_k_min,
        "loss_longest_log_election_min": loss_l if loss_l_min is None else loss_l_min,
        "offline_at_failure": offline,
        **{
            name: (value if outcome == "acked" else None)
            for name, value in (
                ("loss_window_kafka_ms", window_k),
                ("loss_window_kafka_min_ms", window_k if window_k_min is None else window_k_min),
                ("loss_window_longest_ms", window_l),
                ("loss_window_longest_min_ms", window_l if window_l_min is None else window_l_min),
            )
        },
        "isr_source": "logs",
        "leo_source": "follower_fetches",
        "source_file": "f",
        "line_number": 1,
        "event_date": t.date(),
        "replay_run_id": "r",
    }


def replay_frame(spark, rows: list[dict]):
    names = PRODUCE_REPLAY.fieldNames()
    return spark.createDataFrame([tuple(r[n] for n in names) for r in rows], PRODUCE_REPLAY)


def many_acked(spark, policy: str, n: int, scale: float = 1.0, topic: str = "orders"):
    """n acked produces of `policy` at T10 with latency_ms = i * scale for i = 1..n."""
    template = replay_frame(spark, [_row(policy=policy, topic=topic)])
    ids = spark.range(1, n + 1).withColumn("latency_ms", F.col("id") * F.lit(scale))
    return conform(template.drop("latency_ms").crossJoin(ids), PRODUCE_REPLAY)


def partitions_frame(spark, rows: list[tuple]):
    return spark.createDataFrame(rows, "cluster string, topic string, partition int, min_insync_replicas int")


def isr_frame(spark, rows: list[tuple]):
    """isr_changes rows from (topic, partition, leader_epoch, isr, t_log); the other columns are filler."""
    full = [
        {
            "cluster": "c1",
            "topic": topic,
            "partition": partition,
            "broker_id": isr[0],
            "leader_epoch": epoch,
            "partition_epoch": i,
            "isr": isr,
            "isr_size": len(isr),
            "elr": None,
            "under_min_isr": None,
            "previous_isr": None,
            "change_kind": None,
            "proposed_at": None,
            "out_of_sync_replicas": None,
            "proposal_high_watermark": None,
            "proposal_end_offset": None,
            "source": "server_log",
            "t_log": t,
            "source_file": "s",
            "line_number": i,
            "event_date": t.date(),
            "ingest_run_id": "i",
        }
        for i, (topic, partition, epoch, isr, t) in enumerate(rows)
    ]
    names = ISR_CHANGES.fieldNames()
    return spark.createDataFrame([tuple(r[n] for n in names) for r in full], ISR_CHANGES)


LATENCY_DDL = (
    "cluster string, topic string, policy string, window string, window_start timestamp, produces bigint, "
    "n bigint, max_ms double, p50_ms double, p99_ms double, p999_ms double, p9999_ms double, "
    "p999_insufficient boolean, p9999_insufficient boolean"
)


def test_latency_percentiles_small_windows(spark):
    replay = replay_frame(
        spark,
        [
            *[_row(latency=x) for x in (1.0, 2.0, 3.0, 103.0)],
            _row(outcome="timeout", latency=30000.0),  # counted in produces, not in the latency sample
            _row(t=T11 + dt.timedelta(minutes=59), latency=5.0),  # a window with a single produce
            _row(policy="quorum=2", outcome="not_enough_replicas", latency=0.4),  # all-rejected window
            _row(policy="quorum=2", outcome="not_enough_replicas", latency=0.6),
            # rejected, and a retry got it appended 2 s later: the producer saw it acknowledged
            _row(policy="min.insync", outcome="not_enough_replicas", latency=2000.0, retried=True),
            _row(policy="min.insync", latency=4.0),
        ],
    )
    actual = latency_percentiles(replay, "hour")
    expected = spark.createDataFrame(
        [
            ("c1", "orders", "acks=all", "hour", T10, 5, 4, 103.0, 2.5, 100.0, None, None, True, True),
            ("c1", "orders", "acks=all", "hour", T11, 1, 1, 5.0, 5.0, 5.0, None, None, True, True),
            ("c1", "orders", "quorum=2", "hour", T10, 2, 0, None, None, None, None, None, True, True),
            ("c1", "orders", "min.insync", "hour", T10, 2, 2, 2000.0, 1002.0, 1980.04, None, None, True, True),
        ],
        LATENCY_DDL,
    )
    # percentile interpolation is floating point: 3 + 0.97 * 100 need not be exactly 100.0
    assert_approx_df_equality(
        actual.select(*expected.columns), expected, 1e-9, ignore_nullable=True, ignore_row_order=True
    )


def test_latency_percentiles_p999_needs_1000_samples(spark):
    replay = many_acked(spark, "acks=all", 1000).unionByName(many_acked(spark, "acks=1", 999))
    actual = latency_percentiles(replay, "day").select(
        "policy", "window_start", "n", "p999_ms", "p9999_ms", "p999_insufficient", "p9999_insufficient"
    )
    day = dt.datetime(2026, 11, 20)
    expected = spark.createDataFrame(
        [
            ("acks=all", day, 1000, 999.001, None, False, True),
            ("acks=1", day, 999, None, None, True, True),
        ],
        "policy string, window_start timestamp, n bigint, p999_ms double, p9999_ms double, "
        "p999_insufficient boolean, p9999_insufficient boolean",
    )
    assert_approx_df_equality(actual, expected, 1e-9, ignore_nullable=True, ignore_row_order=True)


def test_latency_percentiles_p9999_exact_at_10000(spark):
    actual = latency_percentiles(many_acked(spark, "acks=all", 10000), "hour").select("n", "p999_ms", "p9999_ms")
    # p999: h = 9999 * 0.999 = 9989.001 -> 9990.001; p9999: h = 9998.0001 -> 9999.0001
    expected = spark.createDataFrame([(10000, 9990.001, 9999.0001)], "n bigint, p999_ms double, p9999_ms double")
    assert_approx_df_equality(actual, expected, 1e-6, ignore_nullable=True)


def test_windows_minute_and_unknown(spark):
    replay = replay_frame(spark, [_row(t=T10 + dt.timedelta(minutes=3, seconds=59, microseconds=999999))])
    actual = with_window(replay, "minute").select("window", "window_start")
    expected = spark.createDataFrame(
        [("minute", T10 + dt.timedelta(minutes=3))], "window string, window_start timestamp"
    )
    assert_df_equality(actual, expected, ignore_nullable=True)
    with pytest.raises(ValueError, match="unknown window"):
        with_window(replay, "week")


def test_empty_replay_gives_empty_tables(spark):
    empty = replay_frame(spark, [])
    parts = partitions_frame(spark, [("c1", "orders", 0, 2)])
    # ISR states without any replayed produce: no policy to report them under, so no rows either
    isr = isr_frame(spark, [("orders", 0, 1, [1, 2, 3], T10)])
    assert latency_percentiles(empty).count() == 0
    assert risk_exposure(empty, parts).count() == 0
    assert availability(empty, isr, parts).count() == 0
    assert policy_summary(empty, parts, availability(empty, isr, parts)).count() == 0


RISK_COLUMNS = [
    "policy",
    "window_start",
    "produces",
    "acked_batches",
    "acked_bytes",
    "under_min_isr_acks",
    "under_min_isr_bytes",
    "min_isr_unknown_acks",
    "exposure_byte_ms",
    "max_exposure_ms",
    "never_min_isr_acks",
    "never_min_isr_bytes",
    "single_copy_acks",
    "loss_kafka_election",
    "loss_longest_log_election",
    "loss_kafka_election_min",
    "loss_longest_log_election_min",
    "offline_at_failure_acks",
    "full_replication_p99_ms",
    "full_replication_max_ms",
    "never_full_replication_acks",
]
RISK_DDL = (
    "policy string, window_start timestamp, produces bigint, acked_batches bigint, acked_bytes bigint, "
    "under_min_isr_acks bigint, under_min_isr_bytes bigint, min_isr_unknown_acks bigint, "
    "exposure_byte_ms double, max_exposure_ms double, never_min_isr_acks bigint, never_min_isr_bytes bigint, "
    "single_copy_acks bigint, loss_kafka_election bigint, loss_longest_log_election bigint, "
    "loss_kafka_election_min bigint, loss_longest_log_election_min bigint, offline_at_failure_acks bigint, "
    "full_replication_p99_ms double, full_replication_max_ms double, never_full_replication_acks bigint"
)


def test_risk_exposure(spark):
    replay = replay_frame(
        spark,
        [
            _row(policy="acks=1", copies=1, exposure=5.0, nbytes=100, loss_k=True, full=40.0),
            _row(policy="acks=1", copies=2, exposure=0.0, nbytes=200, full=10.0),
            # never on 2 replicas, nor on all 3
            # lost at most under both elections; at least under Kafka's only (sent to the longest-log pick)
            _row(
                policy="acks=1", copies=1, exposure=INF, nbytes=50, loss_k=True, loss_l=True, full=INF, loss_l_min=False
            ),
            # min ISR unknown; acked while no follower was in the ISR: offline at a failure, not lost
            _row(policy="acks=1", partition=1, copies=1, exposure=2.0, nbytes=10, full=2.0, offline=True),
            _row(policy="acks=1", outcome="timeout", nbytes=1000),  # not acked: no risk
            _row(policy="acks=all", outcome="not_enough_replicas", nbytes=70),  # all-rejected window
            _row(policy="acks=all", t=T11, copies=3, exposure=0.0, nbytes=None, full=0.0),  # single produce, no bytes
        ],
    )
    parts = partitions_frame(spark, [("c1", "orders", 0, 2), ("c1", "other", 1, 3)])
    actual = risk_exposure(replay, parts, "hour").select(*RISK_COLUMNS)
    expected = spark.createDataFrame(
        [
            # exposure byte·ms = 100 * 5 + 200 * 0 + 10 * 2 = 520 (the inf batch is counted apart);
            # full replication of the finite [2, 10, 40]: p99 h = 2 * 0.99 = 1.98 -> 10 + 0.98 * 30 = 39.4
            ("acks=1", T10, 5, 4, 360, 2, 150, 1, 520.0, 5.0, 1, 50, 3, 2, 1, 2, 0, 1, 39.4, 40.0, 1),
            ("acks=all", T10, 1, 0, 0, 0, 0, 0, 0.0, None, 0, 0, 0, 0, 0, 0, 0, 0, None, None, 0),
            ("acks=all", T11, 1, 1, 0, 0, 0, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0),
        ],
        RISK_DDL,
    )
    # 10 + 0.98 * 30 is floating point
    assert_approx_df_equality(actual, expected, 1e-9, ignore_nullable=True, ignore_row_order=True)


def test_loss_windows_are_summed_in_batch_seconds_and_infinite_ones_counted_apart(spark):
    replay = replay_frame(
        spark,
        [
            _row(policy="acks=1", window_k=2_900.0, window_l=10.0, window_k_min=0.0, window_l_min=0.0),
            _row(policy="acks=1", window_k=INF, window_l=1_100.0, window_k_min=500.0, window_l_min=100.0),
            _row(policy="acks=1", outcome="timeout"),  # not acked: no window
            _row(policy="acks=all"),
        ],
    )
    columns = [
        "policy",
        "loss_window_kafka_batch_s",
        "loss_window_kafka_min_batch_s",
        "loss_window_longest_batch_s",
        "loss_window_longest_min_batch_s",
        "never_safe_kafka_acks",
        "never_safe_longest_acks",
    ]
    parts = partitions_frame(spark, [("c1", "orders", 0, 2)])
    actual = risk_exposure(replay, parts, "hour").select(*columns)
    expected = spark.createDataFrame(
        [("acks=1", 2.9, 0.5, 1.11, 0.1, 1, 0), ("acks=all", 0.0, 0.0, 0.0, 0.0, 0, 0)],
        "policy string, loss_window_kafka_batch_s double, loss_window_kafka_min_batch_s double, "
        "loss_window_longest_batch_s double, loss_window_longest_min_batch_s double, never_safe_kafka_acks bigint, "
        "never_safe_longest_acks bigint",
    )
    assert_approx_df_equality(actual, expected, 1e-12, ignore_nullable=True, ignore_row_order=True)


AVAILABILITY_COLUMNS = [
    "partition",
    "policy",
    "window",
    "window_start",
    "produces",
    "acked",
    "not_enough_replicas",
    "timeouts",
    "not_leader",
    "unreplayable",
    "under_min_isr_source",
    "min_insync_replicas",
    "isr_known_ms",
    "under_min_isr_ms",
]
AVAILABILITY_DDL = (
    "partition int, policy string, window string, window_start timestamp, produces bigint, acked bigint, "
    "not_enough_replicas bigint, timeouts bigint, not_leader bigint, unreplayable bigint, "
    "under_min_isr_source string, min_insync_replicas int, isr_known_ms double, under_min_isr_ms double"
)


def test_availability_per_partition(spark):
    replay = replay_frame(
        spark,
        [
            _row(policy="min.insync", outcome="acked"),
            _row(policy="min.insync", outcome="not_enough_replicas"),
            _row(policy="min.insync", outcome="not_enough_replicas_after_append"),
            _row(policy="min.insync", outcome="timeout"),
            _row(policy="min.insync", outcome="not_leader", partition=1),
            _row(policy="min.insync", outcome="unreplayable", partition=1),
        ],
    )
    parts = partitions_frame(spark, [("c1", "orders", 0, 2)])
    actual = availability(replay, isr_frame(spark, []), parts, "hour").select(*AVAILABILITY_COLUMNS)
    expected = spark.createDataFrame(
        [
            # no ISR state known at all: the time under min ISR is null, not 0
            (0, "min.insync", "hour", T10, 4, 1, 2, 1, 0, 0, "isr_changes", None, 0.0, None),
            (1, "min.insync", "hour", T10, 2, 0, 0, 0, 1, 1, "isr_changes", None, 0.0, None),
        ],
        AVAILABILITY_DDL,
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)


H = 3_600_000.0  # ms in an hour


def test_availability_time_under_min_isr(spark):
    t12 = dt.datetime(2026, 11, 20, 12, 0, 0)
    minutes = dt.timedelta(minutes=1)
    replay = replay_frame(
        spark,
        [
            _row(t=T10 + 5 * minutes),
            _row(t=T11 + 10 * minutes, outcome="not_enough_replicas"),  # all-rejected window
            _row(t=t12 + 30 * minutes),  # the cluster's last event: the last ISR state holds until 12:30
            _row(policy="acks=all@lag=3000", t=T10 + 5 * minutes),
        ],
    )
    isr = isr_frame(
        spark,
        [
            ("orders", 0, 5, [1, 2, 3], T10),
            ("orders", 0, 5, [1], T10 + 20 * minutes),  # under min ISR 2 from 10:20 ...
            ("orders", 0, 4, [1, 2, 3], T11 + 40 * minutes),  # a deposed leader (older epoch) still logging: ignored
            ("orders", 0, None, [1, 2], t12 + 15 * minutes),  # ... to 12:15 (a server.log line without epoch)
            ("orders", 1, 7, [2, 3, 1], T10 + 30 * minutes),  # never under; unknown before 10:30
            ("orders", 2, 1, [3], T10),  # min ISR unknown: no figure
            ("idle", 0, 1, [1], T10),  # no replayed produce on the topic: no policy to report it under
        ],
    )
    parts = partitions_frame(spark, [("c1", "orders", 0, 2), ("c1", "orders", 1, 2), ("c1", "idle", 0, 2)])
    actual = availability(replay, isr, parts, "hour").select(*AVAILABILITY_COLUMNS)
    lag, src, stored = "acks=all@lag=3000", "isr_changes", "not_stored"
    expected = spark.createDataFrame(
        [
            (0, "acks=all", "hour", T10, 1, 1, 0, 0, 0, 0, src, 2, H, 40 * 60_000.0),
            (0, "acks=all", "hour", T11, 1, 0, 1, 0, 0, 0, src, 2, H, H),  # entirely under min ISR
            (0, "acks=all", "hour", t12, 1, 1, 0, 0, 0, 0, src, 2, 30 * 60_000.0, 15 * 60_000.0),
            (0, lag, "hour", T10, 1, 1, 0, 0, 0, 0, stored, 2, None, None),
            (0, lag, "hour", T11, 0, 0, 0, 0, 0, 0, stored, 2, None, None),
            (0, lag, "hour", t12, 0, 0, 0, 0, 0, 0, stored, 2, None, None),
            (1, "acks=all", "hour", T10, 0, 0, 0, 0, 0, 0, src, 2, 30 * 60_000.0, 0.0),
            (1, "acks=all", "hour", T11, 0, 0, 0, 0, 0, 0, src, 2, H, 0.0),  # never under
            (1, "acks=all", "hour", t12, 0, 0, 0, 0, 0, 0, src, 2, 30 * 60_000.0, 0.0),
            (1, lag, "hour", T10, 0, 0, 0, 0, 0, 0, stored, 2, None, None),
            (1, lag, "hour", T11, 0, 0, 0, 0, 0, 0, stored, 2, None, None),
            (1, lag, "hour", t12, 0, 0, 0, 0, 0, 0, stored, 2, None, None),
            (2, "acks=all", "hour", T10, 0, 0, 0, 0, 0, 0, src, None, H, None),
            (2, "acks=all", "hour", T11, 0, 0, 0, 0, 0, 0, src, None, H, None),
            (2, "acks=all", "hour", t12, 0, 0, 0, 0, 0, 0, src, None, 30 * 60_000.0, None),
            (2, lag, "hour", T10, 0, 0, 0, 0, 0, 0, stored, None, None, None),
            (2, lag, "hour", T11, 0, 0, 0, 0, 0, 0, stored, None, None, None),
            (2, lag, "hour", t12, 0, 0, 0, 0, 0, 0, stored, None, None, None),
        ],
        AVAILABILITY_DDL,
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)


def test_rejections_another_partition_could_have_taken_kip_637(spark):
    """KIP-637's producer sends nothing to a partition below min ISR. Orders p0 is below min ISR 2 from 10:10 to
    10:20, p1 never, p2 always; topic solo has one partition, below min ISR until 10:40. acks=all rejects a batch
    on p0 at 10:15 (p1 writable: reroutable; its own partition writable again after 5 min), one on p2 at 10:15
    (reroutable; p2 never writable again), one on solo at 10:30 (nowhere to go; 10 min until writable).
    acks=all@lag, whose ISR is the replay's own, known at its appends: it accepted p1's at 10:14:59 and 10:16 and
    rejected p0's at 10:15, so p1 was writable then (reroutable) and p0 never again within the data."""
    minutes = dt.timedelta(minutes=1)
    replay = replay_frame(
        spark,
        [
            _row(outcome="not_enough_replicas", t=T10 + 15 * minutes, partition=0, offset=1),
            _row(outcome="not_enough_replicas", t=T10 + 15 * minutes, partition=2, offset=2),
            _row(outcome="not_enough_replicas", t=T10 + 30 * minutes, topic="solo", offset=3),
            _row(policy="acks=all@lag=3000", outcome="not_enough_replicas", t=T10 + 15 * minutes, offset=1),
            _row(policy="acks=all@lag=3000", t=T10 + 15 * minutes - dt.timedelta(seconds=1), partition=1, offset=5),
            _row(policy="acks=all@lag=3000", t=T10 + 16 * minutes, partition=1, offset=6),
            _row(t=T10 + 50 * minutes, partition=1, offset=4),
        ],
    )
    isr = isr_frame(
        spark,
        [
            ("orders", 0, 5, [1, 2, 3], T10), ("orders", 0, 5, [1], T10 + 10 * minutes),
            ("orders", 0, 5, [1, 2], T10 + 20 * minutes), ("orders", 1, 5, [2, 3], T10), ("orders", 2, 5, [3], T10),
            ("solo", 0, 5, [1], T10), ("solo", 0, 5, [1, 2], T10 + 40 * minutes),
        ],
    )  # fmt: skip
    parts = partitions_frame(spark, [("c1", "orders", p, 2) for p in range(3)] + [("c1", "solo", 0, 2)])
    available = availability(replay, isr, parts, "hour")
    columns = ("topic", "partition", "policy", "reroutable_rejections", "rejected_wait_ms", "reroutable_wait_ms",
               "never_writable_rejections")  # fmt: skip
    lag = "acks=all@lag=3000"
    ddl = "topic string, partition int, policy string, r bigint, w double, s double, n bigint"
    expected = spark.createDataFrame(
        [
            ("orders", 0, "acks=all", 1, 300_000.0, 300_000.0, 0), ("orders", 1, "acks=all", 0, 0.0, 0.0, 0),
            ("orders", 2, "acks=all", 1, 0.0, 0.0, 1), ("solo", 0, "acks=all", 0, 600_000.0, 0.0, 0),
            ("orders", 0, lag, 1, 0.0, 0.0, 1), ("orders", 1, lag, 0, 0.0, 0.0, 0), ("orders", 2, lag, 0, 0.0, 0.0, 0),
        ],
        ddl,
    ).toDF(*columns)  # fmt: skip
    assert_df_equality(available.select(*columns), expected, ignore_nullable=True, ignore_row_order=True)
    summary = policy_summary(replay, parts, available).select(
        "topic", "policy", "reroutable_rejections", "rejected_wait_ms", "reroutable_wait_ms"
    )
    expected = spark.createDataFrame(
        [("orders", "acks=all", 2, 300_000.0, 300_000.0), ("orders", lag, 1, 0.0, 0.0),
         ("solo", "acks=all", 0, 600_000.0, 0.0)],
        "topic string, policy string, reroutable_rejections bigint, rejected_wait_ms double, reroutable_wait_ms double",
    )  # fmt: skip
    assert_df_equality(summary, expected, ignore_nullable=True, ignore_row_order=True)
    # gold's policy_summary: a KIP-637 producer reroutes keyless records only; keyed ones wait (orders keyed here)
    from ackreplay.gold.stage import summary_frame

    gold = summary_frame(replay, parts, available, "run", keyless=F.col("topic") == "solo").select(
        "topic", "policy", "partitioning", "reroutable_rejections", "rejected_wait_ms", "reroutable_wait_ms"
    )
    expected = spark.createDataFrame(
        [("orders", "acks=all", "keyed", 0, 300_000.0, 0.0), ("orders", lag, "keyed", 0, 0.0, 0.0),
         ("solo", "acks=all", "keyless", 0, 600_000.0, 0.0)],
        "topic string, policy string, partitioning string, reroutable_rejections bigint, rejected_wait_ms double,"
        " reroutable_wait_ms double",
    )  # fmt: skip
    assert_df_equality(gold, expected, ignore_nullable=True, ignore_row_order=True)
    keyless = summary_frame(replay, parts, available, "run", keyless=F.lit(True)).where("topic = 'orders'")
    assert [(r["reroutable_rejections"], r["reroutable_wait_ms"]) for r in keyless.orderBy("policy").collect()] == [
        (2, 300_000.0),
        (1, 0.0),
    ]


def test_isr_time_in_minute_windows(spark):
    # one state from 10:00:30 to 10:02:15 (the last produce) under min ISR 3: three minute windows
    replay = replay_frame(spark, [_row(t=T10 + dt.timedelta(minutes=2, seconds=15))])
    isr = isr_frame(spark, [("orders", 0, 1, [1, 2], T10 + dt.timedelta(seconds=30))])
    parts = partitions_frame(spark, [("c1", "orders", 0, 3)])
    actual = availability(replay, isr, parts, "minute").select(
        "window_start", "produces", "isr_known_ms", "under_min_isr_ms"
    )
    expected = spark.createDataFrame(
        [
            (T10, 0, 30_000.0, 30_000.0),
            (T10 + dt.timedelta(minutes=1), 0, 60_000.0, 60_000.0),
            (T10 + dt.timedelta(minutes=2), 1, 15_000.0, 15_000.0),
        ],
        "window_start timestamp, produces bigint, isr_known_ms double, under_min_isr_ms double",
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)


def test_policy_summary_against_acks_all(spark):
    replay = (
        many_acked(spark, "acks=all", 1000)
        .unionByName(many_acked(spark, "quorum=2", 1000, scale=0.5))
        .unionByName(
            replay_frame(
                spark,
                [
                    _row(policy="acks=1", latency=1.0, copies=1, exposure=INF, loss_k=True, full=INF),
                    _row(policy="acks=1", outcome="timeout"),
                    _row(policy="acks=all@lag=3000", outcome="not_enough_replicas"),  # no acked produce at all
                    _row(policy="acks=1", topic="logs", latency=2.0, copies=1, exposure=1.5, full=7.0),  # no acks=all
                ],
            )
        )
    )
    parts = partitions_frame(spark, [("c1", "orders", 0, 2), ("c1", "logs", 0, 2)])
    # orders/0 under min ISR 2 from 9:30 until the last produce (10:00): 1,800,000 ms; logs has no ISR data
    isr = isr_frame(spark, [("orders", 0, 3, [1], T10 - dt.timedelta(minutes=30))])
    actual = policy_summary(replay, parts, availability(replay, isr, parts)).select(
        "topic",
        "policy",
        "policy_rank",
        "produces",
        "n",
        "p99_ms",
        "p999_ms",
        "p999_insufficient",
        "p999_vs_acks_all_ms",
        "p999_vs_acks_all_ratio",
        "acked_bytes",
        "under_min_isr_acks",
        "exposure_byte_ms",
        "max_exposure_ms",
        "never_min_isr_acks",
        "single_copy_acks",
        "loss_kafka_election",
        "not_enough_replicas",
        "timeouts",
        "full_replication_p99_ms",
        "never_full_replication_acks",
        "under_min_isr_ms",
        "under_min_isr_source",
    )
    half, src = 1_800_000.0, "isr_changes"
    expected = spark.createDataFrame(
        [
            # p99 of 1..1000: h = 989.01 -> 990.01 (many_acked rows have no full replication time)
            (
                "orders",
                "acks=all",
                0,
                1000,
                1000,
                990.01,
                999.001,
                False,
                0.0,
                1.0,
                100000,
                0,
                0.0,
                0.0,
                0,
                0,
                0,
                0,
                0,
                None,
                0,
                half,
                src,
            ),
            (
                "orders",
                "quorum=2",
                3,
                1000,
                1000,
                495.005,
                499.5005,
                False,
                -499.5005,
                0.5,
                100000,
                0,
                0.0,
                0.0,
                0,
                0,
                0,
                0,
                0,
                None,
                0,
                half,
                src,
            ),
            (
                "orders",
                "acks=1",
                4,
                2,
                1,
                1.0,
                None,
                True,
                None,
                None,
                100,
                1,
                0.0,
                None,
                1,
                1,
                1,
                0,
                1,
                None,
                1,
                half,
                src,
            ),
            (
                "orders",
                "acks=all@lag=3000",
                1,
                1,
                0,
                None,
                None,
                True,
                None,
                None,
                0,
                0,
                0.0,
                None,
                0,
                0,
                0,
                1,
                0,
                None,
                0,
                None,
                "not_stored",
            ),
            (
                "logs",
                "acks=1",
                4,
                1,
                1,
                2.0,
                None,
                True,
                None,
                None,
                100,
                1,
                150.0,
                1.5,
                0,
                1,
                0,
                0,
                0,
                7.0,
                0,
                None,
                src,
            ),
        ],
        "topic string, policy string, policy_rank int, produces bigint, n bigint, p99_ms double, p999_ms double, "
        "p999_insufficient boolean, p999_vs_acks_all_ms double, p999_vs_acks_all_ratio double, acked_bytes bigint, "
        "under_min_isr_acks bigint, exposure_byte_ms double, max_exposure_ms double, never_min_isr_acks bigint, "
        "single_copy_acks bigint, loss_kafka_election bigint, not_enough_replicas bigint, timeouts bigint, "
        "full_replication_p99_ms double, never_full_replication_acks bigint, under_min_isr_ms double, "
        "under_min_isr_source string",
    )
    assert_approx_df_equality(actual, expected, 1e-9, ignore_nullable=True, ignore_row_order=True)


def test_latency_quantiles_for_the_cdf(spark):
    replay = replay_frame(spark, [_row(latency=x) for x in (1.0, 2.0, 3.0, 103.0)] + [_row(outcome="timeout")])
    actual = latency_quantiles(replay, [0.0, 0.5, 1.0]).select("policy", "q", "latency_ms")
    expected = spark.createDataFrame(
        [("acks=all", 0.0, 1.0), ("acks=all", 0.5, 2.5), ("acks=all", 1.0, 103.0)],
        "policy string, q double, latency_ms double",
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
    probs = cdf_probabilities(200)
    assert len(probs) == 200 and probs == sorted(probs) and probs[0] > 0 and abs(probs[-1] - 0.9999) < 1e-12


def test_latency_is_counted_per_record_from_each_records_own_send(spark):
    # batch 0: 100 ms from its first record's send, its other records sent 40 ms (two) and 90 ms later:
    # records at 100, 60, 60, 10 ms. batch 1: three records, no record-level times: 20 ms each (the batch's
    # first send). batch 2: size unknown: one record at 5 ms. Records sorted: 5, 10, 20, 20, 20, 60, 60, 100;
    # p90: h = 7 * 0.9 = 6.3 -> 60 + 0.3 * 40 = 72.
    rows = [
        # its request left 90 ms after the first record (every record existed then) and took 10 ms
        {**_row(latency=100.0), "base_offset": 0, "records": 4, "broker_latency_ms": 10.0},
        {**_row(latency=20.0), "base_offset": 4, "records": 3},
        {**_row(latency=5.0), "base_offset": 7},
        {**_row(outcome="timeout"), "base_offset": 8, "records": 9},
    ]
    replay = replay_frame(spark, rows)
    sends = spark.createDataFrame(
        [
            ("c1", "orders", None, 0, 0, 4, 0, T10, "create_time", [(0, 1), (40, 2), (90, 1)], 0, "d1", 1, None, "i"),
            # the same batch dumped from another replica: counted once
            ("c1", "orders", None, 0, 0, 4, 0, T10, "create_time", [(0, 1), (40, 2), (90, 1)], 0, "d2", 1, None, "i"),
            ("c1", "orders", None, 0, 4, 3, None, T10, "create_time", None, None, "d1", 5, None, "i"),
            # epoch 3's batch at offset 7, which reused the offset of the replayed (epoch 0) batch: not its records
            ("c1", "orders", None, 0, 7, 2, 3, T10, "create_time", [(0, 1), (50, 1)], 0, "d1", 9, None, "i"),
        ],
        BATCH_SEND_TIMES,
    )
    record_sends = record_sends_by_batch(sends)
    actual = latency_quantiles(replay, [0.0, 0.5, 0.9, 1.0], record_sends).select("q", "latency_ms")
    expected = spark.createDataFrame(
        [(0.0, 5.0), (0.5, 20.0), (0.9, 72.0), (1.0, 100.0)], "q double, latency_ms double"
    )
    assert_approx_df_equality(actual, expected, 1e-9, ignore_nullable=True, ignore_row_order=True)

    window = latency_percentiles(replay, "hour", record_sends).select(
        "produces", "n", "acked_records", "p50_ms", "max_ms"
    )
    assert [tuple(r) for r in window.collect()] == [(4, 3, 8, 20.0, 100.0)]
    isr = spark.createDataFrame([], ISR_CHANGES)
    parts = partitions_frame(spark, [("c1", "orders", 0, 2)])
    summary = policy_summary(replay, parts, availability(replay, isr, parts), record_sends).select(
        "n", "acked_records", "record_count_known", "record_sends_known", "send_time_known"
    )
    assert [tuple(r) for r in summary.collect()] == [(3, 8, 2, 1, 0)]


def test_a_record_sent_after_its_batch_left_early_counts_a_later_batchs_wait(spark):
    # Under a policy the batch left 10 ms after its first record (ackreplay/replay/groups._early_batches: it
    # was held behind a retried one, gathering records) and took 2 ms at the broker: 12 ms from its first
    # record. Records sent 0, 4 and 11 ms after the first: 12, 8 and 1 ms (the CreateTimes are whole ms: within
    # 1 ms of the batch leaving a record may have been in it). Those sent 13 and 27 ms after went in later
    # batches, leaving at the next multiple of linger.ms (5) after the early one (at 15 and 30 ms), with the
    # same 2 ms: 4 and 5 ms. Without a linger: 2 and 2 ms.
    rows = [{**_row(latency=12.0), "base_offset": 0, "records": 5, "broker_latency_ms": 2.0}]
    replay = replay_frame(spark, rows)
    record_sends = [(0, 1), (4, 1), (11, 1), (13, 1), (27, 1)]
    sends = spark.createDataFrame(
        [("c1", "orders", None, 0, 0, 5, 0, T10, "create_time", record_sends, 0, "d1", 1, None, "i")],
        BATCH_SEND_TIMES,
    )
    by_batch = record_sends_by_batch(sends)
    for linger_ms, expected in ((5.0, [1.0, 4.0, 5.0, 8.0, 12.0]), (0.0, [1.0, 2.0, 2.0, 8.0, 12.0])):
        actual = latency_quantiles(replay, [0.0, 0.25, 0.5, 0.75, 1.0], by_batch, linger_ms)
        assert [r["latency_ms"] for r in actual.orderBy("q").collect()] == pytest.approx(expected)
    # each cluster with its own producers' linger.ms (conf clusters.<name>.producer): the same batch on cluster c2,
    # whose producers do not linger, next to c1's
    replay = replay.unionByName(replay.withColumn("cluster", F.lit("c2")))
    by_batch = by_batch.unionByName(by_batch.withColumn("cluster", F.lit("c2")))
    actual = latency_quantiles(replay, [0.0, 0.25, 0.5, 0.75, 1.0], by_batch, PerCluster(5.0, {"c2": 0.0}))
    by_cluster = {c: [r["latency_ms"] for r in actual.where(F.col("cluster") == c).orderBy("q").collect()]
                  for c in ("c1", "c2")}  # fmt: skip
    assert by_cluster == {
        "c1": pytest.approx([1.0, 4.0, 5.0, 8.0, 12.0]),
        "c2": pytest.approx([1.0, 2.0, 2.0, 8.0, 12.0]),
    }


def test_reduced_isr_spans_run_from_the_first_reduced_isr_to_the_next_full_one(spark):
    from ackreplay.transforms.gold import isr_segments, reduced_isr_spans

    minute = dt.timedelta(minutes=1)
    isr = isr_frame(
        spark,
        [
            ("orders", 0, 1, [1, 2, 3], T10),
            ("orders", 0, 1, [1], T10 + minute),  # reduced ...
            ("orders", 0, 1, [1, 2], T10 + 2 * minute),  # ... still reduced: one span
            ("orders", 0, 1, [1, 2, 3], T10 + 3 * minute),  # full again
            ("orders", 0, 0, [1], T10 + 3 * minute + minute / 2),  # a deposed leader's late line: not the ISR
            ("orders", 0, 2, [2, 3], T10 + 4 * minute),  # reduced until the cluster's data ends (10:10)
            ("orders", 1, 1, [1, 2], T10),  # topics.txt gives 3 replicas: reduced from its first line
            ("orders", 1, 1, [1, 2, 3], T10 + minute),
            ("audit", 0, 1, [1, 2], T10),  # no replicas known: the largest ISR logged (2) is full
            ("audit", 0, 1, [1], T10 + minute),
            ("audit", 0, 1, [1, 2], T10 + 2 * minute),
        ],
    )
    until = spark.createDataFrame([("c1", int((T10 + 10 * minute).replace(tzinfo=dt.UTC).timestamp() * 1e6))],
                                  "cluster string, end_us long")  # fmt: skip
    partitions = spark.createDataFrame(
        [("c1", "orders", 0, [1, 2, 3]), ("c1", "orders", 1, [1, 2, 3])],
        "cluster string, topic string, partition int, replicas array<int>",
    )
    expected = spark.createDataFrame(
        [
            ("c1", "orders", 0, T10 + minute, T10 + 3 * minute),
            ("c1", "orders", 0, T10 + 4 * minute, T10 + 10 * minute),
            ("c1", "orders", 1, T10, T10 + minute),
            ("c1", "audit", 0, T10 + minute, T10 + 2 * minute),
        ],
        "cluster string, topic string, partition int, start timestamp, end timestamp",
    )
    spans = reduced_isr_spans(isr_segments(isr, until), partitions)
    assert_df_equality(spans, expected, ignore_row_order=True, ignore_nullable=True)


def test_policy_summary_counts_a_rejected_batch_a_retry_delivered_in_the_latency_and_the_rest_apart(spark):
    """A rejected batch with a latency was appended by the producer's retries (ackreplay/replay/retries.py): the
    producer saw it acknowledged, so it is in `n` and the latency; one without is `undelivered`."""
    replay = replay_frame(
        spark,
        [
            _row(policy="min.insync", latency=4.0),
            _row(policy="min.insync", outcome="not_enough_replicas", latency=2000.0, retried=True),
            _row(policy="min.insync", outcome="not_enough_replicas"),
        ],
    )
    parts = partitions_frame(spark, [("c1", "orders", 0, 2)])
    isr = isr_frame(spark, [("orders", 0, 3, [1, 2], T10 - dt.timedelta(minutes=30))])
    actual = policy_summary(replay, parts, availability(replay, isr, parts)).select(
        "policy", "produces", "n", "acked_records", "p99_ms", "broker_p99_ms", "acked_bytes", "not_enough_replicas",
        "undelivered",
    )  # fmt: skip
    expected = spark.createDataFrame(
        [("min.insync", 3, 2, 2, 1980.04, 1980.04, 100, 2, 1)],
        "policy string, produces bigint, n bigint, acked_records bigint, p99_ms double, broker_p99_ms double, "
        "acked_bytes bigint, not_enough_replicas bigint, undelivered bigint",
    )
    assert_approx_df_equality(actual, expected, 1e-9, ignore_nullable=True)


def test_leader_silence_by_topic_is_the_longest_pause_of_a_broker_that_led_the_topic(spark):
    """Broker 1 led `orders` from 10:00:00 to 10:00:30, logging a line every 0.5 s (a running leader) but nothing
    from 10:00:10 to 10:00:19.5 (9.5 s, a paused JVM) and from 10:00:38 to :40, after orders' last produce (not
    counted); broker 2, which led `audit` (produces at :05 and :06), logged nothing from :05 to :08. `events`, led by
    broker 3, which never paused, gets no row."""
    from ackreplay.transforms.gold import leader_silence_by_topic

    def at(seconds):
        return T10 + dt.timedelta(seconds=seconds)

    replay = spark.createDataFrame(
        [("c1", "orders", 1, at(0)), ("c1", "orders", 1, at(30)), ("c1", "audit", 2, at(5)), ("c1", "audit", 2, at(6)),
         ("c1", "events", 3, at(1)), ("c1", "events", 3, at(50))],
        "cluster string, topic string, broker_id int, t_start timestamp",
    )  # fmt: skip
    every_half_second = [x * 0.5 for x in range(121)]
    request_lines = spark.createDataFrame(
        [("c1", 1, at(s)) for s in every_half_second if s <= 10 or 19.5 <= s <= 38 or s >= 40]
        + [("c1", 2, at(s)) for s in every_half_second if s <= 5 or s >= 8]
        + [("c1", 3, at(s)) for s in every_half_second],
        "cluster string, broker_id int, t_local_done timestamp",
    )  # fmt: skip
    expected = spark.createDataFrame(
        [("c1", "orders", 9_500.0), ("c1", "audit", 3_000.0)], "cluster string, topic string, leader_silence_ms double"
    )
    assert_df_equality(
        leader_silence_by_topic(replay, request_lines), expected, ignore_row_order=True, ignore_nullable=True
    )
