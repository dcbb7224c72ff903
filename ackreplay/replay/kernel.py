"""Replay kernel: every produce of one (partition, leader epoch) under every ack policy, in one pass.

Plain NumPy, vectorised over produces (Python loops only over followers, ISR intervals, policies and
ISR state changes). The Spark side (bucketing, pandas UDF) builds one :class:`EpochInputs` per group,
calls :func:`replay_epoch` and turns the result into rows with :func:`to_columns`.

Semantics: the design doc ``design.md`` ("Replay semantics", "Durability risk") and
``kafka-reference.md`` §2, §3, §6 and "Implications for an offline replay". Summary, for a batch ``b`` (its base offset):

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
* ``quorum=<Q>`` (KIP-250): the (Q-1)-th smallest ``T_f(b)`` over all assigned followers, for
  1 < Q < RF as KIP-250 requires; on a partition with RF <= Q every produce is UNREPLAYABLE.
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
follower in assignment order that is in the committed ISR at ``t_ack`` does not hold b;
``loss_longest_log_election`` (KIP-250's election of the live replica with the largest LEO, in the ISR
or not): no live follower holds b at ``t_ack``, where a follower the controller removed from the ISR
(controlled shutdown, fenced) is not live until it fetches again; nobody is elected when no follower
is live (not a loss). "Holds"
there is ``A_f(b) <= t_ack``: the leader knew (the most a failure can lose). The ``_min`` flags count
a follower as holding b from ``S_f(b)``, when the leader can first have sent it b: the FETCH before
the one that reported past b carried it (a follower has one FETCH in flight per leader), at the
earliest when b was appended (``max(T_prev, t_local_done)``); after the follower's last FETCH only the
first batch appended after it (a waiting FETCH is answered at the first append, ``DelayedFetch``).
The least a failure can lose; the truth lies between (README, "Loss as a range"). With no follower
in the committed ISR at ``t_ack`` a leader failure leaves the partition without an electable leader
under Kafka's election (``PartitionChangeBuilder.electAnyLeader``: the first live ISR member in
assignment order, else ``NO_LEADER`` with unclean election off): ``offline_at_failure``, and not a loss
under it (the old leader keeps its log and leads again when it returns). Where the cluster keeps eligible
leader replicas (KIP-966, ``EpochInputs.elr_membership``) Kafka elects the first live one in assignment
order instead, and the batch is lost when it does not hold it.

Produces that the broker did not append (``appended`` false, e.g. error 19) have no offset. They get
a policy's rejection when it applies and ``acks=1`` (or any ack that needs no follower) as usual;
where the outcome would depend on follower replication it is UNREPLAYABLE.

Times are int64 microseconds since the Unix epoch; ``NEVER`` (int64 max) means "not within the data"
in internal arrays and never appears in ``PolicyOutcome.t_ack``.

Notes for the caller (the Spark wrapper):

* One call per (partition, leader epoch) or per time bucket of one. A bucket must carry the LEO
  events and ISR changes from before its first produce that matter (ISR row 0 = membership at the
  start of the data; for ``acks=all@lag`` set ``epoch_start`` to where the data starts) and up to
  its last produce's deadline; only the bucket's own produces should be kept from the result.
* A PRODUCE request completes when all its partitions do: the client-visible outcome of a request
  is the latest ``t_ack`` / worst outcome over its partitions (the recorded ``t_ack_observed`` is
  per request, so compare with that aggregate).
* ``to_columns`` gives the long (policy, produce) format without copying the per-policy blocks.
* Cost is dominated by two binary searches per follower and by page faults on fresh output
  memory; keeping freed memory in the Python worker (``MALLOC_TRIM_THRESHOLD_`` /
  ``MALLOC_MMAP_THRESHOLD_``) roughly halves the time of a call on a fresh heap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

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
    """Rejected before the append (error 19) at ``t_local_done``."""
    TIMEOUT = 2
    """No ack within the request's ``timeoutMs`` (error 7); ``t_ack = t_local_done + timeout``."""
    NOT_LEADER = 3
    """Leadership ended while waiting (error 6); ``t_ack`` = epoch end."""
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 4
    """``acks=all`` with ``strict_min_isr=False`` only (Kafka <= 3.6): the HW passed the batch while
    the maximal ISR was below min ISR (error 20); ``t_ack`` is that completion time."""
    UNREPLAYABLE = 5
    """The recorded append failed (no offset) and this policy's outcome would depend on follower
    replication of that batch, which the trace cannot tell; or the policy is no setting of the
    partition (``quorum=<Q>`` with Q >= RF, outside KIP-250's 1 < Q < replicas); ``t_ack = t_local_done``."""


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
    isr_change_by_controller: np.ndarray | None = None
    """bool (K,): the change at ``isr_change_times[k]`` was the controller's alone, not a shrink the
    leader proposed (a controlled shutdown or a fenced broker: state-change.log only). Only
    :func:`simulate_isr` uses it. None: no such change."""
    leader_silences: np.ndarray | None = None
    """int64 (S, 2), sorted: spans in which the leader did not run (a stopped JVM, a long GC pause), from
    its last request line before to its first isr-expiration check after. Only :func:`simulate_isr`
    uses it. None: none."""
    elr_membership: np.ndarray | None = None
    """bool (K+1, F), rows as ``isr_membership``: the followers that were eligible leader replicas (KIP-966)
    while each committed ISR held. None: the cluster does not keep them (before Kafka 4.1, or the
    ``eligible.leader.replicas.version`` feature off); Kafka's election then has nobody to elect when the
    ISR is the leader alone. A re-simulated ISR (``acks=all@lag``) gets them derived from row 0 on
    (:func:`next_eligible_leader_replicas`)."""

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
        by_controller = np.zeros(isr.change_times.size, dtype=bool)
        if self.isr_change_by_controller is not None:
            by_controller = np.ascontiguousarray(self.isr_change_by_controller, dtype=bool)
            if by_controller.shape != isr.change_times.shape:
                raise ValueError(f"isr_change_by_controller must have shape {isr.change_times.shape}")
        object.__setattr__(self, "isr_change_by_controller", by_controller)
        silences = np.empty((0, 2), _I64)
        if self.leader_silences is not None:
            silences = np.ascontiguousarray(self.leader_silences, dtype=_I64).reshape(-1, 2)
            if np.any(silences[:, 1] <= silences[:, 0]) or not _is_sorted(silences[:, 0]):
                raise ValueError("leader_silences must be sorted (start, end) spans with end > start")
        object.__setattr__(self, "leader_silences", silences)
        if self.elr_membership is not None:
            elr = np.ascontiguousarray(self.elr_membership, dtype=bool)
            if elr.shape != isr.membership.shape:
                raise ValueError(f"elr_membership must have shape {isr.membership.shape}, got {elr.shape}")
            object.__setattr__(self, "elr_membership", elr)

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
    isr_expand_window_us: int = 200_000
    """maximal_isr: the qualifying FETCH is looked for only this long before the commit of the
    expansion (an AlterPartition round trip). A follower can reach the HW long before it is
    re-added when it is not eligible (fenced, shutting down), and must not count then."""
    isr_check_phase_us: int | None = None
    """simulate_isr: a time at which the isr-expiration task runs (None: ``epoch_start``)."""
    isr_commit_delay_us: int = 0
    """simulate_isr: delay between an ISR change proposal and its commit (AlterPartition)."""
    isr_commit_delays: tuple[np.ndarray, np.ndarray] | None = None
    """simulate_isr: (proposal times, sorted; their commit delays), µs, as the leader's logs show them:
    a change proposed at t commits after the delay of the logged proposal nearest to t (the
    AlterPartition round trip of that time). None: ``isr_commit_delay_us``."""


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
    """bool (N,): ... under KIP-250's election of the live replica with the longest log."""
    loss_kafka_election_min: np.ndarray
    """bool (N,): ``loss_kafka_election`` with a follower holding b from when b was sent to it."""
    loss_longest_log_election_min: np.ndarray
    """bool (N,): ``loss_longest_log_election`` likewise."""
    offline_at_failure: np.ndarray
    """bool (N,): acked while no follower was in the committed ISR and none of the eligible leader replicas
    was live: a leader failure at ``t_ack`` leaves the partition offline (no loss flag set)."""
    loss_window_kafka_us: np.ndarray
    """float64 (N,): how long after ``t_ack``, in all, a leader failure would have lost the batch under Kafka's
    election (the first ISR member, per interval of the policy's committed ISR, did not hold it yet), until
    the leadership ends; 0: never losable; inf: losable until the end of the data; NaN as ``exposure_us``."""
    loss_window_kafka_min_us: np.ndarray
    """float64 (N,): ``loss_window_kafka_us`` with a follower holding b from when b was sent to it."""
    loss_window_longest_us: np.ndarray
    """float64 (N,): the same under the longest-log election: until a follower live at ``t_ack`` held it
    (liveness as at ``t_ack``); 0 when none was live."""
    loss_window_longest_min_us: np.ndarray
    """float64 (N,): ``loss_window_longest_us`` with a follower holding b from when b was sent to it."""
    isr: IsrTimeline = field(repr=False)
    """The committed ISR used (recorded, or simulated for ``acks=all@lag=...``)."""

    def as_dict(self) -> dict[str, np.ndarray]:
        """The per-produce arrays by name."""
        return {name: getattr(self, name) for name in _OUTCOME_COLUMNS}


LOSS_WINDOWS = ("loss_window_kafka_us", "loss_window_kafka_min_us", "loss_window_longest_us", "loss_window_longest_min_us")
"""The loss-window arrays of a :class:`PolicyOutcome`."""

_OUTCOME_COLUMNS = (
    "outcome",
    "t_ack",
    "copies_at_ack",
    "exposure_us",
    "full_replication_us",
    "loss_kafka_election",
    "loss_longest_log_election",
    "loss_kafka_election_min",
    "loss_longest_log_election_min",
    "offline_at_failure",
    *LOSS_WINDOWS,
)


def lag_policy_id(lag_ms: float) -> str:
    """Policy id of ``acks=all`` with a re-simulated ISR, e.g. ``acks=all@lag=5000``."""
    lag_ms = float(lag_ms)
    return f"acks=all@lag={int(lag_ms) if lag_ms.is_integer() else repr(lag_ms)}"


def policy_ids(inputs: EpochInputs) -> list[str]:
    """The policy ids :func:`replay_epoch` returns for these inputs, in its order."""
    ids = ["acks=1", "acks=all", "min.insync"]
    ids += [f"quorum={q}" for q in inputs.quorum_sizes]
    ids += [lag_policy_id(x) for x in inputs.replica_lag_time_max_ms]
    return list(dict.fromkeys(ids))


def next_eligible_leader_replicas(
    previous_elr: np.ndarray, previous_isr: np.ndarray, isr: np.ndarray, isr_size: int, min_insync_replicas: int
) -> np.ndarray:
    """The eligible leader replicas (KIP-966) after an ISR change, as bool masks over the same replicas.

    `PartitionChangeBuilder.maybePopulateTargetElr`: with the new ISR at or above `min.insync.replicas` there
    are none; below it, the previous ELR and ISR members that are not in the new ISR (replicas that left the
    ISR while it was below min ISR hold everything up to the HW, which does not advance there). Kafka also
    drops a broker that re-registered after an unclean shutdown, which the logs read here do not show.
    `isr_size` counts the whole new ISR (a leader that `isr` leaves implicit included).
    """
    if isr_size >= min_insync_replicas:
        return np.zeros_like(isr)
    return (previous_elr | previous_isr) & ~isr


def _derived_elr(isr: IsrTimeline, start: np.ndarray, min_insync_replicas: int) -> np.ndarray:
    """Eligible leader replicas along a (re-simulated) ISR timeline, from `start` at row 0."""
    rows = np.empty_like(isr.membership)
    rows[0] = start
    for k in range(1, rows.shape[0]):
        member = isr.membership[k]
        rows[k] = next_eligible_leader_replicas(
            rows[k - 1], isr.membership[k - 1], member, 1 + int(member.sum()), min_insync_replicas
        )
    return rows


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


def _kth_smallest(arrays: list[np.ndarray], k: int, out: np.ndarray) -> np.ndarray:
    """k-th smallest (1-based) elementwise over ``arrays`` (1 <= k <= len(arrays)), into ``out``."""
    if len(arrays) == 1:
        np.copyto(out, arrays[0])
    elif k == 1 or k == len(arrays):
        op = np.minimum if k == 1 else np.maximum
        op(arrays[0], arrays[1], out=out)
        for arr in arrays[2:]:
            op(out, arr, out=out)
    else:
        np.copyto(out, _sorted_stats(arrays)[k - 1])
    return out


def _value_at(times: np.ndarray, values: np.ndarray, q, before) -> np.ndarray:
    """Step function: value of the last event with time <= q (``before`` if none)."""
    idx = np.searchsorted(times, q, side="right")
    ext = np.empty(values.size + 1, dtype=values.dtype)
    ext[0] = before
    ext[1:] = values
    return ext.take(idx)


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
        self.cum = [np.maximum.accumulate(o) if o.size else o for o in inp.leo_offsets]
        self._deadline: np.ndarray | None = None
        self._arrivals: list[np.ndarray] | None = None
        self._sent: list[np.ndarray] | None = None
        self._offset_rank: dict[int, np.ndarray] = {}  # per follower: its first LEO event above each batch
        self._stats: list[np.ndarray] | None = None
        self._by_offset: np.ndarray | None | bool = False  # False: not computed yet
        self._by_time: np.ndarray | None | bool = False
        self._leader_steps: tuple[np.ndarray, np.ndarray, int] | None = None
        self._durability_base: tuple[np.ndarray, np.ndarray] | None = None
        self._start: int | None = None
        self._intervals: dict[tuple[int, bool], tuple[IsrTimeline, list[_Interval]]] = {}
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
            self._deadline = self.tld + self.inp.timeout_us
        return self._deadline

    # -- produce orders --------------------------------------------------------------------------

    @property
    def by_offset(self) -> np.ndarray | None:
        """Permutation sorting the produces by base offset (None: already sorted)."""
        if self._by_offset is False:
            self._by_offset = self._sorting(self.inp.base_offset, self._by_time)
        return self._by_offset

    @property
    def by_time(self) -> np.ndarray | None:
        """Permutation sorting the produces by t_local_done (None: already sorted)."""
        if self._by_time is False:
            self._by_time = self._sorting(self.tld, self._by_offset)
        return self._by_time

    @staticmethod
    def _sorting(values: np.ndarray, other: np.ndarray | None | bool) -> np.ndarray | None:
        """A permutation sorting ``values``; offset and time order mostly agree, so the other
        order, when already known, is tried first."""
        if _is_sorted(values):
            return None
        if isinstance(other, np.ndarray) and _is_sorted(values[other]):
            return other
        return np.argsort(values)

    # -- arrivals -----------------------------------------------------------------------------

    @property
    def arrivals(self) -> list[np.ndarray]:
        """A_f(b) per follower (int64, NEVER if never; NEVER for produces not appended)."""
        if self._arrivals is None:
            perm = self.by_offset
            b = self.inp.base_offset if perm is None else self.inp.base_offset[perm]
            self._arrivals = [self._arrival(j, b, perm) for j in range(self.f)]
        return self._arrivals

    def _arrival(self, j: int, b: np.ndarray, perm: np.ndarray | None) -> np.ndarray:
        times = self.inp.leo_times[j]
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
            arrival[~self.inp.appended] = NEVER
        return arrival

    @property
    def sent(self) -> list[np.ndarray]:
        """S_f(b) per follower (int64, NEVER if never; NEVER for produces not appended)."""
        if self._sent is None:
            perm = self.by_offset
            b = self.inp.base_offset if perm is None else self.inp.base_offset[perm]
            tld = self.tld if perm is None else self.tld[perm]
            self._sent = [self._sent_at(j, b, tld, perm) for j in range(self.f)]
        return self._sent

    def _rank(self, j: int, b: np.ndarray) -> np.ndarray:
        """Index of follower j's first LEO event above each batch of `b` (offset-sorted base offsets)."""
        if j not in self._offset_rank:
            # Searching offset-sorted batches keeps the binary searches cache-friendly (10x faster).
            self._offset_rank[j] = np.searchsorted(self.cum[j], b, side="right")
        return self._offset_rank[j]

    def _sent_at(self, j: int, b: np.ndarray, tld: np.ndarray, perm: np.ndarray | None) -> np.ndarray:
        times = self.inp.leo_times[j]
        if times.size == 0:
            return np.full(self.n, NEVER, dtype=_I64)
        idx = self._rank(j, b)
        previous = np.empty(times.size + 1, dtype=_I64)
        previous[0] = _MIN  # held before the first FETCH of the data: sent when appended
        previous[1:] = times
        sent = np.maximum(previous.take(idx), tld)
        unreported = idx == times.size
        if unreported.any():
            # the last FETCH waited for the first batch appended after it, at most
            later = tld > times[-1]
            if not self.all_appended:
                later &= self.inp.appended if perm is None else self.inp.appended[perm]
            first = tld[later].min() if later.any() else NEVER
            sent[unreported & (tld > first)] = NEVER
        out = sent if perm is None else np.empty(self.n, dtype=_I64)
        if perm is not None:
            out[perm] = sent
        if not self.all_appended:
            out[~self.inp.appended] = NEVER
        return out

    @property
    def stats(self) -> list[np.ndarray]:
        """Order statistics of A_f over all followers: stats[i] = (i+1)-th smallest."""
        if self._stats is None:
            self._stats = _sorted_stats(self.arrivals)
        return self._stats

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
            perm = self.by_offset
            bs = inp.base_offset if perm is None else inp.base_offset[perm]
            keep = None
            if not self.all_appended:
                keep = inp.appended if perm is None else inp.appended[perm]
                bs = bs[keep]
            if bs.size == 0:
                self._leader_steps = (np.empty(0, _I64), np.empty(0, _I64), max_follower)
                return self._leader_steps
            ends_sorted = np.empty_like(bs)
            ends_sorted[:-1] = bs[1:]
            ends_sorted[-1] = max(int(bs[-1]) + 1, max_follower)
            np.maximum(ends_sorted, bs + 1, out=ends_sorted)
            if keep is None:
                ends_o = ends_sorted  # offset order, all rows
            else:  # rows not appended do not move the LEO
                ends_o = np.full(self.n, bs[0], dtype=_I64)
                ends_o[keep] = ends_sorted
            order = self.by_time
            if order is perm:  # time order = offset order (the usual case): no reshuffle
                times = self.tld if perm is None else self.tld[perm]
                values = np.maximum.accumulate(ends_o)
            else:
                if perm is None:
                    ends = ends_o
                else:
                    ends = np.empty(self.n, dtype=_I64)
                    ends[perm] = ends_o
                times = self.tld if order is None else self.tld[order]
                values = np.maximum.accumulate(ends if order is None else ends[order])
            self._leader_steps = (times, values, int(bs[0]))
        return self._leader_steps

    @cached_property
    def first_append(self) -> int:
        """When the first appended produce handed to the kernel was appended (``NEVER``: none)."""
        appended = self.tld if self.all_appended else self.tld[self.inp.appended]
        return int(appended.min()) if appended.size else NEVER

    @cached_property
    def down_spans(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per follower: sorted spans [start, end) in which it was no live replica to elect. The controller
        removes a broker that starts a controlled shutdown or is fenced from every ISR at once
        (`ReplicationControlManager.handleBrokerInControlledShutdown` / `handleBrokerFenced`: a change
        `isr_change_by_controller` marks), and an election considers only active brokers
        (`PartitionChangeBuilder.isAcceptableLeader`); the broker is running again once it fetches (its
        first LEO event after the removal, NEVER if none)."""
        inp = self.inp
        removed = inp.isr_change_by_controller & inp.isr_membership[:-1].T & ~inp.isr_membership[1:].T  # (F, K)
        spans = []
        for j in range(self.f):
            starts = inp.isr_change_times[removed[j]]
            if starts.size == 0:
                spans.append((starts, starts))
                continue
            fetches = inp.leo_times[j]
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
        return _value_at(times, values, q, before)

    def follower_leo_at(self, j: int, q, unknown: int) -> np.ndarray:
        """LEO of follower j (cumulative max) at times q; ``unknown`` before its first event."""
        return _value_at(self.inp.leo_times[j], self.cum[j], q, unknown)

    def caught_up(self, j: int, idx: np.ndarray, with_previous: np.ndarray) -> np.ndarray:
        """Whether FETCH ``idx`` of follower j moves its lastCaughtUpTimeMs (Replica rule).

        True when fetchOffset >= leader LEO at this fetch (lastCaughtUp := this fetch time), or,
        where ``with_previous``, fetchOffset >= leader LEO at the previous fetch
        (lastCaughtUp := previous fetch time; the caller decides whether that time is recent).
        """
        times, leo = self.inp.leo_times[j], self.cum[j]
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

    def intervals(self, isr: IsrTimeline, maximal: bool) -> list[_Interval]:
        """ISR intervals with the followers that hold the HW back and the committed ISR size."""
        key = (id(isr), maximal)
        if key not in self._intervals:
            self._intervals[key] = (isr, self._compute_intervals(isr, maximal))
        return self._intervals[key][1]

    def _compute_intervals(self, isr: IsrTimeline, maximal: bool) -> list[_Interval]:
        isr = isr.normalized()
        times, members = isr.change_times, isr.membership
        extra: list[tuple[int, int, int]] = []  # (follower, from, until): pending expansion
        if maximal and times.size:
            for j in range(self.f):
                left = None if members[0, j] else _MIN
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
        out: list[_Interval] = []
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
        """First FETCH of follower j after it left the ISR (at ``left``), at most
        ``isr_expand_window_us`` before the commit of its re-add and up to that commit, whose
        fetchOffset reaches the (estimated) HW; ``commit`` if none does."""
        times = self.inp.leo_times[j]
        since = commit - max(0, int(self.opt.isr_expand_window_us))
        if left not in (None, _MIN):
            since = max(since, left)
        lo = int(np.searchsorted(times, since, side="right"))
        hi = int(np.searchsorted(times, commit, side="right"))
        if lo >= hi:
            return commit
        q = times[lo:hi]
        ok = self.cum[j][lo:hi] >= self._hw_estimate(j, q, isr)
        return int(q[int(np.argmax(ok))]) if ok.any() else commit

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
                reject = isr.isr_size_at(self.tld) < self.m_eff
                if not reject.any():
                    reject = None
            self._rejections[key] = (isr, reject)
        return self._rejections[key][1]

    # -- durability ------------------------------------------------------------------------------

    def durability_base(self) -> tuple[np.ndarray, np.ndarray]:
        """(t_min_isr_copies, t_all_copies) as float64 with inf for never."""
        if self._durability_base is None:
            stats, tld = self.stats, self.tld
            pair = []
            for t in (stats[self.m_eff - 2] if self.m_eff > 1 else None, stats[-1] if self.f else None):
                if t is None:
                    pair.append(tld.astype(np.float64))
                    continue
                tf = np.maximum(t, tld).astype(np.float64)
                never = np.equal(t, NEVER, out=self.scratch)
                if never.any():
                    tf[never] = np.inf
                pair.append(tf)
            self._durability_base = (pair[0], pair[1])
        return self._durability_base


# ------------------------------------------------------------------------------------------------
# Policies
# ------------------------------------------------------------------------------------------------


class _Outputs:
    """One (policies, produces) block per output column; each policy fills its row. One large
    allocation per column faults in faster than many, and to_columns flattens it without a copy."""

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
        return {name: getattr(self, name)[i] for name in _OUTCOME_COLUMNS}


def _finalize(ep: _Epoch, t_ack: np.ndarray, outcome: np.ndarray, reject: np.ndarray | None) -> None:
    """Turn raw ack times (in ``t_ack``, updated in place) into outcomes (into ``outcome``, zero on
    entry). Precedence: rejection at append, unreplayable (no offset and the raw ack is not
    t_local_done), leadership end before both the ack and the deadline, timeout."""
    deadline = ep.deadline
    unknown = None
    if not ep.all_appended:
        unknown = ~ep.inp.appended & (t_ack != ep.tld)
    late = np.greater(t_ack, deadline, out=ep.scratch)
    end = ep.inp.epoch_end
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
        t_ack[lost] = np.maximum(end, ep.tld[lost])
    if unknown is not None:
        outcome[unknown] = Outcome.UNREPLAYABLE
        t_ack[unknown] = ep.tld[unknown]
    if reject is not None:
        outcome[reject] = Outcome.NOT_ENOUGH_REPLICAS
        t_ack[reject] = ep.tld[reject]


def _durability(ep: _Epoch, row: dict[str, np.ndarray], isr: IsrTimeline, elr: np.ndarray | None) -> None:
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
            kafka |= pick & ~has
    if by_elr:
        np.copyto(offline, no_leader)
    end = ep.inp.epoch_end
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
        for name in ("loss_kafka_election", "loss_longest_log_election", "loss_kafka_election_min",
                     "loss_longest_log_election_min", "offline_at_failure"):
            row[name][not_acked] = False
        for name in LOSS_WINDOWS:
            row[name][not_acked] = np.nan
    if not ep.all_appended:
        no_offset = ~ep.inp.appended
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
    t_ack: np.ndarray, isr: IsrTimeline, held_from: list[np.ndarray], end: int, out: np.ndarray,
    elr: np.ndarray | None = None, live: list | None = None,
) -> None:
    """Fill `out` with the time after `t_ack` during which Kafka's election would have lost each batch: per
    interval of the committed ISR (until the leadership ends), from its start (or the ack) until its first
    member in assignment order held the batch (`held_from`). In an interval without a follower in the ISR
    the first eligible leader replica (`elr`) live at the ack (`live`) is elected; with none, nobody
    (offline, not a loss)."""
    out[:] = 0.0
    bounds = [_MIN, *isr.change_times.tolist(), NEVER]
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


def _loss_flags(in_isr: list, live: list, holds: list[np.ndarray], loss_kafka: np.ndarray, loss_longest: np.ndarray,
                offline: np.ndarray) -> None:
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


def _interval_acks(ep: _Epoch, intervals: list[_Interval], need_all: bool, strict: bool, raw: np.ndarray) -> np.ndarray | None:
    """Raw ack times (into ``raw``) from ISR intervals; ``need_all``: every counting member holds b
    (acks=all), else m_eff - 1 of them (min.insync). Returns completed-under-min-ISR flags or None."""
    arrivals = ep.arrivals
    k_needed = ep.m_eff - 1

    def candidate(iv: _Interval, sel, out: np.ndarray) -> bool:
        """out := max(interval start, t_local_done, time the needed members hold b); False when
        the interval cannot acknowledge anything."""
        members = [arrivals[j] if sel is None else arrivals[j][sel] for j in np.flatnonzero(iv.counting)]
        tld = ep.tld if sel is None else ep.tld[sel]
        if need_all:
            if strict and iv.committed_size < ep.m_eff:
                return False  # Kafka >= 3.7: HW frozen while the ISR is under min ISR
            k = len(members)
        else:
            if len(members) < k_needed:
                return False
            k = k_needed
        if k == 0:
            np.copyto(out, tld)
        else:
            _kth_smallest(members, k, out)
            np.maximum(out, tld, out=out)
        if iv.start != _MIN:
            np.maximum(out, iv.start, out=out)
        return True

    def under(iv: _Interval) -> bool:
        return need_all and not strict and 1 + int(iv.counting.sum()) < ep.m_eff

    if len(intervals) == 1:
        if not candidate(intervals[0], None, raw):
            raw.fill(NEVER)
            return None
        return np.ones(ep.n, dtype=bool) if under(intervals[0]) else None

    order = ep.by_time
    tld_sorted = ep.tld if order is None else ep.tld[order]
    max_wait = int(max(0, ep.inp.timeout_us.max())) if ep.n else 0
    raw.fill(NEVER)
    flag = np.zeros(ep.n, dtype=bool) if any(under(iv) for iv in intervals) else None
    for iv in intervals:
        # Only produces whose wait can overlap the interval: t_local_done in [start - max wait, end).
        lo = 0 if iv.start == _MIN else int(np.searchsorted(tld_sorted, iv.start - max_wait, side="left"))
        hi = ep.n if iv.end == NEVER else int(np.searchsorted(tld_sorted, iv.end, side="left"))
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
    ep: _Epoch, row: dict[str, np.ndarray], isr: IsrTimeline, elr: np.ndarray | None, need_all: bool, maximal: bool
) -> None:
    t_ack, outcome = row["t_ack"], row["outcome"]
    under = _interval_acks(ep, ep.intervals(isr, maximal), need_all, ep.opt.strict_min_isr, t_ack)
    _finalize(ep, t_ack, outcome, ep.rejected_under_min_isr(isr))
    if under is not None:
        outcome[under & (outcome == Outcome.ACKED)] = Outcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    _durability(ep, row, isr, elr)


def _quorum_policy(ep: _Epoch, row: dict[str, np.ndarray], q: int, isr: IsrTimeline, elr: np.ndarray | None) -> None:
    t_ack = row["t_ack"]
    if 1 < q < ep.inp.replication_factor:
        np.maximum(ep.stats[q - 2], ep.tld, out=t_ack)
        _finalize(ep, t_ack, row["outcome"], None)
    else:
        # KIP-250 defines quorum.required.acks only for 1 < Q < replicas (Q = replicas waits for every
        # replica, in the ISR or not; Q = 1 is acks=1): no such setting exists for this partition.
        np.copyto(t_ack, ep.tld)
        row["outcome"][:] = Outcome.UNREPLAYABLE
    _durability(ep, row, isr, elr)


def replay_epoch(inputs: EpochInputs, options: ReplayOptions | None = None) -> dict[str, PolicyOutcome]:
    """Replay every produce of one (partition, leader epoch) under every policy.

    Returns a dict keyed by policy id, in :func:`policy_ids` order: ``acks=1``, ``acks=all``,
    ``min.insync``, ``quorum=<Q>`` for each ``inputs.quorum_sizes``, and ``acks=all@lag=<ms>`` for each
    ``inputs.replica_lag_time_max_ms``. All arrays are aligned with the input produce rows; the
    arrays of all policies are rows of one block per column (see :func:`to_columns`).
    """
    options = options or ReplayOptions()
    ep = _Epoch(inputs, options)
    policies = policy_ids(inputs)
    out = _Outputs(policies, ep.n)
    recorded = inputs.isr
    used: dict[str, IsrTimeline] = {}
    for pid in policies:
        row = out.row(pid)
        isr, elr = recorded, inputs.elr_membership
        if pid == "acks=1":
            np.copyto(row["t_ack"], ep.tld)
            _finalize(ep, row["t_ack"], row["outcome"], None)
            _durability(ep, row, isr, elr)
        elif pid == "acks=all":
            _isr_policy(ep, row, isr, elr, need_all=True, maximal=options.maximal_isr)
        elif pid == "min.insync":
            _isr_policy(ep, row, isr, elr, need_all=False, maximal=options.maximal_isr)
        elif pid.startswith("quorum="):
            _quorum_policy(ep, row, int(pid.split("=", 1)[1]), isr, elr)
        else:
            lag = next(x for x in inputs.replica_lag_time_max_ms if lag_policy_id(x) == pid)
            isr = _simulate_isr(ep, lag)
            if elr is not None:
                elr = _derived_elr(isr, elr[0], inputs.min_insync_replicas)
            # Without a commit delay a simulated expansion commits at its qualifying fetch already.
            logged = options.isr_commit_delays is not None and np.size(options.isr_commit_delays[0]) > 0
            maximal = options.maximal_isr and (options.isr_commit_delay_us > 0 or logged)
            _isr_policy(ep, row, isr, elr, need_all=True, maximal=maximal)
        used[pid] = isr
    return {pid: PolicyOutcome(policy=pid, isr=used[pid], **out.row(pid)) for pid in policies}


# ------------------------------------------------------------------------------------------------
# ISR re-simulation
# ------------------------------------------------------------------------------------------------

_PROBE = 8  # FETCHes probed at the start of each lag window before scanning the whole window


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
            seg = self.ep.cum[j][hi:new_hi] >= hw
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
    _Epoch.caught_up), so only window FETCHes matter. All checks are probed at once with the first
    _PROBE FETCHes of their window (a healthy follower catches up within them); a check the probe
    leaves undecided is resolved, only when the simulation asks for it, by scanning its window.
    """

    def __init__(self, ep: _Epoch, j: int, grid: np.ndarray, leader_grid: np.ndarray, lag_us: int, init_lcu: int) -> None:
        self.ep, self.j = ep, j
        times = ep.inp.leo_times[j]
        n_checks = grid.size
        self.out = np.zeros(n_checks, dtype=bool)  # known out of sync
        self.undecided = np.zeros(n_checks, dtype=bool)
        self.lo = self.hi = np.zeros(n_checks, dtype=_I64)  # window FETCHes of suspect checks
        if times.size == 0:
            self.out = (grid - init_lcu > lag_us) & (leader_grid >= 0)
        else:
            last = np.searchsorted(times, grid, side="right") - 1  # latest FETCH at each check
            leo = np.where(last >= 0, ep.cum[j].take(np.maximum(last, 0)), -1)
            first = np.searchsorted(times, grid - lag_us, side="left")  # first FETCH in the window
            suspect = np.flatnonzero((leo < leader_grid) & (grid - init_lcu > lag_us))
            if suspect.size:
                lo, hi = first[suspect], last[suspect] + 1  # window FETCHes [lo, hi)
                probe = lo[:, None] + np.arange(_PROBE)
                valid = probe < hi[:, None]
                flat = probe[valid]
                # A previous fetch's time counts only when it is inside the window too.
                ok = ep.caught_up(j, flat, flat > np.repeat(lo, valid.sum(axis=1)))
                found = np.zeros(valid.shape, dtype=bool)
                found[valid] = ok
                found = found.any(axis=1)
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


def _controller_removals(inp: EpochInputs, window_us: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per follower: when the controller alone took it out of the ISR (``isr_change_by_controller``), and
    from when the leader may re-add it after each removal.

    KRaft's controller removes a broker from every ISR at once when it starts a controlled shutdown or
    is fenced (``ReplicationControlManager.handleBrokerInControlledShutdown`` / ``handleBrokerFenced``),
    whatever the lag rule says, and the leader does not re-add a shutting-down or fenced broker however
    caught up its FETCHes are (``Partition.isReplicaIsrEligible``). When it is eligible again the logs
    do not say; its recorded re-addition does, less the window in which the qualifying FETCH precedes
    the commit (``isr_expand_window_us``). Not re-added within the epoch: never (``NEVER``).
    """
    times, members, flags = inp.isr_change_times, inp.isr_membership, inp.isr_change_by_controller
    out = []
    for j in range(members.shape[1]):
        removed = np.flatnonzero(flags & members[:-1, j] & ~members[1:, j])
        readded = np.flatnonzero(~members[:-1, j] & members[1:, j])
        after = np.searchsorted(readded, removed, side="right")
        eligible = np.full(removed.size, NEVER, dtype=_I64)
        found = after < readded.size
        eligible[found] = times[readded[after[found]]] - window_us
        out.append((times[removed], np.maximum(eligible, times[removed])))
    return out


def _resumed_checks(inp: EpochInputs, grid: np.ndarray, start: int, horizon: int) -> np.ndarray:
    """The isr-expiration checks of a leader that did not run for a while: none while it was silent, one
    when it resumed (``leader_silences``: from its last request line to that check).

    ReplicaManager runs the check at a fixed rate (``scheduler.schedule("isr-expiration", ..., period =
    replica.lag.time.max.ms / 2)``, a ``ScheduledThreadPoolExecutor.scheduleAtFixedRate``): a stopped
    JVM runs none, and once resumed runs the overdue one at once.
    """
    if inp.leader_silences.size == 0:
        return grid
    keep = np.ones(grid.size, dtype=bool)
    for silent_from, checked in inp.leader_silences.tolist():
        keep &= (grid <= silent_from) | (grid >= checked)
    checks = inp.leader_silences[:, 1]
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


def _simulate_isr(ep: _Epoch, lag_ms: float) -> IsrTimeline:
    inp, opt = ep.inp, ep.opt
    f = ep.f
    lag_us = int(round(lag_ms * 1000))
    check_every = max(1, lag_us // 2)
    start = ep.start
    # The recorded ISR in force where the data starts (ISR lines can predate the request log's window).
    member = inp.isr_membership[int(inp.isr.rows_at(np.array([start], _I64))[0])].copy()
    if f == 0:
        return IsrTimeline(np.empty(0, _I64), member[None, :])

    # Horizon: nothing after the epoch end or after the last produce deadline / LEO event matters.
    last = [int(t[-1]) for t in inp.leo_times if t.size]
    if ep.n:
        last.append(int(ep.deadline.max()))
    horizon = max([start, *last])
    if inp.epoch_end != NEVER:
        horizon = min(horizon, inp.epoch_end)

    # isr-expiration checks at phase + k * lag/2 after start.
    phase = start if opt.isr_check_phase_us is None else int(opt.isr_check_phase_us)
    first = phase + ((start - phase) // check_every + 1) * check_every
    n_checks = 0 if first > horizon else (horizon - first) // check_every + 1
    if n_checks > _MAX_ISR_CHECKS:
        raise ValueError(f"{n_checks} isr-expiration checks for lag {lag_ms} ms: span too long for that lag")
    grid = _resumed_checks(inp, first + check_every * np.arange(n_checks, dtype=_I64), start, horizon)
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
    ready = [_MIN] * f  # a removed follower is re-added by a FETCH after its removal committed
    removals = _controller_removals(inp, int(opt.isr_expand_window_us))
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
                times = inp.leo_times[j]
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
        committed = best_t + delay(best_t)
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
      proposal nearest in time (``options.isr_commit_delays``).
    * The controller's own removals (``inputs.isr_change_by_controller``: controlled shutdown,
      fencing) apply at their recorded times, and the removed follower is not re-added before its
      recorded re-addition's window (see :func:`_controller_removals`).
    * A leader that did not run (``inputs.leader_silences``) makes no check while silent and one
      when it resumes (see :func:`_resumed_checks`).

    Returns the committed timeline (same shape as the recorded one).
    """
    return _simulate_isr(_Epoch(inputs, options or ReplayOptions()), lag_ms)


# ------------------------------------------------------------------------------------------------
# Output helpers
# ------------------------------------------------------------------------------------------------


def _block_rows(arrays: list[np.ndarray]) -> np.ndarray | None:
    """The 2-D block whose consecutive rows are exactly ``arrays`` (None if they are not)."""
    base = arrays[0].base
    if not isinstance(base, np.ndarray) or base.ndim != 2 or base.shape[0] != len(arrays):
        return None
    if not base.flags.c_contiguous:
        return None
    start = base.__array_interface__["data"][0]
    for i, arr in enumerate(arrays):
        if arr.base is not base or arr.shape != base.shape[1:]:
            return None
        if arr.__array_interface__["data"][0] != start + i * base.strides[0]:
            return None
    return base


def to_columns(results: Mapping[str, PolicyOutcome] | Iterable[PolicyOutcome]) -> dict[str, np.ndarray]:
    """Long format for a DataFrame: one row per (policy, produce), policy-major, produces in input
    order. Columns: ``policy`` (object), ``produce_index`` (int64, the input row), and the
    :class:`PolicyOutcome` arrays (views of :func:`replay_epoch`'s blocks, no copy, when possible).
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
        arrays = [getattr(o, name) for o in outcomes]
        block = _block_rows(arrays)
        cols[name] = block.reshape(-1) if block is not None else np.concatenate(arrays)
    return cols
