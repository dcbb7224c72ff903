"""End to end: `ackreplay run` (ingest, replay, gold, report) on a synthetic cluster trace.

    python -m bench.e2e_bench --produces 1000000 [--conf conf/local.yaml]

Generates the trace with ackreplay.synth (real file formats; not timed), then runs the `ackreplay run`
command as a child process and reports its wall time and the peak resident memory of its process
tree (driver JVM and Python workers), sampled every 0.2 s. Prints one table.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ackreplay.synth import SynthParams, generate
from bench.replay_bench import PeakRss


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--produces", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--conf", default="conf/local.yaml")
    parser.add_argument("--workdir", default="bench/out")
    args = parser.parse_args(argv)
    work = Path(args.workdir) / f"e2e-{args.produces}-{args.seed}"
    raw = work / "input"
    if not (raw / "synth" / "topics.txt").exists():
        shutil.rmtree(raw, ignore_errors=True)
        # Short traces cannot hold a stall past the lag time: the stall needs a few lag times of trace.
        long_stalls = 1 if args.produces >= 200_000 else 0
        print(
            "\n".join(
                generate(
                    SynthParams(produces=args.produces, seed=args.seed, long_stalls=long_stalls), raw
                ).summary_lines()
            )
        )
    lakehouse = work / "lakehouse"
    shutil.rmtree(lakehouse, ignore_errors=True)
    command = [
        sys.executable,
        "-c",
        "import sys; from ackreplay.cli import main; sys.exit(main())",
        "run",
        "--input",
        str(raw),
        "--lakehouse",
        str(lakehouse),
        "--conf",
        args.conf,
    ]
    with PeakRss() as rss:
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
    (work / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"ackreplay run failed ({done.returncode}); log: {work / 'run.log'}\n{done.stderr[-3000:]}")
    size = sum(f.stat().st_size for f in raw.rglob("*") if f.is_file())
    print()
    print(
        f"| ackreplay run on {args.produces:,} produces ({size / 1e6:,.0f} MB of input) | wall time | produces/s | "
        "peak RSS |"
    )
    print("|---|---|---|---|")
    print(
        f"| ingest + replay + gold + report | {seconds:.1f} s | {args.produces / seconds:,.0f} | "
        f"{rss.peak / 2**30:.2f} GiB |"
    )


if __name__ == "__main__":
    main()
