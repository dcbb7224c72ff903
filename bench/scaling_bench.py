"""Scaling: replay time at several sizes (default 1M, 3M, 10M produces); cost should grow linearly.

    python -m bench.scaling_bench [--sizes 1000000 3000000 10000000] [--skip-ackreplay]

Runs bench.replay_bench on each size (same generator, same contenders) and prints one table: wall
time per contender and size, and the time per million produces relative to the smallest size
(1.00 everywhere = linear).
"""

from __future__ import annotations

import argparse

from bench.replay_bench import _parser as replay_parser
from bench.replay_bench import print_table, run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000])
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--skip-ackreplay", action="store_true")
    parser.add_argument("--runs", type=int, default=1, help="replays per size in one session (see bench.replay_bench)")
    parser.add_argument("--conf", default="conf/local.yaml")
    parser.add_argument("--workdir", default="bench/out")
    args = parser.parse_args(argv)
    table: dict[str, dict[int, float]] = {}
    for size in args.sizes:
        options = [
            "--produces", str(size), "--partitions", str(args.partitions), "--conf", args.conf,
            "--workdir", args.workdir, "--runs", str(args.runs),
        ]  # fmt: skip
        size_args = replay_parser().parse_args(options + (["--skip-ackreplay"] if args.skip_ackreplay else []))
        results = run(size_args)
        print_table(size_args, results)  # each size's table as soon as it is measured
        for name, (seconds, _, _) in results.items():
            if name != "ackreplay_policies":
                table.setdefault(name, {})[size] = seconds
    first = args.sizes[0]
    print()
    print(
        "| contender | "
        + " | ".join(f"{s / 1e6:g}M produces" for s in args.sizes)
        + " | time per M vs "
        + f"{first / 1e6:g}M |"
    )
    print("|---|" + "---|" * len(args.sizes) + "---|")
    for name, by_size in table.items():
        per_m = [by_size[s] / s * first / by_size[first] for s in args.sizes]
        print(
            f"| {name} | "
            + " | ".join(f"{by_size[s]:.1f} s" for s in args.sizes)
            + " | "
            + " / ".join(f"{x:.2f}" for x in per_m)
            + " |"
        )


if __name__ == "__main__":
    main()
