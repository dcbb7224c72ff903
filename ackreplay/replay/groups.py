"""The Python side of the replay: one (cluster, leader broker, time bucket) group -> the kernel -> produce_replay rows.

Runs inside a cogrouped `applyInArrow` on the executors: the left side holds the group's produces,
the right side its follower LEO events. What is constant per partition and leader epoch (assignment,
min ISR, epoch bounds, start ISR, committed ISR changes) and the names behind the numeric keys come
with the function (`ReplayContext`, built on the driver from the small silver tables). Grouping by
the leader broker rather than by partition keeps every partition of a produce request in one group (a
request goes to one broker and is logged on one line), so the request's response time (its slowest
partition) is computed here and no shuffle is needed for it in Spark.

Only numeric columns cross from Spark; everything per produce is NumPy over Arrow buffers. The group's
`produce_replay` rows are built as one Arrow table (strings dictionary-encoded) and either written to
Parquet data files right here (`ReplayContext.writer`; the driver commits them, ackreplay/storage/arrow_delta.py)
or returned to Spark, whose Delta writer writes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from ackreplay.replay.connections import chain_requests
from ackreplay.replay.kernel import LOSS_WINDOWS, EpochInputs, IsrTimeline, ReplayOptions, replay_epoch
from ackreplay.replay.retries import RetrySettings, replay_retries
from ackreplay.schemas.replay import ISR_SOURCES, PRODUCE_REPLAY, WRITTEN_FILE
from ackreplay.schemas.vocabulary import ACKS_1, ACKS_ALL, NEVER, OUTCOMES, Outcome, Policy, PolicyKind, policy_order
from ackreplay.storage.arrow_delta import ArrowFileWriter

# produce_replay as Arrow (the schema Spark expects back when it writes the rows itself), from the contract.
PRODUCE_REPLAY_ARROW = to_arrow_schema(PRODUCE_REPLAY)
WRITTEN_FILE_ARROW = to_arrow_schema(WRITTEN_FILE)
PARTITION_COLUMNS = ("cluster", "event_date")


def isr_timeline(
    change_times: np.ndarray, change_isrs: Sequence, followers: Sequence[int], start_isr
) -> tuple[np.ndarray, np.ndarray, str]:
    """(change times, membership (K+1, F), source) of one leader epoch from its committed ISR changes.

    `change_isrs[k]` is the ISR committed at `change_times[k]` (sorted). Before the first change the
    epoch's start ISR holds (from state-change.log); without one, the first logged ISR; without any
    ISR line at all, every follower is assumed in sync ("assumed_full").
    """
    has_start = start_isr is not None and len(start_isr) > 0
    if not has_start and len(change_isrs) == 0:
        return np.empty(0, np.int64), np.ones((1, len(followers)), dtype=bool), "assumed_full"
    first = start_isr if has_start else change_isrs[0]
    rows = [first, *change_isrs]
    membership = np.array([[f in set(isr) for f in followers] for isr in rows], dtype=bool)
    return np.asarray(change_times, np.int64), membership.reshape(len(rows), len(followers)), "logs"


def epoch_inputs(
    *,
    base_offset: np.ndarray,
    t_local_done: np.ndarray,
    timeout_ms: np.ndarray,
    leader: int,
    replicas: Sequence[int],
    event_follower: np.ndarray,
    event_t: np.ndarray,
    event_offset: np.ndarray,
    change_times: np.ndarray,
    change_isrs: Sequence,
    start_isr,
    min_insync_replicas: int,
    epoch_start_us: int,
    epoch_end_us: int,
    quorum_sizes: tuple[int, ...] = (2, 3),
    lag_ms: tuple[float, ...] = (),
    change_by_controller: Sequence[bool] | np.ndarray | None = None,
    leader_silences: np.ndarray | None = None,
    appended: np.ndarray | None = None,
    elr_membership: np.ndarray | None = None,
    broker_ineligible: Mapping[int, np.ndarray] | None = None,
    ineligible_delay_us: int = 0,
) -> tuple[EpochInputs, str]:
    """The kernel's inputs for one (partition, leader epoch) from plain arrays, and the ISR source.

    Events must be sorted by time. `change_by_controller[k]`: the change at `change_times[k]` was the
    controller's alone (the kernel's `isr_change_by_controller`). `leader_silences`: (S, 2) spans in
    which the leader did not run (replay_inputs.broker_silences; the kernel's `leader_silences`).
    `appended`: false for a produce the broker rejected before appending (the kernel's `appended`; default:
    all). `elr_membership`: the kernel's, rows as the ISR timeline's (elr.partition_elr_rows); None: no
    eligible leader replicas. `broker_ineligible`: broker id -> (S, 2) spans in which it could not join the ISR
    (stage.ineligible_spans; the kernel's `follower_ineligible`, None for a follower without them), which the leader
    knew `ineligible_delay_us` after the controller's lines (stage.metadata_apply_delays). The ISR
    re-simulation starts where this slice's request-log data (produces, LEO events) starts when that is later than
    the epoch start (a bucket that starts mid-epoch, or a request log recorded from some time after the leader was
    elected).
    """
    followers = [int(r) for r in replicas if int(r) != leader]
    change_t, membership, isr_source = isr_timeline(change_times, change_isrs, followers, start_isr)
    # ISR lines (server.log, whole since broker start) do not count: a request log often covers a
    # window that starts long after the epoch, and followers are not idle before it.
    first_data = min(int(a.min()) if np.size(a) else NEVER for a in (t_local_done, event_t))
    if first_data == NEVER:
        first_data = epoch_start_us
    inputs = EpochInputs(
        base_offset=base_offset,
        t_local_done=t_local_done,
        timeout_us=np.asarray(timeout_ms, np.int64) * 1000,
        appended=np.ones(base_offset.size, dtype=bool) if appended is None else appended,
        follower_ids=np.array(followers, dtype=np.int32),
        leo_times=tuple(event_t[event_follower == f] for f in followers),
        leo_offsets=tuple(event_offset[event_follower == f] for f in followers),
        isr_change_times=change_t,
        isr_membership=membership,
        isr_change_by_controller=None if change_by_controller is None else np.asarray(change_by_controller, bool),
        leader_silences=leader_silences,
        follower_ineligible=tuple(broker_ineligible.get(f) for f in followers) if broker_ineligible else None,
        ineligible_delay_us=int(ineligible_delay_us),
        elr_membership=elr_membership,
        min_insync_replicas=int(min_insync_replicas),
        epoch_end=int(epoch_end_us),
        quorum_sizes=quorum_sizes,
        replica_lag_time_max_ms=lag_ms,
        epoch_start=max(int(epoch_start_us), first_data),
    )
    return inputs, isr_source


@dataclass(frozen=True)
class PartitionEpochs:
    """One partition's leader epochs, sorted by start, and what is constant for the partition."""

    cluster: str
    topic: str
    partition: int
    replicas: tuple[int, ...]
    min_insync_replicas: int
    leader_epoch: np.ndarray  # int32 (E,)
    leader: np.ndarray  # int32 (E,)
    start_us: np.ndarray  # int64 (E,), sorted
    end_us: np.ndarray  # int64 (E,): the next epoch's start, or NEVER
    start_isr: tuple  # per epoch: the ISR at its start (state-change.log), or None
    # int64 (E,): until when the leader led the epoch on its own clock (replay_inputs.with_leader_until);
    # None: the next epoch's start
    leader_until_us: np.ndarray | None = None

    @property
    def until_us(self) -> np.ndarray:
        """Until when each epoch's leader led it (its appends, acks and answered FETCHes end there)."""
        return self.end_us if self.leader_until_us is None else self.leader_until_us


class IsrProposals(NamedTuple):
    """A broker's logged ISR shrink proposals (stage.isr_proposals), sorted by time, µs."""

    times: np.ndarray  # int64: "Shrinking ISR" (the isr-expiration task's proposal)
    delays: np.ndarray  # int64: until its "ISR updated to" (the AlterPartition round trip)
    topics: np.ndarray  # object: the proposal's partition
    partitions: np.ndarray  # int64


def logged_isr_options(
    options: ReplayOptions,
    proposals: IsrProposals | None,
    epoch_start: int | None,
    topic: str | None = None,
    partition: int | None = None,
) -> ReplayOptions:
    """`options` with what the leader's logs say of its ISR checks (`proposals`: its "Shrinking ISR" times
    and their commit delays, stage.isr_proposals): their phase, how long a change took to commit, and when
    the shrinks it logged for this partition (`topic`, `partition`) committed."""
    if proposals is None:
        return options
    phase = isr_check_phase(proposals.times, epoch_start) if epoch_start is not None else None
    own = (proposals.topics == topic) & (proposals.partitions == partition)
    return replace(
        options,
        isr_check_phase_us=options.isr_check_phase_us if phase is None else phase,
        isr_commit_delays=(proposals.times, proposals.delays),
        isr_own_commits=(proposals.times[own], proposals.times[own] + proposals.delays[own]),
    )


def isr_check_phase(check_times: np.ndarray | None, t: int) -> int | None:
    """A time at which the leader's isr-expiration task ran, for the ISR re-simulation from `t`: its logged
    shrink proposal nearest to `t` (None: it logged none).

    ReplicaManager schedules the task once, at broker start, at a fixed rate of replica.lag.time.max.ms / 2
    (`scheduler.schedule("isr-expiration", ...)`, `ScheduledThreadPoolExecutor.scheduleAtFixedRate`, which
    keeps its phase through a pause of the JVM), and it logs "Shrinking ISR" when it proposes a shrink: so
    with the cluster's own lag the re-simulated checks fall where the real ones did. With another lag the
    period differs and the broker's start is not known, so the phase is as good as any. The nearest
    proposal, as a restarted broker starts a new phase."""
    if check_times is None or check_times.size == 0:
        return None
    i = int(np.searchsorted(check_times, t))
    candidates = check_times[max(i - 1, 0) : i + 1]
    return int(candidates[np.argmin(np.abs(candidates - t))])


def _leadership_end(part: PartitionEpochs, k: int, last_row_us: int) -> int:
    """When epoch k's leader stopped acknowledging, for the kernel: its own follower line when it was
    running after the next epoch began (it appended or answered a FETCH then: a controlled shutdown, a
    resumed pause), else the next epoch's start or its follower line, whichever came first. A crashed
    leader logs its follower line only when it restarts, after a gap in which it ran nothing: its acks
    end when the next epoch begins, not at its restart."""
    end, until = int(part.end_us[k]), int(part.until_us[k])
    return until if last_row_us >= end else min(until, end)


@dataclass(frozen=True)
class ProducerRules:
    """One cluster's producer settings as the replay applies them (conf `replay.producer`, and a cluster's own
    `clusters.<name>.producer`: AppConfig.producer_of)."""

    linger_us: int = 5_000  # linger.ms (connections.py)
    blocked_gap_us: int = 1_000  # blocked_gap_ms
    max_in_flight: int = 5  # max.in.flight.requests.per.connection
    retry: RetrySettings = field(default_factory=RetrySettings)  # the retry settings (retries.py)


@dataclass(frozen=True)
class ReplayContext:
    """Everything a replay group needs besides its rows: built on the driver from the small silver tables
    (partitions, leader epochs, ISR changes, the source-file names) and shipped with the group function."""

    quorum_sizes: tuple[int, ...]
    lag_ms: tuple[float, ...]  # the lags of every cluster (replay.lag_ms's numbers)
    strict_min_isr: Mapping[str, bool]  # cluster -> Kafka 3.7+'s rule below min ISR (kafka_release.py)
    run_id: str
    partitions: Mapping[int, PartitionEpochs]  # pkey -> the partition's epochs
    # (pkey, leader_epoch) -> (commit times, ISRs, whether the controller alone made the change)
    isr_changes: Mapping[tuple[int, int], tuple[np.ndarray, tuple, np.ndarray]]
    source_files: Mapping[int, str]  # source_file_id -> source_file
    # (cluster, broker_id) -> int64 (S, 2): when the broker did not run (replay_inputs.broker_silences)
    leader_silences: Mapping[tuple[str, int], np.ndarray] = field(default_factory=dict)
    # (cluster, broker_id) -> int64 (S, 2): when the broker could not join an ISR (stage.ineligible_spans)
    broker_ineligible: Mapping[tuple[str, int], np.ndarray] = field(default_factory=dict)
    # cluster -> how long after the controller's line its leaders knew a registration record (metadata_apply_delays)
    ineligible_delay_us: Mapping[str, int] = field(default_factory=dict)
    # (cluster, broker_id) -> its "Shrinking ISR" proposals, their partitions and how long each took to commit:
    # the phase and commit delays of its ISR checks (stage.isr_proposals, logged_isr_options)
    isr_proposals: Mapping[tuple[str, int], IsrProposals] = field(default_factory=dict)
    leo_sources: Mapping[str, str] = field(default_factory=dict)  # cluster -> jmx_metrics (default follower_fetches)
    # (pkey, leader_epoch) -> the kernel's elr_membership where the cluster keeps eligible leader replicas
    elr_rows: Mapping[tuple[int, int], np.ndarray] = field(default_factory=dict)
    writer: ArrowFileWriter | None = None  # write the rows as Delta data files here; None: return them to Spark
    # return only each group's rejection ground truth (one WRITTEN_FILE row without a file): the count Spark's
    # writer cannot return beside the rows it writes (stage._rejections_beside_sparks_writer)
    rejections_only: bool = False
    producer: ProducerRules = field(default_factory=ProducerRules)  # of a cluster not in `cluster_producers`
    cluster_producers: Mapping[str, ProducerRules] = field(default_factory=dict)  # cluster -> its producers' rules
    # cluster -> its own replica.lag.time.max.ms, replayed besides `lag_ms` (replay.lag_ms `own`; own_lag.py)
    own_lag_ms: Mapping[str, float] = field(default_factory=dict)
    # cluster -> the replica.lag.time.max.ms its brokers logged (or the conf gives), whether replayed or not: the
    # maximal ISR's caught-up test (kernel ReplayOptions.recorded_lag_us; Kafka's default where unknown)
    recorded_lag_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def policies(self) -> list[str]:
        """The policies of every cluster; a cluster's own lag comes after them (`policies_of`)."""
        return policy_order(self.quorum_sizes, self.lag_ms)

    def lags_of(self, cluster: str) -> tuple[float, ...]:
        own = self.own_lag_ms.get(cluster)
        return self.lag_ms if own is None else tuple(dict.fromkeys((*self.lag_ms, own)))

    def policies_of(self, cluster: str) -> list[str]:
        return policy_order(self.quorum_sizes, self.lags_of(cluster))

    def producer_of(self, cluster: str) -> ProducerRules:
        return self.cluster_producers.get(cluster, self.producer)


def _np(table: pa.Table, name: str, dtype=None) -> np.ndarray:
    arr = table.column(name).to_numpy()
    return arr if dtype is None else arr.astype(dtype, copy=False)


def _runs(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end indices of the runs of equal keys in arrays sorted by those keys."""
    n = keys[0].size
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    change = np.zeros(n - 1, dtype=bool)
    for k in keys:
        change |= k[1:] != k[:-1]
    starts = np.concatenate([[0], np.flatnonzero(change) + 1])
    return starts, np.append(starts[1:], n)


def _request_max(values: np.ndarray, *request_key: np.ndarray) -> np.ndarray:
    """Per row, the maximum of `values` (policies, n) over the rows of the same request (axis 1)."""
    order = np.lexsort(request_key[::-1])
    starts, ends = _runs(*(k[order] for k in request_key))
    if starts.size == values.shape[1]:  # one partition per request: nothing to combine
        return values
    run_max = np.maximum.reduceat(values[:, order], starts, axis=1)
    out = np.empty_like(values)
    out[:, order] = np.repeat(run_max, ends - starts, axis=1)
    return out


# How many epochs back a row's broker may still be leading (epochs started by others in the meantime).
_LOOK_BACK_EPOCHS = 3


def _place_in_epochs(
    ctx: ReplayContext, pkey: np.ndarray, broker: np.ndarray, t: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sort rows by (partition, time) and place each in the leader epoch its broker led at its time.

    Returns (order, epoch index in its partition's `PartitionEpochs`, -1 where none: unknown partition,
    no epoch at that time, or another broker led it then), both in sorted order.
    """
    order = np.lexsort((t, pkey))
    pkey, broker, t = pkey[order], broker[order], t[order]
    epoch = np.full(order.size, -1, np.int64)
    for s, e in zip(*_runs(pkey), strict=True):
        part = ctx.partitions.get(int(pkey[s]))
        if part is None:
            continue
        until = part.until_us
        candidate = np.searchsorted(part.start_us, t[s:e], side="right") - 1
        placed = np.full(e - s, -1, np.int64)
        # An old leader keeps leading on its own clock after the next epoch started (until its own
        # follower line): look back past the epochs that started meanwhile.
        for _ in range(_LOOK_BACK_EPOCHS):
            safe = np.maximum(candidate, 0)
            ok = (placed < 0) & (candidate >= 0) & (t[s:e] < until[safe]) & (part.leader[safe] == broker[s:e])
            placed[ok] = candidate[ok]
            candidate = candidate - 1
        epoch[s:e] = placed
    return order, epoch


def _dictionary(indices: np.ndarray, values: Sequence[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(list(values), pa.string()))


def _nan_as_null(values: np.ndarray) -> pa.Array:
    """Not acknowledged (NaN in the kernel) is null in the table; inf (never within the data) stays."""
    return pa.array(values, pa.float64(), mask=np.isnan(values))


@dataclass
class _Replayed:
    """A group's replayed produces (n, sorted) and their per-policy results (policies, n)."""

    produce: dict[str, np.ndarray]
    result: dict[str, np.ndarray]
    clusters: list[str]  # names behind produce["cluster"]
    topics: list[str]  # names behind produce["topic"]
    policies: list[str]  # the rows of each `result` array (the group's cluster's, ReplayContext.policies_of)
    # the rejection ground truth over the group's recorded NOT_ENOUGH_REPLICAS produces (rejection_truth)
    rejections: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.produce["offset"].size

    def subset(self, keep: np.ndarray) -> _Replayed:
        return _Replayed(
            {k: v[keep] for k, v in self.produce.items()}, {k: v[:, keep] for k, v in self.result.items()},
            self.clusters, self.topics, self.policies, self.rejections,
        )  # fmt: skip


def _replay(ctx: ReplayContext, produces: pa.Table, events: pa.Table) -> _Replayed | None:
    """The kernel over every (partition, leader epoch) of the group (one cluster's); None when nothing is replayed."""
    order, epoch = _place_in_epochs(ctx, _np(produces, "pkey"), _np(produces, "broker_id"), _np(produces, "t_us"))
    placed = epoch >= 0
    if not placed.any():
        return None
    rows = order[placed]
    group_cluster = ctx.partitions[int(_np(produces, "pkey")[rows[0]])].cluster
    rules = ctx.producer_of(group_cluster)
    lags, policies = ctx.lags_of(group_cluster), ctx.policies_of(group_cluster)
    recorded_lag_ms = ctx.recorded_lag_ms.get(group_cluster)
    options = ReplayOptions(
        strict_min_isr=ctx.strict_min_isr.get(group_cluster, True),
        recorded_lag_us=ReplayOptions.recorded_lag_us if recorded_lag_ms is None else round(recorded_lag_ms * 1000),
    )
    produce = {name: _np(produces, name)[rows] for name in (
        "pkey", "broker_id", "t_us", "offset", "timeout_ms", "acks", "bytes", "t_start_us", "client_side_ms",
        "source_file_id", "line_number", "event_day",
    )}  # fmt: skip
    for name in ("connection_key", "t_log_us"):
        produce[name] = _np(produces, name)[rows] if name in produces.column_names else np.zeros(rows.size, np.int64)
    previous = (
        produces.column("previous_response_us")
        if "previous_response_us" in produces.column_names
        else pa.nulls(produces.num_rows, pa.int64())
    )
    produce["previous_response_us"] = previous.fill_null(-NEVER).to_numpy()[rows]
    produce["fixed_backoff"] = (
        produces.column("fixed_backoff").fill_null(False).to_numpy(zero_copy_only=False)[rows]
        if "fixed_backoff" in produces.column_names
        else np.zeros(rows.size, bool)
    )
    sent = (
        produces.column("t_send_us")
        if "t_send_us" in produces.column_names
        else pa.nulls(produces.num_rows, pa.int64())
    )
    produce["t_send_us"] = sent.fill_null(0).to_numpy()[rows]
    produce["has_send"] = sent.is_valid().to_numpy(zero_copy_only=False)[rows]
    records = (
        produces.column("records") if "records" in produces.column_names else pa.nulls(produces.num_rows, pa.int32())
    )
    produce["records"] = records.fill_null(0).to_numpy()[rows]
    produce["records_known"] = records.is_valid().to_numpy(zero_copy_only=False)[rows]
    observed = produces.column("t_ack_observed_us")
    produce["t_ack_observed_us"] = observed.fill_null(0).to_numpy()[rows]
    produce["observed_valid"] = observed.is_valid().to_numpy(zero_copy_only=False)[rows]
    produce["epoch_index"] = epoch[placed]
    episodes = _episodes(produces, rows, produce)
    pkey, epoch_index, t_us = produce["pkey"], produce["epoch_index"], produce["t_us"]

    event_order, event_epoch = _place_in_epochs(ctx, _np(events, "pkey"), _np(events, "broker_id"), _np(events, "t_us"))
    event_rows = event_order[event_epoch >= 0]
    event_pkey, event_epoch = _np(events, "pkey")[event_rows], event_epoch[event_epoch >= 0]
    event_t, event_follower_id, event_offset = (_np(events, c)[event_rows] for c in ("t_us", "follower_id", "offset"))
    fetch_runs = {
        (int(event_pkey[s]), int(event_epoch[s])): (s, e) for s, e in zip(*_runs(event_pkey, event_epoch), strict=True)
    }

    n_rows = pkey.size
    shape = (len(policies), n_rows)  # (policies, produces)
    result = {
        "outcome": np.zeros(shape, np.int8), "t_ack": np.empty(shape, np.int64),
        "copies_at_ack": np.zeros(shape, np.int8), "exposure_us": np.empty(shape, np.float64),
        "full_replication_us": np.empty(shape, np.float64), "loss_kafka_election": np.zeros(shape, bool),
        "loss_longest_log_election": np.zeros(shape, bool), "loss_kafka_election_min": np.zeros(shape, bool),
        "loss_longest_log_election_min": np.zeros(shape, bool), "offline_at_failure": np.zeros(shape, bool),
        **{name: np.empty(shape, np.float64) for name in LOSS_WINDOWS},
        "isr_source": np.empty(shape, np.int8),
    }  # fmt: skip
    lag_policy = np.array([Policy.parse(policy).kind is PolicyKind.ACKS_ALL_AT_LAG for policy in policies])
    leader_epoch = np.empty(n_rows, np.int32)
    cluster_of: dict[str, int] = {}
    topic_of: dict[str, int] = {}
    cluster, topic, partition = np.empty(n_rows, np.int32), np.empty(n_rows, np.int32), np.empty(n_rows, np.int32)
    for s, e in zip(*_runs(pkey, epoch_index), strict=True):
        part = ctx.partitions[int(pkey[s])]
        epoch_pos = int(epoch_index[s])
        number = int(part.leader_epoch[epoch_pos])
        leader_epoch[s:e] = number
        cluster[s:e] = cluster_of.setdefault(part.cluster, len(cluster_of))
        topic[s:e] = topic_of.setdefault(part.topic, len(topic_of))
        partition[s:e] = part.partition
        event_start, event_end = fetch_runs.get((int(pkey[s]), epoch_pos), (0, 0))
        change_times, change_isrs, by_controller = ctx.isr_changes.get(
            (int(pkey[s]), number), (np.empty(0, np.int64), (), np.empty(0, bool))
        )
        # the epoch's last produce or LEO event in this group
        last_row_us = int(t_us[e - 1] if event_end == event_start else max(t_us[e - 1], event_t[event_end - 1]))
        inputs, isr_source = epoch_inputs(
            base_offset=produce["offset"][s:e],
            appended=produce["offset"][s:e] >= 0,
            t_local_done=t_us[s:e],
            timeout_ms=produce["timeout_ms"][s:e],
            leader=int(part.leader[epoch_pos]),
            replicas=part.replicas,
            event_follower=event_follower_id[event_start:event_end],
            event_t=event_t[event_start:event_end],
            event_offset=event_offset[event_start:event_end],
            change_times=change_times,
            change_isrs=change_isrs,
            change_by_controller=by_controller,
            leader_silences=ctx.leader_silences.get((part.cluster, int(part.leader[epoch_pos]))),
            broker_ineligible={b: spans for (c, b), spans in ctx.broker_ineligible.items() if c == part.cluster},
            ineligible_delay_us=ctx.ineligible_delay_us.get(part.cluster, 0),
            start_isr=part.start_isr[epoch_pos],
            min_insync_replicas=part.min_insync_replicas,
            epoch_start_us=int(part.start_us[epoch_pos]),
            epoch_end_us=_leadership_end(part, epoch_pos, last_row_us),
            quorum_sizes=ctx.quorum_sizes,
            lag_ms=lags,
            elr_membership=ctx.elr_rows.get((int(pkey[s]), number)),
        )
        proposals = ctx.isr_proposals.get((part.cluster, int(part.leader[epoch_pos]))) if lags else None
        outcomes = replay_epoch(
            inputs, logged_isr_options(options, proposals, inputs.epoch_start, part.topic, part.partition)
        )
        for i, policy in enumerate(policies):
            policy_result = outcomes[policy]
            result["outcome"][i, s:e] = policy_result.outcome
            result["t_ack"][i, s:e] = policy_result.t_ack
            result["copies_at_ack"][i, s:e] = policy_result.copies_at_ack
            result["exposure_us"][i, s:e] = policy_result.exposure_us
            result["full_replication_us"][i, s:e] = policy_result.full_replication_us
            result["loss_kafka_election"][i, s:e] = policy_result.loss_kafka_election
            result["loss_longest_log_election"][i, s:e] = policy_result.loss_longest_log_election
            result["loss_kafka_election_min"][i, s:e] = policy_result.loss_kafka_election_min
            result["loss_longest_log_election_min"][i, s:e] = policy_result.loss_longest_log_election_min
            result["offline_at_failure"][i, s:e] = policy_result.offline_at_failure
            for name in LOSS_WINDOWS:
                result[name][i, s:e] = getattr(policy_result, name)
        result["isr_source"][:, s:e] = np.where(
            lag_policy, ISR_SOURCES.index("simulated"), ISR_SOURCES.index(isr_source)
        )[:, None]
        m_eff = min(inputs.min_insync_replicas, inputs.replication_factor)
        if episodes:
            _admitted_attempts(episodes, produce["episode"], s, e, policies, outcomes, m_eff, result)
        _retried_rejections(rules.retry, produce, s, e, policies, outcomes, m_eff, inputs.epoch_end, result)
    produce.update(leader_epoch=leader_epoch, cluster=cluster, topic=topic, partition=partition)
    if "send_leader_epoch" in produces.column_names:
        # A send time listed for another epoch's batch at this offset (offsets are reused after a
        # truncation) is not this batch's: neither its send time nor its record count.
        listed = produces.column("send_leader_epoch")
        known = listed.is_valid().to_numpy(zero_copy_only=False)[rows]
        other = known & (listed.fill_null(-1).to_numpy()[rows] != leader_epoch)
        produce["has_send"] &= ~other
        produce["records_known"] &= ~other
    rejected = produce["offset"] < 0  # the recorded NOT_ENOUGH_REPLICAS (stage: appended or rejected)
    rejections = rejection_truth(ctx, result["outcome"][:, rejected], group_cluster)
    if rejections:
        produce = {k: v[~rejected] for k, v in produce.items()}
        result = {k: v[:, ~rejected] for k, v in result.items()}
        if not produce["offset"].size:
            return _Replayed(produce, result, list(cluster_of), list(topic_of), policies, rejections)
    # The broker answers a request when all its partitions are done: the client sees the latest t_ack.
    result["t_response"] = _request_max(result["t_ack"], produce["source_file_id"], produce["line_number"])
    result.update(
        _producer_view(
            ctx, rules, produce, result["t_response"], result["t_ack"], _early_times(result), result["outcome"],
            _retried_times(result),
        )
    )  # fmt: skip
    return _Replayed(produce, result, list(cluster_of), list(topic_of), policies, rejections)


def _episodes(
    produces: pa.Table, rows: np.ndarray, produce: dict[str, np.ndarray]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The group's retry episodes (`replay_inputs.retry_episodes`): a list of (attempt starts, attempt local
    done) in µs, the recorded append last; sets `produce["episode"]` (index into it, -1: none) and
    `produce["held"]` (the row was held behind the episode's batch; false: the row is its final retry)."""
    n = rows.size
    produce["episode"] = np.full(n, -1, np.int64)
    produce["held"] = np.zeros(n, bool)
    if "episode_start_us" not in produces.column_names:
        return []
    starts = produces.column("episode_start_us").combine_chunks()
    linked = np.flatnonzero(starts.is_valid().to_numpy(zero_copy_only=False)[rows])
    if not linked.size:
        return []
    dones = produces.column("episode_done_us").combine_chunks()
    held = produces.column("held").combine_chunks().fill_null(False).to_numpy(zero_copy_only=False)
    episodes = []
    for k, row in enumerate(linked.tolist()):
        source = int(rows[row])
        episodes.append((np.asarray(starts[source].values, np.int64), np.asarray(dones[source].values, np.int64)))
        produce["episode"][row] = k
        produce["held"][row] = held[source]
    return episodes


def _admitted_attempts(
    episodes: list[tuple[np.ndarray, np.ndarray]],
    episode: np.ndarray,
    s: int,
    e: int,
    policies: Sequence[str],
    outcomes: Mapping,
    m_eff: int,
    result: dict[str, np.ndarray],
) -> None:
    """Per policy, for the rows [s, e) of one epoch that end or wait behind a retried batch: the attempt the
    policy would have appended the batch at (`early_start_us` / `early_done_us`; NEVER: as recorded).

    The recorded rejections came from `Partition.appendRecordsToLeader`'s check of the committed ISR against
    min.insync.replicas. acks=1 and quorum=Q (KIP-250) make no such check: they take the first attempt.
    acks=all and min.insync make it on the committed ISR the brokers checked, so the brokers' answers stand.
    acks=all@lag makes it on its re-simulated ISR: the first attempt at which that ISR was not below min ISR."""
    rows = s + np.flatnonzero(episode[s:e] >= 0)
    if not rows.size:
        return
    if "early_start_us" not in result:
        shape = result["t_ack"].shape
        result["early_start_us"] = np.full(shape, NEVER, np.int64)
        result["early_done_us"] = np.full(shape, NEVER, np.int64)
    for i, policy in enumerate(policies):
        kind = Policy.parse(policy).kind
        if kind in (PolicyKind.ACKS_ALL, PolicyKind.MIN_INSYNC):
            continue
        isr = outcomes[policy].isr if kind is PolicyKind.ACKS_ALL_AT_LAG else None
        for row in rows.tolist():
            starts, dones = episodes[int(episode[row])]
            earlier = dones[:-1]
            if isr is None or m_eff <= 1:
                k = 0 if earlier.size else -1
            else:
                admitted = np.flatnonzero(isr.isr_size_at(earlier) >= m_eff)
                k = int(admitted[0]) if admitted.size else -1
            if k >= 0:
                result["early_start_us"][i, row] = starts[k]
                result["early_done_us"][i, row] = dones[k]


_REJECTIONS = np.array([Outcome.NOT_ENOUGH_REPLICAS, Outcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND], np.int8)


def _retried_rejections(
    retry: RetrySettings,
    produce: dict[str, np.ndarray],
    s: int,
    e: int,
    policies: Sequence[str],
    outcomes: Mapping,
    m_eff: int,
    leadership_end: int,
    result: dict[str, np.ndarray],
) -> None:
    """Per policy, for the rows [s, e) of one epoch: the producer's retries of the batches the policy rejected
    where the brokers appended them, and of the batches held behind them (retries.py): `retry_out_us` /
    `retry_appended_us` (the attempt appended; NEVER: as recorded) and `undelivered`. A batch the policy admits
    at an earlier attempt of a recorded retry (`_admitted_attempts`) is not rejected there."""
    appended = produce["offset"][s:e] >= 0
    for i, policy in enumerate(policies):
        outcome = result["outcome"][i, s:e]
        rejected = np.isin(outcome, _REJECTIONS) & appended
        if "early_start_us" in result:
            rejected &= result["early_start_us"][i, s:e] == NEVER
        if not rejected.any():
            continue
        isr = outcomes[policy].isr
        has_send = produce["has_send"][s:e]
        retried = replay_retries(
            t_start=produce["t_start_us"][s:e],
            t_local_done=produce["t_us"][s:e],
            t_answered=result["t_ack"][i, s:e],
            response_us=np.round(produce["client_side_ms"][s:e] * 1000).astype(np.int64),
            created=np.where(has_send, produce["t_send_us"][s:e], produce["t_start_us"][s:e]),
            connection=produce["connection_key"][s:e],
            rejected=rejected,
            fixed_backoff=produce["fixed_backoff"][s:e],
            admits=partial(_admits, isr, outcomes[ACKS_ALL.id].isr, int(produce["t_us"][e - 1]), m_eff),
            leadership_end=leadership_end,
            settings=retry,
        )
        if retried is None:
            continue
        if "retry_out_us" not in result:
            shape = result["t_ack"].shape
            result["retry_out_us"] = np.full(shape, NEVER, np.int64)
            result["retry_appended_us"] = np.full(shape, NEVER, np.int64)
            result["undelivered"] = np.zeros(shape, bool)
        result["retry_out_us"][i, s:e] = retried.out_at
        result["retry_appended_us"][i, s:e] = retried.appended_at
        result["undelivered"][i, s:e] = retried.undelivered


def _admits(isr: IsrTimeline, recorded: IsrTimeline, last_append: int, m_eff: int, t: np.ndarray) -> np.ndarray:
    """Whether an acks=all-style append at each time of `t` passes the min ISR check on the policy's ISR `isr`,
    up to the slice's `last_append`, and on the `recorded` ISR after it: a re-simulated ISR (acks=all@lag) knows
    the leader's log end offset, which a follower must reach to rejoin, only from the slice's appends (a retry
    admitted in a later bucket: the re-simulation there). The recorded ISR holds throughout the epoch."""
    size = np.where(t <= last_append, isr.isr_size_at(t), recorded.isr_size_at(t))
    return size >= m_eff


def _retried_times(result: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(retry_out_us, retry_appended_us, undelivered) of `_retried_rejections`, or None: nothing retried."""
    if "retry_out_us" not in result:
        return None
    return result["retry_out_us"], result["retry_appended_us"], result["undelivered"]


REJECTED, REJECTED_REPLAYED = "rejected", "rejected_replayed"


def rejection_truth(ctx: ReplayContext, outcome: np.ndarray, cluster: str) -> dict[str, int]:
    """The rejection ground truth over the produces the broker rejected with NOT_ENOUGH_REPLICAS (recorded
    acks=all: replay_inputs.rejected_below_min_isr; `outcome`: theirs, per policy): how many there are, and
    how many of them the replayed acks=all rejects too (the committed ISR below min.insync.replicas at the
    produce, as `Partition.appendRecordsToLeader` checks it), in all and for the group's `cluster`
    (`rejected|<cluster>`: the self-check judges each cluster). Empty when there are none. They are not
    written to produce_replay: without an offset their ack under another policy is not known."""
    if not outcome.shape[1]:
        return {}
    n = int(outcome.shape[1])
    replayed = int((outcome[ctx.policies.index(ACKS_ALL.id)] == Outcome.NOT_ENOUGH_REPLICAS).sum())
    return {
        REJECTED: n,
        REJECTED_REPLAYED: replayed,
        f"{REJECTED}|{cluster}": n,
        f"{REJECTED_REPLAYED}|{cluster}": replayed,
    }


def _recorded_policy(ctx: ReplayContext, acks: np.ndarray) -> np.ndarray:
    """Per request, the index of the policy it was recorded with: acks=-1 -> acks=all, 1 -> acks=1."""
    policies = ctx.policies
    out = np.full(acks.size, -1, np.int64)
    out[acks == -1] = policies.index(ACKS_ALL.id)
    out[acks == 1] = policies.index(ACKS_1.id)
    return out


class _AckProfiles:
    """Per policy, when a batch appended at another time on the same partition would be acknowledged.

    The followers' replication timeline is the recording's, whatever the producers do; what it means for
    an ack depends on the moment: while a follower stalls, every batch appended waits until the same
    instant (the follower is back, or removed from the ISR); while they are healthy, a batch waits a
    fetch round trip after its append. The replay's own acks on the partition give both: a batch
    appended at t' is acked no later than the first replayed batch appended at or after t' (which waits
    for the same followers' same fetches) nor later than t' plus the wait of the last one appended
    before t' (a healthy follower fetches it as fast; the first one after when none was before). After the
    partition's last acked batch of the group nothing later bounds it: there it is acked no earlier than that
    batch (the HW passes batches in offset order) and, when that batch waited longer than the group's median (a
    stall, over where it was acked), the median after its own append, not the stall again (README, "What the
    producer sees"). Only the rows the policy acked say so (`acked`, per policy).
    Where none of the partition's did (a retry appended in a later bucket than its partition's acked batches), the
    median wait of the policy's acked batches on the group's other partitions (the same leader's followers fetch
    them). Rows sorted by (pkey, append time)."""

    def __init__(self, pkey: np.ndarray, t: np.ndarray, t_ack: np.ndarray, acked: np.ndarray) -> None:
        self.t = t
        self.wait = t_ack - t
        self.run_start = np.empty(t.size, np.int64)
        self.run_end = np.empty(t.size, np.int64)
        acked_ack = np.where(acked, t_ack, NEVER)
        self.next_ack = np.empty_like(t_ack)  # per policy, the earliest ack among acked rows appended at or after
        self.last_acked = np.empty(t_ack.shape, np.int64)  # per policy, the last acked row at or before (-1: none)
        self.first_acked = np.empty(t_ack.shape, np.int64)  # ... the first acked row at or after (t.size: none)
        index = np.arange(t.size)
        for s, e in zip(*_runs(pkey), strict=True):
            self.run_start[s:e], self.run_end[s:e] = s, e
            self.next_ack[:, s:e] = np.minimum.accumulate(acked_ack[:, s:e][:, ::-1], axis=1)[:, ::-1]
            self.last_acked[:, s:e] = np.maximum.accumulate(np.where(acked[:, s:e], index[s:e], -1), axis=1)
            after = np.where(acked[:, s:e], index[s:e], t.size)[:, ::-1]
            self.first_acked[:, s:e] = np.minimum.accumulate(after, axis=1)[:, ::-1]
        self.typical_wait = [int(np.median(w[a])) if a.any() else NEVER for w, a in zip(self.wait, acked, strict=True)]

    def ack_at(self, policy: int, rows: np.ndarray, appended_at: np.ndarray) -> np.ndarray:
        """When the policy would acknowledge each of `rows` appended at `appended_at` instead (NEVER: the policy
        acked no batch of the group)."""
        out = np.empty(rows.size, np.int64)
        for k, (row, t_new) in enumerate(zip(rows.tolist(), appended_at.tolist(), strict=False)):
            start, end = self.run_start[row], self.run_end[row]
            times = self.t[start:end]
            at_or_after = start + int(np.searchsorted(times, t_new, "left"))
            before = start + int(np.searchsorted(times, t_new, "right")) - 1
            by_next = self.next_ack[policy, at_or_after] if at_or_after < end else NEVER
            nearest = int(self.last_acked[policy, before]) if before >= start else -1
            if nearest < start:
                nearest = int(self.first_acked[policy, start])
            by_last = NEVER
            if nearest < end:
                wait = int(self.wait[policy, nearest])
                if by_next == NEVER:  # after the partition's last acked batch of the group: nothing later bounds it
                    # acked no earlier than that batch (the HW passes batches in offset order), and a wait longer
                    # than the group's median is a stall's, over where that batch was acked
                    by_last = max(int(self.t[nearest]) + wait, t_new + min(wait, self.typical_wait[policy]))
                else:
                    by_last = t_new + wait
            if by_next == NEVER and by_last == NEVER and self.typical_wait[policy] != NEVER:
                by_last = t_new + self.typical_wait[policy]
            out[k] = min(by_next, by_last)
        return out


def _producer_view(
    ctx: ReplayContext,
    rules: ProducerRules,
    produce: dict[str, np.ndarray],
    t_response: np.ndarray,
    t_ack: np.ndarray,
    early_times: tuple[np.ndarray, np.ndarray] | None = None,
    outcome: np.ndarray | None = None,
    retried: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Per (policy, row): the broker's latency of the row's request as replayed (`broker_latency_ms`: from its
    replayed start to its response), its wait behind the connection's previous responses (`hol_wait_us`) and
    the producer-visible latency (`latency_ms`, connections.py); NaN for a batch the producer does not see
    acknowledged under the policy. `early_times`: `_admitted_attempts`'s; `outcome`: the policies' (None: all
    acked); `retried`: `_retried_rejections`'s."""
    order = np.lexsort((produce["line_number"], produce["source_file_id"]))
    starts, ends = _runs(produce["source_file_id"][order], produce["line_number"][order])
    request_of_row = np.empty(order.size, np.int64)
    request_of_row[order] = np.repeat(np.arange(starts.size), ends - starts)
    first = order[starts]
    client_side_us = np.round(produce["client_side_ms"][first] * 1000).astype(np.int64)
    t_start = produce["t_start_us"][first]
    service = t_response[:, first] - t_start + client_side_us
    has_send = produce["has_send"][order]
    send = produce["t_send_us"][order]
    send_first = np.minimum.reduceat(np.where(has_send, send, NEVER), starts)
    send_last = np.maximum.reduceat(np.where(has_send, send, -NEVER), starts)
    acked = np.ones(t_ack.shape, bool) if outcome is None else outcome == Outcome.ACKED
    profiles = _AckProfiles(produce["pkey"], produce["t_us"], t_ack, acked)
    rows_by_request = np.split(order, ends[:-1])
    client_side_of_row = client_side_us[request_of_row]
    t_start_of_row = t_start[request_of_row]
    early = _early_batches(produce, early_times, order, starts, rules.linger_us)

    def moved_response(policy: int, requests: np.ndarray, members: np.ndarray, begin: int) -> int:
        rows = np.concatenate([rows_by_request[r] for r in requests[members]])
        if early is not None:  # a batch that went out earlier under the policy is not in this request
            rows = rows[early.out_at[policy, rows] == NEVER]
            if not rows.size:
                return begin
        appended_at = produce["t_us"][rows] + (begin - t_start_of_row[rows])
        return int(np.max(profiles.ack_at(policy, rows, appended_at) + client_side_of_row[rows]))

    chained = chain_requests(
        connection=produce["connection_key"][first],
        t_start=t_start,
        t_response_sent=produce["t_log_us"][first],
        previous_response=produce["previous_response_us"][first],
        service=service,
        send_first=send_first,
        send_last=send_last,
        has_send=np.logical_or.reduceat(has_send, starts),
        linger_us=rules.linger_us,
        blocked_gap_us=rules.blocked_gap_us,
        max_in_flight=rules.max_in_flight,
        moved_response=moved_response,
        recorded_policy=_recorded_policy(ctx, produce["acks"][first]),
        ready_by_policy=None if early is None else early.ready,
        vanished_at=None if early is None else early.vanished_at,
    )
    floor = chained.policy_floor[:, request_of_row]
    since = np.where(produce["has_send"], produce["t_send_us"], floor)
    # the broker's view of the request as replayed: the recorded times (ms fields added as they are) and what
    # moving it changed (gold counts no record of it below that); the producer's adds the time before the
    # request's arrival and behind the connection's earlier responses
    moved_us = (chained.response - chained.start - service)[:, request_of_row]
    broker_latency_ms = (t_response - produce["t_start_us"] + moved_us) / 1000.0 + produce["client_side_ms"]
    start = chained.start[:, request_of_row]
    # a request the producer would have sent inside an earlier one can start before its own floor
    hol_wait_us = np.maximum(start - floor, 0).astype(np.float64)
    latency_ms = broker_latency_ms + ((start - floor) + (floor - since)) / 1000.0
    # A request leaves once its first batch is ready and the connection free (connections.py); a batch of it sent
    # after that went in a later request, at the next linger.ms step, taking as long at the broker (as gold counts
    # such records: transforms/gold._record_latency)
    later = produce["has_send"] & (since > start)
    if later.any():
        lingered = np.mod(start - since, rules.linger_us) if rules.linger_us > 0 else np.zeros_like(start)
        latency_ms = np.where(later, broker_latency_ms + lingered / 1000.0, latency_ms)
    if early is not None:
        # A batch that left its recorded request under a policy went out alone (the connection's other requests
        # are not replayed around it): acknowledged as a batch appended then on its partition (_AckProfiles),
        # answered with its request's response overheads, from its send time (else from when it went out).
        for policy, row in zip(*np.nonzero(early.out_at != NEVER), strict=True):
            out_at = int(early.out_at[policy, row])
            appended_at = int(early.appended_at[policy, row])
            ack = int(profiles.ack_at(policy, np.array([row]), np.array([appended_at]))[0])
            if ack == NEVER:  # no batch of the group acked under the policy says when: as recorded
                continue
            from_us = produce["t_send_us"][row] if produce["has_send"][row] else out_at
            latency_ms[policy, row] = (ack + client_side_of_row[row] - from_us) / 1000.0
            broker_latency_ms[policy, row] = (ack + client_side_of_row[row] - out_at) / 1000.0
            hol_wait_us[policy, row] = 0
    delivered = acked.copy()
    if retried is not None:
        # A batch retried under the policy (retries.py) is acknowledged as a batch appended then on its partition,
        # from its send time (else from its request's start under the policy); its request's response overheads.
        out_all, appended_all, undelivered = retried
        delivered &= ~undelivered
        for policy, row in zip(*np.nonzero(out_all != NEVER), strict=True):
            out_at = int(out_all[policy, row])
            ack = int(profiles.ack_at(policy, np.array([row]), appended_all[policy, row : row + 1])[0])
            delivered[policy, row] = ack < NEVER
            if ack < NEVER:
                answered = ack + client_side_of_row[row]
                latency_ms[policy, row] = (answered - since[policy, row]) / 1000.0
                broker_latency_ms[policy, row] = (answered - out_at) / 1000.0
                hol_wait_us[policy, row] = 0
    for values in (broker_latency_ms, latency_ms, hol_wait_us):
        values[~delivered] = np.nan
    return {"broker_latency_ms": broker_latency_ms, "hol_wait_us": hol_wait_us, "latency_ms": latency_ms}


@dataclass(frozen=True)
class _EarlyBatches:
    """The batches that leave their recorded request under a policy (`_admitted_attempts`), and what stays."""

    out_at: np.ndarray  # int64 (policies, rows): when the batch went out under the policy (NEVER: as recorded)
    appended_at: np.ndarray  # int64 (policies, rows): when the leader would have appended it then
    ready: np.ndarray  # int64 (policies, requests): the staying batches' ready time (-NEVER: none left or as recorded)
    vanished_at: np.ndarray  # int64 (policies, requests): every batch left, the first then (-NEVER: not all)


def _early_times(result: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(early_start_us, early_done_us) of `_admitted_attempts`, or None: no row of the group is in an episode."""
    if "early_start_us" not in result:
        return None
    return result["early_start_us"], result["early_done_us"]


def _early_batches(
    produce: dict[str, np.ndarray],
    early: tuple[np.ndarray, np.ndarray] | None,
    order: np.ndarray,
    starts: np.ndarray,
    linger_us: int,
) -> _EarlyBatches | None:
    """Per policy: a retried batch it admitted at an earlier attempt went out with that attempt (appended at its
    `t_local_done`); a batch held behind one went out once ready (its send time plus linger) and the retried
    batch had left (the attempt's start), never later than recorded. Per request (rows grouped by `order`, runs
    `starts`): the ready time of the batches that stay, or when all left, the first of them."""
    if early is None:
        return None
    early_start, early_done = early
    is_early = early_start != NEVER
    held = produce["held"]
    t_send, has_send = produce["t_send_us"], produce["has_send"]
    t_start = produce["t_start_us"]
    # a held batch goes out once ready and released, never later than its recorded request (without a send time:
    # as recorded)
    released = np.minimum(np.maximum(t_send + linger_us, early_start), t_start)
    leaves = is_early & (~held | has_send)
    out_at = np.where(leaves, np.where(held, released, early_start), NEVER)
    appended_at = np.where(held, produce["t_us"] + (released - t_start), early_done)
    appended_at = np.where(leaves, appended_at, NEVER)
    stays = ~leaves[:, order]
    send = np.where(has_send, t_send, 0)[order]
    timed = stays & has_send[order]
    last = np.maximum.reduceat(np.where(timed, send, -NEVER), starts, axis=1)
    first = np.minimum.reduceat(np.where(timed, send, NEVER), starts, axis=1)
    any_left = np.logical_or.reduceat(leaves[:, order], starts, axis=1)
    some_stay = np.logical_or.reduceat(timed, starts, axis=1)
    ready = np.where(any_left & some_stay, np.maximum(last, np.where(some_stay, first, 0) + linger_us), -NEVER)
    all_left = ~np.logical_or.reduceat(stays, starts, axis=1)
    vanished_at = np.where(all_left, np.minimum.reduceat(out_at[:, order], starts, axis=1), -NEVER)
    return _EarlyBatches(out_at, appended_at, ready, vanished_at)


def _long_table(ctx: ReplayContext, replayed: _Replayed, columns: Sequence[str]) -> pa.Table:
    """`produce_replay` rows (policy-major: one block of the group's produces per policy) as Arrow,
    strings dictionary-encoded, with the contract's `columns` (a subset, in that order)."""
    policies = replayed.policies
    n_policies, n_rows = len(policies), replayed.n
    produce, result = replayed.produce, replayed.result
    tile = lambda values: np.tile(values, n_policies)  # noqa: E731  (a produce's value on each of its policy rows)
    timestamp_us = pa.timestamp("us", tz="UTC")
    source_ids = np.unique(produce["source_file_id"])
    leo = [ctx.leo_sources.get(c, "follower_fetches") for c in replayed.clusters]

    def window_ms(name: str) -> pa.Array:
        return _nan_as_null((result[name] / 1000.0).reshape(-1))

    built: dict[str, Callable[[], pa.Array]] = {
        "cluster": lambda: _dictionary(tile(produce["cluster"]), replayed.clusters),
        "topic": lambda: _dictionary(tile(produce["topic"]), replayed.topics),
        "partition": lambda: pa.array(tile(produce["partition"]), pa.int32()),
        "leader_epoch": lambda: pa.array(tile(produce["leader_epoch"]), pa.int32()),
        "base_offset": lambda: pa.array(tile(produce["offset"]), pa.int64()),
        "broker_id": lambda: pa.array(tile(produce["broker_id"]), pa.int32()),
        "bytes": lambda: pa.array(tile(produce["bytes"]), pa.int32()),
        "records": lambda: pa.array(tile(produce["records"]), pa.int32(), mask=~tile(produce["records_known"])),
        "recorded_acks": lambda: pa.array(tile(produce["acks"]), pa.int32()),
        "policy": lambda: _dictionary(np.repeat(np.arange(n_policies), n_rows), policies),
        "outcome": lambda: _dictionary(result["outcome"].reshape(-1), OUTCOMES),
        "t_start": lambda: pa.array(tile(produce["t_start_us"]), timestamp_us),
        "t_local_done": lambda: pa.array(tile(produce["t_us"]), timestamp_us),
        "t_ack": lambda: pa.array(result["t_ack"].reshape(-1), timestamp_us),
        "t_ack_observed": lambda: pa.array(
            tile(produce["t_ack_observed_us"]), timestamp_us, mask=~tile(produce["observed_valid"])
        ),
        "t_response": lambda: pa.array(result["t_response"].reshape(-1), timestamp_us),
        "ack_wait_ms": lambda: pa.array(((result["t_ack"] - produce["t_us"]) / 1000.0).reshape(-1)),
        "latency_ms": lambda: _nan_as_null(result["latency_ms"].reshape(-1)),
        "broker_latency_ms": lambda: _nan_as_null(result["broker_latency_ms"].reshape(-1)),
        "hol_wait_ms": lambda: _nan_as_null((result["hol_wait_us"] / 1000.0).reshape(-1)),
        "t_send": lambda: pa.array(tile(produce["t_send_us"]), timestamp_us, mask=~tile(produce["has_send"])),
        "copies_at_ack": lambda: pa.array(result["copies_at_ack"].reshape(-1), pa.int32()),
        "exposure_ms": lambda: _nan_as_null((result["exposure_us"] / 1000.0).reshape(-1)),
        "full_replication_ms": lambda: _nan_as_null((result["full_replication_us"] / 1000.0).reshape(-1)),
        "loss_kafka_election": lambda: pa.array(result["loss_kafka_election"].reshape(-1)),
        "loss_longest_log_election": lambda: pa.array(result["loss_longest_log_election"].reshape(-1)),
        "loss_kafka_election_min": lambda: pa.array(result["loss_kafka_election_min"].reshape(-1)),
        "loss_longest_log_election_min": lambda: pa.array(result["loss_longest_log_election_min"].reshape(-1)),
        "offline_at_failure": lambda: pa.array(result["offline_at_failure"].reshape(-1)),
        **{name.removesuffix("_us") + "_ms": partial(window_ms, name) for name in LOSS_WINDOWS},
        "isr_source": lambda: _dictionary(result["isr_source"].reshape(-1), ISR_SOURCES),
        "leo_source": lambda: _dictionary(tile(produce["cluster"]), leo),
        "source_file": lambda: _dictionary(
            tile(np.searchsorted(source_ids, produce["source_file_id"])), [ctx.source_files[int(i)] for i in source_ids]
        ),
        "line_number": lambda: pa.array(tile(produce["line_number"]), pa.int64()),
        "event_date": lambda: pa.array(tile(produce["event_day"]).astype(np.int32), pa.date32()),
        "replay_run_id": lambda: _dictionary(np.zeros(n_policies * n_rows, np.int32), [ctx.run_id]),
    }
    return pa.table({name: built[name]() for name in columns})


def _written_files(ctx: ReplayContext, replayed: _Replayed) -> pa.Table:
    """Write the group's rows as Delta data files, one per (cluster, event_date), one Parquet row group
    per policy, and describe them (WRITTEN_FILE: what the driver commits, with the outcome counts)."""
    policies = replayed.policies
    columns = [f.name for f in PRODUCE_REPLAY if f.name not in PARTITION_COLUMNS]
    produce = replayed.produce
    key = produce["cluster"].astype(np.int64) << 32 | (produce["event_day"].astype(np.int64) & 0xFFFFFFFF)
    values = np.unique(key)
    records: list[dict] = []
    for value in values:
        part = replayed if values.size == 1 else replayed.subset(key == value)
        table = _long_table(ctx, part, columns)
        blocks = [table.slice(i * part.n, part.n) for i in range(len(policies))]
        partition_values = {
            "cluster": replayed.clusters[int(part.produce["cluster"][0])],
            "event_date": str(np.datetime64(int(part.produce["event_day"][0]), "D")),
        }
        if ctx.writer is None:
            raise RuntimeError("the replay groups write data files only with replay.writer: arrow")
        record = ctx.writer.write(partition_values, blocks)
        counts = {
            f"{policy}|{OUTCOMES[code]}": int(count)
            for policy, outcome in zip(policies, part.result["outcome"], strict=False)
            for code, count in enumerate(np.bincount(outcome, minlength=len(OUTCOMES)))
            if count
        }
        truth = _truth_counts(ctx, part)
        if not records:  # a group's rejections count once
            truth.update(replayed.rejections)
        records.append({**record, "outcome_counts": json.dumps(counts), "ground_truth": json.dumps(truth)})
    if not records and replayed.rejections:  # every produce of the group was rejected: its counts, no data file
        records.append(_rejections_row(replayed.rejections))
    return pa.Table.from_pylist(records, schema=WRITTEN_FILE_ARROW)


def _rejections_row(rejections: dict[str, int]) -> dict:
    """A WRITTEN_FILE row without a file: a group's rejection ground truth alone."""
    return {"path": "", "size_bytes": 0, "modification_time_ms": 0, "partition_values": "{}", "num_records": 0,
            "stats": "{}", "outcome_counts": "{}", "ground_truth": json.dumps(rejections)}  # fmt: skip


def _truth_counts(ctx: ReplayContext, replayed: _Replayed) -> dict[str, int]:
    """The ground truth's counts over these rows (stage._ground_truth, without reading them back): produces
    recorded with acks=all that the replayed acks=all acks; of those with the broker's own ack time, how
    many the replay's response time matches within 1 and 2 ms."""
    acks_all_row = ctx.policies.index(ACKS_ALL.id)
    truth = (replayed.produce["acks"] == -1) & (replayed.result["outcome"][acks_all_row] == Outcome.ACKED)
    observed = truth & replayed.produce["observed_valid"]
    error_us = np.abs(replayed.result["t_response"][acks_all_row] - replayed.produce["t_ack_observed_us"])[observed]
    return {
        "n": int(truth.sum()), "observed": int(observed.sum()),
        "within_1ms": int((error_us <= 1000).sum()), "within_2ms": int((error_us <= 2000).sum()),
    }  # fmt: skip


def empty_output(ctx: ReplayContext) -> pa.Table:
    return (WRITTEN_FILE_ARROW if ctx.writer is not None or ctx.rejections_only else PRODUCE_REPLAY_ARROW).empty_table()


def replay_group(ctx: ReplayContext, produces: pa.Table, events: pa.Table) -> pa.Table:
    """Replay every produce of one (cluster, leader broker, time bucket) group under every policy.

    Returns the group's produce_replay rows (PRODUCE_REPLAY_ARROW), or, with `ctx.writer`, writes them
    as data files and returns their descriptions (WRITTEN_FILE_ARROW).
    """
    replayed = _replay(ctx, produces, events) if produces.num_rows else None
    if replayed is None:
        return empty_output(ctx)
    if ctx.rejections_only:
        if not replayed.rejections:
            return empty_output(ctx)
        return pa.Table.from_pylist([_rejections_row(replayed.rejections)], schema=WRITTEN_FILE_ARROW)
    if ctx.writer is not None:
        return _written_files(ctx, replayed)
    if not replayed.n:
        return empty_output(ctx)
    table = _long_table(ctx, replayed, PRODUCE_REPLAY_ARROW.names)
    return pa.table(
        [col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col for col in table.columns],
        schema=PRODUCE_REPLAY_ARROW,
    )
