"""Each cluster's own `replica.lag.time.max.ms`, as its brokers logged it at their last start.

A leader drops a follower from the ISR with its own setting (`Partition.getOutOfSyncReplicas`, run by
`ReplicaManager`'s isr-expiration task every half of it), which is not a dynamic config
(`DynamicBrokerConfig.AllDynamicConfigs` does not list it): so the value of a broker's last
"KafkaConfig values:" dump (silver `broker_configs`) is the one it ran with. Re-simulating the ISR at
that lag must reproduce the recorded ISR's acks; the self-check holds the replay to it
(self_check.check_isr_resimulation).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

LAG_SETTING = "replica.lag.time.max.ms"


@dataclass(frozen=True)
class OwnLag:
    """A cluster's own replica.lag.time.max.ms, as its brokers logged it at start."""

    cluster: str
    lag_ms: float | None  # None: not known (no dump logged, or the brokers disagree)
    note: str  # where the value comes from, or why there is none

    def line(self) -> str:
        return f"{self.cluster}: {self.note}"


def own_lags(
    broker_configs: DataFrame, clusters: list[str], configured: dict[str, int] | None = None
) -> dict[str, OwnLag]:
    """cluster -> its own lag: `configured` (clusters.<name>.replica_lag_time_max_ms) where given, else the
    value every broker that logged one logged at its last start."""
    latest = Window.partitionBy("cluster", "broker_id").orderBy(
        F.col("t_log").desc(), F.col("source_file").desc(), F.col("line_number").desc()
    )
    rows = (
        broker_configs.filter((F.col("setting") == LAG_SETTING) & F.col("cluster").isin(clusters))
        .withColumn("rank", F.row_number().over(latest))
        .filter(F.col("rank") == 1)
        .select("cluster", "broker_id", "value")
        .collect()  # one row per broker
    )
    by_cluster: dict[str, dict[int, int]] = defaultdict(dict)
    for r in rows:
        by_cluster[r["cluster"]][r["broker_id"]] = r["value"]
    out = {}
    for cluster in clusters:
        values = by_cluster.get(cluster, {})
        given = (configured or {}).get(cluster)
        if given is not None:
            logged = sorted(set(values.values()))
            contradicted = f"; its brokers logged {', '.join(map(str, logged))}" if logged and logged != [given] else ""
            out[cluster] = OwnLag(
                cluster, float(given), f"{LAG_SETTING}={given} (conf: clusters.{cluster}){contradicted}"
            )
            continue
        brokers = ", ".join(str(b) for b in sorted(values))
        if not values:
            out[cluster] = OwnLag(cluster, None, f"no {LAG_SETTING} in a 'KafkaConfig values:' dump of its server.log")
        elif len(set(values.values())) == 1:
            value = next(iter(values.values()))
            out[cluster] = OwnLag(
                cluster, float(value), f"{LAG_SETTING}={value} (brokers {brokers}, at their last start)"
            )
        else:
            listed = ", ".join(f"{b}: {v}" for b, v in sorted(values.items()))
            out[cluster] = OwnLag(cluster, None, f"its brokers logged different {LAG_SETTING} ({listed})")
    return out
