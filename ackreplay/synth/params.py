"""Parameters of a synthetic cluster trace; defaults fitted to the lab traces (docs/synthetic.md)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ackreplay.kafka_lines import DEFAULT_REQUEST_TIMEOUT_MS


@dataclass(frozen=True)
class Lognormal:
    """A lognormal by its median and log-space standard deviation (how `ackreplay.synth.fit` reports them)."""

    median: float
    sigma: float


@dataclass(frozen=True)
class SynthParams:
    """Everything that shapes a generated trace; the same params and seed give byte-identical files.

    Times are milliseconds unless named otherwise. Distributions marked "lab" were fitted with
    `python -m ackreplay.synth.fit` on the first lab recordings (P50 and P90 of their request logs;
    those were recorded without a warm-up, so their local times are a cold JVM's, on the slow side).
    """

    produces: int = 200_000
    seed: int = 1
    cluster: str = "synth"
    brokers: int = 3
    topics: int = 2
    partitions: int = 6  # per topic
    replication_factor: int = 3
    min_insync_replicas: int = 2
    produce_rate: float = 5000.0  # produce batches per second over the whole cluster (Poisson arrivals)
    hot_partition_share: float = 0.0  # share of all produces sent to partition 0 of the first topic
    acks_all_share: float = 0.77  # lab: 77% of the produce requests used acks=all
    timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    records_per_batch: Lognormal = Lognormal(1.0, 0.8)  # lab: P50 1, P90 2, P99 8 records
    batch_bytes: Lognormal = Lognormal(629.0, 0.42)  # lab
    produce_queue: Lognormal = Lognormal(0.070, 1.85)  # lab requestQueueTimeMs
    produce_local: Lognormal = Lognormal(0.525, 0.80)  # lab localTimeMs
    response_queue: Lognormal = Lognormal(0.084, 1.80)  # lab responseQueueTimeMs
    send: Lognormal = Lognormal(0.032, 1.29)  # lab sendTimeMs
    fetch_queue: Lognormal = Lognormal(0.049, 1.93)  # lab follower FETCH requestQueueTimeMs
    fetch_local: Lognormal = Lognormal(0.196, 1.07)  # lab follower FETCH localTimeMs
    fetch_round_trip: Lognormal = Lognormal(0.889, 1.51)  # lab: leader's response sent -> next request in
    fetch_max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    slow_broker: int | None = -1  # broker whose fetch round trips are `slow_factor` times longer; -1: the last
    slow_factor: float = 3.0
    gc_pauses_per_s: float = 0.05  # per broker: its fetcher sends nothing during a pause
    gc_pause: Lognormal = Lognormal(80.0, 0.6)
    long_stalls: int = 1  # follower stalls longer than replica.lag.time.max.ms: ISR shrink, then expand
    long_stall_lag_multiple: tuple[float, float] = (1.5, 2.5)
    replica_lag_time_max_ms: int = 3_000  # as in the lab traces (Kafka default 30000)
    isr_commit_delay: Lognormal = Lognormal(30.0, 0.8)  # AlterPartition round trip: proposal -> "ISR updated"
    leader_changes: int = 1  # 0 or 1: one partition moves to its next in-sync replica late in the trace
    consumer_fetches_per_produce: float = 0.1  # noise lines the ingest counts as unused
    metadata_per_produce: float = 0.005
    metrics_interval_ms: int = 0  # > 0: write JMX-exporter scrapes every that many ms
    start: str = "2026-11-20T00:00:00"  # UTC; log lines carry this zone-less

    def __post_init__(self) -> None:
        problems = []
        if self.produces < 1:
            problems.append("produces must be >= 1")
        if self.brokers < self.replication_factor:
            problems.append(
                f"replication_factor {self.replication_factor} needs at least as many brokers ({self.brokers})"
            )
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            problems.append("min_insync_replicas must be within 1..replication_factor")
        if self.replication_factor < 2:
            problems.append("replication_factor must be >= 2 (a follower is needed to replay anything)")
        if self.long_stalls and self.replication_factor - 1 < self.min_insync_replicas:
            problems.append(
                "long stalls shrink the ISR by one: they need replication_factor - 1 >= min_insync_replicas"
            )
        if self.leader_changes not in (0, 1):
            problems.append("leader_changes must be 0 or 1")
        if not 0.0 <= self.hot_partition_share < 1.0:
            problems.append("hot_partition_share must be within [0, 1)")
        if not 0.0 <= self.acks_all_share <= 1.0:
            problems.append("acks_all_share must be within [0, 1]")
        if self.produce_rate <= 0:
            problems.append("produce_rate must be > 0")
        if self.gc_pause.median * 4 >= self.replica_lag_time_max_ms:
            problems.append("GC pauses must stay well below replica_lag_time_max_ms")
        if problems:
            raise ValueError("invalid synthetic trace parameters: " + "; ".join(problems))

    @property
    def partition_count(self) -> int:
        return self.topics * self.partitions

    @property
    def duration_ms(self) -> float:
        return self.produces / self.produce_rate * 1000.0

    @property
    def slow_broker_id(self) -> int | None:
        if self.slow_broker is None:
            return None
        return self.brokers if self.slow_broker == -1 else self.slow_broker

    @classmethod
    def scalar_fields(cls) -> list[str]:
        """Fields settable from the command line (numbers and strings)."""
        return [f.name for f in fields(cls) if f.type in ("int", "float", "str", "int | None")]
