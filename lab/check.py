"""Completeness and consistency checks of a recorded lab trace (plain ``json``, no Spark).

Checks, for a trace folder ``<trace>/`` (``<trace>/<cluster>/broker-<id>/...``, ``<trace>/<cluster>/client/``):

* completeness: every broker folder has kafka-request.log*, server.log*, state-change.log*; topics.txt exists;
* every request-log line is accounted for: parsed as a "Completed request:" JSON line, or counted as unparsed;
* produce consistency, counted in **record batches** (one PRODUCE partition entry = one batch, Produce v3+):
  the multiset of (acks, partition, baseOffset) over successful (errorCode 0) PRODUCE partition responses
  of the lab producers in all brokers' request logs equals the multiset of batches the Java clients got
  acknowledged (``client/batches-*.csv.gz``: the client's own produce result, baseOffset = offset - batchIndex).
  Records per batch are only known client-side (the request log elides records, KIP-673), so message
  counts come from the client CSVs;
* ISR change lines ("Shrinking ISR", "ISR updated to") and leader-epoch lines in the state-change logs.

``python -m lab.check data/samples/<trace>`` prints the report as JSON.
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
import json
import re
from pathlib import Path

# `[%d]` to the millisecond (Kafka's default) or the microsecond (`--log-stamp us`, log4j2 DEFAULT_MICROS).
LINE_RE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}(?:\d{3})?)\] (\w+) (.*)$")
REQ_PREFIX = "Completed request:"
REQ_SUFFIX = " (kafka.request.logger)"
LAB_PRODUCERS = ("lab-producer-acks-all", "lab-producer-acks-1", "lab-perf-test")


def open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def log_files(broker_dir: Path, name: str) -> list[Path]:
    """kafka-request.log, kafka-request.log.2026-11-22-02, ... plain or .gz, rotated first."""
    files = [p for p in broker_dir.glob(name + "*") if p.is_file()]

    def key(p: Path):
        n = p.name[:-3] if p.name.endswith(".gz") else p.name
        return (n == name, n)  # rotated (dated) files sort before the live file

    return sorted(files, key=key)


def parse_request_line(line: str):
    """Return (log_time_str, level, json_obj) or None."""
    m = LINE_RE.match(line.rstrip("\n"))
    if not m:
        return None
    msg = m.group(3)
    if not msg.startswith(REQ_PREFIX) or not msg.endswith(REQ_SUFFIX):
        return None
    try:
        return m.group(1), m.group(2), json.loads(msg[len(REQ_PREFIX) : -len(REQ_SUFFIX)])
    except json.JSONDecodeError:
        return None


def topic_ids(topics_txt: Path) -> dict[str, str]:
    ids = {}
    if topics_txt.exists():
        for line in topics_txt.read_text().splitlines():
            m = re.match(r"Topic:\s*(\S+)\s+TopicId:\s*(\S+)", line)
            if m:
                ids[m.group(2)] = m.group(1)
    return ids


def cluster_dirs(trace: Path) -> list[Path]:
    return sorted(p for p in trace.iterdir() if p.is_dir() and any(p.glob("broker-*")))


def check_trace(trace: Path, topic: str = "ackreplay-lab") -> dict:
    trace = Path(trace)
    report: dict = {"trace": str(trace), "clusters": {}}
    clusters = cluster_dirs(trace)
    report["complete"] = bool(clusters)
    for cdir in clusters:
        rep = check_cluster(cdir, topic)
        report["clusters"][cdir.name] = rep
        report["complete"] = report["complete"] and rep["complete"]
    # client side
    client = read_client_batches(*(c / "client" for c in clusters))
    report["client"] = {
        "batches_acked": {a: sum(c.values()) for a, c in client["batches"].items()},
        "records_acked": client["records"],
    }
    # produce consistency (one cluster per trace)
    has_client_logs = any(f for c in clusters for f in (c / "client").glob("batches-*.csv*"))
    if len(clusters) == 1:
        logged = report["clusters"][clusters[0].name].pop("_produce_ok")
        if has_client_logs:  # ProducerPerformance logs no batches: its own percentiles are the check
            report["produce_check"] = compare_batches(logged, client["batches"])
    else:
        for c in report["clusters"].values():
            c.pop("_produce_ok", None)
    return report


def check_cluster(cdir: Path, topic: str) -> dict:
    ids = topic_ids(cdir / "topics.txt")
    rep: dict = {"topics_txt": (cdir / "topics.txt").exists(), "brokers": {}, "complete": True}
    rep["complete"] = rep["topics_txt"] and topic in ids.values()
    produce_ok: dict[str, collections.Counter] = {"-1": collections.Counter(), "1": collections.Counter()}
    produce_errors: collections.Counter = collections.Counter()
    isr_lines: list[dict] = []
    for bdir in sorted(cdir.glob("broker-*")):
        b = bdir.name
        files = {
            n: [p.name for p in log_files(bdir, n)] for n in ("kafka-request.log", "server.log", "state-change.log")
        }
        present = all(files.values())
        rep["complete"] = rep["complete"] and present
        brep = {
            "files": files,
            "complete": present,
            "lines": 0,
            "parsed": 0,
            "unparsed": 0,
            "unparsed_examples": [],
            "api": collections.Counter(),
            "produce_partitions": collections.Counter(),
            "follower_fetch": 0,
            "consumer_fetch": 0,
        }
        for f in log_files(bdir, "kafka-request.log"):
            with open_text(f) as fh:
                for line in fh:
                    brep["lines"] += 1
                    parsed = parse_request_line(line)
                    if parsed is None:
                        brep["unparsed"] += 1
                        if len(brep["unparsed_examples"]) < 3:
                            brep["unparsed_examples"].append(line[:300])
                        continue
                    brep["parsed"] += 1
                    _, _, obj = parsed
                    h = obj["requestHeader"]
                    api = h.get("requestApiKeyName", str(h["requestApiKey"]))
                    brep["api"][f"{api} v{h['requestApiVersion']}"] += 1
                    if api == "FETCH":
                        req = obj.get("request") or {}
                        rid = req.get("replicaState", {}).get("replicaId", req.get("replicaId", -1))
                        if rid >= 0:
                            brep["follower_fetch"] += 1
                        else:
                            brep["consumer_fetch"] += 1
                    if api != "PRODUCE":
                        continue
                    req, resp = obj["request"], obj["response"]
                    acks = str(req["acks"])
                    client_id = h.get("clientId", "")
                    if not isinstance(resp, dict):
                        continue  # acks=0: no response
                    for t in resp.get("responses", []):
                        tname = t.get("name") or ids.get(t.get("topicId", ""), t.get("topicId"))
                        for pr in t.get("partitionResponses", []):
                            brep["produce_partitions"][f"acks={acks} error={pr['errorCode']}"] += 1
                            if tname != topic or client_id not in LAB_PRODUCERS:
                                continue
                            if pr["errorCode"] == 0:
                                produce_ok.setdefault(acks, collections.Counter())[(pr["index"], pr["baseOffset"])] += 1
                            else:
                                produce_errors[f"acks={acks} error={pr['errorCode']}"] += 1
        for f in log_files(bdir, "server.log"):
            with open_text(f) as fh:
                for line in fh:
                    if "Shrinking ISR" in line or "ISR updated to" in line:
                        m = LINE_RE.match(line)
                        isr_lines.append(
                            {
                                "broker": b,
                                "time": m.group(1) if m else None,
                                "kind": "shrink" if "Shrinking ISR" in line else "updated",
                                "line": line.rstrip("\n"),
                            }
                        )
        leader_lines = 0
        for f in log_files(bdir, "state-change.log"):
            with open_text(f) as fh:
                leader_lines += sum(1 for line in fh if "starts at leader epoch" in line)
        brep["leader_epoch_lines"] = leader_lines
        brep["api"] = dict(sorted(brep["api"].items()))
        brep["produce_partitions"] = dict(sorted(brep["produce_partitions"].items()))
        rep["brokers"][b] = brep
    lab_isr = [x for x in isr_lines if f"[Partition {topic}-" in x["line"]]
    rep["isr"] = {
        "shrink_lines": sum(1 for x in isr_lines if x["kind"] == "shrink"),
        "updated_lines": sum(1 for x in isr_lines if x["kind"] == "updated"),
        "lab_topic_shrink_lines": sum(1 for x in lab_isr if x["kind"] == "shrink"),
        "lab_topic_updated_lines": sum(1 for x in lab_isr if x["kind"] == "updated"),
        "first_lines": [x["line"] for x in lab_isr[:4]],
    }
    rep["produce_log"] = {
        "ok_batches": {a: sum(c.values()) for a, c in produce_ok.items()},
        "error_partition_responses": dict(produce_errors),
    }
    rep["_produce_ok"] = produce_ok
    return rep


def read_client_batches(*client_dirs: Path) -> dict:
    batches: dict[str, collections.Counter] = {"-1": collections.Counter(), "1": collections.Counter()}
    records: dict[str, int] = {"-1": 0, "1": 0}
    for f in sorted(f for d in client_dirs for f in d.glob("batches-*.csv*")):
        with open_text(f) as fh:
            for row in csv.DictReader(fh):
                acks = "-1" if row["acks"] in ("all", "-1") else row["acks"]
                batches.setdefault(acks, collections.Counter())[(int(row["partition"]), int(row["base_offset"]))] += 1
                records[acks] = records.get(acks, 0) + int(row["records"])
    return {"batches": batches, "records": records}


def compare_batches(logged: dict, client: dict) -> dict:
    out: dict = {"by_acks": {}, "equal": True}
    for acks in sorted(set(logged) | set(client)):
        lc = logged.get(acks, collections.Counter())
        cc = client.get(acks, collections.Counter())
        only_log = lc - cc
        only_client = cc - lc
        out["by_acks"][acks] = {
            "log_ok_batches": sum(lc.values()),
            "client_acked_batches": sum(cc.values()),
            "matched": sum((lc & cc).values()),
            "only_in_log": sum(only_log.values()),
            "only_in_client": sum(only_client.values()),
            "only_in_log_examples": [list(k) for k in list(only_log)[:5]],
            "only_in_client_examples": [list(k) for k in list(only_client)[:5]],
        }
        if only_log or only_client:
            out["equal"] = False
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description="Check a recorded trace: files complete, log batches = client's acked batches."
    )
    parser.add_argument("trace", type=Path, help="trace folder, e.g. data/samples/trace-3.9.1-utc")
    parser.add_argument(
        "topic", nargs="?", default="ackreplay-lab", help="the workload's topic (default: ackreplay-lab)"
    )
    args = parser.parse_args()
    print(json.dumps(check_trace(args.trace, args.topic), indent=2, default=str))
