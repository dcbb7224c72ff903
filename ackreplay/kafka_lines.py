"""Kafka request-log lines built as the broker writes them (KIP-673 JSON, Kafka 2.8 to 4.x).

Field order and presence follow `RequestConvertToJson.requestDescMetrics` and the generated
`ProduceRequestDataJsonConverter` / `FetchRequestDataJsonConverter` (kafka-reference.md §1.3-1.7):
Produce v3-v13 (`name` up to v12, `topicId` from v13), Fetch v4-v17 (`replicaId` up to v14,
tagged `replicaState` from v15, `topic` up to v12, `topicId` from v13). Used by the tests and by the
synthetic trace generator; real captured lines live in data/samples/.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

LOG_TIME_FORMAT = "%Y-%m-%d %H:%M:%S,%f"
# The stamp inside a log4j line's leading `[...]`, as every reader matches it: `%d` to the millisecond
# (Kafka's default layout) or to the microsecond (log4j2 `%d{DEFAULT_MICROS}`, a Kafka 4.x broker).
LOG_STAMP_PATTERN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}(?:\d{3})?"
# That stamp opening a line, in raw bytes (the file readers find a file's first and last log times with it).
LINE_STAMP_BYTES = re.compile(rb"^\[(" + LOG_STAMP_PATTERN.encode() + rb")\]", re.MULTILINE)
# The producer's request.timeout.ms default (30 s).
DEFAULT_REQUEST_TIMEOUT_MS = 30_000


def log_time(ts: datetime, micros: bool = False) -> str:
    """`[%d]` of log4j: local wall-clock time to the millisecond, no zone; with `micros`, to the
    microsecond as log4j2's `%d{DEFAULT_MICROS}` prints it."""
    text = ts.strftime(LOG_TIME_FORMAT)
    return text if micros else text[:-3]


def request_log_line(ts: datetime, body: dict, micros: bool = False) -> str:
    """A `kafka.request.logger` DEBUG line (layout `[%d] %p %m (%c)%n`, without the newline)."""
    stamp = log_time(ts, micros)
    return f"[{stamp}] DEBUG Completed request:{json.dumps(body, separators=(',', ':'))} (kafka.request.logger)"


@dataclass
class Timing:
    """The timing fields of a line, in ms (microsecond precision, as the broker prints them)."""

    request_queue: float = 0.05
    local: float = 0.5
    remote: float = 0.0
    response_queue: float = 0.03
    send: float = 0.1
    throttle: int = 0

    @property
    def total(self) -> float:
        return round(self.request_queue + self.local + self.remote + self.response_queue + self.send, 3)


@dataclass
class Client:
    """The client a request-log line names: its id, software, principal, listener and connection."""

    client_id: str = "producer-1"
    software_name: str = "apache-kafka-java"
    software_version: str = "3.9.1"
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
    connection: str = "127.0.0.1:9092-127.0.0.1:53112-7"


def _header(api_key: int, name: str, version: int, correlation_id: int, client_id: str) -> dict:
    return {
        "requestApiKey": api_key,
        "requestApiVersion": version,
        "correlationId": correlation_id,
        "clientId": client_id,
        "requestApiKeyName": name,
    }


def _envelope(header: dict, request, response, timing: Timing, client: Client) -> dict:
    return {
        "isForwarded": False,
        "requestHeader": header,
        "request": request,
        "response": response,
        "connection": client.connection,
        "totalTimeMs": timing.total,
        "requestQueueTimeMs": timing.request_queue,
        "localTimeMs": timing.local,
        "remoteTimeMs": timing.remote,
        "throttleTimeMs": timing.throttle,
        "responseQueueTimeMs": timing.response_queue,
        "sendTimeMs": timing.send,
        "securityProtocol": "PLAINTEXT",
        "principal": client.principal,
        "listener": client.listener,
        "clientInformation": {"softwareName": client.software_name, "softwareVersion": client.software_version},
    }


@dataclass
class ProducePartition:
    """One partition of a PRODUCE line: its batch and the broker's answer."""

    partition: int
    size_bytes: int
    base_offset: int = 0
    error_code: int = 0
    log_start_offset: int = 0


def produce_body(
    version: int,
    correlation_id: int,
    acks: int,
    topic: str,
    partitions: list[ProducePartition],
    timing: Timing,
    client: Client | None = None,
    topic_id: str | None = None,
    timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
) -> dict:
    """A PRODUCE line's JSON (one topic); acks=0 has `"response":""`."""
    client = client or Client()
    topic_key = {"topicId": topic_id} if version >= 13 else {"name": topic}
    request = {
        "transactionalId": None,
        "acks": acks,
        "timeoutMs": timeout_ms,
        "topicData": [
            {
                **topic_key,
                "partitionData": [{"index": p.partition, "recordsSizeInBytes": p.size_bytes} for p in partitions],
            }
        ],
    }
    response: str | dict[str, object]
    if acks == 0:
        response = ""
    else:
        responses = []
        for p in partitions:
            item: dict[str, object] = {
                "index": p.partition,
                "errorCode": p.error_code,
                "baseOffset": p.base_offset if p.error_code == 0 else -1,
            }
            item["logAppendTimeMs"] = -1
            if version >= 5:
                item["logStartOffset"] = p.log_start_offset if p.error_code == 0 else -1
            if version >= 8:
                item["recordErrors"] = []
                item["errorMessage"] = None
            responses.append(item)
        response = {"responses": [{**topic_key, "partitionResponses": responses}], "throttleTimeMs": 0}
    return _envelope(
        _header(0, "PRODUCE", version, correlation_id, client.client_id), request, response, timing, client
    )


@dataclass
class FetchPartition:
    """One partition of a FETCH line: the fetch offset asked for and the answer."""

    partition: int
    fetch_offset: int
    leader_epoch: int = 0
    log_start_offset: int = 0
    high_watermark: int | None = None  # None: not in the (incremental) response
    error_code: int = 0
    records_size_bytes: int = 0
    diverging_epoch: tuple[int, int] | None = None


@dataclass
class FetchTopic:
    """A topic of a FETCH line with its partitions."""

    topic: str
    topic_id: str
    partitions: list[FetchPartition] = field(default_factory=list)


def fetch_body(
    version: int,
    correlation_id: int,
    replica_id: int,
    topics: list[FetchTopic],
    timing: Timing,
    session_id: int = 0,
    session_epoch: int = -1,
    response_session_id: int | None = None,
    forgotten: list[FetchTopic] | None = None,
    error_code: int = 0,
    broker_epoch: int = 1,
    client: Client | None = None,
) -> dict:
    """A FETCH line's JSON from replica `replica_id` (-1 for a consumer)."""
    if client is None:
        follower = replica_id >= 0
        client = Client(
            client_id=f"broker-{replica_id}-fetcher-0" if follower else "consumer-group-1",
            listener="REPLICATION" if follower else "PLAINTEXT",
            connection="127.0.0.1:9092-127.0.0.1:40318-3",
        )

    def topic_key(t: FetchTopic) -> dict:
        return {"topicId": t.topic_id} if version >= 13 else {"topic": t.topic}

    request: dict = {}
    if version <= 14:
        request["replicaId"] = replica_id
    elif replica_id >= 0:
        request["replicaState"] = {"replicaId": replica_id, "replicaEpoch": broker_epoch}
    request.update({"maxWaitMs": 500, "minBytes": 1, "maxBytes": 10485760, "isolationLevel": 0})
    if version >= 7:
        request.update({"sessionId": session_id, "sessionEpoch": session_epoch})
    parts = []
    for t in topics:
        items = []
        for p in t.partitions:
            item: dict = {"partition": p.partition}
            if version >= 9:
                item["currentLeaderEpoch"] = p.leader_epoch
            item["fetchOffset"] = p.fetch_offset
            if version >= 12:
                item["lastFetchedEpoch"] = p.leader_epoch
            item["logStartOffset"] = p.log_start_offset
            item["partitionMaxBytes"] = 1048576
            items.append(item)
        parts.append({**topic_key(t), "partitions": items})
    request["topics"] = parts
    if version >= 7:
        request["forgottenTopicsData"] = [
            {**topic_key(t), "partitions": [p.partition for p in t.partitions]} for t in (forgotten or [])
        ]
    if version >= 11:
        request["rackId"] = ""
    responses = []
    for t in topics:
        items = []
        for p in t.partitions:
            if p.high_watermark is None and p.error_code == 0:
                continue
            item = {
                "partitionIndex": p.partition,
                "errorCode": p.error_code,
                "highWatermark": -1 if p.high_watermark is None else p.high_watermark,
            }
            item["lastStableOffset"] = -1 if p.high_watermark is None else p.high_watermark
            item["logStartOffset"] = p.log_start_offset
            if p.diverging_epoch is not None:
                item["divergingEpoch"] = {"epoch": p.diverging_epoch[0], "endOffset": p.diverging_epoch[1]}
            item["abortedTransactions"] = None
            if version >= 11:
                item["preferredReadReplica"] = -1
            item["recordsSizeInBytes"] = p.records_size_bytes
            items.append(item)
        if items:
            responses.append({**topic_key(t), "partitions": items})
    response: dict = {"throttleTimeMs": 0}
    if version >= 7:
        response.update(
            {
                "errorCode": error_code,
                "sessionId": session_id if response_session_id is None else response_session_id,
            }
        )
    response["responses"] = responses
    return _envelope(_header(1, "FETCH", version, correlation_id, client.client_id), request, response, timing, client)


def other_body(api_name: str, api_key: int, version: int, correlation_id: int, timing: Timing | None = None) -> dict:
    """A line of a request type the pipeline does not use (METADATA, API_VERSIONS, ...)."""
    return _envelope(
        _header(api_key, api_name, version, correlation_id, "admin-1"), {}, {}, timing or Timing(), Client()
    )


def topics_describe(
    topic: str,
    topic_id: str | None,
    assignments: list[list[int]],
    configs: dict[str, str],
    isr: list[list[int]] | None = None,
) -> str:
    """`kafka-topics --describe` output for one topic (3.x/4.x layout, `Elr:` fields when isr is given)."""
    config_text = ",".join(f"{k}={v}" for k, v in configs.items())
    id_part = f"\tTopicId: {topic_id}" if topic_id else ""
    lines = [
        f"Topic: {topic}{id_part}\tPartitionCount: {len(assignments)}\tReplicationFactor: {len(assignments[0])}\tConfigs: {config_text}"
    ]
    for p, replicas in enumerate(assignments):
        isr_p = (isr or assignments)[p]
        lines.append(
            f"\tTopic: {topic}\tPartition: {p}\tLeader: {replicas[0]}\tReplicas: {','.join(map(str, replicas))}"
            f"\tIsr: {','.join(map(str, isr_p))}\tElr: \tLastKnownElr: "
        )
    return "\n".join(lines) + "\n"
