"""Keyless records placed again by Kafka's producer under another policy (KIP-794's partitioner, replayed).

A record without a key has no partition of its own: Kafka's built-in partitioner (`BuiltInPartitioner`,
KIP-794, Kafka 3.3+) sticks to one partition until `batch.size` bytes went to it, then draws the next one
with weights that fall as a partition's queue of unsent batches grows. So where a producer's records went
depends on how fast each partition's batches left, i.e. on the acks policy: under acks=1 a paused leader's
queues stop draining while the other leaders' keep draining, and the producer moves its records away; under
acks=all the same pause holds every leader (the paused broker is their follower), every queue stops alike,
and the records stay spread. Replaying each recorded batch on its recorded partition under another policy
keeps the recorded policy's placement; this module places the producer's records again, record by record,
with the policy's acks.

The rules, from Kafka's producer (clients/src/main/java/org/apache/kafka/clients/producer/internals):

* `BuiltInPartitioner.updatePartitionInfo`: after a record is appended, the sticky partition switches once
  `batch.size` bytes went to it and every batch in its queue is full (`RecordAccumulator.allBatchesFull`),
  or once twice `batch.size` went to it whatever the queue;
* `BuiltInPartitioner.nextPartition` with `updatePartitionLoadStats`: the next partition is drawn among the
  partitions with a leader, partition i with weight `max(queue) + 1 - queue[i]`, uniformly when all queues
  are equal (queue: the partition's batches not yet drained, `RecordAccumulator.partitionReady`); before
  every partition has had a batch (`batches.size() < partitionsForTopic(topic).size()`) uniformly;
* `RecordAccumulator.append`/`tryAppend`: a record goes into the last batch of its partition's queue if it
  fits in `batch.size`, else into a new batch;
* `RecordAccumulator.ready`/`drain` with `Sender.sendProducerData`: a node is sent to when one of its
  partitions has a batch that is full, has lingered `linger.ms`, or has another behind it, and the
  connection has fewer than `max.in.flight.requests.per.connection` requests outstanding; a request takes
  the first batch of each of the node's partitions (`drainBatchesForOneNode`);
* the broker reads one request per connection at a time (`SocketServer`, ackreplay/replay/connections.py),
  and none while it does not run (a paused leader: `replay_inputs.broker_silences`); the response comes when
  the request's last partition is acknowledged under the policy (`ack_at`).

What it assumes: the producer's own loop costs no time (the sender drains at once); the weights follow the
queues at every switch (Kafka refreshes them at each `ready` pass of the sender, which runs continuously
under load); a moved batch is acknowledged as the policy acknowledged the recorded batches appended around
that time on its new partition (`ack_at`, the replay's own acks: the followers' replication timeline is the
recording's whatever the producers do); no retries, request timeouts or buffer exhaustion. The draw is
seeded, so a run is reproducible.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ackreplay.schemas.vocabulary import NEVER
from ackreplay.transforms.gold import P999_MIN_N


@dataclass(frozen=True)
class ProducerConfig:
    """The producer settings the partitioner and the sender follow (Kafka's defaults)."""

    batch_size: int = 16_384  # batch.size (also the sticky partitioner's switch size)
    linger_us: int = 5_000  # linger.ms (5 ms since Kafka 4.0, 0 before)
    max_in_flight: int = 5  # max.in.flight.requests.per.connection
    adaptive: bool = True  # partitioner.adaptive.partitioning.enable


class AckProfile:
    """When a batch whose request the leader read at t would be answered, from the replayed requests that
    carried the partition's batches (read at `read_us`, answered at `ack_us`; NEVER: not acknowledged, e.g.
    rejected below min ISR): no later than the earliest answer of one read at or after t (it waits for the same
    followers' same fetches), nor later than t plus the time the last one read before t took (healthy followers
    fetch it as fast; the leader's own handling is in it; the first one's before the first). Where the last one
    read before t was not acknowledged, only the next answer bounds it: the partition was not taking batches
    then, and the producer retries until it does. The same rule as the replay's `groups._AckProfiles`, with
    the unacknowledged requests kept as such."""

    def __init__(self, read_us: np.ndarray, ack_us: np.ndarray) -> None:
        read_us, ack_us = np.asarray(read_us, np.int64), np.asarray(ack_us, np.int64)
        order = np.lexsort((ack_us, read_us))
        read_us, ack_us = read_us[order], ack_us[order]
        self.read = read_us.tolist()
        self.took = np.where(ack_us == NEVER, NEVER, ack_us - read_us).tolist()
        self.next_answer = np.minimum.accumulate(ack_us[::-1])[::-1].tolist()

    def answer_at(self, t: int) -> int:
        if not self.read:
            return NEVER
        after = bisect_left(self.read, t)
        by_next = self.next_answer[after] if after < len(self.read) else NEVER
        took = self.took[after - 1 if after > 0 else 0]
        return min(by_next, t + took) if took != NEVER else by_next


class Spans:
    """Sorted, disjoint (from, to) spans of one broker in which it read no request."""

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]

    def read_at(self, t: int) -> int:
        """When a request that arrived at t is read: at t, or where the span holding t ends."""
        k = bisect_right(self.starts, t) - 1
        return self.ends[k] if k >= 0 and t < self.ends[k] else t


class Leaders:
    """Each partition's leader over time: (from, broker) steps."""

    def __init__(self, steps: Mapping[int, tuple[Sequence[int], Sequence[int]]]) -> None:
        self.steps = {p: (list(times), list(brokers)) for p, (times, brokers) in steps.items()}

    def at(self, partition: int, t: int) -> int:
        times, brokers = self.steps[partition]
        return brokers[max(bisect_right(times, t) - 1, 0)]


@dataclass
class _Batch:
    partition: int
    created_us: int
    size: int = 0
    records: list[int] = field(default_factory=list)
    closed: bool = False  # a record did not fit: no more appends (`ProducerBatch.isFull`)

    def full(self, batch_size: int) -> bool:
        return self.closed or self.size >= batch_size


class Placement(NamedTuple):
    """Per record: the partition the producer put it in, and when its batch was answered (NEVER: not in the
    data)."""

    partition: np.ndarray
    answered: np.ndarray


def place_keyless_records(
    send_us: np.ndarray,
    size: np.ndarray,
    leaders: Leaders,
    profiles: Mapping[int, AckProfile],
    spans: Mapping[int, Spans],
    config: ProducerConfig,
    *,
    seed: int = 0,
) -> Placement:
    """Where and when one producer's keyless records of one topic (sent at `send_us`, sorted, `size` bytes
    each) go when Kafka's producer places them under the policy whose answers `profiles[partition]` give.
    The topic's partitions are `profiles`'s;
    `spans[broker]`: when the broker read no request. Records sent at the same instant are appended
    before the sender runs (an application thread's burst)."""
    partitions = sorted(profiles)
    n = int(send_us.size)
    answered = np.full(n, NEVER, np.int64)
    placed = np.full(n, -1, np.int32)
    rng = np.random.default_rng(seed)
    queues: dict[int, deque[_Batch]] = {p: deque() for p in partitions}
    seen: set[int] = set()  # partitions that have had a batch (Kafka's `batches` map entries)
    in_flight: dict[int, int] = {}
    broker_free: dict[int, int] = {}  # when the broker sent the connection's last response
    responses: list[tuple[int, int, int, list[_Batch]]] = []  # (time, sequence, broker, batches)
    linger_deadlines: list[int] = []
    sequence = 0
    batch_size = config.batch_size
    no_spans = Spans(())

    def draw() -> int:
        sizes = [len(queues[p]) for p in partitions]
        if not config.adaptive or len(seen) < len(partitions) or min(sizes) == max(sizes):
            return partitions[int(rng.integers(len(partitions)))]
        cumulative = np.cumsum([max(sizes) + 1 - q for q in sizes])
        return partitions[int(np.searchsorted(cumulative, rng.integers(int(cumulative[-1])), "right"))]

    def all_full(q: deque[_Batch]) -> bool:  # `RecordAccumulator.allBatchesFull`: only the last may not be
        return not q or q[-1].full(batch_size)

    def send_ready(now: int) -> None:
        nonlocal sequence
        by_broker: dict[int, list[int]] = {}
        for p in partitions:
            if queues[p]:
                by_broker.setdefault(leaders.at(p, now), []).append(p)
        for broker, led in by_broker.items():
            while in_flight.get(broker, 0) < config.max_in_flight:
                waiting = [queues[p] for p in led if queues[p]]
                if not any(
                    len(q) > 1 or q[0].full(batch_size) or now - q[0].created_us >= config.linger_us for q in waiting
                ):
                    break
                batches = [q.popleft() for q in waiting]
                read = spans.get(broker, no_spans).read_at(max(now, broker_free.get(broker, now)))
                response = max(profiles[b.partition].answer_at(read) for b in batches)
                broker_free[broker] = read if response == NEVER else response
                in_flight[broker] = in_flight.get(broker, 0) + 1
                sequence += 1
                heapq.heappush(responses, (response, sequence, broker, batches))

    def advance_to(t: int) -> None:
        """Responses and linger deadlines up to t, in time order, each followed by the sender's pass."""
        while True:
            next_response = responses[0][0] if responses else NEVER
            next_deadline = linger_deadlines[0] if linger_deadlines else NEVER
            if min(next_response, next_deadline) > t:
                return
            if next_response <= next_deadline:
                response, _, broker, batches = heapq.heappop(responses)
                in_flight[broker] -= 1
                for b in batches:
                    answered[b.records] = response
                send_ready(response)
            else:
                send_ready(heapq.heappop(linger_deadlines))

    sticky, produced = -1, 0
    times = send_us.tolist()
    sizes = np.asarray(size, np.int64).tolist()
    i = 0
    while i < n:
        now = times[i]
        advance_to(now)
        while i < n and times[i] == now:
            if sticky < 0:
                sticky = draw()
            elif produced >= batch_size and all_full(queues[sticky]):
                sticky, produced = draw(), 0  # a switch put off while the queue had an incomplete batch
            q = queues[sticky]
            record_size = sizes[i]
            if q and not q[-1].closed and q[-1].records and q[-1].size + record_size > batch_size:
                q[-1].closed = True
            if not q or q[-1].closed:
                q.append(_Batch(sticky, now))
                seen.add(sticky)
                if config.linger_us > 0:
                    heapq.heappush(linger_deadlines, now + config.linger_us)
            q[-1].size += record_size
            q[-1].records.append(i)
            placed[i] = sticky
            produced += record_size
            if produced >= batch_size and all_full(q) or produced >= 2 * batch_size:
                sticky, produced = draw(), 0
            i += 1
        send_ready(now)
    advance_to(NEVER - 1)
    return Placement(placed, answered)


@dataclass(frozen=True)
class PlacementSettings:
    """The producers' settings (conf `replay.producer`) and how many seeded draws of the partitioner to pool."""

    producer: ProducerConfig = ProducerConfig()
    draws: int = 5
    seed: int = 0
    p999_min_n: int = P999_MIN_N  # as gold's P999


def _records_of(batches) -> tuple[np.ndarray, np.ndarray]:
    """Each record's send time and size (µs, bytes) from `batch` rows: the records of `record_sends` at their
    own send times, or every record at its batch's first send where the batch has none (an upper bound, as
    gold counts them); a batch's bytes spread evenly over its records."""
    sends: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    for t_send, n_bytes, n_records, listing in zip(
        batches["t_from_us"].tolist(),
        batches["bytes"].tolist(),
        batches["records"].tolist(),
        batches["record_sends"].tolist(),
        strict=True,
    ):
        count = 1 if n_records is None or n_records != n_records or n_records < 1 else int(n_records)
        per_record = 0 if n_bytes is None or n_bytes != n_bytes else int(n_bytes) // count
        if listing is not None and len(listing) > 0:
            after = np.repeat(
                np.array([int(r["after_ms"]) for r in listing], np.int64) * 1000,
                np.array([int(r["records"]) for r in listing], np.int64),
            )
        else:
            after = np.zeros(count, np.int64)
        sends.append(int(t_send) + after)
        sizes.append(np.full(after.size, per_record, np.int64))
    if not sends:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    send, size = np.concatenate(sends), np.concatenate(sizes)
    order = np.argsort(send, kind="stable")
    return send[order], size[order]


def _or_never(column) -> np.ndarray:
    """A nullable µs column as int64, NEVER where null (µs since 1970 are exact in a float64)."""
    values = column.to_numpy(np.float64, na_value=np.nan)
    out = np.full(values.size, NEVER, np.int64)
    known = ~np.isnan(values)
    out[known] = values[known].astype(np.int64)
    return out


def placement_of_group(pdf, settings: PlacementSettings):
    """One (cluster, topic, policy) group of transforms/keyless.py's rows -> its one row of placed quantiles."""
    import pandas as pd

    from ackreplay.transforms.keyless import ANSWER, BATCH, PLACEMENT, SPAN

    key = {c: pdf[c].iloc[0] for c in ("cluster", "topic", "policy")}
    # rows arrive in the shuffle's order: a total order keeps a draw's result the same on every run
    pdf = pdf.sort_values(["kind", "partition", "t_from_us", "t_to_us", "broker_id", "client_id"], kind="mergesort")
    answers = pdf[pdf["kind"] == ANSWER]
    batches = pdf[pdf["kind"] == BATCH]
    gaps = pdf[pdf["kind"] == SPAN]
    empty: dict[str, int | None] = {name: None for name in PLACEMENT.fieldNames() if name.endswith("_ms")}
    empty |= {"placed_records": 0, "placed_draws": settings.draws}
    if batches.empty or answers.empty:
        return pd.DataFrame([key | empty])
    profiles = {
        int(p): AckProfile(g["t_from_us"].to_numpy(np.int64), _or_never(g["t_to_us"]))
        for p, g in answers.groupby("partition")
    }
    ordered = batches.sort_values("t_to_us", kind="stable")
    leaders = Leaders(
        {int(p): (g["t_to_us"].tolist(), g["broker_id"].astype(int).tolist()) for p, g in ordered.groupby("partition")}
    )
    for p in profiles:  # a partition the policy answered but no recorded batch shows the leader of
        if p not in leaders.steps:
            g = answers[answers["partition"] == p].sort_values("t_from_us")
            leaders.steps[p] = (g["t_from_us"].tolist(), g["broker_id"].astype(int).tolist())
    spans = {
        int(b): Spans(list(zip(g["t_from_us"].tolist(), g["t_to_us"].tolist(), strict=True)))
        for b, g in gaps.groupby("broker_id")
    }
    producers = [records for _, records in batches.groupby(batches["client_id"].fillna(""), sort=True)]
    latencies: list[list[np.ndarray]] = [[] for _ in range(settings.draws)]
    placed = 0
    for records in producers:
        send, size = _records_of(records)
        placed += send.size
        # the producer's own path to the broker beyond linger.ms, as recorded (the median over its batches)
        transit = max(int(np.median(records["t_to_us"] - records["t_from_us"])) - settings.producer.linger_us, 0)
        for draw in range(settings.draws):
            answered = place_keyless_records(
                send + transit, size, leaders, profiles, spans, settings.producer, seed=settings.seed + draw
            ).answered
            ok = answered != NEVER
            latencies[draw].append((answered[ok] - send[ok]) / 1000.0)
    per_draw = [np.concatenate(d) if d else np.empty(0) for d in latencies]
    pooled = np.concatenate(per_draw)
    if pooled.size == 0:
        return pd.DataFrame([key | empty | {"placed_records": placed}])
    p999_ok = pooled.size / settings.draws >= settings.p999_min_n
    p99 = [float(np.percentile(d, 99)) for d in per_draw if d.size]
    p999 = [float(np.percentile(d, 99.9)) for d in per_draw if d.size]
    row = {
        "placed_records": placed,
        "placed_draws": settings.draws,
        "placed_p50_ms": float(np.percentile(pooled, 50)),
        "placed_p99_ms": float(np.percentile(pooled, 99)),
        "placed_p999_ms": float(np.percentile(pooled, 99.9)) if p999_ok else None,
        "placed_p99_low_ms": min(p99),
        "placed_p99_high_ms": max(p99),
        "placed_p999_low_ms": min(p999) if p999_ok else None,
        "placed_p999_high_ms": max(p999) if p999_ok else None,
    }
    return pd.DataFrame([key | row])
