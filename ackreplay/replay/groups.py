"""The Python side of the replay: one (cluster, leader broker, time bucket) group -> the kernel -> produce_replay rows.

Runs inside a cogrouped `applyInArrow` on the executors: the left side holds the group's produces,
the right side its follower LEO events, ISR changes and one meta row per (partition, leader epoch).
Grouping by the leader broker rather than by partition keeps every partition of a produce request
in one group (a request goes to one broker and is logged on one line), so the request's response
time (its slowest partition) is computed here and no shuffle is needed for it in Spark.

Everything per produce is NumPy over Arrow buffers; every column crossing back to Spark is numeric
(strings are mapped from codes and keys in Spark).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ackreplay.replay.kernel import NEVER, EpochInputs, ReplayOptions, lag_policy_id, replay_epoch
from schemas.replay import ISR_SOURCES, REPLAY_GROUP_OUTPUT
from transforms.replay_inputs import KIND_FETCH, KIND_ISR, KIND_META

OUTPUT_ARROW_SCHEMA = pa.schema(
    [
        pa.field(
            f.name,
            {
                "LongType()": pa.int64(),
                "IntegerType()": pa.int32(),
                "DoubleType()": pa.float64(),
                "BooleanType()": pa.bool_(),
            }[repr(f.dataType)],
            f.nullable,
        )
        for f in REPLAY_GROUP_OUTPUT.fields
    ]
)
# Produce-side columns copied to every policy's row unchanged (in the group's sorted order).
PASSTHROUGH = {
    "base_offset": "offset",
    "broker_id": "broker_id",
    "bytes": "bytes",
    "recorded_acks": "acks",
    "t_start_us": "t_start_us",
    "t_local_done_us": "t_us",
    "t_ack_observed_us": "t_ack_observed_us",
    "source_file_id": "source_file_id",
    "line_number": "line_number",
    "event_day": "event_day",
    "pkey": "pkey",
    "leader_epoch": "leader_epoch",
}


def policy_order(quorum_sizes: tuple[int, ...], lag_ms: tuple[float, ...]) -> list[str]:
    """The policy ids in the order their codes are numbered (the kernel's order)."""
    ids = ["acks=1", "acks=all", "min.insync"] + [f"quorum={q}" for q in quorum_sizes]
    return list(dict.fromkeys(ids + [lag_policy_id(x) for x in lag_ms]))


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
) -> tuple[EpochInputs, str]:
    """The kernel's inputs for one (partition, leader epoch) from plain arrays, and the ISR source.

    Events must be sorted by time. The ISR re-simulation starts where this slice's request-log data
    (produces, LEO events) starts when that is later than the epoch start (a bucket that starts
    mid-epoch, or a request log recorded from some time after the leader was elected).
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
        appended=np.ones(base_offset.size, dtype=bool),
        follower_ids=np.array(followers, dtype=np.int32),
        leo_times=tuple(event_t[event_follower == f] for f in followers),
        leo_offsets=tuple(event_offset[event_follower == f] for f in followers),
        isr_change_times=change_t,
        isr_membership=membership,
        min_insync_replicas=int(min_insync_replicas),
        epoch_end=int(epoch_end_us),
        quorum_sizes=quorum_sizes,
        replica_lag_time_max_ms=lag_ms,
        epoch_start=max(int(epoch_start_us), first_data),
    )
    return inputs, isr_source


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


def _request_max(values: np.ndarray, request_key: np.ndarray) -> np.ndarray:
    """Per row, the maximum of `values` (policies, n) over the rows of the same request (axis 1)."""
    order = np.argsort(request_key, kind="stable")
    starts, _ = _runs(request_key[order])
    if starts.size == request_key.size:  # one partition per request: nothing to combine
        return values
    run_max = np.maximum.reduceat(values[:, order], starts, axis=1)
    run_of = np.repeat(np.arange(starts.size), np.diff(np.append(starts, request_key.size)))
    out = np.empty_like(values)
    out[:, order] = run_max[:, run_of]
    return out


def _nan_as_null(values: np.ndarray) -> pa.Array:
    """Not acknowledged (NaN in the kernel) is null in the table; inf (never within the data) stays."""
    return pa.array(values, pa.float64(), mask=np.isnan(values))


def empty_output() -> pa.Table:
    return OUTPUT_ARROW_SCHEMA.empty_table()


def replay_broker_bucket(
    produces: pa.Table,
    events: pa.Table,
    quorum_sizes: tuple[int, ...],
    lag_ms: tuple[float, ...],
    strict_min_isr: bool,
) -> pa.Table:
    """Replay every produce of one (cluster, leader broker, time bucket) group under every policy."""
    if produces.num_rows == 0:
        return empty_output()
    policies = policy_order(quorum_sizes, lag_ms)
    options = ReplayOptions(strict_min_isr=strict_min_isr)

    pkey, epoch, t = _np(produces, "pkey"), _np(produces, "leader_epoch"), _np(produces, "t_us")
    order = np.lexsort((t, epoch, pkey))
    produces = produces.take(pa.array(order))
    pkey, epoch, t = pkey[order], epoch[order], t[order]
    offset, timeout_ms = _np(produces, "offset"), _np(produces, "timeout_ms")
    n = produces.num_rows

    kind = _np(events, "kind")
    fetch = events.filter(pa.array(kind == KIND_FETCH))
    f_pkey, f_epoch = _np(fetch, "pkey"), _np(fetch, "leader_epoch")
    f_t, f_follower, f_offset = _np(fetch, "t_us"), _np(fetch, "follower_id"), _np(fetch, "offset")
    f_order = np.lexsort((f_t, f_epoch, f_pkey))
    f_pkey, f_epoch, f_t, f_follower, f_offset = (a[f_order] for a in (f_pkey, f_epoch, f_t, f_follower, f_offset))
    fetch_runs = {(int(f_pkey[s]), int(f_epoch[s])): (s, e) for s, e in zip(*_runs(f_pkey, f_epoch))}

    meta = events.filter(pa.array(kind == KIND_META)).to_pylist()
    meta_of = {(m["pkey"], m["leader_epoch"]): m for m in meta}
    isr = events.filter(pa.array(kind == KIND_ISR))
    i_pkey, i_epoch, i_t = _np(isr, "pkey"), _np(isr, "leader_epoch"), _np(isr, "t_us")
    i_order = np.lexsort((i_t, i_epoch, i_pkey))
    i_isr = isr.column("isr").to_pylist()
    i_isr = [i_isr[j] for j in i_order]
    i_pkey, i_epoch, i_t = i_pkey[i_order], i_epoch[i_order], i_t[i_order]
    isr_runs = {(int(i_pkey[s]), int(i_epoch[s])): (s, e) for s, e in zip(*_runs(i_pkey, i_epoch))}

    p = len(policies)
    outcome = np.zeros((p, n), np.int32)
    t_ack = np.empty((p, n), np.int64)
    copies = np.zeros((p, n), np.int32)
    exposure = np.empty((p, n), np.float64)
    full_replication = np.empty((p, n), np.float64)
    loss_kafka = np.zeros((p, n), bool)
    loss_longest = np.zeros((p, n), bool)
    isr_source_code = np.empty((p, n), np.int32)
    keep = np.ones(n, dtype=bool)
    for s, e in zip(*_runs(pkey, epoch)):
        key = (int(pkey[s]), int(epoch[s]))
        m = meta_of.get(key)
        if m is None:  # the stage only sends produces whose partition and epoch are known
            keep[s:e] = False
            continue
        fs, fe = fetch_runs.get(key, (0, 0))
        is_, ie = isr_runs.get(key, (0, 0))
        inputs, isr_source = epoch_inputs(
            base_offset=offset[s:e],
            t_local_done=t[s:e],
            timeout_ms=timeout_ms[s:e],
            leader=int(m["broker_id"]),
            replicas=m["replicas"],
            event_follower=f_follower[fs:fe],
            event_t=f_t[fs:fe],
            event_offset=f_offset[fs:fe],
            change_times=i_t[is_:ie],
            change_isrs=i_isr[is_:ie],
            start_isr=m["isr"],
            min_insync_replicas=m["min_insync_replicas"],
            epoch_start_us=m["epoch_start_us"],
            epoch_end_us=m["epoch_end_us"],
            quorum_sizes=quorum_sizes,
            lag_ms=lag_ms,
        )
        results = replay_epoch(inputs, options)
        for i, policy in enumerate(policies):
            res = results[policy]
            outcome[i, s:e] = res.outcome
            t_ack[i, s:e] = res.t_ack
            copies[i, s:e] = res.copies_at_ack
            exposure[i, s:e] = res.exposure_us
            full_replication[i, s:e] = res.full_replication_us
            loss_kafka[i, s:e] = res.loss_kafka_election
            loss_longest[i, s:e] = res.loss_longest_log_election
            source = "simulated" if "@lag=" in policy else isr_source
            isr_source_code[i, s:e] = ISR_SOURCES.index(source)
    if not keep.all():
        produces = produces.filter(pa.array(keep))
        t = t[keep]
        outcome, t_ack, copies, exposure, full_replication, loss_kafka, loss_longest, isr_source_code = (
            a[:, keep] for a in (outcome, t_ack, copies, exposure, full_replication, loss_kafka, loss_longest, isr_source_code)
        )
        n = produces.num_rows
        if n == 0:
            return empty_output()

    # The broker answers a request when all its partitions are done: the client sees the latest t_ack.
    request_key = (_np(produces, "source_file_id", np.int64) << 40) | _np(produces, "line_number", np.int64)
    t_response = _request_max(t_ack, request_key)
    t_start = _np(produces, "t_start_us", np.int64)
    client_side_ms = _np(produces, "client_side_ms", np.float64)
    every_policy = pa.array(np.tile(np.arange(n), p))
    columns = {name: produces.column(src).take(every_policy) for name, src in PASSTHROUGH.items()}
    columns.update(
        {
            "policy_code": np.repeat(np.arange(p, dtype=np.int32), n),
            "outcome_code": outcome.reshape(-1),
            "t_ack_us": t_ack.reshape(-1),
            "t_response_us": t_response.reshape(-1),
            "ack_wait_ms": ((t_ack - t) / 1000.0).reshape(-1),
            "latency_ms": ((t_response - t_start) / 1000.0 + client_side_ms).reshape(-1),
            "copies_at_ack": copies.reshape(-1),
            "exposure_ms": _nan_as_null((exposure / 1000.0).reshape(-1)),
            "full_replication_ms": _nan_as_null((full_replication / 1000.0).reshape(-1)),
            "loss_kafka_election": loss_kafka.reshape(-1),
            "loss_longest_log_election": loss_longest.reshape(-1),
            "isr_source_code": isr_source_code.reshape(-1),
        }
    )
    arrays = [
        pa.array(columns[f.name], f.type) if isinstance(columns[f.name], np.ndarray) else columns[f.name].cast(f.type)
        for f in OUTPUT_ARROW_SCHEMA
    ]
    return pa.table(arrays, schema=OUTPUT_ARROW_SCHEMA)
