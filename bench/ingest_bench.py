"""Ingest throughput: request-log text -> bronze + silver Delta tables, on this machine.

    python -m bench.ingest_bench --gigabytes 1.0

Generates the input once (bench/out/ingest-<size>GB, reused), starts the Spark session (not timed),
then times one full ingest run and prints a table, with the run log's per-step timings and the load
average before and after (the machine is shared: a figure means little without it). Then the DuckDB peer
(`bench.ingest_peer_duckdb`) parses the same files into the same bronze and silver rows as Parquet, timed in
the same run (`--no-peer` skips it).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import time
from pathlib import Path

from ackreplay.config import load_config
from ackreplay.ingest.stage import run_ingest
from ackreplay.session import command_session
from bench.gen_request_log import generate


def _process_tree_cpu_seconds(root_pid: int) -> float:
    """User + system CPU seconds of a process and its descendants (including reaped children).

    The Spark JVM and its Python workers: on a shared machine the wall time depends on the load,
    the CPU time much less.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        pid, ppid = int(stat.parent.name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        cpu[pid] = sum(int(x) for x in fields[11:15]) / ticks  # utime, stime, cutime, cstime
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--conf", default="conf/local.yaml")
    parser.add_argument("--workdir", default="bench/out")
    parser.add_argument("--no-peer", action="store_true", help="skip the DuckDB peer")
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    data = work / f"ingest-{args.gigabytes:g}GB"
    if not (data / "c1" / "topics.txt").exists():
        shutil.rmtree(data, ignore_errors=True)
        t = time.monotonic()
        generate(data, int(args.gigabytes * 1e9))
        print(f"generated input in {time.monotonic() - t:.0f} s")
    input_bytes = sum(p.stat().st_size for p in data.rglob("kafka-request.log*"))
    lakehouse = work / "ingest-lakehouse"
    shutil.rmtree(lakehouse, ignore_errors=True)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger("ackreplay").setLevel(logging.INFO)  # the per-step timings of the run
    config = load_config(args.conf)
    with command_session(config.spark, app_name="ackreplay-bench-ingest") as spark:
        jvm_pid = spark.sparkContext._gateway.proc.pid  # local mode: executors live in this JVM
        load_before = os.getloadavg()
        cpu_before = _process_tree_cpu_seconds(jvm_pid) + sum(os.times()[:2])
        started = time.monotonic()
        report = run_ingest(spark, config, str(data), str(lakehouse))
        seconds = time.monotonic() - started
        cpu_seconds = _process_tree_cpu_seconds(jvm_pid) + sum(os.times()[:2]) - cpu_before
        load_after = os.getloadavg()
        print()
        print("| metric | value |")
        print("|---|---|")
        print(f"| input (request-log text) | {input_bytes / 1e6:,.0f} MB in {report.request_log_files} files |")
        print(f"| lines | {report.total_lines:,} |")
        print(f"| wall time (session start excluded) | {seconds:.1f} s |")
        print(f"| throughput | {input_bytes / 1e6 / seconds:,.1f} MB/s, {report.total_lines / seconds:,.0f} lines/s |")
        print(
            f"| CPU time (driver, Spark JVM, Python workers) | {cpu_seconds:.1f} s: "
            f"{input_bytes / 1e6 / cpu_seconds:,.1f} MB per CPU-second |"
        )
        for table, rows in report.rows_written.items():
            print(f"| {table} rows | {rows:,} |")
        print(f"| load average (1, 5, 15 min) before | {', '.join(f'{x:.1f}' for x in load_before)} |")
        print(f"| load average (1, 5, 15 min) after | {', '.join(f'{x:.1f}' for x in load_after)} |")
        print(
            f"| Spark | {spark.version}, master {spark.sparkContext.master}, {spark.sparkContext.defaultParallelism} "
            "cores |"
        )
    if not args.no_peer:
        _peer(data, work / "ingest-duckdb", input_bytes, seconds, report)


def _peer(data: Path, out: Path, input_bytes: int, ackreplay_seconds: float, report) -> None:
    """The DuckDB peer on the same files, after the Spark session has stopped (the cores are its alone)."""
    from bench.ingest_peer_duckdb import ingest as duckdb_ingest

    shutil.rmtree(out, ignore_errors=True)
    load_before = os.getloadavg()
    started = time.monotonic()
    rows = duckdb_ingest(str(data), str(out))
    seconds = time.monotonic() - started
    print()
    print("| DuckDB peer | value |")
    print("|---|---|")
    print(f"| wall time | {seconds:.1f} s: {input_bytes / 1e6 / seconds:,.1f} MB/s |")
    print(
        f"| rows: bronze, PRODUCE, follower FETCH | {rows['bronze']:,}, {rows['produce']:,}, {rows['fetch']:,} "
        f"(ackreplay: {report.total_lines:,}, {report.rows_written.get('produce_requests', 0):,}, "
        f"{report.rows_written.get('follower_fetches', 0):,}) |"
    )
    print(f"| ackreplay / DuckDB throughput | {seconds / ackreplay_seconds:.2f} |")
    print(
        f"| load average (1, 5, 15 min) before, after | {', '.join(f'{x:.1f}' for x in load_before)}; "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} |"
    )


if __name__ == "__main__":
    main()
