"""The ingest's DuckDB peer: the same request-log files parsed into the same bronze and silver rows, as Parquet.

What it does is what the request-log ingest does up to the Delta commit (README "Tables"): one bronze row per
line (the text, its log time, `status` parsed / unused / quarantined and `detail`), one PRODUCE row per
(request, topic-partition) with the matching response partition and the request's timing fields, and one
follower FETCH row per (request, topic-partition) with its response partition; each written as one Parquet
file. It does not carry fetch sessions over (`follower_fetches.carried_*`), convert time zones or resolve
topic ids: a lower bound on the work, so the ratio against it flatters DuckDB, not ackreplay.

    python -m bench.ingest_peer_duckdb <input folder> <output folder>
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import duckdb

# The JSON fields both engines read (the subset of schemas.request_log.REQUEST_LOG_JSON_SCHEMA the rows need).
_TIMINGS = {
    name: "DOUBLE"
    for name in (
        "totalTimeMs",
        "requestQueueTimeMs",
        "localTimeMs",
        "remoteTimeMs",
        "responseQueueTimeMs",
        "sendTimeMs",
    )
}
_STRUCTURE = {
    "requestHeader": {
        "requestApiVersion": "INTEGER",
        "correlationId": "INTEGER",
        "clientId": "VARCHAR",
        "requestApiKeyName": "VARCHAR",
    },
    "request": {
        "replicaId": "INTEGER",
        "replicaState": {"replicaId": "INTEGER"},
        "transactionalId": "VARCHAR",
        "acks": "SMALLINT",
        "timeoutMs": "INTEGER",
        "maxWaitMs": "INTEGER",
        "sessionId": "INTEGER",
        "sessionEpoch": "INTEGER",
        "topicData": [
            {
                "name": "VARCHAR",
                "topicId": "VARCHAR",
                "partitionData": [{"index": "INTEGER", "recordsSizeInBytes": "INTEGER"}],
            }
        ],
        "topics": [
            {
                "topic": "VARCHAR",
                "topicId": "VARCHAR",
                "partitions": [
                    {
                        "partition": "INTEGER",
                        "fetchOffset": "BIGINT",
                        "currentLeaderEpoch": "INTEGER",
                        "lastFetchedEpoch": "INTEGER",
                        "logStartOffset": "BIGINT",
                    }
                ],
            }
        ],
    },
    "response": {
        "errorCode": "SMALLINT",
        "responses": [
            {
                "name": "VARCHAR",
                "topic": "VARCHAR",
                "topicId": "VARCHAR",
                "partitionResponses": [
                    {
                        "index": "INTEGER",
                        "errorCode": "SMALLINT",
                        "baseOffset": "BIGINT",
                        "logAppendTimeMs": "BIGINT",
                        "logStartOffset": "BIGINT",
                        "errorMessage": "VARCHAR",
                    }
                ],
                "partitions": [{"partitionIndex": "INTEGER", "errorCode": "SMALLINT", "highWatermark": "BIGINT"}],
            }
        ],
    },
    "connection": "VARCHAR",
    "throttleTimeMs": "BIGINT",
    "principal": "VARCHAR",
    "listener": "VARCHAR",
    **_TIMINGS,
}

_MARKER = "] DEBUG Completed request:"


def _structure_sql() -> str:
    import json

    return json.dumps(_STRUCTURE).replace("'", "''")


def ingest(input_dir: str, out_dir: str, threads: int | None = None) -> dict[str, int]:
    """Parse every `kafka-request.log*` under `input_dir` into bronze.parquet, produce.parquet and fetch.parquet in
    `out_dir`; the rows written per file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(str(p) for p in Path(input_dir).rglob("kafka-request.log*"))
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {threads}")
    file_list = ", ".join(f"'{f}'" for f in files)
    # One VARCHAR column per line: no delimiter, quote or escape can split it (the byte 0x01 occurs in no log).
    con.execute(f"""
        CREATE TEMP TABLE lines AS
        SELECT filename AS source_file,
               row_number() OVER (PARTITION BY filename) AS line_number,
               line
        FROM read_csv([{file_list}], columns = {{'line': 'VARCHAR'}}, delim = '\x01', quote = '', escape = '',
                      header = false, auto_detect = false, filename = true, max_line_size = 16777216,
                      strict_mode = false, null_padding = true)
    """)
    con.execute(f"""
        CREATE TEMP TABLE parsed AS
        SELECT source_file, line_number, line,
               try_strptime(substr(line, 2, 23), '%Y-%m-%d %H:%M:%S,%g') AS log_time,
               CASE WHEN position('{_MARKER}' IN line) > 0 AND json_valid(body)
                    THEN json_transform(body, '{_structure_sql()}') END AS j,
               position('{_MARKER}' IN line) > 0 AS is_request
        FROM (SELECT *, regexp_extract(line, 'Completed request:(.*) \\(kafka\\.request\\.logger\\)$', 1) AS body
              FROM lines)
    """)
    con.execute("""
        CREATE TEMP TABLE classified AS
        SELECT *, j.requestHeader.requestApiKeyName AS api,
               coalesce(j.request.replicaState.replicaId, j.request.replicaId) AS follower_id,
               CASE WHEN NOT is_request THEN 'quarantined'
                    WHEN j IS NULL THEN 'quarantined'
                    WHEN j.requestHeader.requestApiKeyName = 'PRODUCE' THEN 'parsed'
                    WHEN j.requestHeader.requestApiKeyName = 'FETCH'
                         AND coalesce(j.request.replicaState.replicaId, j.request.replicaId) >= 0 THEN 'parsed'
                    ELSE 'unused' END AS status
        FROM parsed
    """)
    con.execute(f"""
        COPY (SELECT source_file, line_number, line, log_time, status,
                     CASE WHEN NOT is_request THEN 'not a ''Completed request:'' line'
                          WHEN j IS NULL THEN 'malformed or truncated JSON'
                          WHEN status = 'unused' AND api = 'FETCH' THEN 'FETCH from a consumer'
                          WHEN status = 'unused' THEN api END AS detail
              FROM classified) TO '{out / "bronze.parquet"}' (FORMAT parquet)
    """)
    con.execute(f"""
        COPY (
          WITH req AS (
            SELECT source_file, line_number, log_time, j, unnest(j.request.topicData) AS t
            FROM classified WHERE status = 'parsed' AND api = 'PRODUCE'),
          req_p AS (SELECT *, unnest(t.partitionData) AS p FROM req),
          resp AS (
            SELECT source_file, line_number, unnest(j.response.responses) AS r
            FROM classified WHERE status = 'parsed' AND api = 'PRODUCE'),
          resp_p AS (SELECT source_file, line_number, r.name AS name, r.topicId AS topic_id,
                            unnest(r.partitionResponses) AS pr FROM resp)
          SELECT q.source_file, q.line_number, q.log_time, q.t.name AS topic, q.t.topicId AS topic_id,
                 q.p.index AS partition, q.p.recordsSizeInBytes AS records_size_bytes,
                 q.j.request.acks AS acks, q.j.request.timeoutMs AS timeout_ms,
                 q.j.requestHeader.clientId AS client_id, q.j.requestHeader.correlationId AS correlation_id,
                 q.j.requestHeader.requestApiVersion AS api_version, q.j.connection AS connection,
                 q.j.principal AS principal, q.j.listener AS listener,
                 r.pr.errorCode AS error_code, r.pr.errorMessage AS error_message, r.pr.baseOffset AS base_offset,
                 r.pr.logAppendTimeMs AS log_append_time_ms, r.pr.logStartOffset AS log_start_offset,
                 q.j.totalTimeMs AS total_time_ms, q.j.requestQueueTimeMs AS request_queue_time_ms,
                 q.j.localTimeMs AS local_time_ms, q.j.remoteTimeMs AS remote_time_ms,
                 q.j.throttleTimeMs AS throttle_time_ms, q.j.responseQueueTimeMs AS response_queue_time_ms,
                 q.j.sendTimeMs AS send_time_ms
          FROM req_p q LEFT JOIN resp_p r
            ON q.source_file = r.source_file AND q.line_number = r.line_number
           AND (q.t.name = r.name OR q.t.topicId = r.topic_id) AND q.p.index = r.pr.index
        ) TO '{out / "produce.parquet"}' (FORMAT parquet)
    """)
    con.execute(f"""
        COPY (
          WITH req AS (
            SELECT source_file, line_number, log_time, follower_id, j, unnest(j.request.topics) AS t
            FROM classified WHERE status = 'parsed' AND api = 'FETCH'),
          req_p AS (SELECT *, unnest(t.partitions) AS p FROM req),
          resp AS (
            SELECT source_file, line_number, unnest(j.response.responses) AS r
            FROM classified WHERE status = 'parsed' AND api = 'FETCH'),
          resp_p AS (SELECT source_file, line_number, r.topic AS topic, r.topicId AS topic_id,
                            unnest(r.partitions) AS pr FROM resp)
          SELECT q.source_file, q.line_number, q.log_time, q.follower_id, q.t.topic AS topic,
                 q.t.topicId AS topic_id, q.p.partition AS partition, q.p.fetchOffset AS fetch_offset,
                 q.p.currentLeaderEpoch AS current_leader_epoch, q.p.lastFetchedEpoch AS last_fetched_epoch,
                 q.p.logStartOffset AS follower_log_start_offset,
                 q.j.request.sessionId AS session_id, q.j.request.sessionEpoch AS session_epoch,
                 q.j.response.errorCode AS request_error_code, q.j.request.maxWaitMs AS max_wait_ms,
                 q.j.requestHeader.correlationId AS correlation_id,
                 q.j.requestHeader.requestApiVersion AS api_version,
                 r.pr.errorCode AS partition_error_code, r.pr.highWatermark AS high_watermark,
                 q.j.totalTimeMs AS total_time_ms, q.j.requestQueueTimeMs AS request_queue_time_ms,
                 q.j.localTimeMs AS local_time_ms, q.j.remoteTimeMs AS remote_time_ms
          FROM req_p q LEFT JOIN resp_p r
            ON q.source_file = r.source_file AND q.line_number = r.line_number
           AND (q.t.topic = r.topic OR q.t.topicId = r.topic_id) AND q.p.partition = r.pr.partitionIndex
        ) TO '{out / "fetch.parquet"}' (FORMAT parquet)
    """)
    counts = {
        name: con.execute(f"SELECT count(*) FROM read_parquet('{out / (name + '.parquet')}')").fetchone()[0]
        for name in ("bronze", "produce", "fetch")
    }
    con.close()
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("out")
    args = parser.parse_args(argv)
    started = time.monotonic()
    counts = ingest(args.input, args.out)
    print(f"{counts} in {time.monotonic() - started:.1f} s (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
