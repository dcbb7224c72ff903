"""The producers' `linger.ms` as replayed, checked against what their requests show.

A request that waited behind the previous response on its connection arrived at the broker unseen; the replay
takes it as sent once its first batch had lingered `linger.ms` (ackreplay/replay/connections.py). The requests
that did not wait show that delay themselves: from their first record's send time to their start at the broker
(`transforms.replay_inputs.send_delays`). Kafka's producer sends a batch once it has lingered `linger.ms` or is
full (`RecordAccumulator.ready`), and the sender thread and the network add their time, so the median delay of a
producer's requests is about its `linger.ms`, or less when its batches fill first. Measured on the committed
traces (2026-12-02): 4.9-5.3 ms for producers with `linger.ms` 5 (the lab's and ProducerPerformance on 4.3.1),
0.7 ms for ProducerPerformance with `linger.ms` 0 (the perf-fast pair, 1,500 records/s on the lab's shared cores).

A cluster whose producers' median is off the setting by more than `TOLERANCE_MS` or `TOLERANCE_SHARE` of it gets a
warning naming the client and the conf key: the what-ifs of its requests that waited rest on the setting (under
the recorded policy the requests keep their recorded starts, and nothing depends on it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# a producer's requests measured before its median is judged
MIN_REQUESTS = 100
# how far the median may be off linger.ms: the sender and the network add up to about a millisecond (0.7 ms with
# linger.ms 0 on the lab's loopback), and batches that fill before they have lingered leave earlier
TOLERANCE_MS = 1.0
TOLERANCE_SHARE = 0.25


@dataclass(frozen=True)
class SendDelay:
    """One producer client's requests that did not wait: how long after their first record they reached the
    broker, next to the `linger.ms` its cluster is replayed with."""

    cluster: str
    client_id: str | None
    requests: int
    p10_ms: float
    p50_ms: float
    p90_ms: float
    linger_ms: float

    @property
    def judged(self) -> bool:
        return self.requests >= MIN_REQUESTS

    @property
    def agrees(self) -> bool:
        """Whether the median is about `linger_ms` (not judged: taken as agreeing)."""
        return not self.judged or abs(self.p50_ms - self.linger_ms) <= max(
            TOLERANCE_MS, TOLERANCE_SHARE * self.linger_ms
        )

    def describe(self) -> str:
        client = self.client_id if self.client_id is not None else "(no client id)"
        return (
            f"{client} median {self.p50_ms:.1f} ms (P10-P90 {self.p10_ms:.1f}-{self.p90_ms:.1f} ms, {self.requests:,}"
            " requests" + ("" if self.judged else ", too few to judge") + ")"
        )


def measured(rows: Iterable[Mapping[str, Any]], linger_ms_of: Callable[[str], float]) -> list[SendDelay]:
    """`send_delays` rows as SendDelays, each with its cluster's replayed linger.ms, by cluster and client."""
    delays = [
        SendDelay(
            cluster=r["cluster"],
            client_id=r["client_id"],
            requests=int(r["requests"]),
            p10_ms=float(r["p10_ms"]),
            p50_ms=float(r["p50_ms"]),
            p90_ms=float(r["p90_ms"]),
            linger_ms=float(linger_ms_of(r["cluster"])),
        )
        for r in rows
    ]
    return sorted(delays, key=lambda d: (d.cluster, d.client_id or ""))


def cluster_columns(delays: list[SendDelay], cluster: str, linger_ms: float) -> dict[str, Any]:
    """`cluster`'s send-delay columns of replay_checks (schemas/replay.py): the linger.ms it was replayed with and,
    of its producers measured on enough requests, the one whose median is furthest off it (None: none was)."""
    judged = [d for d in delays if d.cluster == cluster and d.judged]
    worst = max(judged, key=lambda d: abs(d.p50_ms - d.linger_ms), default=None)
    return {
        "linger_ms": float(linger_ms),
        "send_delay_client": None if worst is None else worst.client_id,
        "send_delay_p50_ms": None if worst is None else worst.p50_ms,
        "send_delay_requests": None if worst is None else worst.requests,
        "send_delay_agrees": None if worst is None else worst.agrees,
    }


def summary_lines(delays: list[SendDelay], own_settings: Iterable[str], detail: bool = True) -> list[str]:
    """A warning per cluster whose producers' median is off its linger.ms; `detail`: every cluster's figures.
    `own_settings`: the clusters with a `producer` block of their own (the key to set is theirs)."""
    own = set(own_settings)
    out: list[str] = []
    clusters = sorted({d.cluster for d in delays})
    if detail and delays:
        out.append(
            "  producers' requests that did not wait reached the broker this long after their first record (the replay"
            " takes linger.ms for it where a request waited):"
        )
        for cluster in clusters:
            mine = [d for d in delays if d.cluster == cluster]
            out.append(f"    {cluster} (linger.ms {mine[0].linger_ms:g}): " + "; ".join(d.describe() for d in mine))
    for cluster in clusters:
        off = [d for d in delays if d.cluster == cluster and not d.agrees]
        if not off:
            continue
        key = (
            f"clusters.{cluster}.producer.linger_ms"
            if cluster in own
            else f"replay.producer.linger_ms or clusters.{cluster}.producer.linger_ms"
        )
        out.append(
            f"  warning: {cluster}: requests that did not wait reached the broker this long after their first record:"
            f" {'; '.join(d.describe() for d in off)}; linger.ms is replayed as {off[0].linger_ms:g}, and the"
            f" what-ifs take a waiting request's arrival from it. Set {key} to the"
            " producers' linger.ms (a median well below it: their batches filled first; above it: a slow sender or"
            " network)"
        )
    return out
