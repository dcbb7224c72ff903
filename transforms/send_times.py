"""When the producer sent each batch -> silver `batch_send_times`.

The producer-visible latency runs from `send()` to the ack callback; the broker's logs start at the
request. Every record carries the producer's send time: its `CreateTime` timestamp, set in
`KafkaProducer.doSend` from the producer's clock unless the application set one, and kept by the broker
unless the topic's `message.timestamp.type` is `LogAppendTime`. A batch is created by the first record
appended to it, so the CreateTime of a batch's first record (its base offset) is when the batch started
waiting for `linger.ms`, and a retried batch keeps it: the latency of a retried batch runs from its first
attempt. Two sources:

* `<cluster>/create-times/*`: the output of `kafka-dump-log --deep-iteration --files <segment>.log ...`
  (`kafka.tools.DumpLogSegments`; on Kafka 4.x `bin/kafka-dump-log.sh`). Its lines::

      Dumping /var/kafka/data/orders-3/00000000000000000000.log
      Log starting offset: 0
      baseOffset: 0 lastOffset: 1 count: 2 ... position: 0 CreateTime: 1795372263012 size: 1234 ...
      | offset: 0 CreateTime: 1795372263006 keySize: 2 valueSize: 1221 sequence: 0 headerKeys: []
      | offset: 1 CreateTime: 1795372263012 keySize: 2 valueSize: 1198 sequence: 1 headerKeys: []

  The partition is the segment's folder (`<topic>-<partition>`) in the `Dumping` line. The batch line's
  timestamp is the batch's *max* timestamp (`DumpLogSegments.dumpLog` prints `batch.maxTimestamp`), the
  last record's; the first record's is the `| offset: <baseOffset>` line right after it, printed only
  with `--deep-iteration`. A batch of one record needs no record line. With every record's line, the
  batch also gets `record_sends`: each record's own CreateTime (ms after the first's), so that latency
  can be counted per record, as `ProducerPerformance` and client metrics do (a record waits from its
  own `send()`, not from its batch's first).
* `<cluster>/client/batches-*.csv[.gz]`: an instrumented producer's own log of its batches, with a
  header naming at least `client_id`, `partition`, `base_offset` and `first_send_us` (µs since the
  epoch; optional `topic`, `records`). The lab's Java producers write these (`lab/java/LabWorkload.java`:
  the `send()` time of the batch's first record, the same clock CreateTime reads). Without `topic` a
  row matches the produces of its `client_id`. Any other column (the lab's `ack_us`, the client's ack
  time) is not read: it is the ground truth the replay is checked against.

Every line gets a `status`: `parsed` (a batch's send time), `unused` (headers, other records) or
`quarantined` (with the reason: a batch stamped with LogAppendTime, a multi-record batch without its
first record's line, a line that does not parse).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.schemas.tables import BATCH_SEND_TIMES, RECORD_SENDS
from ackreplay.schemas.vocabulary import NEVER
from ackreplay.transforms.common import conform

SEND_TIMES = "send_times"  # the quarantine stage
CREATE_TIMES = "create_times"
CLIENT_BATCHES = "client_batches"

_CLIENT_COLUMNS = ("client_id", "partition", "base_offset", "first_send_us")
# Plausible send times, in ms since the epoch (2000-01-01 .. 2100-01-01): rejects seconds or microseconds.
MIN_SEND_MS, MAX_SEND_MS = 946_684_800_000, 4_102_444_800_000


def dump_lines_classified(classified: DataFrame) -> DataFrame:
    """kafka-dump-log lines classified by `ackreplay.ingest.dump_log_parser` in the columns of `classify_client_lines`
    (a row stands for `lines` lines: the unused ones are folded, `dump_log_parser.fold_unused_lines`)."""
    return classified.select(
        "cluster", "source_file", "line_number", "line", "status", "detail", "topic",
        F.lit(None).cast("string").alias("client_id"), "partition", "base_offset", "records", "leader_epoch",
        "t_send", F.lit("create_time").alias("source"), F.col("record_sends").cast(RECORD_SENDS).alias("record_sends"),
        "keyed_records", "lines",
    )  # fmt: skip


def classify_client_lines(lines: DataFrame) -> DataFrame:
    """Numbered lines of client batch logs (CSV with a header line) -> every line with a status (a row per
    line: `lines` 1); parsed ones carry a batch's (topic or client_id, partition, base_offset, records, t_send)."""
    fields = F.split(F.col("line"), ",", -1)
    header = lines.where(F.col("line_number") == 1).select(
        "source_file", F.split(F.trim(F.col("line")), ",", -1).alias("names")
    )
    with_header = lines.join(F.broadcast(header), "source_file", "left")

    def field(name: str) -> Column:
        position = F.array_position(F.col("names"), name)
        value = F.trim(F.try_element_at(fields, position.cast("int")))
        return F.when((position > 0) & (value != ""), value)

    send_us = field("first_send_us").try_cast("long")
    parsed = with_header.select(
        "*",
        F.size("names").alias("n_names"),
        F.size(fields).alias("n_fields"),
        field("topic").alias("topic"),
        field("client_id").alias("client_id"),
        field("partition").try_cast("int").alias("partition"),
        field("base_offset").try_cast("long").alias("base_offset"),
        field("records").try_cast("int").alias("records"),
        F.when(send_us.between(MIN_SEND_MS * 1000, MAX_SEND_MS * 1000), F.timestamp_micros(send_us)).alias("t_send"),
    )
    missing = [F.when(~F.array_contains("names", c), F.lit(c)) for c in _CLIENT_COLUMNS]
    header_error = F.concat_ws(", ", *missing)
    reason = (
        F.when(F.col("read_error").isNotNull(), F.col("read_error"))
        .when(header_error != "", F.concat(F.lit("the file's header lacks "), header_error))
        .when(F.col("n_fields") != F.col("n_names"), "field count differs from the header's")
        .when(F.col("partition").isNull() | F.col("base_offset").isNull() | F.col("client_id").isNull(),
              "partition, base_offset or client_id missing or not a number")
        .when(F.col("t_send").isNull(), "first_send_us missing or outside 2000..2100 (not epoch microseconds)")
    )  # fmt: skip
    unused = F.col("read_error").isNull() & ((F.col("line_number") == 1) | (F.trim(F.col("line")) == ""))
    return parsed.select(
        "cluster", "source_file", "line_number", "line",
        F.when(unused, "unused").when(reason.isNull(), "parsed").otherwise("quarantined").alias("status"),
        F.when(F.col("line_number") == 1, "header").when(unused, "blank").otherwise(reason).alias("detail"),
        "topic", "client_id", "partition", "base_offset", "records", F.lit(None).cast("int").alias("leader_epoch"),
        "t_send", F.lit("client_log").alias("source"), F.lit(None).cast(RECORD_SENDS).alias("record_sends"),
        F.lit(None).cast("int").alias("keyed_records"), F.lit(1).cast("long").alias("lines"),
    )  # fmt: skip


def batch_send_times(classified: DataFrame, run_id: str) -> DataFrame:
    """The parsed lines as `batch_send_times` rows."""
    rows = classified.where(F.col("status") == "parsed").select(
        "*", F.to_date("t_send").alias("event_date"), F.lit(run_id).alias("ingest_run_id")
    )
    return conform(rows, BATCH_SEND_TIMES)


# --- Send times read from the topic itself (Spark's Kafka source) ---------------------------------------

TOPIC_RECORDS = "topic"  # batch_send_times.source of rows read from the topic
# A record a producer stamped is older than the request that carried it: CreateTime (whole ms, the
# producer's clock) <= the request's start (ms log stamp less totalTimeMs, so up to 1 ms early).
CREATED_AFTER_SLACK_US = 1_000

NOT_IN_TOPIC = "the batch's first record is not in the topic (removed by retention or compaction)"
LOG_APPEND_TIME = "timestamps are LogAppendTime, not the producer's CreateTime"
CREATED_AFTER_REQUEST = (
    "the record at the batch's base offset was created after the request reached the broker: not this batch's"
    " (the application sets timestamps, the producer's clock is ahead, or the offset was reused after a truncation)"
)
TRUNCATED = "a leader change cut the batch: its offsets hold the next leader epoch's records"


def with_truncation(produces: DataFrame, leader_epochs: DataFrame) -> DataFrame:
    """`truncated`: whether the produce's batch was cut from the log by a later leader epoch, and
    `leader_epoch`: the epoch whose leader appended it (null: no epoch of its broker is known).

    A consumer reads the log as it is now, so offsets a leader change cut hold the next epoch's records.
    A leader's epoch e ends where the partition's next epoch starts (`epoch_start_offset`, the new leader's
    LEO, `Partition.makeLeader`); the old leader truncates to it when it follows (its offsets from there are
    replaced). So a batch the broker appended as leader of epoch e (the broker's latest epoch started before
    the append, `leader_epochs`) is cut when its base offset is at or past the start of any later epoch; an
    append after the next epoch began (a paused leader resuming) is in that case too. Produces of a broker
    with no epoch in `leader_epochs` are taken as kept (null)."""
    epochs = leader_epochs.groupBy("cluster", "topic", "partition", "leader_epoch").agg(
        F.min_by("broker_id", "t_log").alias("leader_id"), F.min(F.unix_micros("t_log")).alias("start_us"),
        F.min("epoch_start_offset").alias("start_offset"),
    )  # fmt: skip
    later = Window.partitionBy("cluster", "topic", "partition").orderBy(F.desc("leader_epoch"))
    own = Window.partitionBy("cluster", "topic", "partition", "leader_id").orderBy("start_us")
    spans = epochs.select(
        "cluster", "topic", "partition", "leader_epoch", "leader_id", "start_us",
        F.coalesce(F.lead("start_us").over(own), F.lit(NEVER)).alias("end_us"),
        F.min("start_offset").over(later.rowsBetween(Window.unboundedPreceding, -1)).alias("cut_from"),
    )  # fmt: skip
    p, e = produces.withColumn("_t_us", F.unix_micros("t_local_done")).alias("p"), spans.alias("e")
    joined = p.join(
        F.broadcast(e),
        (F.col("p.cluster") == F.col("e.cluster")) & (F.col("p.topic") == F.col("e.topic"))
        & (F.col("p.partition") == F.col("e.partition")) & (F.col("p.broker_id") == F.col("e.leader_id"))
        & (F.col("p._t_us") >= F.col("e.start_us")) & (F.col("p._t_us") < F.col("e.end_us")),
        "left",
    )  # fmt: skip
    cut = F.col("e.cut_from").isNotNull() & (F.col("p.base_offset") >= F.col("e.cut_from"))
    return joined.select(
        "p.*",
        F.when(F.col("e.start_us").isNotNull(), cut).alias("truncated"),
        F.col("e.leader_epoch").alias("leader_epoch"),
    ).drop("_t_us")


def topic_batches_wanted(produces: DataFrame) -> DataFrame:
    """The batches of appended `produces` (with `with_truncation`'s columns), one row per batch and whether
    a leader change cut it: the earliest epoch's produce when several report the same offset (a retry the
    next leader answered from its duplicate check, `ProducerStateManager`, with the offset the first append
    got)."""
    appended = produces.where((F.col("error_code") == 0) & (F.col("base_offset") >= 0))
    first = F.min(F.struct("leader_epoch", "t_start", "source_file", "line_number")).alias("m")
    return appended.groupBy("cluster", "topic", "partition", "base_offset", "truncated").agg(first).select(
        "cluster", "topic", "partition", "base_offset", "truncated", "m.leader_epoch", "m.t_start", "m.source_file",
        "m.line_number",
    )  # fmt: skip


def topic_batch_extents(produces: DataFrame) -> DataFrame:
    """Where each appended batch's records lie in its partition: (cluster, topic, partition, base_offset,
    end_offset), end exclusive: the next appended batch's base offset, null for a partition's last one.

    The topic has no batch boundaries to give (a consumer sees records), the request log has each batch's
    base offset: a batch's records run to the next base offset the logs know. A produce the logs miss
    (an acks=0 request, a leader whose request log was not collected) leaves its records to the batch
    before it; `topic_send_times` finds them by their CreateTime."""
    kept = ~F.coalesce(F.col("truncated"), F.lit(False)) if "truncated" in produces.columns else F.lit(True)
    batches = (
        produces.where((F.col("error_code") == 0) & (F.col("base_offset") >= 0) & kept)
        .select("cluster", "topic", "partition", "base_offset")
        .distinct()
    )
    in_partition = Window.partitionBy("cluster", "topic", "partition").orderBy("base_offset")
    return batches.withColumn("end_offset", F.lead("base_offset").over(in_partition))


def topic_send_times(records: DataFrame, extents: DataFrame, batches: DataFrame, run_id: str) -> DataFrame:
    """Each batch of `batches` with its send time read from the topic, or why it has none.

    `records`: what Spark's Kafka source returns for the batches' partitions (cluster, topic, partition,
    offset, timestamp, timestampType); `extents`: `topic_batch_extents` of every produce of the clusters;
    `batches`: the batches wanted (cluster, topic, partition, base_offset, t_start, source_file,
    line_number, optional `truncated` and `leader_epoch` from `with_truncation`), one row each. The send
    time is the CreateTime of the record at the base offset, as with kafka-dump-log; `records` and
    `record_sends` count the records up to the next batch, and are null when that is not known: a
    partition's last batch (the next base offset is not in the logs) or a range holding a record created
    after the request started (a produce the logs do not show). `leader_epoch`: the epoch whose leader
    appended the batch (the Kafka source does not return a record's), so that the replay matches the send
    time to that epoch's produce only, as with kafka-dump-log.

    Returns the `batch_send_times` columns and `problem` (null, or why there is no row: TRUNCATED,
    NOT_IN_TOPIC, LOG_APPEND_TIME, CREATED_AFTER_REQUEST)."""
    if "truncated" not in batches.columns:
        batches = batches.withColumn("truncated", F.lit(None).cast("boolean"))
    if "leader_epoch" not in batches.columns:
        batches = batches.withColumn("leader_epoch", F.lit(None).cast("int"))
    cut = F.coalesce(F.col("truncated"), F.lit(False))
    wanted = batches.join(extents, ["cluster", "topic", "partition", "base_offset"], "left")
    starts = wanted.where(~cut).select(
        "cluster", "topic", "partition", F.col("base_offset").alias("offset"), F.lit(0).alias("start_first"),
        F.struct("base_offset", "end_offset", F.unix_micros("t_start").alias("start_us")).alias("owner"),
    )  # fmt: skip
    # whether each record has a key, where the source says (Spark's Kafka source: `keyed`, its key not null)
    keyed = F.col("keyed").cast("int") if "keyed" in records.columns else F.lit(None).cast("int")
    stamped = records.select(
        "cluster", "topic", "partition", "offset", F.unix_micros("timestamp").alias("created_us"),
        F.col("timestampType").alias("timestamp_type"), F.lit(1).alias("start_first"), keyed.alias("keyed"),
    )  # fmt: skip
    # every record takes the last batch start at or before its offset (a start sorts first at its offset)
    order = Window.partitionBy("cluster", "topic", "partition").orderBy("offset", "start_first")
    owner = F.last("owner", ignorenulls=True).over(order)
    owned = stamped.unionByName(starts, allowMissingColumns=True).select(
        "*", *[owner[c].alias(f"_{c}") for c in ("base_offset", "end_offset", "start_us")]
    ).where(
        F.col("created_us").isNotNull() & F.col("_base_offset").isNotNull()
        & (F.col("offset") < F.coalesce("_end_offset", F.col("_base_offset") + 1))
    )  # fmt: skip
    first = F.col("offset") == F.col("_base_offset")
    per_ms = owned.groupBy("cluster", "topic", "partition", "_base_offset", "created_us").agg(
        F.count("*").alias("n"),
        F.sum("keyed").alias("keyed"),
        F.count("keyed").alias("key_known"),
        F.max(F.when(first, F.col("timestamp_type"))).alias("first_type"),
        F.max(first).alias("has_first"),
        F.max(F.col("created_us") > F.col("_start_us") + CREATED_AFTER_SLACK_US).alias("late"),
    )
    per_batch = per_ms.groupBy("cluster", "topic", "partition", F.col("_base_offset").alias("base_offset")).agg(
        F.max(F.when(F.col("has_first"), F.col("created_us"))).alias("first_us"),
        F.max("first_type").alias("first_type"),
        F.sum("n").cast("int").alias("n"),
        F.sum("keyed").cast("int").alias("keyed"),
        F.sum("key_known").alias("key_known"),
        F.max("late").alias("any_late"),
        F.sort_array(F.collect_list(F.struct(F.col("created_us").alias("us"), F.col("n")))).alias("sends"),
    )
    joined = wanted.join(per_batch, ["cluster", "topic", "partition", "base_offset"], "left")
    first_us = F.when(~cut, F.col("first_us"))
    problem = (
        F.when(cut, TRUNCATED)
        .when(first_us.isNull(), NOT_IN_TOPIC)
        .when(F.col("first_type") != 0, LOG_APPEND_TIME)
        .when(first_us > F.unix_micros("t_start") + CREATED_AFTER_SLACK_US, CREATED_AFTER_REQUEST)
    )
    counted = ~cut & F.col("end_offset").isNotNull() & ~F.col("any_late")
    after_ms = F.transform(
        "sends",
        lambda s: F.struct(
            F.floor((s["us"] - F.col("first_us")) / 1000).cast("int").alias("after_ms"),
            s["n"].cast("int").alias("records"),
        ),
    )
    return joined.select(
        "cluster", "topic", F.lit(None).cast("string").alias("client_id"), "partition", "base_offset",
        F.when(counted, F.col("n")).alias("records"), F.col("leader_epoch").cast("int").alias("leader_epoch"),
        F.timestamp_micros(first_us).alias("t_send"), F.lit(TOPIC_RECORDS).alias("source"),
        F.when(counted, after_ms).cast(RECORD_SENDS).alias("record_sends"),
        F.when(counted & (F.col("key_known") == F.col("n")), F.col("keyed")).alias("keyed_records"),
        "source_file", "line_number",
        F.to_date(F.timestamp_micros(first_us)).alias("event_date"), F.lit(run_id).alias("ingest_run_id"),
        problem.alias("problem"),
    )  # fmt: skip
