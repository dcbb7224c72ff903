"""The decision (ackreplay/gold/decision.py) on hand-made policy_summary rows: frontier, target met or not,
the closest policy, a P999 from too few records, a cluster whose self-check failed."""

from __future__ import annotations

import pytest

from ackreplay.config import DecisionTarget, parse_config
from ackreplay.gold.decision import decide, decision_lines


def _row(topic, policy, p999, lost=0, below=0, undelivered=0, cluster="c1", self_check="passed"):
    return {"cluster": cluster, "topic": topic, "policy": policy, "p999_ms": p999, "loss_kafka_election": lost,
            "under_min_isr_acks": below, "not_enough_replicas": undelivered, "undelivered": undelivered,
            "self_check": self_check}  # fmt: skip


ORDERS = [
    _row("orders", "acks=all", 900.0),
    _row("orders", "acks=1", 40.0, lost=12),
    _row("orders", "quorum=2", 150.0, lost=0, below=3),
    _row("orders", "min.insync", 150.0, lost=0, below=3),  # equal to quorum=2: neither beats the other
    _row("orders", "acks=all@lag=30000", 950.0, undelivered=2),  # beaten by acks=all on every count
]
AUDIT = [
    _row("audit", "acks=all", 400.0),  # beaten by quorum=2: faster, no more risk
    _row("audit", "acks=1", 30.0, lost=5),
    _row("audit", "quorum=2", 250.0),
]


def test_the_frontier_keeps_what_no_other_policy_beats():
    [orders] = decide(ORDERS, None)
    assert orders.frontier == ["acks=all", "acks=1", "quorum=2", "min.insync"]
    assert orders.meeting == [] and orders.recommended is None and orders.closest is None
    lines = decision_lines([orders], None)
    assert lines[0].startswith("decision: no target set")
    assert lines[1] == (
        "  c1 / orders: frontier acks=all, acks=1, quorum=2, min.insync; caution: P999 without the rejected batches left"
        " undelivered under acks=all@lag=30000 (2): a lower bound there"
    )


def test_a_target_recommends_the_fastest_policy_meeting_it_per_topic():
    target = DecisionTarget(p999_ms=200, max_lost_acks=0)
    orders, audit = decide(ORDERS + AUDIT, target)
    assert orders.meeting == ["quorum=2", "min.insync"] and orders.recommended == "quorum=2"
    assert audit.meeting == [] and audit.closest == "quorum=2"  # P999 250 ms: 25% over; acks=1: 5 lost acks
    assert audit.misses == {"acks=all": "P999 400.0 ms > 200 ms", "acks=1": "5 lost acks > 0",
                            "quorum=2": "P999 250.0 ms > 200 ms"}  # fmt: skip
    assert decision_lines([orders, audit], target) == [
        "decision for the target P999 <= 200 ms, lost acks <= 0: quorum=2 meets it on 1 of 2 topics;"
        " nothing meets it on c1 / audit",
        "  c1 / orders: frontier acks=all, acks=1, quorum=2, min.insync; meets the target: quorum=2, min.insync;"
        " recommended: quorum=2; caution: P999 without the rejected batches left undelivered under"
        " acks=all@lag=30000 (2): a lower bound there",
        "  c1 / audit: frontier acks=1, quorum=2; nothing meets the target; closest: quorum=2 (P999 250.0 ms > 200 ms)",
    ]


def test_risk_bounds_alone_and_ties_broken_by_the_risks():
    target = DecisionTarget(max_under_min_isr_acks=0, max_rejections=0)
    [orders] = decide(ORDERS, target)
    assert orders.meeting == ["acks=1", "acks=all"]  # the only bounds are on risks acks=1 does not take
    assert decision_lines([orders], target)[0] == (
        "decision for the target acks below min ISR <= 0, NotEnoughReplicas rejections <= 0: acks=1 meets it on 1 of 1 topic"
    )


def test_a_p999_from_too_few_records_is_not_judged_on_latency():
    rows = [_row("t", "acks=all", None), _row("t", "acks=1", None, lost=1), _row("t", "quorum=2", 80.0)]
    [t] = decide(rows, DecisionTarget(p999_ms=100))
    assert t.frontier == ["quorum=2"] and t.unjudged == ["acks=all", "acks=1"]
    assert t.meeting == ["quorum=2"]
    assert t.misses["acks=all"] == "P999 not measured (fewer than 1,000 records)"
    [t] = decide(rows[:2], DecisionTarget(p999_ms=100))
    assert t.meeting == [] and t.closest == "acks=all"  # both miss by "not measured"; reading order breaks the tie
    [t] = decide(rows, DecisionTarget(max_lost_acks=0))  # no latency bound: a P999 not measured comes last
    assert t.meeting == ["quorum=2", "acks=all"]


def test_a_policy_that_acked_nothing_is_no_candidate():
    # quorum=2 on an RF 2 topic (KIP-250: 1 < Q < RF) acks nothing: zero risk, no P999
    rows = [
        {**_row("t", "acks=all", 16_543.4, undelivered=577), "n": 13_461},
        {**_row("t", "quorum=2", None), "n": 0},
        {**_row("t", "acks=1", 16_536.6, lost=362), "n": 14_038},
    ]
    target = DecisionTarget(p999_ms=1000, max_lost_acks=0)
    [t] = decide(rows, target)
    assert t.no_acks == ["quorum=2"] and t.unjudged == [] and t.frontier == ["acks=all", "acks=1"]
    assert t.meeting == [] and t.closest == "acks=all"
    assert decision_lines([t], target)[1] == (
        "  c1 / t: frontier acks=all, acks=1 (no produce acked, not a candidate: quorum=2); nothing meets the target;"
        " closest: acks=all (P999 16,543.4 ms > 1,000 ms); caution: P999 without the rejected batches left"
        " undelivered under acks=all (577): a lower bound there"
    )


def test_no_decision_on_a_cluster_whose_replay_failed_its_self_check():
    rows = [_row("t", "acks=all", 10.0, cluster="bad", self_check="FAILED, accepted untrusted: P999 -15%")]
    target = DecisionTarget(p999_ms=300, max_lost_acks=0)
    decisions = decide(rows + AUDIT, target)
    assert decisions[0].refused == "the replay's self-check failed (FAILED, accepted untrusted: P999 -15%)"
    lines = decision_lines(decisions, target)
    assert lines[0].endswith("quorum=2 meets it on 1 of 1 topic")  # the refused cluster's topic is not counted
    assert lines[1] == "  bad / t: no decision: the replay's self-check failed (FAILED, accepted untrusted: P999 -15%)"


def test_a_p999_without_send_times_is_decided_with_a_caution():
    """Where fewer than half the acked produces had a send time, P999 is mostly the broker's view: the decision
    says so; a topic with every send time, or with half of them, carries no caution."""

    def timed(rows, known):
        return [{**r, "n": 1000, "send_time_known": known} for r in rows]

    target = DecisionTarget(p999_ms=200, max_lost_acks=0)
    orders, audit = decide(timed(ORDERS, 499) + timed(AUDIT, 500), target)
    assert (orders.send_time_share, audit.send_time_share) == (0.499, 0.5)
    lines = decision_lines([orders, audit], target)
    assert lines[1] == (
        "  c1 / orders: frontier acks=all, acks=1, quorum=2, min.insync; meets the target: quorum=2, min.insync;"
        " recommended: quorum=2; caution: only 49.9% of the acked produces had a send time, so P999 is mostly the"
        " broker's view and producers saw more (give the records' CreateTime: README \"What the producer sees\");"
        " caution: P999 without the rejected batches left undelivered under acks=all@lag=30000 (2): a lower bound there"
    )
    assert "caution" not in lines[2]
    # the least covered policy of a topic counts
    [mixed] = decide([{**AUDIT[0], "n": 10, "send_time_known": 10}, {**AUDIT[1], "n": 10, "send_time_known": 2}], None)
    assert mixed.send_time_share == 0.2


def test_the_target_is_read_from_the_conf_and_checked():
    config = parse_config({"report": {"target": {"p999_ms": 200, "max_lost_acks": 0}}})
    assert config.report.target == DecisionTarget(p999_ms=200.0, max_lost_acks=0)
    assert parse_config({}).report.target is None
    with pytest.raises(ValueError, match="a target sets at least one of"):
        parse_config({"report": {"target": {}}})
    with pytest.raises(ValueError, match="report.target.max_lost_acks"):
        parse_config({"report": {"target": {"max_lost_acks": -1}}})


def test_the_console_summary_says_how_many_acked_produces_had_a_send_time():
    from ackreplay.gold.stage import format_summary

    rows = [{**r, "n": 31_466, "send_time_known": known} for r, known in ((AUDIT[0], 31_466), (AUDIT[1], 0))]
    notes = [line for line in format_summary(rows) if line.startswith("    send times")]
    assert notes == [
        f"    send times (CreateTime or a client log) for 0 of the 31,466 acked produces (0.0%) under {AUDIT[1]['policy']}:"
        " the others' latency starts when the broker read their request, which misses the time they waited in the"
        ' producer behind slower responses (README "What the producer sees")'
    ]
    assert not [line for line in format_summary(rows[:1]) if line.startswith("    send times")]
    # a few produces without one out of many: the counts say so, and the share is not rounded up to 100.0%
    rows = [{**r, "n": 28_263, "send_time_known": known} for r, known in ((AUDIT[0], 28_263), (AUDIT[1], 28_259))]
    (note,) = [line for line in format_summary(rows) if line.startswith("    send times")]
    assert f"for 28,259 of the 28,263 acked produces (99.9%) under {AUDIT[1]['policy']}:" in note


def test_the_console_summary_without_v_keeps_the_main_columns_and_every_policy():
    from ackreplay.gold.stage import BRIEF_COLUMNS, format_summary
    from ackreplay.pipeline import StepTimes

    rows = [{**r, "n": 31_466, "send_time_known": 31_466} for r in AUDIT]
    brief = format_summary(rows, BRIEF_COLUMNS)
    assert [c[0] for c in BRIEF_COLUMNS] == [
        "policy", "n", "p99 ms", "p999 ms", "Δp999 ms", "broker p999 ms", "<minISR acks", "loss kafka",
        "loss longest", "NER", "timeouts",
    ]  # fmt: skip
    table = [line.split() for line in brief[1:]]
    assert table[0][:4] == ["policy", "n", "p99", "ms"] and len(table) == 1 + len(AUDIT)
    assert [line[0] for line in table[1:]] == [r["policy"] for r in AUDIT]
    steps = StepTimes()
    steps.seconds = {"ingest": 12.04, "replay": 3.5}
    assert steps.summary_lines(20.0, detail=False) == ["time by step: ingest 12.0 s, replay 3.5 s, other 4.5 s"]


def test_rejected_batches_a_retry_delivered_carry_no_caution():
    """A policy's P999 counts the rejected batches its retries got appended (ackreplay/replay/retries.py): only
    the ones left undelivered make it a lower bound."""
    rows = [
        {**_row("t", "acks=all", 900.0), "not_enough_replicas": 40, "undelivered": 0},
        {**_row("t", "min.insync", 700.0), "not_enough_replicas": 40, "undelivered": 3},
    ]
    [t] = decide(rows, None)
    assert t.rejected == {"min.insync": 3}
    assert decision_lines([t], None)[1] == (
        "  c1 / t: frontier min.insync; caution: P999 without the rejected batches left undelivered under"
        " min.insync (3): a lower bound there"
    )


def test_keyless_records_through_a_leader_that_did_not_run_carry_the_partitioners_caution():
    """A topic of keyless records one of whose leaders did not run for 9.5 s (a paused JVM): the what-ifs keep
    each batch's recorded partition, which Kafka's partitioner would have changed, and the caution points at the
    records placed again by the partitioner. Keyed records, or keyless ones without such a pause, carry no
    caution."""

    def rows(partitioning, silence):
        return [
            {**_row("events", "acks=all", 900.0), "partitioning": partitioning, "leader_silence_ms": silence},
            {**_row("events", "acks=1", 40.0, lost=3), "partitioning": partitioning, "leader_silence_ms": silence},
        ]

    [paused] = decide(rows("keyless", 9_512.4), None)
    assert paused.keyless_leader_silence_ms == 9_512.4
    assert decision_lines([paused], None)[1] == (
        "  c1 / events: frontier acks=all, acks=1; caution: keyless records and a leader that did not run for 9.5 s:"
        " Kafka's partitioner (KIP-794) sends keyless records away from partitions whose queues back up, which"
        " differs with the policy, and the replay keeps each batch on its recorded partition, so another policy's"
        " P99 there can be far off; the records placed again by the partitioner (shown with the topic's summary;"
        ' policy_summary placed_*) are the better guide (README "Keyless records")'
    )
    for quiet in (rows("keyed", 9_512.4), rows("keyless", None)):
        [decision] = decide(quiet, None)
        assert decision.keyless_leader_silence_ms is None
        assert decision_lines([decision], None)[1] == "  c1 / events: frontier acks=all, acks=1"


def test_the_report_says_which_linger_ms_each_clusters_figures_rest_on():
    from ackreplay.gold.report import linger_note
    from ackreplay.transforms.common import PerCluster

    assert linger_note(5.0, ["a", "b"]).startswith("The producers' linger.ms as replayed: 5 ms (conf")
    lingers = PerCluster(5.0, {"perf": 0.0, "other": 0.0})
    assert linger_note(lingers, ["perf"]).startswith("The producers' linger.ms as replayed: 0 ms (conf")
    assert linger_note(lingers, ["lab", "perf", "other"]).startswith(
        "The producers' linger.ms as replayed: 0 ms for other, perf; 5 ms for lab (conf"
    )
    assert linger_note(lingers, []).startswith("The producers' linger.ms as replayed: 5 ms (conf")
