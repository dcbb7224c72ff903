"""The replay checks itself: on the produces a cluster recorded with acks=all, the replayed acks=all
must reproduce the broker's own ack (`t_ack_observed`), or the cluster's what-ifs are not presented.

Per cluster, over the recorded acks=all produces that were appended and whose ack the broker logged:
- `within_2ms`: share replayed as acked within 2 ms of the broker's ack (a produce replayed as not
  acked at all, a timeout or NOT_ENOUGH_REPLICAS the broker never gave, is a miss);
- the P999 of the ack wait (ack − `t_local_done`), replayed against observed.

A cluster fails when `within_2ms` < `replay.self_check.min_within_2ms` or the P999s differ by more
than `max_p999_error` of the observed one (and by more than 2 ms: the request log stamps
milliseconds, so two P999s 2 ms apart cannot be told apart). Clusters with fewer than `min_produces`
such produces are reported, not judged; clusters replayed from JMX scrapes (no follower FETCH lines)
are reported, not judged (their timeline is as coarse as the scrape interval, README "The replay").

The ISR re-simulation checks itself too (`check_isr_resimulation`): where a cluster's own
`replica.lag.time.max.ms` was replayed (`acks=all@lag=<own>`, replay.lag_ms `own`), its acks must be
those of the replayed `acks=all` under the recorded ISR on the same produces: at least
`isr_min_within_2ms` of them within 2 ms, and the P999 of ack wait within `isr_max_p999_error` (or 2 ms).
Otherwise the cluster fails: the lag what-ifs rest on a re-simulation its own recording contradicts.

And the rejections: of the brokers' NOT_ENOUGH_REPLICAS answers to acks=all produces, at least
`min_rejected` must be rejected by the replayed acks=all (the committed ISR below min ISR at the produce), on
a cluster with `min_rejections` of them or more; the other direction (an appended produce replayed as
rejected) is a miss of `within_2ms` above.

Where the misses fall is shown per window: the 15 s after an event of the produce's partition in
`isr_changes` (a new leader, an ISR expansion, an ISR shrink: a stalled follower, a controlled
shutdown or a fenced broker) or none of them ("quiet"). The windows group the misses for a reader;
they do not change any figure.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.config import SelfCheckSettings
from ackreplay.schemas.vocabulary import ACKS_ALL, Outcome, lag_policy_id

WINDOW_SECONDS = 15
# isr_changes kinds that open a window; the latest such event of the partition names a produce's window.
WINDOW_OF_KIND = {
    "leader_start": "after a leader change",
    "expand": "after an ISR expansion",
    "shrink": "after an ISR shrink",
}
QUIET = "quiet"
# The ISR re-simulation's figures, as replay_checks' isr_<name> columns.
ISR_FIGURES = ("lag_ms", "n", "within_2ms", "p999_resimulated_ms", "p999_recorded_ms")
_P999_FLOOR_MS = 2.0
NO_TRUTH = "no recorded acks=all produce"  # a cluster the check cannot judge: none of its produces used acks=all


class ReplayUntrusted(Exception):
    """The replay's ground truth contradicts it on at least one cluster."""


@dataclass(frozen=True)
class ClusterTruth:
    """One cluster's replayed acks=all against the broker's own acks, and the verdict on it."""

    cluster: str
    n: int  # recorded acks=all produces with the broker's ack
    not_acked: int  # of those, replayed as anything but acked
    within_2ms: float | None  # None: n = 0
    p999_replayed_ms: float | None
    p999_observed_ms: float | None
    judged: str  # "judged" | "too few produces" | "JMX timeline"
    failures: tuple[str, ...] = ()
    isr: dict | None = None  # check_isr_resimulation's figures; None: the cluster's own lag was not replayed
    # the brokers' NOT_ENOUGH_REPLICAS answers and how many of them the replayed acks=all rejects (None: not counted)
    rejections: tuple[int, int] | None = None

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class SelfCheck:
    """The replay's self-check over every cluster of a run (README "The replay checks itself")."""

    settings: SelfCheckSettings
    clusters: list[ClusterTruth] = field(default_factory=list)
    windows: list[dict] = field(default_factory=list)  # cluster, window, n, within_2ms, p999 replayed/observed

    @property
    def failed(self) -> list[ClusterTruth]:
        return [c for c in self.clusters if not c.passed]

    def summary_lines(self) -> list[str]:
        s = self.settings
        out = [
            f"  self-check (recorded acks=all: >= {s.min_within_2ms:.0%} replayed within 2 ms of the broker's ack,"
            f" P999 of ack wait within {s.max_p999_error:.0%}"
            + (
                f"; the ISR re-simulated at the cluster's own lag: >= {s.isr_min_within_2ms:.0%} acked within 2 ms of"
                f" the recorded ISR's acks, P999 within {s.isr_max_p999_error:.0%}):"
                if any(c.isr is not None for c in self.clusters)
                else "):"
            )
        ]
        for c in self.clusters:
            p999 = f"P999 {_ms(c.p999_replayed_ms)} replayed vs {_ms(c.p999_observed_ms)} observed"
            verdict = (
                "FAILED: " + "; ".join(c.failures)
                if c.failures
                else ("ok" if c.judged == "judged" else f"not judged ({c.judged})")
            )
            if c.n:
                out.append(
                    f"    {c.cluster}: n={c.n:,}, {c.within_2ms:.2%} within 2 ms, {c.not_acked:,} not acked, {p999}  "
                    f"{verdict}"
                )
            else:
                out.append(f"    {c.cluster}: {c.judged}  {verdict}")
            if c.rejections and c.rejections[0]:
                rejected, replayed = c.rejections
                judged = "" if rejected >= s.min_rejections else f" (fewer than {s.min_rejections:,}: not judged)"
                out.append(
                    f"      NOT_ENOUGH_REPLICAS answers: {rejected:,}, rejected by the replayed acks=all: {replayed:,}"
                    f" ({replayed / rejected:.2%}; >= {s.min_rejected:.0%}){judged}"
                )
            if c.isr is not None:
                i = c.isr
                out.append(
                    f"      ISR re-simulated at its own lag (acks=all@lag={i['lag_ms']:g}) vs recorded (acks=all), "
                    f"n={i['n']:,}: {i['within_2ms']:.2%} within 2 ms, P999 of ack wait "
                    f"{_ms(i['p999_resimulated_ms'])} vs {_ms(i['p999_recorded_ms'])}"
                )
        failed = {c.cluster for c in self.failed}
        if failed and not s.enabled:
            out.append(
                "  self-check off (replay.self_check.enabled: false): gold and the report use these clusters anyway"
            )
        if failed:
            out.append(f"  where the misses fall ({WINDOW_SECONDS} s after an event of the produce's partition):")
            out.append(
                f"    {'cluster':<20} {'window':<24} {'produces':>9} {'within 2 ms':>12} {'P999 replayed':>14} "
                f"{'P999 observed':>14}"
            )
            for w in self.windows:  # computed for the failed clusters only
                out.append(
                    f"    {w['cluster']:<20} {w['window']:<24} {w['n']:>9,} {w['within_2ms']:>12.2%}"
                    f" {_ms(w['p999_replayed_ms']):>14} {_ms(w['p999_observed_ms']):>14}"
                )
        return out

    def rows(self, run_id: str, accept_untrusted: bool, clusters: list[str]) -> list[dict]:
        """replay_checks rows (schemas/replay.py), one per cluster of the run (`clusters`)."""
        checked = {c.cluster for c in self.clusters}
        unchecked = [ClusterTruth(c, 0, 0, None, None, None, NO_TRUTH) for c in clusters if c not in checked]
        return [
            {
                "cluster": c.cluster, "replay_run_id": run_id, "n": c.n, "within_2ms": c.within_2ms,
                "p999_replayed_ms": c.p999_replayed_ms, "p999_observed_ms": c.p999_observed_ms, "judged": c.judged,
                "failures": "; ".join(c.failures) or None, "trusted": c.passed,
                "accepted_untrusted": not c.passed and (accept_untrusted or not self.settings.enabled),
                **{f"isr_{k}": (c.isr or {}).get(k) for k in ISR_FIGURES},
            }
            for c in unchecked + self.clusters
        ]  # fmt: skip

    def refusal(self) -> str:
        names = ", ".join(c.cluster for c in self.failed)
        return (
            f"the replay's ground truth contradicts it on {names} (self-check above): gold and the report are "
            "not written from it. produce_replay keeps the rows for inspection; the next run replays these "
            "clusters again. README, 'The replay checks itself', says what each figure means; --accept-untrusted "
            "writes gold and the report anyway, marked untrusted."
            + (
                " A failed ISR re-simulation concerns the acks=all@lag what-ifs: without them in replay.lag_ms "
                "(and without `own`) the other policies are judged on their own."
                if any(
                    c.isr is not None and any(f.startswith("ISR re-simulated") for f in c.failures) for c in self.failed
                )
                else ""
            )
        )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f} ms"  # None: no produce replayed as acked


def _ms_between(later: str, earlier: str) -> Column:
    return (F.unix_micros(later) - F.unix_micros(earlier)) / 1000.0


def ack_truth_columns() -> list[Column]:
    """The replayed ack's error against the broker's, and both ack waits (ms), of a produce_replay row."""
    return [
        F.abs(_ms_between("t_response", "t_ack_observed")).alias("err_ms"),
        _ms_between("t_response", "t_local_done").alias("replayed_wait_ms"),
        _ms_between("t_ack_observed", "t_local_done").alias("observed_wait_ms"),
    ]


def truth_rows(result: DataFrame) -> DataFrame:
    """Recorded acks=all produces with the broker's ack: replayed ack error, waits, whether acked."""
    return result.filter(
        (F.col("policy") == ACKS_ALL.id) & (F.col("recorded_acks") == -1) & F.col("t_ack_observed").isNotNull()
    ).select(
        F.monotonically_increasing_id().alias("row_id"), "cluster", "topic", "partition", "t_start",
        (F.col("outcome") == Outcome.ACKED.label).alias("acked"), *ack_truth_columns(),
    )  # fmt: skip


def with_window(truth: DataFrame, isr_changes: DataFrame) -> DataFrame:
    """`window`: the latest event of the produce's partition in the WINDOW_SECONDS before its start."""
    events = isr_changes.filter(F.col("change_kind").isin(*WINDOW_OF_KIND)).select(
        "cluster", "topic", "partition", F.col("t_log").alias("t_event"), F.col("change_kind").alias("event_kind")
    )
    joined = truth.join(
        events,
        (truth["cluster"] == events["cluster"]) & (truth["topic"] == events["topic"])
        & (truth["partition"] == events["partition"]) & (events["t_event"] <= truth["t_start"])
        & (events["t_event"] > truth["t_start"] - F.expr(f"INTERVAL {WINDOW_SECONDS} SECONDS")),
        "left",
    ).select(truth["*"], "t_event", "event_kind")  # fmt: skip
    latest = Window.partitionBy("row_id").orderBy(F.col("t_event").desc_nulls_last())
    labels = F.create_map(*[x for kind, label in WINDOW_OF_KIND.items() for x in (F.lit(kind), F.lit(label))])
    return (
        joined.withColumn("rank", F.row_number().over(latest))
        .filter(F.col("rank") == 1)
        .withColumn("window", F.coalesce(labels[F.col("event_kind")], F.lit(QUIET)))
        .drop("rank", "t_event", "event_kind")
    )


def _figures(df: DataFrame, by: list[str]) -> list[dict]:
    """Counts per group in one pass, then each group's exact P999s (top-k, never every value). The columns
    read are persisted first: every group's top-k reads them again, and `df` may be a join (with_window)
    that would otherwise be computed once per group."""
    waits = {
        "p999_replayed_ms": F.when(F.col("acked"), F.col("replayed_wait_ms")),
        "p999_observed_ms": F.col("observed_wait_ms"),
    }
    df = df.select(*by, "acked", "err_ms", "replayed_wait_ms", "observed_wait_ms").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _group_figures(df, by, waits)
    finally:
        df.unpersist()


def _group_figures(df: DataFrame, by: list[str], waits: dict[str, Column]) -> list[dict]:
    from ackreplay.replay.stage import exact_high_percentiles

    rows = (
        df.groupBy(*by)
        .agg(
            F.count("*").alias("n"),
            F.count_if(~F.col("acked")).alias("not_acked"),
            F.count_if(F.col("acked") & (F.col("err_ms") <= 2)).alias("within"),
            F.count_if(F.col("acked")).alias("acked"),
            F.count("observed_wait_ms").alias("observed"),
        )
        .orderBy(*by)
        .collect()  # one row per cluster (and window): small
    )
    out = []
    for r in rows:
        group = df.filter(reduce(operator.and_, [F.col(k) == r[k] for k in by]))
        counts = {"p999_replayed_ms": r["acked"], "p999_observed_ms": r["observed"]}
        figures = {"n": r["n"], "not_acked": r["not_acked"], "within_2ms": r["within"] / r["n"]}
        out.append({**{k: r[k] for k in by}, **figures, **exact_high_percentiles(group, waits, 0.999, counts)})
    return out


def _p999_off(replayed: float | None, reference: float | None, max_error: float) -> bool:
    if reference is None:
        return replayed is not None
    return replayed is None or abs(replayed - reference) > max(max_error * reference, _P999_FLOOR_MS)


def check_isr_resimulation(result: DataFrame, own_lag_ms: dict[str, float]) -> dict[str, dict]:
    """cluster -> the ISR re-simulated at its own lag against the recorded ISR, over the produces the
    replayed acks=all acks: n, the share `acks=all@lag=<own>` acks within 2 ms of them (not acking is a
    miss), and both exact P999s of ack wait (ms)."""
    from ackreplay.replay.stage import exact_high_percentiles

    if not own_lag_ms:
        return {}
    key = ["cluster", "topic", "partition", "leader_epoch", "base_offset"]
    wait = _ms_between("t_ack", "t_local_done")
    acked = F.col("outcome") == Outcome.ACKED.label
    own_policy = reduce(
        operator.or_, [(F.col("cluster") == c) & (F.col("policy") == lag_policy_id(v)) for c, v in own_lag_ms.items()]
    )
    scope = result.filter(F.col("cluster").isin(*own_lag_ms) & acked)
    recorded = scope.filter(F.col("policy") == ACKS_ALL.id).select(*key, wait.alias("recorded_ms"))
    resimulated = scope.filter(own_policy).select(*key, wait.alias("resimulated_ms"))
    both = recorded.join(resimulated, key, "left").cache()
    try:
        rows = (
            both.groupBy("cluster")
            .agg(
                F.count("*").alias("n"),
                F.count_if(F.abs(F.col("resimulated_ms") - F.col("recorded_ms")) <= 2).alias("within"),
                F.count("resimulated_ms").alias("resimulated"),
            )
            .collect()  # one row per cluster
        )
        out = {}
        for r in rows:
            p999 = exact_high_percentiles(
                both.filter(F.col("cluster") == r["cluster"]),
                {"p999_resimulated_ms": F.col("resimulated_ms"), "p999_recorded_ms": F.col("recorded_ms")},
                0.999, {"p999_resimulated_ms": r["resimulated"], "p999_recorded_ms": r["n"]},
            )  # fmt: skip
            out[r["cluster"]] = {
                "lag_ms": own_lag_ms[r["cluster"]],
                "n": r["n"],
                "within_2ms": r["within"] / r["n"],
                **p999,
            }
    finally:
        both.unpersist()
    return out


def _isr_failures(isr: dict | None, settings: SelfCheckSettings) -> list[str]:
    if isr is None or isr["n"] < settings.min_produces:
        return []
    failures = []
    if isr["within_2ms"] < settings.isr_min_within_2ms:
        failures.append(
            f"ISR re-simulated at its own lag: {isr['within_2ms']:.2%} within 2 ms of the recorded ISR's acks "
            f"< {settings.isr_min_within_2ms:.0%}"
        )
    if _p999_off(isr["p999_resimulated_ms"], isr["p999_recorded_ms"], settings.isr_max_p999_error):
        failures.append(f"ISR re-simulated at its own lag: P999 off by more than {settings.isr_max_p999_error:.0%}")
    return failures


def _rejection_failures(rejections: tuple[int, int] | None, settings: SelfCheckSettings) -> list[str]:
    if rejections is None or rejections[0] < settings.min_rejections:
        return []
    rejected, replayed = rejections
    if replayed / rejected >= settings.min_rejected:
        return []
    return [
        f"{replayed:,} of {rejected:,} NOT_ENOUGH_REPLICAS answers rejected by the replay < {settings.min_rejected:.0%}"
    ]


def check_replay(
    result: DataFrame,
    isr_changes: DataFrame,
    settings: SelfCheckSettings,
    metric_clusters: list[str],
    own_lag_ms: dict[str, float] | None = None,
    rejections: dict[str, tuple[int, int]] | None = None,
) -> SelfCheck:
    """The self-check of one replay run's clusters (`result`: produce_replay rows of the run's scope);
    `own_lag_ms`: the clusters whose own lag was replayed (check_isr_resimulation); `rejections`: per cluster,
    the brokers' NOT_ENOUGH_REPLICAS answers and how many of them the replay rejects (None: not counted)."""
    check = SelfCheck(settings)
    isr = check_isr_resimulation(result, {c: v for c, v in (own_lag_ms or {}).items() if c not in metric_clusters})
    # _figures persists the columns it reads; the window breakdown of a refused cluster reads `truth` again
    truth = truth_rows(result)
    for row in _figures(truth, ["cluster"]):
        judged = (
            "JMX timeline" if row["cluster"] in metric_clusters
            else "too few produces" if row["n"] < settings.min_produces
            else "judged"
        )  # fmt: skip
        failures: list[str] = []
        if judged == "judged":
            if row["within_2ms"] < settings.min_within_2ms:
                failures.append(f"{row['within_2ms']:.2%} within 2 ms < {settings.min_within_2ms:.0%}")
            if _p999_off(row["p999_replayed_ms"], row["p999_observed_ms"], settings.max_p999_error):
                failures.append(f"P999 off by more than {settings.max_p999_error:.0%}")
        figures = isr.pop(row["cluster"], None)
        rejected = None if rejections is None else rejections.get(row["cluster"], (0, 0))
        failures += _isr_failures(figures, settings) + _rejection_failures(rejected, settings)
        check.clusters.append(ClusterTruth(
            row["cluster"], row["n"], row["not_acked"], row["within_2ms"], row["p999_replayed_ms"],
            row["p999_observed_ms"], judged, tuple(failures), figures, rejected,
        ))  # fmt: skip
    for cluster, figures in sorted(isr.items()):  # no recorded acks=all produce to judge the acks on
        rejected = None if rejections is None else rejections.get(cluster, (0, 0))
        failures = _isr_failures(figures, settings) + _rejection_failures(rejected, settings)
        check.clusters.append(
            ClusterTruth(cluster, 0, 0, None, None, None, NO_TRUTH, tuple(failures), figures, rejected)
        )
    failed = [c.cluster for c in check.failed if c.n]
    if failed:
        check.windows = _figures(
            with_window(truth.filter(F.col("cluster").isin(*failed)), isr_changes), ["cluster", "window"]
        )
    return check
