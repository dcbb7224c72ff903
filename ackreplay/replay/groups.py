"""The pandas side of the replay: one group's rows -> the kernel -> produce_replay rows (numeric).

Runs inside `applyInPandas` on the executors. Everything per produce is NumPy over the group's
arrays, and every column crossing back to Spark is numeric (strings are mapped from codes in Spark).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ackreplay.replay.kernel import EpochInputs, ReplayOptions, lag_policy_id, replay_epoch
from schemas.replay import ISR_SOURCES, REPLAY_GROUP_OUTPUT
from transforms.replay_inputs import KIND_FETCH, KIND_ISR, KIND_META, KIND_PRODUCE

OUTPUT_COLUMNS = [f.name for f in REPLAY_GROUP_OUTPUT.fields]


def policy_order(quorum_sizes: tuple[int, ...], lag_ms: tuple[float, ...]) -> list[str]:
    """The policy ids in the order their codes are numbered (the kernel's order)."""
    ids = ["acks=1", "acks=all", "min.insync"] + [f"quorum={q}" for q in quorum_sizes]
    return list(dict.fromkeys(ids + [lag_policy_id(x) for x in lag_ms]))


def _isr_timeline(isr_rows: pd.DataFrame, followers: list[int], start_isr) -> tuple[np.ndarray, np.ndarray, str]:
    """(change times, membership (K+1, F), source) from the epoch's committed ISR changes."""
    has_start = start_isr is not None and len(start_isr) > 0
    if not has_start and isr_rows.empty:
        return np.empty(0, np.int64), np.ones((1, len(followers)), dtype=bool), "assumed_full"
    ordered = isr_rows.sort_values("t_us", kind="stable")
    first_isr = start_isr if has_start else ordered.iloc[0]["isr"]
    rows = [[f in set(first_isr) for f in followers]] + [[f in set(isr) for f in followers] for isr in ordered["isr"]]
    return ordered["t_us"].to_numpy(np.int64), np.array(rows, dtype=bool).reshape(len(rows), len(followers)), "logs"


def _empty() -> pd.DataFrame:
    return pd.DataFrame({f.name: pd.Series([], dtype=object) for f in REPLAY_GROUP_OUTPUT.fields})


def replay_group(
    pdf: pd.DataFrame, quorum_sizes: tuple[int, ...], lag_ms: tuple[float, ...], strict_min_isr: bool
) -> pd.DataFrame:
    """Replay the produces of one (cluster, topic, partition, leader epoch, bucket) group."""
    kind = pdf["kind"].to_numpy()
    produces = pdf[kind == KIND_PRODUCE]
    meta_rows = pdf[kind == KIND_META]
    if produces.empty or meta_rows.empty:
        return _empty()
    meta = meta_rows.iloc[0]
    leader = int(meta["broker_id"])
    followers = [int(r) for r in meta["replicas"] if int(r) != leader]
    events = pdf[kind == KIND_FETCH].sort_values("t_us", kind="stable")
    event_follower = events["follower_id"].to_numpy()
    event_t, event_offset = events["t_us"].to_numpy(np.int64), events["offset"].to_numpy(np.int64)
    leo_times = tuple(event_t[event_follower == f] for f in followers)
    leo_offsets = tuple(event_offset[event_follower == f] for f in followers)
    change_times, membership, isr_source = _isr_timeline(pdf[kind == KIND_ISR], followers, meta["isr"])
    t_ld = produces["t_us"].to_numpy(np.int64)
    inputs = EpochInputs(
        base_offset=produces["offset"].to_numpy(np.int64),
        t_local_done=t_ld,
        timeout_us=produces["timeout_ms"].to_numpy(np.int64) * 1000,
        appended=np.ones(len(produces), dtype=bool),
        follower_ids=np.array(followers, dtype=np.int32),
        leo_times=leo_times,
        leo_offsets=leo_offsets,
        isr_change_times=change_times,
        isr_membership=membership,
        min_insync_replicas=int(meta["min_insync_replicas"]),
        epoch_end=int(meta["epoch_end_us"]),
        quorum_sizes=quorum_sizes,
        replica_lag_time_max_ms=lag_ms,
        # A bucket that starts mid-epoch: the ISR re-simulation starts where this group's data starts.
        epoch_start=max(int(meta["epoch_start_us"]), int(pdf["t_us"].min())),
    )
    results = replay_epoch(inputs, ReplayOptions(strict_min_isr=strict_min_isr))
    codes = {policy: i for i, policy in enumerate(policy_order(quorum_sizes, lag_ms))}
    t_start = produces["t_start_us"].to_numpy(np.int64)
    client_side_ms = produces["response_queue_time_ms"].to_numpy(float) + produces["send_time_ms"].to_numpy(float)
    n = len(produces)
    common = {
        "group_id": produces["group_id"].to_numpy(np.int64),
        "base_offset": inputs.base_offset,
        "broker_id": np.full(n, leader, dtype=np.int32),
        "bytes": produces["records_size_bytes"].to_numpy(),
        "recorded_acks": produces["acks"].to_numpy(),
        "t_start_us": t_start,
        "t_local_done_us": t_ld,
        "t_ack_observed_us": produces["t_ack_observed_us"].to_numpy(),
        "source_file_id": produces["source_file_id"].to_numpy(),
        "line_number": produces["line_number"].to_numpy(),
        "event_day": produces["event_day"].to_numpy(),
    }
    frames = []
    for policy, res in results.items():
        t_ack = res.t_ack
        source = "simulated" if "@lag=" in policy else isr_source
        frames.append(
            pd.DataFrame(
                {
                    **common,
                    "policy_code": np.full(n, codes[policy], dtype=np.int32),
                    "outcome_code": res.outcome.astype(np.int32),
                    "t_ack_us": t_ack,
                    "ack_wait_ms": (t_ack - t_ld) / 1000.0,
                    # per batch here; the stage turns it into the request's (t_response) latency
                    "latency_ms": (t_ack - t_start) / 1000.0 + client_side_ms,
                    "copies_at_ack": res.copies_at_ack.astype(np.int32),
                    "exposure_ms": res.exposure_us / 1000.0,
                    "full_replication_ms": res.full_replication_us / 1000.0,
                    "loss_kafka_election": res.loss_kafka_election,
                    "loss_longest_log_election": res.loss_longest_log_election,
                    "isr_source_code": np.full(n, ISR_SOURCES.index(source), dtype=np.int32),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)[OUTPUT_COLUMNS]
