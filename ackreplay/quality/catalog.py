"""The data-quality checks, as data: per table, named checks made of Great Expectations 1.x expectations.

A check is `<table>.<check>`; each holds one or more GX expectations (class name + arguments, built
at run time so importing this module stays cheap: config.py validates check names against it before
Spark starts). `severity` is the default: `blocking` fails the run before anything downstream is
written, `warning` is recorded and printed; `quality.checks` in the conf overrides it per check.

Some checks read columns that are not in the table: `ackreplay/quality/frames.py` adds them (a
lookup from `partitions`, or an explicit derived value) so each table is still checked in one pass.
Schema checks (`<table>.schema`) are generated from the table contracts in schemas/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ackreplay.schemas.vocabulary import OUTCOMES

BLOCKING, WARNING, OFF = "blocking", "warning", "off"

# Tables checked after each stage.
STAGE_TABLES: dict[str, tuple[str, ...]] = {
    "ingest": (
        "request_log_lines",
        "quarantine",
        "produce_requests",
        "follower_fetches",
        "partitions",
        "isr_changes",
        "leader_epochs",
        "follower_starts",
        "follower_leo_records",
        "broker_registrations",
        "metadata_deltas",
        "follower_leo_samples",
        "batch_send_times",
    ),
    "replay": ("produce_replay",),
    "gold": ("latency_percentiles", "risk_exposure", "availability", "routing", "policy_summary"),
}

# Columns that identify a row: shown with each offending row of a failed check.
ROW_IDS: dict[str, tuple[str, ...]] = {
    "request_log_lines": ("cluster", "broker_id", "source_file", "line_number"),
    "quarantine": ("cluster", "stage", "source_file", "line_number"),
    "produce_requests": ("cluster", "source_file", "line_number", "topic", "partition"),
    "follower_fetches": ("cluster", "source_file", "line_number", "topic", "partition"),
    "partitions": ("cluster", "topic", "partition"),
    "isr_changes": ("cluster", "source_file", "line_number", "topic", "partition"),
    "leader_epochs": ("cluster", "source_file", "line_number", "topic", "partition"),
    "follower_starts": ("cluster", "source_file", "line_number", "topic", "partition"),
    "follower_leo_records": ("cluster", "source_file", "line_number", "topic", "partition"),
    "broker_registrations": ("cluster", "source_file", "line_number", "broker_id"),
    "metadata_deltas": ("cluster", "source_file", "line_number"),
    "follower_leo_samples": ("cluster", "source_file", "line_number"),
    "batch_send_times": ("cluster", "source_file", "line_number"),
    "produce_replay": ("cluster", "topic", "partition", "leader_epoch", "base_offset", "policy"),
    "latency_percentiles": ("cluster", "topic", "policy", "window", "window_start"),
    "risk_exposure": ("cluster", "topic", "policy", "window", "window_start"),
    "availability": ("cluster", "topic", "partition", "policy", "window", "window_start"),
    "routing": ("cluster", "topic", "policy", "window", "window_start"),
    "policy_summary": ("cluster", "topic", "policy"),
}


@dataclass(frozen=True)
class Check:
    """A named check: GX expectations (class name, arguments) that must all pass."""

    name: str  # <table>.<check>
    description: str
    expectations: tuple[tuple[str, dict], ...]
    severity: str = BLOCKING
    schema: bool = False  # runs on the table as stored, not on the frame with lookup columns

    @property
    def table(self) -> str:
        return self.name.split(".", 1)[0]


def _unique(*columns: str, condition: str | None = None) -> tuple[str, dict]:
    kwargs: dict = {"column_list": list(columns)}
    if condition:
        kwargs |= {"row_condition": condition, "condition_parser": "spark"}
    return ("ExpectCompoundColumnsToBeUnique", kwargs)


def _not_null(column: str, condition: str | None = None) -> tuple[str, dict]:
    kwargs: dict = {"column": column}
    if condition:
        kwargs |= {"row_condition": condition, "condition_parser": "spark"}
    return ("ExpectColumnValuesToNotBeNull", kwargs)


def _null(column: str, condition: str) -> tuple[str, dict]:
    return ("ExpectColumnValuesToBeNull", {"column": column, "row_condition": condition, "condition_parser": "spark"})


def _in_set(column: str, values: list) -> tuple[str, dict]:
    return ("ExpectColumnValuesToBeInSet", {"column": column, "value_set": values})


def _between(column: str, low=None, high=None, condition: str | None = None) -> tuple[str, dict]:
    kwargs: dict = {"column": column, "min_value": low, "max_value": high}
    if condition:
        kwargs |= {"row_condition": condition, "condition_parser": "spark"}
    return ("ExpectColumnValuesToBeBetween", kwargs)


MARGIN = "_minus_"


def margin_column(a: str, b: str) -> str:
    """The column a pair check reads: `a - b` (timestamps in microseconds), added by
    `frames.with_margins`; null where either is null."""
    return f"{a}{MARGIN}{b}"


def margin_sources(column: str) -> tuple[str, ...]:
    """(a, b) of a margin column `margin_column(a, b)`; () for any other column."""
    return tuple(column.split(MARGIN)) if MARGIN in column else ()


def _ge(a: str, b: str, condition: str | None = None) -> tuple[str, dict]:
    """a >= b on every row where both are set. A single-column check on their margin, not GX's column-pair
    expectation: GX runs each pair expectation as ~4 Spark jobs of its own, while the single-column checks
    of a table share one."""
    kwargs: dict = {"column": margin_column(a, b), "min_value": 0}
    if condition:
        kwargs |= {"row_condition": condition, "condition_parser": "spark"}
    return ("ExpectColumnValuesToBeBetween", kwargs)


def _equal(a: str, b: str, condition: str | None = None) -> tuple[str, dict]:
    """a == b on every row where both are set (as `_ge`, on their margin)."""
    kwargs: dict = {"column": margin_column(a, b), "min_value": 0, "max_value": 0}
    if condition:
        kwargs |= {"row_condition": condition, "condition_parser": "spark"}
    return ("ExpectColumnValuesToBeBetween", kwargs)


APPENDED = "acks != 0 AND error_code = 0"
ACKED = "outcome = 'acked'"


def _checks() -> list[Check]:
    c = Check
    return [
        # bronze
        c(
            "request_log_lines.unique_line",
            "one row per line of a request-log file",
            (_unique("cluster", "broker_id", "source_file", "line_number"),),
        ),
        c(
            "request_log_lines.status",
            "every line has a known status, and a reason unless parsed",
            (_in_set("status", ["parsed", "quarantined", "unused"]), _not_null("detail", "status != 'parsed'")),
        ),
        c("request_log_lines.line_number", "line numbers start at 1", (_between("line_number", 1),)),
        c(
            "quarantine.unique_line",
            "a line is quarantined once per stage",
            (_unique("cluster", "stage", "source_file", "line_number"),),
        ),
        # silver: produce_requests
        c(
            "produce_requests.unique_line_partition",
            "one row per (PRODUCE line, partition)",
            (_unique("cluster", "source_file", "line_number", "topic", "partition"),),
        ),
        c(
            "produce_requests.unique_batch",
            "an appended batch (cluster, topic, partition, base_offset) is logged once (offsets are reused only"
            " after a truncation, which the lab traces do not have)",
            (_unique("cluster", "topic", "partition", "base_offset", condition=APPENDED),),
            WARNING,
        ),
        c(
            "produce_requests.times_ordered",
            "t_start <= t_dequeue <= t_local_done <= t_ack_observed <= t_log",
            (
                _ge("t_dequeue", "t_start"),
                _ge("t_local_done", "t_dequeue"),
                _ge("t_ack_observed", "t_local_done"),
                _ge("t_log", "t_local_done"),
            ),
        ),
        c(
            "produce_requests.durations",
            "timing fields are >= 0",
            tuple(
                _between(x, 0)
                for x in (
                    "total_time_ms",
                    "request_queue_time_ms",
                    "local_time_ms",
                    "remote_time_ms",
                    "response_queue_time_ms",
                    "send_time_ms",
                )
            ),
        ),
        c(
            "produce_requests.offsets",
            "an appended batch has a base offset >= 0 and >= the log start offset",
            (
                _between("base_offset", 0, condition=APPENDED),
                _not_null("base_offset", APPENDED),
                _ge("base_offset", "log_start_offset", APPENDED),
            ),
        ),
        c(
            "produce_requests.values",
            "acks in {-1, 0, 1}; sizes and timeouts >= 0; partitions >= 0",
            (
                _in_set("acks", [-1, 0, 1]),
                _between("records_size_bytes", 0),
                _between("timeout_ms", 0),
                _between("partition", 0),
            ),
        ),
        c(
            "produce_requests.ack_observed",
            "a recorded acks=all append carries the broker's ack time",
            (_not_null("t_ack_observed", "acks = -1 AND error_code = 0"),),
        ),
        c(
            "produce_requests.partition_known",
            "every produce's partition exists in `partitions` (topics.txt)",
            (_in_set("partition_known", [True]),),
            WARNING,
        ),
        # silver: follower_fetches
        c(
            "follower_fetches.unique_line_partition",
            "one row per (follower FETCH line, partition)",
            (_unique("cluster", "source_file", "line_number", "topic", "partition"),),
        ),
        c(
            "follower_fetches.times_ordered",
            "t_start <= t_dequeue <= t_local_done <= t_log; carried_until >= t_dequeue - 1 ms (the next request's"
            " t_dequeue is derived from whole-ms log times: up to 0.5 ms earlier on the lab traces)",
            (
                _ge("t_dequeue", "t_start"),
                _ge("t_local_done", "t_dequeue"),
                _ge("t_log", "t_local_done"),
                _between("carried_until_lead_ms", -1.0),
            ),
        ),
        c(
            "follower_fetches.values",
            "fetch offsets >= 0, carried requests >= 0, follower ids >= 0",
            (_between("fetch_offset", 0), _between("carried_requests", 0), _between("follower_id", 0)),
        ),
        c(
            "follower_fetches.follower_is_not_leader",
            "a follower never fetches from itself",
            (_in_set("follower_is_leader", [False]),),
        ),
        c(
            "follower_fetches.partition_known",
            "every fetched partition exists in `partitions` (topics.txt)",
            (_in_set("partition_known", [True]),),
            WARNING,
        ),
        # silver: partitions
        c(
            "partitions.unique_partition",
            "one row per (cluster, topic, partition)",
            (_unique("cluster", "topic", "partition"),),
        ),
        c(
            "partitions.replication",
            "RF = number of distinct assigned replicas; 1 <= min.insync.replicas",
            (
                _equal("replication_factor", "replica_count"),
                _equal("replica_count", "distinct_replica_count"),
                _between("replication_factor", 1),
                _between("min_insync_replicas", 1),
            ),
        ),
        c(
            "partitions.min_isr_le_rf",
            "min.insync.replicas <= RF (else acks=all can never succeed)",
            (_ge("replication_factor", "min_insync_replicas"),),
            WARNING,
        ),
        # silver: broker logs and metrics
        c(
            "isr_changes.isr",
            "the ISR is non-empty and isr_size is its length",
            (_between("isr_size", 1), _equal("isr_size", "isr_count")),
        ),
        c(
            "isr_changes.kinds",
            "known change kinds and sources",
            (
                _in_set("change_kind", ["shrink", "expand", "unchanged", "leader_start"]),
                _in_set("source", ["server_log", "state_change_log"]),
            ),
        ),
        c(
            "isr_changes.clock_consistent",
            "the leader's log time of a Shrinking ISR proposal agrees with its epoch-ms lastCaughtUpTimeMs: the"
            " replicas were last caught up between 0 and 10 minutes before (else log_timezone is wrong)",
            (
                _between("min_caught_up_lead_ms", -1000, condition="proposed_at IS NOT NULL"),
                _between("max_caught_up_lead_ms", None, 600_000, condition="proposed_at IS NOT NULL"),
            ),
            WARNING,
        ),
        c(
            "leader_epochs.values",
            "epochs and offsets >= 0",
            (_between("leader_epoch", 0), _between("epoch_start_offset", 0), _between("previous_leader_epoch", -1)),
        ),
        c(
            "leader_epochs.unique_epoch",
            "one leadership start per (partition, leader epoch)",
            (_unique("cluster", "topic", "partition", "leader_epoch"),),
            WARNING,
        ),
        c(
            "follower_starts.values",
            "epochs and offsets >= 0",
            (_between("leader_epoch", 0), _between("log_end_offset", 0), _between("high_watermark", 0)),
        ),
        c(
            "follower_leo_records.values",
            "offsets >= 0, the follower is not the leader",
            (
                _between("log_end_offset", 0),
                _between("log_start_offset", 0),
                _null("follower_id", "follower_id = broker_id"),  # no row names the leader as its own follower
            ),
        ),
        c(
            "broker_registrations.values",
            "known records, epochs >= 0; a registration states fenced and controlled shutdown, a change one or both",
            (
                _in_set(
                    "record",
                    [
                        "RegisterBrokerRecord",
                        "BrokerRegistrationChangeRecord",
                        "FenceBrokerRecord",
                        "UnfenceBrokerRecord",
                        "UnregisterBrokerRecord",
                    ],
                ),
                _between("broker_epoch", 0),
                _null(
                    "record", "record = 'RegisterBrokerRecord' AND (fenced IS NULL OR in_controlled_shutdown IS NULL)"
                ),
            ),
        ),
        c(
            "metadata_deltas.values",
            "roles leaders or followers, a delta changes at least one partition",
            (_in_set("role", ["leaders", "followers"]), _between("partitions", 1)),
        ),
        c(
            "follower_leo_samples.values",
            "known metrics, LEO >= 0, scrape gaps >= 0",
            (
                _in_set("metric", ["kafka_log_log_logendoffset", "kafka_server_fetcherlagmetrics_consumerlag"]),
                _between("value", 0, condition="metric = 'kafka_log_log_logendoffset'"),
                _between("sample_gap_ms", 0),
                _between("granularity_ms", 0),
            ),
        ),
        c(
            "batch_send_times.values",
            "offsets and partitions >= 0, a batch holds >= 1 record, of which 0 or more have a key, known sources, a"
            " topic or a client id to match produces on",
            (
                _between("base_offset", 0),
                _between("partition", 0),
                _between("records", 1),
                _ge("records", "keyed_records"),
                _between("keyed_records", 0),
                _in_set("source", ["create_time", "client_log", "topic"]),
                _not_null("client_id", "topic IS NULL"),
            ),
        ),
        c(
            "batch_send_times.unique_batch",
            "one send time per batch (a segment dumped twice or a copied client log"
            " lists it again; the replay takes the earliest)",
            (_unique("cluster", "topic", "client_id", "partition", "base_offset"),),
            WARNING,
        ),
        # silver: produce_replay
        c(
            "produce_replay.unique_batch_policy",
            "one row per (batch, policy): cluster, topic, partition, leader epoch, base offset, policy",
            (_unique("cluster", "topic", "partition", "leader_epoch", "base_offset", "policy"),),
        ),
        c(
            "produce_replay.codes",
            "known outcomes and ISR sources",
            (_in_set("outcome", OUTCOMES), _in_set("isr_source", ["logs", "assumed_full", "simulated"])),
        ),
        c(
            "produce_replay.policies",
            "only the configured policies are in the table",
            (_in_set("policy_configured", [True]),),
        ),
        c(
            "produce_replay.times_ordered",
            "t_start <= t_local_done <= t_ack; an acked batch's request answers at or after its ack",
            (_ge("t_local_done", "t_start"), _ge("t_ack", "t_local_done"), _ge("t_response", "t_ack", ACKED)),
        ),
        c(
            "produce_replay.values",
            "waits, latencies and exposure >= 0; full replication not before min ISR",
            (
                _between("ack_wait_ms", 0),
                _between("broker_latency_ms", 0),
                _between("hol_wait_ms", 0),
                _between("exposure_ms", 0, condition=ACKED),
                _ge("full_replication_ms", "exposure_ms", ACKED),
                _between("base_offset", 0),
                _between("leader_epoch", 0),
            ),
        ),
        c(
            "produce_replay.send_before_response",
            "a batch is sent before its response (producer-visible latency"
            " >= -1 ms, the request log's millisecond stamps): else the producers' clocks run ahead of the"
            " brokers' (CreateTime is the producer's clock)",
            (_between("latency_ms", -1.0),),
            WARNING,
        ),
        c(
            "produce_replay.copies",
            "an acked batch is on 1..RF replicas at its ack; a rejected one on none",
            (
                _between("copies_at_ack", 1, condition=ACKED),
                _ge("replication_factor", "copies_at_ack"),
                _between("copies_at_ack", 0, 0, condition="outcome != 'acked'"),
            ),
        ),
        c(
            "produce_replay.policy_guarantee",
            "an acked batch holds the copies its policy promises: quorum=Q >= Q, min.insync >= min ISR; acks=1"
            " acks at the append",
            (
                _ge("copies_at_ack", "required_copies", ACKED),
                _equal("t_ack", "t_local_done", "policy = 'acks=1' AND outcome = 'acked'"),
            ),
        ),
        c(
            "produce_replay.loss_windows",
            "an acked batch's loss windows are >= 0, the least (`_min`) no longer than the most, under each election",
            (
                _between("loss_window_kafka_min_ms", 0, condition=ACKED),
                _between("loss_window_longest_min_ms", 0, condition=ACKED),
                _ge("loss_window_kafka_ms", "loss_window_kafka_min_ms", ACKED),
                _ge("loss_window_longest_ms", "loss_window_longest_min_ms", ACKED),
            ),
        ),
        c(
            "produce_replay.partition_known",
            "every replayed batch's partition exists in `partitions`",
            (_not_null("replication_factor"),),
        ),
        # gold
        c(
            "latency_percentiles.unique_window",
            "one row per (cluster, topic, policy, window)",
            (_unique("cluster", "topic", "policy", "window", "window_start"),),
        ),
        c(
            "latency_percentiles.ordered",
            "n <= produces; p50 <= p99 <= p999 <= p9999 <= max",
            (
                _ge("produces", "n"),
                _ge("p99_ms", "p50_ms"),
                _ge("p999_ms", "p99_ms"),
                _ge("p9999_ms", "p999_ms"),
                _ge("max_ms", "p9999_ms"),
                _ge("max_ms", "p99_ms"),
            ),
        ),
        c(
            "latency_percentiles.sample_size",
            "P999 only from >= 1000 records (the sample), and then always",
            (
                _null("p999_ms", "acked_records < 1000"),
                _not_null("p999_ms", "acked_records >= 1000"),
                _null("p9999_ms", "acked_records < 10000"),
                _not_null("p9999_ms", "acked_records >= 10000"),
                _ge("acked_records", "n"),
            ),
        ),
        c(
            "risk_exposure.unique_window",
            "one row per (cluster, topic, policy, window)",
            (_unique("cluster", "topic", "policy", "window", "window_start"),),
        ),
        c(
            "risk_exposure.counts",
            "acked <= produces; under-min-ISR, single-copy, lost and offline acks <= acked; least lost <= most lost",
            (
                _ge("produces", "acked_batches"),
                _ge("acked_batches", "under_min_isr_acks"),
                _ge("acked_batches", "single_copy_acks"),
                _ge("acked_batches", "loss_kafka_election"),
                _ge("acked_batches", "loss_longest_log_election"),
                _between("exposure_byte_ms", 0),
                _ge("loss_kafka_election", "loss_kafka_election_min"),
                _ge("loss_longest_log_election", "loss_longest_log_election_min"),
                _ge("acked_batches", "offline_at_failure_acks"),
            ),
        ),
        c(
            "availability.unique_window",
            "one row per (cluster, topic, partition, policy, window)",
            (_unique("cluster", "topic", "partition", "policy", "window", "window_start"),),
        ),
        c(
            "availability.outcomes_add_up",
            "acked + rejected + timeouts + not leader + unreplayable = produces",
            (_equal("produces", "outcomes_total"),),
        ),
        c(
            "availability.routing",
            "KIP-637: reroutable and never-writable rejections <= rejections; waits >= 0",
            (
                _ge("not_enough_replicas", "reroutable_rejections"),
                _ge("not_enough_replicas", "never_writable_rejections"),
                _between("rejected_wait_ms", 0),
                _ge("rejected_wait_ms", "reroutable_wait_ms"),
            ),
        ),
        c(
            "routing.unique_window",
            "one row per (cluster, topic, policy, window)",
            (_unique("cluster", "topic", "policy", "window", "window_start"),),
        ),
        c(
            "routing.adds_up",
            "KIP-637: rerouted + held + never writable = rejections >= recorded ones >= their linked batches and "
            "unlinked ones; rerouted >= those with a latency; today's wait >= KIP-637's >= 0; no writable partition "
            "<= ISR known",
            (
                _equal("rejections", "routing_total"),
                _ge("rejections", "recorded_rejections"),
                _ge("recorded_rejections", "recorded_batches"),
                _ge("recorded_rejections", "recorded_unlinked"),
                _ge("rerouted", "rerouted_latency_known"),
                _ge("wait_today_ms", "wait_kip637_ms"),
                _between("wait_kip637_ms", 0),
                _ge("isr_known_ms", "no_writable_ms"),
            ),
        ),
        c(
            "policy_summary.unique_policy",
            "one row per (cluster, topic, policy)",
            (_unique("cluster", "topic", "policy"),),
        ),
        c(
            "policy_summary.keys_and_pauses",
            "records taken as keyed or keyless; a leader's silence >= 0",
            (_in_set("partitioning", ["keyed", "keyless"]), _between("leader_silence_ms", 0)),
        ),
        c(
            "policy_summary.placement",
            "keyless records placed again by the partitioner: a single draw's lowest P99 and P999 <= its highest",
            (_ge("placed_p99_high_ms", "placed_p99_low_ms"), _ge("placed_p999_high_ms", "placed_p999_low_ms")),
        ),
        c(
            "policy_summary.counts",
            "n <= produces; lost acks, batches of known size or send times <= n <= acked_records",
            (
                _ge("produces", "n"),
                _ge("n", "loss_kafka_election"),
                _ge("n", "loss_longest_log_election"),
                _ge("acked_records", "n"),
                _ge("n", "record_count_known"),
                _ge("record_count_known", "record_sends_known"),
                _ge("n", "send_time_known"),
            ),
        ),
    ]


def _schema_checks() -> list[Check]:
    return [
        Check(
            f"{table}.schema",
            "columns and types as in the table's contract (schemas/), no nulls where it declares a column non-null",
            (),
            BLOCKING,
            True,
        )
        for tables in STAGE_TABLES.values()
        for table in tables
    ]


CHECKS: dict[str, Check] = {check.name: check for check in _schema_checks() + _checks()}


@dataclass(frozen=True)
class CheckPlan:
    """The checks of one table with their effective severity (conf overrides applied, `off` dropped)."""

    table: str
    checks: list[tuple[Check, str]] = field(default_factory=list)


def plan_for(table: str, overrides: Mapping[str, str]) -> CheckPlan:
    """The checks of `table`, each with its severity after `quality.checks` overrides."""
    plan = CheckPlan(table)
    for check in CHECKS.values():
        if check.table != table:
            continue
        severity = overrides.get(check.name, check.severity)
        if severity != OFF:
            plan.checks.append((check, severity))
    return plan
