"""Fits the generator's default distributions to real request logs (the lab traces in data/samples/).

    python -m ackreplay.synth.fit data/samples/trace-3.9.1-utc data/samples/trace-4.1.1-berlin

Reads the `kafka-request.log*` files directly (JSON lines, no Spark) and prints, per quantity, the
median and the log-space standard deviation of a lognormal fitted by quantiles (median and P90:
sigma = ln(P90 / P50) / 1.2816), which keeps the tail that drives P999 instead of the mean. The
printed values are what `SynthParams` uses by default; docs/synthetic.md explains each.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

Z90 = 1.2816  # standard normal quantile of 0.9


def _open(path: Path):
    return gzip.open(path, "rt", errors="replace") if path.suffix == ".gz" else path.open(errors="replace")


def _log_ms(line: str) -> float:
    # up to the `]`: the stamp is `,SSS` or `,SSSSSS` (log4j2 DEFAULT_MICROS); %f reads both
    stamp = datetime.strptime(line[1 : line.index("]")], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
    return stamp.timestamp() * 1000.0


def lognormal_fit(values: np.ndarray) -> tuple[float, float]:
    """(median, sigma) of a lognormal matched at P50 and P90 of the positive values."""
    v = values[values > 0]
    p50, p90 = np.percentile(v, [50, 90])
    return float(p50), float(math.log(p90 / p50) / Z90)


def collect(roots: list[str]) -> dict[str, np.ndarray]:
    """Per quantity, all observed values (ms, bytes or records) from the request logs under `roots`."""
    out: dict[str, list[float]] = defaultdict(list)
    last_completion: dict[tuple, float] = {}
    last_base: dict[tuple, int] = {}
    for root in roots:
        for path in sorted(Path(root).glob("*/broker-*/kafka-request.log*")):
            broker = path.parent.name
            for line in _open(path):
                if "Completed request:" not in line:
                    continue
                body = json.loads(line[line.index("{") : line.rindex("}") + 1])
                name = body["requestHeader"]["requestApiKeyName"]
                t_log = _log_ms(line)
                if name == "PRODUCE" and body["request"]["acks"] != 0:
                    for key in ("requestQueueTimeMs", "localTimeMs", "responseQueueTimeMs", "sendTimeMs"):
                        out[f"produce.{key}"].append(body[key])
                    out["produce.acks_all"].append(1.0 if body["request"]["acks"] == -1 else 0.0)
                    parts = body["request"]["topicData"][0]["partitionData"]
                    out["produce.partitions_per_request"].append(len(parts))
                    for p in parts:
                        out["produce.recordsSizeInBytes"].append(p["recordsSizeInBytes"])
                    for r in body["response"]["responses"][0]["partitionResponses"]:
                        partition_key = (root, broker, r["index"])
                        if r["errorCode"] == 0:
                            if partition_key in last_base and r["baseOffset"] > last_base[partition_key]:
                                out["produce.records_per_batch"].append(r["baseOffset"] - last_base[partition_key])
                            last_base[partition_key] = r["baseOffset"]
                    if body["request"]["acks"] == -1:
                        out["produce.remoteTimeMs"].append(body["remoteTimeMs"])
                elif name == "FETCH" and ("replicaState" in body["request"] or "replicaId" in body["request"]):
                    state = body["request"].get("replicaState") or {}
                    follower = state.get("replicaId", body["request"].get("replicaId", -1))
                    if follower < 0:
                        continue
                    for key in ("requestQueueTimeMs", "localTimeMs", "responseQueueTimeMs", "sendTimeMs"):
                        out[f"fetch.{key}"].append(body[key])
                    session = (root, broker, follower)
                    t_start = t_log - body["totalTimeMs"]
                    if session in last_completion:
                        # leader sent the previous response -> leader received the next request
                        out["fetch.round_trip_ms"].append(t_start - last_completion[session])
                    last_completion[session] = t_log - body["sendTimeMs"]
                    if body["remoteTimeMs"] > 0:
                        out["fetch.waited_ms"].append(body["remoteTimeMs"])
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", help="trace folders (each holding <cluster>/broker-<id>/...)")
    args = parser.parse_args()
    values = collect(args.traces)
    print(f"{'quantity':36} {'n':>8} {'P50':>10} {'P90':>10} {'P99':>10} {'sigma':>6}")
    for key in sorted(values):
        v = values[key]
        if key.endswith(("acks_all", "partitions_per_request")):
            print(f"{key:36} {v.size:8d} mean {v.mean():.3f}")
            continue
        p50, p90, p99 = np.percentile(v[v > 0], [50, 90, 99]) if (v > 0).any() else (0, 0, 0)
        _, sigma = lognormal_fit(v) if (v > 0).sum() > 10 else (0.0, 0.0)
        print(f"{key:36} {v.size:8d} {p50:10.3f} {p90:10.3f} {p99:10.3f} {sigma:6.2f}")


if __name__ == "__main__":
    main()
