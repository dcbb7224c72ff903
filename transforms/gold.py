"""silver `produce_replay` (+ `partitions`) -> the gold aggregates. Pure DataFrame -> DataFrame.

Percentiles
-----------
Every percentile here is Spark's exact `percentile` aggregate (not `percentile_approx`). Its rank
definition: sort the n values of the group ascending, x[0] <= ... <= x[n-1]; for a fraction p the
position is h = (n - 1) * p and the result is x[floor h] + (h - floor h) * (x[ceil h] - x[floor h])
(linear interpolation between the closest ranks, Hyndman & Fan type 7, numpy's default). It is exact:
there is no rank error. It holds the group's distinct values in memory (a value -> count map per
group), which is fine for a (topic, policy, window) of a few million produces.

A P999 of fewer than 1000 samples is an interpolation between the largest values, not a tail
percentile: it is null with `p999_insufficient` set (likewise P9999 below 10000 samples).

The latency sample is the client-visible `latency_ms` of the acked produces (outcome `acked`) only;
rejected, timed-out and not-leader produces are counted in `produces` and in `availability`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

WINDOWS = ("minute", "hour", "day")
P999_MIN_N = 1000
P9999_MIN_N = 10000
ACKED = "acked"
NOT_ENOUGH_REPLICAS = ("not_enough_replicas", "not_enough_replicas_after_append")
RECORDED_POLICY = "acks=all"  # the baseline of policy_summary: the replayed acks=all


def with_window(df: DataFrame, window: str = "hour") -> DataFrame:
    """Add `window` (its size) and `window_start` (UTC start of the window holding `t_start`)."""
    if window not in WINDOWS:
        raise ValueError(f"unknown window {window!r}; use one of {', '.join(WINDOWS)}")
    return df.withColumns({"window": F.lit(window), "window_start": F.date_trunc(window, F.col("t_start"))})


def policy_rank(policy: Column) -> Column:
    """Reading order of a policy: acks=all, acks=all@lag=..., min.insync, quorum=..., acks=1, others."""
    return (
        F.when(policy == F.lit("acks=all"), 0)
        .when(policy.startswith("acks=all@lag="), 1)
        .when(policy == F.lit("min.insync"), 2)
        .when(policy.startswith("quorum="), 3)
        .when(policy == F.lit("acks=1"), 4)
        .otherwise(5)
        .cast("int")
    )


def _acked() -> Column:
    return F.col("outcome") == F.lit(ACKED)


def _count_if(cond: Column) -> Column:
    return F.count_if(F.coalesce(cond, F.lit(False))).cast("bigint")


def _finite_exposure() -> Column:
    return _acked() & F.col("exposure_ms").isNotNull() & (F.col("exposure_ms") < F.lit(float("inf")))


def _latency_aggs() -> list[Column]:
    """n and exact percentiles of the acked produces' latency_ms (see the module docstring)."""
    acked_latency = F.when(_acked(), F.col("latency_ms"))
    return [
        F.count("*").cast("bigint").alias("produces"),
        F.count(acked_latency).cast("bigint").alias("n"),
        F.percentile(acked_latency, [0.5, 0.99, 0.999, 0.9999]).alias("_pct"),
        F.max(acked_latency).alias("max_ms"),
    ]


def _percentile_columns() -> dict[str, Column]:
    n = F.col("n")
    return {
        "p50_ms": F.when(n > 0, F.col("_pct")[0]),
        "p99_ms": F.when(n > 0, F.col("_pct")[1]),
        "p999_ms": F.when(n >= P999_MIN_N, F.col("_pct")[2]),
        "p9999_ms": F.when(n >= P9999_MIN_N, F.col("_pct")[3]),
        "p999_insufficient": n < P999_MIN_N,
        "p9999_insufficient": n < P9999_MIN_N,
    }


def latency_percentiles(replay: DataFrame, window: str = "hour") -> DataFrame:
    """One row per (cluster, topic, policy, window): produces, n, p50/p99/p999/p9999, max of latency_ms.

    A window whose produces were all rejected has n = 0 and null percentiles.
    """
    keys = ["cluster", "topic", "policy", "window", "window_start"]
    return (
        with_window(replay, window)
        .groupBy(*keys)
        .agg(*_latency_aggs())
        .withColumns(_percentile_columns())
        .drop("_pct")
    )


def with_min_isr(replay: DataFrame, partitions: DataFrame) -> DataFrame:
    """Add `min_insync_replicas` of the produce's partition (null when `partitions` lacks it)."""
    mins = partitions.select("cluster", "topic", "partition", "min_insync_replicas").dropDuplicates(
        ["cluster", "topic", "partition"]
    )
    return replay.alias("r").join(mins.alias("p"), ["cluster", "topic", "partition"], how="left")


def _risk_aggs() -> list[Column]:
    acked = _acked()
    bytes_ = F.coalesce(F.col("bytes").cast("bigint"), F.lit(0).cast("bigint"))
    min_isr = F.col("min_insync_replicas")
    under = acked & min_isr.isNotNull() & (F.col("copies_at_ack") < min_isr)
    never = acked & (F.col("exposure_ms") == F.lit(float("inf")))
    return [
        _count_if(acked).alias("acked_batches"),
        F.coalesce(F.sum(F.when(acked, bytes_)), F.lit(0)).cast("bigint").alias("acked_bytes"),
        _count_if(under).alias("under_min_isr_acks"),
        F.coalesce(F.sum(F.when(under, bytes_)), F.lit(0)).cast("bigint").alias("under_min_isr_bytes"),
        _count_if(acked & min_isr.isNull()).alias("min_isr_unknown_acks"),
        F.coalesce(
            F.sum(F.when(_finite_exposure(), bytes_.cast("double") * F.col("exposure_ms"))), F.lit(0.0)
        ).alias("exposure_byte_ms"),
        F.max(F.when(_finite_exposure(), F.col("exposure_ms"))).alias("max_exposure_ms"),
        _count_if(never).alias("never_min_isr_acks"),
        F.coalesce(F.sum(F.when(never, bytes_)), F.lit(0)).cast("bigint").alias("never_min_isr_bytes"),
        _count_if(acked & (F.col("copies_at_ack") == 1)).alias("single_copy_acks"),
        _count_if(acked & F.col("loss_kafka_election")).alias("loss_kafka_election"),
        _count_if(acked & F.col("loss_longest_log_election")).alias("loss_longest_log_election"),
    ]


def risk_exposure(replay: DataFrame, partitions: DataFrame, window: str = "hour") -> DataFrame:
    """One row per (cluster, topic, policy, window): what the acknowledged batches risked.

    Under min ISR means `copies_at_ack` < the partition's `min.insync.replicas`; exposure byte·ms sums
    bytes * exposure_ms over finite exposures, and batches with exposure +inf (never on min ISR
    replicas within the data) are counted in `never_min_isr_acks` instead.
    """
    keys = ["cluster", "topic", "policy", "window", "window_start"]
    return (
        with_window(with_min_isr(replay, partitions), window)
        .groupBy(*keys)
        .agg(F.count("*").cast("bigint").alias("produces"), *_risk_aggs())
    )


def _failure_aggs() -> list[Column]:
    outcome = F.col("outcome")
    return [
        _count_if(outcome.isin(*NOT_ENOUGH_REPLICAS)).alias("not_enough_replicas"),
        _count_if(outcome == F.lit("timeout")).alias("timeouts"),
        _count_if(outcome == F.lit("not_leader")).alias("not_leader"),
        _count_if(outcome == F.lit("unreplayable")).alias("unreplayable"),
    ]


def availability(replay: DataFrame, window: str = "hour") -> DataFrame:
    """One row per (cluster, topic, partition, policy, window): produces and how many failed, by error."""
    keys = ["cluster", "topic", "partition", "policy", "window", "window_start"]
    return (
        with_window(replay, window)
        .groupBy(*keys)
        .agg(F.count("*").cast("bigint").alias("produces"), _count_if(_acked()).alias("acked"), *_failure_aggs())
    )


def policy_summary(replay: DataFrame, partitions: DataFrame) -> DataFrame:
    """One row per (cluster, topic, policy) over all the data: the decision table.

    P999 is exact over the whole run (percentiles of windows cannot be combined); the change of P999 is
    against the replayed `acks=all` of the same topic (null when that policy or either P999 is missing).
    """
    keys = ["cluster", "topic", "policy"]
    by_policy = (
        with_min_isr(replay, partitions)
        .groupBy(*keys)
        .agg(*_latency_aggs(), *_risk_aggs(), *_failure_aggs())
        .withColumns(_percentile_columns())
    )
    baseline = by_policy.filter(F.col("policy") == F.lit(RECORDED_POLICY)).select(
        "cluster", "topic", F.col("p999_ms").alias("_base_p999")
    )
    base = F.col("_base_p999")
    return (
        by_policy.alias("s")
        .join(baseline.alias("b"), ["cluster", "topic"], how="left")
        .withColumns(
            {
                "policy_rank": policy_rank(F.col("policy")),
                "p999_vs_acks_all_ms": F.col("p999_ms") - base,
                "p999_vs_acks_all_ratio": F.when(base != 0, F.col("p999_ms") / base),
            }
        )
        .drop("_pct", "_base_p999", "p50_ms", "p9999_ms", "p9999_insufficient", "max_ms")
    )


def cdf_probabilities(points: int = 200) -> list[float]:
    """`points` fractions for a latency CDF: even steps up to 0.99, then log-spaced into the tail (0.9999)."""
    body = points * 3 // 4
    tail = points - body
    out = [0.99 * (i + 1) / body for i in range(body)]
    out += [1 - 0.01 * 10 ** (-2 * (i + 1) / tail) for i in range(tail)]
    return out


def latency_quantiles(replay: DataFrame, probabilities: list[float]) -> DataFrame:
    """Exact quantiles of the acked produces' latency per (cluster, topic, policy): one row per fraction q."""
    probs = list(probabilities)
    return (
        replay.filter(_acked())
        .groupBy("cluster", "topic", "policy")
        .agg(F.percentile("latency_ms", probs).alias("_v"))
        .select(
            "cluster",
            "topic",
            "policy",
            F.posexplode(F.arrays_zip(F.array(*[F.lit(float(p)) for p in probs]).alias("q"), F.col("_v").alias("v"))),
        )
        .select("cluster", "topic", "policy", F.col("col.q").alias("q"), F.col("col.v").alias("latency_ms"))
    )
