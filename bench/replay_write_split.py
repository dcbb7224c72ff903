"""Where the replay stage's time goes: the same replay with its Delta write swapped for other sinks.

    python -m bench.replay_bench --produces 1000000 --skip-peers   # builds bench/out/replay-1000000-24
    python -m bench.replay_write_split --lakehouse bench/out/replay-1000000-24/lakehouse

Runs `run_replay` on a bench lakehouse once per sink, in one Spark session, and prints the time of the
write step (the cogroup, the group function and the sink), of what follows it (the counts and the
ground truth read back from produce_replay) and of the whole stage:
- delta: as in production (partitioned Delta write with statistics, replaceWhere);
- parquet: the same rows as plain unpartitioned Parquet files (Spark's Parquet writer, no Delta);
- noop: Spark's `noop` sink, which pulls every row and writes nothing (the cost of computing them).
The stage's reads before and counts after the write are the same in every run; they read the
lakehouse's existing produce_replay table, so run bench.replay_bench first.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

from ackreplay.config import load_config
from ackreplay.replay import stage
from ackreplay.session import build_spark_session

SINKS = ("noop", "parquet", "delta")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lakehouse", default="bench/out/replay-1000000-24/lakehouse")
    parser.add_argument("--conf", default="conf/local.yaml")
    parser.add_argument("--sinks", nargs="+", choices=SINKS, default=list(SINKS))
    args = parser.parse_args(argv)
    config = load_config(args.conf)
    # As bench.replay_bench: every policy but the lag re-simulations.
    config = config.model_copy(update={"replay": config.replay.model_copy(update={"lag_ms": []})})
    spark = build_spark_session(config.spark, app_name="ackreplay-bench-write-split")
    delta_write = stage.replace_rows
    scratch = tempfile.mkdtemp(prefix="ackreplay-write-split-")
    rows = []
    for sink in args.sinks:
        write_seconds = []

        def timed_write(df, lakehouse, name, predicate, run_id, sink=sink, write_seconds=write_seconds):
            started = time.monotonic()
            if sink == "delta":
                delta_write(df, lakehouse, name, predicate, run_id)
            elif sink == "parquet":
                df.write.mode("overwrite").parquet(f"{scratch}/produce_replay")
            else:
                df.write.format("noop").mode("overwrite").save()
            write_seconds.append((time.monotonic() - started, time.monotonic()))

        stage.replace_rows = timed_write  # the stage calls it through the module
        try:
            started = time.monotonic()
            report = stage.run_replay(spark, config, args.lakehouse, ["bench"], f"bench-{sink}")
            write, write_end = write_seconds[0]
            rows.append((sink, write, time.monotonic() - write_end, time.monotonic() - started, report.replayed))
        finally:
            stage.replace_rows = delta_write
    shutil.rmtree(scratch, ignore_errors=True)
    spark.stop()
    print(
        "\n| sink | write step (cogroup, group function, sink) | after it (counts, ground truth) | whole stage | "
        "produces |"
    )
    print("|---|---|---|---|---|")
    for sink, write, after, whole, n in rows:
        print(f"| {sink} | {write:.1f} s | {after:.1f} s | {whole:.1f} s | {n:,} |")


if __name__ == "__main__":
    main()
