"""Schemas of request-log parsing: the JSON body of a `Completed request:` line (KIP-673, Kafka 2.8
to 4.x), and the rows the reader task emits.

One union JSON schema covers PRODUCE and FETCH so each line is parsed once, by Arrow's C++ JSON
reader. Field names and types follow the generated JSON converters (`*JsonConverter.write`, records
elided as `recordsSizeInBytes`): Produce v3-v13 (`name` up to v12, `topicId` from v13), Fetch v4-v17
(`replicaId` up to v14, `replicaState.replicaId` from v15; `topic` up to v12, `topicId` from v13).
Fields not listed here are skipped by the parser; a listed field of another JSON type makes the
line's parse fail (it is quarantined).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

_i32, _i64, _f64, _str, _bool = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()


def _struct(**fields: pa.DataType) -> pa.StructType:
    return pa.struct(list(fields.items()))


REQUEST_LOG_JSON_SCHEMA = pa.schema(
    {
        "requestHeader": _struct(
            requestApiKey=_i32, requestApiVersion=_i32, correlationId=_i32, clientId=_str, requestApiKeyName=_str
        ),
        "request": _struct(
            transactionalId=_str,
            acks=_i32,
            timeoutMs=_i32,
            topicData=pa.list_(
                _struct(
                    name=_str,
                    topicId=_str,
                    partitionData=pa.list_(_struct(index=_i32, recordsSizeInBytes=_i32)),
                )
            ),
            replicaId=_i32,
            replicaState=_struct(replicaId=_i32, replicaEpoch=_i64),
            maxWaitMs=_i32,
            sessionId=_i32,
            sessionEpoch=_i32,
            topics=pa.list_(
                _struct(
                    topic=_str,
                    topicId=_str,
                    partitions=pa.list_(
                        _struct(
                            partition=_i32,
                            currentLeaderEpoch=_i32,
                            fetchOffset=_i64,
                            lastFetchedEpoch=_i32,
                            logStartOffset=_i64,
                        )
                    ),
                )
            ),
            forgottenTopicsData=pa.list_(_struct(topic=_str, topicId=_str, partitions=pa.list_(_i32))),
        ),
        "response": _struct(
            errorCode=_i32,
            sessionId=_i32,
            responses=pa.list_(
                _struct(
                    name=_str,
                    topic=_str,
                    topicId=_str,
                    partitionResponses=pa.list_(
                        _struct(
                            index=_i32,
                            errorCode=_i32,
                            baseOffset=_i64,
                            logAppendTimeMs=_i64,
                            logStartOffset=_i64,
                            errorMessage=_str,
                        )
                    ),
                    partitions=pa.list_(
                        _struct(
                            partitionIndex=_i32,
                            errorCode=_i32,
                            highWatermark=_i64,
                            divergingEpoch=_struct(epoch=_i32, endOffset=_i64),
                        )
                    ),
                )
            ),
        ),
        "totalTimeMs": _f64,
        "requestQueueTimeMs": _f64,
        "localTimeMs": _f64,
        "remoteTimeMs": _f64,
        "throttleTimeMs": _i64,
        "responseQueueTimeMs": _f64,
        "sendTimeMs": _f64,
        "principal": _str,
        "listener": _str,
        "connection": _str,
        "clientInformation": _struct(softwareName=_str, softwareVersion=_str),
    }
)

# What the parser emits per input line and per silver row, next to the reader's origin columns
# (file or cluster/broker/source file, line number). `row_kind` says which columns are set:
#   line           every input line: the bronze columns (text, status, detail, api_key_name)
#   produce        one (PRODUCE line, topic-partition): request and partition columns
#   fetch          one (follower FETCH line, listed partition): request and partition columns
#   fetch_request  one follower FETCH request in an incremental session (its time ends carry-over spans)
#   forgotten      one partition a follower FETCH request removes from its session
PARSED_ROW_FIELDS: list[tuple[str, pa.DataType]] = [
    ("row_kind", _str),
    ("log_time_local", pa.timestamp("us")),  # zone-less broker time; Spark converts it with the cluster's zone
    ("line", _str),
    ("line_bytes", _i32),
    ("status", _str),
    ("detail", _str),
    ("api_key_name", _str),
    ("follower_id", _i32),
    ("api_version", _i32),
    ("correlation_id", _i32),
    ("client_id", _str),
    ("transactional_id", _str),
    ("acks", _i32),
    ("timeout_ms", _i32),
    ("topic", _str),
    ("topic_id", _str),
    ("partition", _i32),
    ("records_size_bytes", _i32),
    ("error_code", _i32),
    ("error_message", _str),
    ("base_offset", _i64),
    ("log_append_time_ms", _i64),
    ("log_start_offset", _i64),
    ("session_id", _i32),
    ("session_epoch", _i32),
    ("request_error_code", _i32),
    ("max_wait_ms", _i32),
    ("fetch_offset", _i64),
    ("current_leader_epoch", _i32),
    ("last_fetched_epoch", _i32),
    ("follower_log_start_offset", _i64),
    ("partition_error_code", _i32),
    ("high_watermark", _i64),
    ("diverging_epoch", _bool),
    ("total_time_ms", _f64),
    ("request_queue_time_ms", _f64),
    ("local_time_ms", _f64),
    ("remote_time_ms", _f64),
    ("throttle_time_ms", _i64),
    ("response_queue_time_ms", _f64),
    ("send_time_ms", _f64),
    ("principal", _str),
    ("listener", _str),
    ("connection", _str),
    ("client_software_name", _str),
    ("client_software_version", _str),
]

# The same rows as Spark sees them (zone-less timestamps as timestamp_ntz).
PARSED_ROW_SPARK_SCHEMA = from_arrow_schema(pa.schema(PARSED_ROW_FIELDS), prefer_timestamp_ntz=True)

# KRaft's metadata log (`__cluster_metadata`) has this fixed topic id (Uuid.METADATA_TOPIC_ID).
METADATA_TOPIC_NAME = "__cluster_metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
