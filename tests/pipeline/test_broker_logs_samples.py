"""The broker-log step on the bundled real traces (data/samples/): ISR changes and leader epochs of the
faults the lab injected (manifest.json), and every server.log / state-change.log line accounted for.

Line counts are taken here with plain gzip + substring counts, independently of the pipeline; the
manifest's own tallies (`counts.isr`) were taken by the lab when it recorded the trace.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from ackreplay.config import load_config
from ackreplay.ingest.broker_logs import ingest_broker_logs
from ackreplay.storage.inputs import discover_inputs
from ackreplay.storage.lakehouse import read_table
from tests.conftest import SAMPLES as ALL_SAMPLES

SAMPLES = {p.name: p for p in ALL_SAMPLES}
TOPIC = "ackreplay-lab"


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


# Per trace, exactly what the logs show (checked by hand against the raw lines):
#  shrinks   - (partition, leader, ISR after, out-of-sync replicas, proposed at, committed at, committing log)
#  re-adds   - the next ISR state of the same leader: (partition, leader, kind, ISR, at, log)
#  shutdown  - ISR changes of the leader restart's controlled shutdown, only in state-change.log
#  leaders   - leader_epochs rows of the restart: (partition, new leader, epoch, start offset, previous leader, at)
#  final_leader - (epoch, leader) of the restarted partition's last leader epoch before the workload's end
#  totals    - isr_changes rows by (change kind, source), commits seen in both logs
EXPECTED = {
    "trace-3.9.1-utc": {
        "shrinks": [
            # The first commit reached the leader through the metadata log first: no "ISR updated to" line.
            (3, 1, [1, 3], [2], ts("2026-11-22 18:31:35.619"), ts("2026-11-22 18:31:35.674"), "state_change_log"),
            (1, 1, [1, 3], [2], ts("2026-11-22 18:31:35.626"), ts("2026-11-22 18:31:35.713"), "server_log"),
            (4, 3, [3, 1], [2], ts("2026-11-22 18:31:36.702"), ts("2026-11-22 18:31:36.749"), "state_change_log"),
            (0, 3, [3, 1], [2], ts("2026-11-22 18:31:36.708"), ts("2026-11-22 18:31:36.780"), "server_log"),
            # The stalled leader itself, once resumed, drops a follower that could not fetch from it.
            (5, 2, [2, 3], [1], ts("2026-11-22 18:31:39.034"), ts("2026-11-22 18:31:39.222"), "server_log"),
        ],
        "re_adds": [
            (3, 1, "expand", [1, 3, 2], ts("2026-11-22 18:31:39.102"), "server_log"),
            (1, 1, "expand", [1, 3, 2], ts("2026-11-22 18:31:39.102"), "server_log"),
            (4, 3, "expand", [3, 1, 2], ts("2026-11-22 18:31:39.098"), "server_log"),
            (0, 3, "expand", [3, 1, 2], ts("2026-11-22 18:31:39.048"), "server_log"),
            (5, 2, "expand", [2, 3, 1], ts("2026-11-22 18:31:39.276"), "server_log"),
        ],
        "shutdown": [
            (5, 2, [2, 1], ts("2026-11-22 18:32:11.669")),
            (3, 1, [1, 2], ts("2026-11-22 18:32:11.678")),
            (2, 2, [2, 1], ts("2026-11-22 18:32:11.680")),
            (1, 1, [1, 2], ts("2026-11-22 18:32:11.682")),
        ],
        "leaders": [
            (4, 2, 1, 6366, 3, ts("2026-11-22 18:32:11.675")),
            (0, 1, 1, 5815, 3, ts("2026-11-22 18:32:11.728")),
        ],
        "final_leader": (1, 1),
        "totals": (
            {
                ("leader_start", "state_change_log"): 75,
                ("shrink", "server_log"): 4,
                ("shrink", "state_change_log"): 39,
                ("expand", "server_log"): 62,
            },
            65,
        ),
    },
    "trace-4.1.1-berlin": {
        "shrinks": [
            (1, 3, [3, 2], [1], ts("2026-11-23 20:13:10.516"), ts("2026-11-23 20:13:10.593"), "server_log"),
            (5, 3, [3, 2], [1], ts("2026-11-23 20:13:10.516"), ts("2026-11-23 20:13:10.588"), "server_log"),
            (4, 2, [2, 3], [1], ts("2026-11-23 20:13:10.898"), ts("2026-11-23 20:13:10.930"), "server_log"),
            (0, 2, [2, 3], [1], ts("2026-11-23 20:13:10.899"), ts("2026-11-23 20:13:10.961"), "server_log"),
            # The stalled leader itself, once resumed, drops the followers that could not fetch from it:
            # both followers of both its partitions (ISR [1], under min ISR), then re-adds them one by one.
            (3, 1, [1], [2, 3], ts("2026-11-23 20:13:13.589"), ts("2026-11-23 20:13:13.799"), "server_log"),
            (2, 1, [1], [2, 3], ts("2026-11-23 20:13:13.595"), ts("2026-11-23 20:13:13.858"), "server_log"),
        ],
        "re_adds": [
            (1, 3, "expand", [3, 2, 1], ts("2026-11-23 20:13:13.836"), "server_log"),
            (5, 3, "expand", [3, 2, 1], ts("2026-11-23 20:13:13.835"), "server_log"),
            (4, 2, "expand", [2, 3, 1], ts("2026-11-23 20:13:13.798"), "server_log"),
            (0, 2, "expand", [2, 3, 1], ts("2026-11-23 20:13:13.849"), "server_log"),
            # these expand commits reached the leader through the metadata log first: no "ISR updated to" line
            (3, 1, "expand", [1, 2], ts("2026-11-23 20:13:14.055"), "state_change_log"),
            (2, 1, "expand", [1, 3], ts("2026-11-23 20:13:14.143"), "state_change_log"),
        ],
        "shutdown": [
            (5, 3, [3, 1], ts("2026-11-23 20:13:48.645")),
            (1, 3, [3, 1], ts("2026-11-23 20:13:48.716")),
            (3, 1, [1, 3], ts("2026-11-23 20:13:48.777")),
            (2, 1, [1, 3], ts("2026-11-23 20:13:48.837")),
        ],
        "leaders": [
            (4, 3, 1, 10585, 2, ts("2026-11-23 20:13:48.729")),
            (0, 3, 1, 9849, 2, ts("2026-11-23 20:13:48.819")),
        ],
        "final_leader": (2, 2),
        "totals": (
            {
                ("leader_start", "state_change_log"): 131,
                ("shrink", "server_log"): 57,
                ("shrink", "state_change_log"): 56,
                ("expand", "server_log"): 140,
                ("expand", "state_change_log"): 25,
            },
            131,
        ),
    },
}


def _independent_counts(trace: Path) -> dict[str, int]:
    """Lines and marker counts of the brokers' logs, read with gzip (the pipeline's reader is not used)."""
    out = dict.fromkeys(
        (
            "server_lines", "state_lines", "shrink", "updated", "leader", "skipped", "follower", "dumps", "settings",
            "versions", "start_times", "controller_lines", "registrations", "deltas",
        ),
        0,
    )  # fmt: skip
    for path in sorted(trace.glob("*/broker-*/*.log*")):
        name = path.name.split(".log")[0]
        if name not in ("server", "state-change"):
            continue
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        n = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        text = data.decode()
        if name == "server":
            out["server_lines"] += n
            out["shrink"] += text.count("] Shrinking ISR from ")
            out["updated"] += text.count("] ISR updated to ")
            out["dumps"] += text.count("] INFO KafkaConfig values: \n")
            out["settings"] += text.count("\n\treplica.lag.time.max.ms = ") + text.count(
                "\n\treplica.fetch.wait.max.ms = "
            )
            out["versions"] += text.count("] INFO Kafka version: ")
            out["start_times"] += text.count("] INFO Kafka startTimeMs: ")
        else:
            out["state_lines"] += n
            out["leader"] += text.count("] Leader ")
            out["skipped"] += text.count("since it is already the leader with leader epoch")
            out["follower"] += text.count("] Follower ")
            out["deltas"] += len(
                re.findall(r"\] Transitioning \d+ partition\(s\) to local (?:leaders|followers)\.", text)
            )
    for path in sorted(trace.glob("*/controller-*/controller.log*")):
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        out["controller_lines"] += text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        out["registrations"] += sum(
            text.count(f"] Replayed {marker}")
            for marker in ("initial RegisterBrokerRecord ", "RegisterBrokerRecord ", "BrokerRegistrationChangeRecord ")
        )
    return out


@pytest.fixture(scope="module")
def ingested(sample_run):
    """Both traces' broker logs as the ingest stage read them, in the session's one run of each trace
    (tests/conftest.py), with their reports and the files that step was given. About a minute when this
    module is the first of the session to ask for a trace: that trace's whole pipeline run happens here."""
    out = {}
    for name, trace in SAMPLES.items():
        run = sample_run(trace)
        inventory = discover_inputs(str(trace))
        files = [f for kind in ("server_log", "state_change_log", "controller_log") for f in inventory.of_kind(kind)]
        out[name] = (trace, files, run.lakehouse, run.ingest.broker_logs)
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_broker_log_line_is_accounted_for(ingested, name):
    trace, files, _, report = ingested[name]
    manifest = json.loads((trace / "manifest.json").read_text())
    counts = _independent_counts(trace)
    assert report.server_log_files + report.state_change_log_files + report.controller_log_files == len(files)
    assert report.controller_log_files == 1
    assert report.server_log.total == counts["server_lines"]
    assert report.state_change_log.total == counts["state_lines"]
    assert report.controller_log.total == counts["controller_lines"]
    assert (
        report.server_log.quarantined == report.state_change_log.quarantined == report.controller_log.quarantined == 0
    )
    assert report.parsed_detail == {
        "isr_shrink": manifest["counts"]["isr"]["shrink_lines"],
        "isr_update": manifest["counts"]["isr"]["updated_lines"],
        "leader_start": counts["leader"],
        "leader_skip": counts["skipped"],
        "follower_start": counts["follower"],
        "config_dump": counts["dumps"],
        "broker_setting": counts["settings"],
        "app_version": counts["versions"],
        "app_start_time": counts["start_times"],
        "broker_registration": counts["registrations"],
        "metadata_delta": counts["deltas"],
    }
    # each broker's first registration and unfencing, and the restarted broker's shutdown and return
    assert counts["registrations"] == {"trace-3.9.1-utc": 15, "trace-4.1.1-berlin": 16}[trace.name]
    # a config dump per broker start (3.9.1: broker 3 restarted; 4.1.1 prints the dump twice per start),
    # with the two settings kept of each
    assert (counts["dumps"], counts["settings"]) == {"trace-3.9.1-utc": (4, 8), "trace-4.1.1-berlin": (8, 16)}[
        trace.name
    ]
    # AppInfoParser's release and start time at each broker start (the release as two rows: major, minor)
    assert counts["versions"] == counts["start_times"] == {"trace-3.9.1-utc": 4, "trace-4.1.1-berlin": 4}[trace.name]
    assert counts["shrink"] == manifest["counts"]["isr"]["shrink_lines"]
    assert counts["updated"] == manifest["counts"]["isr"]["updated_lines"]
    by_kind, duplicates = EXPECTED[name]["totals"]
    assert report.isr_changes_by_kind == by_kind
    assert report.duplicate_commits == duplicates
    assert report.shrinks_without_commit == 0
    assert report.rows_written == {
        "quarantine": 0,
        "isr_changes": counts["updated"] + counts["skipped"] + counts["leader"] - duplicates,
        "leader_epochs": counts["leader"],
        "follower_starts": counts["follower"],
        "broker_configs": counts["settings"] + 2 * counts["versions"] + counts["start_times"],
        "follower_leo_records": 0,  # kafka.cluster.Partition at INFO: no "Recorded replica" lines
        "broker_registrations": counts["registrations"],  # one controller: each record once
        "metadata_deltas": counts["deltas"],
    }
    assert report.duplicate_registrations == 0
    assert report.settings_without_dump == 0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_long_stall_shrinks_the_isr_and_the_stalled_broker_rejoins(spark, ingested, name):
    trace, _, lakehouse, _ = ingested[name]
    manifest = json.loads((trace / "manifest.json").read_text())
    stall = next(f for f in manifest["faults"] if f["kind"] == "long_stall")
    lag_ms = manifest["configs"]["broker"]["replica.lag.time.max.ms"]
    isr = read_table(spark, lakehouse, "isr_changes").filter(F.col("topic") == TOPIC)
    following = Window.partitionBy("partition", "broker_id").orderBy("t_log")
    with_next = isr.withColumns(
        {
            "next_kind": F.lead("change_kind").over(following),
            "next_isr": F.lead("isr").over(following),
            "next_t": F.lead("t_log").over(following),
            "next_source": F.lead("source").over(following),
        }
    )
    # two leaders can propose in the same millisecond (4.1.1: partitions 1 and 5): the partition breaks the tie
    shrinks = with_next.filter(F.col("proposed_at").isNotNull()).orderBy("proposed_at", "partition").collect()
    history = {}  # the lab topic's few ISR states, per (partition, leader), in time order
    for c in isr.orderBy("t_log").collect():
        history.setdefault((c["partition"], c["broker_id"]), []).append(c)
    expected = EXPECTED[name]
    assert [
        (
            r["partition"],
            r["broker_id"],
            r["isr"],
            [o["broker_id"] for o in r["out_of_sync_replicas"]],
            r["proposed_at"],
            r["t_log"],
            r["source"],
        )
        for r in shrinks
    ] == expected["shrinks"]
    assert all(r["change_kind"] == "shrink" for r in shrinks)
    assert [
        (r["partition"], r["broker_id"], r["next_kind"], r["next_isr"], r["next_t"], r["next_source"]) for r in shrinks
    ] == expected["re_adds"]
    # The other leaders drop the stalled broker once replica.lag.time.max.ms has passed since it last
    # caught up (its last fetch, at most one fetch wait after the SIGSTOP), within the stall; the next
    # ISR change comes, and every replica dropped is back, less than a second after the stall ends.
    start, end = _utc(stall["start_utc"]), _utc(stall["end_utc"])
    fetch_wait = timedelta(milliseconds=manifest["configs"]["broker"]["replica.fetch.wait.max.ms"])
    for r in shrinks:
        if r["broker_id"] != stall["broker"]:
            (gone,) = r["out_of_sync_replicas"]
            assert gone["broker_id"] == stall["broker"]
            caught_up = datetime(1970, 1, 1) + timedelta(milliseconds=gone["last_caught_up_time_ms"])
            assert start - fetch_wait <= caught_up <= start + fetch_wait
            assert caught_up + timedelta(milliseconds=lag_ms) <= r["proposed_at"] < end
        assert end <= r["next_t"] <= end + timedelta(seconds=1)
        # back in full within a second of the stall's end (4.1.1 partitions 2 and 3 re-add their two one by one)
        dropped = {o["broker_id"] for o in r["out_of_sync_replicas"]}
        later = [c for c in history[(r["partition"], r["broker_id"])] if c["t_log"] > r["t_log"]]
        rejoined = next(c for c in later if dropped <= set(c["isr"]))
        assert rejoined["t_log"] <= end + timedelta(seconds=1)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_leader_restart_moves_leadership_and_shrinks_the_isr(spark, ingested, name):
    trace, _, lakehouse, _ = ingested[name]
    manifest = json.loads((trace / "manifest.json").read_text())
    restart = next(f for f in manifest["faults"] if f["kind"] == "leader_stop_restart")
    stopped, down_from, down_to = restart["broker"], _utc(restart["stop_utc"]), _utc(restart["ready_utc"])
    in_window = (F.col("topic") == TOPIC) & F.col("t_log").between(down_from, down_to)

    leaders = read_table(spark, lakehouse, "leader_epochs").filter(in_window).orderBy("t_log").collect()
    assert [
        (r["partition"], r["broker_id"], r["leader_epoch"], r["epoch_start_offset"], r["previous_leader"], r["t_log"])
        for r in leaders
    ] == EXPECTED[name]["leaders"]
    # The partition the lab watched: led by the stopped broker before, by another replica after; at the
    # end by the leader of its last epoch - on 4.1.1 the restarted broker again, which the controller's
    # preferred-leader election gave it back ~40 s after the restart (epoch 2).
    (watched,) = [r for r in leaders if r["partition"] == restart["partition"]]
    assert restart["leader_before"]["leader"] == stopped == watched["previous_leader"] != watched["broker_id"]
    last = (
        read_table(spark, lakehouse, "leader_epochs")
        .filter((F.col("topic") == TOPIC) & (F.col("partition") == restart["partition"]))
        .filter(F.col("t_log") <= _utc(manifest["workload"]["end_utc"]))
        .orderBy(F.desc("t_log"))
        .first()
    )
    assert last["broker_id"] == manifest["leaders"]["end"][str(restart["partition"])]["leader"]
    assert (last["leader_epoch"], last["broker_id"]) == EXPECTED[name]["final_leader"]
    assert all(stopped not in r["isr"] for r in leaders)

    shutdown = (
        read_table(spark, lakehouse, "isr_changes")
        .filter(in_window & (F.col("change_kind") == "shrink"))
        .orderBy("t_log")
        .collect()
    )
    assert [(r["partition"], r["broker_id"], r["isr"], r["t_log"]) for r in shutdown] == EXPECTED[name]["shutdown"]
    assert all(r["source"] == "state_change_log" and r["proposed_at"] is None for r in shutdown)
    assert all(set(r["previous_isr"]) - set(r["isr"]) == {stopped} for r in shutdown)


def test_rerun_replaces_the_rows_of_the_same_files(spark, ingested, tmp_path):
    _, files, shared, first = ingested["trace-4.1.1-berlin"]
    lakehouse = str(tmp_path / "lakehouse")
    shutil.copytree(shared, lakehouse)  # the shared run's lakehouse stays as it is
    again = ingest_broker_logs(spark, load_config("conf/local.yaml"), files, lakehouse, "test-run-2")
    assert again.rows_written == first.rows_written
    for table in ("isr_changes", "leader_epochs"):
        df = read_table(spark, lakehouse, table)
        assert df.count() == first.rows_written[table]
        assert {r["ingest_run_id"] for r in df.select("ingest_run_id").distinct().collect()} == {"test-run-2"}


def test_unparseable_lines_go_to_quarantine_and_no_files_still_create_the_tables(spark, tmp_path):
    broker = tmp_path / "input" / "c1" / "broker-1"
    broker.mkdir(parents=True)
    update = (
        "[2026-11-22 02:43:10,804] INFO [Partition ackreplay-lab-5 broker=1] ISR updated to 1,3  and version "
        "updated to 1 (kafka.cluster.Partition)"
    )
    cut = "[2026-11-22 02:43:10,658] INFO [Partition ackreplay-lab-5 broker=1] Shrinking ISR from 1,3,2 to 1,3. Lea"
    (broker / "server.log").write_text("\n".join([update, "\tlog.dirs = /tmp/x", cut]) + "\n")
    (broker / "state-change.log.2026-11-22-02.gz").write_bytes(
        gzip.compress(
            b"[2026-11-22 02:43:10,799] INFO [Broker id=1] Started fetchers as part of become-follower for 1 partitions"
        )
    )
    (broker / "kafka-request.log").write_text("")
    inventory = discover_inputs(str(tmp_path / "input"))
    files = inventory.of_kind("server_log") + inventory.of_kind("state_change_log")
    config = load_config("conf/local.yaml")
    lakehouse = str(tmp_path / "lakehouse")

    with pytest.raises(ValueError, match="not request_log"):
        ingest_broker_logs(spark, config, inventory.files, lakehouse, "r1")
    empty = ingest_broker_logs(spark, config, [], lakehouse, "r0")
    assert empty.server_log.total == empty.state_change_log.total == 0
    assert (
        read_table(spark, lakehouse, "isr_changes").count()
        == read_table(spark, lakehouse, "leader_epochs").count()
        == 0
    )

    report = ingest_broker_logs(spark, config, files, lakehouse, "r1")
    assert (report.server_log.parsed, report.server_log.unused, report.server_log.quarantined) == (1, 1, 1)
    assert (report.state_change_log.parsed, report.state_change_log.unused, report.state_change_log.total) == (0, 1, 1)
    assert report.rows_written == {
        "quarantine": 1, "isr_changes": 1, "leader_epochs": 0, "follower_starts": 0, "broker_configs": 0,
        "follower_leo_records": 0, "broker_registrations": 0, "metadata_deltas": 0,
    }  # fmt: skip
    assert report.isr_changes_by_kind == {(None, "server_log"): 1}  # no earlier state of this leader was read
    quarantine = read_table(spark, lakehouse, "quarantine").collect()
    assert [
        (r["stage"], r["source_file"], r["line_number"], r["line"], r["reason"], str(r["event_date"]))
        for r in quarantine
    ] == [
        (
            "server_log",
            "c1/broker-1/server.log",
            3,
            cut,
            "'Shrinking ISR' line in no known format (cut short?)",
            "2026-11-22",
        )
    ]
