"""Pipeline configuration: one YAML file per environment (conf/local.yaml, conf/cluster.yaml).

Validated strictly before Spark starts: an unknown key or a value of the wrong type is an error that
names the key, so a typo never silently falls back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DELTA_VERSION = "4.4.0"
# Kafka's replica.lag.time.max.ms default: 30 s since Kafka 2.5 (KIP-537), 10 s before.
KAFKA_DEFAULT_REPLICA_LAG_MS = 30_000
KAFKA_PRE_2_5_DEFAULT_REPLICA_LAG_MS = 10_000


class ConfigError(ValueError):
    """A configuration file is missing, unreadable or invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SparkSettings(_Strict):
    """How the SparkSession is built."""

    master: str | None = "local[*]"  # None: leave it to spark-submit --master
    # A Spark Connect server (`sc://host:port`) to run on instead of a driver in this process; SPARK_REMOTE in the
    # environment does the same (ackreplay/session.py, README "Spark Connect").
    remote: str | None = None
    app_name: str = "ackreplay"
    # Maven coordinates of Delta; None derives them from the installed pyspark/delta-spark pair.
    delta_package: str | None = None
    # More Maven coordinates resolved with Delta's (a cluster's `create_times_from_kafka` adds Spark's Kafka
    # source, `kafka_source_package`, when it is not listed).
    packages: list[str] = Field(default_factory=list)
    # Local jar files used instead of resolving packages (offline machines, `mvn dependency:copy`).
    jars: list[str] = Field(default_factory=list)
    conf: dict[str, str | int | float | bool] = Field(default_factory=dict)
    log_level: str = "WARN"


# Spark Kafka source options the send-times read sets itself (ackreplay/ingest/send_times.py).
KAFKA_OPTIONS_SET_BY_ACKREPLAY = frozenset(
    {"assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "startingTimestamp",
     "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "failOnDataLoss"}
)  # fmt: skip


class ClusterSettings(_Strict):
    """Facts about one Kafka cluster that its logs do not carry."""

    # Log4j prints `[%d]` in the broker JVM's default zone with no offset.
    log_timezone: str = "UTC"
    # Added to a broker's log times to correct its clock: t_true = t_logged - offset.
    broker_clock_offsets_ms: dict[int, float] = Field(default_factory=dict)
    # Broker-level min.insync.replicas, used when topics.txt shows no topic override.
    default_min_insync_replicas: int = 1
    # Whether the cluster keeps eligible leader replicas (KIP-966; the `eligible.leader.replicas.version`
    # feature): None reads it from the logs (ackreplay/replay/elr.py).
    eligible_leader_replicas: bool | None = None
    # The brokers' replica.lag.time.max.ms, for replay.lag_ms `own` when the collected server.log files do
    # not hold a start of each broker (its "KafkaConfig values:" dump); None reads it from the logs.
    replica_lag_time_max_ms: int | None = Field(default=None, ge=1)
    # Read each batch's send time (its first record's CreateTime) from the topic itself with Spark's Kafka
    # source: its options, at least `kafka.bootstrap.servers` (and e.g. `kafka.security.protocol`,
    # `kafka.sasl.jaas.config`). Empty: only kafka-dump-log output and client logs give send times.
    create_times_from_kafka: dict[str, str] = Field(default_factory=dict)
    # Whether the producers' records have keys, for KIP-637's what-if (gold `routing`): a keyed record cannot move
    # to another partition (its key picks the partition), a keyless one can. Request logs do not say; `auto` reads
    # it from the records where the send-time input shows them (kafka-dump-log --deep-iteration's keySize, or the
    # topic read with Spark's Kafka source): keyless where none of a topic's records seen has a key, keyed
    # otherwise and where no record was seen. Per topic in `topic_partitioning`, `partitioning` for the others.
    partitioning: Literal["auto", "keyed", "keyless"] = "auto"
    topic_partitioning: dict[str, Literal["auto", "keyed", "keyless"]] = Field(default_factory=dict)
    # The settings of this cluster's producers where they differ from `replay.producer` (its keys, e.g.
    # `{linger_ms: 0}` for clients older than Kafka 4.0, whose linger.ms default is 0): AppConfig.producer_of.
    producer: dict[str, int | float] = Field(default_factory=dict)

    @field_validator("create_times_from_kafka")
    @classmethod
    def _kafka_source_options(cls, value: dict[str, str]) -> dict[str, str]:
        if value and "kafka.bootstrap.servers" not in value:
            raise ValueError("needs kafka.bootstrap.servers")
        chosen = sorted(k for k in value if k in KAFKA_OPTIONS_SET_BY_ACKREPLAY)
        if chosen:
            raise ValueError(f"{', '.join(chosen)}: ackreplay reads the partitions and offsets the request logs name")
        return value

    @field_validator("log_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class IngestSettings(_Strict):
    """Reading raw files."""

    read_chunk_bytes: int = Field(default=16 * 1024 * 1024, ge=4096)
    # Longer lines are quarantined (their first max_line_bytes kept) instead of blowing up a task.
    max_line_bytes: int = Field(default=1024 * 1024, ge=1024)
    # A server.log / state-change.log line of a kind the replay reads (an ISR change, a leadership) in a
    # format the parser does not know: `error` stops the run naming it (a Kafka release whose lines
    # changed would otherwise lose ISR commits quietly), `warning` quarantines it and goes on.
    unknown_broker_log_lines: Literal["error", "warning"] = "error"
    # A file named like one the layout reads, where it is not read (a request log without its broker-<id>
    # folder): `error` stops the run naming it, `warning` (or --allow-skipped) lists it and goes on.
    misplaced_files: Literal["error", "warning"] = "error"
    # A request log none of whose lines could be read (every one quarantined: random bytes, another log,
    # a pre-2.8 format): `error` stops the run naming it, `warning` lists it and goes on. Its lines are in
    # the quarantine table either way.
    unreadable_files: Literal["error", "warning"] = "error"
    # A cluster with request logs and no topics.txt, neither in the input nor ingested before: its topic ids
    # cannot be resolved (their lines are quarantined) and its replicas and min ISR are unknown. `error`
    # stops the run before the request logs are read, `warning` goes on.
    missing_topics: Literal["error", "warning"] = "error"


class SelfCheckSettings(_Strict):
    """The replay's ground truth as a gate (ackreplay/replay/self_check.py; README "The replay checks itself")."""

    # false: the figures are still printed, but a cluster that fails them is replayed, aggregated and reported
    enabled: bool = True
    # recorded acks=all produces replayed as acked within 2 ms of the broker's own ack
    min_within_2ms: float = Field(default=0.97, ge=0.0, le=1.0)
    # |P999 of ack wait replayed - observed| / observed (differences of 2 ms or less always pass)
    max_p999_error: float = Field(default=0.10, ge=0.0)
    # fewer recorded acks=all produces than this: reported, not judged (a handful of misses is noise)
    min_produces: int = Field(default=200, ge=1)
    # The ISR re-simulated at the cluster's own replica.lag.time.max.ms (`acks=all@lag=<own>`) against the
    # recorded ISR (`acks=all`), on the same produces: acks within 2 ms of each other, P999 of ack wait.
    isr_min_within_2ms: float = Field(default=0.98, ge=0.0, le=1.0)
    isr_max_p999_error: float = Field(default=0.10, ge=0.0)
    # The brokers' NOT_ENOUGH_REPLICAS answers (recorded acks=all): at least this share rejected by the replayed
    # acks=all, on a cluster with min_rejections of them or more (fewer: reported, not judged)
    min_rejected: float = Field(default=0.99, ge=0.0, le=1.0)
    min_rejections: int = Field(default=200, ge=1)


class ProducerSettings(_Strict):
    """The producer side of the producer-visible replay (ackreplay/replay/connections.py)."""

    # The producers' linger.ms (Kafka's default: 5 since 4.0, 0 before): a request that waited in the socket
    # behind a slow response is taken to have arrived when its earliest batch had lingered this long.
    linger_ms: float = Field(default=5.0, ge=0.0)
    # A request that started at most this long after the previous response on its connection was sent
    # waited behind it (SocketServer reads the next request once the response is sent).
    blocked_gap_ms: float = Field(default=1.0, ge=0.0)
    # max.in.flight.requests.per.connection (Kafka's default 5): a request is sent once one of these slots
    # is free; batches that were waiting by then go into it (fewer, larger requests under a slower policy)
    max_in_flight: int = Field(default=5, ge=1)
    # batch.size (Kafka's default 16384): keyless records are placed again by the partitioner, which sticks to a
    # partition for this many bytes (ackreplay/replay/partitioner.py); it draws its next partition at random, so
    # the figures pool this many seeded draws
    batch_size: int = Field(default=16_384, ge=1)
    partitioner_draws: int = Field(default=5, ge=1)
    # A batch a policy rejects (NOT_ENOUGH_REPLICAS) is retried until appended or until delivery.timeout.ms after
    # it was created (ackreplay/replay/retries.py): retry.backoff.ms (Kafka's default 100), fixed for Java clients
    # before 3.7, else doubling up to retry.backoff.max.ms (default 1000, KIP-580); delivery.timeout.ms (120000).
    retry_backoff_ms: float = Field(default=100.0, ge=0.0)
    retry_backoff_max_ms: float = Field(default=1000.0, ge=0.0)
    delivery_timeout_ms: float = Field(default=120_000.0, gt=0.0)


# The lags re-simulated unless the conf says otherwise: each cluster's own, and Kafka's defaults.
DEFAULT_LAG_MS: tuple[int | Literal["own"], ...] = (
    "own",
    KAFKA_PRE_2_5_DEFAULT_REPLICA_LAG_MS,
    KAFKA_DEFAULT_REPLICA_LAG_MS,
)


class ReplaySettings(_Strict):
    """The counterfactual policies and how the replay is cut into tasks."""

    # KIP-250 quorum sizes Q (leader included) -> policies quorum=<Q>; KIP-250 allows 1 < Q < replicas,
    # so a topic whose replication factor is Q or less has no quorum=<Q> (its produces: unreplayable)
    quorum_sizes: list[int] = Field(default_factory=lambda: [2])
    # replica.lag.time.max.ms values to re-simulate the ISR for -> policies acks=all@lag=<ms>. `own`: each
    # cluster's own value, as its brokers logged it at start (silver broker_configs); the self-check then
    # checks the re-simulation there against the recorded ISR's acks (README "The replay checks itself").
    lag_ms: list[int | Literal["own"]] = Field(default_factory=lambda: list(DEFAULT_LAG_MS))
    # Kafka >= 3.7: the HW does not advance while the ISR is below min ISR (KIP-966 part 1); <= 3.6 it does, and
    # the waiting produce completes with NOT_ENOUGH_REPLICAS_AFTER_APPEND. auto: each cluster's release, as its
    # brokers logged it (ackreplay/replay/kafka_release.py)
    strict_min_isr: bool | Literal["auto"] = "auto"
    # One group (a task's unit of work) is one bucket of one leader broker's produces.
    bucket_seconds: int = Field(default=120, ge=1)
    # Who writes produce_replay's data files. arrow: the replay's Python workers, with pyarrow, and the
    # driver commits them with delta-rs (about ten times less CPU; a lakehouse on a local or mounted
    # filesystem only). spark: Spark's Delta writer (any storage Spark reaches, Unity Catalog included).
    # auto: arrow when the lakehouse is a local path, spark otherwise.
    writer: Literal["auto", "arrow", "spark"] = "auto"
    # The leader records a follower's LEO while handling its FETCH, after reading the partitions before
    # it: at t_dequeue + fraction * localTimeMs (0: at dequeue, 1: when local handling ends).
    fetch_update_fraction: float = Field(default=0.5, ge=0.0, le=1.0)
    # A cluster with produces and no follower evidence at all (no follower FETCH lines, no JMX LEO scrapes):
    # nothing says when a follower had a batch, so every acks=all produce would replay as a timeout.
    # `error` stops the replay naming the cluster, `warning` replays it anyway.
    missing_follower_evidence: Literal["error", "warning"] = "error"
    self_check: SelfCheckSettings = Field(default_factory=SelfCheckSettings)
    producer: ProducerSettings = Field(default_factory=ProducerSettings)

    @field_validator("lag_ms")
    @classmethod
    def _positive(cls, values: list[int | Literal["own"]]) -> list[int | Literal["own"]]:
        if any(isinstance(v, int) and v < 1 for v in values):
            raise ValueError("values must be >= 1 (or `own`)")
        return values

    @property
    def fixed_lags_ms(self) -> tuple[float, ...]:
        """The lags given as numbers (the same for every cluster)."""
        return tuple(float(v) for v in self.lag_ms if v != "own")

    @property
    def own_lag(self) -> bool:
        """Whether each cluster's own replica.lag.time.max.ms is replayed too."""
        return "own" in self.lag_ms

    @field_validator("quorum_sizes")
    @classmethod
    def _kip250_quorum(cls, values: list[int]) -> list[int]:
        if any(v < 2 for v in values):
            raise ValueError("KIP-250 quorum sizes are > 1 (a quorum of 1 is acks=1, replayed anyway)")
        return values


class GoldSettings(_Strict):
    """Aggregation of produce_replay into the gold tables."""

    window: Literal["minute", "hour", "day"] = "hour"


class DecisionTarget(_Strict):
    """What the operator needs from a policy (ackreplay/gold/decision.py): a producer P999 bound and upper bounds
    on the risk counts of `policy_summary`, any of them."""

    # bound -> (policy_summary column, what it counts)
    RISK_BOUNDS: ClassVar[dict[str, tuple[str, str]]] = {
        "max_lost_acks": ("loss_kafka_election", "lost acks"),
        "max_under_min_isr_acks": ("under_min_isr_acks", "acks below min ISR"),
        "max_rejections": ("not_enough_replicas", "NotEnoughReplicas rejections"),
    }

    p999_ms: float | None = Field(default=None, gt=0)
    max_lost_acks: int | None = Field(default=None, ge=0)
    max_under_min_isr_acks: int | None = Field(default=None, ge=0)
    max_rejections: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _something_set(self) -> DecisionTarget:
        if all(getattr(self, name) is None for name in ("p999_ms", *self.RISK_BOUNDS)):
            raise ValueError(f"a target sets at least one of p999_ms, {', '.join(self.RISK_BOUNDS)}")
        return self

    def describe(self) -> str:
        parts = [f"P999 <= {self.p999_ms:,.0f} ms"] if self.p999_ms is not None else []
        parts += [
            f"{label} <= {getattr(self, b):,}"
            for b, (_, label) in self.RISK_BOUNDS.items()
            if getattr(self, b) is not None
        ]
        return ", ".join(parts)


class ReportSettings(_Strict):
    """The report and the decision it states."""

    # None: the report shows each topic's frontier of policies without recommending one
    target: DecisionTarget | None = None


class QualitySettings(_Strict):
    """Data-quality checks between stages (ackreplay/quality/): which block the run, which only warn."""

    enabled: bool = True
    # Check name (`table.check`, listed in ackreplay/quality/catalog.py) -> blocking | warning | off;
    # checks not named keep their default.
    checks: dict[str, Literal["blocking", "warning", "off"]] = Field(default_factory=dict)
    # Offending rows shown (and kept in dq_results) for a failed check.
    sample_rows: int = Field(default=5, ge=1, le=100)

    @field_validator("checks")
    @classmethod
    def _known_checks(cls, checks: dict[str, str]) -> dict[str, str]:
        from ackreplay.quality.catalog import CHECKS

        unknown = sorted(set(checks) - set(CHECKS))
        if unknown:
            raise ValueError(f"unknown check(s) {', '.join(unknown)}; see ackreplay/quality/catalog.py")
        return checks


class PrivacySettings(_Strict):
    """Pseudonymising principals, client ids and transactional ids in silver and gold (transforms/privacy.py)."""

    hash_identities: bool = False
    # The salt is a secret: it is read from this environment variable, never from the YAML file.
    salt_env: str = "ACKREPLAY_PRIVACY_SALT"

    def salt(self) -> str:
        """The salt, or a ConfigError naming the variable when hashing is on and it is not set."""
        import os

        value = os.environ.get(self.salt_env, "")
        if self.hash_identities and not value:
            raise ConfigError(f"privacy.hash_identities is on but environment variable {self.salt_env} is not set")
        return value


class MetastoreSettings(_Strict):
    """Table names besides paths: every table is also registered as `<catalog>.<schema>.<table>`."""

    model_config = ConfigDict(populate_by_name=True)

    # None: the session's current catalog (spark_catalog locally, the workspace default on Databricks).
    catalog: str | None = None
    schema_name: str = Field(alias="schema", min_length=1)

    @field_validator("catalog", "schema_name")
    @classmethod
    def _one_identifier(cls, value: str | None) -> str | None:
        if value is not None and ("." in value or "`" in value or not value.strip()):
            raise ValueError(f"{value!r} must be one catalog or schema name, without dots or backticks")
        return value

    @property
    def prefix(self) -> str:
        """`catalog`.`schema` (or `schema`), quoted for SQL."""
        parts = [self.catalog, self.schema_name] if self.catalog else [self.schema_name]
        return ".".join(f"`{p}`" for p in parts)


class AppConfig(_Strict):
    """The whole configuration of one environment."""

    lakehouse: str = "lakehouse"
    spark: SparkSettings = Field(default_factory=SparkSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    gold: GoldSettings = Field(default_factory=GoldSettings)
    quality: QualitySettings = Field(default_factory=QualitySettings)
    report: ReportSettings = Field(default_factory=ReportSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    default_cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    clusters: dict[str, ClusterSettings] = Field(default_factory=dict)
    # None: tables are addressed by path only.
    metastore: MetastoreSettings | None = None

    def cluster(self, name: str) -> ClusterSettings:
        """Settings of one cluster, falling back to `default_cluster`."""
        return self.clusters.get(name, self.default_cluster)

    def producer_of(self, name: str | None) -> ProducerSettings:
        """The settings of one cluster's producers: `replay.producer` with the cluster's `producer` keys (None: a
        cluster the conf does not name, `default_cluster`'s)."""
        return self._with_producer_keys((self.default_cluster if name is None else self.cluster(name)).producer)

    def producer_values(self, setting: str) -> tuple[float, dict[str, float]]:
        """`replay.producer.<setting>` for a cluster the conf does not name, and each named cluster's (its own where
        its `producer` block sets it): the arguments of `transforms.common.PerCluster`."""
        return (
            getattr(self.producer_of(None), setting),
            {name: getattr(self.producer_of(name), setting) for name in self.clusters},
        )

    def _with_producer_keys(self, overrides: dict[str, int | float]) -> ProducerSettings:
        if not overrides:
            return self.replay.producer
        return ProducerSettings.model_validate({**self.replay.producer.model_dump(), **overrides})

    @model_validator(mode="after")
    def _known_producer_settings(self) -> AppConfig:
        # each cluster's producer keys validated as replay.producer's (an unknown key or a bad value names the key)
        named = {"default_cluster": self.default_cluster, **{f"clusters.{k}": v for k, v in self.clusters.items()}}
        for where, cluster in named.items():
            try:
                self._with_producer_keys(cluster.producer)
            except ValidationError as exc:
                problems = "; ".join(
                    f"'{where}.producer.{'.'.join(map(str, err['loc']))}': "
                    + ("unknown key" if err["type"] == "extra_forbidden" else err["msg"])
                    for err in exc.errors()
                )
                raise ValueError(problems) from None
        return self

    def log_clocks(self) -> tuple[dict[str, str], str, dict[str, float]]:
        """The arguments of `transforms.request_log.with_event_time` for every log line: each named cluster's
        zone, the default zone, and each "cluster/broker_id"'s clock offset in ms."""
        names = sorted(self.clusters)
        zones = {name: self.cluster(name).log_timezone for name in names}
        offsets = {
            f"{name}/{broker}": ms
            for name in names
            for broker, ms in self.cluster(name).broker_clock_offsets_ms.items()
        }
        return zones, self.default_cluster.log_timezone, offsets

    def session_settings(self) -> SparkSettings:
        """`spark`, with Spark's Kafka source among the packages when a cluster reads send times from its
        topics and no spark-sql-kafka coordinate is listed."""
        reads_kafka = any(c.create_times_from_kafka for c in (self.default_cluster, *self.clusters.values()))
        if not reads_kafka or any(":spark-sql-kafka-" in p for p in self.spark.packages):
            return self.spark
        return self.spark.model_copy(update={"packages": [*self.spark.packages, kafka_source_package()]})

    def configured_lags(self, clusters: list[str]) -> dict[str, int]:
        """cluster -> replica_lag_time_max_ms where the conf gives it (the cluster's or `default_cluster`'s)."""
        return {c: lag for c in clusters if (lag := self.cluster(c).replica_lag_time_max_ms) is not None}


def kafka_source_package() -> str:
    """Maven coordinates of Spark's Kafka source for the installed pyspark (Scala 2.13, Spark 4)."""
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"


def parse_config(raw: dict[str, Any] | None, source: str = "<dict>") -> AppConfig:
    """Validate a configuration mapping (as read from YAML, or built in a notebook)."""
    try:
        return AppConfig.model_validate(raw or {})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(part) for part in err["loc"]) or "<root>"
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown key '{key}'")
            elif not err["loc"]:  # a check across keys, which names them itself
                problems.append(err["msg"].removeprefix("Value error, "))
            else:
                problems.append(f"key '{key}': {err['msg']} (got {err.get('input')!r})")
        raise ConfigError(f"invalid configuration {source}: " + "; ".join(problems)) from None


def load_config(path: str | Path | None) -> AppConfig:
    """Load and validate a YAML configuration file; None gives the built-in local defaults."""
    if path is None:
        return AppConfig()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {path} is not valid YAML: {exc}") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"configuration file {path} must hold a mapping at the top level")
    return parse_config(raw, source=str(path))
