"""Synthetic cluster traces in the real file formats, deterministic by seed (docs/synthetic.md).

python -m ackreplay.synth --out /tmp/synth --seed 1 --produces 1000000
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ackreplay.synth.model import Trace, simulate
from ackreplay.synth.params import Lognormal, SynthParams
from ackreplay.synth.render import write_broker_logs, write_metrics, write_request_logs, write_topics

__all__ = ["GenerateReport", "Lognormal", "SynthParams", "Trace", "generate", "simulate"]


@dataclass
class GenerateReport:
    """What `ackreplay.synth` generated: the simulated trace, the request-log lines and bytes written, and the
    time simulating and writing took."""

    trace: Trace
    request_log_lines: int
    bytes_written: int
    simulate_s: float
    write_s: float

    def summary_lines(self) -> list[str]:
        t = self.trace
        p = t.params
        acked_all = int(((t.p_acks == -1) & (t.p_error == 0)).sum())
        lines = [
            f"synthetic cluster {p.cluster} (seed {p.seed}): {p.brokers} brokers, {p.topics} topics x {p.partitions} "
            f"partitions, RF {p.replication_factor}, min ISR {p.min_insync_replicas}",
            f"  {p.produces:,} produces over {(t.p_t_local_done[-1] - t.p_t_local_done[0]) / 1e6:,.1f} s "
            f"({acked_all:,} acks=all acknowledged, {int((t.p_error != 0).sum()):,} failed), "
            f"{t.f_session.size:,} follower fetches in {len(t.sessions)} sessions",
            f"  {len(t.long_stalls)} long stall(s), {sum(c.kind == 'shrink' for c in t.isr_changes)} ISR shrinks, "
            f"{sum(len(v) for v in t.pauses.values())} fetcher pauses, leader change: "
            + (f"partition {t.leader_change[0]}" if t.leader_change else "none"),
            f"  {self.request_log_lines:,} request-log lines, {self.bytes_written / 1e6:,.0f} MB; "
            f"simulated in {self.simulate_s:.1f} s, written in {self.write_s:.1f} s",
        ]
        return lines


def generate(params: SynthParams, out: str | Path) -> GenerateReport:
    """Simulate a trace and write it under `out/<cluster>/`."""
    out = Path(out)
    started = time.monotonic()
    trace = simulate(params)
    simulated = time.monotonic()
    lines = sum(write_request_logs(trace, out).values())
    write_broker_logs(trace, out)
    write_topics(trace, out)
    if params.metrics_interval_ms > 0:
        write_metrics(trace, out)
    size = sum(f.stat().st_size for f in (out / params.cluster).rglob("*") if f.is_file())
    return GenerateReport(trace, lines, size, simulated - started, time.monotonic() - simulated)
