"""Writes a large request-log input folder fast, for throughput benchmarks of the ingest stage.

Lines are the real formats (built once by ackreplay.kafka_lines, then re-filled with varying numbers):
PRODUCE v11 (topic names) and v13 (topic ids), follower FETCH v17 in incremental sessions, consumer
FETCH and METADATA lines, in roughly the mix seen in the lab traces. Not a semantically consistent
cluster (that is the synthetic trace generator's job); it exercises parsing and writing.
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timedelta
from pathlib import Path

from ackreplay.kafka_lines import (
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    other_body,
    produce_body,
    request_log_line,
    topics_describe,
)

TOPICS = [(f"topic-{i}", f"{i:02d}AAAAAAAAAAAAAAAAAAAAQ"[:22]) for i in range(8)]
SENTINELS = ("777000001", "777000002", "777000003", "777000004")


def _templates() -> list[tuple[float, list[str]]]:
    """(weight, template split on the sentinel numbers)."""
    t = datetime(2026, 11, 20, 0, 0, 0)
    timing = Timing(request_queue=0.081, local=0.934, remote=6.201, response_queue=0.043, send=0.153)
    name, tid = TOPICS[0]
    produce_v11 = produce_body(
        11, int(SENTINELS[1]), -1, name, [ProducePartition(int(SENTINELS[2]) % 1000, 15872, int(SENTINELS[3]))], timing
    )
    produce_v13 = produce_body(
        13, int(SENTINELS[1]), -1, name, [ProducePartition(3, 1024, int(SENTINELS[3]))], timing, topic_id=tid
    )
    follower = fetch_body(
        17,
        int(SENTINELS[1]),
        2,
        [
            FetchTopic(
                n, i, [FetchPartition(p, int(SENTINELS[3]), 12, high_watermark=int(SENTINELS[3])) for p in range(2)]
            )
            for n, i in TOPICS[:2]
        ],
        Timing(local=0.6, remote=0.0),
        session_id=1427613871,
        session_epoch=int(SENTINELS[2]),
    )
    consumer = fetch_body(
        13, int(SENTINELS[1]), -1, [FetchTopic(name, tid, [FetchPartition(0, int(SENTINELS[3]))])], Timing()
    )
    metadata = other_body("METADATA", 3, 12, int(SENTINELS[1]))
    out = []
    for weight, body in (
        (0.25, produce_v11),
        (0.15, produce_v13),
        (0.45, follower),
        (0.10, consumer),
        (0.05, metadata),
    ):
        line = request_log_line(t, body)
        stamp = line[1:24]
        line = line.replace(stamp, SENTINELS[0], 1)
        parts = [line]
        for s in SENTINELS:
            parts = [piece for part in parts for piece in _split_keep(part, s)]
        out.append((weight, parts))
    return out


def _split_keep(text: str, sentinel: str) -> list[str]:
    pieces = text.split(sentinel)
    out = []
    for i, piece in enumerate(pieces):
        out.append(piece)
        if i < len(pieces) - 1:
            out.append(sentinel)
    return out


def generate(out: Path, total_bytes: int, brokers: int = 3, files_per_broker: int = 4, seed: int = 7) -> int:
    """Write `<out>/c1/broker-<id>/kafka-request.log.<hour>` files and topics.txt; returns bytes written."""
    rng = random.Random(seed)
    templates = _templates()
    weights = [w for w, _ in templates]
    per_file = total_bytes // (brokers * files_per_broker)
    written = 0
    start = datetime(2026, 11, 20, 0, 0, 0)
    for broker in range(1, brokers + 1):
        for hour in range(files_per_broker):
            path = out / "c1" / f"broker-{broker}" / f"kafka-request.log.2026-11-20-{hour:02d}"
            path.parent.mkdir(parents=True, exist_ok=True)
            t = start + timedelta(hours=hour)
            counter = 0
            size = 0
            chunk: list[str] = []
            with path.open("w") as f:
                while size < per_file:
                    counter += 1
                    t += timedelta(microseconds=rng.randrange(100, 3000))
                    _, parts = templates[rng.choices(range(len(templates)), weights)[0]]
                    values = {
                        SENTINELS[0]: t.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3],
                        SENTINELS[1]: str(counter),
                        SENTINELS[2]: str(counter % 100000 + 1),
                        SENTINELS[3]: str(counter * 3),
                    }
                    line = "".join(values.get(p, p) for p in parts) + "\n"
                    chunk.append(line)
                    size += len(line)
                    if len(chunk) >= 10000:
                        f.write("".join(chunk))
                        chunk.clear()
                f.write("".join(chunk))
            written += size
    topics = "".join(topics_describe(n, i, [[1, 2, 3]] * 4, {"min.insync.replicas": "2"}) for n, i in TOPICS)
    (out / "c1" / "topics.txt").write_text(topics)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    args = parser.parse_args()
    n = generate(Path(args.out), int(args.gigabytes * 1e9))
    print(f"wrote {n / 1e6:.0f} MB to {args.out}")
