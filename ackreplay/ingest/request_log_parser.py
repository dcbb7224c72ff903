"""Request-log lines -> classified bronze rows and silver PRODUCE / follower-FETCH rows, in Arrow.

Runs inside the line reader's task (`mapInArrow`), on batches of numbered lines, so the text is
read, classified and parsed in one pass without going through Spark rows first:

1. the log4j prefix and the `Completed request:` body are cut with vectorized string kernels;
2. the request type comes from the line's header (`requestApiKeyName`, and for FETCH whether the
   request names a replica), so consumer fetches, METADATA and other unused requests are never
   parsed;
3. PRODUCE and follower FETCH bodies are parsed together by Arrow's C++ JSON reader with an explicit
   schema (a malformed line is isolated by bisection and quarantined with its reason);
4. the nested topic/partition lists are flattened with `list_flatten`/`list_parent_indices`, and
   responses are matched to requests by (line, topic, partition) with `index_in`.

Every line gets a `status` (`parsed`, `unused` with the request type in `detail`, or `quarantined`
with the reason in `detail`); the rules are the table in `_classify_parsed` and `classify_lines`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ackreplay.kafka_lines import LOG_STAMP_PATTERN
from ackreplay.schemas.request_log import (
    METADATA_TOPIC_ID,
    METADATA_TOPIC_NAME,
    PARSED_ROW_FIELDS,
    REQUEST_LOG_JSON_SCHEMA,
)

_MARKER = "Completed request:"
_LOGGER_SUFFIX = " (kafka.request.logger)"
# One anchored regex reads what the classification needs from the start of a line: the log time;
# whether the layout is the standard `[time] DEBUG Completed request:` (the body then starts at a
# fixed byte offset per stamp layout); the request type from the header, which comes first in every
# line (`requestDescMetrics`); and whether `request` starts with a replica id (`replicaId` up to v14,
# tagged `replicaState` from v15), which makes a FETCH a follower's. Nothing after that is scanned.
# The stamp is log4j's `%d`: `,SSS` (Kafka's default layout) or `,SSSSSS` (log4j2's
# `%d{DEFAULT_MICROS}`, FixedDateFormat.FixedFormat, which a Kafka 4.x broker can be set to print).
_LINE_START = (
    rf"^\[(?P<time>{LOG_STAMP_PATTERN})\]"
    r"(?P<standard> DEBUG Completed request:"
    r'(?:\{"isForwarded":(?:true|false),"requestHeader":\{[^{}]*"requestApiKeyName":"(?P<api>[A-Z_]+)"\}'
    r'(?P<follower>,"request":\{(?:"clusterId":(?:null|"[^"]*"),)?"(?:replicaState":\{"replicaId"|replicaId"):\d)?'
    r")?)?"
)
# Where the body starts, by the stamp's length: a millisecond stamp (23 characters) or a microsecond
# one (26), so the JSON is cut at one of two fixed offsets, each with one vectorised slice.
_MS_STAMP = len("2026-11-20 10:00:00,123")
_BODY_AT = {
    _MS_STAMP: len("[2026-11-20 10:00:00,123] DEBUG Completed request:"),
    _MS_STAMP + 3: len("[2026-11-20 10:00:00,123456] DEBUG Completed request:"),
}
_LOGGER = r"\((?P<logger>[^()\s]+)\)\s*$"

NOT_LOG4J = "not a log4j line '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)' (or ',SSSSSS')"
NOT_COMPLETED_REQUEST = "not a 'Completed request:' line"
PRE_28_FORMAT = "pre-2.8 text request log format is not supported"
MALFORMED_JSON = "malformed or truncated JSON"
UNEXPECTED_TYPE = "JSON field of an unexpected type"
NO_API_NAME = "no requestHeader.requestApiKeyName"
CONSUMER_FETCH = "FETCH from a consumer"
METADATA_FETCH = f"FETCH of {METADATA_TOPIC_NAME}"
UNKNOWN_TOPIC_ID = "unknown topic id (not in topics.txt)"
PRODUCE_WITHOUT_TIMINGS = "PRODUCE line without timing fields or acks"
PRODUCE_WITHOUT_TOPIC_DATA = "PRODUCE line without topicData"
PRODUCE_WITHOUT_RESPONSE = "PRODUCE with acks != 0 but no response"
FETCH_WITHOUT_TIMINGS = "follower FETCH line without timing fields or topics"

_TIMINGS = ("totalTimeMs", "requestQueueTimeMs", "localTimeMs", "remoteTimeMs", "responseQueueTimeMs", "sendTimeMs")
_PARSE_OPTIONS = pa_json.ParseOptions(explicit_schema=REQUEST_LOG_JSON_SCHEMA, unexpected_field_behavior="ignore")


# ---------------------------------------------------------------------------------------------
# Small Arrow helpers


def _field(array: pa.Array, *path: str) -> pa.Array:
    """A nested struct field; null where any parent is null."""
    for name in path:
        array = pc.struct_field(array, name)
    return array


def _mask(array) -> np.ndarray:
    """A boolean Arrow array as a NumPy mask (null -> False)."""
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)


def _flatten(lists: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The elements of a list array and, for each, the index of the list it came from."""
    return pc.list_flatten(lists), pc.list_parent_indices(lists).to_numpy().astype(np.int64)


def _key(*columns: pa.Array) -> pa.Array:
    """One string key per row from several columns; null is a value of its own (null-safe match)."""
    parts = [pc.fill_null(pc.cast(c, pa.string()), "\x01") for c in columns]
    return pc.binary_join_element_wise(*parts, "\x00")


def _lookup(keys: pa.Array, mapping: dict[str, str]) -> pa.Array:
    """`mapping[key]` per row (null when absent or when the key is null)."""
    if not mapping:
        return pa.nulls(len(keys), pa.string())
    names = list(mapping)
    return pc.take(pa.array([mapping[k] for k in names], pa.string()), pc.index_in(keys, pa.array(names, pa.string())))


def _selection(rows: np.ndarray, n: int) -> np.ndarray:
    selected = np.zeros(n, dtype=bool)
    selected[rows] = True
    return selected


def _any_per_parent(flags: np.ndarray, parents: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[parents[flags]] = True
    return out


# ---------------------------------------------------------------------------------------------
# Log4j prefix and body


def _log_time(stamp: pa.Array) -> pa.Array:
    """Zone-less log times from `yyyy-MM-dd HH:mm:ss,SSS` or `,SSSSSS` stamps, to the microsecond
    (null where missing or impossible)."""
    iso = pc.replace_substring(pc.fill_null(stamp, "1970-01-01 00:00:00,000"), ",", ".", max_replacements=1)
    try:
        times = pc.cast(iso, pa.timestamp("us"))  # 3 or 6 fraction digits, both exact in µs
    except pa.ArrowInvalid:  # e.g. month 13: parse one by one
        values: list[datetime | None] = []
        for text in iso.to_pylist():
            try:
                values.append(datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f"))
            except ValueError:
                values.append(None)
        times = pa.array(values, pa.timestamp("us"))
    return pc.if_else(pc.is_valid(stamp), times, pa.scalar(None, pa.timestamp("us")))


def _cut_bodies(lines: pa.Array, body_at: int) -> tuple[np.ndarray, pa.Array]:
    """Bodies of standard-layout lines (binary) whose body starts at `body_at`, up to the logger suffix
    if any: (positions in `lines`, in the order of the bodies; the bodies)."""
    with_suffix = _mask(pc.ends_with(lines, _LOGGER_SUFFIX.encode()))
    if with_suffix.all():
        return np.arange(len(lines)), pc.binary_slice(lines, body_at, -len(_LOGGER_SUFFIX))
    suffixed, cut = np.flatnonzero(with_suffix), np.flatnonzero(~with_suffix)
    bodies = pa.concat_arrays(
        [
            pc.binary_slice(pc.take(lines, pa.array(suffixed)), body_at, -len(_LOGGER_SUFFIX)),
            pc.binary_slice(pc.take(lines, pa.array(cut)), body_at),
        ]
    )
    return np.concatenate([suffixed, cut]), bodies


def _standard_bodies(line: pa.Array, rows: np.ndarray, stamp_length: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Bodies of standard-layout lines and the rows they belong to, in the order of the bodies.

    `stamp_length` (per line of `line`) picks the body's offset: lines with millisecond and with
    microsecond stamps are cut as two groups, each at its fixed offset (one group in the usual case).
    """
    if len(rows) == 0:
        return rows, pa.array([], pa.binary())
    out_rows, out_bodies = [], []
    for length, body_at in _BODY_AT.items():
        group = rows[stamp_length[rows] == length]
        if len(group) == 0:
            continue
        order, bodies = _cut_bodies(pc.take(line, pa.array(group)).cast(pa.binary()), body_at)
        out_rows.append(group[order])
        out_bodies.append(bodies)
    if len(out_rows) == 1:
        return out_rows[0], out_bodies[0]
    return np.concatenate(out_rows), pa.concat_arrays(out_bodies)


def _other_bodies(line: pa.Array, rows: np.ndarray) -> pa.Array:
    """Bodies of lines with `Completed request:` somewhere else (another level or prefix): rare, one by one."""
    out = []
    for i in rows:
        text = line[int(i)].as_py()
        text = text[text.index(_MARKER) + len(_MARKER) :]
        out.append((text[: -len(_LOGGER_SUFFIX)] if text.endswith(_LOGGER_SUFFIX) else text).encode())
    return pa.array(out, pa.binary())


# ---------------------------------------------------------------------------------------------
# JSON


def _failure_reason(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return MALFORMED_JSON
    return UNEXPECTED_TYPE if isinstance(value, dict) else MALFORMED_JSON


def _concatenated(bodies: pa.Array) -> pa.Buffer:
    """The bytes of a binary array's values, back to back (a view, no copy)."""
    offsets = np.frombuffer(bodies.buffers()[1], dtype=np.int32, count=len(bodies) + 1, offset=bodies.offset * 4)
    return bodies.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def parse_json_bodies(bodies: pa.Array) -> tuple[pa.StructArray, dict[int, str]]:
    """Parse JSON bodies (binary, one object each) into one struct row per body, and the bodies that failed.

    The bodies go to Arrow's C++ JSON reader back to back, as they lie in memory (it reads
    consecutive objects). Only bodies that start with `{` and end with `}` go in together, so a
    truncated body cannot merge with its neighbour; a block that fails, or yields another number of
    rows, is split in halves until the failing bodies are isolated: their rows are null and their
    index maps to the reason.
    """
    failures: dict[int, str] = {}

    def parse(block: pa.Array) -> pa.Table | None:
        if len(block) == 0:
            return REQUEST_LOG_JSON_SCHEMA.empty_table()
        data = _concatenated(block)
        try:
            table = pa_json.read_json(
                pa.BufferReader(data),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, data.size + 1)),
                parse_options=_PARSE_OPTIONS,
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        return table if table.num_rows == len(block) else None

    def parse_isolating(start: int, stop: int) -> list[pa.Table]:
        table = parse(bodies.slice(start, stop - start))
        if table is not None:
            return [table]
        if stop - start == 1:
            failures[start] = _failure_reason(bodies[start].as_py())
            return [pa.Table.from_pylist([{}], schema=REQUEST_LOG_JSON_SCHEMA)]
        middle = (start + stop) // 2
        return parse_isolating(start, middle) + parse_isolating(middle, stop)

    whole = _mask(pc.and_(pc.starts_with(bodies, b"{"), pc.ends_with(bodies, b"}")))
    if not whole.all():
        # parse well-delimited bodies together, the others one by one, and put the rows back in order
        good, bad = np.flatnonzero(whole), np.flatnonzero(~whole)
        good_rows, good_failures = parse_json_bodies(pc.take(bodies, pa.array(good)))
        failures = {int(good[i]): reason for i, reason in good_failures.items()}
        bad_tables = []
        for i in bad:
            table = parse(bodies.slice(int(i), 1))
            if table is None:
                failures[int(i)] = _failure_reason(bodies[int(i)].as_py())
                table = pa.Table.from_pylist([{}], schema=REQUEST_LOG_JSON_SCHEMA)
            bad_tables.append(table)
        bad_rows = _as_struct(pa.concat_tables(bad_tables), set())
        order = np.empty(len(bodies), dtype=np.int64)
        order[np.concatenate([good, bad])] = np.arange(len(bodies))
        rows = pc.take(pa.concat_arrays([good_rows, bad_rows]), pa.array(order))
        return _null_rows(rows, failures), failures
    return _as_struct(pa.concat_tables(parse_isolating(0, len(bodies))), set(failures)), failures


def _as_struct(table: pa.Table, null_rows: set[int]) -> pa.StructArray:
    table = table.combine_chunks()
    columns = [column.chunk(0) if column.num_chunks else pa.array([], column.type) for column in table.columns]
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[list(null_rows)] = True
    return pa.StructArray.from_arrays(columns, fields=list(REQUEST_LOG_JSON_SCHEMA), mask=pa.array(mask))


def _null_rows(rows: pa.StructArray, failures: dict[int, str]) -> pa.StructArray:
    if not failures:
        return rows
    valid = np.ones(len(rows), dtype=bool)
    valid[list(failures)] = False
    return pc.if_else(pa.array(valid), rows, pa.scalar(None, rows.type))


# ---------------------------------------------------------------------------------------------
# Classification


class _Rules:
    """First matching rule wins: `status` and `detail` per row."""

    def __init__(self, n: int):
        self.status = np.full(n, None, dtype=object)
        self.detail = np.full(n, None, dtype=object)
        self.done = np.zeros(n, dtype=bool)

    def add(self, mask: np.ndarray, status: str, detail) -> None:
        rows = mask & ~self.done
        self.status[rows] = status
        self.detail[rows] = detail[rows] if isinstance(detail, np.ndarray) else detail
        self.done |= rows


def _topic_keys(cluster: pa.Array, topic_id: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(cluster, topic_id, "/")


def _unknown_topics(cluster: pa.Array, topics: pa.Array, name_field: str, topic_ids: dict[str, str]) -> np.ndarray:
    """Per row: does any listed topic have neither a name nor a topic id that topics.txt knows?"""
    listed, parent = _flatten(topics)
    known = _lookup(_topic_keys(pc.take(cluster, pa.array(parent)), _field(listed, "topicId")), topic_ids)
    unknown = _mask(pc.and_(pc.is_null(_field(listed, name_field)), pc.is_null(known)))
    return _any_per_parent(unknown, parent, len(topics))


def _classify_parsed(
    parsed: pa.StructArray, failures: dict[int, str], api_hint: pa.Array, cluster: pa.Array, topic_ids: dict[str, str]
) -> tuple[_Rules, pa.Array, pa.Array]:
    """Status and detail of parsed lines, their request type and follower id."""
    n = len(parsed)
    request = _field(parsed, "request")
    api = pc.coalesce(_field(parsed, "requestHeader", "requestApiKeyName"), api_hint)
    follower_id = pc.coalesce(_field(request, "replicaState", "replicaId"), _field(request, "replicaId"))
    timings_missing = np.zeros(n, dtype=bool)
    for name in _TIMINGS:
        timings_missing |= _mask(pc.is_null(_field(parsed, name)))
    produce = _mask(pc.equal(api, "PRODUCE"))
    fetch = _mask(pc.equal(api, "FETCH"))
    topic_data = _field(request, "topicData")
    fetch_topics = _field(request, "topics")
    listed, parent = _flatten(fetch_topics)
    metadata = _any_per_parent(
        _mask(
            pc.or_kleene(
                pc.equal(_field(listed, "topic"), METADATA_TOPIC_NAME),
                pc.equal(_field(listed, "topicId"), METADATA_TOPIC_ID),
            )
        ),
        parent,
        n,
    )
    acks = _field(request, "acks")
    failed = np.zeros(n, dtype=bool)
    failed[list(failures)] = True
    failure_reason = np.full(n, None, dtype=object)
    for i, reason in failures.items():
        failure_reason[i] = reason

    rules = _Rules(n)
    rules.add(failed, "quarantined", failure_reason)
    rules.add(_mask(pc.is_null(api)), "quarantined", NO_API_NAME)
    rules.add(produce & (timings_missing | _mask(pc.is_null(acks))), "quarantined", PRODUCE_WITHOUT_TIMINGS)
    rules.add(produce & _mask(pc.is_null(topic_data)), "quarantined", PRODUCE_WITHOUT_TOPIC_DATA)
    rules.add(
        produce & _mask(pc.not_equal(acks, 0)) & _mask(pc.is_null(_field(parsed, "response"))),
        "quarantined",
        PRODUCE_WITHOUT_RESPONSE,
    )
    rules.add(produce & _unknown_topics(cluster, topic_data, "name", topic_ids), "quarantined", UNKNOWN_TOPIC_ID)
    rules.add(produce, "parsed", None)
    rules.add(fetch & ~_mask(pc.greater_equal(follower_id, 0)), "unused", CONSUMER_FETCH)
    rules.add(fetch & metadata, "unused", METADATA_FETCH)
    rules.add(fetch & (timings_missing | _mask(pc.is_null(fetch_topics))), "quarantined", FETCH_WITHOUT_TIMINGS)
    rules.add(fetch & _unknown_topics(cluster, fetch_topics, "topic", topic_ids), "quarantined", UNKNOWN_TOPIC_ID)
    rules.add(fetch, "parsed", None)
    rules.add(np.ones(n, dtype=bool), "unused", np.asarray(api.to_pylist(), dtype=object))
    return rules, api, follower_id


# ---------------------------------------------------------------------------------------------
# Silver rows


def _request_columns(parsed: pa.StructArray) -> dict[str, pa.Array]:
    """Columns every PRODUCE and FETCH row carries from its request."""
    header = _field(parsed, "requestHeader")
    return {
        "api_version": _field(header, "requestApiVersion"),
        "correlation_id": _field(header, "correlationId"),
        "client_id": _field(header, "clientId"),
        "total_time_ms": _field(parsed, "totalTimeMs"),
        "request_queue_time_ms": _field(parsed, "requestQueueTimeMs"),
        "local_time_ms": _field(parsed, "localTimeMs"),
        "remote_time_ms": _field(parsed, "remoteTimeMs"),
        "throttle_time_ms": _field(parsed, "throttleTimeMs"),
        "response_queue_time_ms": _field(parsed, "responseQueueTimeMs"),
        "send_time_ms": _field(parsed, "sendTimeMs"),
    }


def _matching_responses(
    row_line: np.ndarray,
    topic: pa.Array,
    topic_id: pa.Array,
    partition: pa.Array,
    responses: pa.Array,
    name_field: str,
    partitions_field: str,
    index_field: str,
) -> pa.Array:
    """For each (line, topic, partition) row, the first response partition of the same line that names it."""
    response_topics, topic_line = _flatten(responses)
    response_partitions, partition_topic = _flatten(_field(response_topics, partitions_field))
    take_topic = pa.array(partition_topic)
    response_keys = _key(
        pa.array(topic_line[partition_topic]),
        pc.take(_field(response_topics, name_field), take_topic),
        pc.take(_field(response_topics, "topicId"), take_topic),
        _field(response_partitions, index_field),
    )
    request_keys = _key(pa.array(row_line), topic, topic_id, partition)
    return pc.take(response_partitions, pc.index_in(request_keys, response_keys))


def _topic_partitions(
    topics_list: pa.Array,
    partitions_field: str,
    name_field: str,
    selected: np.ndarray,
    cluster: pa.Array,
    topic_ids: dict[str, str],
) -> tuple[np.ndarray, pa.Array, pa.Array, pa.Array, pa.Array]:
    """Flatten a per-line list of topics, each with a list of partitions, keeping the lines in `selected`.

    Returns, per (line, topic, partition) row: the index of its line, the partition item, the topic name
    as the line gives it (null when named by id only), the topic id, and the topic name resolved (by id
    through `topic_ids`, "cluster/topicId" -> name; null if unknown).
    """
    topics, topic_line = _flatten(topics_list)
    partitions, partition_topic = _flatten(_field(topics, partitions_field))
    keep = selected[topic_line[partition_topic]]
    if not keep.all():
        partitions, partition_topic = pc.filter(partitions, pa.array(keep)), partition_topic[keep]
    row_line = topic_line[partition_topic]
    take_topic = pa.array(partition_topic)
    topic_id = pc.take(_field(topics, "topicId"), take_topic)
    named = pc.take(_field(topics, name_field), take_topic)
    topic = pc.coalesce(named, _lookup(_topic_keys(pc.take(cluster, pa.array(row_line)), topic_id), topic_ids))
    return row_line, partitions, named, topic_id, topic


def produce_rows(
    parsed: pa.StructArray, selected: np.ndarray, cluster: pa.Array, topic_ids: dict[str, str]
) -> tuple[np.ndarray, dict]:
    """One row per (selected PRODUCE line, topic-partition): (index of the line in `parsed`, columns)."""
    request = _field(parsed, "request")
    row_line, partition_data, name, topic_id, topic = _topic_partitions(
        _field(request, "topicData"), "partitionData", "name", selected, cluster, topic_ids
    )
    take_line = pa.array(row_line)
    partition = _field(partition_data, "index")
    response = _matching_responses(
        row_line,
        name,
        topic_id,
        partition,
        _field(parsed, "response", "responses"),
        "name",
        "partitionResponses",
        "index",
    )
    per_request = {
        **_request_columns(parsed),
        "transactional_id": _field(request, "transactionalId"),
        "acks": _field(request, "acks"),
        "timeout_ms": _field(request, "timeoutMs"),
        "principal": _field(parsed, "principal"),
        "listener": _field(parsed, "listener"),
        "connection": _field(parsed, "connection"),
        "client_software_name": _field(parsed, "clientInformation", "softwareName"),
        "client_software_version": _field(parsed, "clientInformation", "softwareVersion"),
    }
    columns = {name_: pc.take(values, take_line) for name_, values in per_request.items()}
    columns.update(
        {
            "topic": topic,
            "topic_id": topic_id,
            "partition": partition,
            "records_size_bytes": _field(partition_data, "recordsSizeInBytes"),
            "error_code": _field(response, "errorCode"),
            "error_message": _field(response, "errorMessage"),
            "base_offset": _field(response, "baseOffset"),
            "log_append_time_ms": _field(response, "logAppendTimeMs"),
            "log_start_offset": _field(response, "logStartOffset"),
        }
    )
    return row_line, columns


def fetch_rows(
    parsed: pa.StructArray, selected: np.ndarray, follower_id: pa.Array, cluster: pa.Array, topic_ids: dict[str, str]
) -> dict[str, tuple[np.ndarray, dict]]:
    """Selected follower FETCH lines -> rows of kind `fetch` (listed partitions), `fetch_request` and `forgotten`.

    A full request (epoch 0) opens the session whose id is in its response; incremental requests
    (epoch > 0) name it; sessionless requests (epoch -1) and failed requests get session 0 (no
    carry-over, no request or forgotten rows).
    """
    request = _field(parsed, "request")
    epoch = _field(request, "sessionEpoch")
    request_error = _field(parsed, "response", "errorCode")
    failed = pa.array(_mask(pc.not_equal(pc.fill_null(request_error, 0), 0)))
    zero = pa.scalar(0, pa.int32())
    session_id = pc.if_else(
        failed,
        zero,
        pc.if_else(
            pa.array(_mask(pc.equal(epoch, 0))),
            pc.coalesce(_field(parsed, "response", "sessionId"), zero),
            pc.if_else(pa.array(_mask(pc.greater(epoch, 0))), _field(request, "sessionId"), zero),
        ),
    )
    per_request = {
        **_request_columns(parsed),
        "follower_id": follower_id,
        "session_id": session_id,
        "session_epoch": epoch,
        "request_error_code": request_error,
        "max_wait_ms": _field(request, "maxWaitMs"),
    }
    row_line, partitions, named, topic_id, topic = _topic_partitions(
        _field(request, "topics"), "partitions", "topic", selected, cluster, topic_ids
    )
    take_line = pa.array(row_line)
    partition = _field(partitions, "partition")
    response = _matching_responses(
        row_line,
        named,
        topic_id,
        partition,
        _field(parsed, "response", "responses"),
        "topic",
        "partitions",
        "partitionIndex",
    )
    listed = {name: pc.take(values, take_line) for name, values in per_request.items()}
    listed.update(
        {
            "topic": topic,
            "topic_id": topic_id,
            "partition": partition,
            "fetch_offset": _field(partitions, "fetchOffset"),
            "current_leader_epoch": _field(partitions, "currentLeaderEpoch"),
            "last_fetched_epoch": _field(partitions, "lastFetchedEpoch"),
            "follower_log_start_offset": _field(partitions, "logStartOffset"),
            "partition_error_code": _field(response, "errorCode"),
            "high_watermark": _field(response, "highWatermark"),
            "diverging_epoch": pc.is_valid(_field(response, "divergingEpoch")),
        }
    )
    in_session = selected & _mask(pc.not_equal(session_id, 0))
    session_lines = np.flatnonzero(in_session)
    session_requests = {
        name: pc.take(per_request[name], pa.array(session_lines))
        for name in ("follower_id", "session_id", "session_epoch", "total_time_ms", "request_queue_time_ms")
    }
    fp_line, forgotten_partitions, _, forgotten_ids, forgotten_topic = _topic_partitions(
        _field(request, "forgottenTopicsData"), "partitions", "topic", in_session, cluster, topic_ids
    )
    take_line = pa.array(fp_line)
    forgotten = {name: pc.take(per_request[name], take_line) for name in ("follower_id", "session_id", "session_epoch")}
    forgotten.update({"topic": forgotten_topic, "topic_id": forgotten_ids, "partition": forgotten_partitions})
    return {
        "fetch": (row_line, listed),
        "fetch_request": (session_lines, session_requests),
        "forgotten": (fp_line, forgotten),
    }


# ---------------------------------------------------------------------------------------------
# A batch of lines -> output batches


def classify_lines(
    line: pa.Array, read_error: pa.Array, cluster: pa.Array, topic_ids: dict[str, str]
) -> tuple[dict[str, pa.Array], list[tuple[str, np.ndarray, dict]]]:
    """Bronze columns of every line, and the silver rows: (row_kind, index of the source line, columns).

    `topic_ids` maps "cluster/topicId" -> topic name (from topics.txt); a PRODUCE or follower FETCH
    naming an unknown topic id is quarantined, since its rows could not be attributed to a topic.
    """
    n = len(line)
    start = pc.extract_regex(line, _LINE_START)  # null where the line does not start with a log time
    stamp = pc.struct_field(start, "time")
    log_time = _log_time(stamp)
    timed = _mask(pc.is_valid(log_time))
    flagged = _mask(pc.is_valid(read_error))
    standard = timed & _mask(pc.not_equal(pc.struct_field(start, "standard"), ""))
    api_hint = pc.struct_field(start, "api")
    api_hint = pc.if_else(pc.equal(api_hint, ""), pa.scalar(None, pa.string()), api_hint)
    follower_hint = _mask(pc.not_equal(pc.struct_field(start, "follower"), ""))
    hint_fetch = _mask(pc.equal(api_hint, "FETCH"))
    # Consumer fetches, METADATA, ... are known from the header alone: not parsed.
    worth_parsing = _mask(pc.is_null(api_hint)) | _mask(pc.equal(api_hint, "PRODUCE")) | (hint_fetch & follower_hint)
    other_layout = timed & ~standard & ~flagged & _mask(pc.greater_equal(pc.find_substring(line, _MARKER), 0))
    has_body = standard | other_layout
    stamp_length = pc.fill_null(pc.binary_length(stamp), 0).to_numpy(zero_copy_only=False)
    standard_rows, standard_bodies = _standard_bodies(
        line, np.flatnonzero(standard & ~flagged & worth_parsing), stamp_length
    )
    other_rows = np.flatnonzero(other_layout)
    to_parse = np.concatenate([standard_rows, other_rows]).astype(np.int64)
    bodies = pa.concat_arrays([standard_bodies, _other_bodies(line, other_rows)])
    pre_28 = np.zeros(n, dtype=bool)
    pre_28[to_parse] = _mask(pc.starts_with(bodies, b"RequestHeader("))
    if pre_28.any():
        keep = ~pre_28[to_parse]
        to_parse, bodies = to_parse[keep], pc.filter(bodies, pa.array(keep))

    request_channel = np.zeros(n, dtype=bool)
    bodiless = np.flatnonzero(timed & ~has_body & ~flagged)
    if len(bodiless):
        loggers = pc.struct_field(pc.extract_regex(pc.take(line, pa.array(bodiless)), _LOGGER), "logger")
        request_channel[bodiless] = _mask(pc.starts_with(loggers, "kafka.network.RequestChannel"))

    rules = _Rules(n)
    rules.add(flagged, "quarantined", np.asarray(read_error.to_pylist(), dtype=object) if flagged.any() else None)
    rules.add(~timed, "quarantined", NOT_LOG4J)
    rules.add(request_channel, "unused", "RequestChannel trace line")
    rules.add(~has_body, "quarantined", NOT_COMPLETED_REQUEST)
    rules.add(pre_28, "quarantined", PRE_28_FORMAT)
    parse_rows = np.zeros(n, dtype=bool)
    parse_rows[to_parse] = True
    rules.add(~parse_rows & hint_fetch, "unused", CONSUMER_FETCH)
    rules.add(~parse_rows, "unused", np.asarray(api_hint.to_pylist(), dtype=object))

    api_key_name = api_hint
    follower_id = pa.nulls(n, pa.int32())
    silver: list[tuple[str, np.ndarray, dict]] = []
    if len(to_parse):
        take_parsed = pa.array(to_parse)
        empty_response = _mask(pc.match_substring(bodies, '"response":""'))
        if empty_response.any():  # acks=0 and closed connections log an empty response; null keeps it typed
            bodies = pc.if_else(
                pa.array(empty_response),
                pc.replace_substring(bodies, '"response":""', '"response":null', max_replacements=1),
                bodies,
            )
        parsed, failures = parse_json_bodies(bodies)
        parsed_cluster = pc.take(cluster, take_parsed)
        parsed_rules, parsed_api, parsed_follower = _classify_parsed(
            parsed, failures, pc.take(api_hint, take_parsed), parsed_cluster, topic_ids
        )
        rules.status[to_parse] = parsed_rules.status
        rules.detail[to_parse] = parsed_rules.detail
        scatter = np.full(n, -1, dtype=np.int64)
        scatter[to_parse] = np.arange(len(to_parse))
        scatter_index = pa.array(scatter, mask=scatter < 0)
        api_key_name = pc.coalesce(pc.take(parsed_api, scatter_index), api_hint)
        follower_id = pc.take(
            pc.if_else(pa.array(_mask(pc.equal(parsed_api, "FETCH"))), parsed_follower, pa.scalar(None, pa.int32())),
            scatter_index,
        )
        status = parsed_rules.status
        produce_at = np.flatnonzero((status == "parsed") & _mask(pc.equal(parsed_api, "PRODUCE")))
        fetch_at = np.flatnonzero((status == "parsed") & _mask(pc.equal(parsed_api, "FETCH")))
        if len(produce_at):
            rows_line, columns = produce_rows(parsed, _selection(produce_at, len(parsed)), parsed_cluster, topic_ids)
            silver.append(("produce", to_parse[rows_line], columns))
        if len(fetch_at):
            kinds = fetch_rows(parsed, _selection(fetch_at, len(parsed)), parsed_follower, parsed_cluster, topic_ids)
            for kind, (rows_line, columns) in kinds.items():
                silver.append((kind, to_parse[rows_line], columns))
    bronze = {
        "log_time_local": log_time,
        "status": pa.array(rules.status, pa.string()),
        "detail": pa.array(rules.detail, pa.string()),
        "api_key_name": api_key_name,
        "follower_id": follower_id,
    }
    return bronze, silver


def parsed_batches(
    origin: pa.RecordBatch,
    line: pa.Array,
    line_bytes: pa.Array,
    read_error: pa.Array,
    cluster: pa.Array,
    topic_ids: dict[str, str],
) -> Iterator[pa.RecordBatch]:
    """The output rows of a batch of lines: one `line` row per line, then its silver rows.

    `origin` holds the columns that say where each line came from (file, line number, ...); silver
    rows repeat them from their line.
    """
    bronze, silver = classify_lines(line, read_error, cluster, topic_ids)
    log_time = bronze["log_time_local"]
    yield _batch(origin, "line", {**bronze, "line": line, "line_bytes": line_bytes}, len(line))
    for kind, line_index, columns in silver:
        if len(line_index) == 0:
            continue
        take = pa.array(line_index)
        yield _batch(origin.take(take), kind, {**columns, "log_time_local": pc.take(log_time, take)}, len(line_index))


def _batch(origin: pa.RecordBatch, kind: str, columns: dict[str, pa.Array], n: int) -> pa.RecordBatch:
    arrays = list(origin.columns)
    names = list(origin.schema.names)
    for name, dtype in PARSED_ROW_FIELDS:
        if name == "row_kind":
            value = pa.repeat(pa.scalar(kind, pa.string()), n)
        elif name in columns:
            value = columns[name]
            value = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
            if value.type != dtype:
                value = value.cast(dtype)
        else:
            value = pa.nulls(n, dtype)
        arrays.append(value)
        names.append(name)
    return pa.RecordBatch.from_arrays(arrays, names=names)
