"""The producer's view: each connection's PRODUCE requests replayed as a chain.

A broker reads one request per connection at a time: `SocketServer.Processor` mutes a channel once it
has received a complete request (`Processor.processCompletedReceives` -> `channel.mute`) and unmutes it
only after the response was sent (`Processor.processCompletedSends` -> `tryUnmuteChannel`); acks=0
requests, which get no response, unmute at once. A producer keeps one connection per broker, so while
one acks=all request waits for a slow follower, every later request to that broker waits in the socket,
and no timing field of the request log shows that wait (kafka-reference §7.1, docs/producer-view.md).

The chain, per connection in time order and per policy p, with `service_p(k)` the replayed request's
time from start to response sent (`t_response - t_start` + response queue + send, the broker's view):

    start_p(k)    = max(floor(k), response_p(k-1) + gap(k) if k was blocked else response_p(k-1))
    response_p(k) = start_p(k) + service_p(k)

* `blocked`: the recorded request started at most `blocked_gap` after the previous response on its
  connection was sent (the log line's time): it waited in the socket behind it; `gap(k)` is that
  recorded turnaround, at least 0 (so the recorded policy replays the recorded starts, up to the log's
  millisecond stamps).
* `floor(k)`: when the request could have started had nothing held it on the broker. A request that was
  not blocked started when it arrived: its recorded start (a leader that did not run, a GC pause or a
  stopped process, delays it the same under every policy). For a blocked request the arrival is not
  logged; it is estimated from the batches' send times (`batch_send_times`): a producer sends a request
  when its earliest batch has lingered `linger.ms` (`RecordAccumulator.ready`) and never before its
  latest batch was created, i.e. `max(latest send, earliest send + linger)`, capped at the recorded
  start. Without send times a blocked request keeps its recorded start as floor.

A producer keeps at most `max.in.flight.requests.per.connection` requests outstanding and puts every
batch waiting for that broker into the next request it sends (`Sender.sendProducerData` ->
`RecordAccumulator.drain`). Under a slower policy than the recorded one, the recorded requests would not
all have been sent as they were: while the slots were taken, later batches waited and went out together.
Where the chain shows that (a later request's batches all existed before this one could be sent), that
connection is replayed request by request (`_rounds`): a request is sent when it has arrived and a slot is
free, carries every later request that could have been in it, and takes the longest of their replayed
services. Without that, a policy slower than the recorded one would queue the recorded request stream
without end. Merging ignores `batch.size` and `max.request.size` (a backed-up producer fills batches and
may need more requests than the model sends) and the producer's `delivery.timeout.ms`.

The producer-visible latency of a batch is `response_p(k) - t_send` (the send time of the batch's first
record; from `floor(k)` without one); `hol_wait = start_p(k) - floor(k)` is the time spent behind the
connection's previous responses.

What the model assumes: a request keeps its replayed service time when the chain moves it (the
followers' replication timeline is taken as independent of the producers' policy); a request that was
not blocked arrives at its recorded start under every policy (a producer that acked faster might have
sent it sooner: its `max.in.flight.requests.per.connection` limit is not modelled). The chain restarts
at each replay group (leader broker and `replay.bucket_seconds` bucket): the first request of a
connection in a group is taken as not blocked. Requests the replay does not see (acks=0, answered with
an error) do not hold their successor.

Without merges, in closed form: on starts, `x(k) = max(floor(k), x(k-1) + c(k))` with
`c(k) = service_p(k-1)` (+ `gap(k)` when blocked); with `C(k) = sum_{i<=k} c(i)`,
`x(k) = C(k) + max_{j<=k} (floor(j) - C(j))`, a cumulative maximum per connection, vectorised over policies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from ackreplay.schemas.vocabulary import NEVER

UNKNOWN_CONNECTION = 0  # connection key of requests logged without one: each is its own chain


@dataclass(frozen=True)
class ChainedRequests:
    """The requests of the connections replayed as chains, per policy (`chain_requests`)."""

    start: np.ndarray  # int64 (policies, n): replayed start
    response: np.ndarray  # int64 (policies, n): replayed response sent
    floor: np.ndarray  # int64 (n,): earliest start had nothing held it on the broker
    blocked: np.ndarray  # bool (n,): the recorded request waited behind the previous response
    # int64 (policies, n): `floor` per policy (`ready_by_policy`, `vanished_at`)
    policy_floor: np.ndarray
    merged: int = 0  # (request, policy) pairs the producer would have sent inside an earlier request


def _leave_with_the_first_batch(
    pfloor: np.ndarray,
    start: np.ndarray,
    blocked: np.ndarray,
    first_ready: np.ndarray,
    conn: np.ndarray,
    same: np.ndarray,
    svc: np.ndarray,
    recorded_policy: np.ndarray | None,
    order: np.ndarray,
) -> np.ndarray:
    """Under a policy that answers every request of a connection no later than the one it was recorded with, a
    request that waited (`blocked`) leaves once its first batch has lingered (`first_ready`): with the
    connection free, the producer sends each batch as it is ready, and the batches created after that go in
    later requests (gold and groups._producer_view count them so). Under a slower policy the connection is no
    freer than recorded: as before (`pfloor`, unchanged). Arrays in chain order (`order`)."""
    if recorded_policy is None:
        return pfloor
    out = pfloor.copy()
    recorded = recorded_policy[order]
    split = np.where(blocked, np.minimum(start, first_ready), start)
    bounds = np.append(np.flatnonzero(~same), conn.size)
    for s, e in zip(bounds[:-1], bounds[1:], strict=False):
        own = np.unique(recorded[s:e])
        if own.size != 1 or not 0 <= own[0] < svc.shape[0]:
            continue
        faster = np.all(svc[:, s:e] <= svc[int(own[0]), s:e], axis=1)
        faster[int(own[0])] = False
        out[faster, s:e] = np.minimum(out[faster, s:e], split[s:e])
    return out


def chain_requests(
    *,
    connection: np.ndarray,
    t_start: np.ndarray,
    t_response_sent: np.ndarray,
    service: np.ndarray,
    send_first: np.ndarray,
    send_last: np.ndarray,
    has_send: np.ndarray,
    linger_us: int,
    blocked_gap_us: int,
    max_in_flight: int = 5,
    moved_response: Callable[[int, np.ndarray, np.ndarray, int], int] | None = None,
    recorded_policy: np.ndarray | None = None,
    ready_by_policy: np.ndarray | None = None,
    vanished_at: np.ndarray | None = None,
    previous_response: np.ndarray | None = None,
) -> ChainedRequests:
    """Replay the requests (one entry each, any order) of one group as per-connection chains.

    `t_response_sent`: the recorded response (log line time); `service` (policies, n): replayed time
    from start to response sent; `send_first`/`send_last`: earliest and latest send time of the
    request's batches (valid where `has_send`). All times int64 microseconds.
    `moved_response(policy, requests, members, start)`: when the requests `requests[members]` (indices
    into these arrays), sent together and started at `start`, are answered under the policy; None: a
    moved request keeps its service time. `recorded_policy`: per request, the index of the policy it was
    recorded with (-1: none of them); a connection recorded with one policy is not re-chained under it.
    `ready_by_policy` (policies, n): where not -NEVER, when the request's batches were ready under the
    policy, in place of `send_first`/`send_last` (some of its batches went out earlier under it).
    `vanished_at` (policies, n): where not -NEVER, every batch of the request went out earlier under the
    policy, from then on: the request holds no later one and takes no time.
    `previous_response`: per request, when the response before it on its connection was sent, also where that
    request is not among these (the previous replay group's; -NEVER: none).

    A request waited behind the previous response on its connection (`blocked`: SocketServer reads the next
    request only once a response is sent, and the producer sends at most max.in.flight at once) when it started
    within `blocked_gap_us` of it, or, with send times, when every batch of it was ready by then.
    """
    n = t_start.size
    p = service.shape[0]
    order = np.lexsort((t_start, connection))
    conn, start, sent = connection[order], t_start[order], t_response_sent[order]
    svc = service[:, order]
    same = np.zeros(n, bool)
    same[1:] = (conn[1:] == conn[:-1]) & (conn[1:] != UNKNOWN_CONNECTION)
    prev_sent = np.full(n, -NEVER, np.int64) if previous_response is None else previous_response[order].copy()
    prev_sent[1:] = np.where(same[1:], sent[:-1], prev_sent[1:])
    known = (prev_sent != -NEVER) & (conn != UNKNOWN_CONNECTION)
    gap = np.where(known, start - prev_sent, NEVER)
    ready = np.maximum(send_last[order], send_first[order] + linger_us)
    blocked = same & (gap <= blocked_gap_us)
    floor = np.where(blocked & has_send[order], np.minimum(start, ready), start)
    pfloor = np.repeat(floor[None, :], p, axis=0)
    if ready_by_policy is not None:
        ready_p = ready_by_policy[:, order]
        pfloor = np.where((ready_p != -NEVER) & blocked & has_send[order], np.minimum(start, ready_p), pfloor)
    if vanished_at is not None:
        gone_at = vanished_at[:, order]
        gone = gone_at != -NEVER
        pfloor = np.where(gone, np.minimum(start, gone_at), pfloor)
        svc = np.where(gone, 0, svc)
    # Under a policy faster than the recorded one, also: the first request of a replay group waited behind the
    # response before it (`previous_response`), and a backlog drains one request at a time: once a request
    # waited behind the previous response, the next one whose batches had all lingered before that request's
    # response was sent waited too, however long the producer took to send it (1.3 ms on a slow core)
    waited = known & (gap <= blocked_gap_us)
    backlogged = same & has_send[order] & (ready <= prev_sent) & (gap >= -blocked_gap_us) & ~waited
    for k in np.flatnonzero(backlogged).tolist():
        waited[k] = waited[k - 1]
    pfloor = _leave_with_the_first_batch(pfloor, start, waited & has_send[order], send_first[order] + linger_us,
                                         conn, same, svc, recorded_policy, order)  # fmt: skip
    # c(k): what the previous request adds on its connection (0 at a chain's first request).
    c = np.zeros((p, n), np.int64)
    # a turnaround the ms log stamps show as negative counts as 0: a request never starts before the
    # previous response on its connection was sent
    c[:, 1:] = svc[:, :-1] + np.where(blocked[1:], np.maximum(gap[1:], 0), 0)
    c[:, ~same] = 0
    x = pfloor.copy()
    response = x + svc
    turnaround = np.where(blocked, np.maximum(gap, 0), 0)
    # a later request can go out inside an earlier one only once every batch of it exists
    last_send = np.where(has_send[order], send_last[order], NEVER)
    merged = 0
    bounds = np.append(np.flatnonzero(~same), n)
    for s, e in zip(bounds[:-1], bounds[1:], strict=False):
        if e - s == 1:  # a chain of one request starts at its floor
            continue
        cum = np.cumsum(c[:, s:e], axis=1)
        x[:, s:e] = cum + np.maximum.accumulate(pfloor[:, s:e] - cum, axis=1)
        response[:, s:e] = x[:, s:e] + svc[:, s:e]
        # Where a later request's batches all existed before this one could be sent (its in-flight slot
        # freed), the producer would have drained it into this request: replay that connection round by round.
        sent_at = np.maximum(pfloor[:, s:e], _shifted(response[:, s:e], max_in_flight))
        mergeable = np.where(blocked[s:e], last_send[s:e], np.maximum(last_send[s:e], pfloor[:, s:e]))
        merges = np.any(mergeable[:, 1:] <= sent_at[:, :-1], axis=1)
        moved = np.any(x[:, s:e] != start[s:e], axis=1)
        recorded = np.unique(recorded_policy[order[s:e]]) if recorded_policy is not None else np.empty(0, int)
        if len(recorded) == 1 and 0 <= recorded[0] < p:
            # under the policy it was recorded with, the connection's requests are what happened: the
            # recorded starts (the turnarounds and merges of the recording are in them), the replayed services
            own = int(recorded[0])
            x[own, s:e], response[own, s:e] = start[s:e], start[s:e] + svc[own, s:e]
            merges[own] = moved[own] = False
        for i in np.flatnonzero(merges | (moved if moved_response is not None else False)).tolist():
            x[i, s:e], response[i, s:e], rounds = _rounds(
                pfloor[i, s:e], start[s:e], svc[i, s:e], turnaround[s:e], mergeable[i], max_in_flight,
                None if moved_response is None else partial(moved_response, i, order[s:e]),
            )  # fmt: skip
            merged += (e - s) - rounds
    out_start, out_response = np.empty_like(x), np.empty_like(x)
    out_start[:, order], out_response[:, order] = x, response
    out_floor = np.empty_like(floor)
    out_floor[order] = floor
    out_blocked = np.empty_like(blocked)
    out_blocked[order] = blocked
    out_pfloor = np.empty_like(pfloor)
    out_pfloor[:, order] = pfloor
    return ChainedRequests(out_start, out_response, out_floor, out_blocked, out_pfloor, merged)


def _shifted(values: np.ndarray, k: int) -> np.ndarray:
    """values[:, j - k] at j (the response k requests back), -inf-like where there is none."""
    out = np.full_like(values, -NEVER)
    if values.shape[1] > k:
        out[:, k:] = values[:, :-k]
    return out


def _rounds(
    floor, start_recorded, service, turnaround, mergeable, max_in_flight: int, moved_response=None
) -> tuple[np.ndarray, np.ndarray, int]:
    """One connection under one policy, request by request as the producer would send them: a request is
    sent once it has arrived (`floor`) and one of `max_in_flight` slots is free (the response
    `max_in_flight` requests back), and carries every later recorded request that could have been in it
    by then (`mergeable`: its batches existed, `RecordAccumulator.drain` taking every partition's
    batch for the node; for a request whose arrival was logged, also that arrival); the broker starts it
    after the previous response (plus the recorded turnaround), and the merged request takes the
    longest of its members' replayed services. A request that starts at its recorded start alone keeps
    its replayed service; otherwise `moved_response(members, start)` (when given) says when it would
    have been answered. Returns (start, response) per recorded request and the number of requests sent."""
    n = floor.size
    start, response = np.empty(n, np.int64), np.empty(n, np.int64)
    sent_responses: list[int] = []
    previous = -NEVER
    i = 0
    while i < n:
        slot = sent_responses[-max_in_flight] if len(sent_responses) >= max_in_flight else -NEVER
        sent_at = max(int(floor[i]), slot)
        j = i + 1
        while j < n and mergeable[j] <= sent_at:
            j += 1
        begin = max(sent_at, previous + int(turnaround[i])) if previous != -NEVER else sent_at
        if moved_response is None or (j == i + 1 and begin == start_recorded[i]):
            previous = begin + int(service[i:j].max())
        else:
            previous = int(moved_response(np.arange(i, j), begin))
        start[i:j], response[i:j] = begin, previous
        sent_responses.append(previous)
        i = j
    return start, response, len(sent_responses)
