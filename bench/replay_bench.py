"""Replay throughput: the Spark replay stage next to a hand-written DuckDB ASOF JOIN replay.

    python -m bench.replay_bench --produces 1000000

Builds synthetic silver tables (produce_requests, follower_fetches, partitions) with NumPy: RF=3,
every follower fetches past each batch after a lognormal delay with occasional stalls, a full and
stable ISR. Then times, on the same data:
- ackreplay's replay stage (all policies but the lag re-simulations: acks=1, acks=all, min.insync,
  quorum=2, quorum=3), end to end from the Delta tables to the written produce_replay table;
- DuckDB: acks=all and quorum=2 for a full ISR, written as ASOF JOINs of each produce to the first
  fetch at which each follower's running-max offset exceeds the batch's base offset.
Prints one table; run on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ackreplay.config import load_config
from ackreplay.lakehouse import table_path
from ackreplay.replay.stage import run_replay
from ackreplay.session import build_spark_session

BROKERS = (1, 2, 3)


def generate(n_produces: int, partitions: int, out: Path, seed: int = 11) -> None:
    """Write produce_requests / follower_fetches / partitions as Parquet files under `out`."""
    rng = np.random.default_rng(seed)
    per_part = n_produces // partitions
    t0 = 1_795_300_000_000_000  # µs
    produce_cols: dict[str, list] = {k: [] for k in ("partition", "broker_id", "base_offset", "t_local_done", "line")}
    fetch_cols: dict[str, list] = {k: [] for k in ("partition", "broker_id", "follower_id", "fetch_offset", "t_dequeue")}
    line = 0
    for p in range(partitions):
        leader = BROKERS[p % 3]
        followers = [b for b in BROKERS if b != leader]
        gaps = rng.exponential(2_000, per_part).astype(np.int64) + 50  # µs between appends
        t_ld = t0 + np.cumsum(gaps)
        records = rng.integers(1, 20, per_part)
        base = np.concatenate([[0], np.cumsum(records)[:-1]])
        produce_cols["partition"].append(np.full(per_part, p))
        produce_cols["broker_id"].append(np.full(per_part, leader))
        produce_cols["base_offset"].append(base)
        produce_cols["t_local_done"].append(t_ld)
        produce_cols["line"].append(np.arange(line, line + per_part))
        line += per_part
        for f in followers:
            delay = rng.lognormal(np.log(1_500), 0.6, per_part).astype(np.int64)
            stall = rng.random(per_part) < 0.001
            delay[stall] += rng.integers(50_000, 2_000_000, stall.sum())
            t_fetch = np.maximum.accumulate(t_ld + delay)  # fetches are in order
            fetch_cols["partition"].append(np.full(per_part, p))
            fetch_cols["broker_id"].append(np.full(per_part, leader))
            fetch_cols["follower_id"].append(np.full(per_part, f))
            fetch_cols["fetch_offset"].append(base + records)
            fetch_cols["t_dequeue"].append(t_fetch)
    out.mkdir(parents=True, exist_ok=True)
    pc = {k: np.concatenate(v) for k, v in produce_cols.items()}
    n = pc["partition"].size
    ts = lambda a: pa.array(a, pa.timestamp("us", tz="UTC"))  # noqa: E731
    produce = pa.table(
        {
            "cluster": pa.array(["bench"] * n),
            "broker_id": pa.array(pc["broker_id"], pa.int32()),
            "topic": pa.array(["t"] * n),
            "partition": pa.array(pc["partition"], pa.int32()),
            "acks": pa.array(np.full(n, -1), pa.int32()),
            "timeout_ms": pa.array(np.full(n, 30_000), pa.int32()),
            "records_size_bytes": pa.array(np.full(n, 1024), pa.int32()),
            "error_code": pa.array(np.zeros(n), pa.int32()),
            "base_offset": pa.array(pc["base_offset"], pa.int64()),
            "t_start": ts(pc["t_local_done"] - 500),
            "t_local_done": ts(pc["t_local_done"]),
            "t_ack_observed": ts(pc["t_local_done"]),
            "response_queue_time_ms": pa.array(np.full(n, 0.05)),
            "send_time_ms": pa.array(np.full(n, 0.1)),
            "source_file": pa.array(["bench/broker/kafka-request.log"] * n),
            "line_number": pa.array(pc["line"], pa.int64()),
            "event_date": pa.array(np.full(n, np.datetime64("2026-11-20", "D"))),
        }
    )
    fc = {k: np.concatenate(v) for k, v in fetch_cols.items()}
    m = fc["partition"].size
    fetches = pa.table(
        {
            "cluster": pa.array(["bench"] * m),
            "broker_id": pa.array(fc["broker_id"], pa.int32()),
            "follower_id": pa.array(fc["follower_id"], pa.int32()),
            "topic": pa.array(["t"] * m),
            "partition": pa.array(fc["partition"], pa.int32()),
            "fetch_offset": pa.array(fc["fetch_offset"], pa.int64()),
            "current_leader_epoch": pa.array(np.zeros(m), pa.int32()),
            "partition_error_code": pa.array(np.zeros(m), pa.int32()),
            "diverging_epoch": pa.array(np.zeros(m, bool)),
            "t_dequeue": ts(fc["t_dequeue"]),
            "t_local_done": ts(fc["t_dequeue"] + 100),
            "event_date": pa.array(np.full(m, np.datetime64("2026-11-20", "D"))),
        }
    )
    parts = pa.table(
        {
            "cluster": ["bench"] * partitions,
            "topic": ["t"] * partitions,
            "partition": pa.array(range(partitions), pa.int32()),
            "replicas": [[BROKERS[p % 3]] + [b for b in BROKERS if b != BROKERS[p % 3]] for p in range(partitions)],
            "min_insync_replicas": pa.array([2] * partitions, pa.int32()),
        }
    )
    for name, table in (("produce_requests", produce), ("follower_fetches", fetches), ("partitions", parts)):
        pq.write_table(table, out / f"{name}.parquet")


class PeakRss:
    """Peak resident memory of this process and its descendants (the Spark JVM and Python workers)."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree_rss(self) -> int:
        total, pids, seen = 0, [os.getpid()], set()
        while pids:
            pid = pids.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
                for task in Path(f"/proc/{pid}/task").iterdir():
                    pids.extend(int(c) for c in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._tree_rss())
            time.sleep(0.2)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


DUCKDB_REPLAY = """
WITH ev AS (
  SELECT partition, follower_id, epoch_us(t_dequeue) AS t,
         max(fetch_offset) OVER (PARTITION BY partition, follower_id ORDER BY t_dequeue
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS leo
  FROM read_parquet('{fetches}')
), f1 AS (SELECT * FROM ev), f2 AS (SELECT * FROM ev),
p AS (
  SELECT pr.partition, pr.base_offset, epoch_us(pr.t_local_done) AS tld, pa.replicas[2] AS fa, pa.replicas[3] AS fb
  FROM read_parquet('{produce}') pr JOIN read_parquet('{parts}') pa USING (partition)
),
a AS (
  SELECT p.*, greatest(e.t, p.tld) AS ta FROM p ASOF LEFT JOIN f1 e
  ON e.partition = p.partition AND e.follower_id = p.fa AND e.leo > p.base_offset
),
b AS (
  SELECT a.*, greatest(e.t, a.tld) AS tb FROM a ASOF LEFT JOIN f2 e
  ON e.partition = a.partition AND e.follower_id = a.fb AND e.leo > a.base_offset
)
SELECT partition, base_offset, greatest(ta, tb) AS t_ack_all, least(ta, tb) AS t_ack_quorum2 FROM b
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--produces", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--workdir", default="bench/out")
    args = parser.parse_args()
    work = Path(args.workdir) / f"replay-{args.produces}"
    data = work / "parquet"
    if not (data / "partitions.parquet").exists():
        started = time.monotonic()
        generate(args.produces, args.partitions, data)
        print(f"generated {args.produces:,} produces in {time.monotonic() - started:.0f} s")

    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    started = time.monotonic()
    n_duck = con.execute(
        f"SELECT count(*), count(t_ack_all) FROM ({DUCKDB_REPLAY.format(fetches=data / 'follower_fetches.parquet', produce=data / 'produce_requests.parquet', parts=data / 'partitions.parquet')})"
    ).fetchone()
    duck_s = time.monotonic() - started

    config = load_config("conf/local.yaml").model_copy(deep=True)
    config = config.model_copy(update={"replay": config.replay.model_copy(update={"lag_ms": []})})
    spark = build_spark_session(config.spark, app_name="ackreplay-bench-replay")
    lakehouse = str(work / "lakehouse")
    shutil.rmtree(lakehouse, ignore_errors=True)
    for name in ("produce_requests", "follower_fetches", "partitions"):
        spark.read.parquet(str(data / f"{name}.parquet")).write.format("delta").save(table_path(lakehouse, name))
    with PeakRss() as rss:
        started = time.monotonic()
        report = run_replay(spark, config, lakehouse, ["bench"], run_id="bench")
        spark_s = time.monotonic() - started
    print()
    print(f"| replay of {args.produces:,} produces ({args.partitions} partitions, RF=3) | wall time | produces/s | notes |")
    print("|---|---|---|---|")
    print(
        f"| ackreplay replay stage (Spark local[2], {len(report.policies)} policies) | {spark_s:.1f} s | "
        f"{report.replayed / spark_s:,.0f} | peak RSS {rss.peak / 2**30:.1f} GiB (JVM + Python workers); "
        "reads Delta, writes produce_replay, counts |"
    )
    print(
        f"| DuckDB ASOF JOIN (2 threads, acks=all + quorum=2) | {duck_s:.1f} s | {n_duck[0] / duck_s:,.0f} | "
        "reads Parquet, result not written |"
    )
    print(f"| ratio ackreplay / DuckDB throughput | | {report.replayed / spark_s / (n_duck[0] / duck_s):.2f} | |")


if __name__ == "__main__":
    main()
