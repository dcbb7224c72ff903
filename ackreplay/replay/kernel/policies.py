"""Every produce of one epoch under every policy (:func:`replay_epoch`): the ack rule of each policy, the
outcome precedence, and the durability of each ack (copies, exposure, losses at a leader failure)."""

from __future__ import annotations

import numpy as np

from ackreplay.replay.kernel.epoch import Epoch, IsrInterval, kth_smallest
from ackreplay.replay.kernel.isr_sim import simulate_epoch_isr
from ackreplay.replay.kernel.model import (
    EARLIEST,
    LOSS_WINDOWS,
    NEVER,
    OUTCOME_COLUMNS,
    EpochInputs,
    IsrTimeline,
    PolicyOutcome,
    ReplayOptions,
    derived_elr,
    replayed,
)
from ackreplay.schemas.vocabulary import Outcome, PolicyKind

_I64 = np.int64


class _Outputs:
    """One (policies, produces) block per output column; each policy fills its row. One large
    allocation per column faults in faster than many, and the caller reads each row without a copy."""

    def __init__(self, policies: list[str], n: int) -> None:
        p = len(policies)
        self.policies = policies
        self.outcome = np.zeros((p, n), dtype=np.int8)
        self.t_ack = np.empty((p, n), dtype=_I64)
        self.copies_at_ack = np.ones((p, n), dtype=np.int8)
        self.exposure_us = np.empty((p, n), dtype=np.float64)
        self.full_replication_us = np.empty((p, n), dtype=np.float64)
        self.loss_kafka_election = np.ones((p, n), dtype=bool)
        self.loss_longest_log_election = np.ones((p, n), dtype=bool)
        self.loss_kafka_election_min = np.ones((p, n), dtype=bool)
        self.loss_longest_log_election_min = np.ones((p, n), dtype=bool)
        self.offline_at_failure = np.zeros((p, n), dtype=bool)
        self.loss_window_kafka_us = np.empty((p, n), dtype=np.float64)
        self.loss_window_kafka_min_us = np.empty((p, n), dtype=np.float64)
        self.loss_window_longest_us = np.empty((p, n), dtype=np.float64)
        self.loss_window_longest_min_us = np.empty((p, n), dtype=np.float64)

    def row(self, policy: str) -> dict[str, np.ndarray]:
        i = self.policies.index(policy)
        return {name: getattr(self, name)[i] for name in OUTCOME_COLUMNS}


def _finalize(ep: Epoch, t_ack: np.ndarray, outcome: np.ndarray, reject: np.ndarray | None) -> None:
    """Turn raw ack times (in ``t_ack``, updated in place) into outcomes (into ``outcome``, zero on
    entry). Precedence: rejection at append, unreplayable (no offset and the raw ack is not
    t_local_done), leadership end before both the ack and the deadline, timeout."""
    deadline = ep.deadline
    unknown = None
    if not ep.all_appended:
        unknown = ~ep.inputs.appended & (t_ack != ep.t_local_done)
    late = np.greater(t_ack, deadline, out=ep.scratch)
    end = ep.inputs.epoch_end
    lost = None
    if end != NEVER:
        lost = np.less(end, deadline) & np.less(end, t_ack)
        if not lost.any():
            lost = None
    if late.any():
        np.copyto(outcome, Outcome.TIMEOUT, where=late)
        np.copyto(t_ack, deadline, where=late)
    if lost is not None:
        outcome[lost] = Outcome.NOT_LEADER
        t_ack[lost] = np.maximum(end, ep.t_local_done[lost])
    if unknown is not None:
        outcome[unknown] = Outcome.UNREPLAYABLE
        t_ack[unknown] = ep.t_local_done[unknown]
    if reject is not None:
        outcome[reject] = Outcome.NOT_ENOUGH_REPLICAS
        t_ack[reject] = ep.t_local_done[reject]


def _durability(ep: Epoch, row: dict[str, np.ndarray], isr: IsrTimeline, elr: np.ndarray | None) -> None:
    """Fill copies_at_ack, exposure, full replication and loss flags of one policy's row (`elr`: the eligible
    leader replicas along `isr`, None when the cluster keeps none)."""
    t_ack = row["t_ack"]
    holds = [np.less_equal(a, t_ack, out=ep.holds[j]) for j, a in enumerate(ep.arrivals)]
    copies = row["copies_at_ack"]  # ones on entry
    for h in holds:
        np.add(copies, h, out=copies)
    t_min, t_all = ep.durability_base()
    exposure, full = row["exposure_us"], row["full_replication_us"]
    t_ack_f = ep.float_scratch
    np.copyto(t_ack_f, t_ack, casting="unsafe")  # exact below 2**53 µs (year 2255)
    np.subtract(t_min, t_ack_f, out=exposure)
    np.maximum(exposure, 0.0, out=exposure)
    np.subtract(t_all, t_ack_f, out=full)
    np.maximum(full, 0.0, out=full)

    # Kafka's election: the first follower in assignment order in the committed ISR at t_ack.
    sent = [np.less_equal(s, t_ack, out=ep.holds_sent[j]) for j, s in enumerate(ep.sent)]
    if isr.change_times.size == 0:
        in_isr: list = [bool(m) for m in isr.membership[0]]
    else:
        rows = isr.rows_at(t_ack)
        in_isr = [isr.membership[:, j].take(rows) for j in range(ep.f)]
    # No follower in the ISR: Kafka elects the first live eligible leader replica in assignment order
    # (`PartitionChangeBuilder.isValidNewLeader`: "in ELR when ISR is empty"), else nobody: the partition is
    # offline (not a loss under Kafka's election).
    offline = row["offline_at_failure"]
    offline[:] = True
    for member in in_isr:
        if member is not False:
            offline &= np.logical_not(member)
    live = [ep.live_at(j, t_ack) for j in range(ep.f)]
    by_elr: list[np.ndarray] = []
    if elr is not None and offline.any():
        no_leader = offline.copy()
        for j in range(ep.f):
            eligible = bool(elr[0, j]) if isr.change_times.size == 0 else elr[:, j].take(rows)
            pick = no_leader & eligible & live[j]
            by_elr.append(pick)
            no_leader &= ~pick
    for held, kafka, longest in (
        (holds, row["loss_kafka_election"], row["loss_longest_log_election"]),
        (sent, row["loss_kafka_election_min"], row["loss_longest_log_election_min"]),
    ):
        _loss_flags(in_isr, live, held, kafka, longest, offline)
        for pick, has in zip(by_elr, held, strict=False):  # by_elr: empty when nobody is eligible
            np.logical_or(kafka, pick & ~has, out=kafka)  # in place: kafka is a column of `row`
    if by_elr:
        np.copyto(offline, no_leader)
    end = ep.inputs.epoch_end
    for times, kafka, longest in (
        (ep.arrivals, row["loss_window_kafka_us"], row["loss_window_longest_us"]),
        (ep.sent, row["loss_window_kafka_min_us"], row["loss_window_longest_min_us"]),
    ):
        _kafka_loss_window(t_ack, isr, times, end, kafka, elr, live)
        _longest_loss_window(t_ack, live, times, end, longest)

    acked = np.equal(row["outcome"], Outcome.ACKED, out=ep.scratch)
    if not acked.all():
        not_acked = ~acked
        copies[not_acked] = 0
        exposure[not_acked] = np.nan
        full[not_acked] = np.nan
        for name in (
            "loss_kafka_election",
            "loss_longest_log_election",
            "loss_kafka_election_min",
            "loss_longest_log_election_min",
            "offline_at_failure",
        ):
            row[name][not_acked] = False
        for name in LOSS_WINDOWS:
            row[name][not_acked] = np.nan
    if not ep.all_appended:
        no_offset = ~ep.inputs.appended
        exposure[no_offset] = np.nan
        full[no_offset] = np.nan
        for name in LOSS_WINDOWS:
            row[name][no_offset] = np.nan


def _span_us(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(0, hi - lo) as float64 µs; inf where hi is NEVER (and lo is not)."""
    span = np.maximum(hi - lo, 0).astype(np.float64)
    span[(hi == NEVER) & (lo < NEVER)] = np.inf
    return span


def _kafka_loss_window(
    t_ack: np.ndarray,
    isr: IsrTimeline,
    held_from: list[np.ndarray],
    end: int,
    out: np.ndarray,
    elr: np.ndarray | None,
    live: list[np.ndarray | bool],
) -> None:
    """Fill `out` with the time after `t_ack` during which Kafka's election would have lost each batch: per
    interval of the committed ISR (until the leadership ends), from its start (or the ack) until its first
    member in assignment order held the batch (`held_from`). In an interval without a follower in the ISR
    the first eligible leader replica (`elr`) live at the ack (`live`) is elected; with none, nobody
    (offline, not a loss)."""
    out[:] = 0.0
    bounds = [EARLIEST, *isr.change_times.tolist(), NEVER]
    for k in range(len(bounds) - 1):
        members = np.flatnonzero(isr.membership[k])
        start, stop = bounds[k], min(bounds[k + 1], end)
        if stop <= start:
            continue
        lo = np.maximum(t_ack, start)
        if members.size:
            out += _span_us(lo, np.minimum(held_from[int(members[0])], stop))
            continue
        eligible = np.flatnonzero(elr[k]) if elr is not None else members
        if eligible.size == 0:
            continue
        first = np.full(t_ack.size, NEVER, dtype=_I64)
        chosen = np.zeros(t_ack.size, dtype=bool)
        for j in eligible.tolist():
            pick = ~chosen & live[j]
            first[pick] = held_from[j][pick]
            chosen |= pick
        span = _span_us(lo, np.minimum(first, stop))
        span[~chosen] = 0.0
        out += span


def _longest_loss_window(t_ack: np.ndarray, live: list, held_from: list[np.ndarray], end: int, out: np.ndarray) -> None:
    """Fill `out` with the time after `t_ack` until a follower live at `t_ack` held each batch (the longest-log
    election's first safe moment), until the leadership ends; 0 when no follower was live."""
    first = np.full(t_ack.size, NEVER, dtype=_I64)
    anyone = np.zeros(t_ack.size, dtype=bool)
    for alive, held in zip(live, held_from, strict=True):
        if alive is True:
            np.minimum(first, held, out=first)
            anyone[:] = True
        else:
            np.minimum(first, np.where(alive, held, NEVER), out=first)
            anyone |= alive
    np.minimum(first, end, out=first)
    out[:] = _span_us(t_ack, first)
    out[~anyone] = 0.0


def _loss_flags(
    in_isr: list,
    live: list,
    holds: list[np.ndarray],
    loss_kafka: np.ndarray,
    loss_longest: np.ndarray,
    offline: np.ndarray,
) -> None:
    """Fill the two loss flags (ones on entry) from which follower holds the batch at the ack (`holds`), which
    is in the ISR then (`in_isr`) and which is a live replica (`live`); per follower, a bool when it is the
    same for every ack, else per ack.

    Kafka's election takes the first ISR member in assignment order, and nobody (`offline`) without one.
    KIP-250's longest-log election takes the live replica with the largest LEO, in the ISR or not ("select
    the live replica with the largest LEO as the new leader"): a loss when no live follower holds the
    batch, nothing elected (not a loss) when no follower is live."""
    if all(isinstance(member, bool) for member in in_isr):  # one ISR for every ack: fewer array passes
        members = [j for j, member in enumerate(in_isr) if member]
        if members:
            np.logical_not(holds[members[0]], out=loss_kafka)
        else:
            loss_kafka[:] = False
    else:
        undecided = np.ones(loss_kafka.size, dtype=bool)
        loss_kafka[:] = False
        for member, held in zip(in_isr, holds, strict=True):
            if member is False:
                continue
            loss_kafka |= undecided & member & ~held
            undecided &= np.logical_not(member)
        loss_kafka &= ~offline
    for alive, held in zip(live, holds, strict=True):
        loss_longest &= ~held if alive is True else ~(alive & held)
    if not any(alive is True for alive in live):
        nobody_live = np.ones(loss_longest.size, dtype=bool)
        for alive in live:
            nobody_live &= ~alive
        loss_longest &= ~nobody_live


def _interval_acks(
    ep: Epoch, intervals: list[IsrInterval], need_all: bool, strict: bool, raw: np.ndarray
) -> np.ndarray | None:
    """Raw ack times (into ``raw``) from ISR intervals; ``need_all``: every counting member holds b
    (acks=all), else m_eff - 1 of them (min.insync). Returns completed-under-min-ISR flags or None."""
    arrivals = ep.arrivals
    k_needed = ep.m_eff - 1

    def candidate(iv: IsrInterval, sel, out: np.ndarray) -> bool:
        """out := max(interval start, t_local_done, time the needed members hold b); False when
        the interval cannot acknowledge anything."""
        members = [arrivals[j] if sel is None else arrivals[j][sel] for j in np.flatnonzero(iv.counting)]
        local_done = ep.t_local_done if sel is None else ep.t_local_done[sel]
        if need_all:
            if strict and iv.committed_size < ep.m_eff:
                return False  # Kafka >= 3.7: HW frozen while the ISR is under min ISR
            k = len(members)
        else:
            if len(members) < k_needed:
                return False
            k = k_needed
        if k == 0:
            np.copyto(out, local_done)
        else:
            kth_smallest(members, k, out)
            np.maximum(out, local_done, out=out)
        if iv.start != EARLIEST:
            np.maximum(out, iv.start, out=out)
        return True

    def under(iv: IsrInterval) -> bool:
        return need_all and not strict and 1 + int(iv.counting.sum()) < ep.m_eff

    if len(intervals) == 1:
        if not candidate(intervals[0], None, raw):
            raw.fill(NEVER)
            return None
        return np.ones(ep.n, dtype=bool) if under(intervals[0]) else None

    order = ep.by_time
    local_done_sorted = ep.t_local_done if order is None else ep.t_local_done[order]
    max_wait = int(max(0, ep.inputs.timeout_us.max())) if ep.n else 0
    raw.fill(NEVER)
    flag = np.zeros(ep.n, dtype=bool) if any(under(iv) for iv in intervals) else None
    for iv in intervals:
        # Only produces whose wait can overlap the interval: t_local_done in [start - max wait, end).
        lo = 0 if iv.start == EARLIEST else int(np.searchsorted(local_done_sorted, iv.start - max_wait, side="left"))
        hi = ep.n if iv.end == NEVER else int(np.searchsorted(local_done_sorted, iv.end, side="left"))
        if lo >= hi:
            continue
        sel = slice(lo, hi) if order is None else order[lo:hi]
        cand = np.empty(hi - lo, dtype=_I64)
        if not candidate(iv, sel, cand):
            continue
        current = raw[sel]
        better = (cand < iv.end) & (cand < current)
        raw[sel] = np.where(better, cand, current)
        if flag is not None:
            flag[sel] = np.where(better, under(iv), flag[sel])
    return flag


def _isr_policy(
    ep: Epoch, row: dict[str, np.ndarray], isr: IsrTimeline, elr: np.ndarray | None, need_all: bool, maximal: bool
) -> None:
    t_ack, outcome = row["t_ack"], row["outcome"]
    under = _interval_acks(ep, ep.intervals(isr, maximal), need_all, ep.opt.strict_min_isr, t_ack)
    _finalize(ep, t_ack, outcome, ep.rejected_under_min_isr(isr))
    if under is not None:
        outcome[under & (outcome == Outcome.ACKED)] = Outcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    _durability(ep, row, isr, elr)


def _quorum_policy(ep: Epoch, row: dict[str, np.ndarray], q: int, isr: IsrTimeline, elr: np.ndarray | None) -> None:
    t_ack = row["t_ack"]
    if 1 < q < ep.inputs.replication_factor:
        np.maximum(ep.stats[q - 2], ep.t_local_done, out=t_ack)
        _finalize(ep, t_ack, row["outcome"], None)
    else:
        # KIP-250 defines quorum.required.acks only for 1 < Q < replicas (Q = replicas waits for every
        # replica, in the ISR or not; Q = 1 is acks=1): no such setting exists for this partition.
        np.copyto(t_ack, ep.t_local_done)
        row["outcome"][:] = Outcome.UNREPLAYABLE
    _durability(ep, row, isr, elr)


def replay_epoch(inputs: EpochInputs, options: ReplayOptions | None = None) -> dict[str, PolicyOutcome]:
    """Replay every produce of one (partition, leader epoch) under every policy.

    Returns a dict keyed by policy id, in :func:`policy_ids` order: ``acks=1``, ``acks=all``,
    ``min.insync``, ``quorum=<Q>`` for each ``inputs.quorum_sizes``, and ``acks=all@lag=<ms>`` for each
    ``inputs.replica_lag_time_max_ms``. All arrays are aligned with the input produce rows; the
    arrays of all policies are rows of one block per column.
    """
    options = options or ReplayOptions()
    ep = Epoch(inputs, options)
    policies = replayed(inputs)
    out = _Outputs([p.id for p in policies], ep.n)
    recorded = inputs.isr
    used: dict[str, IsrTimeline] = {}
    for policy in policies:
        row = out.row(policy.id)
        isr, elr = recorded, inputs.elr_membership
        if policy.kind is PolicyKind.ACKS_1:
            np.copyto(row["t_ack"], ep.t_local_done)
            _finalize(ep, row["t_ack"], row["outcome"], None)
            _durability(ep, row, isr, elr)
        elif policy.kind is PolicyKind.ACKS_ALL:
            _isr_policy(ep, row, isr, elr, need_all=True, maximal=options.maximal_isr)
        elif policy.kind is PolicyKind.MIN_INSYNC:
            _isr_policy(ep, row, isr, elr, need_all=False, maximal=options.maximal_isr)
        elif policy.kind is PolicyKind.QUORUM:
            _quorum_policy(ep, row, policy.quorum_size, isr, elr)
        else:
            isr = simulate_epoch_isr(ep, policy.resimulated_lag_ms)
            if elr is not None:
                elr = derived_elr(isr, elr[0], inputs.min_insync_replicas)
            _isr_policy(ep, row, isr, elr, need_all=True, maximal=options.maximal_isr)
        used[policy.id] = isr
    return {p.id: PolicyOutcome(policy=p.id, isr=used[p.id], **out.row(p.id)) for p in policies}
