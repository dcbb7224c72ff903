"""Replay kernel: every produce of one (partition, leader epoch) under every ack policy, in one pass.

Plain NumPy, vectorised over produces (Python loops only over followers, ISR intervals, policies and
ISR state changes). The Spark side (bucketing, pandas UDF) builds one :class:`EpochInputs` per group,
calls :func:`replay_epoch` and turns the result into rows with :func:`to_columns`.

Semantics: ``docs/design.md`` ("Replay semantics", "Durability risk") and
``docs/kafka-reference.md`` §2, §3, §6. Summary, for a batch ``b`` (its base offset):

* A follower holds ``b`` once its LEO > b. ``A_f(b)`` is the first LEO event (the ``t_dequeue`` of
  a follower FETCH on the leader) at which the cumulative maximum of its ``fetchOffset`` exceeds b
  (``NEVER`` if none); ``T_f(b) = max(A_f(b), t_local_done)``.
* ``acks=1``: acknowledged at ``t_local_done``.
* ``acks=all``: rejected (NOT_ENOUGH_REPLICAS) when the committed ISR, leader included, is smaller
  than ``m_eff = min(min.insync.replicas, RF)`` at ``t_local_done``; otherwise acknowledged when the
  HW passes b: the first ``t >= t_local_done`` at which every follower of the *maximal* ISR at t has
  ``A_f(b) <= t``. Per ISR interval ``[s_k, e_k)`` with members ``S_k``:
  ``max(s_k, t_local_done, max_{f in S_k} A_f(b))`` if that is ``< e_k``. A member removed mid-wait
  stops counting at the commit of the shrink; a member added mid-wait counts from the follower FETCH
  that qualified it for the ISR (``fetchOffset >= HW``; the leader's maximal ISR, kafka-reference
  §2.4), which precedes the commit of the expansion (``ReplayOptions.maximal_isr``; False: from the
  commit). Kafka >= 3.7 does not advance the HW while the committed ISR is below ``m_eff``
  (``ReplayOptions.strict_min_isr``); with it off (<= 3.6) such a completion is
  NOT_ENOUGH_REPLICAS_AFTER_APPEND.
* ``acks=all@lag=<ms>``: as ``acks=all`` on the ISR re-simulated by :func:`simulate_isr`.
* ``quorum=<Q>`` (KIP-250): the (Q-1)-th smallest ``T_f(b)`` over all assigned followers
  (Q=1: ``t_local_done``); every produce is rejected when Q > RF.
* ``min.insync`` (KIP-926): rejected like ``acks=all`` at append; otherwise acknowledged at the
  first ``t >= t_local_done`` at which ``m_eff - 1`` followers of the (maximal) ISR at t hold b
  (the acks=N rule of Kafka 0.8.2 with N = m_eff, evaluated per ISR interval exactly like acks=all).
* Every policy: a raw ack later than ``t_local_done + timeout`` is TIMEOUT at that deadline; if the
  epoch ends before both the ack and the deadline the outcome is NOT_LEADER at the epoch end.

Durability per acknowledged produce (all followers, assignment order, committed ISR):
``copies_at_ack = 1 + #{f : A_f(b) <= t_ack}``; ``t_min_isr_copies`` = ``t_local_done`` if
``m_eff == 1`` else the (m_eff-1)-th smallest ``T_f(b)``; ``t_all_copies`` = max ``T_f(b)``;
``exposure_us = max(0, t_min_isr_copies - t_ack)``, ``full_replication_us`` likewise (``inf`` when
the batch never reaches that many replicas within the data). ``loss_kafka_election``: the first
follower in assignment order that is in the committed ISR at ``t_ack`` does not hold b (or there is
none); ``loss_longest_log_election``: no follower of the committed ISR at ``t_ack`` holds b.

Produces that the broker did not append (``appended`` false, e.g. error 19) have no offset. They get
a policy's rejection when it applies and ``acks=1`` (or any ack that needs no follower) as usual;
where the outcome would depend on follower replication it is UNREPLAYABLE.

Times are int64 microseconds since the Unix epoch; ``NEVER`` (int64 max) means "not within the data"
in internal arrays and never appears in ``PolicyOutcome.t_ack``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

NEVER: int = int(np.iinfo(np.int64).max)
"""Sentinel time: "never" (within the data) / "still leader" for ``EpochInputs.epoch_end``."""

_I64 = np.int64
_CHUNK = 4096  # first chunk of follower events scanned for an ISR re-add
_MAX_ISR_CHECKS = 20_000_000  # isr-expiration checks one simulate_isr call may evaluate


class Outcome(IntEnum):
    """Outcome codes of a replayed produce (``PolicyOutcome.outcome``, int8)."""

    ACKED = 0
    """Acknowledged at ``t_ack``."""
    NOT_ENOUGH_REPLICAS = 1
    """Rejected before the append (error 19; quorum: Q > RF) at ``t_local_done``."""
    TIMEOUT = 2
    """No ack within the request's ``timeoutMs`` (error 7); ``t_ack = t_local_done + timeout``."""
    NOT_LEADER = 3
    """Leadership ended while waiting (error 6); ``t_ack`` = epoch end."""
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 4
    """``acks=all`` with ``strict_min_isr=False`` only (Kafka <= 3.6): the HW passed the batch while
    the maximal ISR was below min ISR (error 20); ``t_ack`` is that completion time."""
    UNREPLAYABLE = 5
    """The recorded append failed (no offset) and this policy's outcome would depend on follower
    replication of that batch, which the trace cannot tell; ``t_ack = t_local_done``."""


OUTCOME_NAMES: dict[int, str] = {int(o): o.name.lower() for o in Outcome}


# ------------------------------------------------------------------------------------------------
# Inputs and outputs
# ------------------------------------------------------------------------------------------------


def _i64(values, name: str) -> np.ndarray:
    arr = np.ascontiguousarray(values, dtype=_I64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _is_sorted(arr: np.ndarray) -> bool:
    return arr.size < 2 or bool(np.all(arr[1:] >= arr[:-1]))


@dataclass(frozen=True)
class IsrTimeline:
    """Committed ISR membership of the followers over time (the leader is always a member).

    ``membership[0]`` holds before ``change_times[0]``, ``membership[k]`` from ``change_times[k-1]``
    (inclusive) until ``change_times[k]``. Column j is follower ``follower_ids[j]``.
    """

    change_times: np.ndarray  # int64 (K,), sorted
    membership: np.ndarray  # bool (K+1, F)

    def __post_init__(self) -> None:
        times = _i64(self.change_times, "change_times")
        members = np.ascontiguousarray(self.membership, dtype=bool)
        if members.ndim != 2 or members.shape[0] != times.size + 1:
            raise ValueError(
                f"membership must have shape (K+1, F) = ({times.size + 1}, F), got {members.shape}"
            )
        if not _is_sorted(times):
            raise ValueError("change_times must be sorted")
        object.__setattr__(self, "change_times", times)
        object.__setattr__(self, "membership", members)

    @property
    def n_followers(self) -> int:
        return self.membership.shape[1]

    def rows_at(self, t: np.ndarray) -> np.ndarray:
        """Row of ``membership`` in force at each time of ``t`` (a change applies from its time)."""
        return np.searchsorted(self.change_times, t, side="right")

    def isr_size_at(self, t: np.ndarray) -> np.ndarray:
        """ISR size, leader included, at each time of ``t``."""
        sizes = 1 + self.membership.sum(axis=1)
        if self.change_times.size == 0:
            return np.full(np.shape(t), sizes[0], dtype=sizes.dtype)
        return sizes[self.rows_at(t)]

    def normalized(self) -> IsrTimeline:
        """Same timeline with equal change times merged and no-op changes dropped."""
        times, members = self.change_times, self.membership
        if times.size == 0:
            return self
        last_of_time = np.append(times[1:] != times[:-1], True)
        times, members = times[last_of_time], np.concatenate([members[:1], members[1:][last_of_time]])
        changed = np.any(members[1:] != members[:-1], axis=1)
        return IsrTimeline(times[changed], np.concatenate([members[:1], members[1:][changed]]))


@dataclass(frozen=True)
class EpochInputs:
    """Everything the kernel needs about one (partition, leader epoch) on its leader.

    Produces may come in any order (outputs are aligned with the input rows). Array arguments are
    converted to contiguous int64/bool/int32 arrays (no copy when they already are).
    """

    base_offset: np.ndarray
    """int64 (N,): baseOffset of each produce's batch (ignored where ``appended`` is false)."""
    t_local_done: np.ndarray
    """int64 (N,): local append done (``t_dequeue + localTimeMs``)."""
    timeout_us: np.ndarray
    """int64 (N,): the request's ``timeoutMs`` in microseconds."""
    appended: np.ndarray
    """bool (N,): the broker appended the batch (false e.g. for error 19)."""
    follower_ids: np.ndarray
    """int32 (F,): the assigned replicas other than the leader, in assignment order (F = RF-1)."""
    leo_times: tuple[np.ndarray, ...]
    """Per follower: int64 sorted times at which the leader learned its LEO (FETCH ``t_dequeue``)."""
    leo_offsets: tuple[np.ndarray, ...]
    """Per follower: int64 LEO (``fetchOffset``) at those times."""
    isr_change_times: np.ndarray
    """int64 (K,) sorted commit times of ISR changes ("ISR updated to ...")."""
    isr_membership: np.ndarray
    """bool (K+1, F): committed membership of each follower; row 0 holds before the first change."""
    min_insync_replicas: int
    epoch_end: int = NEVER
    """Leadership lost (first instant this broker is no longer leader); ``NEVER``: still leader."""
    quorum_sizes: tuple[int, ...] = (2, 3)
    """KIP-250 quorum sizes Q to replay (policy ids ``quorum=<Q>``)."""
    replica_lag_time_max_ms: tuple[float, ...] = ()
    """``replica.lag.time.max.ms`` values to re-simulate the ISR for (``acks=all@lag=<ms>``)."""
    epoch_start: int | None = None
    """Start of the replayed span: leadership start, or where the data handed to the kernel starts.
    Only :func:`simulate_isr` uses it. None: the earliest produce or LEO event time."""

    def __post_init__(self) -> None:
        n = _i64(self.base_offset, "base_offset").size
        for name in ("base_offset", "t_local_done", "timeout_us"):
            arr = _i64(getattr(self, name), name)
            if arr.size != n:
                raise ValueError(f"{name} has {arr.size} rows, base_offset has {n}")
            object.__setattr__(self, name, arr)
        appended = np.ascontiguousarray(self.appended, dtype=bool)
        if appended.shape != (n,):
            raise ValueError(f"appended must have shape ({n},), got {appended.shape}")
        object.__setattr__(self, "appended", appended)
        if n and np.any(self.base_offset[appended] < 0):
            raise ValueError("appended produces need base_offset >= 0")

        ids = np.ascontiguousarray(self.follower_ids, dtype=np.int32)
        if ids.ndim != 1:
            raise ValueError("follower_ids must be one-dimensional")
        object.__setattr__(self, "follower_ids", ids)
        f = ids.size
        times = tuple(_i64(t, "leo_times[f]") for t in self.leo_times)
        offsets = tuple(_i64(o, "leo_offsets[f]") for o in self.leo_offsets)
        if len(times) != f or len(offsets) != f:
            raise ValueError(f"need LEO events for each of the {f} followers")
        for j, (t, o) in enumerate(zip(times, offsets, strict=True)):
            if t.size != o.size:
                raise ValueError(f"follower {ids[j]}: {t.size} LEO times but {o.size} offsets")
            if not _is_sorted(t):
                raise ValueError(f"follower {ids[j]}: LEO times must be sorted")
        object.__setattr__(self, "leo_times", times)
        object.__setattr__(self, "leo_offsets", offsets)

        isr = IsrTimeline(self.isr_change_times, self.isr_membership)
        if isr.n_followers != f:
            raise ValueError(f"isr_membership has {isr.n_followers} columns, expected {f}")
        object.__setattr__(self, "isr_change_times", isr.change_times)
        object.__setattr__(self, "isr_membership", isr.membership)

        if int(self.min_insync_replicas) < 1:
            raise ValueError("min_insync_replicas must be >= 1")
        object.__setattr__(self, "min_insync_replicas", int(self.min_insync_replicas))
        object.__setattr__(self, "epoch_end", int(self.epoch_end))
        qs = tuple(int(q) for q in self.quorum_sizes)
        if any(q < 1 for q in qs):
            raise ValueError("quorum sizes must be >= 1")
        object.__setattr__(self, "quorum_sizes", qs)
        lags = tuple(float(x) for x in self.replica_lag_time_max_ms)
        if any(not (math.isfinite(x) and x >= 0.002) for x in lags):
            raise ValueError("replica_lag_time_max_ms values must be finite and >= 0.002")
        object.__setattr__(self, "replica_lag_time_max_ms", lags)
        if self.epoch_start is not None:
            object.__setattr__(self, "epoch_start", int(self.epoch_start))

    @property
    def n_produces(self) -> int:
        return self.base_offset.size

    @property
    def replication_factor(self) -> int:
        return self.follower_ids.size + 1

    @property
    def isr(self) -> IsrTimeline:
        """The recorded (committed) ISR timeline."""
        return IsrTimeline(self.isr_change_times, self.isr_membership)


@dataclass(frozen=True)
class ReplayOptions:
    """Broker-behaviour switches (defaults: Kafka >= 3.7, as in the lab traces)."""

    strict_min_isr: bool = True
    """Kafka >= 3.7 (KIP-966 part 1): no HW advance while the committed ISR < min ISR."""
    maximal_isr: bool = True
    """A follower re-added to the ISR holds the HW back from its qualifying FETCH (maximal ISR)
    instead of from the commit of the expansion."""
    isr_check_phase_us: int | None = None
    """simulate_isr: a time at which the isr-expiration task runs (None: ``epoch_start``)."""
    isr_commit_delay_us: int = 0
    """simulate_isr: delay between an ISR change proposal and its commit (AlterPartition)."""


@dataclass(frozen=True)
class PolicyOutcome:
    """Counterfactual outcome of every produce (input row order) under one policy.

    Non-acknowledged rows have ``copies_at_ack = 0``, NaN durations and false loss flags.
    """

    policy: str
    outcome: np.ndarray
    """int8 (N,): :class:`Outcome` code."""
    t_ack: np.ndarray
    """int64 (N,): time the request ends: ack, rejection, timeout deadline or epoch end."""
    copies_at_ack: np.ndarray
    """int8 (N,): replicas (leader included) holding the batch at ``t_ack``."""
    exposure_us: np.ndarray
    """float64 (N,): ``max(0, t_min_isr_copies - t_ack)``; inf: never on min ISR within the data;
    NaN: not acknowledged, or no offset (recorded append failed)."""
    full_replication_us: np.ndarray
    """float64 (N,): ``max(0, t_all_copies - t_ack)``, same conventions."""
    loss_kafka_election: np.ndarray
    """bool (N,): a leader failure at ``t_ack`` loses the batch under Kafka's clean election."""
    loss_longest_log_election: np.ndarray
    """bool (N,): ... under an election of the ISR member with the longest log."""
    isr: IsrTimeline = field(repr=False)
    """The committed ISR used (recorded, or simulated for ``acks=all@lag=...``)."""

    def as_dict(self) -> dict[str, np.ndarray]:
        """The per-produce arrays by name."""
        return {name: getattr(self, name) for name in _OUTCOME_COLUMNS}


_OUTCOME_COLUMNS = (
    "outcome",
    "t_ack",
    "copies_at_ack",
    "exposure_us",
    "full_replication_us",
    "loss_kafka_election",
    "loss_longest_log_election",
)


def lag_policy_id(lag_ms: float) -> str:
    """Policy id of ``acks=all`` with a re-simulated ISR, e.g. ``acks=all@lag=5000``."""
    return f"acks=all@lag={lag_ms:g}"


def policy_ids(inputs: EpochInputs) -> list[str]:
    """The policy ids :func:`replay_epoch` returns for these inputs, in its order."""
    ids = ["acks=1", "acks=all", "min.insync"]
    ids += [f"quorum={q}" for q in inputs.quorum_sizes]
    ids += [lag_policy_id(x) for x in inputs.replica_lag_time_max_ms]
    return list(dict.fromkeys(ids))


# ------------------------------------------------------------------------------------------------
# Small array helpers
# ------------------------------------------------------------------------------------------------


def _sorted_stats(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Elementwise order statistics of a few equally long arrays (bubble-sort network)."""
    out = list(arrays)
    n = len(out)
    for i in range(n - 1):
        for j in range(n - 1 - i):
            lo = np.minimum(out[j], out[j + 1])
            out[j + 1] = np.maximum(out[j], out[j + 1])
            out[j] = lo
    return out


def _kth_smallest(arrays: list[np.ndarray], k: int) -> np.ndarray:
    """k-th smallest (1-based) elementwise over ``arrays`` (1 <= k <= len(arrays))."""
    if k == 1:
        return arrays[0] if len(arrays) == 1 else np.minimum.reduce(arrays)
    if k == len(arrays):
        return np.maximum.reduce(arrays)
    return _sorted_stats(arrays)[k - 1]


def _next_true(mask: np.ndarray) -> np.ndarray:
    """``nxt[i]`` = smallest j >= i with ``mask[j]`` (len(mask) if none); length len(mask)+1."""
    n = mask.size
    idx = np.where(mask, np.arange(n), n)
    nxt = np.minimum.accumulate(idx[::-1])[::-1] if n else idx
    return np.append(nxt, n)


def _value_at(times: np.ndarray, values: np.ndarray, q, before) -> np.ndarray:
    """Step function: value of the last event with time <= q (``before`` if none)."""
    idx = np.searchsorted(times, q, side="right")
    ext = np.empty(values.size + 1, dtype=values.dtype)
    ext[0] = before
    ext[1:] = values
    return ext[idx]


# ------------------------------------------------------------------------------------------------
# Per-epoch derived arrays (cached; shared by all policies)
# ------------------------------------------------------------------------------------------------


@dataclass
class _Interval:
    start: int  # _MIN for the first
    end: int  # NEVER for the last
    counting: np.ndarray  # bool (F,): followers holding the HW back (maximal ISR)
    committed_size: int  # leader included


_MIN = int(np.iinfo(np.int64).min)


class _Epoch:
    """Arrays derived from one EpochInputs, computed lazily and shared by the policies."""

    def __init__(self, inp: EpochInputs, options: ReplayOptions) -> None:
        self.inp = inp
        self.opt = options
        self.n = inp.n_produces
        self.f = inp.follower_ids.size
        self.tld = inp.t_local_done
        self.m_eff = min(inp.min_insync_replicas, inp.replication_factor)
        self.all_appended = bool(inp.appended.all())
        self.deadline = self.tld + inp.timeout_us
        self.cum = [np.maximum.accumulate(o) if o.size else o for o in inp.leo_offsets]
        self._arrivals: list[np.ndarray] | None = None
        self._stats: list[np.ndarray] | None = None
        self._order_done = False
        self._leader_steps: tuple[np.ndarray, np.ndarray, int] | None = None
        self._leader_at_events: list[np.ndarray | None] = [None] * self.f
        self._lcu_at_events: list[np.ndarray | None] = [None] * self.f
        self._durability_base: tuple[np.ndarray, np.ndarray] | None = None
        self._start: int | None = None

    # -- arrivals -----------------------------------------------------------------------------

    @property
    def arrivals(self) -> list[np.ndarray]:
        """A_f(b) per follower (int64, NEVER if never; NEVER for produces not appended)."""
        if self._arrivals is None:
            self._arrivals = [self._arrival(j) for j in range(self.f)]
        return self._arrivals

    def _arrival(self, j: int) -> np.ndarray:
        times = self.inp.leo_times[j]
        if times.size == 0:
            return np.full(self.n, NEVER, dtype=_I64)
        idx = np.searchsorted(self.cum[j], self.inp.base_offset, side="right")
        ext = np.empty(times.size + 1, dtype=_I64)
        ext[:-1] = times
        ext[-1] = NEVER
        arrival = ext.take(idx)
        if not self.all_appended:
            arrival[~self.inp.appended] = NEVER
        return arrival

    @property
    def stats(self) -> list[np.ndarray]:
        """Order statistics of A_f over all followers: stats[i] = (i+1)-th smallest."""
        if self._stats is None:
            self._stats = _sorted_stats(self.arrivals)
        return self._stats

    # -- produce order ---------------------------------------------------------------------------

    def _ensure_order(self) -> None:
        if self._order_done:
            return
        if _is_sorted(self.tld):
            self.order, self.tld_sorted = None, self.tld
        else:
            self.order = np.argsort(self.tld, kind="stable")
            self.tld_sorted = self.tld[self.order]
        self.max_wait = int(max(0, self.inp.timeout_us.max())) if self.n else 0
        self._order_done = True

    # -- leader LEO ------------------------------------------------------------------------------

    @property
    def start(self) -> int:
        if self._start is None:
            if self.inp.epoch_start is not None:
                self._start = self.inp.epoch_start
            else:
                firsts = [int(t[0]) for t in self.inp.leo_times if t.size]
                if self.n:
                    firsts.append(int(self.tld.min()))
                self._start = min(firsts) if firsts else 0
        return self._start

    def leader_steps(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Leader LEO as a step function of time: (times, values, value before the first step).

        After appending batch i (at its t_local_done) the leader LEO is the next batch's base offset
        in offset order; after the last batch, max(b + 1, the largest follower fetchOffset).
        """
        if self._leader_steps is None:
            inp = self.inp
            max_follower = max((int(c[-1]) for c in self.cum if c.size), default=0)
            app = inp.appended if not self.all_appended else slice(None)
            b = inp.base_offset[app]
            t = self.tld[app]
            if b.size == 0:
                self._leader_steps = (np.empty(0, _I64), np.empty(0, _I64), max_follower)
            else:
                by_offset = None if _is_sorted(b) else np.argsort(b, kind="stable")
                bs = b if by_offset is None else b[by_offset]
                ends_sorted = np.empty_like(bs)
                ends_sorted[:-1] = bs[1:]
                ends_sorted[-1] = max(int(bs[-1]) + 1, max_follower)
                np.maximum(ends_sorted, bs + 1, out=ends_sorted)
                if by_offset is None:
                    ends = ends_sorted
                else:
                    ends = np.empty_like(ends_sorted)
                    ends[by_offset] = ends_sorted
                by_time = None if _is_sorted(t) else np.argsort(t, kind="stable")
                times = t if by_time is None else t[by_time]
                values = np.maximum.accumulate(ends if by_time is None else ends[by_time])
                self._leader_steps = (times, values, int(bs[0]))
        return self._leader_steps

    def leader_leo_at(self, q) -> np.ndarray:
        times, values, before = self.leader_steps()
        return _value_at(times, values, q, before)

    def follower_leo_at(self, j: int, q, unknown: int) -> np.ndarray:
        """LEO of follower j (cumulative max) at times q; ``unknown`` before its first event."""
        return _value_at(self.inp.leo_times[j], self.cum[j], q, unknown)

    def leader_at_events(self, j: int) -> np.ndarray:
        """Leader LEO at each LEO event of follower j (never below that follower's LEO)."""
        cached = self._leader_at_events[j]
        if cached is None:
            cached = np.maximum(self.leader_leo_at(self.inp.leo_times[j]), self.cum[j])
            self._leader_at_events[j] = cached
        return cached

    def lcu_at_events(self, j: int) -> np.ndarray:
        """lastCaughtUpTimeMs of follower j after each of its fetches, ignoring the initial value.

        Replica.updateFetchStateOrThrow: the fetch time if fetchOffset >= leader LEO; else the
        previous fetch time if fetchOffset >= leader LEO at the previous fetch; else unchanged.
        """
        cached = self._lcu_at_events[j]
        if cached is None:
            times, leo = self.inp.leo_times[j], self.cum[j]
            lead = self.leader_at_events(j)
            cand = np.where(leo >= lead, times, 0)
            if times.size > 1:
                prev_ok = (leo[1:] >= lead[:-1]) & (cand[1:] == 0)
                cand[1:] = np.where(prev_ok, times[:-1], cand[1:])
            cached = np.maximum.accumulate(cand) if cand.size else cand
            self._lcu_at_events[j] = cached
        return cached

    # -- HW membership (maximal ISR) ------------------------------------------------------------

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

    def intervals(self, isr: IsrTimeline, maximal: bool) -> list[_Interval]:
        """ISR intervals with the followers that hold the HW back and the committed ISR size."""
        isr = isr.normalized()
        times, members = isr.change_times, isr.membership
        extra: list[tuple[int, int, int]] = []  # (follower, from, until): pending expansion
        if maximal and times.size:
            for j in range(self.f):
                left = _MIN if not members[0, j] else None
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
        out: list[_Interval] = []
        sizes = 1 + members.sum(axis=1)
        starts = [_MIN, *(int(x) for x in bounds)]
        ends = [*(int(x) for x in bounds), NEVER]
        for start, end in zip(starts, ends, strict=True):
            row = int(np.searchsorted(times, start, side="right")) if start != _MIN else 0
            counting = members[row].copy()
            for j, lo, hi in extra:
                if lo <= start < hi:
                    counting[j] = True
            out.append(_Interval(start, end, counting, int(sizes[row])))
        return out

    def _qualifying_fetch(self, j: int, left: int | None, commit: int, isr: IsrTimeline) -> int:
        """First FETCH of follower j after it left the ISR (at ``left``) and up to the commit of
        its re-add whose fetchOffset reaches the (estimated) HW; ``commit`` if none does."""
        times = self.inp.leo_times[j]
        lo = 0 if left in (None, _MIN) else int(np.searchsorted(times, left, side="right"))
        hi = int(np.searchsorted(times, commit, side="right"))
        if lo >= hi:
            return commit
        q = times[lo:hi]
        ok = self.cum[j][lo:hi] >= self._hw_estimate(j, q, isr)
        return int(q[int(np.argmax(ok))]) if ok.any() else commit

    # -- durability ------------------------------------------------------------------------------

    def durability_base(self) -> tuple[np.ndarray, np.ndarray]:
        """(t_min_isr_copies, t_all_copies) as float64 with inf for never."""
        if self._durability_base is None:
            stats = self.stats
            tld = self.tld
            t_min = tld if self.m_eff == 1 else np.maximum(stats[self.m_eff - 2], tld)
            t_all = np.maximum(stats[-1], tld) if self.f else tld
            pair = []
            for t in (t_min, t_all):
                tf = t.astype(np.float64)
                never = t == NEVER
                if never.any():
                    tf[never] = np.inf
                pair.append(tf)
            self._durability_base = (pair[0], pair[1])
        return self._durability_base


# ------------------------------------------------------------------------------------------------
# Policies
# ------------------------------------------------------------------------------------------------


def _finalize(ep: _Epoch, raw: np.ndarray, reject: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Apply timeout, leadership end, unreplayable rows and rejections to raw ack times."""
    outcome = np.zeros(ep.n, dtype=np.int8)
    t_ack = raw.copy()
    late = raw > ep.deadline
    if late.any():
        outcome[late] = Outcome.TIMEOUT
        t_ack[late] = ep.deadline[late]
    end = ep.inp.epoch_end
    if end != NEVER:
        lost = (end < raw) & (end < ep.deadline)
        if lost.any():
            outcome[lost] = Outcome.NOT_LEADER
            t_ack[lost] = np.maximum(end, ep.tld[lost])
    if not ep.all_appended:
        unknown = ~ep.inp.appended & (raw != ep.tld)
        outcome[unknown] = Outcome.UNREPLAYABLE
        t_ack[unknown] = ep.tld[unknown]
    if reject is not None and reject.any():
        outcome[reject] = Outcome.NOT_ENOUGH_REPLICAS
        t_ack[reject] = ep.tld[reject]
    return outcome, t_ack


def _durability(ep: _Epoch, policy: str, outcome: np.ndarray, t_ack: np.ndarray, isr: IsrTimeline) -> PolicyOutcome:
    acked = outcome == Outcome.ACKED
    all_acked = bool(acked.all())
    holds = [a <= t_ack for a in ep.arrivals]
    copies = np.ones(ep.n, dtype=np.int8)
    for h in holds:
        copies += h
    t_min, t_all = ep.durability_base()
    t_ack_f = t_ack.astype(np.float64)
    exposure = t_min - t_ack_f
    np.maximum(exposure, 0.0, out=exposure)
    full = t_all - t_ack_f
    np.maximum(full, 0.0, out=full)

    # Kafka's election: first follower in assignment order that is in the committed ISR at t_ack.
    if isr.change_times.size == 0:
        row = isr.membership[0]
        first = int(np.argmax(row)) if row.any() else -1
        loss_kafka = ~holds[first] if first >= 0 else np.ones(ep.n, dtype=bool)
        held = [holds[j] for j in range(ep.f) if row[j]]
        loss_longest = ~np.logical_or.reduce(held) if held else np.ones(ep.n, dtype=bool)
    else:
        members = isr.membership[isr.rows_at(t_ack)]
        loss_kafka = np.zeros(ep.n, dtype=bool)
        undecided = np.ones(ep.n, dtype=bool)
        any_holder = np.zeros(ep.n, dtype=bool)
        for j in range(ep.f):
            in_isr = members[:, j]
            loss_kafka |= undecided & in_isr & ~holds[j]
            undecided &= ~in_isr
            any_holder |= in_isr & holds[j]
        loss_kafka |= undecided
        loss_longest = ~any_holder

    if not all_acked:
        not_acked = ~acked
        copies[not_acked] = 0
        exposure[not_acked] = np.nan
        full[not_acked] = np.nan
        loss_kafka = loss_kafka & acked
        loss_longest = loss_longest & acked
    if not ep.all_appended:
        no_offset = ~ep.inp.appended
        exposure[no_offset] = np.nan
        full[no_offset] = np.nan
    return PolicyOutcome(
        policy=policy,
        outcome=outcome,
        t_ack=t_ack,
        copies_at_ack=copies,
        exposure_us=exposure,
        full_replication_us=full,
        loss_kafka_election=loss_kafka,
        loss_longest_log_election=loss_longest,
        isr=isr,
    )


def _reject_under_min_isr(ep: _Epoch, isr: IsrTimeline) -> np.ndarray | None:
    if ep.m_eff <= 1:
        return None
    if isr.change_times.size == 0:
        if 1 + int(isr.membership[0].sum()) < ep.m_eff:
            return np.ones(ep.n, dtype=bool)
        return None
    return isr.isr_size_at(ep.tld) < ep.m_eff


def _interval_acks(ep: _Epoch, intervals: list[_Interval], need_all: bool, strict: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Raw ack times from ISR intervals; ``need_all``: every counting member holds b (acks=all),
    else m_eff - 1 of them (min.insync). Returns (raw, completed-under-min-ISR flags or None)."""
    arrivals = ep.arrivals
    k_needed = ep.m_eff - 1

    def candidate(iv: _Interval, sel) -> np.ndarray | None:
        members = [arrivals[j][sel] for j in np.flatnonzero(iv.counting)]
        tld = ep.tld[sel]
        if need_all:
            if strict and iv.committed_size < ep.m_eff:
                return None  # HW frozen under min ISR
            need = np.maximum.reduce(members) if members else None
        else:
            if len(members) < k_needed:
                return None
            need = _kth_smallest(members, k_needed) if k_needed else None
        cand = tld if need is None else np.maximum(need, tld)
        if iv.start != _MIN:
            cand = np.maximum(cand, iv.start)
        return cand

    def under(iv: _Interval) -> bool:
        return need_all and not strict and 1 + int(iv.counting.sum()) < ep.m_eff

    if len(intervals) == 1:
        cand = candidate(intervals[0], slice(None))
        raw = np.full(ep.n, NEVER, dtype=_I64) if cand is None else cand
        if raw is ep.tld:
            raw = raw.copy()
        flag = np.ones(ep.n, dtype=bool) if under(intervals[0]) and cand is not None else None
        return raw, flag

    ep._ensure_order()
    raw = np.full(ep.n, NEVER, dtype=_I64)
    flag = np.zeros(ep.n, dtype=bool) if any(under(iv) for iv in intervals) else None
    for iv in intervals:
        lo = 0 if iv.start == _MIN else int(np.searchsorted(ep.tld_sorted, iv.start - ep.max_wait, side="left"))
        hi = ep.n if iv.end == NEVER else int(np.searchsorted(ep.tld_sorted, iv.end, side="left"))
        if lo >= hi:
            continue
        sel = slice(lo, hi) if ep.order is None else ep.order[lo:hi]
        cand = candidate(iv, sel)
        if cand is None:
            continue
        current = raw[sel]
        better = (cand < iv.end) & (cand < current)
        raw[sel] = np.where(better, cand, current)
        if flag is not None:
            flag[sel] = np.where(better, under(iv), flag[sel])
    return raw, flag


def _isr_policy(ep: _Epoch, policy: str, isr: IsrTimeline, need_all: bool, maximal: bool) -> PolicyOutcome:
    strict = ep.opt.strict_min_isr
    raw, under = _interval_acks(ep, ep.intervals(isr, maximal), need_all, strict)
    outcome, t_ack = _finalize(ep, raw, _reject_under_min_isr(ep, isr))
    if under is not None:
        late_error = under & (outcome == Outcome.ACKED)
        outcome[late_error] = Outcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return _durability(ep, policy, outcome, t_ack, isr)


def _quorum_policy(ep: _Epoch, q: int) -> PolicyOutcome:
    policy = f"quorum={q}"
    if q > ep.inp.replication_factor:
        outcome, t_ack = _finalize(ep, ep.tld.copy(), np.ones(ep.n, dtype=bool))
    elif q == 1:
        outcome, t_ack = _finalize(ep, ep.tld.copy(), None)
    else:
        outcome, t_ack = _finalize(ep, np.maximum(ep.stats[q - 2], ep.tld), None)
    return _durability(ep, policy, outcome, t_ack, ep.inp.isr)


def replay_epoch(inputs: EpochInputs, options: ReplayOptions | None = None) -> dict[str, PolicyOutcome]:
    """Replay every produce of one (partition, leader epoch) under every policy.

    Returns a dict keyed by policy id, in :func:`policy_ids` order: ``acks=1``, ``acks=all``,
    ``min.insync``, ``quorum=<Q>`` for each ``inputs.quorum_sizes``, and ``acks=all@lag=<ms>`` for each
    ``inputs.replica_lag_time_max_ms``. All arrays are aligned with the input produce rows.
    """
    options = options or ReplayOptions()
    ep = _Epoch(inputs, options)
    recorded = inputs.isr
    out: dict[str, PolicyOutcome] = {}
    outcome, t_ack = _finalize(ep, ep.tld.copy(), None)
    out["acks=1"] = _durability(ep, "acks=1", outcome, t_ack, recorded)
    out["acks=all"] = _isr_policy(ep, "acks=all", recorded, need_all=True, maximal=options.maximal_isr)
    out["min.insync"] = _isr_policy(ep, "min.insync", recorded, need_all=False, maximal=options.maximal_isr)
    for q in inputs.quorum_sizes:
        out.setdefault(f"quorum={q}", _quorum_policy(ep, q))
    for lag in inputs.replica_lag_time_max_ms:
        pid = lag_policy_id(lag)
        if pid in out:
            continue
        simulated = _simulate_isr(ep, lag)
        # With no commit delay the simulated expansion commits at its qualifying fetch already.
        maximal = options.maximal_isr and options.isr_commit_delay_us > 0
        out[pid] = _isr_policy(ep, pid, simulated, need_all=True, maximal=maximal)
    return out


# ------------------------------------------------------------------------------------------------
# ISR re-simulation
# ------------------------------------------------------------------------------------------------


class _RejoinScanner:
    """Finds, lazily and in chunks, the next FETCH of a follower that would re-add it to the ISR
    given which other followers are in the ISR (they hold the HW back)."""

    def __init__(self, ep: _Epoch) -> None:
        self.ep = ep
        self.cache: dict[tuple[int, int], list] = {}

    def next_index(self, j: int, others: int, i0: int) -> int:
        times = self.ep.inp.leo_times[j]
        n = times.size
        if i0 >= n:
            return n
        entry = self.cache.get((j, others))
        if entry is None or not (entry[0] <= i0 <= entry[1]):
            entry = [i0, i0, entry[2] if entry is not None else np.zeros(n, dtype=bool)]
            self.cache[(j, others)] = entry
        lo, hi, elig = entry
        if hi > i0:
            seg = elig[i0:hi]
            k = int(np.argmax(seg))
            if seg[k]:
                return i0 + k
        chunk = _CHUNK
        while hi < n:
            new_hi = min(n, hi + chunk)
            q = times[hi:new_hi]
            hw = self.ep.leader_at_events(j)[hi:new_hi].copy()
            for g in range(self.ep.f):
                if others >> g & 1:
                    np.minimum(hw, self.ep.follower_leo_at(g, q, NEVER), out=hw)
            seg = self.ep.cum[j][hi:new_hi] >= hw
            elig[hi:new_hi] = seg
            entry[1] = new_hi
            if seg.any():
                return hi + int(np.argmax(seg))
            hi = new_hi
            chunk *= 2
        return n


def _simulate_isr(ep: _Epoch, lag_ms: float, initial: np.ndarray | None = None) -> IsrTimeline:
    inp, opt = ep.inp, ep.opt
    f = ep.f
    lag_us = int(round(lag_ms * 1000))
    check_every = max(1, lag_us // 2)
    start = ep.start
    member = (inp.isr_membership[0] if initial is None else np.asarray(initial, dtype=bool)).copy()
    if member.shape != (f,):
        raise ValueError(f"initial membership must have shape ({f},)")
    if f == 0:
        return IsrTimeline(np.empty(0, _I64), member[None, :])

    # Horizon: nothing after the epoch end or after the last produce deadline / LEO event matters.
    last = [int(t[-1]) for t in inp.leo_times if t.size]
    if ep.n:
        last.append(int(ep.deadline.max()))
    horizon = max([start, *last])
    if inp.epoch_end != NEVER:
        horizon = min(horizon, inp.epoch_end)

    # isr-expiration checks at phase + j * lag/2 after start.
    phase = start if opt.isr_check_phase_us is None else int(opt.isr_check_phase_us)
    first = phase + ((start - phase) // check_every + 1) * check_every
    n_checks = 0 if first > horizon else (horizon - first) // check_every + 1
    if n_checks > _MAX_ISR_CHECKS:
        raise ValueError(f"{n_checks} isr-expiration checks for lag {lag_ms} ms: span too long for that lag")
    grid = first + check_every * np.arange(n_checks, dtype=_I64)
    leader_grid = ep.leader_leo_at(grid)

    # Out-of-sync at each check, per follower: ReplicaState.isCaughtUp is false.
    next_out: list[np.ndarray] = []
    for j in range(f):
        init_lcu = start if member[j] else 0  # Partition.makeLeader -> resetReplicaState
        times = inp.leo_times[j]
        if times.size:
            idx = np.searchsorted(times, grid, side="right") - 1
            seen = idx >= 0
            idx0 = np.maximum(idx, 0)
            lcu = np.where(seen, np.maximum(ep.lcu_at_events(j)[idx0], init_lcu), init_lcu)
            leo = np.where(seen, ep.cum[j][idx0], -1)
        else:
            lcu = np.full(n_checks, init_lcu, dtype=_I64)
            leo = np.full(n_checks, -1, dtype=_I64)
        out_of_sync = (leo < leader_grid) & (grid - lcu > lag_us)
        next_out.append(_next_true(out_of_sync))

    scanner = _RejoinScanner(ep)
    delay = int(opt.isr_commit_delay_us)
    ready = [_MIN] * f  # a removed follower can be re-added by a FETCH after the removal commits
    now = start
    change_times: list[int] = []
    rows: list[np.ndarray] = [member.copy()]
    while True:
        best_t, best_j = NEVER, -1
        for j in range(f):
            if member[j]:
                k = int(next_out[j][int(np.searchsorted(grid, now, side="left"))])
                t = int(grid[k]) if k < n_checks else NEVER
            else:
                times = inp.leo_times[j]
                i0 = int(np.searchsorted(times, max(now, ready[j]), side="right"))
                others = sum(1 << g for g in range(f) if g != j and member[g])
                i = scanner.next_index(j, others, i0)
                t = int(times[i]) if i < times.size else NEVER
            if t < best_t:
                best_t, best_j = t, j
        if best_j < 0 or best_t > horizon:
            break
        member[best_j] = not member[best_j]
        now = best_t
        if not member[best_j]:
            ready[best_j] = best_t + delay
        change_times.append(best_t + delay)
        rows.append(member.copy())
    return IsrTimeline(np.array(change_times, dtype=_I64), np.array(rows, dtype=bool).reshape(-1, f)).normalized()


def simulate_isr(
    inputs: EpochInputs,
    lag_ms: float,
    options: ReplayOptions | None = None,
    initial_membership: np.ndarray | None = None,
) -> IsrTimeline:
    """Re-simulate the committed ISR for ``replica.lag.time.max.ms = lag_ms`` from the LEO events.

    Model (kafka-reference §3.1-3.2), starting at ``inputs.epoch_start`` with the recorded ISR
    (``isr_membership[0]``, or ``initial_membership``):

    * lastCaughtUpTimeMs per follower is updated at each of its FETCHes by the Replica rule, with
      the leader LEO at the fetch derived from the produces (:meth:`_Epoch.leader_steps`) and never
      below the follower's own fetchOffset; it starts at ``epoch_start`` for ISR members, 0 else.
    * The isr-expiration task runs every ``lag_ms / 2`` from ``options.isr_check_phase_us``
      (default ``epoch_start``) and removes each ISR member with ``LEO < leader LEO`` and
      ``now - lastCaughtUp > lag``.
    * A non-member is re-added at its first FETCH (after its removal committed) with
      ``fetchOffset >= HW``, HW estimated as min(leader LEO, LEO of the other current members).
    * Changes commit ``options.isr_commit_delay_us`` after the proposal.

    Returns the committed timeline (same shape as the recorded one).
    """
    return _simulate_isr(_Epoch(inputs, options or ReplayOptions()), lag_ms, initial_membership)


# ------------------------------------------------------------------------------------------------
# Output helpers
# ------------------------------------------------------------------------------------------------


def to_columns(results: Mapping[str, PolicyOutcome] | Iterable[PolicyOutcome]) -> dict[str, np.ndarray]:
    """Long format for a DataFrame: one row per (policy, produce), produces in input order.

    Columns: ``policy`` (object), ``produce_index`` (int64, the input row), and the
    :class:`PolicyOutcome` arrays.
    """
    outcomes = list(results.values()) if isinstance(results, Mapping) else list(results)
    if not outcomes:
        return {"policy": np.empty(0, dtype=object), "produce_index": np.empty(0, dtype=_I64)}
    n = outcomes[0].outcome.size
    policy = np.empty(n * len(outcomes), dtype=object)
    for i, o in enumerate(outcomes):
        policy[i * n : (i + 1) * n] = o.policy
    cols: dict[str, np.ndarray] = {
        "policy": policy,
        "produce_index": np.tile(np.arange(n, dtype=_I64), len(outcomes)),
    }
    for name in _OUTCOME_COLUMNS:
        cols[name] = np.concatenate([getattr(o, name) for o in outcomes])
    return cols
