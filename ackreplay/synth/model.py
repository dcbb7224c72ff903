"""The simulated cluster: produces, follower fetch sessions, ISR changes and a leader change, as NumPy arrays.

The rules are the replay's (README "The replay", docs/design.md "Event times"), so that replaying
`acks=all` on a generated trace reproduces the generated ack times:

- A produce is appended at `t_local_done` (offsets in append order per leader epoch).
- Each follower runs one fetch session per leader (`num.replica.fetchers=1`). The leader handles a
  FETCH from `t_dequeue` for `localTimeMs`; it learns the follower's LEO (the request's `fetchOffset`)
  and reads its log at the midpoint `u = t_dequeue + localTimeMs / 2` (the replay's default
  `fetch_update_fraction`; local times are whole even microseconds so the midpoint is exact). With no
  new data it parks the request until an append (read then) or `replica.fetch.wait.max.ms`.
- The next request of the session lists the partitions whose LEO changed (incremental sessions, KIP-227)
  with `fetchOffset` = the leader's LEO at the previous read, and arrives after a round trip.
- So follower f holds batch b at `T_f(b)` = `u` of the request after the first read at or after the
  append, and the high watermark passes b at the first time every ISR member holds it, where a member
  removed from the ISR stops counting at the logged commit ("ISR updated to") and a re-added one counts
  again from its commit. That is the broker's ack time of an acks=all produce:
  `t_ack_observed = t_local_done + remoteTimeMs`.

Fault processes: GC-like pauses and long stalls stop a broker's fetchers (its next request waits until
the pause ends); one broker has slower round trips; a stall past `replica.lag.time.max.ms` shrinks the
ISR (the leader's expiration check runs every lag/2) and the follower is re-added once a request
reports it caught up; one partition can move to its next replica late in the trace (requests still
waiting on the old leader fail with NOT_LEADER_OR_FOLLOWER, followers truncate to the new epoch's
start offset).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from ackreplay.synth.params import Lognormal, SynthParams

NEVER = np.int64(2**62)
_SPAN = np.int64(2**42)  # µs; keys (id * _SPAN + relative time) keep per-id arrays in one sorted array
ERROR_NONE, ERROR_NOT_LEADER, ERROR_TIMEOUT = 0, 6, 7


def _lognormal_us(rng: np.random.Generator, dist: Lognormal, size, minimum: int = 1) -> np.ndarray:
    ms = dist.median * np.exp(dist.sigma * rng.standard_normal(size))
    return np.maximum(np.rint(ms * 1000.0), minimum).astype(np.int64)


def topic_id(seed: int, index: int) -> str:
    """A 22-character base64url topic id, deterministic by seed."""
    raw = np.random.default_rng([seed, 7919, index]).integers(0, 256, 16, dtype=np.uint8).tobytes()
    return base64.urlsafe_b64encode(raw).decode()[:22]


@dataclass
class Epoch:
    """One leader epoch of one partition in the simulation."""

    eid: int
    partition: int  # global partition index
    leader_epoch: int
    leader: int
    followers: list[int]
    t_begin: int  # µs: leadership starts (state-change line)
    t_end: int  # µs: NEVER if it lasts to the end
    start_offset: int = 0
    start_hw: int = 0
    partition_epoch: int = 0


@dataclass
class IsrChange:
    """A shrink or expansion the simulation proposes and commits."""

    eid: int
    follower: int
    t_propose: int  # shrink: the "Shrinking ISR" line; expand: the qualifying FETCH (not logged)
    t_commit: int
    kind: str  # "shrink" | "expand"
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    hw: int = 0
    leader_leo: int = 0
    follower_leo: int = 0
    last_caught_up_us: int = 0


@dataclass
class Trace:
    """A simulated trace: all times in µs since the Unix epoch (UTC)."""

    params: SynthParams
    t0: int
    topic_names: list[str]
    topic_ids: list[str]
    replicas: np.ndarray  # (partitions, RF) broker ids in assignment order
    epochs: list[Epoch]
    # produces (one request per batch, one partition each), ordered by t_local_done
    p_partition: np.ndarray
    p_epoch: np.ndarray
    p_leader: np.ndarray
    p_acks: np.ndarray
    p_records: np.ndarray
    p_bytes: np.ndarray
    p_base_offset: np.ndarray
    p_error: np.ndarray
    p_client: np.ndarray
    p_correlation: np.ndarray
    p_t_local_done: np.ndarray
    p_queue: np.ndarray
    p_local: np.ndarray
    p_remote: np.ndarray
    p_response_queue: np.ndarray
    p_send: np.ndarray
    p_t_log: np.ndarray
    p_replicated: np.ndarray  # when the high watermark passed the batch (NEVER if not in the trace)
    # follower fetch requests, ordered by (session, request index)
    sessions: list[tuple[int, int]]  # (follower, leader)
    session_ids: np.ndarray
    f_session: np.ndarray
    f_index: np.ndarray  # request index within its session (= sessionEpoch)
    f_t_start: np.ndarray
    f_queue: np.ndarray
    f_local: np.ndarray
    f_remote: np.ndarray
    f_response_queue: np.ndarray
    f_send: np.ndarray
    f_t_log: np.ndarray
    f_read: np.ndarray
    # partitions listed in a request, and in its response
    l_fetch: np.ndarray  # global fetch row
    l_epoch: np.ndarray
    l_fetch_offset: np.ndarray
    r_fetch: np.ndarray
    r_epoch: np.ndarray
    r_high_watermark: np.ndarray
    r_bytes: np.ndarray
    forgotten_fetch: np.ndarray
    forgotten_epoch: np.ndarray
    isr_changes: list[IsrChange]
    pauses: dict[int, list[tuple[int, int]]]  # broker -> (start, end) µs, GC pauses and long stalls
    long_stalls: list[tuple[int, int, int]]  # (broker, start, end)
    leader_change: tuple[int, int] | None  # (partition, t) µs

    @property
    def t_dequeue_fetch(self) -> np.ndarray:
        return self.f_t_start + self.f_queue

    @property
    def follower_update_time(self) -> np.ndarray:
        """When the leader learns a request's fetch offsets (the replay's event time)."""
        return self.f_t_start + self.f_queue + self.f_local // 2


def _ceil_ms(us: int) -> int:
    return -(-us // 1000) * 1000


def _merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


class _Sampler:
    """Pre-drawn blocks of (steps, sessions) samples, so the per-step loop does no RNG calls."""

    def __init__(
        self, rng: np.random.Generator, dist: Lognormal, width: int, scale: np.ndarray | None = None, even=False
    ):
        self.rng, self.dist, self.width, self.scale, self.even = rng, dist, width, scale, even
        self.block: np.ndarray | None = None
        self.row = 0

    def next(self) -> np.ndarray:
        if self.block is None or self.row == self.block.shape[0]:
            ms = self.dist.median * np.exp(self.dist.sigma * self.rng.standard_normal((4096, self.width)))
            if self.scale is not None:
                ms = ms * self.scale
            if self.even:
                self.block = np.maximum(2 * np.rint(ms * 500.0), 2).astype(np.int64)
            else:
                self.block = np.maximum(np.rint(ms * 1000.0), 1).astype(np.int64)
            self.row = 0
        self.row += 1
        return self.block[self.row - 1]


def _simulate_sessions(
    params: SynthParams,
    rng: np.random.Generator,
    t0: int,
    appends: list[np.ndarray],
    session_start: np.ndarray,
    session_end: np.ndarray,
    session_follower: np.ndarray,
    pauses: dict[int, list[tuple[int, int]]],
) -> dict[str, np.ndarray]:
    """Run every fetch session forward in lock step (vectorized over sessions, one loop turn per request)."""
    n = len(appends)
    rel = [a - t0 for a in appends]
    # A trailing NEVER keeps every lookup in bounds.
    append_keys = np.concatenate([rel[s] + s * _SPAN for s in range(n)] + [np.array([NEVER], np.int64)])
    session_key_end = np.arange(1, n + 1, dtype=np.int64) * _SPAN
    pause_rows = [(b, s - t0, e - t0) for b, spans in pauses.items() for s, e in spans]
    pause_rows.sort(key=lambda x: (x[0], x[1]))
    pause_keys = np.array([b * _SPAN + s for b, s, _ in pause_rows], dtype=np.int64)
    pause_broker = np.array([b for b, _, _ in pause_rows], dtype=np.int64)
    pause_end = np.array([e for _, _, e in pause_rows], dtype=np.int64)
    slow = params.slow_broker_id
    scale = np.where(session_follower == slow, params.slow_factor, 1.0) if slow is not None else None
    queue = _Sampler(rng, params.fetch_queue, n)
    local = _Sampler(rng, params.fetch_local, n, even=True)
    response_queue = _Sampler(rng, params.response_queue, n)
    send = _Sampler(rng, params.send, n)
    round_trip = _Sampler(rng, params.fetch_round_trip, n, scale)
    follower_keys = session_follower.astype(np.int64) * _SPAN
    max_wait = params.fetch_max_wait_ms * 1000

    def after_pauses(t: np.ndarray) -> np.ndarray:
        if pause_keys.size == 0:
            return t
        i = np.searchsorted(pause_keys, follower_keys + t, side="right") - 1
        ic = np.maximum(i, 0)
        inside = (i >= 0) & (pause_broker[ic] == session_follower) & (t < pause_end[ic])
        return np.where(inside, pause_end[ic] + round_trip.next(), t)

    t_start = after_pauses(session_start - t0 + round_trip.next())
    last_read = session_start - t0 - 1
    end = session_end - t0
    active = t_start < end
    columns: dict[str, list[np.ndarray]] = {
        k: [] for k in ("session", "t_start", "queue", "local", "remote", "rq", "send", "t_log", "read")
    }
    sessions = np.arange(n)
    key_base = sessions.astype(np.int64) * _SPAN
    while active.any():
        q, lt = queue.next(), local.next()
        t_dequeue = t_start + q
        update = t_dequeue + lt // 2
        local_done = t_dequeue + lt
        i = np.searchsorted(append_keys, key_base + last_read, side="right")
        next_append = append_keys[i]
        next_append = np.where(next_append < session_key_end, next_append - key_base, NEVER)
        immediate = next_append <= update
        deadline = local_done + max_wait
        delayed = ~immediate & (next_append <= deadline)
        read = np.where(immediate, update, np.where(delayed, np.maximum(next_append, local_done), deadline))
        complete = np.where(immediate, local_done, read)
        rq, sd = response_queue.next(), send.next()
        t_log = complete + rq + sd
        pad = (-t_log) % 1000  # the line's time is whole ms: the send absorbs the remainder
        sd, t_log = sd + pad, t_log + pad
        idx = sessions[active]
        for name, values in (
            ("t_start", t_start),
            ("queue", q),
            ("local", lt),
            ("remote", complete - local_done),
            ("rq", rq),
            ("send", sd),
            ("t_log", t_log),
            ("read", read),
        ):
            columns[name].append(values[active])
        columns["session"].append(idx)
        next_start = np.maximum(t_log - sd + round_trip.next(), complete + rq + 1)
        last_read = np.where(active, read, last_read)
        t_start = np.where(active, after_pauses(next_start), t_start)
        active &= t_start < end
    out = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in columns.items()}
    order = np.argsort(out["session"], kind="stable")
    out = {k: v[order] for k, v in out.items()}
    for k in ("t_start", "t_log", "read"):
        out[k] = out[k] + t0
    return out


def _timeline(times: np.ndarray, ends: np.ndarray, start: int, at: np.ndarray) -> np.ndarray:
    """Value of a step function (start, then `ends[i]` from `times[i]` on) at times `at`."""
    i = np.searchsorted(times, at, side="right") - 1
    return np.where(i >= 0, ends[np.maximum(i, 0)] if ends.size else start, start)


def simulate(params: SynthParams) -> Trace:
    """Simulate the whole trace (deterministic by `params.seed`)."""
    rng = np.random.default_rng(params.seed)
    t0 = int(datetime.fromisoformat(params.start).replace(tzinfo=UTC).timestamp() * 1_000_000)
    n_part, rf, nb = params.partition_count, params.replication_factor, params.brokers
    lag_us = params.replica_lag_time_max_ms * 1000

    # Topology: Kafka-like round-robin assignment with a random start per topic.
    replicas = np.zeros((n_part, rf), dtype=np.int64)
    for topic in range(params.topics):
        first = int(rng.integers(0, nb))
        for p in range(params.partitions):
            replicas[topic * params.partitions + p] = [(first + p + i) % nb + 1 for i in range(rf)]
    names = [f"synth-{t}" for t in range(params.topics)]
    ids = [topic_id(params.seed, t) for t in range(params.topics)]

    # Produce arrivals: Poisson over the cluster; partition uniform, or a hot share on partition 0.
    n = params.produces
    t_first = t0 + 2_000_000
    gaps = np.maximum(np.rint(rng.exponential(1e6 / params.produce_rate, n)), 1).astype(np.int64)
    t_local_done = t_first + np.cumsum(gaps)
    duration = int(t_local_done[-1] - t_first)
    hot = rng.random(n) < params.hot_partition_share
    partition = np.where(hot, 0, rng.integers(0, n_part, n))
    t_trace_end = int(t_local_done[-1]) + 2_000_000

    # Faults: long stalls spread over the first 80% of the trace, the leader change at 90%.
    long_stalls: list[tuple[int, int, int]] = []
    for i in range(params.long_stalls):
        lo, hi = params.long_stall_lag_multiple
        length = int(lag_us * rng.uniform(lo, hi))
        start = t_first + int(duration * 0.8 * (i + 1) / (params.long_stalls + 1))
        long_stalls.append((int(rng.integers(1, nb + 1)), start, start + length))
    t_change = _ceil_ms(t_first + int(duration * 0.9)) if params.leader_changes else None  # a log line time
    spacing = duration * 0.8 / (params.long_stalls + 1)
    needed = int(lag_us * params.long_stall_lag_multiple[1]) + 2 * lag_us
    if params.long_stalls and (
        spacing < needed or (t_change is not None and long_stalls[-1][2] + 2 * lag_us > t_change)
    ):
        raise ValueError(
            f"a {duration / 1e6:.1f} s trace is too short for {params.long_stalls} stall(s) past "
            f"replica.lag.time.max.ms={params.replica_lag_time_max_ms}: raise produces, lower produce_rate, "
            "lower replica_lag_time_max_ms or set long_stalls=0"
        )
    pauses: dict[int, list[tuple[int, int]]] = {}
    for b in range(1, nb + 1):
        count = rng.poisson(params.gc_pauses_per_s * (t_trace_end - t0) / 1e6)
        starts = rng.integers(t0, t_trace_end, count)
        lengths = np.minimum(_lognormal_us(rng, params.gc_pause, count), lag_us // 4)
        spans = [(int(s), int(s + d)) for s, d in zip(starts, lengths, strict=False)]
        spans += [(s, e) for broker, s, e in long_stalls if broker == b]
        pauses[b] = _merge_intervals(spans)

    # Leader epochs: epoch 0 everywhere; the moved partition's epoch 1 is led by its next replica.
    epochs = [
        Epoch(
            g, g, 0, int(replicas[g, 0]), [int(x) for x in replicas[g, 1:]], t0 + 200_000 + 1000 * (g % 200), int(NEVER)
        )
        for g in range(n_part)
    ]
    moved: int | None = None
    if t_change is not None:
        moved = int(partition[np.searchsorted(t_local_done, t_change)]) if n else 0
        old = epochs[moved]
        old.t_end = t_change
        new_leader = old.followers[0]
        epochs.append(
            Epoch(
                len(epochs),
                moved,
                1,
                new_leader,
                [int(x) for x in replicas[moved] if x != new_leader],
                t_change,
                int(NEVER),
            )
        )
    epoch = np.arange(n) * 0 + partition
    if moved is not None and t_change is not None:
        epoch = np.where((partition == moved) & (t_local_done >= t_change), len(epochs) - 1, epoch)
    leader = np.array([e.leader for e in epochs], dtype=np.int64)[epoch]

    # Fetch sessions: one per (follower, leader) pair that shares a partition epoch.
    session_index: dict[tuple[int, int], int] = {}
    memberships = []  # (session, eid, t_in, t_out)
    become_follower_us = 50_000
    for e in epochs:
        for f in e.followers:
            s = session_index.setdefault((f, e.leader), len(session_index))
            # Epoch 0: every follower joins once all partitions exist (the first request lists them all).
            t_in = (t0 + 500_000) if e.leader_epoch == 0 else e.t_begin + become_follower_us
            memberships.append((s, e.eid, t_in, e.t_end))
    sessions = list(session_index)
    n_sess = len(sessions)
    epoch_rows = [np.nonzero(epoch == e.eid)[0] for e in epochs]
    session_appends: list[list[np.ndarray]] = [[] for _ in range(n_sess)]
    for s, eid, _, _ in memberships:
        session_appends[s].append(t_local_done[epoch_rows[eid]])
    appends = [np.sort(np.concatenate(a)) if a else np.zeros(0, np.int64) for a in session_appends]
    session_start = np.array([min(m[2] for m in memberships if m[0] == s) for s in range(n_sess)], dtype=np.int64)
    session_end = np.array(
        [min(max(m[3] for m in memberships if m[0] == s), t_trace_end) for s in range(n_sess)], dtype=np.int64
    )
    session_follower = np.array([f for f, _ in sessions], dtype=np.int64)
    fetch = _simulate_sessions(params, rng, t0, appends, session_start, session_end, session_follower, pauses)
    f_session = fetch["session"]
    n_fetch = f_session.size
    first_row = np.searchsorted(f_session, np.arange(n_sess + 1))
    f_index = np.arange(n_fetch) - first_row[f_session]
    f_dequeue = fetch["t_start"] + fetch["queue"]
    f_update = f_dequeue + fetch["local"] // 2

    # T_f(b) per (produce, follower slot); listings and responses per membership.
    records = np.maximum(
        np.rint(params.records_per_batch.median * np.exp(params.records_per_batch.sigma * rng.standard_normal(n))), 1
    ).astype(np.int64)
    sizes = np.maximum(
        np.rint(params.batch_bytes.median * np.exp(params.batch_bytes.sigma * rng.standard_normal(n))), 70
    ).astype(np.int64)
    holds: dict[tuple[int, int], np.ndarray] = {}  # (eid, follower) -> T_f of the epoch's produces (row order)
    read_index = {}  # (eid, follower) -> (rows in session, data fetch per produce, k_join, k_end)
    for s, eid, t_in, t_out in memberships:
        lo, hi = first_row[s], first_row[s + 1]
        reads, dequeues = fetch["read"][lo:hi], f_dequeue[lo:hi]
        k_join = int(np.searchsorted(dequeues, t_in, side="left"))
        k_end = int(np.searchsorted(dequeues, t_out, side="left")) if t_out < NEVER else hi - lo
        rows = epoch_rows[eid]
        k_data = np.maximum(np.searchsorted(reads, t_local_done[rows], side="left"), k_join)
        listed = k_data + 1
        ok = listed < k_end
        f = sessions[s][0]
        holds[(eid, f)] = np.where(ok, f_update[lo + np.minimum(listed, hi - lo - 1)] if hi > lo else NEVER, NEVER)
        read_index[(eid, f)] = (lo, hi, k_data, k_join, k_end)

    # ISR shrinks and expands from the long stalls.
    isr_changes: list[IsrChange] = []
    check_phase = {b: int(rng.integers(0, lag_us // 2)) for b in range(1, nb + 1)}

    def commit_delay() -> int:
        # Capped: the replay looks for the FETCH that qualified a re-add at most 200 ms before its commit.
        return min(int(_lognormal_us(rng, params.isr_commit_delay, 1)[0]), 150_000)

    for broker, s_start, s_end in long_stalls:
        for e in epochs:
            if broker not in e.followers or not (e.t_begin <= s_start < e.t_end):
                continue
            lo, hi, _, k_join, k_end = read_index[(e.eid, broker)]
            dequeues = f_dequeue[lo:hi]
            k_last = int(np.searchsorted(dequeues, s_start, side="left")) - 1
            if k_last < max(k_join, 1):
                continue
            caught_up = int(f_update[lo + k_last])
            tick = lag_us // 2
            t_propose = (
                t0 + check_phase[e.leader] + ((caught_up + lag_us - t0 - check_phase[e.leader]) // tick + 1) * tick
            )
            rows = epoch_rows[e.eid]
            known = int(fetch["read"][lo + k_last - 1])
            behind = np.any((t_local_done[rows] > known) & (t_local_done[rows] <= t_propose))
            if not behind or t_propose >= s_end:
                continue
            # Commits land on whole milliseconds: the "ISR updated" line's time is then the exact commit time.
            t_shrink = _ceil_ms(t_propose + commit_delay())
            k_back = int(np.searchsorted(dequeues, s_end, side="left"))
            if k_back + 1 >= k_end:
                continue
            # The first request after the stall reports the old LEO; the next one, the LEO read then, which
            # reaches the HW: the leader proposes the expansion there and counts the follower from then on
            # (its maximal ISR, KIP-841); the commit follows.
            t_join = max(int(f_update[lo + k_back + 1]), t_shrink + 1)
            t_expand = _ceil_ms(t_join + commit_delay())
            members = [e.leader] + e.followers
            isr_changes.append(
                IsrChange(
                    e.eid,
                    broker,
                    t_propose,
                    t_shrink,
                    "shrink",
                    [m for m in members if m != broker],
                    last_caught_up_us=caught_up,
                )
            )
            isr_changes.append(IsrChange(e.eid, broker, t_join, t_expand, "expand", members))
    out_spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for c in isr_changes:
        if c.kind == "shrink":
            out_spans.setdefault((c.eid, c.follower), []).append((c.t_commit, int(NEVER)))
        else:  # counts again from the proposal (maximal ISR), not from the commit
            spans = out_spans[(c.eid, c.follower)]
            spans[-1] = (spans[-1][0], c.t_propose)

    # High-watermark time of every batch: the least t >= append at which every ISR member holds it.
    replicated = np.full(n, NEVER, dtype=np.int64)
    for e in epochs:
        rows = epoch_rows[e.eid]
        t = t_local_done[rows].copy()
        for _ in range(2 * len(e.followers) + 4):
            before = t
            for f in e.followers:
                held = holds[(e.eid, f)]
                spans = out_spans.get((e.eid, f), [])
                blocked = t < held
                earliest = held
                for s_out, e_out in spans:
                    blocked &= ~((t >= s_out) & (t < e_out))
                    earliest = np.where(t < s_out, np.minimum(earliest, s_out), earliest)
                t = np.where(blocked, np.maximum(t, earliest), t)
            if np.array_equal(before, t):
                break
        replicated[rows] = t

    # Offsets per epoch in append order; the moved partition's new epoch starts at the new leader's LEO.
    base = np.zeros(n, dtype=np.int64)
    epoch_ends: dict[int, np.ndarray] = {}
    for e in epochs:
        rows = epoch_rows[e.eid]
        if e.leader_epoch > 0:
            prev = epochs[e.partition]
            lo, hi, _, _, _ = read_index[(prev.eid, e.leader)]
            k = int(np.searchsorted(fetch["read"][lo:hi], e.t_begin, side="left")) - 1
            prev_rows = epoch_rows[prev.eid]
            e.start_offset = int(
                _timeline(
                    t_local_done[prev_rows], epoch_ends[prev.eid], 0, np.array([fetch["read"][lo + k] if k >= 0 else 0])
                )[0]
            )
            hw_rows = np.maximum.accumulate(replicated[prev_rows])
            e.start_hw = min(int(_timeline(hw_rows, epoch_ends[prev.eid], 0, np.array([e.t_begin]))[0]), e.start_offset)
        ends = e.start_offset + np.cumsum(records[rows])
        base[rows] = ends - records[rows]
        epoch_ends[e.eid] = ends

    def leo(eid: int, at: np.ndarray) -> np.ndarray:
        rows = epoch_rows[eid]
        return _timeline(t_local_done[rows], epoch_ends[eid], epochs[eid].start_offset, at)

    def high_watermark(eid: int, at: np.ndarray) -> np.ndarray:
        rows = epoch_rows[eid]
        return _timeline(np.maximum.accumulate(replicated[rows]), epoch_ends[eid], epochs[eid].start_offset, at)

    # Listed partitions, response partitions and forgotten partitions of the fetch requests.
    l_fetch, l_epoch, l_offset, r_fetch, r_epoch, r_hw, r_bytes, g_fetch, g_epoch = ([] for _ in range(9))
    for (eid, f), (lo, hi, k_data, k_join, k_end) in read_index.items():
        if k_join >= k_end:
            continue
        rows = epoch_rows[eid]
        in_span = k_data < k_end
        data_k, inverse = np.unique(k_data[in_span], return_inverse=True)
        data_bytes = np.bincount(inverse, weights=sizes[rows][in_span], minlength=data_k.size).astype(np.int64)
        e = epochs[eid]
        if e.leader_epoch == 0:
            join_offset = 0
        else:
            prev = epochs[e.partition]
            plo, phi, _, _, _ = read_index.get((prev.eid, f), (0, 0, None, 0, 0))
            k = int(np.searchsorted(fetch["read"][plo:phi], e.t_begin, side="left")) - 1
            had = int(leo(prev.eid, np.array([fetch["read"][plo + k]]))[0]) if k >= 0 else 0
            join_offset = min(had, e.start_offset) if f != epochs[e.partition].leader else e.start_offset
        listed_k = np.union1d([k_join], data_k[data_k + 1 < k_end] + 1)
        offsets = np.where(listed_k == k_join, join_offset, leo(eid, fetch["read"][lo + np.maximum(listed_k - 1, 0)]))
        l_fetch.append(lo + listed_k)
        l_epoch.append(np.full(listed_k.size, eid))
        l_offset.append(np.maximum(offsets, join_offset))
        resp_k = np.union1d([k_join], data_k)
        r_fetch.append(lo + resp_k)
        r_epoch.append(np.full(resp_k.size, eid))
        r_hw.append(high_watermark(eid, fetch["read"][lo + resp_k]))
        got = np.zeros(resp_k.size, np.int64)
        got[np.searchsorted(resp_k, data_k)] = data_bytes
        r_bytes.append(got)
        if k_end < hi - lo:
            g_fetch.append(np.array([lo + k_end]))
            g_epoch.append(np.array([eid]))

    def cat(parts):
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)

    l_fetch, l_epoch, l_offset = cat(l_fetch), cat(l_epoch), cat(l_offset)
    order = np.lexsort((l_epoch, l_fetch))
    r_fetch, r_epoch, r_hw, r_bytes = cat(r_fetch), cat(r_epoch), cat(r_hw), cat(r_bytes)
    r_order = np.lexsort((r_epoch, r_fetch))

    # ISR line details (HW and LEOs at the proposal) and partition epochs (one per committed change).
    partition_epoch = {e.eid: 0 for e in epochs}
    for c in sorted(isr_changes, key=lambda c: c.t_commit):
        partition_epoch[c.eid] += 1
        c.partition_epoch = partition_epoch[c.eid]
        if c.kind == "shrink":
            at = np.array([c.t_propose])
            c.hw = int(high_watermark(c.eid, at)[0])
            c.leader_leo = int(leo(c.eid, at)[0])
            lo, _, _, _, _ = read_index[(c.eid, c.follower)]
            k = int(np.searchsorted(f_update[lo:], c.last_caught_up_us, side="left"))
            c.follower_leo = int(leo(c.eid, np.array([fetch["read"][lo + k - 1] if k > 0 else 0]))[0])
    for e in epochs:
        if e.leader_epoch > 0:
            e.partition_epoch = partition_epoch[epochs[e.partition].eid] + 1

    # Produce outcomes and timing fields.
    acks = np.where(rng.random(n) < params.acks_all_share, -1, 1)
    epoch_end = np.array([e.t_end for e in epochs], dtype=np.int64)[epoch]
    timeout_us = params.timeout_ms * 1000
    done = np.where(acks == -1, replicated, t_local_done)
    error = np.full(n, ERROR_NONE)
    lost_leadership = (acks == -1) & (done >= epoch_end)
    timed_out = (acks == -1) & ~lost_leadership & (done - t_local_done > timeout_us)
    error[lost_leadership], error[timed_out] = ERROR_NOT_LEADER, ERROR_TIMEOUT
    done = np.where(lost_leadership, epoch_end, np.where(timed_out, t_local_done + timeout_us, done))
    local = _lognormal_us(rng, params.produce_local, n)
    queue = _lognormal_us(rng, params.produce_queue, n)
    rq = _lognormal_us(rng, params.response_queue, n)
    sd = _lognormal_us(rng, params.send, n)
    t_log = done + rq + sd
    pad = (-t_log) % 1000
    sd, t_log = sd + pad, t_log + pad
    # Clients: a few producers per acks setting, correlation ids counted per client in arrival order.
    client = np.where(acks == -1, 0, 4) + rng.integers(0, 4, n)
    t_start = t_local_done - local - queue
    by_client = np.lexsort((t_start, client))
    correlation = np.empty(n, np.int64)
    counts = np.bincount(client, minlength=8)
    correlation[by_client] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)

    session_ids = np.random.default_rng([params.seed, 31337]).integers(1, 2**31 - 1, n_sess)
    return Trace(
        params=params,
        t0=t0,
        topic_names=names,
        topic_ids=ids,
        replicas=replicas,
        epochs=epochs,
        p_partition=partition,
        p_epoch=epoch,
        p_leader=leader,
        p_acks=acks,
        p_records=records,
        p_bytes=sizes,
        p_base_offset=base,
        p_error=error,
        p_client=client,
        p_correlation=correlation,
        p_t_local_done=t_local_done,
        p_queue=queue,
        p_local=local,
        p_remote=done - t_local_done,
        p_response_queue=rq,
        p_send=sd,
        p_t_log=t_log,
        p_replicated=replicated,
        sessions=sessions,
        session_ids=session_ids,
        f_session=f_session,
        f_index=f_index,
        f_t_start=fetch["t_start"],
        f_queue=fetch["queue"],
        f_local=fetch["local"],
        f_remote=fetch["remote"],
        f_response_queue=fetch["rq"],
        f_send=fetch["send"],
        f_t_log=fetch["t_log"],
        f_read=fetch["read"],
        l_fetch=l_fetch[order],
        l_epoch=l_epoch[order],
        l_fetch_offset=l_offset[order],
        r_fetch=r_fetch[r_order],
        r_epoch=r_epoch[r_order],
        r_high_watermark=r_hw[r_order],
        r_bytes=r_bytes[r_order],
        forgotten_fetch=cat(g_fetch),
        forgotten_epoch=cat(g_epoch),
        isr_changes=isr_changes,
        pauses=pauses,
        long_stalls=long_stalls,
        leader_change=(moved, t_change) if moved is not None and t_change is not None else None,
    )
