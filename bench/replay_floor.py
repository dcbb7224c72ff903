"""How fast could any Spark replay stage be here? Spark passes that do less than the replay, next to it.

    python -m bench.replay_bench --produces 10000000 --skip-peers   # builds bench/out/replay-10000000-24
    python -m bench.replay_floor --work bench/out/replay-10000000-24

On the bench data of `bench.replay_bench`, in one Spark session and one process, times:
- scan: read produce_requests and follower_fetches from Delta, every column, nothing else (noop sink);
- shuffle: the same rows hash-partitioned by the replay's group key (cluster, leader broker, 120 s
  bucket), the one exchange per side the replay needs (noop sink);
- cogroup: the replay's own two sides (`produce_side`, `event_side`) shuffled, sorted and sent to
  Python as Arrow by the cogrouped `applyInArrow`, into a group function that returns nothing: what
  the replay pays before computing anything;
- write long: no replay at all, each appended produce copied into produce_replay's columns once per
  policy (5 rows per produce, plain column expressions, no Python) and written by Spark's Delta
  writer as `replay.writer: spark` writes produce_replay (partitioned, replaceWhere, its settings);
- write wide: the same values as one row per produce with the policies' columns side by side;
- the replay stage itself (`run_replay`, the conf's policies, the configured writer), last, so warm;
and the DuckDB peers of `bench.replay_bench`: two policies counted, and produce_replay's rows written
to a Parquet file. A warm-up write of a 1% slice runs first, untimed.

A pass that does less than the replay bounds what a replay stage built that way can reach on this
machine: the cogroup pass any design that hands the rows to Python, the write passes any design
that writes produce_replay through Spark's writer.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ackreplay.config import load_config
from ackreplay.replay.stage import REPLAY_WRITE_CONF, _session_conf, run_replay
from ackreplay.schemas.replay import PRODUCE_REPLAY
from ackreplay.session import command_session
from ackreplay.storage.lakehouse import read_table, replace_rows
from ackreplay.transforms.common import conform
from ackreplay.transforms.replay_inputs import appended, event_side, fetch_events, leo_evidence, produce_side
from bench.replay_bench import duckdb_produce_replay, duckdb_replay

POLICIES = ("acks=1", "acks=all", "min.insync", "quorum=2", "quorum=3")
BUCKET_US = 120 * 1_000_000
# produce_replay's per-policy columns (the rest are the produce's own).
POLICY_COLUMNS = (
    "policy",
    "outcome",
    "t_ack",
    "t_response",
    "ack_wait_ms",
    "latency_ms",
    "broker_latency_ms",
    "hol_wait_ms",
    "copies_at_ack",
    "exposure_ms",
    "full_replication_ms",
    "loss_kafka_election",
    "loss_longest_log_election",
    "loss_kafka_election_min",
    "loss_longest_log_election_min",
    "offline_at_failure",
    "loss_window_kafka_ms",
    "loss_window_kafka_min_ms",
    "loss_window_longest_ms",
    "loss_window_longest_min_ms",
    "isr_source",
)


def _appended(spark: SparkSession, lakehouse: str) -> DataFrame:
    produce = read_table(spark, lakehouse, "produce_requests")
    return produce.filter(appended())


def _policy_values(prefix: str = "") -> dict[str, F.Column]:
    """produce_replay's per-policy columns filled from the produce itself (as if acked on local write)."""
    return {
        f"{prefix}outcome": F.lit("acked"),
        f"{prefix}t_ack": F.col("t_local_done"),
        f"{prefix}t_response": F.col("t_local_done"),
        f"{prefix}ack_wait_ms": F.lit(0.0),
        f"{prefix}latency_ms": (F.unix_micros("t_local_done") - F.unix_micros("t_start")) / 1000.0,
        f"{prefix}broker_latency_ms": (F.unix_micros("t_local_done") - F.unix_micros("t_start")) / 1000.0,
        f"{prefix}hol_wait_ms": F.lit(0.0),
        f"{prefix}copies_at_ack": F.lit(1),
        f"{prefix}exposure_ms": F.lit(0.0),
        f"{prefix}full_replication_ms": F.lit(0.0),
        f"{prefix}loss_kafka_election": F.lit(False),
        f"{prefix}loss_longest_log_election": F.lit(False),
        f"{prefix}loss_kafka_election_min": F.lit(False),
        f"{prefix}loss_longest_log_election_min": F.lit(False),
        f"{prefix}offline_at_failure": F.lit(False),
        **{f"{prefix}{name}": F.lit(0.0) for name in POLICY_COLUMNS if name.startswith("loss_window_")},
        f"{prefix}isr_source": F.lit("assumed_full"),
    }


def _produce_values(produce: DataFrame) -> DataFrame:
    return produce.withColumns(
        {
            "leader_epoch": F.lit(0),
            "bytes": F.col("records_size_bytes"),
            "records": F.lit(None).cast("int"),
            "recorded_acks": F.col("acks"),
            "leo_source": F.lit("follower_fetches"),
            "t_send": F.lit(None).cast("timestamp"),
            "replay_run_id": F.lit("floor"),
        }
    )


def long_rows(produce: DataFrame) -> DataFrame:
    policies = produce.sparkSession.createDataFrame([(p,) for p in POLICIES], "policy string")
    return conform(
        _produce_values(produce).crossJoin(F.broadcast(policies)).withColumns(_policy_values()), PRODUCE_REPLAY
    )


def wide_rows(produce: DataFrame) -> DataFrame:
    own = [f.name for f in PRODUCE_REPLAY.fields if f.name not in POLICY_COLUMNS]
    values: dict[str, F.Column] = {}
    for policy in POLICIES:
        values.update(_policy_values(policy.replace("=", "_").replace(".", "_") + "__"))
    return _produce_values(produce).withColumns(values).select(*own, *values)


def _noop(df: DataFrame) -> None:
    df.write.format("noop").mode("overwrite").save()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="bench/out/replay-1000000-24", help="a bench.replay_bench work directory")
    parser.add_argument("--conf", default="conf/local.yaml")
    parser.add_argument("--skip-replay", action="store_true", help="leave out the replay stage itself")
    args = parser.parse_args(argv)
    work = Path(args.work)
    lakehouse = str(work / "lakehouse")
    data = work / "parquet"
    config = load_config(args.conf)
    config = config.model_copy(update={"replay": config.replay.model_copy(update={"lag_ms": []})})
    # the session ends before the DuckDB peer runs, so that it has the cores to itself
    with command_session(config.spark, app_name="ackreplay-bench-replay-floor") as spark:
        scratch = tempfile.mkdtemp(prefix="ackreplay-floor-")
        produce = _appended(spark, lakehouse)
        fetches = read_table(spark, lakehouse, "follower_fetches")
        n = produce.count()

        def write(df: DataFrame, layout: str) -> None:
            # Each layout in its own scratch lakehouse, under produce_replay's table name and partitioning.
            with _session_conf(spark, REPLAY_WRITE_CONF):
                if layout != "wide":
                    replace_rows(df, f"{scratch}/{layout}", "produce_replay", "cluster = 'bench'", "floor")
                    return
                # replace_rows with produce_replay's statistics columns minus the policy and outcome it lacks
                (
                    df.write.format("delta")
                    .mode("overwrite")
                    .option("replaceWhere", "cluster = 'bench'")
                    .partitionBy("cluster", "event_date")
                    .option("delta.dataSkippingStatsColumns", "topic,partition")
                    .save(f"{scratch}/wide/produce_replay")
                )

        def group_key(df: DataFrame, t: str) -> DataFrame:
            bucket = F.floor(F.unix_micros(t) / BUCKET_US)
            return df.repartition(F.xxhash64("cluster", "broker_id", bucket))

        def cogroup_only() -> None:
            nothing = lambda left, right: pa.table({"n": pa.array([], pa.int64())})  # noqa: E731
            events = event_side(
                fetch_events(leo_evidence(fetches), config.replay.fetch_update_fraction), BUCKET_US, 30_000_000, 0
            )
            with _session_conf(spark, REPLAY_WRITE_CONF):
                _noop(
                    produce_side(produce, BUCKET_US)
                    .groupBy("gid")
                    .cogroup(events.groupBy("gid"))
                    .applyInArrow(nothing, "n long")
                )

        write(long_rows(produce.sample(0.01, seed=1)), "warm-up")  # warm-up, untimed
        passes = {
            "scan: produce_requests + follower_fetches, every column (noop sink)": lambda: (
                _noop(produce),
                _noop(fetches),
            ),
            "shuffle: both sides hash-partitioned by the replay's group key (noop sink)": lambda: (
                _noop(group_key(produce, "t_local_done")),
                _noop(group_key(fetches, "t_dequeue")),
            ),
            "cogroup: the replay's two sides through applyInArrow into an empty group function": cogroup_only,
            "write long: 5 rows per produce, produce_replay's 33 columns, no replay (Delta)": lambda: write(
                long_rows(produce), "long"
            ),
            "write wide: 1 row per produce, the 5 policies side by side, no replay (Delta)": lambda: write(
                wide_rows(produce), "wide"
            ),
        }
        if not args.skip_replay:
            passes[f"replay stage: run_replay, 5 policies, {config.replay.writer} writer, counts and ground truth"] = (
                lambda: run_replay(spark, config, lakehouse, ["bench"], "floor")
            )
        rows = []
        for label, run in passes.items():
            started = time.monotonic()
            run()
            rows.append((label, time.monotonic() - started))
    started = time.monotonic()
    duckdb_replay(data)
    rows.append(("DuckDB ASOF JOIN, acks=all + quorum=2, counted", time.monotonic() - started))
    started = time.monotonic()
    duckdb_produce_replay(data, Path(scratch) / "duckdb.parquet")
    rows.append(
        ("DuckDB ASOF JOIN, produce_replay's rows (5 policies) written to one Parquet file", time.monotonic() - started)
    )
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n| pass over {n:,} appended produces | wall time | produces/s |")
    print("|---|---|---|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.1f} s | {n / seconds:,.0f} |")


if __name__ == "__main__":
    main()
