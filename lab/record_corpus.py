"""Record the committed traces again, each with the command its manifest.json names (`make corpus`).

    python -m lab.record_corpus --out /tmp/corpus                 # data/samples/* and data/corpus/*
    python -m lab.record_corpus --out /tmp/corpus data/corpus/trace-3.7.2-utc

Each trace is recorded into ``<out>/<its folder name>``, never over the committed one: compare the new
recording with the old (`ackreplay run` on both), then replace it by hand. A folder already in ``<out>``
is skipped, so an interrupted run resumes. The lab's defaults have changed since some traces were
recorded, so what a manifest says beyond its command is pinned too: the warm-up (``workload.warmup_s``)
and the log stamp (``configs.log_stamp.option``; traces without it were recorded with ms stamps).
One trace at a time: each is a 3-broker cluster on the machine's cores for its warm-up and duration.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ("data/samples", "data/corpus")


def _without_option(argv: list[str], option: str) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            out.append(arg)
    return out


def record_command(manifest: dict, out: Path) -> list[str]:
    """The lab command that records the trace of `manifest` again into `out` (argv, after `python`)."""
    command = shlex.split(manifest["command"])
    if command[:3] != ["python", "-m", "lab.record_trace"]:
        raise ValueError(f"not a lab recording: {manifest['command']!r}")
    argv = command[3:]
    for pinned in ("--out", "--warmup-s", "--log-stamp"):  # given below
        argv = _without_option(argv, pinned)
    stamp = manifest.get("configs", {}).get("log_stamp", {}).get("option", "ms")
    warmup = manifest["workload"]["warmup_s"]
    return ["-m", "lab.record_trace", *argv, "--warmup-s", f"{warmup:g}", "--log-stamp", stamp, "--out", str(out)]


def traces_under(paths: list[Path]) -> list[Path]:
    """Trace folders (holding a manifest.json) given directly or as the parent of several."""
    found = []
    for path in paths:
        if (path / "manifest.json").is_file():
            found.append(path)
        else:
            found.extend(sorted(p.parent for p in path.glob("*/manifest.json")))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to record into (one sub-folder per trace)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    parser.add_argument(
        "traces", nargs="*", type=Path, help=f"trace folders or their parents (default: {' '.join(DEFAULT_TRACES)})"
    )
    args = parser.parse_args(argv)
    traces = traces_under(args.traces or [REPO / p for p in DEFAULT_TRACES])
    if not traces:
        parser.error("no trace folder (with a manifest.json) found")
    for i, trace in enumerate(traces, 1):
        target = args.out / trace.name
        command = [sys.executable, *record_command(json.loads((trace / "manifest.json").read_text()), target)]
        if target.exists() and not args.dry_run:
            print(f"[{i}/{len(traces)}] {trace.name}: {target} exists, skipped", flush=True)
            continue
        print(f"[{i}/{len(traces)}] {trace.name}: {shlex.join(command[1:])}", flush=True)
        if not args.dry_run:
            subprocess.run(command, cwd=REPO, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
