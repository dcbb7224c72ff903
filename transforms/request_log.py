"""Request-log lines -> parsed, classified lines (bronze) -> PRODUCE and follower FETCH rows (silver).

A line looks like (log4j layout `[%d] %p %m (%c)%n`, Kafka 2.8+):

    [2026-11-22 10:15:42,317] DEBUG Completed request:{...json...} (kafka.request.logger)

or, from a Kafka 4.x broker whose log4j2 layout prints microseconds (`%d{DEFAULT_MICROS}`):

    [2026-11-22 10:15:42,317408] DEBUG Completed request:{...json...} (kafka.request.logger)

Every line gets a `status`: `parsed` (it yields silver rows), `unused` (a request type or log line the
pipeline does not use; `detail` says which) or `quarantined` (`detail` says why). Classification and
JSON parsing happen in Arrow (`ackreplay.ingest.request_log_parser`); the functions here turn its rows into
the table contracts. `with_log_fields` and `with_event_time` are shared with the broker-log ingest.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ackreplay.schemas import tables
from ackreplay.transforms.common import conform, literal_map, plus_ms

_MARKER = "Completed request:"
_LOGGER_SUFFIX = " (kafka.request.logger)"
# Spark parses 1 to 6 fraction digits with `SSSSSS`, so one format reads both log4j stamps:
# `,SSS` (Kafka's default `%d`) and `,SSSSSS` (log4j2 `%d{DEFAULT_MICROS}`), keeping the µs.
_LOG_TIME_FORMAT = "yyyy-MM-dd HH:mm:ss,SSSSSS"
# 1-based position of the `]` that closes a `[yyyy-MM-dd HH:mm:ss,SSS]` or `[...,SSSSSS]` stamp.
_MS_CLOSE, _US_CLOSE = len("[2026-11-20 10:00:00,123]"), len("[2026-11-20 10:00:00,123456]")


def with_log_fields(lines_df: DataFrame) -> DataFrame:
    """Split the log4j prefix: `log_time_local` (zone-less), `log_level`, `logger`, `json_text`."""
    line = F.col("line")
    close_at = F.when(F.substring(line, _MS_CLOSE, 1) == F.lit("]"), F.lit(_MS_CLOSE)).when(
        F.substring(line, _US_CLOSE, 1) == F.lit("]"), F.lit(_US_CLOSE)
    )
    has_time = line.startswith("[") & close_at.isNotNull()
    marker_at = F.locate(_MARKER, line)
    suffix_len = F.when(line.endswith(_LOGGER_SUFFIX), F.lit(len(_LOGGER_SUFFIX))).otherwise(F.lit(0))
    json_len = F.length(line) - marker_at - F.lit(len(_MARKER) - 1) - suffix_len
    return lines_df.withColumns(
        {
            "log_time_local": F.when(
                has_time, F.try_to_timestamp(F.substring(line, F.lit(2), close_at - 2), F.lit(_LOG_TIME_FORMAT))
            ),
            "log_level": F.when(has_time, F.substring_index(F.substring(line, close_at + 2, F.lit(8)), " ", 1)),
            "logger": F.regexp_extract(line, r"\(([^()\s]+)\)\s*$", 1),
            "json_text": F.when(marker_at > 0, F.substring(line, marker_at + F.lit(len(_MARKER)), json_len)),
        }
    )


def with_event_time(
    df: DataFrame,
    zones: dict[str, str],
    default_zone: str,
    clock_offsets_ms: dict[str, float],
) -> DataFrame:
    """`t_log` (UTC) from the zone-less log time, the cluster's zone and the broker's clock offset.

    `zones` maps cluster -> IANA zone; `clock_offsets_ms` maps "cluster/broker_id" -> ms the broker's
    clock runs ahead (subtracted).
    """
    zone = F.coalesce(F.try_element_at(literal_map(zones), F.col("cluster")), F.lit(default_zone))
    offset = F.coalesce(
        F.try_element_at(
            literal_map({k: str(v) for k, v in clock_offsets_ms.items()}, "double"),
            F.concat_ws("/", F.col("cluster"), F.col("broker_id").cast("string")),
        ),
        F.lit(0.0),
    )
    t_log = plus_ms(F.to_utc_timestamp(F.col("log_time_local"), zone), -offset)
    first_local = F.try_to_timestamp(F.col("first_log_time"), F.lit(_LOG_TIME_FORMAT))
    return df.withColumns(
        {
            "t_log": t_log,
            # Lines without a readable time fall in the date of the file's first timed line.
            "event_date": F.to_date(F.coalesce(t_log, F.to_utc_timestamp(first_local, zone))),
        }
    )


def with_local_log_time(rows_df: DataFrame) -> DataFrame:
    """The parser's zone-less `log_time_local` as the TIMESTAMP `with_event_time` converts."""
    return rows_df.withColumn("log_time_local", F.col("log_time_local").cast("timestamp"))


def with_request_times(rows_df: DataFrame) -> DataFrame:
    """`t_start`, `t_dequeue`, `t_local_done` from the log time and the line's timing fields."""
    t_start = plus_ms(F.col("t_log"), -F.col("total_time_ms"))
    t_dequeue = plus_ms(t_start, F.col("request_queue_time_ms"))
    return rows_df.withColumns(
        {"t_start": t_start, "t_dequeue": t_dequeue, "t_local_done": plus_ms(t_dequeue, F.col("local_time_ms"))}
    )


def select_request_log_lines(rows_df: DataFrame) -> DataFrame:
    """The bronze `request_log_lines` rows: one per input line."""
    return conform(rows_df.filter(F.col("row_kind") == "line"), tables.REQUEST_LOG_LINES)


def select_quarantine(rows_df: DataFrame) -> DataFrame:
    """Quarantined lines in the `quarantine` contract (stage `request_log`, the reason from `detail`)."""
    quarantined = rows_df.filter((F.col("row_kind") == "line") & (F.col("status") == "quarantined"))
    return conform(
        quarantined.withColumns({"stage": F.lit("request_log"), "reason": F.col("detail")}), tables.QUARANTINE
    )


def select_produce_requests(rows_df: DataFrame) -> DataFrame:
    """One row per (parsed PRODUCE line, topic-partition), in the `produce_requests` contract."""
    produce = rows_df.filter(F.col("row_kind") == "produce").transform(with_request_times)
    t_ack_observed = F.when(F.col("acks") == -1, plus_ms(F.col("t_local_done"), F.col("remote_time_ms")))
    return conform(produce.withColumn("t_ack_observed", t_ack_observed), tables.PRODUCE_REQUESTS)
