"""The decision: which acknowledgement policy to run, per topic, from the policy summary.

Per (cluster, topic), every replayed policy is a point of producer P999 (per record, send() to ack) and
three risks, each an acked-produce count from `policy_summary`: acks a leader failure at the ack would
lose under Kafka's election (`loss_kafka_election`, the most of the least–most range), acks taken while
the ISR was below min.insync.replicas (`under_min_isr_acks`), and produces rejected with
NotEnoughReplicas (`not_enough_replicas`). Lower is better on all four. The frontier is the policies no
other policy beats on one without being worse on another (Pareto); a policy whose P999 rests on fewer
than 1,000 records is not judged on latency and stays off it. A policy under which no produce of the
topic was acknowledged is no candidate at all: KIP-250's quorum=<Q> is no setting of a topic whose
replication factor is Q or less (every produce unreplayable), and zero acks would otherwise beat every
policy on every risk.

With a target in the conf (`report.target`: `p999_ms`, `max_lost_acks`, `max_under_min_isr_acks`,
`max_rejections`, any of them), a topic's recommendation is the policy meeting every bound with the
lowest P999 (then the lowest risks, then reading order); when none meets it, the closest is named: the
least summed excess over the bounds, each as a fraction of its bound (a count bound of 0: the count
itself). A cluster whose replay failed its self-check gets no decision. Pure Python on the summary's
rows: the report and the console show the same decision.

A P999 is the producer's only where the produces had send times (`send_time_known`: the records'
CreateTime or a client log); without them a batch's latency starts when the broker read its request and
misses the wait in the producer behind slower responses (README "What the producer sees"). A topic where
fewer than half the acked produces had one carries that caution with its decision. So does a policy under
which rejected batches stayed undelivered in the replay (`undelivered`: their retries were not appended
within the delivery timeout, the leader's epoch or the data; ackreplay/replay/retries.py): its P999 leaves
them out, a lower bound (README "Rejected batches and what waited behind them"). And so does a topic of keyless
records (`partitioning`) one of whose leaders did not run for a while (`leader_silence_ms`: a paused or stopped
broker): a producer's partitioner places keyless records by its queues (KIP-794: after `batch.size` bytes
`BuiltInPartitioner.nextPartition` draws the next partition with weights from `updatePartitionLoadStats`, the
largest queue of batches plus one minus the partition's own, as `RecordAccumulator.partitionReady` counts them),
which drain differently under each policy through such a pause, while the replay keeps every batch on its recorded
partition (README "Against Kafka's own client": a P99 predicted at 6.9 s where the real run measured 77 ms). The
records placed again by the partitioner (`placed_*`, ackreplay/replay/partitioner.py) give what such a producer
would see, and the caution points at them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ackreplay.config import DecisionTarget

# (policy_summary column, what it counts, the DecisionTarget bound on it)
RISKS = tuple((column, label, bound) for bound, (column, label) in DecisionTarget.RISK_BOUNDS.items())


@dataclass(frozen=True)
class TopicDecision:
    """What the summary supports for one topic: the policies on the frontier and, for a target, the one to use."""

    cluster: str
    topic: str
    frontier: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)  # P999 from too few records
    meeting: list[str] = field(default_factory=list)  # policies meeting the target, best first
    closest: str | None = None  # when none meets it
    misses: dict[str, str] = field(default_factory=dict)  # policy -> which bounds it misses, as text
    refused: str | None = None  # why no decision (the self-check failed)
    send_time_share: float | None = None  # acked produces with a send time, of all acked (None: no acks)
    no_acks: list[str] = field(default_factory=list)  # no produce acked: not a candidate
    rejected: dict[str, int] = field(default_factory=dict)  # policy -> rejected batches left undelivered (no latency)
    # keyless records, and the longest time a leader of the topic did not run (ms): the partitioner's caution
    keyless_leader_silence_ms: float | None = None

    @property
    def label(self) -> str:
        return f"{self.cluster} / {self.topic}"

    @property
    def recommended(self) -> str | None:
        return self.meeting[0] if self.meeting else None


def decide(rows: Sequence[dict], target: DecisionTarget | None) -> list[TopicDecision]:
    """One decision per (cluster, topic) of `rows` (policy_summary rows as dicts, in reading order)."""
    topics: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        topics.setdefault((r["cluster"], r["topic"]), []).append(r)
    return [_decide_topic(cluster, topic, policies, target) for (cluster, topic), policies in topics.items()]


def _decide_topic(cluster: str, topic: str, rows: list[dict], target: DecisionTarget | None) -> TopicDecision:
    verdict = rows[0].get("self_check") or ""
    if verdict.startswith("FAILED"):
        return TopicDecision(cluster, topic, refused=f"the replay's self-check failed ({verdict})")
    share = send_time_share(rows)
    silence = keyless_leader_silence(rows)
    no_acks = [r["policy"] for r in rows if r.get("n") == 0]
    rows = [r for r in rows if r["policy"] not in no_acks]
    rejected = {r["policy"]: int(r["undelivered"]) for r in rows if r.get("undelivered")}
    judged = [r for r in rows if r.get("p999_ms") is not None]
    frontier = [r["policy"] for r in judged if not any(_dominates(o, r) for o in judged if o is not r)]
    unjudged = [r["policy"] for r in rows if r.get("p999_ms") is None]
    if target is None:
        return TopicDecision(
            cluster, topic, frontier, unjudged, no_acks=no_acks, send_time_share=share, rejected=rejected,
            keyless_leader_silence_ms=silence,
        )  # fmt: skip
    misses = {r["policy"]: _misses(r, target) for r in rows}
    meeting = sorted(
        (r for r in rows if not misses[r["policy"]]),
        key=lambda r: (r.get("p999_ms") is None, r.get("p999_ms") or 0.0, *(r[k] for k, _, _ in RISKS)),
    )
    closest = None
    if not meeting and rows:
        closest = min(rows, key=lambda r: (_excess(r, target), r.get("p999_ms") is None, r.get("p999_ms") or 0.0))[
            "policy"
        ]
    return TopicDecision(
        cluster, topic, frontier, unjudged, [r["policy"] for r in meeting], closest,
        {p: "; ".join(m) for p, m in misses.items() if m}, no_acks=no_acks, send_time_share=share, rejected=rejected,
        keyless_leader_silence_ms=silence,
    )  # fmt: skip


def send_time_share(rows: Sequence[dict]) -> float | None:
    """The share of a topic's acked produces that had a send time (the least over its policies' rows)."""
    shares = [r["send_time_known"] / r["n"] for r in rows if r.get("n") and r.get("send_time_known") is not None]
    return min(shares) if shares else None


def broker_view_caution(share: float | None) -> str | None:
    """What a decision on `share` send-time coverage must say, None when the P999 is the producer's."""
    if share is None or share >= 0.5:
        return None
    return (
        f"only {share:.1%} of the acked produces had a send time, so P999 is mostly the broker's view and "
        'producers saw more (give the records\' CreateTime: README "What the producer sees")'
    )


def keyless_leader_silence(rows: Sequence[dict]) -> float | None:
    """The longest time a leader of the topic did not run (policy_summary `leader_silence_ms`), where the topic's
    records are keyless (`partitioning`); None otherwise."""
    if not any(r.get("partitioning") == "keyless" for r in rows):
        return None
    silences = [r["leader_silence_ms"] for r in rows if r.get("leader_silence_ms") is not None]
    return max(silences) if silences else None


def partition_placement_caution(silence_ms: float | None) -> str | None:
    """What a decision on keyless records through a leader that did not run for `silence_ms` must say."""
    if silence_ms is None:
        return None
    return (
        f"keyless records and a leader that did not run for {silence_ms / 1000:,.1f} s: Kafka's partitioner (KIP-794)"
        " sends keyless records away from partitions whose queues back up, which differs with the policy, and the"
        " replay keeps each batch on its recorded partition, so another policy's P99 there can be far off; the"
        " records placed again by the partitioner (shown with the topic's summary; policy_summary placed_*) are the"
        ' better guide (README "Keyless records")'
    )


def _values(r: dict) -> tuple[float, ...]:
    return (r["p999_ms"], *(float(r[k]) for k, _, _ in RISKS))


def _dominates(a: dict, b: dict) -> bool:
    va, vb = _values(a), _values(b)
    return all(x <= y for x, y in zip(va, vb, strict=True)) and va != vb


def _misses(r: dict, target: DecisionTarget) -> list[str]:
    out = []
    if target.p999_ms is not None:
        p999 = r.get("p999_ms")
        if p999 is None:
            out.append("P999 not measured (fewer than 1,000 records)")
        elif p999 > target.p999_ms:
            out.append(f"P999 {p999:,.1f} ms > {target.p999_ms:,.0f} ms")
    for key, label, bound_key in RISKS:
        bound = getattr(target, bound_key)
        if bound is not None and r[key] > bound:
            out.append(f"{r[key]:,} {label} > {bound:,}")
    return out


def _excess(r: dict, target: DecisionTarget) -> float:
    """How far `r` is from the target: each missed bound's excess as a fraction of it (a bound of 0: the
    count); a P999 not measured counts as missing its bound by 100%."""
    total = 0.0
    if target.p999_ms is not None:
        p999 = r.get("p999_ms")
        total += 1.0 if p999 is None else max(0.0, p999 / target.p999_ms - 1)
    for key, _, bound_key in RISKS:
        bound = getattr(target, bound_key)
        if bound is not None and r[key] > bound:
            total += (r[key] - bound) / bound if bound else float(r[key])
    return total


def decision_lines(decisions: Sequence[TopicDecision], target: DecisionTarget | None) -> list[str]:
    """The decision as plain sentences (console and report): the overall line first, then one per topic."""
    if not decisions:
        return []
    judged = [d for d in decisions if d.refused is None]
    out: list[str] = []
    if target is None:
        out.append("decision: no target set (report.target in the conf, e.g. {p999_ms: 200, max_lost_acks: 0});"
                   " the policies no other beats on P999 and risk, per topic:")  # fmt: skip
    else:
        counts: dict[str, int] = {}
        for d in judged:
            for policy in d.meeting:
                counts[policy] = counts.get(policy, 0) + 1
        head = f"decision for the target {target.describe()}: "
        if counts:
            best = max(counts.values())
            # among the policies meeting it on the most topics, the one recommended most often
            leaders = [p for p, n in counts.items() if n == best]
            firsts = [d.recommended for d in judged]
            policy = max(leaders, key=lambda p: (firsts.count(p), -leaders.index(p)))
            head += f"{policy} meets it on {best} of {len(judged)} topic{'s' if len(judged) != 1 else ''}"
            nothing = [d for d in judged if not d.meeting]
            if nothing:
                head += "; nothing meets it on " + ", ".join(d.label for d in nothing)
        else:
            head += f"no policy meets it on any of the {len(judged)} topic{'s' if len(judged) != 1 else ''}"
        out.append(head)
    for d in decisions:
        if d.refused:
            out.append(f"  {d.label}: no decision: {d.refused}")
            continue
        line = f"  {d.label}: frontier {', '.join(d.frontier) or '-'}"
        if d.unjudged:
            line += f" (P999 from too few records: {', '.join(d.unjudged)})"
        if d.no_acks:
            line += f" (no produce acked, not a candidate: {', '.join(d.no_acks)})"
        if target is not None:
            if d.meeting:
                line += f"; meets the target: {', '.join(d.meeting)}; recommended: {d.recommended}"
            elif d.closest is not None:
                line += f"; nothing meets the target; closest: {d.closest} ({d.misses[d.closest]})"
            else:
                line += "; nothing meets the target"
        caution = broker_view_caution(d.send_time_share)
        if caution:
            line += f"; caution: {caution}"
        placement = partition_placement_caution(d.keyless_leader_silence_ms)
        if placement:
            line += f"; caution: {placement}"
        if d.rejected:
            under = ", ".join(f"{policy} ({n:,})" for policy, n in d.rejected.items())
            line += f"; caution: P999 without the rejected batches left undelivered under {under}: a lower bound there"
        out.append(line)
    return out
