"""Replay kernel: every produce of one (partition, leader epoch) under every ack policy, in one pass.

Plain NumPy, vectorised over produces (Python loops only over followers, ISR intervals, policies and
ISR state changes). The Spark side (bucketing, pandas UDF) builds one :class:`EpochInputs` per group,
calls :func:`replay_epoch` and writes each policy's arrays as rows (``ackreplay.replay.groups``).

Modules: ``model`` (inputs, options, outputs and their validation), ``epoch`` (arrays derived from one
epoch's inputs, shared by the policies), ``policies`` (each policy's ack rule, outcomes and durability:
:func:`replay_epoch`), ``isr_sim`` (the ISR re-simulated at another lag: :func:`simulate_isr`). The
policy and outcome names are ``schemas.vocabulary``'s.

Semantics: the design doc ``design.md`` ("Replay semantics", "Durability risk") and
``kafka-reference.md`` §2, §3, §6 and "Implications for an offline replay". Summary, for a batch ``b``
(its base offset):

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
* Cost is dominated by two binary searches per follower and by page faults on fresh output
  memory; keeping freed memory in the Python worker (``MALLOC_TRIM_THRESHOLD_`` /
  ``MALLOC_MMAP_THRESHOLD_``) roughly halves the time of a call on a fresh heap.
"""

from ackreplay.replay.kernel.isr_sim import simulate_isr
from ackreplay.replay.kernel.model import (
    LOSS_WINDOWS,
    NEVER,
    EpochInputs,
    IsrTimeline,
    PolicyOutcome,
    ReplayOptions,
    next_eligible_leader_replicas,
    policy_ids,
)
from ackreplay.replay.kernel.policies import replay_epoch
from ackreplay.schemas.vocabulary import Outcome

__all__ = [
    "LOSS_WINDOWS",
    "NEVER",
    "EpochInputs",
    "IsrTimeline",
    "Outcome",
    "PolicyOutcome",
    "ReplayOptions",
    "next_eligible_leader_replicas",
    "policy_ids",
    "replay_epoch",
    "simulate_isr",
]
