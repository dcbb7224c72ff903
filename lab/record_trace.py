"""Record a real Kafka trace: KRaft cluster (1 controller + 3 brokers) + real Java clients + injected faults.

    python -m lab.record_trace --kafka-version 3.9.1 --duration-s 180 --out data/samples/lab-3.9.1-utc

Output (an input folder for ``ackreplay run --input``)::

    <out>/manifest.json
    <out>/<cluster>/topics.txt                          kafka-topics --describe (all topics, at the end)
    <out>/<cluster>/broker-<id>/kafka-request.log*.gz   server.log*.gz  state-change.log*.gz  controller.log*.gz
    <out>/<cluster>/controller-<id>/...                 the dedicated KRaft controller's logs
    <out>/<cluster>/metrics/broker-<id>.prom            JMX-exporter scrapes, one timestamp (ms) per sample
    <out>/<cluster>/create-times/<topic>-<p>.txt.gz     kafka-dump-log --deep-iteration of each partition (CreateTime)
    <out>/<cluster>/client/batches-<client>.csv.gz      every batch the clients got acknowledged (send time: the
                                                        pipeline's send-time input; ack time: ground truth)

Every process the lab starts is stopped by it (also on error, Ctrl-C, SIGTERM and when the run exceeds
``--max-run-s``); paused brokers are SIGCONTed first.  Ports are a free block on 127.0.0.1 and data
lives in a fresh temp dir that is removed afterwards (``--keep-work`` keeps it).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gzip
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from zoneinfo import ZoneInfo

from . import jars
from .check import check_trace
from .cluster import (
    CONTROLLER_ID,
    LOG_STAMPS,
    ClusterSpec,
    LabCluster,
    LabError,
    check_log_stamp,
    parse_describe,
    rmtree_quiet,
)

TOPIC = "ackreplay-lab"


class Abort(BaseException):
    """Raised in the main thread by SIGINT/SIGTERM/SIGHUP or the run-time watchdog."""


def utc_iso(t: float | None = None) -> str:
    t = time.time() if t is None else t
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def log(msg: str) -> None:
    print(f"[{utc_iso()}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# fault schedule


def make_schedule(args, brokers: list[int]) -> list[dict]:
    """Faults at offsets (s) from workload start; never overlapping, all done before the tail."""
    rnd = random.Random(args.seed)
    d = args.duration_s
    warm = min(15.0, max(8.0, 0.15 * d))
    tail = min(25.0, max(8.0, 0.15 * d))
    long_ms = args.long_stall_ms or (2 * args.replica_lag_ms + 500)
    events: list[dict] = []
    busy: list[tuple[float, float]] = []
    t = max(warm + 2, 0.2 * d)
    for _ in range(args.long_stalls):
        b = rnd.choice(brokers)
        events.append(
            {
                "kind": "long_stall",
                "broker": b,
                "at_s": round(t, 1),
                "duration_ms": long_ms,
                "signal": "SIGSTOP/SIGCONT",
            }
        )
        busy.append((t - 2, t + long_ms / 1000 + 6))
        t += long_ms / 1000 + 6
    t = max(t, 0.45 * d)
    for i in range(args.leader_changes):
        events.append(
            {
                "kind": "leader_stop_restart",
                "partition": i % args.partitions,
                "at_s": round(t, 1),
                "down_s": args.leader_down_s,
                "signal": "SIGTERM (controlled shutdown), then restart",
            }
        )
        busy.append((t - 2, t + args.leader_down_s + 30))  # describe + shutdown + restart + catch-up
        t += args.leader_down_s + 14
    for i in range(args.crashes):
        events.append(
            {
                "kind": "leader_crash",
                "partition": (i + args.leader_changes) % args.partitions,
                "at_s": round(t, 1),
                "followers_stall_ms": args.crash_followers_stall_ms,
                "kill_after_ms": args.crash_followers_stall_ms * 2 // 3,
                "down_s": args.leader_down_s,
                "signal": "SIGSTOP the followers, SIGKILL the leader during their stall, SIGCONT, restart",
            }
        )
        busy.append((t - 2, t + args.crash_followers_stall_ms / 1000 + args.leader_down_s + 30))
        t += args.crash_followers_stall_ms / 1000 + args.leader_down_s + 16
    if t > d - tail:
        raise SystemExit(f"--duration-s {d} is too short for the requested faults (need about {t + tail:.0f}s)")
    n_short = args.short_stalls if args.short_stalls is not None else max(2, int(d / 15))
    lo, hi = warm, d - tail
    placed = 0
    tries = 0
    while placed < n_short and tries < 1000:
        tries += 1
        at = round(rnd.uniform(lo, hi), 1)
        ms = rnd.randint(args.short_stall_ms_min, args.short_stall_ms_max)
        span = (at - 1.5, at + ms / 1000 + 1.5)
        if any(not (span[1] < a or span[0] > b) for a, b in busy):
            continue
        busy.append(span)
        events.append(
            {
                "kind": "short_stall",
                "broker": rnd.choice(brokers),
                "at_s": at,
                "duration_ms": ms,
                "signal": "SIGSTOP/SIGCONT",
            }
        )
        placed += 1
    return sorted(events, key=lambda e: e["at_s"])


# ---------------------------------------------------------------------------------------------
# metrics scraper


class Scraper:
    """Scrape each broker's JMX exporter every ``interval`` s; append ``kafka_*`` samples with a ms timestamp."""

    def __init__(self, cluster: LabCluster, out_dir: Path, interval: float) -> None:
        self.cluster, self.out_dir, self.interval = cluster, out_dir, interval
        self.stop_ev = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(b,), daemon=True) for b in cluster.broker_ids]
        self.scrapes = {b: 0 for b in cluster.broker_ids}
        self.failures = {b: 0 for b in cluster.broker_ids}

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=5)

    def _run(self, b: int) -> None:
        url = f"http://127.0.0.1:{self.cluster.metrics_ports[b]}/metrics"
        path = self.out_dir / f"broker-{b}.prom"
        seen_meta: set[str] = set()
        nxt = time.monotonic()
        with open(path, "a") as out:
            while not self.stop_ev.is_set():
                nxt += self.interval
                if self.cluster.running(b):
                    try:
                        body = urllib.request.urlopen(url, timeout=min(0.9, self.interval)).read().decode()
                        ts = int(time.time() * 1000)
                        lines = []
                        for line in body.splitlines():
                            if line.startswith("# "):
                                parts = line.split(" ", 3)
                                if len(parts) > 2 and parts[2].startswith("kafka_") and line not in seen_meta:
                                    seen_meta.add(line)
                                    lines.append(line)
                            elif line.startswith("kafka_"):
                                lines.append(f"{line} {ts}")
                        out.write("\n".join(lines) + "\n")
                        out.flush()
                        self.scrapes[b] += 1
                    except Exception:
                        self.failures[b] += 1  # paused or restarting broker: a real gap
                self.stop_ev.wait(max(0.0, nxt - time.monotonic()))


# ---------------------------------------------------------------------------------------------
# capture


@contextlib.contextmanager
def _gzip_writer(dst: Path, name: str):
    """A reproducible .gz (fixed mtime, the source's name inside) at ``dst``."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(dst, "wb") as raw, gzip.GzipFile(filename=name, mode="wb", fileobj=raw, compresslevel=9, mtime=0) as fo:
        yield fo


def gzip_file(src: Path, dst: Path) -> None:
    with open(src, "rb") as fi, _gzip_writer(dst, src.name) as fo:
        shutil.copyfileobj(fi, fo)


CAPTURED_LOGS = ("kafka-request.log", "server.log", "state-change.log", "controller.log")


def local_log_stamp(t_wall: float, timezone: str, log_stamp: str = "ms") -> str:
    """``t_wall`` as a log4j line prefix in the broker JVM's zone: ``[2026-11-22 02:42:36,597]``, or
    with ``log_stamp`` "us" ``[2026-11-22 02:42:36,597408]``."""
    t = dt.datetime.fromtimestamp(t_wall, ZoneInfo(timezone))
    fraction = f"{t.microsecond:06d}" if log_stamp == "us" else f"{t.microsecond // 1000:03d}"
    return "[" + t.strftime("%Y-%m-%d %H:%M:%S,") + fraction + "]"


def gzip_request_log_from(src: Path, dst: Path, first_stamp: str) -> tuple[int, int]:
    """Gzip the request-log lines logged at or after ``first_stamp`` (a line prefix such as
    ``local_log_stamp`` gives). The stamps inside the brackets are compared as text, which sorts them
    in time order, `,SSS` and `,SSSSSS` alike (the `]` would not: it sorts after the digits).
    Returns (lines kept, raw bytes kept); writes nothing when no line is kept."""
    first = first_stamp.strip("[]").encode("ascii")
    kept: list[bytes] = []
    keep = False
    with open(src, "rb") as fi:
        for line in fi:
            if line.startswith(b"["):  # a continuation line goes with the line it continues
                keep = line[1 : line.find(b"]", 1)] >= first
            if keep:
                kept.append(line)
    if kept:
        with _gzip_writer(dst, src.name) as fo:
            fo.writelines(kept)
    return len(kept), sum(len(x) for x in kept)


PERF_TEST_CLIENT_ID = "lab-perf-test"
_PERF_TOTAL = re.compile(
    r"^(\d+)( steady state)? records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th\.$"
)


def perf_test_args(args, bootstrap: str) -> list[str]:
    """ProducerPerformance's arguments: the lab's rate and record size, warm-up records first (excluded from
    its steady-state line), acks from --acks1-share."""
    warmup = int(args.rate * args.warmup_s)
    return [
        "--topic", TOPIC, "--num-records", str(warmup + int(args.rate * args.duration_s)),
        "--throughput", str(args.rate), "--record-size", str(args.size), "--warmup-records", str(warmup),
        "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={'1' if args.acks1_share == 1 else 'all'}",
        f"linger.ms={args.linger_ms}", f"compression.type={args.compression}", f"client.id={PERF_TEST_CLIENT_ID}",
    ]  # fmt: skip


def perf_test_summary(args, printed: str) -> dict:
    """The lab's client summary from ProducerPerformance's last lines (`Stats.printTotal`: latency from before
    `send()` to the callback, int ms; percentile p = the sorted latencies at index (int)(p * count))."""
    totals = {}
    for line in printed.splitlines():
        m = _PERF_TOTAL.match(line.strip())
        if m:
            totals["steady_state" if m.group(2) else "total"] = {
                "records": int(m.group(1)), "records_per_s": float(m.group(3)), "avg_ms": float(m.group(5)),
                "max_ms": float(m.group(6)), "p50_ms": int(m.group(7)), "p95_ms": int(m.group(8)),
                "p99_ms": int(m.group(9)), "p999_ms": int(m.group(10)),
            }  # fmt: skip
    if set(totals) != {"total", "steady_state"}:
        raise LabError(f"ProducerPerformance printed no total and steady-state lines: {printed[-2000:]}")
    sent = int(args.rate * args.warmup_s) + int(args.rate * args.duration_s)
    acks = "1" if args.acks1_share == 1 else "all"
    producer = {
        "client_id": PERF_TEST_CLIENT_ID,
        "acks": acks,
        "records_sent": sent,
        "records_acked": totals["total"]["records"],
        "records_failed": sent - totals["total"]["records"],
        "batches_acked": None,
        "value_bytes_acked": None,
        "errors": {},
    }
    return {"producers": [producer], "perf_test": totals, "records_consumed": None}


def log_warmup(args) -> None:
    if args.warmup_s > 0:
        log(f"workload started; warm-up ({args.rate}/s for {args.warmup_s}s, not recorded)")


def wait_for_line(proc, out_file: Path, prefix: str, timeout_s: float) -> float:
    """Wall time (epoch s) at which the process printed a line starting with `prefix` (polled: ~50 ms late)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if out_file.exists() and any(x.startswith(prefix) for x in out_file.read_text(errors="replace").splitlines()):
            return time.time()
        if proc.poll() is not None:
            raise LabError(f"workload exited rc={proc.returncode}: {out_file.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)
    raise LabError(f"workload printed no '{prefix}' line within {timeout_s:.0f} s")


def wait_for_recording_start(proc, out_file: Path, timeout_s: float) -> float:
    """Wall time (epoch s) of the workload's "recording_from_us" line, once it has printed it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if out_file.exists():
            for line in out_file.read_text(errors="replace").splitlines():
                if line.startswith("recording_from_us "):
                    return int(line.split()[1]) / 1e6
        if proc.poll() is not None:
            raise LabError(
                f"workload exited rc={proc.returncode} before its recorded window: "
                f"{out_file.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.05)
    raise LabError(f"workload printed no recording_from_us line within {timeout_s:.0f} s")


def capture_logs(cluster: LabCluster, cdir: Path, request_log_from: float | None = None) -> dict:
    """Gzip every captured log of every node into ``cdir``. With ``request_log_from`` (wall time), the
    brokers' request logs keep only the lines logged from then on (the warm-up workload's requests are
    dropped); server, state-change and controller logs stay whole, since the replay needs the leader
    epochs and ISR from the start."""
    files = {}
    first_stamp = (
        local_log_stamp(request_log_from, cluster.spec.timezone, cluster.spec.log_stamp) if request_log_from else None
    )
    for node in [*cluster.broker_ids, CONTROLLER_ID]:
        name = f"controller-{node}" if node == CONTROLLER_ID else f"broker-{node}"
        for f in sorted(cluster.logs_dir(node).iterdir()):
            if not f.name.startswith(CAPTURED_LOGS) or f.stat().st_size == 0:
                continue
            if first_stamp and node != CONTROLLER_ID and f.name.startswith("kafka-request.log"):
                lines, size = gzip_request_log_from(f, cdir / name / (f.name + ".gz"), first_stamp)
                if lines:
                    files.setdefault(name, []).append(
                        {"file": f.name + ".gz", "bytes_raw": size, "bytes_before_recording": f.stat().st_size - size}
                    )
                continue
            gzip_file(f, cdir / name / (f.name + ".gz"))
            files.setdefault(name, []).append({"file": f.name + ".gz", "bytes_raw": f.stat().st_size})
    return files


def dump_log_class(libs: Path) -> str:
    """kafka-dump-log's main class in these jars: the Scala ``kafka.tools.DumpLogSegments`` (kafka_2.13) or,
    once it was ported to Java, ``org.apache.kafka.tools.DumpLogSegments`` (kafka-tools; 4.3.1 has only that)."""
    return jars.main_class(libs, "kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments")


def capture_create_times(cluster: LabCluster, cdir: Path, topic: str) -> list[dict]:
    """Dump the topic's record timestamps (CreateTime: the producers' send() clock) into
    ``cdir/create-times/<topic>-<partition>.txt.gz``, with ``kafka-dump-log --deep-iteration``
    (``kafka.tools.DumpLogSegments``) over the segments of the broker holding the most of each partition:
    the pipeline's send-time input, as an operator would produce it (README "What the producer sees")."""
    files = []
    partitions: dict[str, list[Path]] = {}
    for b in cluster.broker_ids:
        for pdir in sorted((cluster.node_dir(b) / "data").glob(f"{topic}-*")):
            segments = sorted(pdir.glob("*.log"))
            size = sum(f.stat().st_size for f in segments)
            if size > sum(f.stat().st_size for f in partitions.get(pdir.name, [])):
                partitions[pdir.name] = segments
    out_dir = cdir / "create-times"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, segments in sorted(partitions.items()):
        text = cluster.run_tool(
            dump_log_class(cluster.libs), ["--deep-iteration", "--files", ",".join(map(str, segments))], timeout=300
        )
        with _gzip_writer(out_dir / (name + ".txt.gz"), name + ".txt") as fh:
            fh.write(text.encode())
        files.append({"file": f"{name}.txt.gz", "bytes_raw": len(text)})
    return files


# ---------------------------------------------------------------------------------------------
# main


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m lab.record_trace", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--kafka-version", required=True, help="e.g. 3.9.1 or 4.1.1 (from Maven Central)")
    p.add_argument("--duration-s", type=float, default=180, help="workload duration (the recorded window)")
    p.add_argument(
        "--warmup-s",
        type=float,
        default=150,
        help="the same workload runs this long before the recorded window, so the brokers' JIT "
        "is warm as in production (on 2 shared cores FETCH handling was slow for ~100 s after "
        "start); its request-log lines are not kept (0: record from the start)",
    )
    p.add_argument("--out", required=True, type=Path, help="trace folder to write (must not exist or be empty)")
    p.add_argument("--cluster-name", help="default lab-<version>")
    p.add_argument("--timezone", default="UTC", help="broker JVM -Duser.timezone (log line times)")
    p.add_argument(
        "--log-stamp",
        choices=sorted(LOG_STAMPS),
        default=None,
        help="log line stamps: us = [yyyy-MM-dd HH:mm:ss,SSSSSS] (log4j2 %%d{DEFAULT_MICROS}, "
        "Kafka 4.x only; its default), ms = Kafka's [%%d] (the default for 3.x)",
    )
    p.add_argument(
        "--leo-lines",
        action="store_true",
        help="kafka.cluster.Partition at DEBUG: server.log then says when the leader learned each follower's LEO "
        "(Partition.updateFollowerFetchState's 'Recorded replica ... log end offset (LEO) position' line)",
    )
    p.add_argument("--rate", type=float, default=300, help="records/s over all producers")
    p.add_argument(
        "--acks1-share",
        type=float,
        default=0.15,
        help="share of records sent by the acks=1 producer; 0 or 1: one producer, acks=all or acks=1, "
        "drawing the same keys (a what-if pair: the same --seed once with each)",
    )
    p.add_argument("--size", type=int, default=512, help="mean value size in bytes (uniform size/2..3size/2)")
    p.add_argument(
        "--keys",
        type=int,
        default=1000,
        help="distinct record keys of the lab client (0: keyless records, placed by the client's partitioner)",
    )
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument(
        "--compression",
        default="none",
        choices=("none", "gzip", "snappy", "lz4", "zstd"),
        help="the producers' compression.type (the payload is random bytes: the broker still decompresses "
        "and validates every batch, LogValidator)",
    )
    p.add_argument(
        "--min-insync-replicas",
        type=int,
        default=2,
        choices=(1, 2, 3),
        help="the lab topic's and the brokers' min.insync.replicas",
    )
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument(
        "--replication-factor",
        type=int,
        default=3,
        choices=(2, 3),
        help="the lab topic's replication factor (2: the partitions' replica sets differ, so a paused broker "
        "takes some partitions below min ISR and leaves the others writable)",
    )
    p.add_argument("--no-consumer", action="store_true")
    p.add_argument(
        "--client",
        choices=("lab", "perf-test"),
        default="lab",
        help="lab: lab/java/LabWorkload.java (keyed records, client batch logs, a consumer); perf-test: "
        "Kafka's own ProducerPerformance (kafka-producer-perf-test; keyless records, --warmup-records, "
        "acks=all with --acks1-share 0, acks=1 with 1), whose printed percentiles are the ground truth",
    )
    p.add_argument("--replica-lag-ms", type=int, default=3000, help="replica.lag.time.max.ms")
    p.add_argument("--session-timeout-ms", type=int, default=15000, help="broker.session.timeout.ms (controller)")
    p.add_argument("--replica-fetch-wait-max-ms", type=int, default=500)
    p.add_argument("--short-stalls", type=int, default=None, help="default: one per 15 s of workload")
    p.add_argument("--short-stall-ms-min", type=int, default=200)
    p.add_argument("--short-stall-ms-max", type=int, default=800)
    p.add_argument("--long-stalls", type=int, default=1)
    p.add_argument("--long-stall-ms", type=int, default=None, help="default 2*replica-lag-ms+500")
    p.add_argument("--leader-changes", type=int, default=1)
    p.add_argument(
        "--crashes",
        type=int,
        default=0,
        help="leader crashes: both followers of a partition paused, its leader SIGKILLed during the pause "
        "(acks=1 records they had not fetched are lost at the election), then restarted",
    )
    p.add_argument(
        "--crash-followers-stall-ms",
        type=int,
        default=1500,
        help="how long the followers are paused around a crash (below --replica-lag-ms: they stay in the ISR)",
    )
    p.add_argument("--leader-down-s", type=float, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-metrics", action="store_true", help="no JMX exporter / scrapes")
    p.add_argument("--scrape-interval-s", type=float, default=1.0)
    p.add_argument("--work-dir", type=Path, default=None, help="parent of the temp data dir")
    p.add_argument("--keep-work", action="store_true")
    p.add_argument("--max-run-s", type=float, default=None, help="hard bound on the whole run (default duration+600)")
    a = p.parse_args(argv)
    if a.client == "perf-test" and a.acks1_share not in (0, 1):
        p.error("--client perf-test runs one producer: --acks1-share 0 (acks=all) or 1 (acks=1)")
    if a.log_stamp is None:
        a.log_stamp = "us" if jars.major(a.kafka_version) >= 4 else "ms"
    try:
        check_log_stamp(a.kafka_version, a.log_stamp)
    except LabError as exc:
        p.error(str(exc))
    if a.min_insync_replicas > a.replication_factor:
        p.error("--min-insync-replicas above --replication-factor: every acks=all produce would be rejected")
    if a.crashes and a.crash_followers_stall_ms >= a.replica_lag_ms:
        p.error("--crash-followers-stall-ms must be below --replica-lag-ms (the followers must stay in the ISR)")
    if a.long_stall_ms is None:
        a.long_stall_ms = 2 * a.replica_lag_ms + 500
    if a.long_stalls and a.long_stall_ms + a.replica_lag_ms // 2 + 2000 >= a.session_timeout_ms:
        p.error("--long-stall-ms must stay well below --session-timeout-ms (else the controller fences the broker)")
    if a.long_stalls and a.long_stall_ms <= a.replica_lag_ms * 1.5:
        p.error("--long-stall-ms must exceed 1.5 x replica.lag.time.max.ms so the ISR shrinks")
    return a


def run(args) -> dict:
    t_begin = time.monotonic()
    max_run = args.max_run_s or (args.warmup_s + args.duration_s + 600)
    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not empty")
    cluster_name = args.cluster_name or f"lab-{args.kafka_version}"

    # ---- signals and watchdog: turn them into Abort in the main thread --------------------
    aborting = threading.Event()

    def on_signal(signum, frame):
        if aborting.is_set():
            return
        aborting.set()
        raise Abort(f"signal {signal.Signals(signum).name}")

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    done = threading.Event()

    def watchdog():
        if not done.wait(max_run):
            log(f"run exceeded --max-run-s={max_run:.0f}s: aborting")
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watchdog, daemon=True).start()

    # ---- everything that can fail before processes exist ----------------------------------
    libs = jars.resolve_kafka(args.kafka_version, log=log)
    classes = jars.compile_workload(args.kafka_version, libs, log=log)
    spec = ClusterSpec(
        version=args.kafka_version,
        timezone=args.timezone,
        replica_lag_time_max_ms=args.replica_lag_ms,
        broker_session_timeout_ms=args.session_timeout_ms,
        replica_fetch_wait_max_ms=args.replica_fetch_wait_max_ms,
        jmx_exporter=not args.no_metrics,
        log_stamp=args.log_stamp,
        leo_lines=args.leo_lines,
        min_insync_replicas=args.min_insync_replicas,
    )
    schedule = make_schedule(args, list(range(1, spec.brokers + 1)))
    work = Path(tempfile.mkdtemp(prefix="ackreplay-lab-", dir=args.work_dir))
    try:
        cluster = LabCluster(spec, work, log=log)
    except BaseException:
        rmtree_quiet(work)
        raise
    staging = Path(tempfile.mkdtemp(prefix="capture-", dir=work))
    cdir = staging / cluster_name
    scraper = None
    manifest: dict = {}
    try:
        log(f"work dir {work}; ports {cluster.controller_port}..{max(cluster.metrics_ports.values())}")
        cluster.start()
        log("cluster started")
        cluster.create_topic(
            TOPIC, args.partitions, args.replication_factor, {"min.insync.replicas": args.min_insync_replicas}
        )
        desc_start = cluster.describe()
        if not args.no_metrics:
            scraper = Scraper(cluster, cdir / "metrics", args.scrape_interval_s)
            scraper.start()

        # A freshly started JVM runs Kafka's request paths interpreted for a minute or so: FETCH
        # handling then takes milliseconds instead of ~0.3 ms, which blurs when the leader learned a
        # follower's LEO. Production brokers and clients are long warm, so the workload runs
        # --warmup-s unrecorded first, in the same client JVM, and prints when the recorded window starts.
        client_dir = work / "client"
        if args.client == "perf-test":
            wl = cluster.reg.start(
                "workload",
                cluster._jvm(None, "512m")
                + [
                    "-cp",
                    cluster.cp,
                    "org.apache.kafka.tools.ProducerPerformance",
                    *perf_test_args(args, cluster.bootstrap),
                ],
                work / "workload.out",
            )
            log_warmup(args)
            t0_wall = wait_for_line(wl, work / "workload.out", "Warmup first ", 180) + args.warmup_s
        else:
            wl = cluster.reg.start(
                "workload",
                cluster._jvm(None, "512m")
                + [
                    "-cp",
                    f"{classes}{os.pathsep}{cluster.cp}",
                    "LabWorkload",
                    "--bootstrap",
                    cluster.bootstrap,
                    "--topic",
                    TOPIC,
                    "--duration-s",
                    str(args.duration_s),
                    "--warmup-s",
                    str(args.warmup_s),
                    "--rate",
                    str(args.rate),
                    "--acks1-share",
                    str(args.acks1_share),
                    "--size",
                    str(args.size),
                    "--keys",
                    str(args.keys),
                    "--linger-ms",
                    str(args.linger_ms),
                    "--compression",
                    args.compression,
                    "--consumer",
                    "false" if args.no_consumer else "true",
                    "--out",
                    str(client_dir),
                ],
                work / "workload.out",
            )
            log_warmup(args)
            t0_wall = wait_for_recording_start(wl, work / "workload.out", args.warmup_s + 180)
        t0 = time.monotonic() - (time.time() - t0_wall)
        log(
            f"recorded window from {utc_iso(t0_wall)} ({args.rate}/s for {args.duration_s}s); {len(schedule)} faults "
            "scheduled"
        )

        for ev in schedule:
            wait = t0 + ev["at_s"] - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if wl.poll() is not None:
                raise LabError(
                    f"workload exited early rc={wl.returncode}: {(work / 'workload.out').read_text()[-2000:]}"
                )
            run_fault(cluster, ev, args)

        rc = wl.wait(timeout=max(5.0, t0 + args.duration_s + 180 - time.monotonic()))
        cluster.reg.forget("workload")
        if rc != 0:
            raise LabError(f"workload failed rc={rc}: {(work / 'workload.out').read_text()[-3000:]}")
        t_end_wall = time.time()
        if args.client == "perf-test":
            summary = perf_test_summary(args, (work / "workload.out").read_text(errors="replace"))
            shutil.copyfile(work / "workload.out", staging / "perf-test.out")
        else:
            summary = json.loads((client_dir / "summary.json").read_text())
        log("workload done: " + json.dumps(summary))
        time.sleep(2)
        desc_end = cluster.describe()
        if scraper:
            scraper.stop()
        cluster.stop()
        log("cluster stopped")

        # ---- capture ---------------------------------------------------------------------
        cdir.mkdir(parents=True, exist_ok=True)
        (cdir / "topics.txt").write_text(desc_end)
        files = capture_logs(cluster, cdir, t0_wall if args.warmup_s > 0 else None)
        files["create-times"] = capture_create_times(cluster, cdir, TOPIC)
        for f in sorted(client_dir.glob("batches-*.csv")):
            gzip_file(f, cdir / "client" / (f.name + ".gz"))
        report = check_trace(staging, TOPIC)
        manifest = build_manifest(
            args,
            cluster,
            cluster_name,
            spec,
            schedule,
            summary,
            report,
            files,
            desc_start,
            desc_end,
            t0_wall,
            t_end_wall,
            scraper,
        )
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        for item in staging.iterdir():
            shutil.move(str(item), out / item.name)
        log(f"trace written to {out} ({du(out) / 1e6:.2f} MB)")
        return manifest
    finally:
        done.set()
        if scraper:
            scraper.stop()
        cluster.stop()  # SIGCONT + SIGTERM + SIGKILL fallback, idempotent
        cluster.reg.stop_all()
        for s, h in old.items():
            signal.signal(s, h)
        if args.keep_work:
            log(f"kept work dir {work}")
        else:
            rmtree_quiet(work)
        log(f"run took {time.monotonic() - t_begin:.0f}s")


def run_fault(cluster: LabCluster, ev: dict, args) -> None:
    kind = ev["kind"]
    if kind in ("short_stall", "long_stall"):
        b = ev["broker"]
        pid = cluster.pid(b)
        ev["pid"] = pid
        ev["start_utc"] = utc_iso()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(ev["duration_ms"] / 1000)
        finally:
            os.kill(pid, signal.SIGCONT)
        ev["end_utc"] = utc_iso()
        log(f"{kind}: broker {b} paused {ev['duration_ms']} ms")
    elif kind == "leader_stop_restart":
        part = _partition_state(cluster, ev)
        b = part["leader"]
        ev["stop_utc"] = utc_iso()
        rc = cluster.stop_node(b, timeout=60)
        ev["exited_utc"] = utc_iso()
        ev["exit_code"] = rc
        log(f"leader change: broker {b} (leader of {TOPIC}-{ev['partition']}) stopped rc={rc}")
        _restart_after_down_time(cluster, b, ev, "leader change")
    elif kind == "leader_crash":
        # Acks=1 records the followers have not fetched are lost when the leader dies and a follower is
        # elected: the restarted broker truncates its log to the new leader's (Partition.makeFollower,
        # the leader epoch's end offset). A SIGKILLed process loses nothing of what it wrote (the page
        # cache survives it), so the loss comes only from that election. The followers are paused for
        # less than replica.lag.time.max.ms first, so they stay in the ISR, are electable, and lag by
        # the records appended meanwhile.
        part = _partition_state(cluster, ev)
        b = part["leader"]
        followers = ev["followers"] = [r for r in part["isr"] if r != b]
        pids = [cluster.pid(f) for f in followers]
        ev["followers_stall_utc"] = utc_iso()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(ev["kill_after_ms"] / 1000)
            ev["kill_utc"] = utc_iso()
            ev["exit_code"] = cluster.stop_node(b, timeout=10, sig=signal.SIGKILL)
            ev["killed_utc"] = utc_iso()
            time.sleep((ev["followers_stall_ms"] - ev["kill_after_ms"]) / 1000)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        ev["followers_resumed_utc"] = utc_iso()
        log(
            f"leader crash: broker {b} (leader of {TOPIC}-{ev['partition']}) SIGKILLed "
            f"{ev['kill_after_ms']} ms into a {ev['followers_stall_ms']} ms stall of brokers {followers}"
        )
        _restart_after_down_time(cluster, b, ev, "leader crash")
    else:
        raise LabError(f"unknown fault {kind}")


def _partition_state(cluster: LabCluster, ev: dict) -> dict:
    """The fault's partition as kafka-topics describes it now (leader, replicas, ISR), kept in the event."""
    part = parse_describe(cluster.describe())[TOPIC]["partitions"][ev["partition"]]
    ev["broker"], ev["leader_before"] = part["leader"], part
    return part


def _restart_after_down_time(cluster: LabCluster, broker: int, ev: dict, what: str) -> None:
    """Wait the event's `down_s`, start the stopped broker again and wait until it has started."""
    time.sleep(ev["down_s"])
    size = cluster.server_log_size(broker)
    ev["restart_utc"] = utc_iso()
    cluster.start_node(broker)
    cluster.wait_started(broker, since_bytes=size)
    ev["ready_utc"] = utc_iso()
    log(f"{what}: broker {broker} restarted")


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def leaders(desc: dict) -> dict:
    return {str(p): v for p, v in sorted(desc.get(TOPIC, {}).get("partitions", {}).items())}


def build_manifest(
    args,
    cluster: LabCluster,
    cluster_name,
    spec,
    schedule,
    summary,
    report,
    files,
    desc_start,
    desc_end,
    t0_wall,
    t_end_wall,
    scraper,
) -> dict:
    ds, de = parse_describe(desc_start), parse_describe(desc_end)
    by_acks: dict = {}
    for p in summary["producers"]:
        a = "all" if p["acks"] in ("all", "-1") else p["acks"]
        by_acks[f"acks={a}"] = {
            "client_id": p["client_id"],
            "records_sent": p["records_sent"],
            "records_acked": p["records_acked"],
            "records_failed": p["records_failed"],
            "batches_acked": p["batches_acked"],
            "value_bytes_acked": p["value_bytes_acked"],
            "errors": p["errors"],
        }
    cl = report["clusters"][cluster_name]
    return {
        "format": "ackreplay-lab-trace/1",
        "created_utc": utc_iso(),
        "kafka_version": args.kafka_version,
        "cluster": cluster_name,
        "cluster_id": cluster.cluster_id,
        "jars": "Maven Central: org.apache.kafka:kafka_2.13, kafka-tools, kafka-clients "
        f"{args.kafka_version} (+ logging backend as shipped in the release)",
        "java": java_version(),
        "jvm_time_zone": spec.timezone,
        "log_time_note": "log lines carry the broker JVM's local time without offset; fault times here are UTC",
        "topology": {
            "controllers": [CONTROLLER_ID],
            "brokers": cluster.broker_ids,
            "mode": "KRaft, one dedicated controller (process.roles=controller) + 3 brokers "
            "(process.roles=broker); pausing a broker never costs the metadata quorum",
            "listeners": {
                "client": "CLIENT (PLAINTEXT)",
                "inter_broker": "REPLICATION (PLAINTEXT)",
                "controller": "CONTROLLER (PLAINTEXT)",
            },
        },
        "configs": {
            "broker": spec.broker_props_that_matter(),
            "topic": {
                "name": TOPIC,
                "partitions": args.partitions,
                "replication_factor": args.replication_factor,
                "min.insync.replicas": args.min_insync_replicas,
            },
            "broker_properties_broker_1": {k: str(v) for k, v in cluster.broker_props(1).items()},
            "controller_properties": {k: str(v) for k, v in cluster.controller_props().items()},
            "broker_jvm": {"heap": spec.heap, "gc": "G1, MaxGCPauseMillis=20", "user.timezone": spec.timezone},
            "loggers": {
                "kafka.request.logger": "DEBUG",
                "state.change.logger": "INFO",
                "root (server.log)": "INFO",
                "kafka.cluster.Partition": "DEBUG" if args.leo_lines else "INFO",
                "org.apache.kafka.controller": "INFO",
            },
            "log4j": "log4j2.yaml" if jars.major(args.kafka_version) >= 4 else "log4j.properties",
            # every captured log's line stamp (all appenders share the layout)
            "log_stamp": {
                "option": args.log_stamp,
                "stamp": LOG_STAMPS[args.log_stamp]["stamp"],
                "pattern": (
                    f"[%d{{{LOG_STAMPS[args.log_stamp]['log4j2_date_pattern']}}}] %p %m (%c)%n"
                    if jars.major(args.kafka_version) >= 4
                    else "[%d] %p %m (%c)%n"
                ),
            },
        },
        "workload": {
            "client": f"Apache Kafka Java client {args.kafka_version} "
            + (
                "(org.apache.kafka.tools.ProducerPerformance: " + " ".join(perf_test_args(args, "<bootstrap>")) + ")"
                if args.client == "perf-test"
                else "(lab/java/LabWorkload.java)"
            ),
            "perf_test": summary.get("perf_test"),
            "duration_s": args.duration_s,
            "rate_records_per_s": args.rate,
            "acks_mix": {"acks=all": round(1 - args.acks1_share, 3), "acks=1": args.acks1_share},
            "producers": {  # a producer with no share of the rate does not run
                name: producer
                for name, producer, share in (
                    ("lab-producer-acks-all", {"acks": "all", "enable.idempotence": True}, 1 - args.acks1_share),
                    ("lab-producer-acks-1", {"acks": "1", "enable.idempotence": False}, args.acks1_share),
                )
                if share > 0 and args.client == "lab"
            }
            | (
                # one perf-test producer per run (its last, should there be more)
                {PERF_TEST_CLIENT_ID: {"acks": summary["producers"][-1]["acks"], "enable.idempotence": "default"}}
                if args.client == "perf-test" and summary["producers"]
                else {}
            ),
            "producer_configs": {
                "linger.ms": args.linger_ms,
                "compression.type": args.compression,
                "request.timeout.ms": 30000,
                "delivery.timeout.ms": 120000,
            },
            "value_size_bytes": {"mean": args.size, "min": args.size // 2, "max": args.size + args.size // 2},
            "keys": args.keys,
            "partitioning": "keyless (sticky partitioner)"
            if args.client == "perf-test"
            else "keyed (default partitioner, murmur2 hash)",
            "consumer": None if args.no_consumer else {"group": "lab-consumer-group", "client_id": "lab-consumer"},
            "start_utc": utc_iso(t0_wall),
            "end_utc": utc_iso(t_end_wall),
            "warmup_s": args.warmup_s,
            "request_log_from_utc": utc_iso(t0_wall) if args.warmup_s > 0 else None,
            "warmup_note": "the same workload ran warmup_s before start_utc, in the same client JVM; the "
            "brokers' request logs keep only lines logged from start_utc on (server, state-change and controller "
            "logs are whole)",
        },
        "faults": schedule,
        "counts": {
            "client": by_acks,
            "records_consumed": summary.get("records_consumed"),
            "request_log": {
                b: {
                    "lines": v["lines"],
                    "parsed": v["parsed"],
                    "unparsed": v["unparsed"],
                    "api": v["api"],
                    "follower_fetch": v["follower_fetch"],
                    "consumer_fetch": v["consumer_fetch"],
                    "produce_partitions": v["produce_partitions"],
                }
                for b, v in cl["brokers"].items()
            },
            "produce_log": cl["produce_log"],
            "isr": cl["isr"],
            "leader_epoch_lines": {b: v["leader_epoch_lines"] for b, v in cl["brokers"].items()},
            "metrics_scrapes": dict(scraper.scrapes) if scraper else None,
            "metrics_scrape_failures": dict(scraper.failures) if scraper else None,
        },
        "consistency_check": {
            "counted_as": "record batches: one (acks, partition, baseOffset) per successful PRODUCE partition "
            "response of the lab producers vs. one per batch acknowledged to the client",
            "complete": report["complete"],
            **report.get("produce_check", {}),
        },
        "leaders": {
            "start": leaders(ds),
            "end": leaders(de),
            "topic_id": de.get(TOPIC, {}).get("topic_id"),
        },
        "files": files,
        "command": "python -m lab.record_trace " + " ".join(sys.argv[1:]),
    }


def java_version() -> str:
    import subprocess

    r = subprocess.run(["java", "-version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    return r.stdout.splitlines()[0] if r.stdout else "unknown"


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        m = run(args)
    except Abort as e:
        log(f"aborted: {e}")
        return 130
    except LabError as e:
        log(f"lab failed: {e}")
        return 1
    if args.client == "perf-test":  # no batch log to compare: every record sent must have been acked
        (producer,) = m["counts"]["client"].values()
        ok = m["consistency_check"]["complete"] and producer["records_failed"] == 0
    else:
        ok = m["consistency_check"].get("equal") and m["consistency_check"]["complete"]
    log(f"consistency check: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
