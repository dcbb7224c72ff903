"""JMX-exporter scrapes (`<cluster>/metrics/broker-<id>.prom`) -> silver `follower_leo_samples`.

The files are Prometheus text exposition format, appended once per scrape (about one a second in the
lab), every sample line carrying a millisecond timestamp (kafka-reference.md §4 for the names):

    # HELP kafka_log_log_logendoffset Attribute exposed for management kafka.log:name=LogEndOffset,...
    # TYPE kafka_log_log_logendoffset gauge
    kafka_log_log_logendoffset{partition="0",topic="ackreplay-lab"} 1046.0 1795315387520
    kafka_server_fetcherlagmetrics_consumerlag{clientId="ReplicaFetcherThread-0-1",partition="2",topic="ackreplay-lab"} 16.0 1795315387520

The metrics the replay can use (`USED_METRICS`):

* `kafka_log_log_logendoffset{topic,partition}`: the LEO of the scraped broker's replica; on a
  follower broker that is the follower's own LEO.
* `kafka_server_fetcherlagmetrics_consumerlag{clientId,topic,partition}`: on a follower, the leader's
  HW from the last fetch response minus the follower's fetch offset; `clientId` is the fetcher thread,
  `ReplicaFetcherThread-<fetcherId>-<leaderId>`.

Every line gets a `status`: `parsed` (a sample of a used metric; `detail` is the metric), `unused`
(comments, blank lines, other metrics; `detail` says which) or `quarantined` (a line of a used metric
that cannot be parsed; `detail` says why). A sample without a timestamp takes the scrape time the file
marks with a comment line `# scrape_timestamp_ms <ms>` (also `# scrape <ms>`, `# scrape_time_ms=<ms>`)
before it; with no such mark it is quarantined.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.schemas.metrics import FOLLOWER_LEO_SAMPLES
from ackreplay.transforms.common import conform

METRICS = "metrics"  # the quarantine stage
LOG_END_OFFSET = "kafka_log_log_logendoffset"
CONSUMER_LAG = "kafka_server_fetcherlagmetrics_consumerlag"
USED_METRICS = (LOG_END_OFFSET, CONSUMER_LAG)

_NAME = r"^([a-zA-Z_:][a-zA-Z0-9_:]*)"
# name, optional {labels} (quoted values may hold any escaped character), value, optional timestamp.
_SAMPLE = r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"{}]|"(?:[^"\\]|\\.)*")*\})?[ \t]+(\S+)(?:[ \t]+(\S+))?[ \t]*$'
_SCRAPE_MARK = r"(?i)^#[ \t]*scrape(?:d)?(?:_time(?:stamp)?)?(?:_ms)?[ \t]*[:=]?[ \t]*(\d{1,18})[ \t]*$"
_BROKER_FILE = r"(?:^|/)broker-(\d{1,9})\.prom$"
_LEADER_OF_CLIENT = r"^ReplicaFetcherThread-\d+-(\d{1,9})$"
# Plausible sample times, in ms since the epoch (2000-01-01 .. 2100-01-01): rejects seconds or microseconds.
_MIN_MS, _MAX_MS = 946_684_800_000, 4_102_444_800_000
_MAX_VALUE = 9.2e18  # below 2^63: the cast to bigint cannot overflow


def _label(labels: Column, name: str) -> Column:
    """The value of label `name` in a `{k="v",...}` label set; null when absent."""
    value = F.regexp_extract(labels, rf'[{{,][ \t]*{name}[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"', 1)
    has = labels.rlike(rf'[{{,][ \t]*{name}[ \t]*=[ \t]*"')
    return F.when(has, value)


def with_metric_fields(lines_df: DataFrame) -> DataFrame:
    """Numbered lines of `.prom` files -> the sample's fields, as text and typed (null when they do not parse).

    Adds `metric`, `labels`, `value_text`, `ts_text`, `topic`, `partition`, `client_id`, `leader_id`,
    `value`, `ts_ms` (the line's own timestamp), `scrape_mark_ms` (the last scrape mark at or before the
    line), `t_ms` (the sample time in ms) and `scraped_broker` (from the file name).
    """
    line = F.col("line")
    shape = line.rlike(_SAMPLE)
    labels = F.when(shape, F.regexp_extract(line, _SAMPLE, 2))
    value_text = F.when(shape, F.regexp_extract(line, _SAMPLE, 3))
    ts_text = F.when(shape, F.regexp_extract(line, _SAMPLE, 4))
    value_d = value_text.try_cast("double")
    integral = (
        value_d.isNotNull() & ~F.isnan(value_d) & (F.abs(value_d) < F.lit(_MAX_VALUE)) & (value_d == F.floor(value_d))
    )
    ts_ms = F.when(ts_text.rlike(r"^\d{1,18}$"), ts_text.try_cast("bigint"))
    ts_ms = F.when(ts_ms.between(_MIN_MS, _MAX_MS), ts_ms)
    mark = F.when(line.rlike(_SCRAPE_MARK), F.regexp_extract(line, _SCRAPE_MARK, 1).try_cast("bigint"))
    mark = F.when(mark.between(_MIN_MS, _MAX_MS), mark)
    in_file = Window.partitionBy("source_file").orderBy("line_number").rowsBetween(Window.unboundedPreceding, 0)
    partition_text = _label(F.col("labels"), "partition")
    client_id = _label(F.col("labels"), "clientId")
    return lines_df.withColumns(
        {
            "metric": F.regexp_extract(line, _NAME, 1),
            "sample_shape": shape,
            "labels": labels,
            "value_text": value_text,
            "ts_text": ts_text,
            "value": F.when(integral, value_d.cast("bigint")),
            "ts_ms": ts_ms,
            "scrape_mark": line.rlike(_SCRAPE_MARK),
            "scrape_mark_ms": F.last(mark, ignorenulls=True).over(in_file),
            "scraped_broker": F.when(
                F.col("source_file").rlike(_BROKER_FILE),
                F.regexp_extract(F.col("source_file"), _BROKER_FILE, 1).cast("int"),
            ),
        }
    ).withColumns(
        {
            "topic": _label(F.col("labels"), "topic"),
            "partition_text": partition_text,
            "partition": F.when(partition_text.rlike(r"^\d{1,9}$"), partition_text.cast("int")),
            "client_id": client_id,
            "leader_id": F.when(
                client_id.rlike(_LEADER_OF_CLIENT), F.regexp_extract(client_id, _LEADER_OF_CLIENT, 1).cast("int")
            ),
            "t_ms": F.when(F.col("ts_text") == "", F.col("scrape_mark_ms")).otherwise(F.col("ts_ms")),
        }
    )


def with_metric_line_status(df: DataFrame) -> DataFrame:
    """Classify each line (after `with_metric_fields`): `status` parsed | quarantined | unused, `detail`."""
    line, metric = F.col("line"), F.col("metric")
    used = metric.isin(*USED_METRICS)
    quarantined, parsed, unused = F.lit("quarantined"), F.lit("parsed"), F.lit("unused")
    rules: list[tuple[Column, Column, Column]] = [
        (used & F.col("read_error").isNotNull(), quarantined, F.col("read_error")),
        (
            used & ~F.col("sample_shape"),
            quarantined,
            F.format_string("'%s' line is not a sample 'name{labels} value [timestamp]' (cut short?)", metric),
        ),
        (
            used & F.col("scraped_broker").isNull(),
            quarantined,
            F.lit("scraped broker unknown: the file is not named broker-<id>.prom"),
        ),
        (used & F.col("topic").isNull(), quarantined, F.format_string("'%s' sample without a topic label", metric)),
        (
            used & F.col("partition").isNull(),
            quarantined,
            F.format_string("'%s' sample without an integer partition label", metric),
        ),
        (
            used & F.col("value").isNull(),
            quarantined,
            F.format_string("value '%s' is not an integer (bigint)", F.col("value_text")),
        ),
        (
            used & (F.col("ts_text") != "") & F.col("ts_ms").isNull(),
            quarantined,
            F.format_string("timestamp '%s' is not milliseconds since the epoch", F.col("ts_text")),
        ),
        (
            used & F.col("t_ms").isNull(),
            quarantined,
            F.lit("sample without a timestamp and no scrape time marked before it in the file"),
        ),
        (used, parsed, metric),
        # A file that could not be read to its end loses lines nobody can classify: say so.
        (F.col("read_error").startswith("file unreadable"), quarantined, F.col("read_error")),
        (F.trim(line) == "", unused, F.lit("blank line (empty scrape)")),
        (F.col("scrape_mark"), unused, F.lit("scrape time mark")),
        (line.rlike(r"^#[ \t]*(HELP|TYPE)[ \t]"), unused, F.lit("HELP / TYPE comment")),
        (line.startswith("#"), unused, F.lit("comment")),
        (F.col("sample_shape"), unused, F.lit("other metric")),
    ]
    status, detail = unused, F.lit("not a sample line")
    for condition, rule_status, rule_detail in reversed(rules):
        status = F.when(condition, rule_status).otherwise(status)
        detail = F.when(condition, rule_detail).otherwise(detail)
    return df.withColumns({"status": status, "detail": detail})


def classify_metric_lines(lines_df: DataFrame) -> DataFrame:
    """Raw numbered lines (the line reader's shape) -> fields, status, detail, `t_sample`, `event_date`."""
    t_sample = F.timestamp_millis(F.col("t_ms"))
    return (
        lines_df.transform(with_metric_fields)
        .transform(with_metric_line_status)
        .withColumns(
            {
                "broker_id": F.coalesce(F.col("broker_id"), F.col("scraped_broker")),
                "t_sample": t_sample,
                "event_date": F.to_date(t_sample),
            }
        )
    )


def build_follower_leo_samples(classified: DataFrame) -> DataFrame:
    """Classified lines -> `follower_leo_samples` rows (the parsed ones), with the file's scrape interval."""
    samples = classified.filter(F.col("status") == "parsed")
    scrapes = samples.select("source_file", "t_ms").distinct()
    step = Window.partitionBy("source_file").orderBy("t_ms")
    granularity = (
        scrapes.withColumn("_gap", (F.col("t_ms") - F.lag("t_ms").over(step)).cast("double"))
        .groupBy("source_file")
        .agg(F.median("_gap").alias("granularity_ms"))
    )
    series = Window.partitionBy("source_file", "metric", "topic", "partition", "client_id").orderBy(
        "t_ms", "line_number"
    )
    rows = samples.join(granularity, "source_file", "left").withColumn(
        "sample_gap_ms", (F.col("t_ms") - F.lag("t_ms").over(series)).cast("double")
    )
    return conform(rows, FOLLOWER_LEO_SAMPLES)


def metric_quarantine(classified: DataFrame) -> DataFrame:
    """Quarantined lines with the quarantine table's extra columns (`stage`, `reason`)."""
    return classified.filter(F.col("status") == "quarantined").withColumns(
        {"stage": F.lit(METRICS), "reason": F.col("detail")}
    )
