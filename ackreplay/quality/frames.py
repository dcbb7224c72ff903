"""What each table is checked on: the table plus the lookup and derived columns its checks read.

Referential checks need a value from another table (a produce's partition in `partitions`); a few
invariants compare a column with a value derived from others (RF = size of the assignment). Adding
them as columns keeps every check of a table in one pass (one Spark job, `quality/counts.py`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

from ackreplay.schemas.vocabulary import MIN_INSYNC, QUORUM_PREFIX
from ackreplay.storage.lakehouse import table_contract

CONTRACTS: dict[str, StructType] = {
    name: table_contract(name)
    for name in (
        "request_log_lines",
        "quarantine",
        "produce_requests",
        "follower_fetches",
        "partitions",
        "isr_changes",
        "leader_epochs",
        "follower_starts",
        "follower_leo_records",
        "broker_registrations",
        "metadata_deltas",
        "follower_leo_samples",
        "batch_send_times",
        "produce_replay",
        "latency_percentiles",
        "risk_exposure",
        "availability",
        "routing",
        "policy_summary",
    )
}

PARTITION_KEY = ["cluster", "topic", "partition"]


def with_partition_known(df: DataFrame, partitions_df: DataFrame) -> DataFrame:
    """Adds `partition_known`: whether (cluster, topic, partition) is a row of `partitions`."""
    known = partitions_df.select(*PARTITION_KEY).distinct().withColumn("partition_known", F.lit(True))
    return df.join(known, PARTITION_KEY, "left").withColumn(
        "partition_known", F.coalesce(F.col("partition_known"), F.lit(False))
    )


def with_partition_facts(df: DataFrame, partitions_df: DataFrame) -> DataFrame:
    """Adds the partition's `replication_factor` and `min_insync_replicas` (null when not in `partitions`)."""
    facts = partitions_df.select(*PARTITION_KEY, "replication_factor", "min_insync_replicas").dropDuplicates(
        PARTITION_KEY
    )
    return df.join(facts, PARTITION_KEY, "left")


def required_copies(policy: str = "policy") -> Column:
    """Replicas (leader included) an acked batch must be on under its policy: Q for quorum=Q, the
    partition's min.insync.replicas for min.insync, 1 otherwise (acks=all may ack on a leader-only ISR)."""
    p = F.col(policy)
    return (
        F.when(p.startswith(QUORUM_PREFIX), F.regexp_extract(p, rf"^{QUORUM_PREFIX}(\d+)$", 1).try_cast("int"))
        .when(p == F.lit(MIN_INSYNC.id), F.col("min_insync_replicas"))
        .otherwise(F.lit(1))
    )


def caught_up_leads() -> dict[str, Column]:
    """How long before a `Shrinking ISR` proposal its out-of-sync replicas were last caught up (min and max
    over the replicas, ms). Both times come from the leader's own clock, one from the log line (converted
    with the configured zone), one epoch-based (`lastCaughtUpTimeMs`): a wrong `log_timezone` shows as a
    lead of whole hours, or a negative one."""
    proposed_ms = F.unix_millis("proposed_at")
    leads = F.transform("out_of_sync_replicas", lambda r: proposed_ms - r["last_caught_up_time_ms"])
    return {"min_caught_up_lead_ms": F.array_min(leads), "max_caught_up_lead_ms": F.array_max(leads)}


def check_frame(table: str, df: DataFrame, partitions_df: DataFrame | None, policies: list[str]) -> DataFrame:
    """`df` (rows of `table`) with the columns its checks read besides its own."""
    if table in ("produce_requests", "follower_fetches"):
        df = (
            with_partition_known(df, partitions_df)
            if partitions_df is not None
            else df.withColumn("partition_known", F.lit(False))
        )
    if table == "follower_fetches":
        df = df.withColumns(
            {
                "follower_is_leader": F.col("follower_id") == F.col("broker_id"),
                "carried_until_lead_ms": (F.unix_micros("carried_until") - F.unix_micros("t_dequeue")) / 1000.0,
            }
        )
    elif table == "partitions":
        df = df.withColumns(
            {
                "replica_count": F.size("replicas"),
                "distinct_replica_count": F.size(F.array_distinct("replicas")),
            }
        )
    elif table == "isr_changes":
        df = df.withColumns({"isr_count": F.size("isr"), **caught_up_leads()})
    elif table == "produce_replay":
        if partitions_df is None:
            df = df.withColumns(
                {"replication_factor": F.lit(None).cast("int"), "min_insync_replicas": F.lit(None).cast("int")}
            )
        else:
            df = with_partition_facts(df, partitions_df)
        df = df.withColumns({"policy_configured": F.col("policy").isin(policies), "required_copies": required_copies()})
    elif table == "availability":
        parts = ["acked", "not_enough_replicas", "timeouts", "not_leader", "unreplayable"]
        total = F.col(parts[0])
        for name in parts[1:]:
            total = total + F.col(name)
        df = df.withColumn("outcomes_total", total)
    elif table == "routing":
        df = df.withColumn("routing_total", F.col("rerouted") + F.col("held") + F.col("never_writable"))
    return df


def with_margins(df: DataFrame, names: list[str]) -> DataFrame:
    """`df` with the margin columns `names` (`catalog.margin_column`: `<a>_minus_<b>` = a - b, timestamps in
    microseconds) that its pair checks read."""
    from ackreplay.quality.catalog import margin_sources

    types = {f.name: f.dataType for f in df.schema.fields}

    def value(column: str) -> Column:
        timestamp = isinstance(types[column], (TimestampType, TimestampNTZType))
        return F.unix_micros(F.col(column)) if timestamp else F.col(column)

    # a margin of a missing column is left out: its check then fails with GX's "column not found"
    pairs = {name: margin_sources(name) for name in names}
    margins = {name: value(a) - value(b) for name, (a, b) in pairs.items() if a in types and b in types}
    return df.withColumns(margins) if margins else df  # Spark Connect refuses an empty withColumns
