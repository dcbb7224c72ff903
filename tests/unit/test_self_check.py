"""The replay's self-check: recorded acks=all replayed against the broker's own ack, per cluster."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from ackreplay.config import SelfCheckSettings
from ackreplay.replay.self_check import _isr_failures, check_isr_resimulation, check_replay

T0 = datetime(2026, 11, 20, 12, 0, 0)
REPLAY_DDL = (
    "cluster string, topic string, partition int, policy string, recorded_acks int, outcome string, "
    "t_start timestamp, t_local_done timestamp, t_ack_observed timestamp, t_response timestamp"
)


def _produce(cluster, partition, i, observed_wait_ms, replayed_wait_ms, outcome="acked", policy="acks=all"):
    start = T0 + timedelta(seconds=i)
    done = start + timedelta(milliseconds=1)
    return (cluster, "orders", partition, policy, -1, outcome, start, done,
            done + timedelta(milliseconds=observed_wait_ms), done + timedelta(milliseconds=replayed_wait_ms))  # fmt: skip


def _isr_change(cluster, partition, at, kind):
    return (cluster, "orders", partition, kind, at)  # the isr_changes columns the windows read


@pytest.fixture(scope="module")
def replay(spark):
    rows = []
    # good: 300 produces, every replayed ack within 1 ms of the broker's; P999 equal
    rows += [_produce("good", 0, i, 5 + i % 7, 5 + i % 7 + 0.5) for i in range(300)]
    rows += [_produce("good", 0, i, 5, 900, policy="acks=1") for i in range(300)]  # another policy: not counted
    # bad: 280 right, then 20 produces right after an ISR expansion of partition 1 replayed 50 ms late
    rows += [_produce("bad", 0, i, 4, 4) for i in range(280)]
    rows += [_produce("bad", 1, 1000 + i, 4, 54) for i in range(19)]
    rows += [_produce("bad", 1, 1019, 4, 0, outcome="timeout")]  # a timeout the broker never gave: a miss
    # small: 10 produces all wrong, too few to judge
    rows += [_produce("small", 0, i, 4, 400) for i in range(10)]
    replayed = spark.createDataFrame(rows, REPLAY_DDL)
    changes = spark.createDataFrame(
        [_isr_change("bad", 1, T0 + timedelta(seconds=1000), "expand"), _isr_change("bad", 0, T0, "shrink")],
        "cluster string, topic string, partition int, change_kind string, t_log timestamp",
    )
    return replayed, changes


def test_each_cluster_is_judged_on_its_own_recorded_acks_all(replay):
    check = check_replay(*replay, SelfCheckSettings(), metric_clusters=[])
    by = {c.cluster: c for c in check.clusters}
    assert [c.cluster for c in check.clusters] == ["bad", "good", "small"]
    good, bad, small = by["good"], by["bad"], by["small"]
    assert (good.n, good.not_acked, good.within_2ms, good.failures) == (300, 0, 1.0, ())
    assert good.p999_replayed_ms == pytest.approx(good.p999_observed_ms + 0.5)
    assert (bad.n, bad.not_acked, bad.within_2ms) == (300, 1, 280 / 300)
    # replayed P999 among the 299 acked: interpolated between 54 and 54 ms; observed 4 ms
    assert (bad.p999_replayed_ms, bad.p999_observed_ms) == (pytest.approx(54.0), pytest.approx(4.0))
    assert bad.failures == ("93.33% within 2 ms < 97%", "P999 off by more than 10%")
    assert (small.judged, small.failures, small.n) == ("too few produces", (), 10)
    assert [c.cluster for c in check.failed] == ["bad"]
    # where the misses fall: only the failed cluster, by window
    # (15 s windows: the expansion covers the late produces at 1000-1014 s, the shrink partition 0's first 15)
    assert [(w["cluster"], w["window"], w["n"], w["within_2ms"]) for w in check.windows] == [
        ("bad", "after an ISR expansion", 15, 0.0),
        ("bad", "after an ISR shrink", 15, 1.0),
        ("bad", "quiet", 270, 265 / 270),
    ]
    lines = "\n".join(check.summary_lines())
    assert "bad: n=300, 93.33% within 2 ms, 1 not acked" in lines and "FAILED" in lines
    assert "small: n=10" in lines and "not judged (too few produces)" in lines
    assert "bad" in check.refusal() and "good" not in check.refusal()


def test_a_jmx_timeline_is_reported_not_judged(replay):
    check = check_replay(*replay, SelfCheckSettings(), metric_clusters=["bad"])
    bad = next(c for c in check.clusters if c.cluster == "bad")
    assert (bad.judged, bad.failures) == ("JMX timeline", ())
    assert not check.failed and check.windows == []


def test_thresholds_come_from_the_conf(replay):
    lenient = SelfCheckSettings(min_within_2ms=0.9, max_p999_error=20.0)
    assert not check_replay(*replay, lenient, metric_clusters=[]).failed
    off = check_replay(*replay, SelfCheckSettings(enabled=False), metric_clusters=[])
    assert [c.cluster for c in off.failed] == ["bad"]  # still shown; the CLI does not refuse
    assert "self-check off" in "\n".join(off.summary_lines())


def test_the_brokers_rejections_must_be_the_replays(replay):
    """Of a cluster's NOT_ENOUGH_REPLICAS answers (200 or more), at least 99% must be rejected by the replayed
    acks=all: "good" 681 of 682 (the keyless 3.6.2 corpus trace's figure) passes, 300 of 320 fails a cluster
    whose acks are right, 5 of 10 is too few to judge; a run whose rejections were not counted judges none."""
    lenient = SelfCheckSettings(min_within_2ms=0.9, max_p999_error=20.0)  # the acks pass everywhere
    rejections = {"good": (682, 681), "bad": (320, 300), "small": (10, 5)}
    check = check_replay(*replay, lenient, metric_clusters=[], rejections=rejections)
    by = {c.cluster: c for c in check.clusters}
    assert {c: by[c].rejections for c in by} == rejections
    assert [c.cluster for c in check.failed] == ["bad"]
    assert by["bad"].failures == ("300 of 320 NOT_ENOUGH_REPLICAS answers rejected by the replay < 99%",)
    lines = check.summary_lines()
    assert "      NOT_ENOUGH_REPLICAS answers: 682, rejected by the replayed acks=all: 681 (99.85%; >= 99%)" in lines
    assert (
        "      NOT_ENOUGH_REPLICAS answers: 10, rejected by the replayed acks=all: 5 (50.00%; >= 99%) (fewer than 200:"
        " not judged)" in lines
    )
    assert not check_replay(*replay, lenient, metric_clusters=[], rejections=None).failed


def test_a_window_where_nothing_replayed_as_acked_prints_a_dash():
    from ackreplay.replay.self_check import ClusterTruth, SelfCheck

    check = SelfCheck(SelfCheckSettings())
    check.clusters = [ClusterTruth("c1", 300, 300, 0.0, None, 4.0, "judged", ("0.00% within 2 ms < 97%",))]
    check.windows = [{"cluster": "c1", "window": "quiet", "n": 300, "within_2ms": 0.0,
                      "p999_replayed_ms": None, "p999_observed_ms": 4.0}]  # fmt: skip
    lines = check.summary_lines()
    assert (
        "    c1: n=300, 0.00% within 2 ms, 300 not acked, P999 - replayed vs 4.0 ms observed  FAILED: 0.00% within 2 ms < 97%"
        in lines
    )
    assert lines[-1].split() == ["c1", "quiet", "300", "0.00%", "-", "4.0", "ms"]


def test_the_verdict_rows_say_which_clusters_gold_may_use():
    from ackreplay.replay.self_check import NO_TRUTH, ClusterTruth, SelfCheck

    failed = ClusterTruth(
        "bad", 300, 2, 0.9, 50.0, 10.0, "judged", ("90.00% within 2 ms < 97%", "P999 off by more than 10%")
    )
    good = ClusterTruth("good", 300, 0, 0.995, 10.0, 10.0, "judged")
    few = ClusterTruth("few", 20, 0, 0.5, 9.0, 10.0, "too few produces")
    check = SelfCheck(SelfCheckSettings(), [failed, good, few])

    def verdicts(rows):
        return {r["cluster"]: (r["judged"], r["failures"], r["trusted"], r["accepted_untrusted"]) for r in rows}

    refused = verdicts(check.rows("r1", False, ["bad", "good", "few", "acks1-only"]))
    assert refused == {
        "bad": ("judged", "90.00% within 2 ms < 97%; P999 off by more than 10%", False, False),
        "good": ("judged", None, True, False),
        "few": ("too few produces", None, True, False),
        "acks1-only": (NO_TRUTH, None, True, False),
    }
    assert verdicts(check.rows("r1", True, ["bad"]))["bad"][2:] == (False, True)
    off = SelfCheck(SelfCheckSettings(enabled=False), [failed])  # the check switched off accepts, and marks
    assert verdicts(off.rows("r1", False, ["bad"]))["bad"][2:] == (False, True)


def test_the_replay_summary_prints_the_rejection_ground_truth_where_there_is_one():
    from ackreplay.replay.stage import ReplayReport

    lines = ReplayReport("r", rejections={"rejected": 10, "rejected_replayed": 9}).summary_lines()
    assert lines[1] == (
        "  rejections: 10 recorded acks=all produces answered NOT_ENOUGH_REPLICAS, 9 of them rejected by the"
        " replayed acks=all (committed ISR below min ISR)"
    )
    assert len(ReplayReport("r", rejections={"rejected": 0, "rejected_replayed": 0}).summary_lines()) == 1
    assert len(ReplayReport("r", rejections={}).summary_lines()) == 1


ISR_DDL = (
    "cluster string, topic string, partition int, leader_epoch int, base_offset bigint, policy string, "
    "outcome string, t_local_done timestamp, t_ack timestamp"
)


def _acks(cluster, policy, waits_ms, outcome="acked"):
    """One produce per wait (base offsets 0, 1, ...), acknowledged `wait` ms after its append."""
    return [
        (
            cluster,
            "orders",
            0,
            1,
            i,
            policy,
            outcome,
            T0 + timedelta(seconds=i),
            T0 + timedelta(seconds=i, milliseconds=w),
        )
        for i, w in enumerate(waits_ms)
    ]


def test_the_isr_resimulated_at_the_clusters_own_lag_must_ack_as_the_recorded_isr(spark):
    """`acks=all@lag=<own>` against `acks=all` on the produces acks=all acks: within 2 ms of each other, and
    the P999s. `same`: 1 ms apart everywhere; `late`: 10 of 300 held 3 s by a shrink the recording did not
    have (96.67% < 98%, P999 3,005 vs 5 ms); `short`: a produce the re-simulation rejects is a miss; `other`
    replays another lag only (not judged); a cluster without its own lag replayed is not looked at."""
    waits = [5.0] * 300
    rows = _acks("same", "acks=all", waits) + _acks("same", "acks=all@lag=3000", [6.0] * 300)
    rows += _acks("late", "acks=all", waits) + _acks("late", "acks=all@lag=5000", [5.0] * 290 + [3005.0] * 10)
    rows += _acks("short", "acks=all", waits) + _acks("short", "acks=all@lag=3000", [5.0] * 299)
    rows += _acks("other", "acks=all", waits) + _acks("other", "acks=all@lag=30000", waits)
    result = spark.createDataFrame(rows, ISR_DDL)
    figures = check_isr_resimulation(result, {"same": 3000.0, "late": 5000.0, "short": 3000.0, "other": 10000.0})
    assert figures["same"] == {
        "lag_ms": 3000.0, "n": 300, "within_2ms": 1.0, "p999_resimulated_ms": 6.0, "p999_recorded_ms": 5.0
    }  # fmt: skip
    late = figures["late"]
    assert (late["n"], late["within_2ms"], late["p999_resimulated_ms"], late["p999_recorded_ms"]) == (
        300,
        290 / 300,
        3005.0,
        5.0,
    )
    assert (figures["short"]["n"], figures["short"]["within_2ms"]) == (300, 299 / 300)
    assert figures["other"]["within_2ms"] == 0.0 and figures["other"]["p999_resimulated_ms"] is None
    settings = SelfCheckSettings()
    assert _isr_failures(figures["same"], settings) == []
    assert _isr_failures(figures["short"], settings) == []
    assert _isr_failures(figures["late"], settings) == [
        "ISR re-simulated at its own lag: 96.67% within 2 ms of the recorded ISR's acks < 98%",
        "ISR re-simulated at its own lag: P999 off by more than 10%",
    ]
    assert _isr_failures(figures["other"], settings)[1] == "ISR re-simulated at its own lag: P999 off by more than 10%"
    check = check_replay(result.withColumns({"recorded_acks": F.lit(1), "t_ack_observed": F.lit(None).cast("timestamp"), "t_start": F.col("t_local_done"), "t_response": F.col("t_ack")}),
                         spark.createDataFrame([], "cluster string, topic string, partition int, change_kind string, t_log timestamp"),
                         settings, metric_clusters=["other"], own_lag_ms={"late": 5000.0, "other": 30000.0})  # fmt: skip
    assert [(c.cluster, c.judged, c.passed) for c in check.clusters] == [
        ("late", "no recorded acks=all produce", False)
    ]
