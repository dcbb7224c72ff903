"""Eligible leader replicas (KIP-966) per partition and leader epoch, for Kafka's election in the replay.

A cluster with the `eligible.leader.replicas.version` feature on (Kafka 4.1+; on by default for new
clusters from 4.1) keeps, per partition, the replicas that left the ISR while it was below
`min.insync.replicas` (`PartitionChangeBuilder.maybePopulateTargetElr`): the HW does not advance while the
ISR is below min ISR, so they hold every committed record. When a leader fails with no other ISR member,
the controller elects the first live one in assignment order (`PartitionChangeBuilder.isValidNewLeader`,
`electAnyLeader`) instead of leaving the partition offline: a batch acknowledged meanwhile (acks=1,
quorum) that it does not hold is lost.

Whether a cluster keeps them: `clusters.<name>.eligible_leader_replicas` in the conf, else its logs, in
this order: a 4.2+ state-change.log registration that prints a non-empty ELR; the feature level its
brokers announce as finalized in their API_VERSIONS responses (request log, `finalizedFeatures`:
`eligible.leader.replicas.version` >= 1; 3.9 and 4.0 brokers list finalized features without it); with
neither, off, and the console says so.

Which replicas: as a 4.2+ registration line prints them for the commit (`isr_changes.elr`), else derived
from the partition's committed ISRs in time order, across leader epochs, with Kafka's rule
(`kernel.next_eligible_leader_replicas`). Before the first ISR the logs show, none are assumed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ackreplay.replay.kernel import next_eligible_leader_replicas

FEATURE = "eligible.leader.replicas.version"
# ApiVersionsResponse JSON (`ApiVersionsResponseDataJsonConverter`): name, maxVersionLevel, minVersionLevel.
_FEATURE_LEVEL = r'"name":"eligible\.leader\.replicas\.version","maxVersionLevel":(\d{1,4})'
_FINALIZED = '"finalizedFeatures":['


@dataclass
class ElrSetting:
    """Whether a cluster keeps eligible leader replicas, what says so, and how the rule's derivation compares
    with the commits whose registration line printed them: `derived_equal` of `printed` commits that follow
    the partition's previous commit in the logs; `after_gap` printed ones follow a commit no line shows
    (their partition epoch skips one: the leader applied two changes at once and logged the last), where
    the rule sees two changes as one."""

    enabled: bool
    evidence: str
    printed: int = 0
    derived_equal: int = 0
    after_gap: int = 0


def announced_levels(request_lines: DataFrame) -> dict[str, int]:
    """cluster -> the highest `eligible.leader.replicas.version` its brokers announced as finalized in an
    API_VERSIONS response (0: finalized features listed without it). Clusters with no such response are
    absent. One small aggregate: API_VERSIONS lines are a client's first request on each connection."""
    level = F.nullif(F.regexp_extract("line", _FEATURE_LEVEL, 1), F.lit("")).cast("int")
    rows = (
        request_lines.filter((F.col("api_key_name") == "API_VERSIONS") & F.col("line").contains(_FINALIZED))
        .groupBy("cluster")
        .agg(F.max(F.coalesce(level, F.lit(0))).alias("level"))
        .collect()
    )  # one row per cluster
    return {r["cluster"]: int(r["level"]) for r in rows}


def elr_settings(
    clusters: list[str], configured: Mapping[str, bool | None], printed: set[str], levels: Mapping[str, int]
) -> dict[str, ElrSetting]:
    """Per cluster, whether Kafka's election may take an eligible leader replica (see the module docstring):
    `configured` (the conf, None: from the logs), `printed` (clusters whose registration lines list some),
    `levels` (announced_levels)."""
    out = {}
    for cluster in clusters:
        if configured.get(cluster) is not None:
            on = bool(configured[cluster])
            out[cluster] = ElrSetting(on, f"clusters.{cluster}.eligible_leader_replicas: {str(on).lower()}")
        elif cluster in printed:
            out[cluster] = ElrSetting(True, "state-change.log registrations list eligible leader replicas")
        elif cluster in levels:
            level = levels[cluster]
            out[cluster] = ElrSetting(level >= 1, f"brokers announce {FEATURE} {level} in API_VERSIONS responses")
        else:
            out[cluster] = ElrSetting(
                False, f"no API_VERSIONS response with finalized features in the request logs: taken as off "
                f"(set clusters.{cluster}.eligible_leader_replicas)",
            )  # fmt: skip
    return out


def _mask(ids, index: Mapping[int, int], size: int) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    for broker in ids:
        if broker in index:
            mask[index[broker]] = True
    return mask


def partition_elr_rows(
    replicas: tuple[int, ...],
    min_insync_replicas: int,
    epochs: list[tuple[int, int, int, tuple | None]],
    changes: Mapping[int, tuple[np.ndarray, tuple, tuple, tuple]],
    setting: ElrSetting | None = None,
) -> dict[int, np.ndarray]:
    """leader epoch -> the eligible leader replicas among its followers, bool (K+1, F) aligned with the
    kernel's ISR rows (`groups.isr_timeline`: row 0 the epoch's start ISR, else its first change; then one
    row per change).

    `epochs`: (leader epoch, leader, start time µs, start ISR or None) per epoch; `changes`: leader epoch ->
    (commit times µs, ISRs, printed ELRs or None, partition epochs or None per commit), in time order within
    the epoch. A printed ELR is used as printed; `setting` counts how often the rule would have derived the same.
    """
    index = {int(r): i for i, r in enumerate(replicas)}
    size = len(replicas)
    # (time, start before a change at the same time, epoch, change index or -1, isr, printed, partition epoch)
    events: list[tuple[int, int, int, int, Sequence[int], Sequence[int] | None, int | None]] = []
    for number, _, start_us, start_isr in epochs:
        if start_isr:
            events.append((int(start_us), 0, number, -1, start_isr, None, None))
        times, isrs, printed_elrs, partition_epochs = changes.get(number, (np.empty(0, np.int64), (), (), ()))
        events += [
            (int(t), 1, number, k, isrs[k], printed_elrs[k], partition_epochs[k]) for k, t in enumerate(times.tolist())
        ]
    events.sort(key=lambda e: (e[0], e[1]))  # stable: an epoch's changes keep their order
    elr = np.zeros(size, dtype=bool)
    previous: np.ndarray | None = None
    previous_epoch: int | None = None
    at: dict[tuple[int, int], np.ndarray] = {}
    for _, _, number, k, isr_ids, printed, partition_epoch in events:
        isr = _mask(isr_ids, index, size)
        derived = (
            np.zeros(size, dtype=bool) if previous is None
            else next_eligible_leader_replicas(elr, previous, isr, int(isr.sum()), min_insync_replicas)
        )  # fmt: skip
        elr = derived
        if printed is not None:
            elr = _mask(printed, index, size)
            if setting is not None and previous is not None:
                if previous_epoch is not None and partition_epoch is not None and partition_epoch > previous_epoch + 1:
                    setting.after_gap += 1
                else:
                    setting.printed += 1
                    setting.derived_equal += int(np.array_equal(derived, elr))
        previous = isr
        previous_epoch = partition_epoch if partition_epoch is not None else previous_epoch
        at[(number, k)] = elr
    out = {}
    for number, leader, _, start_isr in epochs:
        followers = [index[int(r)] for r in replicas if int(r) != leader]
        n_changes = len(changes.get(number, ((), (), (), ()))[1])
        first = (number, -1) if start_isr else (number, 0)
        rows = [at.get(first, np.zeros(size, dtype=bool))] + [at[(number, k)] for k in range(n_changes)]
        out[number] = np.array(rows, dtype=bool)[:, followers].reshape(len(rows), len(followers))
    return out
