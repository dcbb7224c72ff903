"""Writes a simulated trace as the files a real cluster leaves: request logs, server.log, state-change.log,
topics.txt and optional JMX-exporter scrapes, in the layout `discover_inputs` reads.

Request-log lines are Kafka 3.9's (PRODUCE v11 with topic names, follower FETCH v17 with topic ids and
`replicaState`). Their JSON layout comes from `ackreplay.kafka_lines` (templates built from its
output once, then filled per line: tests/unit/test_synth.py checks the lines are identical). Lines are
written per broker in log-time order, a time window at a time, so memory stays bounded.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import numpy as np

from ackreplay.kafka_lines import (
    Client,
    FetchPartition,
    FetchTopic,
    ProducePartition,
    Timing,
    fetch_body,
    other_body,
    produce_body,
    request_log_line,
    topics_describe,
)
from ackreplay.synth.model import ERROR_NONE, Trace

_CHUNK_LINES = 50_000


def _placeholders(line: str, keys: dict[str, str]) -> str:
    """Replace the JSON values of `keys` (every occurrence) with `%(name)s` placeholders."""
    line = line.replace("%", "%%")
    for key, name in keys.items():
        line, count = re.subn(rf'"{key}":("[^"]*"|-?[0-9.]+|null)', f'"{key}":%({name})s', line)
        if not count:
            raise AssertionError(f"template has no {key}")
    return line


_TIMING_KEYS = {
    "totalTimeMs": "total",
    "requestQueueTimeMs": "queue",
    "localTimeMs": "local",
    "remoteTimeMs": "remote",
    "responseQueueTimeMs": "rq",
    "sendTimeMs": "send",
}


def _produce_template() -> str:
    body = produce_body(11, 1, -1, "t", [ProducePartition(0, 100, 5, 0, 0)], Timing(), Client(connection="c"))
    line = request_log_line(datetime(2026, 1, 1), body)
    line = line[line.index("]") + 1 :]
    return "[%(time)s]" + _placeholders(
        line,
        {
            "correlationId": "correlation",
            "clientId": "client",
            "acks": "acks",
            "timeoutMs": "timeout",
            "name": "topic",
            "index": "partition",
            "recordsSizeInBytes": "bytes",
            "baseOffset": "base",
            "connection": "connection",
            **_TIMING_KEYS,
        },
    )


def _fetch_template() -> str:
    client = Client(
        client_id="x", software_name="unknown", software_version="unknown", listener="REPLICATION", connection="c"
    )
    body = fetch_body(
        17, 1, 2, [], Timing(), session_id=5, session_epoch=3, response_session_id=5, broker_epoch=7, client=client
    )
    line = request_log_line(datetime(2026, 1, 1), body)
    line = "[%(time)s]" + _placeholders(
        line[line.index("]") + 1 :],
        {
            "correlationId": "correlation",
            "clientId": "client",
            "replicaId": "replica",
            "replicaEpoch": "broker_epoch",
            "sessionEpoch": "session_epoch",
            "connection": "connection",
            **_TIMING_KEYS,
        },
    )
    # Request and response session ids differ on a session's first (full) request.
    line = line.replace('"sessionId":5,"sessionEpoch"', '"sessionId":%(request_session)s,"sessionEpoch"', 1)
    line = line.replace('"sessionId":5,"responses"', '"sessionId":%(response_session)s,"responses"', 1)
    for empty, name in (
        ('"topics":[]', "topics"),
        ('"forgottenTopicsData":[]', "forgotten"),
        ('"responses":[]', "responses"),
    ):
        assert line.count(empty) == 1, empty
        line = line.replace(empty, empty[:-1] + f"%({name})s]")
    return line


PRODUCE_TEMPLATE = _produce_template()
FETCH_TEMPLATE = _fetch_template()
# Fetch items in the field order of kafka_lines.fetch_body (v17).
REQUEST_ITEM = (
    '{"partition":%d,"currentLeaderEpoch":%d,"fetchOffset":%d,"lastFetchedEpoch":%d,"logStartOffset":0,'
    '"partitionMaxBytes":1048576}'
)
RESPONSE_ITEM = (
    '{"partitionIndex":%d,"errorCode":0,"highWatermark":%d,"lastStableOffset":%d,"logStartOffset":0,'
    '"abortedTransactions":null,"preferredReadReplica":-1,"recordsSizeInBytes":%d}'
)


def ms(us: int) -> str:
    """A duration in µs as the broker prints milliseconds (a Java double: `0.0`, `1.77`, `864.205`)."""
    return repr(us / 1000.0)


def log_times(us: np.ndarray) -> list[str]:
    """`yyyy-MM-dd HH:mm:ss,SSS` (log4j `%d`, UTC) of times in µs (whole milliseconds)."""
    text = np.datetime_as_string((us // 1000).astype("datetime64[ms]"), unit="ms")
    return [t[:10] + " " + t[11:19] + "," + t[20:23] for t in text.tolist()]


def _fmt_time(us: int) -> str:
    return log_times(np.array([us]))[0]


def _client_name(client: int) -> str:
    return f"synth-producer-acks-{'all' if client < 4 else '1'}-{client % 4}"


class _Renderer:
    def __init__(self, trace: Trace) -> None:
        self.t = trace
        p = trace.params
        self.topic_of = [g // p.partitions for g in range(p.partition_count)]
        self.index_of = [g % p.partitions for g in range(p.partition_count)]
        self.epoch_partition = np.array([e.partition for e in trace.epochs])
        self.epoch_number = [e.leader_epoch for e in trace.epochs]
        # Listing/response/forgotten rows of each fetch, ordered by (topic, partition).
        self.listing = self._by_fetch(trace.l_fetch, trace.l_epoch)
        self.response = self._by_fetch(trace.r_fetch, trace.r_epoch)
        self.forgotten = self._by_fetch(trace.forgotten_fetch, trace.forgotten_epoch)

    def _by_fetch(self, fetch: np.ndarray, eid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = self.epoch_partition[eid] if eid.size else eid
        order = np.lexsort((g, fetch))
        return order, np.searchsorted(fetch[order], np.arange(self.t.f_session.size + 1))

    def produce_lines(self, rows: np.ndarray) -> list[str]:
        t = self.t
        names = t.topic_names
        out = []
        times = log_times(t.p_t_log[rows])
        cols = [
            x.tolist()
            for x in (
                t.p_correlation[rows],
                t.p_client[rows],
                t.p_acks[rows],
                t.p_partition[rows],
                t.p_bytes[rows],
                t.p_base_offset[rows],
                t.p_error[rows],
                t.p_queue[rows],
                t.p_local[rows],
                t.p_remote[rows],
                t.p_response_queue[rows],
                t.p_send[rows],
                t.p_leader[rows],
            )
        ]
        timeout = t.params.timeout_ms
        for time, corr, client, acks, g, size, base, err, q, lt, rem, rq, sd, leader in zip(times, *cols, strict=False):
            total = q + lt + rem + rq + sd
            if err != ERROR_NONE:  # rare: the real builder
                body = produce_body(
                    11,
                    corr,
                    acks,
                    names[self.topic_of[g]],
                    [ProducePartition(self.index_of[g], size, base, err)],
                    Timing(q / 1000, lt / 1000, rem / 1000, rq / 1000, sd / 1000),
                    self._client(client, leader),
                    timeout_ms=timeout,
                )
                body["totalTimeMs"] = total / 1000.0
                line = request_log_line(datetime(2026, 1, 1), body)
                out.append("[" + time + "]" + line[line.index("]") + 1 :])
                continue
            out.append(
                PRODUCE_TEMPLATE
                % {
                    "time": time,
                    "correlation": corr,
                    "client": '"' + _client_name(client) + '"',
                    "acks": acks,
                    "timeout": timeout,
                    "topic": '"' + names[self.topic_of[g]] + '"',
                    "partition": self.index_of[g],
                    "bytes": size,
                    "base": base,
                    "connection": f'"10.0.0.{leader}:9092-10.0.1.{client + 1}:{50100 + client}-{client}"',
                    "total": ms(total),
                    "queue": ms(q),
                    "local": ms(lt),
                    "remote": ms(rem),
                    "rq": ms(rq),
                    "send": ms(sd),
                }
            )
        return out

    def _client(self, client: int, leader: int) -> Client:
        return Client(
            client_id=_client_name(client),
            connection=f"10.0.0.{leader}:9092-10.0.1.{client + 1}:{50100 + client}-{client}",
        )

    def _topics(self, kind: tuple[np.ndarray, np.ndarray], row: int, item) -> str:
        order, bounds = kind
        lo, hi = bounds[row], bounds[row + 1]
        if lo == hi:
            return ""
        groups: list[tuple[int, list[str]]] = []
        for i in order[lo:hi].tolist():
            text, topic = item(i)
            if groups and groups[-1][0] == topic:
                groups[-1][1].append(text)
            else:
                groups.append((topic, [text]))
        return ",".join(
            '{"topicId":"' + self.t.topic_ids[topic] + '","partitions":[' + ",".join(items) + "]}"
            for topic, items in groups
        )

    def fetch_lines(self, rows: np.ndarray) -> list[str]:
        t = self.t
        times = log_times(t.f_t_log[rows])
        out = []
        l_epoch, l_off = t.l_epoch.tolist(), t.l_fetch_offset.tolist()
        r_epoch, r_hw, r_bytes = t.r_epoch, t.r_high_watermark, t.r_bytes
        f_epoch = t.forgotten_epoch
        ep, num = self.epoch_partition, self.epoch_number

        def request_item(i):
            e = l_epoch[i]
            g = ep[e]
            return REQUEST_ITEM % (self.index_of[g], num[e], l_off[i], num[e]), self.topic_of[g]

        def response_item(i):
            g = ep[r_epoch[i]]
            return RESPONSE_ITEM % (self.index_of[g], r_hw[i], r_hw[i], r_bytes[i]), self.topic_of[g]

        def forgotten_item(i):
            g = ep[f_epoch[i]]
            return str(self.index_of[g]), self.topic_of[g]

        for time, row in zip(times, rows.tolist(), strict=False):
            s = t.f_session[row]
            follower, leader = t.sessions[s]
            k = int(t.f_index[row])
            sid = int(t.session_ids[s])
            q, lt, rem, rq, sd = (int(x[row]) for x in (t.f_queue, t.f_local, t.f_remote, t.f_response_queue, t.f_send))
            out.append(
                FETCH_TEMPLATE
                % {
                    "time": time,
                    "correlation": k,
                    "client": f'"broker-{follower}-fetcher-0"',
                    "replica": follower,
                    "broker_epoch": 20 + follower,
                    "session_epoch": k,
                    "request_session": 0 if k == 0 else sid,
                    "response_session": sid,
                    "connection": f'"10.0.0.{leader}:9093-10.0.0.{follower}:{40000 + s}-0"',
                    "topics": self._topics(self.listing, row, request_item),
                    "forgotten": self._topics(self.forgotten, row, forgotten_item),
                    "responses": self._topics(self.response, row, response_item),
                    "total": ms(q + lt + rem + rq + sd),
                    "queue": ms(q),
                    "local": ms(lt),
                    "remote": ms(rem),
                    "rq": ms(rq),
                    "send": ms(sd),
                }
            )
        return out


def _noise(trace: Trace, rng: np.random.Generator) -> dict[int, list[tuple[int, str]]]:
    """Consumer FETCH and METADATA lines (unused by the pipeline), per broker: (log time µs, line)."""
    p = trace.params
    out: dict[int, list[tuple[int, str]]] = {b: [] for b in range(1, p.brokers + 1)}
    t_lo, t_hi = int(trace.p_t_local_done[0]), int(trace.p_t_local_done[-1])
    n_fetch = int(p.produces * p.consumer_fetches_per_produce)
    n_meta = int(p.produces * p.metadata_per_produce)
    times = (rng.integers(t_lo, t_hi, n_fetch + n_meta) // 1000) * 1000
    groups = rng.integers(0, p.partition_count, n_fetch + n_meta)
    for i, (t_log, g) in enumerate(zip(times.tolist(), groups.tolist(), strict=False)):
        leader = int(trace.replicas[g, 0])
        timing = Timing(0.05, 0.3, 0.0 if i >= n_fetch else 500.0, 0.05, 0.1)
        if i < n_fetch:
            topic = FetchTopic(
                trace.topic_names[g // p.partitions],
                trace.topic_ids[g // p.partitions],
                [FetchPartition(g % p.partitions, 0, 0)],
            )
            body = fetch_body(17, i, -1, [topic], timing)
        else:
            body = other_body("METADATA", 3, 12, i, timing)
        line = request_log_line(datetime(2026, 1, 1), body)
        out[leader].append((t_log, "[" + _fmt_time(t_log) + "]" + line[line.index("]") + 1 :]))
    return out


def write_request_logs(trace: Trace, out: Path) -> dict[int, int]:
    """`<out>/<cluster>/broker-<id>/kafka-request.log` per broker; returns lines written per broker."""
    renderer = _Renderer(trace)
    noise = _noise(trace, np.random.default_rng([trace.params.seed, 4242]))
    session_leader = np.array([leader for _, leader in trace.sessions], dtype=np.int64)
    f_leader = session_leader[trace.f_session]
    written = {}
    for broker in range(1, trace.params.brokers + 1):
        produce_rows = np.nonzero(trace.p_leader == broker)[0]
        fetch_rows = np.nonzero(f_leader == broker)[0]
        noise_rows = noise[broker]
        times = np.concatenate(
            [
                trace.p_t_log[produce_rows],
                trace.f_t_log[fetch_rows],
                np.array([t for t, _ in noise_rows], dtype=np.int64),
            ]
        )
        kind = np.concatenate(
            [
                np.zeros(produce_rows.size, np.int8),
                np.ones(fetch_rows.size, np.int8),
                np.full(len(noise_rows), 2, np.int8),
            ]
        )
        row = np.concatenate([produce_rows, fetch_rows, np.arange(len(noise_rows))])
        order = np.argsort(times, kind="stable")
        path = out / trace.params.cluster / f"broker-{broker}" / "kafka-request.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as f:
            for lo in range(0, order.size, _CHUNK_LINES):
                chunk = order[lo : lo + _CHUNK_LINES]
                k, r = kind[chunk], row[chunk]
                lines: list[str] = [""] * chunk.size
                for value, render in ((0, renderer.produce_lines), (1, renderer.fetch_lines)):
                    at = np.nonzero(k == value)[0]
                    for i, text in zip(at.tolist(), render(r[at]), strict=False):
                        lines[i] = text
                for i in np.nonzero(k == 2)[0].tolist():
                    lines[i] = noise_rows[r[i]][1]
                f.write("\n".join(lines))
                f.write("\n")
        written[broker] = int(order.size)
    return written


def write_broker_logs(trace: Trace, out: Path) -> None:
    """server.log (ISR shrinks/expands on the leader) and state-change.log (leader and follower starts)."""
    p = trace.params
    server: dict[int, list[tuple[int, str]]] = {b: [] for b in range(1, p.brokers + 1)}
    state: dict[int, list[tuple[int, str]]] = {b: [] for b in range(1, p.brokers + 1)}
    for b in range(1, p.brokers + 1):
        server[b].append(
            (trace.t0, f"INFO [KafkaRaftServer nodeId={b}] Kafka Server started (kafka.server.KafkaRaftServer)")
        )

    def tp(g: int) -> str:
        return f"{trace.topic_names[g // p.partitions]}-{g % p.partitions}"

    isr_now = {e.eid: [e.leader, *e.followers] for e in trace.epochs}
    for e in trace.epochs:
        g = e.partition
        isr = ",".join(map(str, [e.leader, *e.followers]))
        tid = trace.topic_ids[g // p.partitions]
        prev = "None" if e.leader_epoch == 0 else f"Some({trace.epochs[g].leader})"
        state[e.leader].append(
            (
                e.t_begin,
                f"INFO [Broker id={e.leader}] Leader {tp(g)} with topic id Some({tid}) starts at leader epoch {e.leader_epoch} "
                f"from offset {e.start_offset} with partition epoch {e.partition_epoch}, high watermark {e.start_hw}, ISR [{isr}], "
                f"adding replicas [] and removing replicas [] . Previous leader {prev} and previous leader epoch was "
                f"{e.leader_epoch - 1}. (state.change.logger)",
            )
        )
        for f in e.followers:
            previous = trace.epochs[g].leader
            state[f].append(
                (
                    e.t_begin + 3000,
                    f"INFO [Broker id={f}] Follower {tp(g)} starts at leader epoch {e.leader_epoch} from offset {e.start_offset} "
                    f"with partition epoch {e.partition_epoch} and high watermark {e.start_hw}. Current leader is {e.leader}. "
                    f"Previous leader Some({previous}) and previous leader epoch was {max(e.leader_epoch - 1, 0)}. (state.change.logger)",
                )
            )
    for c in sorted(trace.isr_changes, key=lambda c: c.t_commit):
        e = trace.epochs[c.eid]
        prefix = f"INFO [Partition {tp(e.partition)} broker={e.leader}]"
        before = isr_now[c.eid]
        after = [b for b in before if b != c.follower] if c.kind == "shrink" else [*before, c.follower]
        if c.kind == "shrink":
            server[e.leader].append(
                (
                    c.t_propose,
                    f"{prefix} Shrinking ISR from {','.join(map(str, before))} to {','.join(map(str, after))}. Leader: "
                    f"(highWatermark: {c.hw}, endOffset: {c.leader_leo}). Out of sync replicas: (brokerId: {c.follower}, "
                    f"endOffset: {c.follower_leo}, lastCaughtUpTimeMs: {c.last_caught_up_us // 1000}). (kafka.cluster.Partition)",
                )
            )
        min_isr = " (under-min-isr)" if len(after) < p.min_insync_replicas else ""
        server[e.leader].append(
            (
                c.t_commit,
                f"{prefix} ISR updated to {','.join(map(str, after))}{min_isr}  and version updated to {c.partition_epoch} (kafka.cluster.Partition)",
            )
        )
        isr_now[c.eid] = after
    for name, lines in (("server.log", server), ("state-change.log", state)):
        for b, rows in lines.items():
            path = out / p.cluster / f"broker-{b}" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            rows.sort(key=lambda x: x[0])
            path.write_text("".join(f"[{_fmt_time(t // 1000 * 1000)}] {text}\n" for t, text in rows))


def write_topics(trace: Trace, out: Path) -> None:
    p = trace.params
    text = ""
    for t in range(p.topics):
        rows = range(t * p.partitions, (t + 1) * p.partitions)
        assignments = [[int(x) for x in trace.replicas[g]] for g in rows]
        text += topics_describe(
            trace.topic_names[t], trace.topic_ids[t], assignments, {"min.insync.replicas": str(p.min_insync_replicas)}
        )
    path = out / p.cluster / "topics.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_metrics(trace: Trace, out: Path) -> int:
    """JMX-exporter scrapes every `metrics_interval_ms`: each replica's LEO (`kafka_log_log_logendoffset`)
    and each follower's lag (`kafka_server_fetcherlagmetrics_consumerlag`), per broker file."""
    p = trace.params
    step = p.metrics_interval_ms * 1000
    ticks = np.arange(int(trace.p_t_local_done[0]), int(trace.p_t_log.max()), step, dtype=np.int64)
    leo_at: dict[int, np.ndarray] = {}
    for e in trace.epochs:
        rows = np.nonzero(trace.p_epoch == e.eid)[0]
        ends = trace.p_base_offset[rows] + trace.p_records[rows]
        i = np.searchsorted(trace.p_t_local_done[rows], ticks, side="right") - 1
        leo_at[e.eid] = np.where(i >= 0, ends[np.maximum(i, 0)] if ends.size else e.start_offset, e.start_offset)
    # A follower's LEO: what its latest fetch with a listed offset reported (the leader's view, lagging by one round trip).
    follower_at: dict[tuple[int, int], np.ndarray] = {}
    update = trace.follower_update_time
    for e in trace.epochs:
        rows = np.nonzero(trace.l_epoch == e.eid)[0]
        for f in e.followers:
            mine = (
                rows[
                    np.array(
                        [trace.sessions[trace.f_session[trace.l_fetch[r]]][0] == f for r in rows.tolist()], dtype=bool
                    )
                ]
                if rows.size
                else rows
            )
            times = update[trace.l_fetch[mine]]
            order = np.argsort(times, kind="stable")
            i = np.searchsorted(times[order], ticks, side="right") - 1
            offsets = trace.l_fetch_offset[mine][order]
            follower_at[(e.eid, f)] = np.where(
                i >= 0, offsets[np.maximum(i, 0)] if offsets.size else e.start_offset, e.start_offset
            )
    lines = 0
    for b in range(1, p.brokers + 1):
        path = out / p.cluster / "metrics" / f"broker-{b}.prom"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as prom:
            for j, tick in enumerate(ticks.tolist()):
                stamp = tick // 1000
                samples = [
                    "# HELP kafka_log_log_logendoffset Attribute exposed for management kafka.log:name=LogEndOffset,type=Log,attribute=Value",
                    "# TYPE kafka_log_log_logendoffset gauge",
                ]
                lags = []
                for e in trace.epochs:
                    if not (e.t_begin <= tick < e.t_end):
                        continue
                    g = e.partition
                    labels = f'partition="{g % p.partitions}",topic="{trace.topic_names[g // p.partitions]}"'
                    if e.leader == b:
                        samples.append(f"kafka_log_log_logendoffset{{{labels}}} {float(leo_at[e.eid][j])} {stamp}")
                    elif b in e.followers:
                        have = int(follower_at[(e.eid, b)][j])
                        samples.append(f"kafka_log_log_logendoffset{{{labels}}} {float(have)} {stamp}")
                        lags.append(
                            f'kafka_server_fetcherlagmetrics_consumerlag{{clientId="ReplicaFetcherThread-0-{e.leader}",{labels}}} '
                            f"{float(max(int(leo_at[e.eid][j]) - have, 0))} {stamp}"
                        )
                samples += [
                    "# HELP kafka_server_fetcherlagmetrics_consumerlag Attribute exposed for management kafka.server:name=ConsumerLag,type=FetcherLagMetrics,attribute=Value",
                    "# TYPE kafka_server_fetcherlagmetrics_consumerlag gauge",
                    *lags,
                ]
                prom.write("\n".join(samples) + "\n\n")
                lines += len(samples) + 1
    return lines
