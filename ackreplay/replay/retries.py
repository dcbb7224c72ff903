"""What a producer does with a batch a policy rejects where the recording did not: it retries it.

A policy that checks min.insync.replicas (acks=all, acks=all@lag, min.insync) rejects a batch appended while its
ISR was below min ISR with NOT_ENOUGH_REPLICAS (or, up to Kafka 3.6, answers NOT_ENOUGH_REPLICAS_AFTER_APPEND once
the high watermark passed it below min ISR). Both errors are retriable, so the producer sends the batch again
(`Sender.canRetry`) until a leader appends it or `delivery.timeout.ms` after the batch was created expires
(`RecordAccumulator.expiredBatches`):

- between attempts it backs off: `retry.backoff.ms` (100) fixed in the Java client before 3.7
  (`RecordAccumulator.shouldBackoff`), from 3.7 `ExponentialBackoff(retry.backoff.ms, 2, retry.backoff.max.ms, 0.2)`
  of the attempts so far (KIP-580), counted here at its expectation (the jitter is uniform in ±20%, the result
  capped at `retry.backoff.max.ms`);
- an attempt is rejected at once, at append (`Partition.appendRecordsToLeader`), so the next one leaves a
  back-off after the rejection reached the producer: attempt k+1 starts at attempt k's start + the request's
  own time until append + its response time (queue and send) + the back-off. On the keyless 3.6.2 corpus trace
  the brokers' 665 recorded retries started a median 101.6 ms after the previous attempt's response was sent;
- while a batch is retried the producer sends nothing else to its partition (`RecordAccumulator.reenqueue`
  puts it back at the head of the partition's queue, `drainBatchesForOneNode` takes only the head): a batch
  created meanwhile on the same connection goes out when the retried one does, and is itself checked then.

An attempt is appended when the policy's committed ISR (recorded, or re-simulated for acks=all@lag) is not below
min ISR at its append. Attempts are replayed within the leader's epoch only: a batch still rejected when the
leadership ends (its retries go to the next leader, another replay group) or when its delivery timeout expires
is not delivered in the replay (`undelivered`), and has no latency.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ackreplay.replay.kernel.model import NEVER

# KIP-580's ExponentialBackoff in the producer: multiplier and jitter (CommonClientConfigs.RETRY_BACKOFF_EXP_BASE,
# RETRY_BACKOFF_JITTER)
_MULTIPLIER, _JITTER = 2.0, 0.2
# at most this many attempts of one batch are replayed (120 s of delivery timeout at a 100 ms back-off: 1,200)
_MAX_ATTEMPTS = 100_000


@dataclass(frozen=True)
class RetrySettings:
    """The producers' retry.backoff.ms, retry.backoff.max.ms and delivery.timeout.ms, in µs."""

    backoff_us: int = 100_000
    backoff_max_us: int = 1_000_000
    delivery_timeout_us: int = 120_000_000

    def backoffs(self, fixed: bool, attempts: int) -> np.ndarray:
        """The back-off before each retry (after 1, 2, ... attempts), µs as float64: fixed, or KIP-580's
        exponential one at its expectation."""
        initial = float(min(self.backoff_us, self.backoff_max_us))
        if fixed or self.backoff_max_us <= initial:
            return np.full(attempts, float(self.backoff_us if fixed else initial))
        cap = float(self.backoff_max_us)
        exp_max = np.log(cap / max(initial, 1.0)) / np.log(_MULTIPLIER)
        term = np.minimum(initial * _MULTIPLIER ** np.minimum(np.arange(attempts), exp_max), cap)
        # E[min(f * term, cap)] for f uniform in [1 - jitter, 1 + jitter)
        low, high = term * (1 - _JITTER), term * (1 + _JITTER)
        capped = np.clip((high - cap) / (high - low), 0.0, 1.0)  # the share of f whose backoff is capped
        below_mean = (low + np.minimum(high, cap)) / 2
        return (1 - capped) * below_mean + capped * cap


@dataclass(frozen=True)
class Retried:
    """Per row of the slice: the attempt the policy appended (`out_at`: its start, `appended_at`: its append;
    NEVER: as recorded) and whether the batch was not delivered at all (`undelivered`)."""

    out_at: np.ndarray
    appended_at: np.ndarray
    undelivered: np.ndarray


def replay_retries(
    *,
    t_start: np.ndarray,
    t_local_done: np.ndarray,
    t_answered: np.ndarray,
    response_us: np.ndarray,
    created: np.ndarray,
    connection: np.ndarray,
    rejected: np.ndarray,
    fixed_backoff: np.ndarray,
    admits: Callable[[np.ndarray], np.ndarray],
    leadership_end: int,
    settings: RetrySettings,
) -> Retried | None:
    """One policy's retries over the rows of one leader epoch of one partition (module docstring).

    `t_answered`: when the policy answered each row's recorded attempt (its rejection: `t_local_done`, or the
    high watermark's pass for NOT_ENOUGH_REPLICAS_AFTER_APPEND); `response_us`: its response queue and send
    time; `created`: the batch's creation (its first record's send time, else its request's start); `rejected`:
    the rows the policy rejected; `admits(times)`: whether an append at each time is accepted. None: no row
    rejected."""
    if not rejected.any():
        return None
    n = t_start.size
    out_at = np.full(n, NEVER, np.int64)
    appended_at = np.full(n, NEVER, np.int64)
    undelivered = np.zeros(n, bool)
    own = t_local_done - t_start
    for conn in np.unique(connection[rejected]).tolist():
        members = np.flatnonzero(connection == conn)
        members = members[np.argsort(t_start[members], kind="stable")]
        rejected_at = np.flatnonzero(rejected[members])
        blocked = -NEVER  # the partition's queue is held until then (a batch in it is being retried)
        i = int(rejected_at[0])
        while i < members.size:
            row = int(members[i])
            held = t_start[row] < blocked
            if held or rejected[row]:
                deadline = min(int(created[row]) + settings.delivery_timeout_us, leadership_end)
                if held:  # its first attempt leaves with the retried batch ahead of it
                    first_start, first_answer, retries = blocked, NEVER, 0
                else:
                    first_start, first_answer, retries = int(t_start[row]), int(t_answered[row]), 1
                starts = _attempt_starts(
                    first_start, first_answer, int(own[row]), int(response_us[row]), bool(fixed_backoff[row]),
                    deadline, settings,
                )  # fmt: skip
                if not retries:
                    starts = np.concatenate([[first_start], starts])
                ok = np.flatnonzero(admits(starts + own[row]))
                if ok.size:
                    out_at[row] = starts[ok[0]]
                    appended_at[row] = starts[ok[0]] + own[row]
                    blocked = max(blocked, int(out_at[row]))
                else:
                    undelivered[row] = True
                    blocked = max(blocked, deadline)
            i += 1
            if i < members.size and t_start[members[i]] >= blocked and not rejected[members[i]]:
                later = rejected_at[rejected_at >= i]  # nothing held: on to the next rejected batch
                i = int(later[0]) if later.size else members.size
    return Retried(out_at, appended_at, undelivered)


def _attempt_starts(
    first_start: int,
    first_answer: int,
    own_us: int,
    response_us: int,
    fixed: bool,
    deadline: int,
    settings: RetrySettings,
) -> np.ndarray:
    """The starts of the retries after a first attempt (answered at `first_answer`; NEVER: sent with another
    batch, answered at its append) that are appended before `deadline`, µs."""
    answer = first_start + own_us if first_answer == NEVER else first_answer
    backoff_min = float(settings.backoffs(fixed, 1)[0])
    cycle_min = max(backoff_min + own_us + response_us, 1.0)
    attempts = int(min(max((deadline - answer) / cycle_min + 2, 1), _MAX_ATTEMPTS))
    backoffs = settings.backoffs(fixed, attempts)
    # attempt k + 1 leaves its back-off after attempt k's rejection reached the producer
    gaps = np.round(backoffs + response_us).astype(np.int64)
    gaps[1:] += own_us
    starts = answer + np.cumsum(gaps)
    return starts[starts + own_us < deadline]
