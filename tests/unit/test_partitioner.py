"""Kafka's partitioner replayed (ackreplay/replay/partitioner.py): the rules of `BuiltInPartitioner` and
`RecordAccumulator` on small hand-made producers, and one group of the gold step."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ackreplay.replay.partitioner import (
    NEVER,
    AckProfile,
    Leaders,
    PlacementSettings,
    ProducerConfig,
    Spans,
    place_keyless_records,
    placement_of_group,
)
from ackreplay.transforms.keyless import ANSWER, BATCH, PLACEMENT, SPAN

MS = 1_000


def _runs(partitions: np.ndarray) -> list[int]:
    """Lengths of the runs of equal partitions, in order."""
    edges = np.flatnonzero(np.diff(partitions)) + 1
    return np.diff(np.concatenate([[0], edges, [partitions.size]])).tolist()


def _answering_in(ms: int) -> AckProfile:
    """A partition whose requests are answered `ms` after they are read, whenever."""
    return AckProfile(np.array([0]), np.array([ms * MS]))


def test_an_answer_is_no_later_than_the_next_recorded_one_nor_than_the_last_ones_wait():
    profile = AckProfile(np.array([10, 20, 30, 40, 50, 60]), np.array([15, 100, 35, NEVER, 80, NEVER]))
    # before the first: its wait (5); between: the next answer or the previous wait, the earlier; after a request
    # that was not acknowledged (rejected below min ISR): the next answer only; after one not acknowledged and no
    # answer later: never
    assert [profile.answer_at(t) for t in (5, 12, 25, 30, 32, 41, 55, 61)] == [10, 17, 35, 35, 37, 80, 85, NEVER]
    assert AckProfile(np.array([10]), np.array([NEVER])).answer_at(20) == NEVER


def test_a_request_arriving_while_its_broker_reads_nothing_is_read_when_that_ends():
    spans = Spans([(15, 30), (10, 20), (50, 60)])
    assert (spans.starts, spans.ends) == ([10, 50], [30, 60])
    assert [spans.read_at(t) for t in (9, 12, 30, 40, 55)] == [9, 30, 30, 40, 60]


def test_the_sticky_partition_switches_after_batch_size_bytes():
    """`BuiltInPartitioner.updatePartitionInfo`: 1,000-byte records, batch.size 4,000, every batch sent at once
    (linger 0): four records per partition, the switch at the append after the fourth (the queue is empty then:
    every batch full, `RecordAccumulator.partitionChanged`)."""
    profiles = {p: _answering_in(1) for p in range(3)}
    leaders = Leaders({p: ([0], [p + 1]) for p in range(3)})
    send = np.arange(12, dtype=np.int64) * 10 * MS
    placed = place_keyless_records(
        send, np.full(12, 1_000), leaders, profiles, {}, ProducerConfig(batch_size=4_000, linger_us=0), seed=3
    )
    # a draw may give the same partition again; it is drawn only every fourth record
    assert (placed.partition.reshape(3, 4) == placed.partition[::4, None]).all()
    assert placed.partition.tolist() == [2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0]
    assert (placed.answered - send).tolist() == [MS] * 12


def test_a_partition_whose_queue_holds_an_incomplete_batch_keeps_records_up_to_twice_batch_size():
    """Both leaders paused: every queue backs up behind the one request in flight, the last batch is never full
    when batch.size bytes went to the partition, so the switch waits for twice batch.size (six records of 1,500
    bytes: 9,000 >= 8,000). All are answered when the pause ends."""
    profiles = {p: _answering_in(1) for p in range(2)}
    leaders = Leaders({p: ([0], [p + 1]) for p in range(2)})
    paused = {broker: Spans([(0, 1_000 * MS)]) for broker in (1, 2)}
    send = np.arange(1, 25, dtype=np.int64) * MS
    config = ProducerConfig(batch_size=4_000, linger_us=0, max_in_flight=1)
    placed = place_keyless_records(send, np.full(24, 1_500), leaders, profiles, paused, config, seed=1)
    assert (placed.partition.reshape(4, 6) == placed.partition[::6, None]).all()
    assert _runs(placed.partition) == [6, 18]
    # one request per broker waits out the pause; the batches behind it go one request after another, each
    # answered 1 ms after the one before
    assert sorted(set(placed.answered.tolist())) == [1_001 * MS + k * MS for k in range(10)]


def test_the_adaptive_partitioner_sends_fewer_records_to_a_paused_leader():
    """KIP-794 (`updatePartitionLoadStats`): the next partition is drawn with weight max(queue) + 1 - queue, so
    a leader that answers nothing for a second gets fewer records than a uniform draw gives it; its records wait
    for the pause's end. Figures of seeded draws."""
    profiles = {p: _answering_in(1) for p in range(3)}
    leaders = Leaders({p: ([0], [p + 1]) for p in range(3)})
    paused = {1: Spans([(0, 1_000 * MS)])}
    send = np.arange(1, 2_001, dtype=np.int64) * 500  # 2,000 records/s for a second
    on_paused = {}
    for adaptive in (True, False):
        config = ProducerConfig(batch_size=4_000, linger_us=0, max_in_flight=5, adaptive=adaptive)
        placed = place_keyless_records(send, np.full(send.size, 1_000), leaders, profiles, paused, config, seed=7)
        waited = placed.partition == 0
        # the paused leader's records are answered after the pause; the others' within 6 ms (one request at a
        # time per connection, each answered in 1 ms)
        assert placed.answered[waited].min() == 1_001 * MS
        assert (placed.answered - send)[~waited].max() == 6 * MS
        on_paused[adaptive] = int(waited.sum())
    assert on_paused == {True: 85, False: 629}


def _group_rows() -> pd.DataFrame:
    """One (cluster, topic, policy) group: two partitions led by brokers 1 and 2, each answering in 2 ms; broker
    1 read nothing from 100 to 300 ms; one producer's 100 records of 500 bytes, one batch of 10 every 20 ms
    alternating between the partitions, the records of each batch sent over its first 9 ms."""
    rows = [
        {"kind": ANSWER, "partition": p, "broker_id": p + 1, "t_from_us": t * MS, "t_to_us": (t + 2) * MS}
        for p in (0, 1)
        for t in range(0, 400, 10)
    ]
    sends = [{"after_ms": k, "records": 1} for k in range(10)]
    rows += [
        {
            "kind": BATCH, "partition": b % 2, "broker_id": b % 2 + 1, "t_from_us": b * 20 * MS,
            "t_to_us": (b * 20 + 10) * MS, "client_id": "producer-1", "bytes": 5_000, "records": 10,
            "record_sends": sends,
        }
        for b in range(10)
    ]  # fmt: skip
    rows.append({"kind": SPAN, "broker_id": 1, "t_from_us": 100 * MS, "t_to_us": 300 * MS})
    frame = pd.DataFrame(rows)
    frame.insert(0, "cluster", "c")
    frame.insert(1, "topic", "t")
    frame.insert(2, "policy", "acks=1")
    return frame


def test_a_topic_group_gives_pooled_quantiles_and_the_range_of_single_draws():
    settings = PlacementSettings(ProducerConfig(batch_size=2_000, linger_us=0), draws=3, p999_min_n=50)
    (row,) = placement_of_group(_group_rows(), settings).to_dict("records")
    assert list(row) == PLACEMENT.fieldNames()
    assert {k: row[k] for k in ("cluster", "topic", "policy", "placed_records", "placed_draws")} == {
        "cluster": "c", "topic": "t", "policy": "acks=1", "placed_records": 100, "placed_draws": 3,
    }  # fmt: skip
    # records sent while broker 1 read nothing wait for it (up to 200 ms and the backlog behind it); the others
    # take the producer's own recorded path (10 ms from a batch's first record to its read), 2 ms at the broker and
    # their turn on the connection
    figures = {k: round(v, 3) for k, v in row.items() if k.endswith("_ms")}
    assert figures == {
        "placed_p50_ms": 15.0, "placed_p99_ms": 209.06, "placed_p999_ms": 216.701, "placed_p99_low_ms": 144.01,
        "placed_p99_high_ms": 216.01, "placed_p999_low_ms": 144.901, "placed_p999_high_ms": 216.901,
    }  # fmt: skip
    # the same rows in another order give the same figures
    shuffled = _group_rows().sample(frac=1.0, random_state=5)
    assert placement_of_group(shuffled, settings).to_dict("records") == [row]


def test_a_group_without_recorded_batches_has_no_figures():
    rows = _group_rows()
    (row,) = placement_of_group(rows[rows["kind"] != BATCH], PlacementSettings()).to_dict("records")
    assert row["placed_records"] == 0 and row["placed_p99_ms"] is None and row["placed_draws"] == 5


def test_the_report_shows_a_keyless_topics_placement_and_nothing_for_a_keyed_one():
    from ackreplay.gold.report import _placement_table

    placed = {
        "policy": "acks=1", "placed_draws": 5, "placed_p50_ms": 1.1, "placed_p99_ms": 127.4, "placed_p99_low_ms": 33.6,
        "placed_p99_high_ms": 409.9, "placed_p999_ms": 9099.6, "placed_p999_low_ms": 9014.2,
        "placed_p999_high_ms": 9249.6,
    }  # fmt: skip
    table = _placement_table([placed, {"policy": "acks=all", "placed_p99_ms": None}])
    assert "5 seeded draws pooled" in table
    assert '<tr><td class="left" data-key="policy" data-value="acks=1">acks=1</td>' in table
    assert ">127.4 (33.6–409.9)</td>" in table and ">9,099.6 (9,014.2–9,249.6)</td>" in table
    assert "acks=all" not in table.split("</p>")[1]  # a policy without figures has no row
    assert _placement_table([{"policy": "acks=1", "placed_p99_ms": None}]) == ""
