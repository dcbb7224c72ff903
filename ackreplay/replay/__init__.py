"""Replay of recorded produces under alternative ack policies (NumPy kernel; see kernel.py)."""

from ackreplay.replay.kernel import (
    NEVER,
    OUTCOME_NAMES,
    EpochInputs,
    IsrTimeline,
    Outcome,
    PolicyOutcome,
    ReplayOptions,
    lag_policy_id,
    next_eligible_leader_replicas,
    policy_ids,
    replay_epoch,
    simulate_isr,
    to_columns,
)

__all__ = [
    "NEVER",
    "OUTCOME_NAMES",
    "EpochInputs",
    "IsrTimeline",
    "Outcome",
    "PolicyOutcome",
    "ReplayOptions",
    "lag_policy_id",
    "next_eligible_leader_replicas",
    "policy_ids",
    "replay_epoch",
    "simulate_isr",
    "to_columns",
]
