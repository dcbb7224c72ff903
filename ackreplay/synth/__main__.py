"""Command line: `python -m ackreplay.synth --out DIR [--seed N] [--produces N] [--<param> value ...]`.

Every numeric parameter of `SynthParams` is an option (underscores as dashes); see docs/synthetic.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import fields
from pathlib import Path

from ackreplay.synth import SynthParams, generate


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ackreplay.synth", description=__doc__)
    parser.add_argument("--out", required=True, help="folder to write <cluster>/broker-<id>/... into")
    parser.add_argument("--force", action="store_true", help="replace an existing <out>/<cluster> folder")
    defaults = SynthParams()
    for f in fields(SynthParams):
        value = getattr(defaults, f.name)
        if f.name == "slow_broker":
            parser.add_argument("--slow-broker", type=int, default=value, help="broker id, -1: the last, 0: none")
        elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
            parser.add_argument(
                f"--{f.name.replace('_', '-')}", type=type(value), default=value, help=f"default {value}"
            )
    return parser


def main(argv: list[str] | None = None) -> int:
    """`python -m ackreplay.synth`: generate a synthetic trace (docs/synthetic.md)."""
    args = _parser().parse_args(argv)
    values = {f.name: getattr(args, f.name) for f in fields(SynthParams) if hasattr(args, f.name)}
    if values.get("slow_broker") == 0:
        values["slow_broker"] = None
    try:
        params = SynthParams(**values)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    target = Path(args.out) / params.cluster
    if target.exists():
        if not args.force:
            print(f"{target} exists: pass --force to replace it", file=sys.stderr)
            return 2
        shutil.rmtree(target)
    try:
        report = generate(params, args.out)
    except ValueError as e:  # parameters that do not fit together (e.g. a trace too short for its stalls)
        print(e, file=sys.stderr)
        return 2
    print("\n".join(report.summary_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
