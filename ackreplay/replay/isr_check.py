"""Diagnostic: how close is the ISR re-simulated by the kernel to the one the brokers recorded?

`acks=all@lag=<replica.lag.time.max.ms>` replays produces against an ISR that `simulate_isr`
re-simulates from the followers' LEO timelines. With the lag the cluster actually ran with (3000 ms
in the lab traces) it should reproduce the shrinks and expands the leaders logged (silver
`isr_changes`). This module builds, per (cluster, topic, partition, leader epoch), the kernel inputs
with the replay stage's functions (transforms/replay_inputs.fetch_events, ackreplay/replay/groups.epoch_inputs),
but one group per whole epoch instead of time buckets, runs `simulate_isr`, and pairs the simulated
per-follower shrink / expand events with the recorded ones.

It is a diagnostic for the lab traces, NOT part of the pipeline: all rows are collected to the
driver (`toPandas`) and each partition-epoch is simulated there, one at a time, which is only fine
while a partition's data is small (the lab traces: a few thousand produces and fetches per
partition). Run it on a lakehouse whose silver tables exist (`ackreplay run`, or the ingest stage):

    python -m ackreplay.replay.isr_check --lakehouse /tmp/isr_lh --conf conf/local.yaml [--lag-ms 3000]
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackreplay.config import AppConfig
from ackreplay.replay.groups import IsrProposals, epoch_inputs, logged_isr_options
from ackreplay.replay.kernel import IsrTimeline, ReplayOptions, simulate_isr
from ackreplay.storage.lakehouse import read_table, table_exists
from ackreplay.transforms.replay_inputs import (
    KIND_FETCH,
    KIND_ISR,
    KIND_PRODUCE,
    appended,
    build_epochs,
    by_controller,
    fetch_events,
    fetched_epochs,
    leo_evidence,
    with_leader_epoch,
    with_recorded_leos,
)

EPOCH_KEY = ["cluster", "topic", "partition", "leader_epoch"]


@dataclass(frozen=True)
class IsrEvent:
    """A follower leaving (shrink) or rejoining (expand) the ISR at `t_us`."""

    follower: int
    kind: str  # shrink | expand
    t_us: int


@dataclass
class EpochComparison:
    """One partition-epoch's recorded ISR events against the re-simulated ones, paired."""

    cluster: str
    topic: str
    partition: int
    leader_epoch: int
    leader: int
    recorded: list[IsrEvent]
    simulated: list[IsrEvent]
    matched: list[tuple[IsrEvent, IsrEvent]] = field(default_factory=list)  # (recorded, simulated)
    missed: list[IsrEvent] = field(default_factory=list)  # recorded, no simulated counterpart
    spurious: list[IsrEvent] = field(default_factory=list)  # simulated, no recorded counterpart


@dataclass
class IsrComparison:
    """Every partition-epoch's comparison at one lag."""

    lag_ms: float
    match_window_ms: float
    epochs: list[EpochComparison]

    def rows(self) -> pd.DataFrame:
        """One row per event: matched pair (dt_ms = simulated - recorded), missed or spurious."""
        out = []
        for e in self.epochs:
            base = {
                "cluster": e.cluster,
                "topic": e.topic,
                "partition": e.partition,
                "leader_epoch": e.leader_epoch,
                "leader": e.leader,
            }
            for rec, sim in e.matched:
                out.append(
                    {
                        **base,
                        "follower": rec.follower,
                        "kind": rec.kind,
                        "status": "matched",
                        "t_recorded_us": rec.t_us,
                        "t_simulated_us": sim.t_us,
                        "dt_ms": (sim.t_us - rec.t_us) / 1000,
                    }
                )
            for rec in e.missed:
                out.append(
                    {
                        **base,
                        "follower": rec.follower,
                        "kind": rec.kind,
                        "status": "missed",
                        "t_recorded_us": rec.t_us,
                        "t_simulated_us": None,
                        "dt_ms": None,
                    }
                )
            for sim in e.spurious:
                out.append(
                    {
                        **base,
                        "follower": sim.follower,
                        "kind": sim.kind,
                        "status": "spurious",
                        "t_recorded_us": None,
                        "t_simulated_us": sim.t_us,
                        "dt_ms": None,
                    }
                )
        columns = [
            "cluster",
            "topic",
            "partition",
            "leader_epoch",
            "leader",
            "follower",
            "kind",
            "status",
            "t_recorded_us",
            "t_simulated_us",
            "dt_ms",
        ]
        df = pd.DataFrame(out, columns=columns)
        return df.sort_values(
            ["cluster", "topic", "partition", "leader_epoch", "follower", "kind", "t_recorded_us", "t_simulated_us"],
            na_position="last",
        ).reset_index(drop=True)

    def summary(self) -> pd.DataFrame:
        """Per kind: recorded, simulated, matched, missed, spurious, and |dt| of the matched pairs."""
        rows = self.rows()
        out = []
        for kind in ("shrink", "expand"):
            k = rows[rows["kind"] == kind]
            m = k[k["status"] == "matched"]
            dt = m["dt_ms"].abs()
            out.append({
                "kind": kind,
                "recorded": int((k["status"] != "spurious").sum()),
                "simulated": int((k["status"] != "missed").sum()),
                "matched": len(m),
                "missed": int((k["status"] == "missed").sum()),
                "spurious": int((k["status"] == "spurious").sum()),
                "median_abs_dt_ms": float(dt.median()) if len(m) else None,
                "max_abs_dt_ms": float(dt.max()) if len(m) else None,
                "mean_dt_ms": float(m["dt_ms"].mean()) if len(m) else None,
            })  # fmt: skip
        return pd.DataFrame(out)

    def table_lines(self) -> list[str]:
        rows = self.rows()
        shown = rows.assign(
            t_recorded=pd.to_datetime(rows["t_recorded_us"], unit="us").dt.strftime("%H:%M:%S.%f").str[:-3],
            t_simulated=pd.to_datetime(rows["t_simulated_us"], unit="us").dt.strftime("%H:%M:%S.%f").str[:-3],
        )[
            [
                "cluster",
                "partition",
                "leader_epoch",
                "leader",
                "follower",
                "kind",
                "status",
                "t_recorded",
                "t_simulated",
                "dt_ms",
            ]
        ]
        return [
            f"ISR re-simulated with replica.lag.time.max.ms={self.lag_ms:g} vs recorded "
            f"(pairs within {self.match_window_ms:g} ms), {len(self.epochs)} partition-epochs",
            *shown.fillna("-").to_string(index=False).splitlines(),
            "",
            *self.summary().to_string(index=False).splitlines(),
        ]


def follower_events(timeline: IsrTimeline, followers: list[int]) -> list[IsrEvent]:
    """Per-follower shrink / expand events of a committed ISR timeline."""
    tl = timeline.normalized()
    events = []
    for k, t in enumerate(tl.change_times):
        before, after = tl.membership[k], tl.membership[k + 1]
        for j, f in enumerate(followers):
            if before[j] != after[j]:
                events.append(IsrEvent(f, "expand" if after[j] else "shrink", int(t)))
    return events


def match_events(
    recorded: list[IsrEvent], simulated: list[IsrEvent], window_us: int
) -> tuple[list[tuple[IsrEvent, IsrEvent]], list[IsrEvent], list[IsrEvent]]:
    """Pair recorded and simulated events of the same follower and kind, closest first, each used once,
    at most `window_us` apart. Returns (pairs, missed, spurious)."""
    candidates = sorted(
        (abs(s.t_us - r.t_us), i, j)
        for i, r in enumerate(recorded)
        for j, s in enumerate(simulated)
        if r.follower == s.follower and r.kind == s.kind and abs(s.t_us - r.t_us) <= window_us
    )
    used_r, used_s, pairs = set(), set(), []
    for _, i, j in candidates:
        if i not in used_r and j not in used_s:
            used_r.add(i)
            used_s.add(j)
            pairs.append((recorded[i], simulated[j]))
    pairs.sort(key=lambda p: p[0].t_us)
    missed = [r for i, r in enumerate(recorded) if i not in used_r]
    spurious = [s for j, s in enumerate(simulated) if j not in used_s]
    return pairs, missed, spurious


def epoch_rows(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    clusters: list[str] | None = None,
) -> DataFrame:
    """The kernel's input rows (produces, follower LEO events, ISR changes) of every leader epoch with
    produces, as the replay stage builds them (LEO events at carried-over fetches included) but with one
    group per epoch (bucket 0)."""

    def table(name: str) -> DataFrame:
        df = read_table(spark, lakehouse, name)
        return df if clusters is None else df.filter(F.col("cluster").isin(clusters))

    produce, fetches, partitions = table("produce_requests"), table("follower_fetches"), table("partitions")
    epochs = build_epochs(table("leader_epochs"), fetched_epochs(fetches))
    # Only what simulate_isr needs, with the epoch's constants on every produce row (own selection:
    # the replay stage's produce_side carries group ids and output columns instead).
    meta = partitions.select("cluster", "topic", "partition", "replicas", "min_insync_replicas")
    produces = (
        with_leader_epoch(produce.filter(appended()), epochs, F.unix_micros("t_local_done"))
        .join(F.broadcast(meta), ["cluster", "topic", "partition"], "inner")
        .select(
            *EPOCH_KEY, F.lit(KIND_PRODUCE).cast("tinyint").alias("kind"), F.unix_micros("t_local_done").alias("t_us"),
            F.col("base_offset").alias("offset"), F.lit(None).cast("int").alias("follower_id"), "broker_id",
            "timeout_ms", "replicas", "min_insync_replicas", "epoch_start_us", "epoch_end_us", "start_isr",
        )
    )  # fmt: skip
    events = with_leader_epoch(leo_evidence(fetches), epochs, F.unix_micros("t_dequeue"))
    events = fetch_events(events, config.replay.fetch_update_fraction)
    if table_exists(spark, lakehouse, "follower_leo_records"):
        records = with_leader_epoch(table("follower_leo_records"), epochs, F.unix_micros("t_log"))
        events = with_recorded_leos(events, records)
    events = events.select(*EPOCH_KEY, F.lit(KIND_FETCH).cast("tinyint").alias("kind"), "t_us", "offset", "follower_id")
    isr = with_leader_epoch(table("isr_changes").drop("leader_epoch"), epochs, F.unix_micros("t_log")).select(
        *EPOCH_KEY, F.lit(KIND_ISR).cast("tinyint").alias("kind"), F.unix_micros("t_log").alias("t_us"), "isr",
        by_controller().alias("by_controller"),
    )  # fmt: skip
    keys = produces.select(*EPOCH_KEY).distinct()
    return produces.unionByName(events.join(keys, EPOCH_KEY, "left_semi"), allowMissingColumns=True).unionByName(
        isr.join(keys, EPOCH_KEY, "left_semi"), allowMissingColumns=True
    )


def compare_epoch(
    pdf: pd.DataFrame,
    lag_ms: float,
    window_ms: float,
    options: ReplayOptions | None = None,
    silences: dict[tuple[str, int], np.ndarray] | None = None,
    proposals: Mapping[tuple[str, int], IsrProposals] | None = None,
    ineligible: Mapping[tuple[str, int], np.ndarray] | None = None,
    ineligible_delay_us: Mapping[str, int] | None = None,
) -> EpochComparison:
    """Simulate one partition-epoch's ISR and pair its events with the recorded ones (driver side).
    `silences`: when each broker did not run (stage.leader_silences); `proposals`: when each broker's
    isr-expiration task proposed a shrink and how long each took to commit (stage.isr_proposals)."""
    produces = pdf[pdf["kind"] == KIND_PRODUCE].sort_values("t_us", kind="stable")
    first = produces.iloc[0]
    leader = int(first["broker_id"])
    followers = [int(r) for r in first["replicas"] if int(r) != leader]
    events = pdf[pdf["kind"] == KIND_FETCH].sort_values("t_us", kind="stable")
    changes = pdf[pdf["kind"] == KIND_ISR].sort_values("t_us", kind="stable")
    inputs, _ = epoch_inputs(
        base_offset=produces["offset"].to_numpy(np.int64),
        t_local_done=produces["t_us"].to_numpy(np.int64),
        timeout_ms=produces["timeout_ms"].to_numpy(np.int64),
        leader=leader,
        replicas=first["replicas"],
        event_follower=events["follower_id"].to_numpy(),
        event_t=events["t_us"].to_numpy(np.int64),
        event_offset=events["offset"].to_numpy(np.int64),
        change_times=changes["t_us"].to_numpy(np.int64),
        change_isrs=list(changes["isr"]),
        change_by_controller=changes["by_controller"].to_numpy(bool),
        leader_silences=(silences or {}).get((str(first["cluster"]), leader)),
        broker_ineligible={b: spans for (c, b), spans in (ineligible or {}).items() if c == str(first["cluster"])},
        ineligible_delay_us=(ineligible_delay_us or {}).get(str(first["cluster"]), 0),
        start_isr=first["start_isr"],
        min_insync_replicas=int(first["min_insync_replicas"]),
        epoch_start_us=int(first["epoch_start_us"]),
        epoch_end_us=int(first["epoch_end_us"]),
        lag_ms=(lag_ms,),
    )
    logged = (proposals or {}).get((str(first["cluster"]), leader))
    simulated_tl = simulate_isr(
        inputs,
        lag_ms,
        logged_isr_options(
            # `lag_ms` is the cluster's own (the module doc): its checks are the leader's logged ones
            replace(options or ReplayOptions(), recorded_lag_us=round(lag_ms * 1000)),
            logged,
            inputs.epoch_start,
            str(first["topic"]),
            int(first["partition"]),
        ),
    )
    recorded = follower_events(inputs.isr, followers)
    simulated = follower_events(simulated_tl, followers)
    pairs, missed, spurious = match_events(recorded, simulated, int(window_ms * 1000))
    return EpochComparison(
        str(first["cluster"]), str(first["topic"]), int(first["partition"]), int(first["leader_epoch"]), leader,
        recorded, simulated, pairs, missed, spurious,
    )  # fmt: skip


def compare_isr(
    spark: SparkSession,
    config: AppConfig,
    lakehouse: str,
    lag_ms: float = 3000.0,
    window_ms: float = 10_000.0,
    clusters: list[str] | None = None,
    options: ReplayOptions | None = None,
) -> IsrComparison:
    """Re-simulate every partition-epoch's ISR for `lag_ms` and compare it with the recorded one.

    Events of the same follower and kind are paired closest first, at most `window_ms` apart.
    Collects each epoch's rows to the driver: for the small lab traces only (see the module doc).
    """
    from ackreplay.replay.stage import (
        ineligible_spans,
        isr_proposals,
        leader_silences,
        logged_lines,
        metadata_apply_delays,
    )

    pdf: pd.DataFrame = epoch_rows(spark, config, lakehouse, clusters).toPandas()
    lines = logged_lines(read_table(spark, lakehouse, "request_log_lines"))
    for name in ("produce_requests", "follower_fetches"):
        lines = lines.unionByName(read_table(spark, lakehouse, name).select("cluster", "broker_id", "t_local_done"))
    if clusters is not None:
        lines = lines.filter(F.col("cluster").isin(clusters))
    changes = read_table(spark, lakehouse, "isr_changes")
    proposals = isr_proposals(changes if clusters is None else changes.filter(F.col("cluster").isin(clusters)))
    silences = leader_silences(lines, proposals)
    registrations = (
        read_table(spark, lakehouse, "broker_registrations")
        if table_exists(spark, lakehouse, "broker_registrations")
        else None
    )
    clusters_seen = sorted(pdf["cluster"].unique()) if clusters is None else list(clusters)
    ineligible: Mapping[tuple[str, int], np.ndarray] = {}
    delay_us: dict[str, int] = {}
    if registrations is not None:
        deltas = (
            read_table(spark, lakehouse, "metadata_deltas")
            if table_exists(spark, lakehouse, "metadata_deltas")
            else None
        )
        delays = metadata_apply_delays(registrations, deltas, clusters_seen) if deltas is not None else {}
        ineligible = ineligible_spans(registrations, clusters_seen)
        delay_us = {c: round(ms * 1000) for c, (ms, _) in delays.items()}
    result = [
        compare_epoch(group, lag_ms, window_ms, options, silences, proposals, ineligible, delay_us)
        for _, group in sorted(pdf.groupby(EPOCH_KEY, sort=False), key=lambda kv: kv[0])
    ]
    return IsrComparison(lag_ms, window_ms, result)


def main(argv: list[str] | None = None) -> None:
    """`python -m ackreplay.replay.isr_check`: the re-simulated ISR against the recorded one, as tables."""
    from ackreplay.config import load_config
    from ackreplay.session import build_spark_session

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lakehouse", required=True)
    p.add_argument("--conf", default="conf/local.yaml")
    p.add_argument("--lag-ms", type=float, default=3000.0)
    p.add_argument("--window-ms", type=float, default=10_000.0)
    args = p.parse_args(argv)
    config = load_config(args.conf)
    spark = build_spark_session(config.spark)
    try:
        comparison = compare_isr(spark, config, args.lakehouse, args.lag_ms, args.window_ms)
        print("\n".join(comparison.table_lines()))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
