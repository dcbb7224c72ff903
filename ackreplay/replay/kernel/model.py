"""The replay kernel's inputs and outputs: one (partition, leader epoch) on its leader (:class:`EpochInputs`),
the broker-behaviour switches (:class:`ReplayOptions`), the ISR as a timeline (:class:`IsrTimeline`) and
one policy's outcome of every produce (:class:`PolicyOutcome`), with their validation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ackreplay.schemas.vocabulary import MIN_LAG_MS, NEVER, Policy, replayed_policies

EARLIEST: int = int(np.iinfo(np.int64).min)
"""Sentinel time: before anything in the data (the start of the first ISR interval)."""

_I64 = np.int64


def _i64(values, name: str) -> np.ndarray:
    arr = np.ascontiguousarray(values, dtype=_I64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def is_sorted(arr: np.ndarray) -> bool:
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
            raise ValueError(f"membership must have shape (K+1, F) = ({times.size + 1}, F), got {members.shape}")
        if not is_sorted(times):
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
    follower_ineligible: tuple[np.ndarray | None, ...] | None = None
    """Per follower, int64 (S, 2), sorted: spans in which its broker could not join the ISR (fenced, in controlled
    shutdown, not registered: ``Partition.isReplicaIsrEligible``), from the controller's registration records
    (`broker_registrations`; ``stage.ineligible_spans``), on the controller's clock. A follower outside the ISR holds
    the HW back only outside them as the leader knew them (``ineligible_delay_us`` later:
    ``shouldWaitForReplicaToJoinIsr``). None (for all or for one follower): not known."""
    ineligible_delay_us: int = 0
    """How long after the controller's line the leader had a registration record in its metadata cache, which
    ``isReplicaIsrEligible`` reads (``stage.metadata_apply_delays``): when an ineligible span ended for the leader
    (:meth:`ineligible_at_leader`)."""
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
            if not is_sorted(t):
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
            if np.any(silences[:, 1] <= silences[:, 0]) or not is_sorted(silences[:, 0]):
                raise ValueError("leader_silences must be sorted (start, end) spans with end > start")
        object.__setattr__(self, "leader_silences", silences)
        if self.follower_ineligible is not None:
            if len(self.follower_ineligible) != f:
                raise ValueError(f"follower_ineligible needs spans for each of the {f} followers")
            spans = tuple(
                None if a is None else np.ascontiguousarray(a, dtype=_I64).reshape(-1, 2)
                for a in self.follower_ineligible
            )
            if any(a is not None and (np.any(a[:, 1] <= a[:, 0]) or not is_sorted(a[:, 0])) for a in spans):
                raise ValueError("follower_ineligible must be sorted (start, end) spans with end > start")
            object.__setattr__(self, "follower_ineligible", spans)
        if self.ineligible_delay_us < 0:
            raise ValueError("ineligible_delay_us must be >= 0")
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
        if any(not (math.isfinite(x) and x >= MIN_LAG_MS) for x in lags):
            raise ValueError(f"replica_lag_time_max_ms values must be finite and >= {MIN_LAG_MS}")
        object.__setattr__(self, "replica_lag_time_max_ms", lags)
        if self.epoch_start is not None:
            object.__setattr__(self, "epoch_start", int(self.epoch_start))

    def ineligible_at_leader(self, j: int) -> np.ndarray | None:
        """Follower ``j``'s ineligible spans as its leader knew them, or None where not known: each ends
        ``ineligible_delay_us`` after the controller's line of the unfencing (an open span stays open). A span starts at
        the controller's line: the records that start one (a controlled shutdown, a fencing) come with the ISR
        removals in the same batch, which the recorded ISR timeline has at the leader's own line; a follower the
        record finds outside the ISR is out until the end either way."""
        spans = self.follower_ineligible[j] if self.follower_ineligible is not None else None
        if spans is None or not self.ineligible_delay_us:
            return spans
        d = self.ineligible_delay_us
        return np.column_stack((spans[:, 0], np.where(spans[:, 1] == NEVER, NEVER, spans[:, 1] + d)))

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
    recorded_lag_us: int = 30_000_000
    """maximal_isr: the cluster's replica.lag.time.max.ms (its brokers' logged value, `groups.ReplayContext.
    recorded_lag_ms`), for the Replica rule's caught-up test of a follower outside the ISR (Kafka's default, 30 s,
    where neither the logs nor the conf give it)."""
    isr_check_phase_us: int | None = None
    """simulate_isr: a time at which the isr-expiration task runs (None: ``epoch_start``)."""
    isr_commit_delay_us: int = 0
    """simulate_isr: delay between an ISR change proposal and its commit (AlterPartition)."""
    isr_commit_delays: tuple[np.ndarray, np.ndarray] | None = None
    """simulate_isr: (proposal times, sorted; their commit delays), µs, as the leader's logs show them:
    a change proposed at t commits after the delay of the logged proposal nearest to t (the
    AlterPartition round trip of that time). None: ``isr_commit_delay_us``."""
    isr_own_commits: tuple[np.ndarray, np.ndarray] | None = None
    """simulate_isr: (proposal times, sorted; commit times), µs, of the shrinks the leader logged for this
    partition ("Shrinking ISR", then "ISR updated to"). At the cluster's own lag (``recorded_lag_us``), a shrink
    the re-simulation proposes in the same run of the isr-expiration task as a logged one (within half a check
    period of it) is that proposal, and commits
    when it did: a broker keeps one AlterPartition request in flight (``DefaultAlterPartitionManager.
    inflightRequest``), so a partition's change proposed in a run that shrinks several waits for the
    response to the one sent before it, which no delay of another partition tells."""


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
        return {name: getattr(self, name) for name in OUTCOME_COLUMNS}


LOSS_WINDOWS = (
    "loss_window_kafka_us",
    "loss_window_kafka_min_us",
    "loss_window_longest_us",
    "loss_window_longest_min_us",
)
"""The loss-window arrays of a :class:`PolicyOutcome`."""

OUTCOME_COLUMNS = (
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


def policy_ids(inputs: EpochInputs) -> list[str]:
    """The policy ids :func:`replay_epoch` returns for these inputs, in its order."""
    return [p.id for p in replayed(inputs)]


def replayed(inputs: EpochInputs) -> list[Policy]:
    """The policies :func:`replay_epoch` replays for these inputs, in its order."""
    return replayed_policies(inputs.quorum_sizes, inputs.replica_lag_time_max_ms)


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


def derived_elr(isr: IsrTimeline, start: np.ndarray, min_insync_replicas: int) -> np.ndarray:
    """Eligible leader replicas along a (re-simulated) ISR timeline, from `start` at row 0."""
    rows = np.empty_like(isr.membership)
    rows[0] = start
    for k in range(1, rows.shape[0]):
        member = isr.membership[k]
        rows[k] = next_eligible_leader_replicas(
            rows[k - 1], isr.membership[k - 1], member, 1 + int(member.sum()), min_insync_replicas
        )
    return rows
