"""Request-log lines -> parsed, classified lines (bronze) -> PRODUCE and follower FETCH rows (silver).

A line looks like (log4j layout `[%d] %p %m (%c)%n`, Kafka 2.8+):

    [2026-11-22 10:15:42,317] DEBUG Completed request:{...json...} (kafka.request.logger)

Every line gets a `status`: `parsed` (it yields silver rows), `unused` (a request type or log line the
pipeline does not use; `detail` says which) or `quarantined` (`detail` says why).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from schemas import tables
from schemas.request_log import METADATA_TOPIC_ID, METADATA_TOPIC_NAME, REQUEST_LOG_JSON_DDL
from transforms.common import conform, literal_map, plus_ms

_MARKER = "Completed request:"
_LOGGER_SUFFIX = " (kafka.request.logger)"
_LOG_TIME_FORMAT = "yyyy-MM-dd HH:mm:ss,SSS"


def with_log_fields(lines_df: DataFrame) -> DataFrame:
    """Split the log4j prefix: `log_time_local` (zone-less), `log_level`, `logger`, `json_text`."""
    line = F.col("line")
    has_time = line.startswith("[") & (F.substring(line, 25, 1) == F.lit("]"))
    marker_at = F.locate(_MARKER, line)
    suffix_len = F.when(line.endswith(_LOGGER_SUFFIX), F.lit(len(_LOGGER_SUFFIX))).otherwise(F.lit(0))
    json_len = F.length(line) - marker_at - F.lit(len(_MARKER) - 1) - suffix_len
    return lines_df.withColumns(
        {
            "log_time_local": F.when(
                has_time, F.try_to_timestamp(F.substring(line, 2, 23), F.lit(_LOG_TIME_FORMAT))
            ),
            "log_level": F.when(has_time, F.substring_index(F.substring(line, 27, 8), " ", 1)),
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


# The request header comes first in every line (`requestDescMetrics`), and a follower FETCH names its
# replica id first in `request` (`replicaId` up to v14, tagged `replicaState` from v15).
_API_NAME = r'^\{"isForwarded":(?:true|false),"requestHeader":\{[^{}]*"requestApiKeyName":"([A-Z_]+)"'
_FOLLOWER = r'"request":\{(?:"clusterId":(?:null|"[^"]*"),)?"(?:replicaState":\{"replicaId"|replicaId"):\d'


def with_parsed_json(df: DataFrame) -> DataFrame:
    """`api_hint` from the line's header, and `req`: the parsed JSON of lines the pipeline uses.

    PRODUCE and follower FETCH lines (and lines whose header cannot be read cheaply) are parsed with
    Spark's JSON reader; the other request types (consumer fetches, METADATA, ...) are classified from
    their header alone, which saves parsing a large share of the log.
    """
    head = F.substring(F.col("json_text"), 1, 512)
    api_hint = F.regexp_extract(head, _API_NAME, 1)
    needs_parse = (api_hint == "") | (api_hint == "PRODUCE") | ((api_hint == "FETCH") & head.rlike(_FOLLOWER))
    # acks=0 and closed connections log `"response":""`; null keeps the rest of the struct typed.
    text = F.replace(F.col("json_text"), F.lit('"response":""'), F.lit('"response":null'))
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"}
    return df.withColumn("api_hint", F.when(F.col("json_text").isNotNull(), api_hint)).withColumn(
        "req", F.when(needs_parse, F.from_json(text, REQUEST_LOG_JSON_DDL, options))
    )


def _topic_name(topic_ids: Column, name: Column, topic_id: Column) -> Column:
    key = F.concat_ws("/", F.col("cluster"), topic_id)
    return F.coalesce(name, F.try_element_at(topic_ids, key))


def with_line_status(df: DataFrame, topic_ids: dict[str, str]) -> DataFrame:
    """Classify each line: `status` parsed | quarantined | unused, `detail`, `api_key_name`, `follower_id`.

    `topic_ids` maps "cluster/topicId" -> topic name (from topics.txt); a PRODUCE or follower FETCH
    naming an unknown topic id is quarantined, since its rows could not be attributed to a topic.
    """
    ids = literal_map(topic_ids)
    req = F.col("req")
    api = F.coalesce(req["requestHeader"]["requestApiKeyName"], F.nullif(F.col("api_hint"), F.lit("")))
    follower_id = F.coalesce(req["request"]["replicaState"]["replicaId"], req["request"]["replicaId"])
    timings_missing = (
        req["totalTimeMs"].isNull()
        | req["requestQueueTimeMs"].isNull()
        | req["localTimeMs"].isNull()
        | req["remoteTimeMs"].isNull()
        | req["responseQueueTimeMs"].isNull()
        | req["sendTimeMs"].isNull()
    )
    is_metadata_fetch = F.exists(
        req["request"]["topics"],
        lambda t: (t["topic"] == METADATA_TOPIC_NAME) | (t["topicId"] == METADATA_TOPIC_ID),
    )
    unknown_produce_topic = F.exists(
        req["request"]["topicData"],
        lambda t: t["name"].isNull()
        & F.try_element_at(ids, F.concat_ws("/", F.col("cluster"), t["topicId"])).isNull(),
    )
    unknown_fetch_topic = F.exists(
        req["request"]["topics"],
        lambda t: t["topic"].isNull()
        & F.try_element_at(ids, F.concat_ws("/", F.col("cluster"), t["topicId"])).isNull(),
    )
    quarantined, parsed, unused = F.lit("quarantined"), F.lit("parsed"), F.lit("unused")
    rules: list[tuple[Column, Column, Column]] = [
        (F.col("read_error").isNotNull(), quarantined, F.col("read_error")),
        (
            F.col("log_time_local").isNull(),
            quarantined,
            F.lit("not a log4j line '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)'"),
        ),
        (
            F.col("json_text").isNull() & F.col("logger").startswith("kafka.network.RequestChannel"),
            unused,
            F.lit("RequestChannel trace line"),
        ),
        (F.col("json_text").isNull(), quarantined, F.lit("not a 'Completed request:' line")),
        (
            F.col("json_text").startswith("RequestHeader("),
            quarantined,
            F.lit("pre-2.8 text request log format is not supported"),
        ),
        # not parsed: a request type the pipeline does not use, known from its header
        (req.isNull() & (api == "FETCH"), unused, F.lit("FETCH from a consumer")),
        (req.isNull(), unused, api),
        (
            req["_corrupt_record"].isNotNull(),
            quarantined,
            F.when(req["requestHeader"]["requestApiKeyName"].isNull(), F.lit("malformed or truncated JSON")).otherwise(
                F.lit("JSON field of an unexpected type")
            ),
        ),
        (api.isNull(), quarantined, F.lit("no requestHeader.requestApiKeyName")),
        # PRODUCE
        (
            (api == "PRODUCE") & (timings_missing | req["request"]["acks"].isNull()),
            quarantined,
            F.lit("PRODUCE line without timing fields or acks"),
        ),
        (
            (api == "PRODUCE") & req["request"]["topicData"].isNull(),
            quarantined,
            F.lit("PRODUCE line without topicData"),
        ),
        (
            (api == "PRODUCE") & (req["request"]["acks"] != 0) & req["response"].isNull(),
            quarantined,
            F.lit("PRODUCE with acks != 0 but no response"),
        ),
        ((api == "PRODUCE") & unknown_produce_topic, quarantined, F.lit("unknown topic id (not in topics.txt)")),
        (api == "PRODUCE", parsed, F.lit(None).cast("string")),
        # FETCH
        ((api == "FETCH") & (F.coalesce(follower_id, F.lit(-1)) < 0), unused, F.lit("FETCH from a consumer")),
        ((api == "FETCH") & is_metadata_fetch, unused, F.lit(f"FETCH of {METADATA_TOPIC_NAME}")),
        (
            (api == "FETCH") & (timings_missing | req["request"]["topics"].isNull()),
            quarantined,
            F.lit("follower FETCH line without timing fields or topics"),
        ),
        ((api == "FETCH") & unknown_fetch_topic, quarantined, F.lit("unknown topic id (not in topics.txt)")),
        (api == "FETCH", parsed, F.lit(None).cast("string")),
    ]
    status, detail = unused, api
    for condition, rule_status, rule_detail in reversed(rules):
        status = F.when(condition, rule_status).otherwise(status)
        detail = F.when(condition, rule_detail).otherwise(detail)
    return df.withColumns(
        {"status": status, "detail": detail, "api_key_name": api, "follower_id": follower_id}
    )


def _request_times(df: DataFrame) -> DataFrame:
    req = F.col("req")
    t_start = plus_ms(F.col("t_log"), -req["totalTimeMs"])
    t_dequeue = plus_ms(t_start, req["requestQueueTimeMs"])
    return df.withColumns(
        {"t_start": t_start, "t_dequeue": t_dequeue, "t_local_done": plus_ms(t_dequeue, req["localTimeMs"])}
    )


def explode_produce_partitions(lines_df: DataFrame, topic_ids: dict[str, str]) -> DataFrame:
    """One row per (parsed PRODUCE line, topic-partition), in the `produce_requests` contract."""
    ids = literal_map(topic_ids)
    req = F.col("req")
    produce = (
        lines_df.filter((F.col("status") == "parsed") & (F.col("api_key_name") == "PRODUCE"))
        .transform(_request_times)
        .select("*", F.explode(req["request"]["topicData"]).alias("td"))
        .select("*", F.explode(F.col("td")["partitionData"]).alias("pd"))
    )
    td, pd = F.col("td"), F.col("pd")
    response_topic = F.try_element_at(
        F.filter(
            req["response"]["responses"],
            lambda r: r["name"].eqNullSafe(td["name"]) & r["topicId"].eqNullSafe(td["topicId"]),
        ),
        F.lit(1),
    )
    response_partition = F.try_element_at(
        F.filter(response_topic["partitionResponses"], lambda p: p["index"] == pd["index"]), F.lit(1)
    )
    acks = req["request"]["acks"]
    t_ack_observed = F.when(
        acks == -1, plus_ms(F.col("t_local_done"), req["remoteTimeMs"])
    )
    return conform(
        produce.withColumns(
            {
                "topic": _topic_name(ids, td["name"], td["topicId"]),
                "topic_id": td["topicId"],
                "partition": pd["index"],
                "api_version": req["requestHeader"]["requestApiVersion"],
                "client_id": req["requestHeader"]["clientId"],
                "correlation_id": req["requestHeader"]["correlationId"],
                "transactional_id": req["request"]["transactionalId"],
                "acks": acks,
                "timeout_ms": req["request"]["timeoutMs"],
                "records_size_bytes": pd["recordsSizeInBytes"],
                "error_code": response_partition["errorCode"],
                "error_message": response_partition["errorMessage"],
                "base_offset": response_partition["baseOffset"],
                "log_append_time_ms": response_partition["logAppendTimeMs"],
                "log_start_offset": response_partition["logStartOffset"],
                "t_ack_observed": t_ack_observed,
                "total_time_ms": req["totalTimeMs"],
                "request_queue_time_ms": req["requestQueueTimeMs"],
                "local_time_ms": req["localTimeMs"],
                "remote_time_ms": req["remoteTimeMs"],
                "throttle_time_ms": req["throttleTimeMs"],
                "response_queue_time_ms": req["responseQueueTimeMs"],
                "send_time_ms": req["sendTimeMs"],
                "principal": req["principal"],
                "listener": req["listener"],
                "client_software_name": req["clientInformation"]["softwareName"],
                "client_software_version": req["clientInformation"]["softwareVersion"],
            }
        ),
        tables.PRODUCE_REQUESTS,
    )
