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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from schemas.tables import BATCH_SEND_TIMES, RECORD_SENDS
from transforms.common import conform

SEND_TIMES = "send_times"  # the quarantine stage
CREATE_TIMES = "create_times"
CLIENT_BATCHES = "client_batches"

_CLIENT_COLUMNS = ("client_id", "partition", "base_offset", "first_send_us")
# Plausible send times, in ms since the epoch (2000-01-01 .. 2100-01-01): rejects seconds or microseconds.
MIN_SEND_MS, MAX_SEND_MS = 946_684_800_000, 4_102_444_800_000


def dump_lines_classified(classified: DataFrame) -> DataFrame:
    """kafka-dump-log lines classified by `ackreplay.dump_log_parser` in the columns of `classify_client_lines`
    (a row stands for `lines` lines: the unused ones are folded, `dump_log_parser.fold_unused_lines`)."""
    return classified.select(
        "cluster", "source_file", "line_number", "line", "status", "detail", "topic",
        F.lit(None).cast("string").alias("client_id"), "partition", "base_offset", "records", "leader_epoch",
        "t_send", F.lit("create_time").alias("source"), F.col("record_sends").cast(RECORD_SENDS).alias("record_sends"),
        "lines",
    )  # fmt: skip


def classify_client_lines(lines: DataFrame) -> DataFrame:
    """Numbered lines of client batch logs (CSV with a header line) -> every line with a status (a row per
    line: `lines` 1); parsed ones carry a batch's (topic or client_id, partition, base_offset, records, t_send)."""
    fields = F.split(F.col("line"), ",", -1)
    header = (
        lines.where(F.col("line_number") == 1)
        .select("source_file", F.split(F.trim(F.col("line")), ",", -1).alias("names"))
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
        F.lit(1).cast("long").alias("lines"),
    )  # fmt: skip


def batch_send_times(classified: DataFrame, run_id: str) -> DataFrame:
    """The parsed lines as `batch_send_times` rows."""
    rows = classified.where(F.col("status") == "parsed").select(
        "*", F.to_date("t_send").alias("event_date"), F.lit(run_id).alias("ingest_run_id")
    )
    return conform(rows, BATCH_SEND_TIMES)
