"""Cost of the scheduler's look at a new input file (`ackreplay.storage.fingerprint.read_facts`), per file kind.

    .venv/bin/python -m bench.fingerprint_bench [--megabytes 256] [--repeat 3]

Writes a request log of about `--megabytes` MB (PRODUCE lines with varied sizes and timings, one
per millisecond, compressing about 10:1) as a plain file and as gzip, then times `read_facts` on each, one core, best of
`--repeat`: a plain file costs two 1 MiB reads whatever its size; a gzip file is decompressed whole
(the fingerprint covers the decompressed content so that a `.gz` copy matches its original). A
file whose size and modification time the ledger already holds is not read at all.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import tempfile
import time
from datetime import datetime, timedelta

from ackreplay.kafka_lines import ProducePartition, Timing, produce_body, request_log_line
from ackreplay.storage.fingerprint import read_facts


def _write_log(path: str, megabytes: float) -> int:
    start = datetime(2026, 11, 20, 10)
    target = int(megabytes * 1e6)
    written, i = 0, 0
    rng = random.Random(7)  # varied sizes and timings: about as compressible as the bundled traces
    with open(path, "wb") as out:
        while written < target:
            chunk = "".join(
                request_log_line(
                    start + timedelta(microseconds=rng.randrange(1000) + 1000 * (i + k)),
                    produce_body(
                        9,
                        i + k,
                        -1,
                        "orders",
                        [ProducePartition(rng.randrange(12), rng.randrange(100, 100_000), rng.randrange(10**9))],
                        Timing(rng.random(), rng.random() * 3, rng.random() * 500, rng.random(), rng.random()),
                    ),
                )
                + "\n"
                for k in range(10_000)
            ).encode()
            out.write(chunk)
            written += len(chunk)
            i += 10_000
    return written


def _best(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and CPU seconds over `repeat` calls."""
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=256.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "kafka-request.log.2026-11-20-10")
        size = _write_log(plain, args.megabytes)
        compressed = plain + ".gz"
        with open(plain, "rb") as src, gzip.open(compressed, "wb", compresslevel=6) as dst:
            while block := src.read(1 << 24):
                dst.write(block)
        gz_size = os.path.getsize(compressed)
        facts = {}
        for label, path, compression, listed in (("plain", plain, "none", size), ("gzip", compressed, "gzip", gz_size)):

            def read(label=label, path=path, compression=compression, listed=listed):
                facts[label] = read_facts(path, compression, "request_log", listed)

            wall, cpu = _best(read, args.repeat)
            print(
                f"{label:>5}: {listed / 1e6:8.1f} MB on disk, {size / 1e6:8.1f} MB of content: "
                f"{wall:7.3f} s wall, {cpu:7.3f} s CPU = {size / 1e6 / wall:8.1f} MB/s of content"
            )
        assert facts["plain"] == facts["gzip"], "a .gz copy must have its original's fingerprint"
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
