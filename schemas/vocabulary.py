"""The replay's vocabulary: the ack policies it replays, the outcomes a replayed produce can have, and the
time that stands for "never".

One definition for the kernel (which computes them), the replay stage (which writes them as
`produce_replay.policy` and `.outcome`), gold (which orders and groups by them) and the data-quality
checks (which accept only these values). Plain Python: the kernel imports it in Spark's Python workers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, IntEnum

NEVER: int = 2**63 - 1
"""Time sentinel, µs (int64 max): "not within the data", e.g. a leader epoch that lasts to the end of the
data (`epoch_end_us`), a follower that never holds a batch. Nothing adds to it."""


class Outcome(IntEnum):
    """Outcome of a replayed produce: the kernel's int8 code, and `produce_replay.outcome` (`name.lower()`)."""

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

    @property
    def label(self) -> str:
        """The value in `produce_replay.outcome`."""
        return self.name.lower()


OUTCOMES: list[str] = [o.label for o in Outcome]
"""Every `produce_replay.outcome` value, in code order."""


class PolicyKind(Enum):
    """The kinds of ack policy, in the order the replay computes them (and numbers them)."""

    ACKS_1 = "acks=1"
    ACKS_ALL = "acks=all"
    MIN_INSYNC = "min.insync"  # KIP-926
    QUORUM = "quorum"  # KIP-250 quorum.required.acks: quorum=<Q>
    ACKS_ALL_AT_LAG = "acks=all@lag"  # acks=all on the ISR re-simulated at another replica.lag.time.max.ms


# How gold lists policies (policy_summary, the report): the recorded baseline first, then its variants, the
# proposals, and acks=1 last.
READING_ORDER = {
    PolicyKind.ACKS_ALL: 0,
    PolicyKind.ACKS_ALL_AT_LAG: 1,
    PolicyKind.MIN_INSYNC: 2,
    PolicyKind.QUORUM: 3,
    PolicyKind.ACKS_1: 4,
}
QUORUM_PREFIX = "quorum="
# The isr-expiration check runs every replica.lag.time.max.ms / 2, on a µs grid: at least 1 µs apart.
MIN_LAG_MS = 0.002
LAG_PREFIX = "acks=all@lag="


@dataclass(frozen=True)
class Policy:
    """An ack policy the replay applies. ``id`` is its name in the tables (``acks=all@lag=5000``, ``quorum=2``)."""

    kind: PolicyKind
    quorum: int | None = None
    """``QUORUM``: Q, the replicas (leader included) that must hold a batch."""
    lag_ms: float | None = None
    """``ACKS_ALL_AT_LAG``: the ``replica.lag.time.max.ms`` the ISR is re-simulated with."""

    def __post_init__(self) -> None:
        if (self.kind is PolicyKind.QUORUM) != (self.quorum is not None):
            raise ValueError("a quorum policy, and only one, has a quorum size")
        if (self.kind is PolicyKind.ACKS_ALL_AT_LAG) != (self.lag_ms is not None):
            raise ValueError("an acks=all@lag policy, and only one, has a lag")
        if self.quorum is not None and int(self.quorum) < 1:
            raise ValueError("quorum sizes must be >= 1")
        if self.lag_ms is not None:
            lag = float(self.lag_ms)
            if not (math.isfinite(lag) and lag >= MIN_LAG_MS):
                raise ValueError(f"replica_lag_time_max_ms values must be finite and >= {MIN_LAG_MS}")
            object.__setattr__(self, "lag_ms", lag)

    @property
    def quorum_size(self) -> int:
        """Q of a ``QUORUM`` policy (an error for any other kind)."""
        if self.quorum is None:
            raise ValueError(f"{self.kind.value} has no quorum size")
        return self.quorum

    @property
    def resimulated_lag_ms(self) -> float:
        """The lag of an ``ACKS_ALL_AT_LAG`` policy (an error for any other kind)."""
        if self.lag_ms is None:
            raise ValueError(f"{self.kind.value} re-simulates no ISR")
        return self.lag_ms

    @property
    def id(self) -> str:
        if self.kind is PolicyKind.QUORUM:
            return f"{QUORUM_PREFIX}{self.quorum}"
        if self.kind is PolicyKind.ACKS_ALL_AT_LAG:
            lag = self.resimulated_lag_ms
            return f"{LAG_PREFIX}{int(lag) if lag.is_integer() else repr(lag)}"
        return self.kind.value

    @classmethod
    def parse(cls, policy_id: str) -> Policy:
        """The policy named ``policy_id`` (as :attr:`id` writes it)."""
        for kind in (PolicyKind.ACKS_1, PolicyKind.ACKS_ALL, PolicyKind.MIN_INSYNC):
            if policy_id == kind.value:
                return cls(kind)
        try:
            if policy_id.startswith(QUORUM_PREFIX):
                return cls(PolicyKind.QUORUM, quorum=int(policy_id[len(QUORUM_PREFIX) :]))
            if policy_id.startswith(LAG_PREFIX):
                return cls(PolicyKind.ACKS_ALL_AT_LAG, lag_ms=float(policy_id[len(LAG_PREFIX) :]))
        except ValueError:
            pass
        raise ValueError(f"unknown policy {policy_id!r}: acks=1, acks=all, min.insync, quorum=<Q> or acks=all@lag=<ms>")


ACKS_1 = Policy(PolicyKind.ACKS_1)
ACKS_ALL = Policy(PolicyKind.ACKS_ALL)
MIN_INSYNC = Policy(PolicyKind.MIN_INSYNC)


def lag_policy_id(lag_ms: float) -> str:
    """Policy id of ``acks=all`` with a re-simulated ISR, e.g. ``acks=all@lag=5000``."""
    return Policy(PolicyKind.ACKS_ALL_AT_LAG, lag_ms=lag_ms).id


def replayed_policies(quorum_sizes: tuple[int, ...], lag_ms: tuple[float, ...]) -> list[Policy]:
    """The policies a replay computes, in the order it numbers them: acks=1, acks=all, min.insync, quorum=<Q>
    for each quorum size, acks=all@lag=<ms> for each lag (each once)."""
    policies = [ACKS_1, ACKS_ALL, MIN_INSYNC]
    policies += [Policy(PolicyKind.QUORUM, quorum=int(q)) for q in quorum_sizes]
    policies += [Policy(PolicyKind.ACKS_ALL_AT_LAG, lag_ms=x) for x in lag_ms]
    return list({p.id: p for p in policies}.values())


def policy_order(quorum_sizes: tuple[int, ...], lag_ms: tuple[float, ...]) -> list[str]:
    """The ids of :func:`replayed_policies`."""
    return [p.id for p in replayed_policies(quorum_sizes, lag_ms)]
