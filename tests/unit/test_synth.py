"""The synthetic trace generator without Spark: line formats, determinism, and the replay's rules.

The pipeline-level checks (ingest with zero quarantined lines, replay reproducing the generated ack
times and stall spikes) are in tests/pipeline/test_synth.py.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from ackreplay.kafka_lines import (
    Client,
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    produce_body,
    request_log_line,
)
from ackreplay.synth import SynthParams, generate, simulate
from ackreplay.synth.render import FETCH_TEMPLATE, PRODUCE_TEMPLATE, REQUEST_ITEM, RESPONSE_ITEM, log_times, ms

SMALL = dict(produces=3000, produce_rate=250.0, replica_lag_time_max_ms=1000, consumer_fetches_per_produce=0.05)


@pytest.fixture(scope="module")
def trace():
    return simulate(SynthParams(**SMALL))


def test_produce_template_renders_the_kafka_lines_format():
    timing = Timing(request_queue=0.07, local=0.525, remote=12.345, response_queue=0.084, send=0.5)
    client = Client(client_id="synth-producer-acks-all-2", connection="10.0.0.2:9092-10.0.1.3:50102-2")
    body = produce_body(11, 42, -1, "synth-1", [ProducePartition(4, 629, 1234)], timing, client, timeout_ms=30000)
    expected = request_log_line(datetime(2026, 11, 20, 0, 0, 2, 41000), body)
    actual = PRODUCE_TEMPLATE % {
        "time": "2026-11-20 00:00:02,041",
        "correlation": 42,
        "client": '"synth-producer-acks-all-2"',
        "acks": -1,
        "timeout": 30000,
        "topic": '"synth-1"',
        "partition": 4,
        "bytes": 629,
        "base": 1234,
        "connection": '"10.0.0.2:9092-10.0.1.3:50102-2"',
        "total": ms(13524),
        "queue": ms(70),
        "local": ms(525),
        "remote": ms(12345),
        "rq": ms(84),
        "send": ms(500),
    }
    assert actual == expected


def test_fetch_template_renders_the_kafka_lines_format():
    topics = [
        FetchTopic(
            "a",
            "AAAAAAAAAAAAAAAAAAAAAA",
            [
                FetchPartition(0, 10, 1, high_watermark=8, records_size_bytes=700),
                FetchPartition(3, 11, 1, high_watermark=9),
            ],
        ),
        FetchTopic("b", "BBBBBBBBBBBBBBBBBBBBBB", [FetchPartition(2, 5, 0, high_watermark=5, records_size_bytes=0)]),
    ]
    client = Client(
        client_id="broker-3-fetcher-0",
        software_name="unknown",
        software_version="unknown",
        listener="REPLICATION",
        connection="c3",
    )
    body = fetch_body(
        17,
        7,
        3,
        topics,
        Timing(0.049, 0.196, 500.0, 0.067, 0.075),
        session_id=99,
        session_epoch=7,
        broker_epoch=23,
        client=client,
    )
    expected = request_log_line(datetime(2026, 11, 20, 0, 0, 3), body)
    listed = (
        '{"topicId":"AAAAAAAAAAAAAAAAAAAAAA","partitions":['
        + REQUEST_ITEM % (0, 1, 10, 1)
        + ","
        + REQUEST_ITEM % (3, 1, 11, 1)
        + "]},"
        '{"topicId":"BBBBBBBBBBBBBBBBBBBBBB","partitions":[' + REQUEST_ITEM % (2, 0, 5, 0) + "]}"
    )
    responses = (
        '{"topicId":"AAAAAAAAAAAAAAAAAAAAAA","partitions":['
        + RESPONSE_ITEM % (0, 8, 8, 700)
        + ","
        + RESPONSE_ITEM % (3, 9, 9, 0)
        + "]},"
        '{"topicId":"BBBBBBBBBBBBBBBBBBBBBB","partitions":[' + RESPONSE_ITEM % (2, 5, 5, 0) + "]}"
    )
    actual = FETCH_TEMPLATE % {
        "time": "2026-11-20 00:00:03,000",
        "correlation": 7,
        "client": '"broker-3-fetcher-0"',
        "replica": 3,
        "broker_epoch": 23,
        "session_epoch": 7,
        "request_session": 99,
        "response_session": 99,
        "connection": '"c3"',
        "topics": listed,
        "forgotten": "",
        "responses": responses,
        "total": ms(500387),
        "queue": ms(49),
        "local": ms(196),
        "remote": ms(500000),
        "rq": ms(67),
        "send": ms(75),
    }
    assert actual == expected


def test_log_times_and_durations_print_like_the_broker():
    assert log_times(np.array([1_795_132_802_041_000])) == ["2026-11-20 00:00:02,041"]
    assert [ms(0), ms(1770), ms(864205), ms(2000)] == ["0.0", "1.77", "864.205", "2.0"]


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(folder)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def test_same_seed_same_files_other_seed_other_files(tmp_path):
    params = SynthParams(**{**SMALL, "produces": 1500, "long_stalls": 0, "metrics_interval_ms": 1000})
    generate(params, tmp_path / "a")
    generate(params, tmp_path / "b")
    generate(
        SynthParams(**{**SMALL, "produces": 1500, "long_stalls": 0, "metrics_interval_ms": 1000, "seed": 2}),
        tmp_path / "c",
    )
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")
    files = sorted(str(p.relative_to(tmp_path / "a")) for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == [
        *[
            f"synth/broker-{b}/{name}"
            for b in (1, 2, 3)
            for name in ("kafka-request.log", "server.log", "state-change.log")
        ],
        *[f"synth/metrics/broker-{b}.prom" for b in (1, 2, 3)],
        "synth/topics.txt",
    ]


def test_parameters_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="min_insync_replicas"):
        SynthParams(replication_factor=2, min_insync_replicas=2)
    with pytest.raises(ValueError, match="too short"):
        simulate(SynthParams(produces=500, produce_rate=1000.0, replica_lag_time_max_ms=3000))


def _holds(trace, eid: int, follower: int, base: np.ndarray, t_append: np.ndarray) -> np.ndarray:
    """The replay's T_f(b) read off the fetch listings: the first time >= the append at which the leader
    learned a fetchOffset > b from this follower (NEVER if it never did)."""
    update = trace.follower_update_time
    mine = (trace.l_epoch == eid) & (
        np.array([f for f, _ in trace.sessions])[trace.f_session[trace.l_fetch]] == follower
    )
    times, offsets = update[trace.l_fetch[mine]], trace.l_fetch_offset[mine]
    order = np.argsort(times, kind="stable")
    times, leo = times[order], np.maximum.accumulate(offsets[order])
    out = np.full(base.size, 2**62, dtype=np.int64)
    for i, (b, t) in enumerate(zip(base.tolist(), t_append.tolist(), strict=False)):
        j = np.searchsorted(times, t, side="left")
        k = j + np.searchsorted(leo[j:], b, side="right")
        if k < times.size:
            out[i] = times[k]
    return out


def test_acks_all_ack_is_when_the_slowest_in_sync_follower_reported_the_batch(trace):
    """Outside ISR changes, an acks=all produce's logged ack equals the latest T_f(b) over its followers,
    recomputed from the request-log view (listings and their update times), not the simulator's arrays."""
    shrinks = {(c.eid, c.follower): c for c in trace.isr_changes if c.kind == "shrink"}
    expands = {(c.eid, c.follower): c for c in trace.isr_changes if c.kind == "expand"}
    checked = 0
    for e in trace.epochs:
        rows = np.nonzero((trace.p_epoch == e.eid) & (trace.p_acks == -1) & (trace.p_error == 0))[0]
        if rows.size == 0:
            continue
        ack = trace.p_t_local_done[rows] + trace.p_remote[rows]
        held = np.max(
            [_holds(trace, e.eid, f, trace.p_base_offset[rows], trace.p_t_local_done[rows]) for f in e.followers],
            axis=0,
        )
        quiet = np.ones(rows.size, dtype=bool)
        for f in e.followers:
            if (e.eid, f) in shrinks:
                lo = shrinks[(e.eid, f)].t_propose - trace.params.replica_lag_time_max_ms * 1000
                quiet &= (ack < lo) | (ack > expands[(e.eid, f)].t_propose)
        np.testing.assert_array_equal(ack[quiet], np.maximum(held[quiet], trace.p_t_local_done[rows][quiet]))
        checked += int(quiet.sum())
    assert checked > 0.8 * (trace.p_acks == -1).sum()


def test_a_stall_past_the_lag_time_shrinks_the_isr_and_acks_wait_for_the_commit(trace):
    ((broker, start, end),) = trace.long_stalls
    shrinks = [c for c in trace.isr_changes if c.kind == "shrink"]
    expands = [c for c in trace.isr_changes if c.kind == "expand"]
    assert shrinks and len(shrinks) == len(expands)
    lag = trace.params.replica_lag_time_max_ms * 1000
    for c in shrinks:
        assert c.follower == broker
        assert start < c.t_propose < end and c.t_propose - c.last_caught_up_us > lag
        assert c.t_commit % 1000 == 0  # a whole-ms log time is the exact commit
    for c in expands:
        assert end < c.t_propose < c.t_commit <= c.t_propose + 151_000
    # Produces waiting on the stalled follower are released exactly at their partition's shrink commit.
    ack = trace.p_t_local_done + trace.p_remote
    for c in shrinks:
        waiting = (
            (trace.p_epoch == c.eid)
            & (trace.p_acks == -1)
            & (trace.p_t_local_done > start + 1000)
            & (trace.p_t_local_done < c.t_propose)
        )
        assert waiting.any()
        np.testing.assert_array_equal(ack[waiting], np.full(waiting.sum(), c.t_commit))
    # ... which is the spike: their waits exceed the lag time, other produces' P99 stays far below it.
    wait = trace.p_remote[(trace.p_acks == -1) & (trace.p_error == 0)]
    assert wait.max() > lag
    others = trace.p_remote[
        (trace.p_acks == -1) & ((trace.p_t_local_done < start) | (trace.p_t_local_done > end + lag))
    ]
    assert np.percentile(others, 99) < 0.6 * lag and np.median(others) < lag / 50


def test_fetch_sessions_are_incremental_and_offsets_only_grow(trace):
    # Request indexes (sessionEpoch) count up from 0 in every session.
    for s in range(len(trace.sessions)):
        idx = trace.f_index[trace.f_session == s]
        np.testing.assert_array_equal(idx, np.arange(idx.size))
    # A session's first request lists all partitions it follows; later ones only changed offsets.
    first = trace.l_fetch[trace.f_index[trace.l_fetch] == 0]
    assert first.size == sum(len(e.followers) for e in trace.epochs if e.leader_epoch == 0)
    later = trace.f_index[trace.l_fetch] > 0
    assert later.sum() < trace.f_session.size * trace.params.partition_count
    for eid in np.unique(trace.l_epoch):
        for s in range(len(trace.sessions)):
            m = (trace.l_epoch == eid) & (trace.f_session[trace.l_fetch] == s)
            assert np.all(np.diff(trace.l_fetch_offset[m]) >= 0)


def test_leader_change_moves_the_partition_and_fails_what_waited_on_the_old_leader(trace):
    moved, t_change = trace.leader_change
    old, new = trace.epochs[moved], trace.epochs[-1]
    assert (new.partition, new.leader_epoch, old.t_end, new.t_begin) == (moved, 1, t_change, t_change)
    assert new.leader == old.followers[0] and set(new.followers) == {old.leader, old.followers[1]}
    rows = trace.p_partition == moved
    assert set(trace.p_leader[rows & (trace.p_t_local_done >= t_change)]) == {new.leader}
    assert set(trace.p_leader[rows & (trace.p_t_local_done < t_change)]) == {old.leader}
    new_rows = rows & (trace.p_epoch == new.eid)
    assert trace.p_base_offset[new_rows].min() == new.start_offset
    failed = rows & (trace.p_error == 6)
    assert np.all(trace.p_t_local_done[failed] + trace.p_remote[failed] == t_change)
