"""Replay-kernel throughput: produces/s for one leader epoch with 1M produces, on one core.

    .venv/bin/python -m bench.kernel_bench [--produces 1000000] [--repeat 5]

Synthetic epoch built with NumPy: RF=3, min.insync.replicas=2, 10k produces/s (~100 s), batches of
1-50 records, one FETCH per follower per produce (fetchOffset = leader LEO at the previous FETCH).
Scenarios: a steady epoch (ISR always full), the same with the rows shuffled (unsorted input), and
a faulty one where follower 3 stalls twice for 40 s (recorded ISR: 2 shrinks + 2 re-adds).
Each scenario times `replay_epoch` (all policies in one call) and prints the best of `--repeat`
runs, wall clock and CPU time (CPU time is the per-core figure when other work shares the
machine). Pin the process to one core (`taskset -c 0`); NumPy does not thread these operations.

Most of the remaining cost beyond the arithmetic is page faults on freshly allocated output
arrays: glibc returns large freed blocks to the OS, so every call faults its memory in again.
Keeping freed memory in the process (e.g. Spark `spark.executorEnv.MALLOC_TRIM_THRESHOLD_=
17179869184` and `MALLOC_MMAP_THRESHOLD_=4294967296`, read by the Python workers' glibc) removes
that; run the benchmark with the same two variables exported to see the difference.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from ackreplay.replay.kernel import EpochInputs, replay_epoch

T0 = 1_790_000_000_000_000  # µs since the Unix epoch


def build_epoch(n: int, *, stalls: bool, shuffle: bool, lags: tuple[float, ...], seed: int = 7) -> EpochInputs:
    """One synthetic leader epoch with n produces."""
    rng = np.random.default_rng(seed)
    gaps = rng.integers(20, 180, n)  # µs between produces: ~10k/s
    t_local_done = T0 + np.cumsum(gaps)
    sizes = rng.integers(1, 51, n)
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    ends = base + sizes

    def follower(stall_windows: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        # One FETCH per produce; its fetchOffset is the leader LEO when the previous FETCH read the
        # log (50-200 µs after its dequeue), as for a follower whose fetches return all new data.
        times = np.sort(t_local_done + rng.integers(50, 400, n))
        for lo, hi in stall_windows:  # no FETCH during a stall; the first one after it catches up
            times = times[(times < lo) | (times >= hi)]
        read = np.concatenate([[times[0] - 1000], times[:-1]]) + rng.integers(50, 200, times.size)
        seen = np.searchsorted(t_local_done, read, side="right") - 1
        offsets = np.where(seen >= 0, ends[np.maximum(seen, 0)], 0)
        return times, offsets.astype(np.int64)

    span = int(t_local_done[-1] - T0)
    stall = 40_000_000
    windows = [(T0 + int(span * x), T0 + int(span * x) + stall) for x in (0.1, 0.55)] if stalls else []
    (t2, o2), (t3, o3) = follower([]), follower(windows)
    change_times, membership = [], [[True, True]]
    for lo, hi in windows:  # lag 30 s: removed 30-45 s into the stall (here 35 s), back after it
        change_times += [lo + 35_000_000, hi + 2_000]
        membership += [[True, False], [True, True]]
    order = rng.permutation(n) if shuffle else np.arange(n)
    return EpochInputs(
        base_offset=base[order],
        t_local_done=t_local_done[order],
        timeout_us=np.full(n, 30_000_000, dtype=np.int64),
        appended=np.ones(n, dtype=bool),
        follower_ids=np.array([2, 3], dtype=np.int32),
        leo_times=(t2, t3),
        leo_offsets=(o2, o3),
        isr_change_times=np.array(change_times, dtype=np.int64),
        isr_membership=np.array(membership, dtype=bool),
        min_insync_replicas=2,
        quorum_sizes=(2,),
        replica_lag_time_max_ms=lags,
    )


def best_seconds(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU (process) seconds over ``repeat`` runs."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        fn()
        cpu = min(cpu, time.process_time() - started_cpu)
        wall = min(wall, time.perf_counter() - started)
    return wall, cpu


def baseline(inputs: EpochInputs) -> None:
    """The floor: cummax + searchsorted + gather for each follower, nothing else."""
    for times, offsets in zip(inputs.leo_times, inputs.leo_offsets, strict=True):
        idx = np.searchsorted(np.maximum.accumulate(offsets), inputs.base_offset, side="right")
        np.append(times, np.iinfo(np.int64).max).take(idx)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--produces", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.produces

    scenarios = [
        ("steady, base policies", dict(stalls=False, shuffle=False, lags=())),
        ("steady, + acks=all@lag=5000,30000", dict(stalls=False, shuffle=False, lags=(5000.0, 30000.0))),
        ("steady, rows shuffled, + 2 lags", dict(stalls=False, shuffle=True, lags=(5000.0, 30000.0))),
        ("2 stalls of 40 s (4 ISR changes), base policies", dict(stalls=True, shuffle=False, lags=())),
        ("2 stalls of 40 s (4 ISR changes), + 2 lags", dict(stalls=True, shuffle=False, lags=(5000.0, 30000.0))),
    ]
    print(f"replay kernel, {n:,} produces in one epoch, RF=3, best of {args.repeat}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, numpy {np.__version__}")
    print()
    print("| scenario | policies | events/follower | wall s | produces/s (wall) | CPU s | produces/s (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for name, kw in scenarios:
        inputs = build_epoch(n, **kw)
        policies = len(replay_epoch(inputs))
        events = int(np.mean([t.size for t in inputs.leo_times]))
        wall, cpu = best_seconds(lambda inputs=inputs: replay_epoch(inputs), args.repeat)
        print(f"| {name} | {policies} | {events:,} | {wall:.3f} | {n / wall:,.0f} | {cpu:.3f} | {n / cpu:,.0f} |")
    inputs = build_epoch(n, stalls=False, shuffle=False, lags=())
    wall, cpu = best_seconds(lambda: baseline(inputs), args.repeat)
    print(
        f"| floor: cummax + searchsorted + gather only | - | - | {wall:.3f} | {n / wall:,.0f} | {cpu:.3f} | "
        f"{n / cpu:,.0f} |"
    )


if __name__ == "__main__":
    main()
