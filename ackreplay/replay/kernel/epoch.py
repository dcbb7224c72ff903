"""Arrays derived from one :class:`EpochInputs` (follower arrival times, leader LEO, ISR intervals),
computed lazily and shared by every policy of a replay."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ackreplay.replay.kernel.model import EARLIEST, NEVER, EpochInputs, IsrTimeline, ReplayOptions, is_sorted

_I64 = np.int64


def sorted_stats(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Elementwise order statistics of a few equally long arrays (bubble-sort network)."""
    out = list(arrays)
    n = len(out)
    for i in range(n - 1):
        for j in range(n - 1 - i):
            lo = np.minimum(out[j], out[j + 1])
            out[j + 1] = np.maximum(out[j], out[j + 1])
            out[j] = lo
    return out


def kth_smallest(arrays: list[np.ndarray], k: int, out: np.ndarray) -> np.ndarray:
    """k-th smallest (1-based) elementwise over ``arrays`` (1 <= k <= len(arrays)), into ``out``."""
    if len(arrays) == 1:
        np.copyto(out, arrays[0])
    elif k == 1 or k == len(arrays):
        op = np.minimum if k == 1 else np.maximum
        op(arrays[0], arrays[1], out=out)
        for arr in arrays[2:]:
            op(out, arr, out=out)
    else:
        np.copyto(out, sorted_stats(arrays)[k - 1])
    return out


def containing_span(spans: np.ndarray, q: np.ndarray) -> np.ndarray:
    """For each time of ``q``: the index of the (start, end) span of ``spans`` (sorted by start) it falls in, end
    excluded, the latest starting one where spans overlap; -1 where it falls in none."""
    if spans.size == 0:
        return np.full(np.shape(q), -1, dtype=np.int64)
    k = np.maximum(np.searchsorted(spans[:, 0], q, side="right") - 1, 0)
    return np.where((spans[k, 0] <= q) & (q < spans[k, 1]), k, -1)


def span_ends(spans: np.ndarray, q: np.ndarray) -> np.ndarray:
    """For each time of ``q``: the end of the span of ``spans`` it falls in (:func:`containing_span`), or ``q``
    itself where it falls in none."""
    k = containing_span(spans, q)
    return np.where(k >= 0, spans[np.maximum(k, 0), 1] if spans.size else q, q)


def value_at(times: np.ndarray, values: np.ndarray, q, before) -> np.ndarray:
    """Step function: value of the last event with time <= q (``before`` if none)."""
    idx = np.searchsorted(times, q, side="right")
    ext = np.empty(values.size + 1, dtype=values.dtype)
    ext[0] = before
    ext[1:] = values
    return ext.take(idx)


@dataclass
class IsrInterval:
    """A span of one ISR: which followers hold the high watermark back, and the committed ISR's size."""

    start: int  # EARLIEST for the first
    end: int  # NEVER for the last
    counting: np.ndarray  # bool (F,): followers holding the HW back (maximal ISR)
    committed_size: int  # leader included


class Epoch:
    """Arrays derived from one EpochInputs, computed lazily and shared by the policies."""

    def __init__(self, inputs: EpochInputs, options: ReplayOptions) -> None:
        self.inputs = inputs
        self.opt = options
        self.n = inputs.n_produces
        self.f = inputs.follower_ids.size
        self.t_local_done = inputs.t_local_done
        self.m_eff = min(inputs.min_insync_replicas, inputs.replication_factor)
        self.all_appended = bool(inputs.appended.all())
        self.leo_max = [np.maximum.accumulate(o) if o.size else o for o in inputs.leo_offsets]
        self._deadline: np.ndarray | None = None
        self._arrivals: list[np.ndarray] | None = None
        self._sent: list[np.ndarray] | None = None
        self._offset_rank: dict[int, np.ndarray] = {}  # per follower: its first LEO event above each batch
        self._stats: list[np.ndarray] | None = None
        self._orders: dict[str, np.ndarray | None] = {}  # "offset", "time": once computed (None: in order)
        self._leader_steps: tuple[np.ndarray, np.ndarray, int] | None = None
        self._durability_base: tuple[np.ndarray, np.ndarray] | None = None
        self._start: int | None = None
        self._intervals: dict[tuple[int, bool], tuple[IsrTimeline, list[IsrInterval]]] = {}
        self._rejections: dict[int, tuple[IsrTimeline, np.ndarray | None]] = {}
        # Scratch buffers reused by every policy: on a fresh process a new 8 MB array costs page
        # faults comparable to the arithmetic done in it.
        self.scratch = np.empty(self.n, dtype=bool)
        self.holds = [np.empty(self.n, dtype=bool) for _ in range(self.f)]
        self.holds_sent = [np.empty(self.n, dtype=bool) for _ in range(self.f)]
        self.float_scratch = np.empty(self.n, dtype=np.float64)

    @property
    def deadline(self) -> np.ndarray:
        if self._deadline is None:
            self._deadline = self.t_local_done + self.inputs.timeout_us
        return self._deadline

    # -- produce orders --------------------------------------------------------------------------

    @property
    def by_offset(self) -> np.ndarray | None:
        """Permutation sorting the produces by base offset (None: already sorted)."""
        if "offset" not in self._orders:
            self._orders["offset"] = self._sorting(self.inputs.base_offset, self._orders.get("time"))
        return self._orders["offset"]

    @property
    def by_time(self) -> np.ndarray | None:
        """Permutation sorting the produces by t_local_done (None: already sorted)."""
        if "time" not in self._orders:
            self._orders["time"] = self._sorting(self.t_local_done, self._orders.get("offset"))
        return self._orders["time"]

    @staticmethod
    def _sorting(values: np.ndarray, other: np.ndarray | None) -> np.ndarray | None:
        """A permutation sorting ``values``; offset and time order mostly agree, so the other
        order, when already known, is tried first."""
        if is_sorted(values):
            return None
        if other is not None and is_sorted(values[other]):
            return other
        return np.argsort(values)

    # -- arrivals -----------------------------------------------------------------------------

    @property
    def arrivals(self) -> list[np.ndarray]:
        """A_f(b) per follower (int64, NEVER if never; NEVER for produces not appended)."""
        if self._arrivals is None:
            perm = self.by_offset
            b = self.inputs.base_offset if perm is None else self.inputs.base_offset[perm]
            self._arrivals = [self._arrival(j, b, perm) for j in range(self.f)]
        return self._arrivals

    def _arrival(self, j: int, b: np.ndarray, perm: np.ndarray | None) -> np.ndarray:
        times = self.inputs.leo_times[j]
        if times.size == 0:
            return np.full(self.n, NEVER, dtype=_I64)
        idx = self._rank(j, b)
        ext = np.empty(times.size + 1, dtype=_I64)
        ext[:-1] = times
        ext[-1] = NEVER
        if perm is None:
            arrival = ext.take(idx)
        else:
            arrival = np.empty(self.n, dtype=_I64)
            arrival[perm] = ext.take(idx)
        if not self.all_appended:
            arrival[~self.inputs.appended] = NEVER
        return arrival

    @property
    def sent(self) -> list[np.ndarray]:
        """S_f(b) per follower (int64, NEVER if never; NEVER for produces not appended)."""
        if self._sent is None:
            perm = self.by_offset
            b = self.inputs.base_offset if perm is None else self.inputs.base_offset[perm]
            local_done = self.t_local_done if perm is None else self.t_local_done[perm]
            self._sent = [self._sent_at(j, b, local_done, perm) for j in range(self.f)]
        return self._sent

    def _rank(self, j: int, b: np.ndarray) -> np.ndarray:
        """Index of follower j's first LEO event above each batch of `b` (offset-sorted base offsets)."""
        if j not in self._offset_rank:
            # Searching offset-sorted batches keeps the binary searches cache-friendly (10x faster).
            self._offset_rank[j] = np.searchsorted(self.leo_max[j], b, side="right")
        return self._offset_rank[j]

    def _sent_at(self, j: int, b: np.ndarray, local_done: np.ndarray, perm: np.ndarray | None) -> np.ndarray:
        times = self.inputs.leo_times[j]
        if times.size == 0:
            return np.full(self.n, NEVER, dtype=_I64)
        idx = self._rank(j, b)
        previous = np.empty(times.size + 1, dtype=_I64)
        previous[0] = EARLIEST  # held before the first FETCH of the data: sent when appended
        previous[1:] = times
        sent = np.maximum(previous.take(idx), local_done)
        unreported = idx == times.size
        if unreported.any():
            # the last FETCH waited for the first batch appended after it, at most
            later = local_done > times[-1]
            if not self.all_appended:
                later &= self.inputs.appended if perm is None else self.inputs.appended[perm]
            first = local_done[later].min() if later.any() else NEVER
            sent[unreported & (local_done > first)] = NEVER
        out = sent if perm is None else np.empty(self.n, dtype=_I64)
        if perm is not None:
            out[perm] = sent
        if not self.all_appended:
            out[~self.inputs.appended] = NEVER
        return out

    @property
    def stats(self) -> list[np.ndarray]:
        """Order statistics of A_f over all followers: stats[i] = (i+1)-th smallest."""
        if self._stats is None:
            self._stats = sorted_stats(self.arrivals)
        return self._stats

    # -- leader LEO ------------------------------------------------------------------------------

    @property
    def start(self) -> int:
        if self._start is None:
            if self.inputs.epoch_start is not None:
                self._start = self.inputs.epoch_start
            else:
                firsts = [int(t[0]) for t in self.inputs.leo_times if t.size]
                if self.n:
                    firsts.append(int(self.t_local_done.min()))
                self._start = min(firsts) if firsts else 0
        return self._start

    def leader_steps(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Leader LEO as a step function of time: (times, values, value before the first step).

        After appending batch i (at its t_local_done) the leader LEO is the next batch's base offset
        in offset order; after the last batch, b + 1, raised at each later follower FETCH to its fetchOffset
        (a follower fetches only what the leader has appended: `Partition.fetchRecords` reads up to the log
        end): a group's produces end with its bucket while its followers' FETCHes go on for the request
        timeout, and their last offset is the leader's LEO of up to that much later (README, "Kafka versions").
        """
        if self._leader_steps is None:
            inputs = self.inputs
            perm = self.by_offset
            bs = inputs.base_offset if perm is None else inputs.base_offset[perm]
            keep = None
            if not self.all_appended:
                keep = inputs.appended if perm is None else inputs.appended[perm]
                bs = bs[keep]
            if bs.size == 0:
                self._leader_steps = self._fetched_after(EARLIEST, np.empty(0, _I64), np.empty(0, _I64), 0)
                return self._leader_steps
            ends_sorted = np.empty_like(bs)
            ends_sorted[:-1] = bs[1:]
            ends_sorted[-1] = int(bs[-1]) + 1
            np.maximum(ends_sorted, bs + 1, out=ends_sorted)
            if keep is None:
                ends_o = ends_sorted  # offset order, all rows
            else:  # rows not appended do not move the LEO
                ends_o = np.full(self.n, bs[0], dtype=_I64)
                ends_o[keep] = ends_sorted
            order = self.by_time
            if order is perm:  # time order = offset order (the usual case): no reshuffle
                times = self.t_local_done if perm is None else self.t_local_done[perm]
                values = np.maximum.accumulate(ends_o)
            else:
                if perm is None:
                    ends = ends_o
                else:
                    ends = np.empty(self.n, dtype=_I64)
                    ends[perm] = ends_o
                times = self.t_local_done if order is None else self.t_local_done[order]
                values = np.maximum.accumulate(ends if order is None else ends[order])
            last_append = int(times[-1]) if keep is None else int(self.t_local_done[inputs.appended].max())
            self._leader_steps = self._fetched_after(last_append, times, values, int(bs[0]))
        return self._leader_steps

    def _fetched_after(
        self, last_append: int, times: np.ndarray, values: np.ndarray, before: int
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """The leader LEO steps (times, values, before) followed by the followers' fetchOffsets after
        `last_append`, each a step up to the largest offset fetched by then."""
        later = [
            (t[k:], o[k:]) for t, o in zip(self.inputs.leo_times, self.leo_max, strict=True)
            if (k := int(np.searchsorted(t, last_append, side="right"))) < t.size
        ]  # fmt: skip
        if not later:
            return times, values, before
        fetch_t = np.concatenate([t for t, _ in later])
        order = np.argsort(fetch_t, kind="stable")
        fetch_t, fetch_v = fetch_t[order], np.concatenate([o for _, o in later])[order]
        if times.size and times[-1] > fetch_t[0]:  # produces not appended come later: merge in time order
            order = np.argsort(np.concatenate([times, fetch_t]), kind="stable")
            merged = np.concatenate([values, np.maximum(fetch_v, before)])[order]
            return np.concatenate([times, fetch_t])[order], np.maximum.accumulate(merged), before
        floor = int(values[-1]) if values.size else before
        return (
            np.concatenate([times, fetch_t]),
            np.concatenate([values, np.maximum.accumulate(np.maximum(fetch_v, floor))]),
            before,
        )

    @cached_property
    def first_append(self) -> int:
        """When the first appended produce handed to the kernel was appended (``NEVER``: none)."""
        appended = self.t_local_done if self.all_appended else self.t_local_done[self.inputs.appended]
        return int(appended.min()) if appended.size else NEVER

    @cached_property
    def down_spans(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per follower: sorted spans [start, end) in which it was no live replica to elect. The controller
        removes a broker that starts a controlled shutdown or is fenced from every ISR at once
        (`ReplicationControlManager.handleBrokerInControlledShutdown` / `handleBrokerFenced`: a change
        `isr_change_by_controller` marks), and an election considers only active brokers
        (`PartitionChangeBuilder.isAcceptableLeader`); the broker is running again once it fetches (its
        first LEO event after the removal, NEVER if none)."""
        inputs = self.inputs
        removed = (
            inputs.isr_change_by_controller & inputs.isr_membership[:-1].T & ~inputs.isr_membership[1:].T
        )  # (F, K)
        spans = []
        for j in range(self.f):
            starts = inputs.isr_change_times[removed[j]]
            if starts.size == 0:
                spans.append((starts, starts))
                continue
            fetches = inputs.leo_times[j]
            spans.append((starts, np.append(fetches, NEVER).take(np.searchsorted(fetches, starts, side="right"))))
        return spans

    def live_at(self, j: int, t: np.ndarray) -> np.ndarray | bool:
        """Whether follower j was a live replica at times t (True when it never was down)."""
        starts, ends = self.down_spans[j]
        if starts.size == 0:
            return True
        k = np.searchsorted(starts, t, side="right") - 1
        return ~((k >= 0) & (t < ends.take(np.maximum(k, 0))))

    def leader_leo_at(self, q) -> np.ndarray:
        """Leader LEO derived from the produces at times q (see leader_steps)."""
        times, values, before = self.leader_steps()
        return value_at(times, values, q, before)

    def follower_leo_at(self, j: int, q, unknown: int) -> np.ndarray:
        """LEO of follower j (cumulative max) at times q; ``unknown`` before its first event."""
        return value_at(self.inputs.leo_times[j], self.leo_max[j], q, unknown)

    def caught_up(self, j: int, idx: np.ndarray, with_previous: np.ndarray) -> np.ndarray:
        """Whether FETCH ``idx`` of follower j moves its lastCaughtUpTimeMs (Replica rule).

        True when fetchOffset >= leader LEO at this fetch (lastCaughtUp := this fetch time), or,
        where ``with_previous``, fetchOffset >= leader LEO at the previous fetch
        (lastCaughtUp := previous fetch time; the caller decides whether that time is recent).
        """
        times, leo = self.inputs.leo_times[j], self.leo_max[j]
        offsets = leo.take(idx)
        at = times.take(idx)
        # before the first append handed to the kernel the leader's LEO is not known (a bucket's look-back
        # history): a fetch then counts as caught up, as the recorded ISR has it
        ok = (offsets >= self.leader_leo_at(at)) | (at < self.first_append)
        prev = np.flatnonzero(with_previous & ~ok & (idx > 0))
        if prev.size:
            ok[prev] = offsets[prev] >= self.leader_leo_at(times.take(idx[prev] - 1))
        return ok

    # -- ISR intervals (maximal ISR) -------------------------------------------------------------

    def _hw_estimate(self, j: int, q: np.ndarray, isr: IsrTimeline) -> np.ndarray:
        """Estimated HW at times q for follower j's rejoin test: min of the leader LEO and the LEO
        of the other committed ISR members (members that have not fetched yet do not count)."""
        hw = self.leader_leo_at(q)
        rows = isr.rows_at(q)
        for g in range(self.f):
            if g == j:
                continue
            member = isr.membership[rows, g]
            if not member.any():
                continue
            leo_g = self.follower_leo_at(g, q, NEVER)
            np.minimum(hw, np.where(member, leo_g, NEVER), out=hw)
        return hw

    def intervals(self, isr: IsrTimeline, maximal: bool) -> list[IsrInterval]:
        """ISR intervals with the followers that hold the HW back and the committed ISR size."""
        key = (id(isr), maximal)
        if key not in self._intervals:
            self._intervals[key] = (isr, self._compute_intervals(isr, maximal))
        return self._intervals[key][1]

    def _compute_intervals(self, isr: IsrTimeline, maximal: bool) -> list[IsrInterval]:
        isr = isr.normalized()
        times, members = isr.change_times, isr.membership
        extra: list[tuple[int, int, int]] = []  # (follower, from, until): pending expansion
        if maximal and times.size:
            for j in range(self.f):
                left = None if members[0, j] else EARLIEST
                for k in range(times.size):
                    was, now = members[k, j], members[k + 1, j]
                    if was and not now:
                        left = int(times[k])
                    elif now and not was:
                        commit = int(times[k])
                        join = self._qualifying_fetch(j, left, commit, isr)
                        if join < commit:
                            extra.append((j, join, commit))
        bounds = np.unique(np.concatenate([times, np.array([e[1] for e in extra], dtype=_I64)]))
        sizes = 1 + members.sum(axis=1)
        out: list[IsrInterval] = []
        starts = [EARLIEST, *(int(x) for x in bounds)]
        ends = [*(int(x) for x in bounds), NEVER]
        for start, end in zip(starts, ends, strict=True):
            row = int(np.searchsorted(times, start, side="right")) if start != EARLIEST else 0
            counting = members[row].copy()
            for j, lo, hi in extra:
                if lo <= start < hi:
                    counting[j] = True
            out.append(IsrInterval(start, end, counting, int(sizes[row])))
        return out

    def _qualifying_fetch(self, j: int, left: int | None, commit: int, isr: IsrTimeline) -> int:
        """First FETCH of follower j after it left the ISR (at ``left``), at most
        ``isr_expand_window_us`` before the commit of its re-add and up to that commit, from which it
        holds the HW back; ``commit`` if none does.

        Two rules of `Partition.maybeIncrementLeaderHW` count a follower outside the committed ISR: a
        pending expansion (`maximalIsr`), proposed at the FETCH whose fetchOffset reaches the HW
        (`maybeExpandIsr` → `isFollowerInSync`), and `shouldWaitForReplicaToJoinIsr`: an ISR-eligible
        follower that is caught up by the Replica rule (`ReplicaState.isCaughtUp`: fetchOffset at the
        leader's LEO now, or at the LEO of its previous FETCH, made within ``recorded_lag_us``). The
        second comes first for a restarted follower: its first FETCH after the restart catches it up to
        what the leader had then, so its second, caught up as of the first, holds the HW back until it has
        fetched the new batches. Both need the follower's broker ISR-eligible (`isReplicaIsrEligible`: not fenced,
        not in controlled shutdown; ``follower_ineligible``): a restarted broker fetches caught up before the
        controller unfences it, and counts from then."""
        times = self.inputs.leo_times[j]
        ineligible = self.inputs.ineligible_at_leader(j)
        # Where the broker's eligibility is not known, a FETCH counts at most the window before the commit (a
        # restarted broker fetches caught up while fenced); where it is, from when the follower left.
        since = commit - max(0, int(self.opt.isr_expand_window_us)) if ineligible is None else EARLIEST
        if left not in (None, EARLIEST):
            since = max(since, left)
        lo = int(np.searchsorted(times, since, side="right"))
        hi = int(np.searchsorted(times, commit, side="right"))
        if lo >= hi:
            return commit
        q = times[lo:hi]
        ok = self.leo_max[j][lo:hi] >= self._hw_estimate(j, q, isr)
        idx = np.arange(lo, hi)
        previous = times.take(np.maximum(idx - 1, 0))
        ok |= self.caught_up(j, idx, (idx > 0) & (q - previous <= self.opt.recorded_lag_us))
        if ineligible is None:
            return int(q[int(np.argmax(ok))]) if ok.any() else commit
        # A FETCH made while its broker was fenced or shutting down still moves its lastCaughtUpTimeMs: the follower
        # counts once the broker is eligible again, if that FETCH is within the lag then.
        counts_from = span_ends(ineligible, q)
        ok &= (counts_from - q <= self.opt.recorded_lag_us) & (counts_from < commit)
        return int(counts_from[int(np.argmax(ok))]) if ok.any() else commit

    def rejected_under_min_isr(self, isr: IsrTimeline) -> np.ndarray | None:
        """Rows whose committed ISR at t_local_done is below m_eff (None: no row)."""
        key = id(isr)
        if key not in self._rejections:
            reject: np.ndarray | None
            if self.m_eff <= 1:
                reject = None
            elif isr.change_times.size == 0:
                small = 1 + int(isr.membership[0].sum()) < self.m_eff
                reject = np.ones(self.n, dtype=bool) if small else None
            else:
                reject = isr.isr_size_at(self.t_local_done) < self.m_eff
                if not reject.any():
                    reject = None
            self._rejections[key] = (isr, reject)
        return self._rejections[key][1]

    # -- durability ------------------------------------------------------------------------------

    def durability_base(self) -> tuple[np.ndarray, np.ndarray]:
        """(t_min_isr_copies, t_all_copies) as float64 with inf for never."""
        if self._durability_base is None:
            stats, local_done = self.stats, self.t_local_done
            pair = []
            for t in (stats[self.m_eff - 2] if self.m_eff > 1 else None, stats[-1] if self.f else None):
                if t is None:
                    pair.append(local_done.astype(np.float64))
                    continue
                tf = np.maximum(t, local_done).astype(np.float64)
                never = np.equal(t, NEVER, out=self.scratch)
                if never.any():
                    tf[never] = np.inf
                pair.append(tf)
            self._durability_base = (pair[0], pair[1])
        return self._durability_base
