"""KIP-637's routing what-if (transforms/routing.py): hand-made ISR states and rejections, hand-computed rows."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.gold.stage import keyless_in_records, keyless_topics
from ackreplay.schemas.gold import ROUTING
from ackreplay.schemas.tables import PRODUCE_REQUESTS
from ackreplay.transforms.common import conform
from ackreplay.transforms.gold import isr_segments, observed_until
from ackreplay.transforms.routing import routing
from tests.helpers import assert_df_equality
from tests.unit.test_gold import T10, _row, isr_frame, partitions_frame, replay_frame
from tests.unit.test_lakehouse import _row as contract_row

MINUTE = dt.timedelta(minutes=1)
SECOND = dt.timedelta(seconds=1)


def _rejected(topic: str, partition: int, t: dt.datetime, line: int, nbytes: int, policy: str = "acks=all") -> dict:
    return {**_row(policy=policy, outcome="not_enough_replicas", t=t, topic=topic, partition=partition, nbytes=nbytes),
            "line_number": line}  # fmt: skip


def _acked(topic: str, partition: int, t: dt.datetime, line: int, latency: float, policy: str = "acks=all") -> dict:
    return {**_row(policy=policy, t=t, topic=topic, partition=partition, latency=latency), "line_number": line}


def _request(
    topic: str,
    partition: int,
    t: dt.datetime,
    line: int,
    nbytes: int,
    error: int = 19,
    client: str = "a",
    ack: dt.datetime | None = None,
) -> dict:
    """A produce_requests row of an acks=all request: rejected (NOT_ENOUGH_REPLICAS) unless `error` is 0."""
    return contract_row(PRODUCE_REQUESTS, cluster="c1", topic=topic, partition=partition, acks=-1, error_code=error,
                        base_offset=-1 if error else line, records_size_bytes=nbytes, t_start=t, t_local_done=t,
                        t_ack_observed=ack, client_id=client, source_file="r", line_number=line)  # fmt: skip


def _routing(spark, replay_rows, isr_rows, partition_rows, recorded=(), keyless=("orders", "solo")):
    replay = replay_frame(spark, replay_rows)
    isr = isr_frame(spark, isr_rows)
    requests = spark.createDataFrame([_request(**r) for r in recorded], PRODUCE_REQUESTS)
    segments = isr_segments(isr, observed_until(replay, isr))
    parts = partitions_frame(spark, partition_rows)
    return routing(replay, requests, segments, parts, F.col("topic").isin(*keyless), "hour")


def test_keyless_batches_go_to_a_writable_partition_keyed_ones_wait_for_their_own(spark):
    """Orders (keyless, min ISR 2): p0 below min ISR from 10:10 to 10:20, p1 and p3 always writable, p2 never.
    acks=all rejects a batch on p0 and one on p2 at 10:15, and the broker really rejected one on p0 at 10:12
    (produce_requests). All three go to p1 or p3: the replayed produces there within 1 s of 10:15 took 7 ms
    (p1, 0.5 s later; its 99 ms produce 2 s later is too far) and 3 ms (p3, 0.3 s earlier): fastest 3, average
    5; nothing on them near 10:12 (no latency). Today the p0 batches wait 5 and 8 minutes, the p2 one forever.
    Keyed (keyed records, min ISR 2): k0 below min ISR until 10:05, a batch rejected at 10:01 waits 4 minutes
    though k1 was writable. Solo (keyless, one partition, writable from 10:40): a batch rejected at 10:30 has
    nowhere to go and waits 10 minutes; no partition was writable for 40 of the 50 minutes of data. acks=1 gets
    no rows (it never rejects); acks=all@lag's one rejection is that policy's only append (its ISR is the replay's,
    known only at its appends): no other partition known writable, never writable again, no time known."""
    replay_rows = [
        _rejected("orders", 0, T10 + 15 * MINUTE, 1, 100),
        _rejected("orders", 2, T10 + 15 * MINUTE, 2, 200),
        _acked("orders", 1, T10 + 15 * MINUTE + SECOND / 2, 3, 7.0),
        _acked("orders", 1, T10 + 15 * MINUTE + 2 * SECOND, 4, 99.0),
        _acked("orders", 3, T10 + 15 * MINUTE - 3 * SECOND / 10, 5, 3.0),
        _acked("orders", 1, T10 + 50 * MINUTE, 6, 1.0),  # the data's end
        _acked("orders", 0, T10 + 15 * MINUTE, 7, 1.0, policy="acks=1"),
        _rejected("orders", 0, T10 + 15 * MINUTE, 8, 100, policy="acks=all@lag=3000"),
        _rejected("keyed", 0, T10 + MINUTE, 9, 50),
        _rejected("solo", 0, T10 + 30 * MINUTE, 10, 100),
    ]
    isr_rows = [
        ("orders", 0, 5, [1, 2, 3], T10), ("orders", 0, 5, [1], T10 + 10 * MINUTE),
        ("orders", 0, 5, [1, 2], T10 + 20 * MINUTE), ("orders", 1, 5, [2, 3], T10), ("orders", 2, 5, [3], T10),
        ("orders", 3, 5, [1, 3], T10), ("keyed", 0, 5, [1], T10), ("keyed", 0, 5, [1, 2], T10 + 5 * MINUTE),
        ("keyed", 1, 5, [1, 2], T10), ("solo", 0, 5, [1], T10), ("solo", 0, 5, [1, 2], T10 + 40 * MINUTE),
    ]  # fmt: skip
    partition_rows = [("c1", "orders", p, 2) for p in range(4)] + [("c1", "keyed", p, 2) for p in range(2)]
    recorded = [{"topic": "orders", "partition": 0, "t": T10 + 12 * MINUTE, "line": 11, "nbytes": 300}]
    actual = _routing(spark, replay_rows, isr_rows, partition_rows + [("c1", "solo", 0, 2)], recorded)

    known = 50 * 60_000.0
    ddl = (
        "topic string, policy string, partitioning string, rejections bigint, recorded_rejections bigint, "
        "rerouted bigint, rerouted_bytes bigint, held bigint, never_writable bigint, wait_today_ms double, "
        "wait_kip637_ms double, saved_wait_ms double, buffer_byte_s_today double, buffer_byte_s_kip637 double, "
        "rerouted_latency_known bigint, rerouted_p50_ms double, rerouted_p99_ms double, rerouted_p999_ms double, "
        "rerouted_max_ms double, rerouted_fastest_p50_ms double, rerouted_fastest_p99_ms double, "
        "rerouted_fastest_p999_ms double, isr_known_ms double, no_writable_ms double"
    )
    expected = spark.createDataFrame(
        [
            ("orders", "acks=all", "keyless", 3, 1, 3, 600, 0, 0, 780_000.0, 0.0, 780_000.0,
             100 * 300.0 + 300 * 480.0, 0.0, 2, 5.0, 5.0, 5.0, 5.0, 3.0, 3.0, 3.0, known, 0.0),
            ("keyed", "acks=all", "keyed", 1, 0, 0, 0, 1, 0, 240_000.0, 240_000.0, 0.0, 50 * 240.0, 50 * 240.0,
             0, None, None, None, None, None, None, None, known, 0.0),
            ("solo", "acks=all", "keyless", 1, 0, 0, 0, 1, 0, 600_000.0, 600_000.0, 0.0, 100 * 600.0, 100 * 600.0,
             0, None, None, None, None, None, None, None, known, 40 * 60_000.0),
            ("orders", "acks=all@lag=3000", "keyless", 1, 0, 0, 0, 0, 1, 0.0, 0.0, 0.0, 0.0, 0.0,
             0, None, None, None, None, None, None, None, None, None),
        ],
        ddl,
    )  # fmt: skip
    columns = [f.name for f in expected.schema]
    assert_df_equality(actual.select(*columns), expected, ignore_nullable=True, ignore_row_order=True)
    assert actual.select("window", "window_start").distinct().collect() == [("hour", T10)]
    conform(actual.withColumn("gold_run_id", F.lit("g")), ROUTING).collect()  # the contract holds


def test_acks_all_at_another_lag_routes_on_the_replays_own_verdicts_at_each_append(spark):
    """acks=all@lag=30000 re-simulates the ISR and keeps only its verdict at each append. Orders (keyless, min ISR
    2): p0 accepted at 10:00:00, rejected at :10 and :20, accepted again at :30, :40.4 and 10:01; p1 accepted
    throughout (:05 to 10:01); p2 rejected at :12 and :40 and never accepted. So p0 is writable until :10 and from
    :30 (the verdicts' changes, at the later append), p1 from :05 to 10:01, p2 never. The four rejections: p0's at
    :10 and :20 go to p1 (produces there 0.5 s and 0.2 s later took 7 and 9 ms) and would have waited 20 s and 10 s
    for p0; p2's at :12 goes to p1 (no produce there within 1 s: no latency), p2's at :40 to p0 or p1 (p0's
    produce 0.4 s later took 3 ms; p1 none within 1 s); p2 is never writable again (no wait). The recorded ISR
    (whole, acks=all) rejects nothing, and the broker's real rejection at :12 counts only under acks=all, whose ISR
    it was: on that ISR every partition was writable then, its own included (no wait)."""
    lag = "acks=all@lag=30000"
    at = T10
    ms = dt.timedelta(milliseconds=1)
    replay_rows = [
        _acked("orders", 0, at, 1, 1.0, lag),
        _rejected("orders", 0, at + 10 * SECOND, 2, 100, lag),
        _rejected("orders", 0, at + 20 * SECOND, 3, 100, lag),
        _acked("orders", 0, at + 30 * SECOND, 4, 1.0, lag),
        _acked("orders", 0, at + 40_400 * ms, 5, 3.0, lag),
        _acked("orders", 0, at + MINUTE, 6, 1.0, lag),
        _acked("orders", 1, at + 5 * SECOND, 7, 1.0, lag),
        _acked("orders", 1, at + 10_500 * ms, 8, 7.0, lag),
        _acked("orders", 1, at + 20_200 * ms, 9, 9.0, lag),
        _acked("orders", 1, at + MINUTE, 10, 1.0, lag),
        _rejected("orders", 2, at + 12 * SECOND, 11, 200, lag),
        _rejected("orders", 2, at + 40 * SECOND, 12, 400, lag),
        _acked("orders", 0, at + MINUTE, 13, 1.0),
    ]
    isr_rows = [("orders", p, 5, [1, 2, 3], T10) for p in range(3)]
    recorded = [{"topic": "orders", "partition": 2, "t": at + 12 * SECOND, "line": 20, "nbytes": 200}]
    actual = _routing(spark, replay_rows, isr_rows, [("c1", "orders", p, 2) for p in range(3)], recorded)
    columns = ["policy", "rejections", "recorded_rejections", "rerouted", "rerouted_bytes", "held", "never_writable",
               "wait_today_ms", "wait_kip637_ms", "rerouted_latency_known", "rerouted_max_ms",
               "rerouted_fastest_p50_ms", "isr_known_ms", "no_writable_ms"]  # fmt: skip
    expected = spark.createDataFrame(
        [
            (lag, 4, 0, 4, 800, 0, 0, 30_000.0, 0.0, 3, 9.0, 7.0, 60_000.0, 0.0),
            ("acks=all", 1, 1, 1, 200, 0, 0, 0.0, 0.0, 0, None, None, 60_000.0, 0.0),
        ],
        "policy string, rejections bigint, recorded_rejections bigint, rerouted bigint, rerouted_bytes bigint, "
        "held bigint, never_writable bigint, wait_today_ms double, wait_kip637_ms double, "
        "rerouted_latency_known bigint, rerouted_max_ms double, rerouted_fastest_p50_ms double, "
        "isr_known_ms double, no_writable_ms double",
    )
    assert_df_equality(actual.select(*columns), expected, ignore_nullable=True, ignore_row_order=True)


def test_a_partition_writable_again_within_one_retry_and_a_topic_with_nowhere_to_go(spark):
    """Orders p0 dips below min ISR 3 for 80 ms at 10:00:01 (one follower out and back); its rejected batch waits
    until the ISR is whole again, 50 ms, where p1, below min ISR the whole time, could take nothing. In the
    next hour both partitions are below min ISR and a batch is rejected with nowhere to go and no writable
    moment left in the data: never writable."""
    t = T10 + SECOND
    hour = dt.timedelta(hours=1)
    replay_rows = [
        _rejected("orders", 0, t + dt.timedelta(milliseconds=30), 1, 10),
        _rejected("orders", 1, T10 + hour + MINUTE, 2, 20),
        _acked("orders", 0, T10 + hour + 2 * MINUTE, 3, 1.0),
    ]
    isr_rows = [
        ("orders", 0, 1, [1, 2, 3], T10), ("orders", 0, 1, [1, 2], t), ("orders", 0, 1, [1, 2, 3],
         t + dt.timedelta(milliseconds=80)), ("orders", 0, 1, [1], T10 + hour), ("orders", 1, 1, [1, 2], T10),
    ]  # fmt: skip
    actual = _routing(spark, replay_rows, isr_rows, [("c1", "orders", p, 3) for p in range(2)])
    expected = spark.createDataFrame(
        [
            (T10, 1, 0, 1, 0, 50.0, 50.0, 3_600_000.0, 80.0),
            (T10 + hour, 1, 0, 0, 1, 0.0, 0.0, 120_000.0, 120_000.0),
        ],
        "window_start timestamp, rejections bigint, rerouted bigint, held bigint, never_writable bigint, "
        "wait_today_ms double, wait_kip637_ms double, isr_known_ms double, no_writable_ms double",
    )
    assert_df_equality(actual.select(*expected.columns), expected, ignore_nullable=True, ignore_row_order=True)


def test_a_real_rejection_is_linked_to_the_retry_that_got_its_batch_appended(spark):
    """Today's cost as measured. Orders/0 is below min ISR 2 from 10:10:00 to 10:10:30. Client a's 300-byte
    batch is rejected at 10:10:05 and again 0.1 s later, and appended by the request at 10:10:30.5,
    acknowledged at 10:10:31: one batch, 26 s from its first rejection to its ack, where the model says 25 s (its
    partition writable again at 10:10:30). The 300-byte successes of client b at 10:10:10 and of client a at
    10:09 (before) are other batches; a's 999-byte batch rejected at 10:10:15 was never appended (no retry).
    Each batch waits once: 25 s from the first batch's first rejection and 15 s from the other's, 40 s in all
    (the retry rejected at 10:10:05.1 waits within its batch's wait: summed per attempt it was 64.9 s)."""
    at = T10 + 10 * MINUTE
    recorded = [
        {"topic": "orders", "partition": 0, "t": at + 5 * SECOND, "line": 11, "nbytes": 300},
        {"topic": "orders", "partition": 0, "t": at + 5 * SECOND + SECOND / 10, "line": 12, "nbytes": 300},
        {"topic": "orders", "partition": 0, "t": at + 30 * SECOND + SECOND / 2, "line": 13, "nbytes": 300,
         "error": 0, "ack": at + 31 * SECOND},
        {"topic": "orders", "partition": 0, "t": at + 15 * SECOND, "line": 14, "nbytes": 999},
        {"topic": "orders", "partition": 0, "t": at + 10 * SECOND, "line": 15, "nbytes": 300, "error": 0,
         "client": "b"},
        {"topic": "orders", "partition": 0, "t": at - MINUTE, "line": 16, "nbytes": 300, "error": 0},
    ]  # fmt: skip
    isr_rows = [("orders", 0, 5, [1, 2, 3], T10), ("orders", 0, 5, [1], at),
                ("orders", 0, 5, [1, 2], at + 30 * SECOND)]  # fmt: skip
    replay_rows = [_acked("orders", 0, T10 + 50 * MINUTE, 1, 1.0)]
    actual = _routing(spark, replay_rows, isr_rows, [("c1", "orders", 0, 2)], recorded)
    columns = ["rejections", "recorded_rejections", "recorded_batches", "recorded_wait_ms", "recorded_model_wait_ms",
               "recorded_unlinked", "held", "wait_today_ms", "wait_kip637_ms"]  # fmt: skip
    assert [tuple(r) for r in actual.select(*columns).collect()] == [
        (3, 3, 1, 26_000.0, 25_000.0, 1, 3, 40_000.0, 40_000.0)
    ]


def _assert_keyless(spark, column, expected: list[tuple[str, str, bool]]) -> None:
    """`column` (a :func:`keyless_topics`) on the (cluster, topic) rows of `expected` gives their flags."""
    rows = spark.createDataFrame([(c, t) for c, t, _ in expected], "cluster string, topic string")
    want = spark.createDataFrame(expected, "cluster string, topic string, keyless boolean")
    assert_df_equality(rows.withColumn("keyless", column), want, ignore_nullable=True, ignore_row_order=True)


def test_keyless_topics_from_the_conf(spark):
    config = AppConfig.model_validate(
        {
            "default_cluster": {"topic_partitioning": {"events": "keyless"}},
            "clusters": {"c1": {"partitioning": "keyless", "topic_partitioning": {"audit": "keyed"}}},
        }
    )
    _assert_keyless(
        spark, keyless_topics(config),
        [("c1", "orders", True), ("c1", "audit", False), ("c1", "events", True), ("c2", "events", True),
         ("c2", "orders", False)],
    )  # fmt: skip


def test_keyless_topics_auto_from_the_records_keys(spark):
    """`auto` (the default) takes what the records showed: keyless where no record seen had a key, keyed where
    one had or where none was seen; the conf's own word wins where it gives one."""
    sends = spark.createDataFrame(
        [("c1", "orders", 0), ("c1", "orders", 0), ("c1", "audit", 0), ("c1", "audit", 2), ("c1", "events", None),
         ("c2", "orders", 0), ("c1", None, 0)],
        "cluster string, topic string, keyed_records int",
    )  # fmt: skip
    seen = keyless_in_records(sends)
    assert seen == {("c1", "orders"): True, ("c1", "audit"): False, ("c2", "orders"): True}
    config = AppConfig.model_validate({"clusters": {"c2": {"partitioning": "keyed"}}})
    _assert_keyless(
        spark, keyless_topics(config, seen),
        [("c1", "orders", True), ("c1", "audit", False), ("c1", "events", False), ("c2", "orders", False),
         ("c3", "orders", False)],
    )  # fmt: skip


def test_only_a_conf_or_records_that_can_make_a_topic_keyless_run_the_partitioners_placement():
    from ackreplay.gold.stage import may_have_keyless

    keyed = AppConfig.model_validate({"clusters": {"c2": {"partitioning": "keyed"}}})
    assert not may_have_keyless(keyed)
    assert not may_have_keyless(keyed, {("c1", "orders"): False})
    assert may_have_keyless(keyed, {("c1", "orders"): False, ("c1", "audit"): True})
    all_keyed = AppConfig.model_validate({"default_cluster": {"partitioning": "keyed"}})
    assert not may_have_keyless(all_keyed, {("c1", "orders"): True})
    by_topic = AppConfig.model_validate(
        {"default_cluster": {"partitioning": "keyed", "topic_partitioning": {"events": "keyless"}}}
    )
    assert may_have_keyless(by_topic)


def test_retry_episodes_give_each_retry_its_rejected_attempts_and_each_held_batch_the_retry_it_waited_behind(spark):
    """Client a's 300-byte batch (sent at 10:10:04.9) to orders/0 was rejected at 10:10:05 and 10:10:05.1 by
    broker 1 and appended at 10:10:30.5 (line 13): its episode is the two attempts and its own append. Client
    a's next batches: one sent at 10:10:06, before the retry went out, and appended just after it (line 17):
    held behind it; one sent at 10:10:31, after (line 18): not held. Client b's batch of the same moment (line
    15) is another producer's; the rejection of line 14 (999 bytes) was never retried."""
    from ackreplay.transforms.replay_inputs import retry_episodes

    at = T10 + 10 * MINUTE
    rows = [
        _request("orders", 0, at + 5 * SECOND, 11, 300),
        _request("orders", 0, at + 5 * SECOND + SECOND / 10, 12, 300),
        _request("orders", 0, at + 30 * SECOND + SECOND / 2, 13, 300, error=0),
        _request("orders", 0, at + 15 * SECOND, 14, 999),
        _request("orders", 0, at + 10 * SECOND, 15, 300, error=0, client="b"),
        _request("orders", 0, at + 30 * SECOND + SECOND * 6 / 10, 17, 400, error=0),
        _request("orders", 0, at + 32 * SECOND, 18, 400, error=0),
    ]
    sends = {11: at + 4.9 * SECOND, 12: at + 4.9 * SECOND, 13: at + 4.9 * SECOND, 15: at + 9 * SECOND,
             17: at + 6 * SECOND, 18: at + 31 * SECOND}  # fmt: skip
    produces = spark.createDataFrame([{**r, "broker_id": 1} for r in rows], PRODUCE_REQUESTS).withColumn(
        "t_send", F.create_map(*[x for line, t in sends.items() for x in (F.lit(line), F.lit(t))])[F.col("line_number")]
    )
    us = lambda t: int(t.timestamp() * 1_000_000)  # noqa: E731
    episode = [us(at + 5 * SECOND), us(at + 5 * SECOND + SECOND / 10), us(at + 30 * SECOND + SECOND / 2)]
    actual = retry_episodes(produces).orderBy("line_number")
    assert [
        tuple(r) for r in actual.select("line_number", "held", "episode_start_us", "episode_done_us").collect()
    ] == [
        (13, False, episode, episode),
        (17, True, episode, episode),
    ]


def test_the_rerouted_batches_latency_quantiles(spark):
    """Two keyless batches rejected on p0 (below min ISR 2 throughout) at 10:01 and 10:03 go to p1, whose produces
    within 1 s took 10 and 20 ms: P50 15, P99 19.9, P999 19.99 (interpolated between the two), max 20, the same for
    the fastest partition (p1 is the only writable one)."""
    replay_rows = [
        _rejected("orders", 0, T10 + MINUTE, 1, 100),
        _rejected("orders", 0, T10 + 3 * MINUTE, 2, 100),
        _acked("orders", 1, T10 + MINUTE + SECOND / 5, 3, 10.0),
        _acked("orders", 1, T10 + 3 * MINUTE + SECOND / 5, 4, 20.0),
        _acked("orders", 1, T10 + 10 * MINUTE, 5, 1.0),  # the data's end
    ]
    isr_rows = [("orders", 0, 5, [1], T10), ("orders", 1, 5, [1, 2], T10)]
    actual = _routing(spark, replay_rows, isr_rows, [("c1", "orders", p, 2) for p in range(2)])
    columns = ["rerouted", "rerouted_p50_ms", "rerouted_p99_ms", "rerouted_p999_ms", "rerouted_max_ms",
               "rerouted_fastest_p50_ms", "rerouted_fastest_p99_ms", "rerouted_fastest_p999_ms"]  # fmt: skip
    (row,) = actual.filter(F.col("policy") == "acks=all").select(*columns).collect()
    assert row["rerouted"] == 2
    assert [round(row[c], 6) for c in columns[1:]] == [15.0, 19.9, 19.99, 20.0, 15.0, 19.9, 19.99]
