"""Each cluster's Kafka release, as its brokers logged it at their last start, and the replay rules that
depend on it.

`AppInfoParser` logs "Kafka version: <release>" at every broker start (silver `broker_configs`:
`kafka.version.major` and `kafka.version.minor`). One rule of the replay changed between releases:

- Kafka 3.7 (KIP-966, part 1) stopped advancing the high watermark while the committed ISR is below
  min.insync.replicas (`Partition.maybeIncrementLeaderHW` returns at `isUnderMinIsr`), so an appended
  acks=all batch waits until the ISR recovers. Up to 3.6 the HW advanced with the ISR as it was, and
  `Partition.checkEnoughReplicasReachOffset` completed the waiting produce with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND. `replay.strict_min_isr: auto` takes the rule of the cluster's release.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.transforms.broker_logs import KAFKA_VERSION_MAJOR, KAFKA_VERSION_MINOR

STRICT_MIN_ISR_SINCE = (3, 7)


@dataclass(frozen=True)
class MinIsrRule:
    """Whether a cluster's leaders hold the HW while the ISR is below min ISR, and why the replay thinks so."""

    cluster: str
    strict: bool
    note: str

    def line(self) -> str:
        rule = (
            "the HW waits while the ISR is below min ISR"
            if self.strict
            else "the HW advances below min ISR (NOT_ENOUGH_REPLICAS_AFTER_APPEND)"
        )
        return f"{self.cluster}: {rule}; {self.note}"


def logged_releases(broker_configs: DataFrame, clusters: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
    """cluster -> broker id -> the (major, minor) Kafka release of the broker's last logged start."""
    latest = Window.partitionBy("cluster", "broker_id", "setting").orderBy(
        F.col("t_log").desc(), F.col("source_file").desc(), F.col("line_number").desc()
    )
    rows = (
        broker_configs.filter(
            F.col("setting").isin(KAFKA_VERSION_MAJOR, KAFKA_VERSION_MINOR) & F.col("cluster").isin(clusters)
        )
        .withColumn("rank", F.row_number().over(latest))
        .filter(F.col("rank") == 1)
        .groupBy("cluster", "broker_id")
        .pivot("setting", [KAFKA_VERSION_MAJOR, KAFKA_VERSION_MINOR])
        .agg(F.first("value"))
        .collect()  # one row per broker
    )
    out: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)
    for r in rows:
        if r[KAFKA_VERSION_MAJOR] is not None and r[KAFKA_VERSION_MINOR] is not None:
            out[r["cluster"]][r["broker_id"]] = (int(r[KAFKA_VERSION_MAJOR]), int(r[KAFKA_VERSION_MINOR]))
    return out


def min_isr_rules(
    releases: dict[str, dict[int, tuple[int, int]]], clusters: list[str], setting: bool | str
) -> dict[str, MinIsrRule]:
    """cluster -> its rule: `setting` (replay.strict_min_isr) when true or false, else (`auto`) the rule of
    the release every broker logged; the newer rule where no release was logged or the brokers disagree (a
    rolling upgrade), said in the note."""
    out = {}
    for cluster in clusters:
        logged = releases.get(cluster, {})
        shown = ", ".join(f"{b}: {major}.{minor}" for b, (major, minor) in sorted(logged.items()))
        if setting != "auto":
            out[cluster] = MinIsrRule(cluster, bool(setting), f"replay.strict_min_isr: {str(setting).lower()}")
        elif not logged:
            out[cluster] = MinIsrRule(
                cluster, True, "no 'Kafka version:' line in its server.log files: Kafka 3.7+'s rule assumed"
            )
        elif len({v >= STRICT_MIN_ISR_SINCE for v in logged.values()}) > 1:
            out[cluster] = MinIsrRule(
                cluster, True, f"its brokers logged releases on both sides of 3.7 ({shown}): 3.7+'s rule assumed"
            )
        else:
            release = min(logged.values())
            out[cluster] = MinIsrRule(
                cluster,
                release >= STRICT_MIN_ISR_SINCE,
                f"Kafka {release[0]}.{release[1]} (brokers {', '.join(str(b) for b in sorted(logged))}, at their last"
                " start)",
            )
    return out
