"""ISR re-simulation (``acks=all@lag=<ms>``): the committed ISR a leader would have had with another
``replica.lag.time.max.ms``, from its followers' LEO timelines (:func:`simulate_isr`)."""

from __future__ import annotations

import numpy as np

from ackreplay.replay.kernel.epoch import Epoch, containing_span
from ackreplay.replay.kernel.model import (
    EARLIEST,
    NEVER,
    EpochInputs,
    IsrTimeline,
    ReplayOptions,
)

_I64 = np.int64
_CHUNK = 4096  # first chunk of follower events scanned for an ISR re-add
_MAX_ISR_CHECKS = 20_000_000  # isr-expiration checks one simulate_isr call may evaluate


_PROBE = 8  # FETCHes probed at the start of each lag window before scanning the whole window


class _RejoinScanner:
    """Finds, lazily and in chunks, the next FETCH of a follower that would re-add it to the ISR
    given which other followers are in the ISR (they hold the HW back)."""

    def __init__(self, ep: Epoch) -> None:
        self.ep = ep
        self.cache: dict[tuple[int, int], list] = {}

    def next_index(self, j: int, others: int, i0: int) -> int:
        times = self.ep.inputs.leo_times[j]
        n = times.size
        if i0 >= n:
            return n
        entry = self.cache.get((j, others))
        if entry is None or not (entry[0] <= i0 <= entry[1]):
            entry = [i0, i0, entry[2] if entry is not None else np.zeros(n, dtype=bool)]
            self.cache[(j, others)] = entry
        hi, elig = entry[1], entry[2]
        if hi > i0:
            seg = elig[i0:hi]
            k = int(np.argmax(seg))
            if seg[k]:
                return i0 + k
        chunk = _CHUNK
        while hi < n:
            new_hi = min(n, hi + chunk)
            q = times[hi:new_hi]
            # HW estimate: min(leader LEO, LEO of the other ISR members that have fetched).
            hw = self.ep.leader_leo_at(q)
            for g in range(self.ep.f):
                if others >> g & 1:
                    np.minimum(hw, self.ep.follower_leo_at(g, q, NEVER), out=hw)
            seg = self.ep.leo_max[j][hi:new_hi] >= hw
            elig[hi:new_hi] = seg
            entry[1] = new_hi
            if seg.any():
                return hi + int(np.argmax(seg))
            hi = new_hi
            chunk *= 2
        return n


class _ExpiryChecks:
    """isr-expiration checks of one follower: is it out of sync (ReplicaState.isCaughtUp false:
    LEO < leader LEO and now - lastCaughtUpTimeMs > lag) at check k?

    lastCaughtUp >= now - lag iff some FETCH in the window [now - lag, now] moved it there (see
    Epoch.caught_up), so only window FETCHes matter. All checks are probed at once with the first
    _PROBE FETCHes of their window (a healthy follower catches up within them); a check the probe
    leaves undecided is resolved, only when the simulation asks for it, by scanning its window.
    """

    def __init__(
        self, ep: Epoch, j: int, grid: np.ndarray, leader_grid: np.ndarray, lag_us: int, init_lcu: int
    ) -> None:
        self.ep, self.j = ep, j
        times = ep.inputs.leo_times[j]
        n_checks = grid.size
        self.out = np.zeros(n_checks, dtype=bool)  # known out of sync
        self.undecided = np.zeros(n_checks, dtype=bool)
        self.lo = self.hi = np.zeros(n_checks, dtype=_I64)  # window FETCHes of suspect checks
        if times.size == 0:
            self.out = (grid - init_lcu > lag_us) & (leader_grid >= 0)
        else:
            last = np.searchsorted(times, grid, side="right") - 1  # latest FETCH at each check
            leo = np.where(last >= 0, ep.leo_max[j].take(np.maximum(last, 0)), -1)
            first = np.searchsorted(times, grid - lag_us, side="left")  # first FETCH in the window
            suspect = np.flatnonzero((leo < leader_grid) & (grid - init_lcu > lag_us))
            if suspect.size:
                lo, hi = first[suspect], last[suspect] + 1  # window FETCHes [lo, hi)
                probe = lo[:, None] + np.arange(_PROBE)
                valid = probe < hi[:, None]
                flat = probe[valid]
                # A previous fetch's time counts only when it is inside the window too.
                ok = ep.caught_up(j, flat, flat > np.repeat(lo, valid.sum(axis=1)))
                found_at = np.zeros(valid.shape, dtype=bool)
                found_at[valid] = ok
                found = found_at.any(axis=1)
                longer = hi - lo > _PROBE
                self.out[suspect[~found & ~longer]] = True
                self.undecided[suspect[~found & longer]] = True
                self.lo, self.hi = np.zeros(n_checks, dtype=_I64), np.zeros(n_checks, dtype=_I64)
                self.lo[suspect] = lo
                self.hi[suspect] = hi
        self.candidates = np.flatnonzero(self.out | self.undecided)

    def next_out(self, k0: int) -> int:
        """First check >= k0 at which the follower is out of sync (number of checks if none)."""
        pos = int(np.searchsorted(self.candidates, k0, side="left"))
        while pos < self.candidates.size:
            k = int(self.candidates[pos])
            if self.undecided[k]:
                self._resolve(k)
            if self.out[k]:
                return k
            pos += 1
        return self.out.size

    def _resolve(self, k: int) -> None:
        a, b = int(self.lo[k]) + _PROBE, int(self.hi[k])
        chunk = _CHUNK
        hit = False
        while a < b and not hit:
            c = min(b, a + chunk)
            idx = np.arange(a, c)
            hit = bool(self.ep.caught_up(self.j, idx, np.ones(idx.size, dtype=bool)).any())
            a, chunk = c, chunk * 2
        self.out[k] = not hit
        self.undecided[k] = False


def _controller_removals(inputs: EpochInputs, window_us: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per follower: when the controller alone took it out of the ISR (``isr_change_by_controller``), and
    from when the leader may re-add it after each removal.

    KRaft's controller removes a broker from every ISR at once when it starts a controlled shutdown or
    is fenced (``ReplicationControlManager.handleBrokerInControlledShutdown`` / ``handleBrokerFenced``),
    whatever the lag rule says, and the leader does not re-add a shutting-down or fenced broker however
    caught up its FETCHes are (``Partition.isReplicaIsrEligible``). When it is eligible again the
    controller's registration records say (``follower_ineligible``: the end of the span the removal falls in,
    or the removal itself if it falls in none); without them, its recorded re-addition does, less the window
    in which the qualifying FETCH precedes
    the commit (``isr_expand_window_us``). Not re-added within the epoch: never (``NEVER``).
    """
    times, members, flags = inputs.isr_change_times, inputs.isr_membership, inputs.isr_change_by_controller
    out = []
    for j in range(members.shape[1]):
        removed = np.flatnonzero(flags & members[:-1, j] & ~members[1:, j])
        readded = np.flatnonzero(~members[:-1, j] & members[1:, j])
        after = np.searchsorted(readded, removed, side="right")
        eligible = np.full(removed.size, NEVER, dtype=_I64)
        found = after < readded.size
        eligible[found] = times[readded[after[found]]] - window_us
        spans = inputs.follower_ineligible[j] if inputs.follower_ineligible is not None else None
        if spans is not None:  # the controller's records say: the end of the span the removal fell in
            # (matched on the controller's clock: the leader's removal line follows the record that caused it), as the
            # leader knew it
            at, known = times[removed], inputs.ineligible_at_leader(j)
            assert known is not None
            k = containing_span(spans, at)
            eligible = np.where(k >= 0, known[np.maximum(k, 0), 1] if len(spans) else at, at)
        out.append((times[removed], np.maximum(eligible, times[removed])))
    return out


def _resumed_checks(inputs: EpochInputs, grid: np.ndarray, start: int, horizon: int) -> np.ndarray:
    """The isr-expiration checks of a leader that did not run for a while: none while it was silent, one
    when it resumed (``leader_silences``: from its last request line to that check).

    ReplicaManager runs the check at a fixed rate (``scheduler.schedule("isr-expiration", ..., period =
    replica.lag.time.max.ms / 2)``, a ``ScheduledThreadPoolExecutor.scheduleAtFixedRate``): a stopped
    JVM runs none, and once resumed runs the overdue one at once.
    """
    silences = inputs.leader_silences  # (start, end) spans; empty when none (EpochInputs)
    if silences is None or silences.size == 0:
        return grid
    keep = np.ones(grid.size, dtype=bool)
    for silent_from, checked in silences.tolist():
        keep &= (grid <= silent_from) | (grid >= checked)
    checks = silences[:, 1]
    return np.unique(np.concatenate([grid[keep], checks[(checks > start) & (checks <= horizon)]]))


def _commit_delay(opt: ReplayOptions):
    """t -> how long after a proposal at t its change commits (``isr_commit_delays``, else the constant)."""
    if opt.isr_commit_delays is None or np.size(opt.isr_commit_delays[0]) == 0:
        constant = int(opt.isr_commit_delay_us)
        return lambda t: constant
    times = np.asarray(opt.isr_commit_delays[0], dtype=_I64)
    delays = np.maximum(np.asarray(opt.isr_commit_delays[1], dtype=_I64), 0)

    def nearest(t: int) -> int:
        i = int(np.searchsorted(times, t))
        if i == times.size or (i > 0 and t - times[i - 1] <= times[i] - t):
            i -= 1
        return int(delays[i])

    return nearest


def _own_commit(opt: ReplayOptions, lag_us: int, check_every: int):
    """t -> when a shrink proposed by the check at t commits if the leader logged this partition's shrink in
    that same run (``isr_own_commits``: within half a check period of t), else None. Only at the cluster's
    own lag (``recorded_lag_us``), whose checks are the leader's own: with another lag the checks fall
    elsewhere and the logged runs' queues say nothing of them."""
    if opt.isr_own_commits is None or np.size(opt.isr_own_commits[0]) == 0 or lag_us != int(opt.recorded_lag_us):
        return lambda t: None
    times = np.asarray(opt.isr_own_commits[0], dtype=_I64)
    commits = np.asarray(opt.isr_own_commits[1], dtype=_I64)
    half = check_every // 2

    def logged(t: int) -> int | None:
        i = int(np.searchsorted(times, t))
        near = [k for k in (i - 1, i) if 0 <= k < times.size and abs(int(times[k]) - t) < half]
        if not near:
            return None
        k = min(near, key=lambda k: abs(int(times[k]) - t))
        return max(int(commits[k]), t)

    return logged


def simulate_epoch_isr(ep: Epoch, lag_ms: float) -> IsrTimeline:
    """The epoch's ISR re-simulated at `lag_ms` (see `simulate_isr`), as an ISR timeline the policies read."""
    inputs, opt = ep.inputs, ep.opt
    f = ep.f
    lag_us = int(round(lag_ms * 1000))
    check_every = max(1, lag_us // 2)
    start = ep.start
    # The recorded ISR in force where the data starts (ISR lines can predate the request log's window).
    member = inputs.isr_membership[int(inputs.isr.rows_at(np.array([start], _I64))[0])].copy()
    if f == 0:
        return IsrTimeline(np.empty(0, _I64), member[None, :])

    # Horizon: nothing after the epoch end or after the last produce deadline / LEO event matters.
    last = [int(t[-1]) for t in inputs.leo_times if t.size]
    if ep.n:
        last.append(int(ep.deadline.max()))
    horizon = max([start, *last])
    if inputs.epoch_end != NEVER:
        horizon = min(horizon, inputs.epoch_end)

    # isr-expiration checks at phase + k * lag/2 after start.
    phase = start if opt.isr_check_phase_us is None else int(opt.isr_check_phase_us)
    first = phase + ((start - phase) // check_every + 1) * check_every
    n_checks = 0 if first > horizon else (horizon - first) // check_every + 1
    if n_checks > _MAX_ISR_CHECKS:
        raise ValueError(f"{n_checks} isr-expiration checks for lag {lag_ms} ms: span too long for that lag")
    grid = _resumed_checks(inputs, first + check_every * np.arange(n_checks, dtype=_I64), start, horizon)
    n_checks = grid.size
    # no check finds a follower behind before the first append: the leader's LEO is not known there
    leader_grid = np.where(grid < ep.first_append, -1, ep.leader_leo_at(grid))
    checks = [
        # lastCaughtUp starts at the epoch start for ISR members, 0 otherwise (resetReplicaState)
        _ExpiryChecks(ep, j, grid, leader_grid, lag_us, start if member[j] else 0)
        for j in range(f)
    ]

    scanner = _RejoinScanner(ep)
    delay = _commit_delay(opt)
    own_commit = _own_commit(opt, lag_us, check_every)
    ready = [EARLIEST] * f  # a removed follower is re-added by a FETCH after its removal committed
    removals = _controller_removals(inputs, int(opt.isr_expand_window_us))
    # removals committed by the start are in the recorded membership the simulation starts from
    next_removal = [int(np.searchsorted(r_t, start, side="right")) for r_t, _ in removals]
    for j, (_, r_ready) in enumerate(removals):
        if next_removal[j] and not member[j]:
            ready[j] = int(r_ready[next_removal[j] - 1])
    now = start
    change_times: list[int] = []
    rows: list[np.ndarray] = [member.copy()]
    while True:
        best_t, best_j, by_controller = NEVER, -1, False
        for j in range(f):
            if member[j]:
                k = checks[j].next_out(int(np.searchsorted(grid, now, side="left")))
                t = int(grid[k]) if k < n_checks else NEVER
            else:
                times = inputs.leo_times[j]
                i0 = int(np.searchsorted(times, max(now, ready[j]), side="right"))
                others = sum(1 << g for g in range(f) if g != j and member[g])
                i = scanner.next_index(j, others, i0)
                t = int(times[i]) if i < times.size else NEVER
            r_t = removals[j][0]
            removal = next_removal[j] < r_t.size and int(r_t[next_removal[j]]) <= t
            if removal:
                t = int(r_t[next_removal[j]])
            if t < best_t:
                best_t, best_j, by_controller = t, j, removal
        if best_j < 0 or best_t > horizon:
            break
        now = best_t
        if by_controller:
            ready[best_j] = max(ready[best_j], int(removals[best_j][1][next_removal[best_j]]))
            next_removal[best_j] += 1
            if not member[best_j]:  # already out (lag): it only stays out longer
                continue
            member[best_j] = False
            # the recorded time is the controller's commit; kept in order after a delayed lag change
            change_times.append(max(best_t, change_times[-1]) if change_times else best_t)
            rows.append(member.copy())
            continue
        member[best_j] = not member[best_j]
        logged = None if member[best_j] else own_commit(best_t)
        committed = best_t + delay(best_t) if logged is None else logged
        if not member[best_j]:
            ready[best_j] = committed
        # kept in order: a change proposed later may have committed sooner
        change_times.append(max(committed, change_times[-1]) if change_times else committed)
        rows.append(member.copy())
    timeline = IsrTimeline(np.array(change_times, dtype=_I64), np.array(rows, dtype=bool).reshape(-1, f))
    return timeline.normalized()


def simulate_isr(
    inputs: EpochInputs,
    lag_ms: float,
    options: ReplayOptions | None = None,
) -> IsrTimeline:
    """Re-simulate the committed ISR for ``replica.lag.time.max.ms = lag_ms`` from the LEO events.

    Model (kafka-reference §3.1-3.2), starting at ``inputs.epoch_start`` with the recorded ISR in
    force then:

    * lastCaughtUpTimeMs follows the Replica rule at each FETCH of the follower, with the leader
      LEO at the fetch derived from the produces (never below the follower's own fetchOffset); it
      starts at ``epoch_start`` for initial ISR members and at 0 for the others.
    * The isr-expiration task runs every ``lag_ms / 2`` from ``options.isr_check_phase_us``
      (default ``epoch_start``) and removes each ISR member with ``LEO < leader LEO`` and
      ``now - lastCaughtUp > lag``.
    * A non-member is re-added at its first FETCH (after its removal committed) with
      ``fetchOffset >= HW``, HW estimated as min(leader LEO, LEO of the other current members).
    * Changes commit ``options.isr_commit_delay_us`` after the proposal, or the delay of the logged
      proposal nearest in time (``options.isr_commit_delays``); at the cluster's own lag, a shrink proposed in
      the same check run as a logged shrink of the partition commits when that one did
      (``options.isr_own_commits``).
    * The controller's own removals (``inputs.isr_change_by_controller``: controlled shutdown,
      fencing) apply at their recorded times, and the removed follower is not re-added before its
      recorded re-addition's window (see :func:`_controller_removals`).
    * A leader that did not run (``inputs.leader_silences``) makes no check while silent and one
      when it resumes (see :func:`_resumed_checks`).

    Returns the committed timeline (same shape as the recorded one).
    """
    return simulate_epoch_isr(Epoch(inputs, options or ReplayOptions()), lag_ms)
