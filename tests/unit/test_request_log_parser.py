"""The Arrow request-log parser, tested as plain Python (it runs inside the reader's mapInArrow task)."""

import json
from datetime import datetime

import pyarrow as pa

from ackreplay.ingest.request_log_parser import parse_json_bodies, parsed_batches
from ackreplay.kafka_lines import (
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    other_body,
    produce_body,
    request_log_line,
)
from tests.helpers import REAL_FETCH, REAL_PRODUCE, REAL_TOPIC_IDS, TOPIC_ID, TOPIC_IDS, micros

T0 = datetime(2026, 11, 20, 13, 0, 0, 317000)


def _produce(correlation_id: int, partitions=None, **kw) -> str:
    partitions = partitions or [ProducePartition(0, 100, correlation_id)]
    return request_log_line(
        T0, produce_body(9, correlation_id, kw.pop("acks", -1), "orders", partitions, Timing(), **kw)
    )


def _parse(
    lines: list[str], errors: dict[int, str] | None = None, topic_ids: dict[str, str] = TOPIC_IDS
) -> dict[str, list[dict]]:
    """Output rows by kind, as dicts of the non-null columns that matter here."""
    errors = errors or {}
    n = len(lines)
    origin = pa.RecordBatch.from_arrays([pa.array(range(1, n + 1), pa.int64())], names=["line_number"])
    out: dict[str, list[dict]] = {}
    for batch in parsed_batches(
        origin,
        pa.array(lines, pa.string()),
        pa.array([len(x.encode()) for x in lines], pa.int32()),
        pa.array([errors.get(i) for i in range(1, n + 1)], pa.string()),
        pa.array(["c1"] * n),
        topic_ids,
    ):
        for row in batch.to_pylist():
            out.setdefault(row["row_kind"], []).append(row)
    return out


def test_malformed_lines_are_isolated_and_the_rest_parsed():
    good = [_produce(i) for i in range(1, 41)]
    lines = list(good)
    lines[5] = good[5][:150]  # cut mid-JSON, no logger suffix
    lines[17] = good[17].replace('"acks":-1', '"acks":-1}{"x":1')  # two objects on one line
    lines[30] = good[30].replace('"timeoutMs":30000', '"timeoutMs":"slow"')  # valid JSON, wrong type
    rows = _parse(lines)
    status = {r["line_number"]: (r["status"], r["detail"]) for r in rows["line"]}
    assert status[6] == ("quarantined", "malformed or truncated JSON")
    assert status[18] == ("quarantined", "malformed or truncated JSON")
    assert status[31] == ("quarantined", "JSON field of an unexpected type")
    assert sum(s == ("parsed", None) for s in status.values()) == 37
    # every other line yields its row, with its own offset
    assert sorted((r["line_number"], r["base_offset"]) for r in rows["produce"]) == [
        (i, i) for i in range(1, 41) if i not in (6, 18, 31)
    ]


def test_bodies_parse_back_to_back_and_bad_ones_fail_alone():
    bodies = [b'{"requestHeader":{"correlationId":1}}', b'{"requestHeader":', b"[1]", b'{"totalTimeMs":2.5}']
    parsed, failures = parse_json_bodies(pa.array(bodies, pa.binary()))
    assert failures == {1: "malformed or truncated JSON", 2: "malformed or truncated JSON"}
    rows = parsed.to_pylist()
    assert rows[0]["requestHeader"]["correlationId"] == 1
    assert rows[1] is None and rows[2] is None
    assert rows[3]["totalTimeMs"] == 2.5


def test_other_layouts_and_impossible_dates():
    standard = _produce(1)
    lines = [
        standard.replace("] DEBUG Completed", "] INFO  Completed", 1),  # another level: cut one by one
        standard.replace("2026-11-20", "2026-13-20", 1),  # month 13
        standard,
    ]
    rows = _parse(lines)
    assert [(r["status"], r["detail"]) for r in rows["line"]] == [
        ("parsed", None),
        ("quarantined", "not a log4j line '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)' (or ',SSSSSS')"),
        ("parsed", None),
    ]
    assert rows["line"][0]["log_time_local"] == datetime(2026, 11, 20, 13, 0, 0, 317000)
    assert sorted(r["line_number"] for r in rows["produce"]) == [1, 3]


def test_responses_are_matched_by_topic_and_partition_not_position():
    body = produce_body(9, 5, -1, "orders", [ProducePartition(0, 10, 100), ProducePartition(1, 20, 200)], Timing())
    partition_responses = body["response"]["responses"][0]["partitionResponses"]
    partition_responses.reverse()  # the broker lists partitions in its own order
    rows = _parse([request_log_line(T0, body)])
    assert sorted((r["partition"], r["records_size_bytes"], r["base_offset"]) for r in rows["produce"]) == [
        (0, 10, 100),
        (1, 20, 200),
    ]


def test_fetch_rows_sessions_and_forgotten_partitions():
    topic = FetchTopic("orders", TOPIC_ID, [FetchPartition(0, 10, high_watermark=12), FetchPartition(1, 20)])
    body = fetch_body(
        17,
        3,
        2,
        [topic],
        Timing(),
        session_id=77,
        session_epoch=4,
        forgotten=[FetchTopic("orders", TOPIC_ID, [FetchPartition(5, 0)])],
    )
    consumer = fetch_body(17, 4, -1, [topic], Timing())
    rows = _parse(
        [
            request_log_line(T0, body),
            request_log_line(T0, consumer),
            request_log_line(T0, other_body("METADATA", 3, 12, 9)),
        ]
    )
    assert [(r["status"], r["detail"], r["follower_id"]) for r in rows["line"]] == [
        ("parsed", None, 2),
        ("unused", "FETCH from a consumer", None),
        ("unused", "METADATA", None),
    ]
    listed = sorted(
        (r["partition"], r["fetch_offset"], r["high_watermark"], r["partition_error_code"], r["session_id"], r["topic"])
        for r in rows["fetch"]
    )
    # partition 1 is not in the (incremental) response
    assert listed == [(0, 10, 12, 0, 77, "orders"), (1, 20, None, None, 77, "orders")]
    assert [(r["session_id"], r["session_epoch"], r["follower_id"]) for r in rows["fetch_request"]] == [(77, 4, 2)]
    assert [(r["topic"], r["partition"], r["session_epoch"]) for r in rows["forgotten"]] == [("orders", 5, 4)]


def test_acks_0_empty_response_and_unknown_fields_are_fine():
    body = produce_body(9, 1, 0, "orders", [ProducePartition(0, 100)], Timing())
    body["request"]["someFutureField"] = {"nested": [1, 2]}
    line = "[2026-11-20 13:00:00,317] DEBUG Completed request:" + json.dumps(body, separators=(",", ":"))
    rows = _parse([line + " (kafka.request.logger)", line])  # with and without the logger suffix
    assert [r["status"] for r in rows["line"]] == ["parsed", "parsed"]
    assert [(r["acks"], r["error_code"], r["base_offset"]) for r in rows["produce"]] == [(0, None, None)] * 2


def _without(rows: list[dict], *names: str) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in names} for row in rows]


def test_microsecond_stamps_keep_the_microseconds_and_cut_the_same_body():
    lines = [
        REAL_PRODUCE,  # 1
        micros(REAL_PRODUCE, "123"),  # 2
        REAL_FETCH,  # 3
        micros(REAL_FETCH, "456"),  # 4
        micros(REAL_PRODUCE, "999")[: -len(" (kafka.request.logger)")],  # 5 no logger suffix
        REAL_PRODUCE.replace(",300]", ",3001]", 1),  # 6 neither layout
        REAL_PRODUCE.replace(",300]", ",3001234]", 1),  # 7
    ]
    rows = _parse(lines, topic_ids=REAL_TOPIC_IDS)
    t = lambda ms, us: datetime(2026, 11, 23, 21, 12, 37, ms * 1000 + us)  # noqa: E731
    not_log4j = "not a log4j line '[yyyy-MM-dd HH:mm:ss,SSS] LEVEL message (logger)' (or ',SSSSSS')"
    assert [(r["line_number"], r["status"], r["detail"], r["log_time_local"]) for r in rows["line"]] == [
        (1, "parsed", None, t(300, 0)),
        (2, "parsed", None, t(300, 123)),
        (3, "parsed", None, t(302, 0)),
        (4, "parsed", None, t(302, 456)),
        (5, "parsed", None, t(300, 999)),
        (6, "quarantined", not_log4j, None),
        (7, "quarantined", not_log4j, None),
    ]
    produce = {n: [r for r in rows["produce"] if r["line_number"] == n] for n in (1, 2, 5)}
    assert [(r["partition"], r["base_offset"], r["total_time_ms"], r["topic"]) for r in produce[1]] == [
        (2, 6194, 30.423, "ackreplay-lab"),
        (3, 6540, 30.423, "ackreplay-lab"),
    ]
    assert [r["log_time_local"] for r in produce[2]] == [t(300, 123)] * 2
    # the body parses to the same rows whichever stamp the line carries
    assert _without(produce[2], "line_number", "log_time_local") == _without(
        produce[1], "line_number", "log_time_local"
    )
    assert _without(produce[5], "line_number", "log_time_local") == _without(
        produce[1], "line_number", "log_time_local"
    )
    fetch = {n: [r for r in rows["fetch"] if r["line_number"] == n] for n in (3, 4)}
    assert [(r["follower_id"], r["partition"], r["fetch_offset"], r["log_time_local"]) for r in fetch[4]] == [
        (2, 2, 6197, t(302, 456)),
        (2, 3, 6543, t(302, 456)),
    ]
    assert _without(fetch[4], "line_number", "log_time_local") == _without(fetch[3], "line_number", "log_time_local")


def test_a_batch_of_microsecond_lines_alone():
    rows = _parse([micros(_produce(1), "001"), micros(_produce(2), "250")])
    assert [r["log_time_local"] for r in rows["line"]] == [
        T0.replace(microsecond=317001),
        T0.replace(microsecond=317250),
    ]
    assert [(r["line_number"], r["base_offset"]) for r in rows["produce"]] == [(1, 1), (2, 2)]


def test_kafka_lines_write_microsecond_stamps():
    line = request_log_line(T0.replace(microsecond=317408), other_body("METADATA", 3, 12, 9), micros=True)
    assert line.startswith("[2026-11-20 13:00:00,317408] DEBUG Completed request:{")
    assert _parse([line])["line"][0]["log_time_local"] == datetime(2026, 11, 20, 13, 0, 0, 317408)
