"""Keyless topics: the producer-visible latency with the records placed again by Kafka's partitioner under
each policy (KIP-794; the model and its Kafka sources: ackreplay/replay/partitioner.py). Pure DataFrame ->
DataFrame but for the per-topic simulation, which runs in `applyInPandas`.

One group per (cluster, topic, policy) holds three kinds of rows:
* `answer`: each replayed request's batch on the topic under the policy: when the leader read it (`t_start`)
  and when the policy answered it (`t_response`; null: not acknowledged) — the partition's answers over time;
* `batch`: each batch as recorded (the recorded policy's rows), with its producer (`client_id`), size, record
  count and the records' send times (`record_sends` of silver `batch_send_times`): the records to place again;
* `span`: when a broker of the cluster read no request (`read_gaps`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from ackreplay.schemas.gold import POLICY_SUMMARY
from ackreplay.schemas.tables import RECORD_SENDS
from ackreplay.schemas.vocabulary import ACKS_1, ACKS_ALL, Outcome
from ackreplay.transforms.common import PerCluster, per_cluster
from ackreplay.transforms.gold import BATCH_KEY

if TYPE_CHECKING:
    from ackreplay.replay.partitioner import PlacementSettings

ANSWER, BATCH, SPAN = 0, 1, 2
# A recorded request read this much later than its last batch's first record was sent, with no request line of
# its broker in between, shows the broker reading nothing then. Below it the gap is the producer's own path and
# the whole-millisecond CreateTime, not the broker.
READ_GAP_EVIDENCE_US = 2_000

PLACEMENT_INPUT = StructType(
    [
        StructField("cluster", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("policy", StringType(), False),
        StructField("kind", ByteType(), False),
        StructField("partition", IntegerType(), True),
        StructField("broker_id", IntegerType(), True),
        StructField("t_from_us", LongType(), True),  # answer: read; batch: first record's send; span: from
        StructField("t_to_us", LongType(), True),  # answer: answered (null: not); batch: read; span: to
        StructField("client_id", StringType(), True),
        StructField("bytes", LongType(), True),
        StructField("records", LongType(), True),
        StructField("record_sends", ArrayType(RECORD_SENDS.elementType), True),
    ]
)

# the placed_* columns of gold policy_summary, keyed by (cluster, topic, policy)
PLACEMENT = StructType(
    [f for f in POLICY_SUMMARY.fields if f.name in ("cluster", "topic", "policy") or f.name.startswith("placed_")]
)


def _us(column: str) -> Column:
    return F.unix_micros(F.col(column))


def read_gaps(
    replay: DataFrame, produce_requests: DataFrame, line_starts: DataFrame, blocked_gap_ms: float | PerCluster
) -> DataFrame:
    """(cluster, broker_id, from_us, to_us): spans in which a broker read no request although one had been sent
    to it: a request whose connection was free (not read within `blocked_gap_ms` of the previous response on it,
    ackreplay/replay/connections.py) read more than READ_GAP_EVIDENCE_US after its last batch's first record was
    sent, with no request line of the broker starting in between (`line_starts`: cluster, broker_id, t_start of
    every request line). A request sent then waits for the span's end whatever the policy (a paused or stalled
    leader). A broker that logged nothing for a while is not taken as stopped without such a request: under
    acks=all every connection to a leader waiting on a stalled follower is muted, and its lines stop too."""
    requests = produce_requests.groupBy("cluster", "broker_id", "connection", "source_file", "line_number").agg(
        F.min(_us("t_start")).alias("t_read"), F.max("total_time_ms").alias("total_time_ms")
    )
    on_connection = Window.partitionBy("cluster", "broker_id", "connection").orderBy("t_read")
    previous_sent = F.lag(F.col("t_read") + (F.col("total_time_ms") * 1000).cast("bigint")).over(on_connection)
    sent = (
        replay.where(F.col("t_send").isNotNull())
        .groupBy("cluster", "source_file", "line_number")
        .agg(F.max(_us("t_send")).alias("t_sent"))
    )
    starts = line_starts.select("cluster", "broker_id", _us("t_start").alias("t_read")).distinct()
    previous_start = starts.withColumn(
        "previous_start", F.lag("t_read").over(Window.partitionBy("cluster", "broker_id").orderBy("t_read"))
    )
    return (
        requests.where(F.col("connection").isNotNull())
        .withColumn("_previous_response", previous_sent)
        .where(
            F.col("_previous_response").isNull()
            | (F.col("t_read") - F.col("_previous_response") > per_cluster(blocked_gap_ms).column() * 1000)
        )
        .join(sent, ["cluster", "source_file", "line_number"])
        .where(F.col("t_read") - F.col("t_sent") > F.lit(READ_GAP_EVIDENCE_US))
        .join(previous_start, ["cluster", "broker_id", "t_read"])
        .where(F.col("previous_start").isNull() | (F.col("previous_start") <= F.col("t_sent")))
        .select("cluster", "broker_id", F.col("t_sent").alias("from_us"), F.col("t_read").alias("to_us"))
    )


def _recorded(policy: Column) -> Column:
    """The row is the policy its request was recorded with (acks=all or acks=1)."""
    return ((F.col("recorded_acks") == -1) & (policy == ACKS_ALL.id)) | (
        (F.col("recorded_acks") == 1) & (policy == ACKS_1.id)
    )


def placement_input(
    replay: DataFrame, record_sends: DataFrame | None, produce_requests: DataFrame, gaps: DataFrame, keyless: Column
) -> DataFrame:
    """The rows of :data:`PLACEMENT_INPUT` for the keyless topics (`keyless`: true on a (cluster, topic) row)."""
    topics = replay.select("cluster", "topic").distinct().where(keyless)
    rows = replay.join(topics, ["cluster", "topic"], "left_semi").where(F.col("recorded_acks") != 0)
    answered = F.when(F.col("outcome") == Outcome.ACKED.label, _us("t_response"))
    answers = rows.select(
        "cluster", "topic", "policy", F.lit(ANSWER).cast("byte").alias("kind"), "partition", "broker_id",
        _us("t_start").alias("t_from_us"), answered.alias("t_to_us"),
    )  # fmt: skip
    batches = rows.where(_recorded(F.col("policy")) & F.col("t_send").isNotNull())
    if record_sends is not None:
        other_epoch = F.coalesce(F.col("send_leader_epoch") != F.col("leader_epoch"), F.lit(False))
        batches = batches.join(record_sends, BATCH_KEY, "left").withColumn(
            "record_sends", F.when(~other_epoch, F.col("record_sends"))
        )
    else:
        batches = batches.withColumn("record_sends", F.lit(None).cast(RECORD_SENDS))
    clients = produce_requests.select("cluster", "source_file", "line_number", "topic", "partition", "client_id")
    batch_rows = batches.join(clients, ["cluster", "source_file", "line_number", "topic", "partition"], "left")
    policies = rows.select("cluster", "topic", "policy").distinct()
    batch_rows = batch_rows.drop("policy").join(policies, ["cluster", "topic"]).select(
        "cluster", "topic", "policy", F.lit(BATCH).cast("byte").alias("kind"), "partition", "broker_id",
        _us("t_send").alias("t_from_us"), _us("t_start").alias("t_to_us"), "client_id",
        F.col("bytes").cast("bigint").alias("bytes"), F.col("records").cast("bigint").alias("records"), "record_sends",
    )  # fmt: skip
    span_rows = gaps.join(policies, ["cluster"]).select(
        "cluster", "topic", "policy", F.lit(SPAN).cast("byte").alias("kind"),
        F.lit(None).cast("int").alias("partition"), "broker_id",
        F.col("from_us").alias("t_from_us"), F.col("to_us").alias("t_to_us"),
    )  # fmt: skip
    return answers.unionByName(batch_rows, allowMissingColumns=True).unionByName(span_rows, allowMissingColumns=True)


def keyless_placement(
    inputs: DataFrame, settings: PlacementSettings, by_cluster: Mapping[str, PlacementSettings] | None = None
) -> DataFrame:
    """(cluster, topic, policy, placed_*) of :data:`PLACEMENT`: per keyless topic and policy, the records'
    latency with the partitioner re-simulated (ackreplay/replay/partitioner.py), over `settings.draws` draws;
    a cluster in `by_cluster` with its own producers' settings."""
    from ackreplay.replay.partitioner import placement_of_group

    own = dict(by_cluster or {})

    def run(pdf):
        cluster = pdf["cluster"].iloc[0] if len(pdf) else None
        return placement_of_group(pdf, own.get(cluster, settings))

    return (
        inputs.select(*PLACEMENT_INPUT.fieldNames()).groupBy("cluster", "topic", "policy").applyInPandas(run, PLACEMENT)
    )
