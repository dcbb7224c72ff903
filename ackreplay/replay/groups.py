"""The pandas side of the replay: one group's rows -> the kernel -> produce_replay rows.

Runs inside `applyInPandas` on the executors; everything per produce is NumPy over the group's arrays.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ackreplay.replay.kernel import OUTCOME_NAMES, EpochInputs, ReplayOptions, replay_epoch
from schemas.replay import REPLAY_GROUP_OUTPUT
from transforms.replay_inputs import KIND_FETCH, KIND_ISR, KIND_PRODUCE

OUTPUT_COLUMNS = [f.name for f in REPLAY_GROUP_OUTPUT.fields]


def _isr_timeline(isr_rows: pd.DataFrame, followers: list[int], start_isr) -> tuple[np.ndarray, np.ndarray, str]:
    """(change times, membership (K+1, F), source) from the epoch's committed ISR changes."""
    if start_isr is not None and len(start_isr):
        first = [f in set(start_isr) for f in followers]
    elif len(isr_rows):
        first = [f in set(isr_rows.iloc[0]["isr"]) for f in followers]
    else:
        first = [True] * len(followers)
    if not len(isr_rows) and (start_isr is None or not len(start_isr)):
        return np.empty(0, np.int64), np.array([first], dtype=bool).reshape(1, len(followers)), "assumed_full"
    ordered = isr_rows.sort_values("t_us", kind="stable")
    times = ordered["t_us"].to_numpy(np.int64)
    rows = [first] + [[f in set(isr) for f in followers] for isr in ordered["isr"]]
    return times, np.array(rows, dtype=bool).reshape(len(rows), len(followers)), "logs"


def replay_group(pdf: pd.DataFrame, quorum_sizes: tuple[int, ...], lag_ms: tuple[float, ...], strict_min_isr: bool) -> pd.DataFrame:
    """Replay the produces of one (cluster, topic, partition, leader epoch, bucket) group."""
    produces = pdf[pdf["kind"] == KIND_PRODUCE]
    if produces.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in OUTPUT_COLUMNS})
    first = produces.iloc[0]
    leader = int(first["broker_id"])
    followers = [int(r) for r in first["replicas"] if int(r) != leader]
    events = pdf[pdf["kind"] == KIND_FETCH].sort_values("t_us", kind="stable")
    leo_times, leo_offsets = [], []
    for f in followers:
        mine = events[events["follower_id"] == f]
        leo_times.append(mine["t_us"].to_numpy(np.int64))
        leo_offsets.append(mine["offset"].to_numpy(np.int64))
    change_times, membership, isr_source = _isr_timeline(pdf[pdf["kind"] == KIND_ISR], followers, first["start_isr"])
    inputs = EpochInputs(
        base_offset=produces["offset"].to_numpy(np.int64),
        t_local_done=produces["t_us"].to_numpy(np.int64),
        timeout_us=produces["timeout_ms"].to_numpy(np.int64) * 1000,
        appended=np.ones(len(produces), dtype=bool),
        follower_ids=np.array(followers, dtype=np.int32),
        leo_times=tuple(leo_times),
        leo_offsets=tuple(leo_offsets),
        isr_change_times=change_times,
        isr_membership=membership,
        min_insync_replicas=int(first["min_insync_replicas"]),
        epoch_end=int(first["epoch_end_us"]),
        quorum_sizes=quorum_sizes,
        replica_lag_time_max_ms=lag_ms,
        # A bucket that starts mid-epoch: the ISR re-simulation starts where this group's data starts.
        epoch_start=max(int(first["epoch_start_us"]), int(pdf["t_us"].min())),
    )
    results = replay_epoch(inputs, ReplayOptions(strict_min_isr=strict_min_isr))
    t_ld = inputs.t_local_done
    t_start = produces["t_start_us"].to_numpy(np.int64)
    client_side_ms = (produces["response_queue_time_ms"].to_numpy(float) + produces["send_time_ms"].to_numpy(float))
    common = {
        "cluster": produces["cluster"].to_numpy(),
        "topic": produces["topic"].to_numpy(),
        "partition": produces["partition"].to_numpy(),
        "leader_epoch": produces["leader_epoch"].to_numpy(),
        "base_offset": inputs.base_offset,
        "broker_id": produces["broker_id"].to_numpy(),
        "bytes": produces["records_size_bytes"].to_numpy(),
        "recorded_acks": produces["acks"].to_numpy(),
        "t_start_us": t_start,
        "t_local_done_us": t_ld,
        "t_ack_observed_us": produces["t_ack_observed_us"].to_numpy(),
        "source_file": produces["source_file"].to_numpy(),
        "line_number": produces["line_number"].to_numpy(),
        "event_date": produces["event_date"].to_numpy(),
    }
    frames = []
    names = np.array([OUTCOME_NAMES[i] for i in range(len(OUTCOME_NAMES))], dtype=object)
    for policy, res in results.items():
        t_ack = res.t_ack
        frames.append(
            pd.DataFrame(
                {
                    **common,
                    "policy": policy,
                    "outcome": names[res.outcome.astype(np.int64)],
                    "t_ack_us": t_ack,
                    "ack_wait_ms": (t_ack - t_ld) / 1000.0,
                    # per batch here; the stage replaces it with the request's (t_response) latency
                    "latency_ms": (t_ack - t_start) / 1000.0 + client_side_ms,
                    "copies_at_ack": res.copies_at_ack.astype(np.int32),
                    "exposure_ms": res.exposure_us / 1000.0,
                    "full_replication_ms": res.full_replication_us / 1000.0,
                    "loss_kafka_election": res.loss_kafka_election,
                    "loss_longest_log_election": res.loss_longest_log_election,
                    "isr_source": "simulated" if "@lag=" in policy else isr_source,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)[OUTPUT_COLUMNS]
