"""The replay's group function (one leader broker's time bucket, Arrow in and out: produce_replay rows or
the data files it wrote) and the Spark side that places follower events into the buckets that need them."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import Row

from ackreplay.replay.groups import (
    PRODUCE_REPLAY_ARROW,
    WRITTEN_FILE_ARROW,
    PartitionEpochs,
    ProducerRules,
    ReplayContext,
    replay_group,
)
from ackreplay.schemas.vocabulary import NEVER, policy_order
from ackreplay.storage.arrow_delta import ArrowFileWriter
from ackreplay.transforms.replay_inputs import event_side, group_key, leo_evidence
from tests.helpers import assert_df_equality

MS = 1000
T0 = 1_795_300_000_000_000  # µs
DAY = T0 // 86_400_000_000
POLICIES = policy_order((2, 3), ())
SOURCE = 11  # source_file_id of "c/broker-1/kafka-request.log"


def partition(
    pkey: int, *, min_isr: int = 2, isr=(1, 2, 3), epochs=((0, 1, T0 - 60_000 * MS),), topic: str = "orders"
) -> PartitionEpochs:
    """A partition replicated on brokers 1, 2, 3 with `epochs` = (leader epoch, leader, start) in time order;
    `isr` is the ISR at the start of every epoch."""
    starts = [start for _, _, start in epochs]
    return PartitionEpochs(
        cluster="c", topic=topic, partition=pkey % 100, replicas=(1, 2, 3), min_insync_replicas=min_isr,
        leader_epoch=np.array([e for e, _, _ in epochs], np.int32), leader=np.array([b for _, b, _ in epochs], np.int32),
        start_us=np.array(starts, np.int64), end_us=np.array(starts[1:] + [NEVER], np.int64),
        start_isr=tuple(tuple(isr) for _ in epochs),
    )  # fmt: skip


def context(partitions: list[PartitionEpochs], isr_changes=None, writer=None) -> ReplayContext:
    return ReplayContext(
        quorum_sizes=(2, 3), lag_ms=(), strict_min_isr={"c": True}, run_id="run-1",
        partitions={100 + p.partition: p for p in partitions}, isr_changes=isr_changes or {},
        source_files={SOURCE: "c/broker-1/kafka-request.log"}, writer=writer,
    )  # fmt: skip


def produce_table(rows: list[dict]) -> pa.Table:
    base = {
        "gid": 7, "broker_id": 1, "timeout_ms": 30_000, "acks": -1, "bytes": 100, "t_ack_observed_us": None,
        "client_side_ms": 0.5, "source_file_id": SOURCE, "event_day": DAY,
    }  # fmt: skip
    full = [{**base, **r} for r in rows]
    schema = pa.schema(
        [
            ("gid", pa.int64()), ("pkey", pa.int64()), ("broker_id", pa.int32()), ("t_us", pa.int64()),
            ("offset", pa.int64()), ("timeout_ms", pa.int32()), ("acks", pa.int32()), ("bytes", pa.int32()),
            ("t_start_us", pa.int64()), ("t_ack_observed_us", pa.int64()), ("client_side_ms", pa.float64()),
            ("source_file_id", pa.int64()), ("line_number", pa.int64()), ("event_day", pa.int32()),
        ]
    )  # fmt: skip
    return pa.Table.from_pylist(full, schema=schema)


EVENT_SCHEMA = pa.schema(
    [("gid", pa.int64()), ("pkey", pa.int64()), ("broker_id", pa.int32()), ("t_us", pa.int64()),
     ("offset", pa.int64()), ("follower_id", pa.int32())]
)  # fmt: skip


def fetch(pkey: int, follower: int, t_ms: float, offset: int, leader: int = 1) -> dict:
    return {"gid": 7, "pkey": pkey, "broker_id": leader, "t_us": T0 + int(t_ms * MS), "offset": offset,
            "follower_id": follower}  # fmt: skip


def event_table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)


def replay(ctx: ReplayContext, produces: pa.Table, events: pa.Table) -> pa.Table:
    out = replay_group(ctx, produces, events)
    assert out.schema == PRODUCE_REPLAY_ARROW
    return out


def rows_by(table: pa.Table, policy: str) -> list[dict]:
    rows = (r for r in table.to_pylist() if r["policy"] == policy)
    return sorted(rows, key=lambda r: (r["partition"], r["base_offset"]))


def ms_after_t0(ts) -> float:
    return (ts.timestamp() * 1_000_000 - T0) / MS


def test_a_request_over_two_partitions_answers_when_its_slowest_partition_acks():
    # One request (line 10) appends to partitions A and B at t=0; A's followers are caught up at 2 ms,
    # B's slowest at 9 ms: acks=all answers both at 9 ms. Another request (line 11) only touches A.
    a, b = 101, 102
    produces = produce_table(
        [
            {"pkey": a, "t_us": T0, "offset": 0, "t_start_us": T0 - 1 * MS, "line_number": 10},
            {"pkey": b, "t_us": T0, "offset": 50, "t_start_us": T0 - 1 * MS, "line_number": 10},
            {"pkey": a, "t_us": T0 + 20 * MS, "offset": 1, "t_start_us": T0 + 19 * MS, "line_number": 11},
        ]
    )
    events = event_table(
        [
            fetch(a, 2, 2, 1),
            fetch(a, 3, 2, 1),
            fetch(b, 2, 3, 51),
            fetch(b, 3, 9, 51),
            fetch(a, 2, 21, 2),
            fetch(a, 3, 25, 2),
        ]
    )
    out = replay(context([partition(a), partition(b)]), produces, events)
    assert out.num_rows == 3 * len(POLICIES)
    acks_all = rows_by(out, "acks=all")
    assert [(r["partition"], r["line_number"]) for r in acks_all] == [(1, 10), (1, 11), (2, 10)]
    assert [ms_after_t0(r["t_ack"]) for r in acks_all] == [2.0, 25.0, 9.0]
    assert [ms_after_t0(r["t_response"]) for r in acks_all] == [9.0, 25.0, 9.0]
    # latency: t_response - t_start + response queue and send time
    assert [r["latency_ms"] for r in acks_all] == [10.5, 6.5, 10.5]
    assert [r["ack_wait_ms"] for r in acks_all] == [2.0, 5.0, 9.0]
    assert [ms_after_t0(r["t_response"]) for r in rows_by(out, "acks=1")] == [0.0, 20.0, 0.0]
    first = acks_all[0]
    assert (first["cluster"], first["topic"], first["leader_epoch"], first["broker_id"], first["source_file"]) == (
        "c",
        "orders",
        0,
        1,
        "c/broker-1/kafka-request.log",
    )
    assert (first["outcome"], first["copies_at_ack"], first["isr_source"], first["leo_source"]) == (
        "acked",
        3,
        "logs",
        "follower_fetches",
    )
    assert (first["replay_run_id"], str(first["event_date"])) == ("run-1", "2026-11-21")


def test_the_ground_truth_counts_compare_the_replayed_response_with_the_brokers_ack(tmp_path: Path):
    # Recorded acks=all produces: the request of line 10 (two partitions) was answered at 9.5 ms, the
    # replay answers it at 9 ms (within 1 ms); line 11's at 27 ms, replayed 25 ms (within 2 ms only);
    # line 12 was recorded with acks=1 and is not compared.
    a, b = 101, 102
    observed = {10: T0 + 9500, 11: T0 + 27 * MS, 12: T0 + 31 * MS}
    produces = produce_table(
        [
            {"pkey": a, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 10, "t_ack_observed_us": observed[10]},
            {"pkey": b, "t_us": T0, "offset": 50, "t_start_us": T0, "line_number": 10, "t_ack_observed_us": observed[10]},
            {"pkey": a, "t_us": T0 + 20 * MS, "offset": 1, "t_start_us": T0, "line_number": 11, "t_ack_observed_us": observed[11]},
            {"pkey": a, "t_us": T0 + 30 * MS, "offset": 2, "t_start_us": T0, "line_number": 12, "acks": 1,
             "t_ack_observed_us": observed[12]},
        ]
    )  # fmt: skip
    events = event_table(
        [
            fetch(a, 2, 2, 1),
            fetch(a, 3, 2, 1),
            fetch(b, 2, 3, 51),
            fetch(b, 3, 9, 51),
            fetch(a, 2, 21, 2),
            fetch(a, 3, 25, 2),
        ]
    )
    writer = ArrowFileWriter(str(tmp_path), ("cluster", "event_date"), ())
    [record] = replay_group(context([partition(a), partition(b)], writer=writer), produces, events).to_pylist()
    assert json.loads(record["ground_truth"]) == {"n": 3, "observed": 3, "within_1ms": 2, "within_2ms": 3}


def test_a_produce_of_an_unknown_partition_or_outside_its_leaders_epochs_is_not_replayed():
    # Partition 103 is missing from `partitions` (topics.txt); partition 101's produce at 5 ms was
    # logged by broker 1, but broker 2 has led it since 4 ms (epoch 1). Only the first produce stays.
    p = partition(101, epochs=((0, 1, T0 - 60_000 * MS), (1, 2, T0 + 4 * MS)))
    produces = produce_table(
        [
            {"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1},
            {"pkey": 103, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 2},
            {"pkey": 101, "t_us": T0 + 5 * MS, "offset": 1, "t_start_us": T0, "line_number": 3},
        ]
    )
    out = replay(context([p]), produces, event_table([fetch(101, 2, 1, 1), fetch(101, 3, 1, 1)]))
    assert sorted(
        set(zip(out.column("partition").to_pylist(), out.column("line_number").to_pylist(), strict=False))
    ) == [(1, 1)]
    # Leadership moved at 4 ms before the followers fetched past the batch: acks=all ends as not_leader.
    late = replay(context([p]), produces.slice(0, 1), event_table([fetch(101, 2, 6, 1, leader=2)]))
    assert [(r["outcome"], ms_after_t0(r["t_ack"])) for r in rows_by(late, "acks=all")] == [("not_leader", 4.0)]


def test_an_old_leader_appends_in_its_epoch_until_its_own_follower_line():
    """Kafka 4.0.2 lab trace, a controlled shutdown: broker 2 (epoch 0) appended acks=1 batches at 14453 and
    14456 until it logged "Follower ... starts at leader epoch 1" 28 ms after broker 3 had logged its epoch 1
    from offset 14453 (Partition.makeFollower). Placed by the next epoch's start they fell outside every
    epoch; with the old leader's own bound they are epoch 0's, acked under acks=1 and never under acks=all
    (the followers follow broker 3 by then), and past that bound nothing is placed."""
    start = T0 - 60_000 * MS
    p = partition(101, epochs=((0, 2, start), (1, 3, T0)))
    p = PartitionEpochs(**{**p.__dict__, "leader_until_us": np.array([T0 + 28 * MS, NEVER], np.int64)})
    produces = produce_table(
        [
            {"pkey": 101, "broker_id": 2, "t_us": T0 + 1 * MS, "offset": 14453, "t_start_us": T0 - 94 * MS, "acks": 1, "line_number": 1},
            {"pkey": 101, "broker_id": 2, "t_us": T0 + 25 * MS, "offset": 14456, "t_start_us": T0 + 20 * MS, "acks": 1, "line_number": 2},
            {"pkey": 101, "broker_id": 2, "t_us": T0 + 29 * MS, "offset": 14457, "t_start_us": T0 + 27 * MS, "acks": 1, "line_number": 3},
            {"pkey": 101, "broker_id": 3, "t_us": T0 + 30 * MS, "offset": 14453, "t_start_us": T0 + 29 * MS, "acks": 1, "line_number": 4},
        ]
    )  # fmt: skip
    out = replay(
        context([p]), produces, event_table([fetch(101, 1, 31, 14454, leader=3), fetch(101, 2, 31, 14454, leader=3)])
    )
    placed = sorted(
        set(zip(out.column("line_number").to_pylist(), out.column("leader_epoch").to_pylist(), strict=False))
    )
    assert placed == [(1, 0), (2, 0), (4, 1)]
    assert [(r["base_offset"], r["outcome"]) for r in rows_by(out, "acks=1")] == [
        (14453, "acked"),
        (14453, "acked"),
        (14456, "acked"),
    ]
    assert [(r["leader_epoch"], r["outcome"]) for r in rows_by(out, "acks=all")] == [
        (0, "not_leader"),
        (1, "acked"),
        (0, "not_leader"),
    ]


def test_events_count_only_in_the_epoch_their_leader_led():
    # Epoch 0 (leader 1) until 10 ms, then epoch 1 (leader 1 again, e.g. after a restart). The follower
    # fetches of epoch 0 past offset 5 must not ack epoch 1's batch at offset 5: only those of epoch 1 do.
    p = partition(101, epochs=((0, 1, T0 - 60_000 * MS), (1, 1, T0 + 10 * MS)))
    produces = produce_table(
        [{"pkey": 101, "t_us": T0 + 12 * MS, "offset": 5, "t_start_us": T0 + 11 * MS, "line_number": 1}]
    )
    events = event_table([fetch(101, 2, 5, 9), fetch(101, 3, 5, 9), fetch(101, 2, 14, 6), fetch(101, 3, 17, 6)])
    out = replay(context([p]), produces, events)
    assert [(r["leader_epoch"], ms_after_t0(r["t_ack"])) for r in rows_by(out, "acks=all")] == [(1, 17.0)]


def test_rejected_produces_have_null_exposure_and_the_isr_source_is_kept():
    # ISR {1} below min.insync.replicas=2 from state-change.log: acks=all and min.insync reject,
    # quorum=2 (over all replicas) acks once follower 2 has the batch.
    produces = produce_table([{"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1}])
    out = replay(context([partition(101, isr=(1,))]), produces, event_table([fetch(101, 2, 4, 1)]))
    by_policy = {r["policy"]: r for r in out.to_pylist()}
    assert by_policy["acks=all"]["outcome"] == by_policy["min.insync"]["outcome"] == "not_enough_replicas"
    assert by_policy["acks=all"]["exposure_ms"] is None and by_policy["acks=all"]["copies_at_ack"] == 0
    assert by_policy["quorum=2"]["outcome"] == "acked" and ms_after_t0(by_policy["quorum=2"]["t_ack"]) == 4.0
    assert by_policy["quorum=3"]["outcome"] == "unreplayable"  # RF 3: KIP-250 has no quorum of 3
    assert {r["isr_source"] for r in out.to_pylist()} == {"logs"}
    # acks=1 acks at t_local_done on one copy; the batch reaches min.insync.replicas=2 copies at 4 ms.
    assert (by_policy["acks=1"]["copies_at_ack"], by_policy["acks=1"]["exposure_ms"]) == (1, 4.0)
    # never on all 3 replicas within the data
    assert math.isinf(by_policy["acks=1"]["full_replication_ms"])


def test_produces_the_broker_rejected_are_checked_against_the_replayed_rejection_and_not_written(tmp_path: Path):
    # Partition 101's ISR shrinks to {1} at 5 ms (min.insync.replicas 2) and grows back at 20 ms. The broker
    # answered three acks=all requests NOT_ENOUGH_REPLICAS (no offset): at 8 and 15 ms the committed ISR is
    # {1} (the replayed acks=all rejects them too), at 25 ms it is {1, 2} (the replay would not: a miss).
    # Partition 102's group holds only a rejected produce: its counts still reach the driver, with no file.
    shrink_expand = (np.array([T0 + 5 * MS, T0 + 20 * MS], np.int64), ((1,), (1, 2)), np.array([False, False]))
    appended = [{"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1}]
    rejected = [
        {"pkey": 101, "t_us": T0 + ms * MS, "offset": -1, "t_start_us": T0 + ms * MS, "line_number": line}
        for line, ms in ((2, 8), (3, 15), (4, 25))
    ]
    events = event_table([fetch(101, 2, 2, 1), fetch(101, 3, 3, 1)])
    ctx = context([partition(101), partition(102)], isr_changes={(101, 0): shrink_expand})
    out = replay(ctx, produce_table(appended + rejected), events)
    assert sorted({r["line_number"] for r in out.to_pylist()}) == [1]  # only the appended batch is written
    assert [ms_after_t0(r["t_ack"]) for r in rows_by(out, "acks=all")] == [3.0]
    writer = ArrowFileWriter(str(tmp_path), ("cluster", "event_date"), ())
    ctx = context([partition(101), partition(102)], isr_changes={(101, 0): shrink_expand}, writer=writer)
    [record] = replay_group(ctx, produce_table(appended + rejected), events).to_pylist()
    assert json.loads(record["ground_truth"]) == {
        "n": 1,
        "observed": 0,
        "within_1ms": 0,
        "within_2ms": 0,
        "rejected": 3,
        "rejected_replayed": 2,
        "rejected|c": 3,  # the cluster's own, which the self-check judges
        "rejected_replayed|c": 2,
    }
    only_rejected = produce_table([{**rejected[0], "pkey": 102}])
    [record] = replay_group(context([partition(102, isr=(1,))], writer=writer), only_rejected, events).to_pylist()
    assert (record["path"], record["num_records"]) == ("", 0)
    assert json.loads(record["ground_truth"]) == {
        "rejected": 1, "rejected_replayed": 1, "rejected|c": 1, "rejected_replayed|c": 1,
    }  # fmt: skip
    assert replay_group(context([partition(102, isr=(1,))]), only_rejected, events).num_rows == 0


def test_a_policy_that_admits_a_rejected_attempt_acks_the_batch_then_and_sends_what_waited_behind_it():
    """Partition 101 (RF 3, min ISR 2): ISR {1} from 5 ms to 300 ms. A producer's batch (sent at 9 ms) was
    rejected at 10, 110 and 210 ms and appended at 310 ms (line 5); its next batch (sent at 50 ms) waited behind
    it in the producer and went out at 313 ms (line 6), on the same connection. acks=1 and quorum=2 make no
    min-ISR check: they take the first attempt, and the next batch leaves once it has lingered (5 ms). acks=all
    and min.insync keep the brokers' answers. A batch appended at another time is acked like the partition's
    batches then (_AckProfiles): acks=1 at once, quorum=2 after the 2 ms its follower took on line 1."""
    episode = [T0 + ms * MS for ms in (10, 110, 210, 310)]
    rows = [
        {"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1, "t_log_us": T0 + 3500,
         "t_send_us": T0 - 1 * MS},
        *[{"pkey": 101, "t_us": t, "offset": -1, "t_start_us": t, "line_number": line, "t_log_us": t + 300}
          for line, t in zip((2, 3, 4), episode, strict=False)],
        {"pkey": 101, "t_us": episode[-1], "offset": 1, "t_start_us": episode[-1], "line_number": 5,
         "t_log_us": T0 + 312_500, "t_send_us": T0 + 9 * MS, "held": False, "episode_start_us": episode,
         "episode_done_us": episode},
        {"pkey": 101, "t_us": T0 + 313 * MS, "offset": 2, "t_start_us": T0 + 313 * MS, "line_number": 6,
         "t_log_us": T0 + 315_500, "t_send_us": T0 + 50 * MS, "held": True, "episode_start_us": episode,
         "episode_done_us": episode},
    ]  # fmt: skip
    base = produce_table([{k: v for k, v in r.items() if k in produce_table([]).column_names} for r in rows])
    extra = {
        "connection_key": pa.array([5] * len(rows), pa.int64()),
        "t_log_us": pa.array([r["t_log_us"] for r in rows], pa.int64()),
        "t_send_us": pa.array([r.get("t_send_us") for r in rows], pa.int64()),
        "held": pa.array([r.get("held") for r in rows], pa.bool_()),
        "episode_start_us": pa.array([r.get("episode_start_us") for r in rows], pa.list_(pa.int64())),
        "episode_done_us": pa.array([r.get("episode_done_us") for r in rows], pa.list_(pa.int64())),
    }
    produces = base
    for name, column in extra.items():
        produces = produces.append_column(name, column)
    shrink_expand = (np.array([T0 + 5 * MS, T0 + 300 * MS], np.int64), ((1,), (1, 2)), np.array([False, False]))
    events = event_table([fetch(101, 2, 2, 1), fetch(101, 3, 3, 1), fetch(101, 2, 312, 2), fetch(101, 2, 315, 3)])
    out = replay(context([partition(101)], isr_changes={(101, 0): shrink_expand}), produces, events)

    def column(name: str, policy: str) -> list[float]:
        return [round(r[name], 6) for r in rows_by(out, policy)][1:]

    expected = {"acks=1": [1.5, 5.5], "quorum=2": [3.5, 7.5], "acks=all": [303.5, 265.5]}
    assert {policy: column("latency_ms", policy) for policy in expected} == expected
    assert column("latency_ms", "min.insync")[0] == 303.5  # the retried batch: as under acks=all
    # the broker's view of the request that carried each under the policy: from when it went out to its answer
    broker = {"acks=1": [0.5, 0.5], "quorum=2": [2.5, 2.5], "acks=all": [2.5, 2.5]}
    assert {policy: column("broker_latency_ms", policy) for policy in broker} == broker
    # the rows keep the recorded append: its offset, local time and the broker's ack of it
    assert [ms_after_t0(r["t_ack"]) for r in rows_by(out, "acks=1")] == [0.0, 310.0, 313.0]


def test_a_batch_a_policy_rejects_is_retried_until_the_isr_is_back_and_what_waited_behind_it_goes_with_it():
    """The reverse of the test above: acks=1 traffic (lines 2 and 3, sent at 9 and 49 ms on one connection) the
    brokers appended while partition 101's ISR was {1} (5 to 300 ms, min ISR 2). acks=all rejects line 2 at
    10 ms; a Java 3.6 producer reads the rejection 0.5 ms later and retries every 100 ms: 110.5, 211, 311.5 ms,
    admitted then (retries.py). Line 3, created meanwhile, waited behind it and goes with it. Both are acked
    like a batch appended then on the partition (line 1's 3 ms wait), from their send times. A 3.7 client backs
    off 100 then 200 ms: admitted at 311 ms. Line 4, sent after the retry went out, is not held."""
    rows = [
        {"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1, "t_send_us": T0 - 1 * MS},
        {"pkey": 101, "t_us": T0 + 10 * MS, "offset": 1, "t_start_us": T0 + 10 * MS, "line_number": 2,
         "t_send_us": T0 + 9 * MS},
        {"pkey": 101, "t_us": T0 + 50 * MS, "offset": 2, "t_start_us": T0 + 50 * MS, "line_number": 3,
         "t_send_us": T0 + 49 * MS},
        {"pkey": 101, "t_us": T0 + 400 * MS, "offset": 3, "t_start_us": T0 + 400 * MS, "line_number": 4,
         "t_send_us": T0 + 399 * MS},
    ]  # fmt: skip
    shrink_expand = (np.array([T0 + 5 * MS, T0 + 300 * MS], np.int64), ((1,), (1, 2)), np.array([False, False]))
    events = event_table([fetch(101, 2, 2, 1), fetch(101, 3, 3, 1), fetch(101, 2, 402, 4)])

    def replayed(fixed_backoff: bool) -> pa.Table:
        produces = produce_table([{**{k: v for k, v in r.items() if k != "t_send_us"}, "acks": 1} for r in rows])
        for name, column in {
            "connection_key": pa.array([5] * len(rows), pa.int64()),
            "t_send_us": pa.array([r["t_send_us"] for r in rows], pa.int64()),
            "fixed_backoff": pa.array([fixed_backoff] * len(rows), pa.bool_()),
        }.items():
            produces = produces.append_column(name, column)
        return replay(context([partition(101)], isr_changes={(101, 0): shrink_expand}), produces, events)

    out = replayed(True)
    acks_all = rows_by(out, "acks=all")
    assert [r["outcome"] for r in acks_all] == ["acked", "not_enough_replicas", "not_enough_replicas", "acked"]
    # acked at 314.5 ms (311.5 + line 1's 3 ms), answered 0.5 ms later: from 9 and 49 ms
    assert [round(r["latency_ms"], 6) for r in acks_all] == [4.5, 306.0, 266.0, 3.5]
    assert [round(r["broker_latency_ms"], 6) for r in acks_all][1:3] == [3.5, 3.5]
    assert [round(r["latency_ms"], 6) for r in rows_by(out, "acks=1")] == [1.5, 1.5, 1.5, 1.5]
    # min.insync waits for one follower (line 1: 2 ms): acked at 313 ms
    assert [round(r["latency_ms"], 6) for r in rows_by(replayed(False), "min.insync")][1:3] == [304.5, 264.5]


def test_a_batch_sent_after_its_request_would_have_left_counts_from_its_own_send_in_a_later_request():
    """Line 9 waited 59.8 ms for the followers; line 10 (batches on partitions 101 and 102, sent at 2 and 40 ms)
    was read right after its response. Under acks=1 line 10 leaves once its first batch lingered (7 ms,
    connections.py); the 40 ms batch was not there yet: it went in a later request at the next linger.ms step
    (2 ms after its send) and took as long at the broker (0.5 ms)."""
    a, b = 101, 102
    rows = [
        {"pkey": a, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 9, "t_log_us": T0 + 59_800,
         "t_send_us": T0 - 1 * MS},
        {"pkey": a, "t_us": T0 + 60 * MS, "offset": 1, "t_start_us": T0 + 60 * MS, "line_number": 10,
         "t_log_us": T0 + 61 * MS, "t_send_us": T0 + 2 * MS},
        {"pkey": b, "t_us": T0 + 60 * MS, "offset": 0, "t_start_us": T0 + 60 * MS, "line_number": 10,
         "t_log_us": T0 + 61 * MS, "t_send_us": T0 + 40 * MS},
    ]  # fmt: skip
    produces = produce_table([{k: v for k, v in r.items() if k not in ("t_log_us", "t_send_us")} for r in rows])
    for name, column in {
        "connection_key": pa.array([5] * len(rows), pa.int64()),
        "t_log_us": pa.array([r["t_log_us"] for r in rows], pa.int64()),
        "t_send_us": pa.array([r["t_send_us"] for r in rows], pa.int64()),
    }.items():
        produces = produces.append_column(name, column)
    events = event_table(
        [fetch(a, 2, 59.2, 1), fetch(a, 3, 59.3, 1), fetch(a, 2, 60.5, 2), fetch(a, 3, 60.5, 2),
         fetch(b, 2, 60.5, 1), fetch(b, 3, 60.5, 1)]
    )  # fmt: skip
    out = replay(context([partition(a), partition(b)]), produces, events)
    by_line = {(r["line_number"], r["partition"]): r for r in rows_by(out, "acks=1")}
    assert round(by_line[(10, 1)]["latency_ms"], 6) == 5.5  # left at 7 ms, 5 ms after its send, 0.5 ms at the broker
    assert round(by_line[(10, 2)]["latency_ms"], 6) == 2.5
    assert round(by_line[(10, 2)]["broker_latency_ms"], 6) == 0.5
    # the cluster's producers with their own linger.ms 0 (conf clusters.<name>.producer): line 10 leaves at its
    # first batch's send, the 40 ms batch at its own; another cluster's settings change nothing here
    own = {"c": ProducerRules(linger_us=0), "other": ProducerRules(linger_us=50_000)}
    out = replay(dataclasses.replace(context([partition(a), partition(b)]), cluster_producers=own), produces, events)
    by_line = {(r["line_number"], r["partition"]): r for r in rows_by(out, "acks=1")}
    assert [round(by_line[(10, p)]["latency_ms"], 6) for p in (1, 2)] == [0.5, 0.5]


def test_isr_changes_apply_to_their_own_partition_and_epoch_only():
    # Follower 3 leaves partition 101's ISR at 2 ms (committed), so acks=all no longer waits for it;
    # the same change logged for partition 102 must not leak into 101, nor 101's into 102.
    shrink = (np.array([T0 + 2 * MS], np.int64), ((1, 2),), np.array([False]))
    produces = produce_table(
        [{"pkey": pk, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": i} for i, pk in enumerate((101, 102))]
    )
    events = event_table([fetch(101, 2, 3, 1), fetch(101, 3, 8, 1), fetch(102, 2, 3, 1), fetch(102, 3, 8, 1)])
    out = replay(context([partition(101), partition(102)], isr_changes={(101, 0): shrink}), produces, events)
    assert [(r["partition"], ms_after_t0(r["t_ack"])) for r in rows_by(out, "acks=all")] == [(1, 3.0), (2, 8.0)]


def test_the_file_writer_writes_one_file_per_date_with_a_row_group_per_policy(tmp_path: Path):
    # Two produces on 2026-11-21 and one just after midnight: two data files under the table's folder,
    # whose rows are the rows the group returns to Spark without the partition columns.
    midnight = (DAY + 1) * 86_400_000_000
    produces = produce_table(
        [
            {"pkey": 101, "t_us": T0, "offset": 0, "t_start_us": T0, "line_number": 1},
            {"pkey": 101, "t_us": T0 + 1 * MS, "offset": 1, "t_start_us": T0, "line_number": 2},
            {
                "pkey": 101,
                "t_us": midnight,
                "offset": 2,
                "t_start_us": midnight,
                "line_number": 3,
                "event_day": DAY + 1,
            },
        ]
    )
    events = event_table([fetch(101, f, t, o) for f in (2, 3) for t, o in ((2, 2), ((midnight - T0) / MS + 3, 3))])
    stats = ("topic", "partition", "policy", "outcome")
    writer = ArrowFileWriter(str(tmp_path), ("cluster", "event_date"), stats, ("policy", "outcome"), stats)
    files = replay_group(context([partition(101)], writer=writer), produces, events)
    assert files.schema == WRITTEN_FILE_ARROW
    records = sorted(files.to_pylist(), key=lambda r: r["partition_values"])
    assert [json.loads(r["partition_values"]) for r in records] == [
        {"cluster": "c", "event_date": "2026-11-21"},
        {"cluster": "c", "event_date": "2026-11-22"},
    ]
    assert [r["num_records"] for r in records] == [2 * len(POLICIES), len(POLICIES)]
    assert json.loads(records[0]["stats"]) == {
        "numRecords": 10,
        "minValues": {"topic": "orders", "partition": 1, "policy": "acks=1", "outcome": "acked"},
        # quorum=3 on RF 3 is no KIP-250 setting: its rows are unreplayable
        "maxValues": {"topic": "orders", "partition": 1, "policy": "quorum=3", "outcome": "unreplayable"},
        "nullCount": {"topic": 0, "partition": 0, "policy": 0, "outcome": 0},
    }
    assert json.loads(records[1]["outcome_counts"]) == {
        f"{p}|{'unreplayable' if p == 'quorum=3' else 'acked'}": 1 for p in POLICIES
    }
    # recorded acks=all, acked on replay; no broker ack time recorded (t_ack_observed null): none compared
    assert json.loads(records[0]["ground_truth"]) == {"n": 2, "observed": 0, "within_1ms": 0, "within_2ms": 0}
    first = tmp_path / records[0]["path"]
    assert (
        records[0]["path"].startswith("cluster=c/event_date=2026-11-21/part-")
        and first.stat().st_size == records[0]["size_bytes"]
    )
    metadata = pq.ParquetFile(first).metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [2] * len(POLICIES)
    written = pa.concat_tables(pq.read_table(tmp_path / r["path"]) for r in records)
    returned = replay(context([partition(101)]), produces, events).drop_columns(["cluster", "event_date"])
    key = lambda t: sorted(t.to_pylist(), key=lambda r: (r["policy"], r["line_number"]))  # noqa: E731
    assert key(written) == key(returned)


@pytest.mark.usefixtures("spark")
def test_events_are_copied_only_into_the_buckets_that_need_them(spark):
    # Buckets of 100 s, timeout 30 s, lookback 20 s. An event at 10 s into bucket 5 is still needed by
    # produces of bucket 4 (waiting up to 30 s); one at 90 s is history for bucket 6's ISR re-simulation;
    # one at 50 s belongs to bucket 5 only.
    bucket_us = 100 * 1_000_000
    t = lambda b, s: b * bucket_us + s * 1_000_000  # noqa: E731
    events = spark.createDataFrame(
        [
            Row(cluster="c", broker_id=1, topic="x", partition=0, follower_id=2, offset=o, t_us=ts)
            for o, ts in ((10, t(5, 10)), (11, t(5, 50)), (12, t(5, 90)))
        ]
    )
    keys = spark.createDataFrame([Row(cluster="c", broker_id=1, b=b) for b in (4, 5, 6)])
    gid = {r["b"]: r["gid"] for r in keys.select("b", group_key("cluster", "broker_id", "b").alias("gid")).collect()}
    out = event_side(events, bucket_us, 30_000_000, 20_000_000)
    assert out.columns == ["gid", "pkey", "broker_id", "t_us", "offset", "follower_id"]
    got = sorted((r["offset"], r["gid"]) for r in out.select("offset", "gid").collect())
    assert got == sorted([(10, gid[4]), (10, gid[5]), (11, gid[5]), (12, gid[5]), (12, gid[6])])


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
    expected = spark.createDataFrame(
        [(12670, 0, 12.0, False), (12671, None, 0.0, False), (12672, 74, 122.9, False)], schema
    )
    assert_df_equality(leo_evidence(fetches), expected, ignore_row_order=True)


def test_the_replay_names_the_clusters_whose_producers_have_their_own_settings():
    from ackreplay.replay.stage import ReplayReport

    report = ReplayReport("r", own_producers={"perf": {"linger_ms": 0.0}, "old": {"max_in_flight": 1, "linger_ms": 0}})
    assert report.summary_lines(detail=False)[1:] == [
        "  producers with their own settings (clusters.<name>.producer; the others: replay.producer): "
        "old linger_ms 0, max_in_flight 1; perf linger_ms 0"
    ]
    assert ReplayReport("r").summary_lines(detail=False)[1:] == []
