"""What the request-log reader task costs on one core, without Spark: the floor under the ingest's bronze step.

    python -m bench.ingest_floor --gigabytes 1.0          # the ingest bench's generated input (bench/out)
    python -m bench.ingest_floor --input data/corpus      # every request log under a folder (real traces, gzip)

Runs, in this process and file by file, what `line_reader.read_request_logs` runs in a Spark task (reading and
splitting lines, classifying and parsing them: `request_log_parser.parsed_batches`), then writes the bronze
columns of each line (line number, text, length) with pyarrow's Parquet writer, and prints the CPU seconds of each
pass. The ingest's bronze step hands every line's text to Spark, keeps it on disk for the silver writes and
encodes it with Spark's Parquet writer (docs/benchmarks.md, "Ingest"); set against that step's time in
`bench.ingest_bench`, this says what a reader that writes bronze itself would leave of it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ackreplay.ingest.request_log_parser import parsed_batches
from ackreplay.storage.inputs import discover_inputs
from ackreplay.storage.line_reader import iter_file_lines
from bench.gen_request_log import generate

CHUNK_BYTES = 16 << 20  # conf/local.yaml's ingest.read_chunk_bytes
MAX_LINE_BYTES = 1 << 20  # and ingest.max_line_bytes


def measure(files, out: Path) -> dict[str, float]:
    """CPU seconds of reading, parsing and writing bronze Parquet for `files` (InputFiles), one after the other,
    and the content bytes and lines read."""
    seconds = {"read": 0.0, "parse": 0.0, "bronze": 0.0}
    content, lines = 0, 0
    for index, f in enumerate(files):
        row = {"file_index": index, "uri": f.uri, "compression": f.compression}
        writer = None
        mark = time.process_time()
        for batch in iter_file_lines(row, CHUNK_BYTES, MAX_LINE_BYTES):
            read = time.process_time()
            seconds["read"] += read - mark
            n = batch.num_rows
            lines += n
            content += pc.sum(batch.column("line_bytes")).as_py() + n  # the text and its line ends
            for _ in parsed_batches(
                batch.select(["file_index", "line_number", "first_log_time"]),
                batch.column("line"),
                batch.column("line_bytes"),
                batch.column("read_error"),
                pa.repeat(pa.scalar(f.cluster, pa.string()), n),
                {},
            ):
                pass
            parsed = time.process_time()
            seconds["parse"] += parsed - read
            bronze = pa.Table.from_batches([batch.select(["line_number", "line", "line_bytes"])])
            if writer is None:
                writer = pq.ParquetWriter(out / f"part-{index}.snappy.parquet", bronze.schema, compression="snappy")
            writer.write_table(bronze)
            mark = time.process_time()
            seconds["bronze"] += mark - parsed
        if writer is not None:
            writer.close()
            seconds["bronze"] += time.process_time() - mark
    return {**seconds, "content_bytes": content, "lines": lines}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--gigabytes", type=float, default=1.0, help="the ingest bench's generated input")
    source.add_argument("--input", help="a folder of request logs (<cluster>/broker-<id>/kafka-request.log*)")
    parser.add_argument("--workdir", default="bench/out")
    args = parser.parse_args(argv)
    if args.input:
        folder = Path(args.input)
        traces = [p.parent for p in folder.rglob("manifest.json")] or [folder]
    else:
        folder = Path(args.workdir) / f"ingest-{args.gigabytes:g}GB"
        if not (folder / "c1" / "topics.txt").exists():
            shutil.rmtree(folder, ignore_errors=True)
            generate(folder, int(args.gigabytes * 1e9))
        traces = [folder]
    files = [f for trace in traces for f in discover_inputs(str(trace)).of_kind("request_log")]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as out:
        result = measure(files, Path(out))
        parquet_mb = sum(p.stat().st_size for p in Path(out).iterdir()) / 1e6
    mb = result["content_bytes"] / 1e6
    print(f"| request logs, one core, no Spark: {folder} | CPU seconds | MB/s of text |")
    print("|---|---|---|")
    for label, key in (("read and split lines", "read"), ("classify and parse", "parse"),
                       ("bronze columns to Parquet (pyarrow, snappy)", "bronze")):  # fmt: skip
        print(f"| {label} | {result[key]:.1f} | {mb / max(result[key], 1e-9):,.0f} |")
    total = result["read"] + result["parse"] + result["bronze"]
    print(f"| all three | {total:.1f} | {mb / max(total, 1e-9):,.0f} |")
    print(
        f"\n{len(files)} files, {mb:,.0f} MB of text, {result['lines']:,} lines; bronze Parquet {parquet_mb:,.0f} MB;"
        f" load average before {', '.join(f'{x:.1f}' for x in load_before)},"
        f" after {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
