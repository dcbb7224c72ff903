"""Reconciliation: every input line and every silver row is accounted for through to gold.

Counts per stage and cluster (small grouped aggregates: one row per cluster, status or policy), each
compared with the count it must equal. A mismatch means rows were lost or invented between stages.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ackreplay.schemas.vocabulary import ACKS_1, Outcome
from ackreplay.storage.lakehouse import read_table, table_exists
from ackreplay.transforms.gold import delivered
from ackreplay.transforms.replay_inputs import appended


@dataclass(frozen=True)
class Count:
    """`left` must relate to `right` by `relation` ("=" or "<=")."""

    name: str  # reconcile.<what>
    table: str  # the downstream table the count checks
    cluster: str
    left_label: str
    left: int
    relation: str
    right_label: str
    right: int
    note: str = ""  # what the difference is, when `<=`

    @property
    def ok(self) -> bool:
        return self.left == self.right if self.relation == "=" else self.left <= self.right

    def describe(self) -> str:
        mark = "ok" if self.ok else "MISMATCH"
        text = f"{self.left_label} {self.left:,} {self.relation} {self.right_label} {self.right:,}"
        if self.note and self.ok and self.left != self.right:
            text += f" ({self.right - self.left:,} {self.note})"
        return f"{self.cluster}: {text}  {mark}"


def _scoped(spark: SparkSession, lakehouse: str, name: str, clusters: list[str]) -> DataFrame | None:
    if not table_exists(spark, lakehouse, name):
        return None
    return read_table(spark, lakehouse, name).filter(F.col("cluster").isin(clusters))


def _grouped_together(specs: dict[str, tuple[DataFrame, list[str], tuple]]) -> dict[str, dict]:
    """Several grouped aggregates (name -> (frame, keys, aggregates)), each as {key tuple: row}, from one
    Spark query: a stage's counts are a few small aggregates of different tables, and each query of its own
    costs its planning and a Delta snapshot (~0.3 s warm), not its rows."""
    parts = [
        df.groupBy(*keys).agg(*aggs).withColumn("_aggregate", F.lit(name)) for name, (df, keys, aggs) in specs.items()
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part, allowMissingColumns=True)
    out: dict[str, dict] = {name: {} for name in specs}
    for r in union.collect():
        keys = specs[r["_aggregate"]][1]
        out[r["_aggregate"]][tuple(r[k] for k in keys)] = r
    return out


def ingest_counts(spark: SparkSession, lakehouse: str, clusters: list[str]) -> list[Count]:
    """Bronze lines -> quarantine and silver rows."""
    bronze = _scoped(spark, lakehouse, "request_log_lines", clusters)
    if bronze is None:
        return []
    line_id = F.struct("source_file", "line_number")
    specs: dict[str, tuple[DataFrame, list[str], tuple]] = {
        "lines": (bronze, ["cluster", "status", "api_key_name"], (F.count("*").alias("n"),)),
    }
    for name, table in (("produce", "produce_requests"), ("fetches", "follower_fetches")):
        silver = _scoped(spark, lakehouse, table, clusters)
        if silver is not None:
            specs[name] = (silver, ["cluster"], (F.count_distinct(line_id).alias("n"),))
    quarantine = _scoped(spark, lakehouse, "quarantine", clusters)
    if quarantine is not None:
        specs["quarantined"] = (
            quarantine.filter(F.col("stage") == "request_log"),
            ["cluster"],
            (F.count("*").alias("n"),),
        )
    counts = _grouped_together(specs)
    lines, produce, fetches = counts["lines"], counts.get("produce", {}), counts.get("fetches", {})
    quarantined_rows = counts.get("quarantined", {})
    out: list[Count] = []
    for cluster in sorted({k[0] for k in lines}):

        def lines_of(status: str, api: str | None = None, cluster: str = cluster) -> int:
            return sum(
                r["n"] for (c, s, a), r in lines.items() if c == cluster and s == status and (api is None or a == api)
            )

        total = sum(r["n"] for (c, _, _), r in lines.items() if c == cluster)
        parsed, quarantined, unused = lines_of("parsed"), lines_of("quarantined"), lines_of("unused")
        parsed_produce, parsed_fetch = lines_of("parsed", "PRODUCE"), lines_of("parsed", "FETCH")
        out += [
            Count(
                "reconcile.bronze_status",
                "request_log_lines",
                cluster,
                "request-log lines",
                total,
                "=",
                f"parsed {parsed:,} + quarantined {quarantined:,} + unused {unused:,}, in all",
                parsed + quarantined + unused,
            ),
            Count(
                "reconcile.parsed_kinds",
                "request_log_lines",
                cluster,
                "parsed lines",
                parsed,
                "=",
                "parsed PRODUCE + follower FETCH lines",
                parsed_produce + parsed_fetch,
            ),
            Count(
                "reconcile.quarantine",
                "quarantine",
                cluster,
                "quarantined lines",
                quarantined,
                "=",
                "quarantine rows",
                quarantined_rows.get((cluster,), {"n": 0})["n"],
            ),
            Count(
                "reconcile.produce_lines",
                "produce_requests",
                cluster,
                "parsed PRODUCE lines",
                parsed_produce,
                "=",
                "PRODUCE lines in produce_requests",
                produce.get((cluster,), {"n": 0})["n"],
            ),
            Count(
                "reconcile.fetch_lines",
                "follower_fetches",
                cluster,
                "FETCH lines in follower_fetches",
                fetches.get((cluster,), {"n": 0})["n"],
                "<=",
                "parsed follower FETCH lines",
                parsed_fetch,
                "listing no partition (incremental fetch with nothing changed)",
            ),
        ]
    return out


PRODUCE_ROW = ["cluster", "source_file", "line_number", "topic", "partition"]


def replay_counts(spark: SparkSession, lakehouse: str, clusters: list[str]) -> list[Count]:
    """Silver produce rows -> replayed batches x policies."""
    produce = _scoped(spark, lakehouse, "produce_requests", clusters)
    replay = _scoped(spark, lakehouse, "produce_replay", clusters)
    if produce is None or replay is None:
        return []
    counts = _grouped_together(
        {
            "candidates": (produce, ["cluster"], (F.count_if(appended()).alias("n"), F.count("*").alias("rows"))),
            "per_policy": (replay, ["cluster", "policy"], (F.count("*").alias("n"),)),
            # replay rows without their produce row: invented or mis-keyed by the replay
            "orphans": (
                replay.filter(F.col("policy") == ACKS_1.id).join(
                    produce.select(*PRODUCE_ROW), PRODUCE_ROW, "left_anti"
                ),
                ["cluster"],
                (F.count("*").alias("n"),),
            ),
        }
    )
    candidates, per_policy, orphans = counts["candidates"], counts["per_policy"], counts["orphans"]
    out: list[Count] = []
    for cluster in sorted({k[0] for k in candidates}):
        replayed = per_policy.get((cluster, ACKS_1.id), {"n": 0})["n"]
        out.append(
            Count(
                "reconcile.replayed",
                "produce_replay",
                cluster,
                "replayed batches",
                replayed,
                "<=",
                "appended produce rows",
                candidates[(cluster,)]["n"],
                "outside any known leader epoch or partition",
            )
        )
        out.append(
            Count(
                "reconcile.replay_orphans",
                "produce_replay",
                cluster,
                "replayed batches without a produce row",
                orphans.get((cluster,), {"n": 0})["n"],
                "=",
                "none",
                0,
            )
        )
        for (c, policy), r in sorted(per_policy.items()):
            if c == cluster and policy != ACKS_1.id:
                out.append(
                    Count(
                        f"reconcile.policy_rows[{policy}]",
                        "produce_replay",
                        cluster,
                        f"{policy} rows",
                        r["n"],
                        "=",
                        "acks=1 rows",
                        replayed,
                    )
                )
    return out


GOLD_SUMS = {
    # table -> (column summing to the replay rows, column summing to the acked rows or, for the latency's sample,
    # to the delivered ones: acked, or rejected and appended by a retry, with a latency)
    "latency_percentiles": ("produces", "n", "delivered"),
    "risk_exposure": ("produces", "acked_batches", "acked"),
    "availability": ("produces", "acked", "acked"),
    "policy_summary": ("produces", "n", "delivered"),
}


def gold_counts(spark: SparkSession, lakehouse: str, clusters: list[str]) -> list[Count]:
    """produce_replay rows per (cluster, policy) -> the sums of every gold table."""
    replay = _scoped(spark, lakehouse, "produce_replay", clusters)
    if replay is None:
        return []
    keys = ["cluster", "policy"]
    acked = F.col("outcome") == Outcome.ACKED.label
    specs: dict[str, tuple[DataFrame, list[str], tuple[Column, ...]]] = {
        "expected": (
            replay,
            keys,
            (
                F.count("*").alias("rows"),
                F.count_if(acked).alias("acked"),
                F.count_if(delivered()).alias("delivered"),
            ),
        )
    }
    for table, (rows_col, acked_col, _) in GOLD_SUMS.items():
        gold = _scoped(spark, lakehouse, table, clusters)
        if gold is not None:
            specs[table] = (
                gold,
                keys,
                (F.sum(rows_col).cast("long").alias("rows"), F.sum(acked_col).cast("long").alias("acked")),
            )
    counts = _grouped_together(specs)
    expected = counts["expected"]
    out: list[Count] = []
    for table, (rows_col, acked_col, expected_col) in GOLD_SUMS.items():
        if table not in counts:
            continue
        sums = counts[table]
        for key in sorted(set(expected) | set(sums)):
            cluster, policy = key
            want = expected.get(key, {"rows": 0, "acked": 0, "delivered": 0})
            got = sums.get(key, {"rows": 0, "acked": 0})
            out.append(
                Count(
                    f"reconcile.{table}.{rows_col}",
                    table,
                    cluster,
                    f"{policy}: produce_replay rows",
                    want["rows"],
                    "=",
                    f"sum({table}.{rows_col})",
                    got["rows"] or 0,
                )
            )
            out.append(
                Count(
                    f"reconcile.{table}.{acked_col}",
                    table,
                    cluster,
                    f"{policy}: {expected_col} rows",
                    want[expected_col],
                    "=",
                    f"sum({table}.{acked_col})",
                    got["acked"] or 0,
                )
            )
    return out


STAGE_COUNTS = {"ingest": ingest_counts, "replay": replay_counts, "gold": gold_counts}
