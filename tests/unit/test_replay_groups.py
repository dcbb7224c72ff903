"""The replay's group function (one leader broker's time bucket, Arrow in and out) and the Spark
side that places follower events into the buckets that need them."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import Row

from ackreplay.replay.groups import OUTPUT_ARROW_SCHEMA, policy_order, replay_broker_bucket
from transforms.replay_inputs import KIND_FETCH, KIND_ISR, KIND_META, event_side, group_key, leo_evidence

MS = 1000
T0 = 1_795_300_000_000_000  # µs
POLICIES = policy_order((2, 3), ())


def produce_table(rows: list[dict]) -> pa.Table:
    base = {
        "gid": 7, "broker_id": 1, "leader_epoch": 0, "timeout_ms": 30_000, "acks": -1, "bytes": 100,
        "t_ack_observed_us": None, "client_side_ms": 0.5, "source_file_id": 1, "event_day": 20_000,
    }  # fmt: skip
    full = [{**base, **r} for r in rows]
    schema = pa.schema(
        [
            ("gid", pa.int64()), ("pkey", pa.int64()), ("leader_epoch", pa.int32()), ("broker_id", pa.int32()),
            ("t_us", pa.int64()), ("offset", pa.int64()), ("timeout_ms", pa.int32()), ("acks", pa.int32()),
            ("bytes", pa.int32()), ("t_start_us", pa.int64()), ("t_ack_observed_us", pa.int64()),
            ("client_side_ms", pa.float64()), ("source_file_id", pa.int32()), ("line_number", pa.int64()),
            ("event_day", pa.int32()),
        ]
    )  # fmt: skip
    return pa.Table.from_pylist(full, schema=schema)


EVENT_SCHEMA = pa.schema(
    [
        ("gid", pa.int64()), ("kind", pa.int8()), ("pkey", pa.int64()), ("leader_epoch", pa.int32()),
        ("t_us", pa.int64()), ("offset", pa.int64()), ("follower_id", pa.int32()), ("broker_id", pa.int32()),
        ("replicas", pa.list_(pa.int32())), ("min_insync_replicas", pa.int32()), ("epoch_start_us", pa.int64()),
        ("epoch_end_us", pa.int64()), ("isr", pa.list_(pa.int32())),
    ]
)  # fmt: skip


def meta(pkey: int, min_isr: int = 2, isr=(1, 2, 3)) -> dict:
    return {"gid": 7, "kind": KIND_META, "pkey": pkey, "leader_epoch": 0, "broker_id": 1, "replicas": [1, 2, 3],
            "min_insync_replicas": min_isr, "epoch_start_us": T0 - 60_000 * MS, "epoch_end_us": 2**62,
            "isr": list(isr)}  # fmt: skip


def fetch(pkey: int, follower: int, t_ms: float, offset: int) -> dict:
    return {"gid": 7, "kind": KIND_FETCH, "pkey": pkey, "leader_epoch": 0, "t_us": T0 + int(t_ms * MS),
            "offset": offset, "follower_id": follower}  # fmt: skip


def event_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)


def rows_by(table: pa.Table, policy: str) -> list[dict]:
    code = POLICIES.index(policy)
    return sorted((r for r in table.to_pylist() if r["policy_code"] == code), key=lambda r: (r["pkey"], r["base_offset"]))


def replay(produces: pa.Table, events: pa.Table) -> pa.Table:
    out = replay_broker_bucket(produces, events, (2, 3), (), strict_min_isr=True)
    assert out.schema == OUTPUT_ARROW_SCHEMA
    return out


def test_a_request_over_two_partitions_answers_when_its_slowest_partition_acks():
    # One request (line 10) appends to partitions A and B at t=0; A's followers are caught up at 2 ms,
    # B's slowest at 9 ms: acks=all answers both at 9 ms. Another request (line 11) only touches A.
    a, b = 101, 202
    produces = produce_table(
        [
            {"pkey": a, "t_us": T0, "offset": 0, "t_start_us": T0 - 1 * MS, "line_number": 10},
            {"pkey": b, "t_us": T0, "offset": 50, "t_start_us": T0 - 1 * MS, "line_number": 10},
            {"pkey": a, "t_us": T0 + 20 * MS, "offset": 1, "t_start_us": T0 + 19 * MS, "line_number": 11},
        ]
    )
    events = event_table(
        [
            meta(a), meta(b),
            fetch(a, 2, 2, 1), fetch(a, 3, 2, 1), fetch(b, 2, 3, 51), fetch(b, 3, 9, 51),
            fetch(a, 2, 21, 2), fetch(a, 3, 25, 2),
        ]
    )  # fmt: skip
    out = rows_by(replay(produces, events), "acks=all")
    assert [(r["pkey"], r["line_number"]) for r in out] == [(a, 10), (a, 11), (b, 10)]
    assert [(r["t_ack_us"] - T0) / MS for r in out] == [2.0, 25.0, 9.0]
    assert [(r["t_response_us"] - T0) / MS for r in out] == [9.0, 25.0, 9.0]
    # latency: t_response - t_start + response queue and send time
    assert [r["latency_ms"] for r in out] == [10.5, 6.5, 10.5]
    assert [r["ack_wait_ms"] for r in out] == [2.0, 5.0, 9.0]
    acks1 = rows_by(replay(produces, events), "acks=1")
    assert [(r["t_response_us"] - T0) / MS for r in acks1] == [0.0, 20.0, 0.0]


def test_a_produce_without_a_meta_row_is_not_replayed():
    # Partition 303 is missing from `partitions` (no meta row): its produce is dropped, the other stays.
    produces = produce_table(
        [
            {"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1},
            {"pkey": 303, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 2},
        ]
    )
    out = replay(produces, event_table([meta(101), fetch(101, 2, 1, 1), fetch(101, 3, 1, 1)]))
    assert out.num_rows == len(POLICIES)
    assert set(out.column("pkey").to_pylist()) == {101}


def test_rejected_produces_have_null_exposure_and_the_isr_source_is_kept():
    # ISR {1} below min.insync.replicas=2 from state-change.log: acks=all and min.insync reject,
    # quorum=2 (over all replicas) acks once follower 2 has the batch.
    produces = produce_table([{"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1}])
    events = event_table([meta(101, isr=(1,)), fetch(101, 2, 4, 1)])
    out = replay(produces, events)
    by_policy = {POLICIES[r["policy_code"]]: r for r in out.to_pylist()}
    assert by_policy["acks=all"]["outcome_code"] == by_policy["min.insync"]["outcome_code"] == 1  # not_enough_replicas
    assert by_policy["acks=all"]["exposure_ms"] is None and by_policy["acks=all"]["copies_at_ack"] == 0
    assert by_policy["quorum=2"]["outcome_code"] == 0 and (by_policy["quorum=2"]["t_ack_us"] - T0) / MS == 4.0
    assert by_policy["quorum=3"]["outcome_code"] == 2  # timeout: follower 3 never fetches
    assert {r["isr_source_code"] for r in out.to_pylist()} == {0}  # logs
    # acks=1 acks at t_local_done on one copy; the batch reaches min.insync.replicas=2 copies at 4 ms.
    assert (by_policy["acks=1"]["copies_at_ack"], by_policy["acks=1"]["exposure_ms"]) == (1, 4.0)
    # never on all 3 replicas within the data
    assert math.isinf(by_policy["acks=1"]["full_replication_ms"])


def test_isr_changes_of_another_partition_do_not_leak():
    produces = produce_table([{"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1}])
    shrink_other = {"gid": 7, "kind": KIND_ISR, "pkey": 202, "leader_epoch": 0, "t_us": T0 - MS, "isr": [1]}
    events = event_table([meta(101), meta(202), shrink_other, fetch(101, 2, 3, 1), fetch(101, 3, 5, 1)])
    out = rows_by(replay(produces, events), "acks=all")
    assert [(r["outcome_code"], (r["t_ack_us"] - T0) / MS) for r in out] == [(0, 5.0)]


@pytest.mark.usefixtures("spark")
def test_events_are_copied_only_into_the_buckets_that_need_them(spark):
    # Buckets of 100 s, timeout 30 s, lookback 20 s. An event at 10 s into bucket 5 is still needed by
    # produces of bucket 4 (waiting up to 30 s); one at 90 s is history for bucket 6's ISR re-simulation;
    # one at 50 s belongs to bucket 5 only. Buckets without produces (not in the gid list) get nothing.
    bucket_us = 100 * 1_000_000
    t = lambda b, s: b * bucket_us + s * 1_000_000  # noqa: E731
    events = spark.createDataFrame(
        [
            Row(cluster="c", broker_id=1, topic="x", partition=0, leader_epoch=3, follower_id=2, offset=o, t_us=ts)
            for o, ts in ((10, t(5, 10)), (11, t(5, 50)), (12, t(5, 90)))
        ]
    )
    keys = spark.createDataFrame([Row(cluster="c", broker_id=1, b=b) for b in (4, 5, 6)])
    gid_rows = keys.select("b", group_key("cluster", "broker_id", "b").alias("gid")).collect()
    expected_gid = {r["b"]: r["gid"] for r in gid_rows}
    gids = spark.createDataFrame([Row(gid=g) for g in expected_gid.values()])
    out = event_side(events, bucket_us, 30_000_000, 20_000_000, gids)
    got = sorted((r["offset"], r["gid"]) for r in out.select("offset", "gid").collect())
    assert got == sorted([(10, expected_gid[4]), (10, expected_gid[5]), (11, expected_gid[5]), (12, expected_gid[5]),
                          (12, expected_gid[6])])  # fmt: skip
    assert_df_equality(
        out.select("kind").distinct(), spark.createDataFrame([Row(kind=KIND_FETCH)]).selectExpr("CAST(kind AS TINYINT) kind"),
        ignore_nullable=True,
    )


def test_leo_evidence_keeps_fetches_recorded_before_an_error_their_delayed_response_carries(spark):
    # Kafka answers at once when it cannot read a partition, and only then records nothing; a response
    # that waited in purgatory was read cleanly, so its error (74, FENCED_LEADER_EPOCH, after a leader
    # change) came later. Rows of the 4.1.1 lab trace's preferred-leader election (offsets 12670-12672).
    schema = "fetch_offset long, partition_error_code int, remote_time_ms double, diverging_epoch boolean"
    fetches = spark.createDataFrame(
        [
            (12670, 0, 12.0, False),  # clean, waited
            (12671, None, 0.0, False),  # the response omitted the partition: clean
            (12672, 74, 122.9, False),  # waited, fenced at completion: the leader had recorded 12672
            (12673, 74, 0.0, False),  # fenced at once: not recorded
            (12674, 6, 0.0, False),  # not leader at once: not recorded
            (12675, 0, 0.0, True),  # diverging epoch: the follower truncates first
        ],
        schema,
    )
    expected = spark.createDataFrame([(12670, 0, 12.0, False), (12671, None, 0.0, False), (12672, 74, 122.9, False)], schema)
    assert_df_equality(leo_evidence(fetches), expected, ignore_row_order=True)
