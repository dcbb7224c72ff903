"""server.log / state-change.log lines: classification, isr_changes, leader_epochs (chispa).

Real lines are copied from the first lab recordings (2026-11-22; 3.9.1 in UTC, 4.1.1 in Europe/Berlin),
since re-recorded in data/samples/ with a warm-up, whose lines have the same shapes;
the other versions' shapes follow kafka-reference.md §3.3 and Partition.scala of those releases.
The 4.2+ "Skipped the become-leader" line is built from its format string in Partition.makeLeader and
PartitionRegistration.toString of 4.2.0-4.4.0 (docs/kafka-versions.md); the real 4.3.1 trace's lines
are checked in tests/pipeline/test_corpus.py.
"""

from datetime import date, datetime

import pytest
from pyspark.sql import functions as F

from ackreplay.transforms.broker_logs import (
    broker_setting_rows,
    build_broker_configs,
    build_broker_registrations,
    build_follower_leo_records,
    build_follower_starts,
    build_isr_changes,
    build_leader_epochs,
    build_metadata_deltas,
    with_broker_line_status,
    with_broker_message,
)
from ackreplay.transforms.request_log import with_event_time, with_log_fields
from tests.helpers import assert_df_equality, lines_frame, micros

PARTITION = "(kafka.cluster.Partition)"
STATE = "(state.change.logger)"
ID_391 = "X_pHolbXQcuxgBXawwk3Tw"
ID_411 = "zL7cz-PPSRuwJ8atn9suyA"


def _skip(
    ts: str, broker: int, tp: str, topic_id: str, partition_state_isr: str, pe: int, le: int, hw: int, isr: str
) -> str:
    """A "Skipped the become-leader" line exactly as 3.9.1 / 4.1.1 print it (the lab traces' shape)."""
    topic, index = tp.rsplit("-", 1)
    return (
        f"[{ts}] INFO [Broker id={broker}] Skipped the become-leader state change for {tp} with topic id Some({topic_id}) "
        f"and partition state LeaderAndIsrPartitionState(topicName='{topic}', partitionIndex={index}, controllerEpoch=-1, "
        f"leader={broker}, leaderEpoch={le}, isr=[{partition_state_isr}], partitionEpoch={pe}, replicas=[1, 3, 2], "
        f"addingReplicas=[], removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is already the leader "
        f"with leader epoch {le}. Current high watermark {hw}, ISR [{isr}], adding replicas [] and removing replicas []. "
        f"{STATE}"
    )


# Log-dir ids (Uuid.toString) of brokers 1-4 in a registration's `directories`.
DIRS = {
    1: "kTsc7m9QSAq6WQ1YwZq4hA",
    2: "3f0pK2xVTd-qZkC2m4fB7g",
    3: "b_Vh8nRZQ1e8Yx0nJt5s2w",
    4: "Wq0T5yJvRAOr1xk8c2eN9g",
}


def _skip_registration(
    ts: str,
    broker: int,
    tp: str,
    topic_id: str,
    registration_isr: str,
    pe: int,
    le: int,
    hw: int,
    isr: str,
    replicas: str = "1, 3, 2",
    elr: str = "",
) -> str:
    """A "Skipped the become-leader" line as 4.2-4.4 print it: Partition.makeLeader's
    s"... with topic id $topicId, partition registration $partitionRegistration and isNew=$isNew since ..."
    with PartitionRegistration.toString."""
    directories = ", ".join(DIRS[int(b)] for b in replicas.split(", "))
    return (
        f"[{ts}] INFO [Broker id={broker}] Skipped the become-leader state change for {tp} with topic id Some({topic_id}), "
        f"partition registration PartitionRegistration(replicas=[{replicas}], directories=[{directories}], "
        f"isr=[{registration_isr}], removingReplicas=[], addingReplicas=[], elr=[{elr}], lastKnownElr=[], leader={broker}, "
        f"leaderRecoveryState=RECOVERED, leaderEpoch={le}, partitionEpoch={pe}) and isNew=false since it is "
        f"already the leader with leader epoch {le}. Current high watermark {hw}, ISR [{isr}], adding replicas [] and "
        f"removing replicas []. {STATE}"
    )


# 3.9.1 lab trace, broker 1: the long stall of broker 2 (shrink + re-add of partition 5), then the
# controlled shutdown of broker 2 (ISR change only in state-change.log) and its return.
SERVER_391 = [
    f"[2026-11-22 02:43:10,658] INFO [Partition ackreplay-lab-5 broker=1] Shrinking ISR from 1,3,2 to 1,3. Leader: "
    f"(highWatermark: 1030, endOffset: 1046). Out of sync replicas: (brokerId: 2, endOffset: 1030, "
    f"lastCaughtUpTimeMs: 1795315387189). {PARTITION}",
    f"[2026-11-22 02:43:10,804] INFO [Partition ackreplay-lab-5 broker=1] ISR updated to 1,3  and version updated to 1 {PARTITION}",
    f"[2026-11-22 02:43:13,740] INFO [Partition ackreplay-lab-5 broker=1] ISR updated to 1,3,2  and version updated to 2 {PARTITION}",
    f"[2026-11-22 02:44:11,035] INFO [Partition ackreplay-lab-5 broker=1] ISR updated to 1,3,2  and version updated to 4 {PARTITION}",
]
STATE_391 = [
    f"[2026-11-22 02:42:34,948] INFO [Broker id=1] Leader ackreplay-lab-5 with topic id Some({ID_391}) starts at leader "
    f"epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [1,3,2], adding replicas [] and removing "
    f"replicas [] . Previous leader None and previous leader epoch was -1. {STATE}",
    _skip("2026-11-22 02:43:10,809", 1, "ackreplay-lab-5", ID_391, "1, 3", 1, 0, 1047, "1,3"),
    _skip("2026-11-22 02:43:13,751", 1, "ackreplay-lab-5", ID_391, "1, 3, 2", 2, 0, 1293, "1,3,2"),
    _skip("2026-11-22 02:43:48,279", 1, "ackreplay-lab-5", ID_391, "1, 3", 3, 0, 2568, "1,3"),
    f"[2026-11-22 02:43:48,356] INFO [Broker id=1] Leader ackreplay-lab-4 with topic id Some({ID_391}) starts at leader "
    f"epoch 1 from offset 3457 with partition epoch 3, high watermark 3454, ISR [3,1], adding replicas [] and removing "
    f"replicas [] . Previous leader Some(2) and previous leader epoch was 0. {STATE}",
    f"[2026-11-22 02:43:48,495] INFO [Broker id=1] Follower ackreplay-lab-0 starts at leader epoch 1 from offset 3162 "
    f"with partition epoch 3 and high watermark 3160. Current leader is 3. Previous leader Some(3) and previous leader "
    f"epoch was 1. {STATE}",
    _skip("2026-11-22 02:44:11,036", 1, "ackreplay-lab-5", ID_391, "1, 3, 2", 4, 0, 3409, "1,3,2"),
]

# 4.1.1 lab trace (JVM in Europe/Berlin), broker 2: the shrink of partition 4 after broker 1's long
# stall reached the leader through the metadata log: no "ISR updated to" line for partition epoch 1.
SERVER_411 = [
    f"[2026-11-22 03:58:30,401] INFO [Partition ackreplay-lab-4 broker=2] Shrinking ISR from 2,1,3 to 2,3. Leader: "
    f"(highWatermark: 1446, endOffset: 1477). Out of sync replicas: (brokerId: 1, endOffset: 1446, "
    f"lastCaughtUpTimeMs: 1795316307136). {PARTITION}",
    f"[2026-11-22 03:58:33,970] INFO [Partition ackreplay-lab-4 broker=2] ISR updated to 2,3,1  and version updated to 2 {PARTITION}",
]
STATE_411 = [
    f"[2026-11-22 03:57:55,171] INFO [Broker id=2] Leader ackreplay-lab-4 with topic id Some({ID_411}) starts at leader "
    f"epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [2,1,3], adding replicas [] and removing "
    f"replicas [] . Previous leader None and previous leader epoch was -1. {STATE}",
    _skip("2026-11-22 03:58:30,515", 2, "ackreplay-lab-4", ID_411, "2, 3", 1, 0, 1446, "2,3"),
    _skip("2026-11-22 03:58:33,983", 2, "ackreplay-lab-4", ID_411, "2, 3, 1", 2, 0, 1774, "2,3,1"),
    _skip("2026-11-22 03:59:11,051", 2, "ackreplay-lab-4", ID_411, "2, 3", 3, 0, 3593, "2,3"),
]

OOS = "array<struct<broker_id:int,end_offset:bigint,last_caught_up_time_ms:bigint>>"
ISR_COLUMNS = (
    "partition",
    "broker_id",
    "leader_epoch",
    "partition_epoch",
    "isr",
    "isr_size",
    "under_min_isr",
    "previous_isr",
    "change_kind",
    "proposed_at",
    "out_of_sync_replicas",
    "proposal_high_watermark",
    "source",
    "t_log",
    "line_number",
)
ISR_DDL = (
    "partition int, broker_id int, leader_epoch int, partition_epoch int, isr array<int>, isr_size int, "
    f"under_min_isr boolean, previous_isr array<int>, change_kind string, proposed_at timestamp, out_of_sync_replicas {OOS}, "
    "proposal_high_watermark bigint, source string, t_log timestamp, line_number bigint"
)


# The 3.9.1 trace above as 4.2-4.4 print it: "Leader ... starts", "Shrinking ISR" and "ISR updated to"
# read the same; the "Skipped the become-leader" lines state a PartitionRegistration.
STATE_43 = [
    STATE_391[0],
    _skip_registration("2026-11-22 02:43:10,809", 1, "ackreplay-lab-5", ID_391, "1, 3", 1, 0, 1047, "1,3"),
    _skip_registration("2026-11-22 02:43:13,751", 1, "ackreplay-lab-5", ID_391, "1, 3, 2", 2, 0, 1293, "1,3,2"),
    _skip_registration("2026-11-22 02:43:48,279", 1, "ackreplay-lab-5", ID_391, "1, 3", 3, 0, 2568, "1,3"),
    STATE_391[4],
    STATE_391[5],
    _skip_registration("2026-11-22 02:44:11,036", 1, "ackreplay-lab-5", ID_391, "1, 3, 2", 4, 0, 3409, "1,3,2"),
]


def log_frame(spark, lines, stage, broker_id=1, errors=None):
    """Lines of one broker's server.log or state-change.log, shaped like the reader's output plus `stage`."""
    name = {"server_log": "server.log", "state_change_log": "state-change.log", "controller_log": "controller.log"}[
        stage
    ]
    folder = "controller" if stage == "controller_log" else "broker"
    return lines_frame(spark, lines, errors, broker_id).withColumns(
        {"source_file": F.lit(f"c1/{folder}-{broker_id}/{name}"), "stage": F.lit(stage)}
    )


def classify(df, zones=None):
    return (
        df.transform(with_log_fields)
        .transform(with_event_time, zones or {}, "UTC", {})
        .transform(with_broker_message)
        .transform(with_broker_line_status)
    )


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_every_line_gets_a_status_and_reason(spark):
    update = SERVER_391[1]
    server = [
        SERVER_391[0],  # 1 shrink (3.6+)
        update,  # 2 commit (3.5+)
        "[2021-06-01 10:00:00,000] INFO [Partition orders-0 broker=1] ISR updated to 1,2 and version updated to [7] "
        + PARTITION,  # 3 2.8-3.0
        "[2023-06-01 10:00:00,000] INFO [Partition orders-0 broker=1] ISR updated to 1 (under-min-isr) and version "
        "updated to 8 " + PARTITION,  # 4 3.5+, under min ISR
        "[2022-06-01 10:00:00,000] INFO [Partition orders-0 broker=1] Shrinking ISR from 1,2,3 to 1. Leader: "
        "(highWatermark: 100, endOffset: 120). Out of sync replicas: (brokerId: 2, endOffset: 100) "
        "(brokerId: 3, endOffset: unknown). " + PARTITION,  # 5 2.4-3.5
        SERVER_391[0][:140],  # 6 shrink cut short
        update.replace("02:43:10,804", "02:43:61,804"),  # 7 unreadable time
        update[: -len(" " + PARTITION)],  # 8 commit without its logger: cut at the end
        "[2026-11-22 02:42:34,945] INFO [Partition ackreplay-lab-5 broker=1] Log loaded for partition ackreplay-lab-5 "
        "with initial high watermark 0 " + PARTITION,  # 9
        "\tadvertised.listeners = CLIENT://127.0.0.1:39101,REPLICATION://127.0.0.1:39102",  # 10 KafkaConfig dump
        update,  # 11 flagged by the reader
        "\x00garbage",  # 12 flagged by the reader, not an ISR line
        "[2026-11-22 02:4",  # 13 the tail of a gzip file cut short
        update.replace("to 1,3  and", "to 1,99999999999  and"),  # 14 a broker id that fits no int
    ]
    state = [
        STATE_391[0],  # 1 leader start
        STATE_391[1],  # 2 skipped become-leader: a commit
        STATE_391[5],  # 3 follower start
        STATE_391[1].split(" since it is")[0]
        + " since the leader is already at a newer partition epoch 4. "
        + STATE,  # 4
        STATE_391[1][:230],  # 5 commit cut short
        STATE_391[4][:150],  # 6 leader start cut short
        f"[2026-11-22 02:42:34,862] INFO [Broker id=1] Creating new partition ackreplay-lab-5 with topic id {ID_391}. "
        + STATE,  # 7
        "[2021-06-01 10:00:00,000] INFO [Broker id=1] Leader orders-0 starts at leader epoch 3 from offset 1200 with "
        "high watermark 1190 ISR [1,2] addingReplicas [] removingReplicas []. Previous leader epoch was 2. "
        + STATE,  # 8 2.8-3.0 shape
        "[2026-11-22 02:42:34,856] INFO [Broker id=1] Transitioning 2 partition(s) to local leaders. " + STATE,  # 9
    ]
    df = log_frame(
        spark,
        server,
        "server_log",
        errors={
            11: "invalid UTF-8 at byte 40",
            12: "invalid UTF-8 at byte 0",
            13: "file unreadable after line 13: EOF",
        },
    ).unionByName(log_frame(spark, state, "state_change_log"))
    actual = classify(df).select("stage", "line_number", "status", "detail")
    no_prefix = "no log4j prefix (continuation line: stack trace, config dump)"
    expected = spark.createDataFrame(
        [
            ("server_log", 1, "parsed", "isr_shrink"),
            ("server_log", 2, "parsed", "isr_update"),
            ("server_log", 3, "parsed", "isr_update"),
            ("server_log", 4, "parsed", "isr_update"),
            ("server_log", 5, "parsed", "isr_shrink"),
            ("server_log", 6, "quarantined", "'Shrinking ISR' line in no known format (cut short?)"),
            (
                "server_log",
                7,
                "quarantined",
                "no readable log4j time '[yyyy-MM-dd HH:mm:ss,SSS]' (or ',SSSSSS') at the start of the line",
            ),
            ("server_log", 8, "quarantined", "'ISR updated to' line in no known format (cut short?)"),
            ("server_log", 9, "unused", "other message"),
            ("server_log", 10, "unused", no_prefix),
            ("server_log", 11, "quarantined", "invalid UTF-8 at byte 40"),
            ("server_log", 12, "unused", no_prefix),
            ("server_log", 13, "quarantined", "file unreadable after line 13: EOF"),
            ("server_log", 14, "quarantined", "'ISR updated to' line in no known format (cut short?)"),
            ("state_change_log", 1, "parsed", "leader_start"),
            ("state_change_log", 2, "parsed", "leader_skip"),
            ("state_change_log", 3, "parsed", "follower_start"),
            ("state_change_log", 4, "unused", "become-leader skipped without a state change"),
            ("state_change_log", 5, "quarantined", "'Skipped the become-leader' line in no known format (cut short?)"),
            (
                "state_change_log",
                6,
                "quarantined",
                "'Leader ... starts at leader epoch' line in no known format (cut short?)",
            ),
            ("state_change_log", 7, "unused", "other message"),
            ("state_change_log", 8, "parsed", "leader_start"),
            ("state_change_log", 9, "parsed", "metadata_delta"),
        ],
        "stage string, line_number bigint, status string, detail string",
    )
    assert_df_equality(actual, expected, ignore_nullable=True)  # nullability follows the expressions


# The same commits whichever form the "Skipped the become-leader" lines take (3.6-4.1 or 4.2+).
@pytest.mark.parametrize("state_change_log", [STATE_391, STATE_43], ids=["3.9", "4.2+"])
def test_isr_changes_combine_both_logs_and_keep_each_commit_once(spark, state_change_log):
    df = log_frame(spark, SERVER_391, "server_log").unionByName(log_frame(spark, state_change_log, "state_change_log"))
    actual = build_isr_changes(classify(df, zones={"c1": "UTC"})).select(*ISR_COLUMNS)
    oos = [(2, 1030, 1795315387189)]
    expected = spark.createDataFrame(
        [
            (
                5,
                1,
                0,
                0,
                [1, 3, 2],
                3,
                False,
                None,
                "leader_start",
                None,
                None,
                None,
                "state_change_log",
                ts("2026-11-22 02:42:34.948"),
                1,
            ),
            # The commit is in both logs (server.log 5 ms earlier); the leader epoch comes from state-change.log.
            (
                5,
                1,
                0,
                1,
                [1, 3],
                2,
                False,
                [1, 3, 2],
                "shrink",
                ts("2026-11-22 02:43:10.658"),
                oos,
                1030,
                "server_log",
                ts("2026-11-22 02:43:10.804"),
                2,
            ),
            (
                5,
                1,
                0,
                2,
                [1, 3, 2],
                3,
                False,
                [1, 3],
                "expand",
                None,
                None,
                None,
                "server_log",
                ts("2026-11-22 02:43:13.740"),
                3,
            ),
            # Controlled shutdown of broker 2: the controller removed it; only state-change.log shows it.
            (
                5,
                1,
                0,
                3,
                [1, 3],
                2,
                None,
                [1, 3, 2],
                "shrink",
                None,
                None,
                None,
                "state_change_log",
                ts("2026-11-22 02:43:48.279"),
                4,
            ),
            (
                5,
                1,
                0,
                4,
                [1, 3, 2],
                3,
                False,
                [1, 3],
                "expand",
                None,
                None,
                None,
                "server_log",
                ts("2026-11-22 02:44:11.035"),
                4,
            ),
            (
                4,
                1,
                1,
                3,
                [3, 1],
                2,
                False,
                None,
                "leader_start",
                None,
                None,
                None,
                "state_change_log",
                ts("2026-11-22 02:43:48.356"),
                5,
            ),
        ],
        ISR_DDL,
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_eligible_leader_replicas_come_from_the_4_2_registration_lines(spark):
    """KIP-966: a 4.2+ registration prints `elr=[...]` (as on minisr3-4.4.0, min ISR 3: the ISR fell to [1, 3]
    and broker 2 became eligible). The commit keeps it although server.log states the same commit earlier;
    3.6-4.1 lines and server.log-only commits print none (null), an empty list is an empty array."""
    state = [
        STATE_391[0],
        _skip_registration("2026-11-22 02:43:10,809", 1, "ackreplay-lab-5", ID_391, "1, 3", 1, 0, 1047, "1,3", elr="2"),
        _skip_registration("2026-11-22 02:43:13,751", 1, "ackreplay-lab-5", ID_391, "1, 3, 2", 2, 0, 1293, "1,3,2"),
    ]
    df = log_frame(spark, SERVER_391, "server_log").unionByName(log_frame(spark, state, "state_change_log"))
    actual = build_isr_changes(classify(df, zones={"c1": "UTC"})).select("partition_epoch", "isr", "elr", "source")
    expected = spark.createDataFrame(
        [(0, [1, 3, 2], None, "state_change_log"), (1, [1, 3], [2], "server_log"), (2, [1, 3, 2], [], "server_log"),
         (4, [1, 3, 2], None, "server_log")],
        "partition_epoch int, isr array<int>, elr array<int>, source string",
    )  # fmt: skip
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_shrink_committed_through_the_metadata_log_keeps_its_proposal(spark):
    df = log_frame(spark, SERVER_411, "server_log", broker_id=2).unionByName(
        log_frame(spark, STATE_411, "state_change_log", broker_id=2)
    )
    rows = build_isr_changes(classify(df, zones={"c1": "Europe/Berlin"}))
    actual = rows.select(*ISR_COLUMNS, "event_date", "source_file")
    sc, srv = "c1/broker-2/state-change.log", "c1/broker-2/server.log"
    day = date(2026, 11, 22)
    expected = spark.createDataFrame(
        [
            (
                4,
                2,
                0,
                0,
                [2, 1, 3],
                3,
                False,
                None,
                "leader_start",
                None,
                None,
                None,
                "state_change_log",
                ts("2026-11-22 02:57:55.171"),
                1,
                day,
                sc,
            ),
            # Berlin 03:58:30,401 is 02:58:30.401 UTC; lastCaughtUpTimeMs 1795316307136 is 02:58:27.136 UTC.
            (
                4,
                2,
                0,
                1,
                [2, 3],
                2,
                None,
                [2, 1, 3],
                "shrink",
                ts("2026-11-22 02:58:30.401"),
                [(1, 1446, 1795316307136)],
                1446,
                "state_change_log",
                ts("2026-11-22 02:58:30.515"),
                2,
                day,
                sc,
            ),
            (
                4,
                2,
                0,
                2,
                [2, 3, 1],
                3,
                False,
                [2, 3],
                "expand",
                None,
                None,
                None,
                "server_log",
                ts("2026-11-22 02:58:33.970"),
                2,
                day,
                srv,
            ),
            (
                4,
                2,
                0,
                3,
                [2, 3],
                2,
                None,
                [2, 3, 1],
                "shrink",
                None,
                None,
                None,
                "state_change_log",
                ts("2026-11-22 02:59:11.051"),
                4,
                day,
                sc,
            ),
        ],
        ISR_DDL + ", event_date date, source_file string",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_microsecond_stamps_give_the_same_rows_with_their_microseconds(spark):
    # The 4.1.1 lines above as a Kafka 4.x broker writes them under log4j2's %d{DEFAULT_MICROS}.
    server = [micros(SERVER_411[0], "417"), micros(SERVER_411[1], "052")]
    state = [
        micros(STATE_411[0], "900"),
        micros(STATE_411[1], "001"),
        micros(STATE_411[2], "123"),
        micros(STATE_411[3], "999"),
    ]

    def frame(server_lines, state_lines):
        return log_frame(spark, server_lines, "server_log", broker_id=2).unionByName(
            log_frame(spark, state_lines, "state_change_log", broker_id=2)
        )

    us, ms = frame(server, state), frame(SERVER_411, STATE_411)
    zones = {"c1": "Europe/Berlin"}
    classified = [
        "stage",
        "line_number",
        "status",
        "detail",
        "log_level",
        "logger",
        "message",
        "line_kind",
        "event_date",
    ]
    assert_df_equality(
        classify(us, zones).select(*classified), classify(ms, zones).select(*classified), ignore_row_order=True
    )
    assert sorted(r["t_log"] for r in classify(us, zones).select("t_log").collect()) == [
        ts("2026-11-22 02:57:55.171900"),
        ts("2026-11-22 02:58:30.401417"),
        ts("2026-11-22 02:58:30.515001"),
        ts("2026-11-22 02:58:33.970052"),
        ts("2026-11-22 02:58:33.983123"),
        ts("2026-11-22 02:59:11.051999"),
    ]
    actual = build_isr_changes(classify(us, zones)).select(*ISR_COLUMNS)
    expected = spark.createDataFrame(
        [
            (
                4,
                2,
                0,
                0,
                [2, 1, 3],
                3,
                False,
                None,
                "leader_start",
                None,
                None,
                None,
                "state_change_log",
                ts("2026-11-22 02:57:55.171900"),
                1,
            ),
            (
                4,
                2,
                0,
                1,
                [2, 3],
                2,
                None,
                [2, 1, 3],
                "shrink",
                ts("2026-11-22 02:58:30.401417"),
                [(1, 1446, 1795316307136)],
                1446,
                "state_change_log",
                ts("2026-11-22 02:58:30.515001"),
                2,
            ),
            (
                4,
                2,
                0,
                2,
                [2, 3, 1],
                3,
                False,
                [2, 3],
                "expand",
                None,
                None,
                None,
                "server_log",
                ts("2026-11-22 02:58:33.970052"),
                2,
            ),
            (
                4,
                2,
                0,
                3,
                [2, 3],
                2,
                None,
                [2, 3, 1],
                "shrink",
                None,
                None,
                None,
                "state_change_log",
                ts("2026-11-22 02:59:11.051999"),
                4,
            ),
        ],
        ISR_DDL,
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    epochs = build_leader_epochs(classify(us, zones)).select("partition", "leader_epoch", "epoch_start_offset", "t_log")
    assert [tuple(r) for r in epochs.collect()] == [(4, 0, 0, ts("2026-11-22 02:57:55.171900"))]


def test_older_line_shapes_and_change_kinds(spark):
    def line(t: str, tp: str, message: str) -> str:
        return f"[2026-11-20 10:00:{t}] INFO [Partition {tp} broker=1] {message} {PARTITION}"

    tp = "my-topic-2024-7"  # topic names may contain dashes and digits
    server = [
        # 2.4-3.5: no lastCaughtUpTimeMs; an unknown replica state prints "unknown"
        line(
            "00,000",
            tp,
            "Shrinking ISR from 1,2,3 to 1. Leader: (highWatermark: 100, endOffset: 120). Out of sync "
            "replicas: (brokerId: 2, endOffset: 100) (brokerId: 3, endOffset: unknown).",
        ),
        line("00,050", tp, "ISR updated to 1 (under-min-isr) and version updated to 8"),  # 3.5+, under min ISR
        line("05,000", tp, "ISR updated to 1,2 and version updated to [9]"),  # 2.8-3.0
        line("06,000", tp, "ISR updated to 1,2,3 and version updated to 10"),  # 3.1-3.4
        line("07,000", tp, "ISR updated to 1,2,3  and version updated to 11"),  # 3.5+: same members
        line("08,000", tp, "Shrinking ISR from 1,2,3 to 1,3"),  # 2.0 shape; this proposal is never committed
        line("09,000", tp, "ISR updated to 1,3,2  and version updated to 12"),  # not the proposed ISR
        line("10,000", "other-0", "ISR updated to 1,2  and version updated to 3"),  # no earlier state of this leader
    ]
    state = [
        "[2026-11-20 09:59:00,000] INFO [Broker id=1] Leader my-topic-2024-8 with topic id None starts at leader epoch 4 "
        "from offset 50 with partition epoch 6, high watermark 49, ISR [1], adding replicas [] and removing replicas [] "
        "(under-min-isr). Previous leader Some(3) and previous leader epoch was 3. " + STATE,
        "[2021-06-01 10:00:00,000] INFO [Broker id=1] Leader orders-0 starts at leader epoch 3 from offset 1200 with "
        "high watermark 1190 ISR [1,2] addingReplicas [] removingReplicas []. Previous leader epoch was 2. " + STATE,
    ]
    df = log_frame(spark, server, "server_log").unionByName(log_frame(spark, state, "state_change_log"))
    actual = build_isr_changes(classify(df)).select("topic", *ISR_COLUMNS)
    t = lambda s: ts(f"2026-11-20 10:00:{s}")  # noqa: E731
    srv, sc = "server_log", "state_change_log"
    expected = spark.createDataFrame(
        [
            (
                "my-topic-2024",
                7,
                1,
                None,
                8,
                [1],
                1,
                True,
                None,
                "shrink",
                t("00"),
                [(2, 100, None), (3, None, None)],
                100,
                srv,
                t("00.05"),
                2,
            ),
            ("my-topic-2024", 7, 1, None, 9, [1, 2], 2, None, [1], "expand", None, None, None, srv, t("05"), 3),
            ("my-topic-2024", 7, 1, None, 10, [1, 2, 3], 3, None, [1, 2], "expand", None, None, None, srv, t("06"), 4),
            (
                "my-topic-2024",
                7,
                1,
                None,
                11,
                [1, 2, 3],
                3,
                False,
                [1, 2, 3],
                "unchanged",
                None,
                None,
                None,
                srv,
                t("07"),
                5,
            ),
            (
                "my-topic-2024",
                7,
                1,
                None,
                12,
                [1, 3, 2],
                3,
                False,
                [1, 2, 3],
                "unchanged",
                None,
                None,
                None,
                srv,
                t("09"),
                7,
            ),
            ("other", 0, 1, None, 3, [1, 2], 2, False, None, None, None, None, None, srv, t("10"), 8),
            (
                "my-topic-2024",
                8,
                1,
                4,
                6,
                [1],
                1,
                True,
                None,
                "leader_start",
                None,
                None,
                None,
                sc,
                ts("2026-11-20 09:59:00"),
                1,
            ),
            (
                "orders",
                0,
                1,
                3,
                None,
                [1, 2],
                2,
                None,
                None,
                "leader_start",
                None,
                None,
                None,
                sc,
                ts("2021-06-01 10:00:00"),
                2,
            ),
        ],
        "topic string, " + ISR_DDL,
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_leader_epochs_have_one_row_per_leadership_start(spark):
    state = [
        STATE_391[0],
        STATE_391[4],
        STATE_391[5],  # follower: no row
        STATE_391[1],  # skipped become-leader: no row
        "[2021-06-01 10:00:00,000] INFO [Broker id=1] Leader orders-0 starts at leader epoch 3 from offset 1200 with "
        "high watermark 1190 ISR [1,2] addingReplicas [] removingReplicas []. Previous leader epoch was 2. " + STATE,
    ]
    rows = build_leader_epochs(classify(log_frame(spark, state, "state_change_log")))
    actual = rows.drop("cluster", "source_file", "ingest_run_id")
    expected = spark.createDataFrame(
        [
            (
                "ackreplay-lab",
                ID_391,
                5,
                1,
                0,
                0,
                0,
                0,
                [1, 3, 2],
                None,
                -1,
                ts("2026-11-22 02:42:34.948"),
                1,
                date(2026, 11, 22),
            ),
            (
                "ackreplay-lab",
                ID_391,
                4,
                1,
                1,
                3457,
                3,
                3454,
                [3, 1],
                2,
                0,
                ts("2026-11-22 02:43:48.356"),
                2,
                date(2026, 11, 22),
            ),
            (
                "orders",
                None,
                0,
                1,
                3,
                1200,
                None,
                1190,
                [1, 2],
                None,
                2,
                ts("2021-06-01 10:00:00"),
                5,
                date(2021, 6, 1),
            ),
        ],
        "topic string, topic_id string, partition int, broker_id int, leader_epoch int, epoch_start_offset bigint, "
        "partition_epoch int, high_watermark bigint, isr array<int>, previous_leader int, previous_leader_epoch int, "
        "t_log timestamp, line_number bigint, event_date date",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_follower_starts_say_when_a_broker_stopped_leading_and_how_far_its_log_reached(spark):
    """Partition.makeFollower's line: the 4.0.2 lab trace's controlled shutdown of broker 2 (its log reached
    14457, the new leader's epoch started at 14453), the 3.9.1 sample's line, a line without a leader (-1,
    the lab's final shutdown), the pre-3.0 shape; a line cut short is quarantined, not guessed."""
    state = [
        "[2026-11-26 03:51:08,614516] INFO [Broker id=2] Follower ackreplay-lab-0 starts at leader epoch 1 from offset "
        "14457 with partition epoch 1 and high watermark 14452. Current leader is 3. Previous leader Some(3) and "
        "previous leader epoch was 1. " + STATE,
        STATE_391[5],
        "[2026-11-26 03:52:20,576288] INFO [Broker id=2] Follower ackreplay-lab-0 starts at leader epoch 4 from offset "
        "18941 with partition epoch 7 and high watermark 18941. Current leader is -1. Previous leader Some(-1) and "
        "previous leader epoch was 4. " + STATE,
        "[2021-06-01 10:00:00,000] INFO [Broker id=1] Follower orders-0 starts at leader epoch 3 from offset 1200 with "
        "high watermark 1190. Previous leader epoch was 2. " + STATE,
        "[2026-11-26 03:51:08,614516] INFO [Broker id=2] Follower ackreplay-lab-0 starts at leader epoch 1 from offset 144",
    ]
    classified = classify(log_frame(spark, state, "state_change_log"))
    statuses = [(r["line_number"], r["status"], r["detail"]) for r in classified.orderBy("line_number").collect()]
    assert statuses[-1] == (
        5,
        "quarantined",
        "'Follower ... starts at leader epoch' line in no known format (cut short?)",
    )
    actual = build_follower_starts(classified).drop("cluster", "source_file", "ingest_run_id", "event_date")
    expected = spark.createDataFrame(
        [
            ("ackreplay-lab", 0, 1, 1, 14457, 1, 14452, 3, ts("2026-11-26 03:51:08.614516"), 1),
            ("ackreplay-lab", 0, 1, 1, 3162, 3, 3160, 3, ts("2026-11-22 02:43:48.495"), 2),
            ("ackreplay-lab", 0, 1, 4, 18941, 7, 18941, None, ts("2026-11-26 03:52:20.576288"), 3),
            ("orders", 0, 1, 3, 1200, None, 1190, None, ts("2021-06-01 10:00:00"), 4),
        ],
        "topic string, partition int, broker_id int, leader_epoch int, log_end_offset bigint, partition_epoch int, "
        "high_watermark bigint, leader int, t_log timestamp, line_number bigint",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_recorded_replica_lines_say_when_the_leader_learned_a_followers_leo(spark):
    """Partition.updateFollowerFetchState's DEBUG line (kafka.cluster.Partition at DEBUG): real lines of a 4.4.0 lab
    trace recorded with `--leo-lines` (µs stamps), the same text with a 3.x millisecond stamp, and a line cut short,
    which is quarantined, not guessed. The broker is the file's (the leader); the logger's other DEBUG lines are
    unused."""
    server = [
        "[2026-12-07 00:52:11,350469] DEBUG [Partition ackreplay-lab-1 broker=2] Recorded replica 1 log end offset "
        "(LEO) position 3008 and log start offset 0. " + PARTITION,
        "[2026-12-07 00:53:57,887686] DEBUG [Partition ackreplay-lab-0 broker=2] Recorded replica 3 log end offset "
        "(LEO) position 7585 and log start offset 0. " + PARTITION,
        "[2026-12-07 00:50:26,339161] DEBUG [Partition ackreplay-lab-3 broker=2] High watermark updated from "
        "(offset=0, segment=[0:0]) to (offset=17, segment=[0:9403]) " + PARTITION,
        "[2025-03-01 10:00:00,125] DEBUG [Partition orders-12 broker=2] Recorded replica 104 log end offset (LEO) "
        "position 123456789012 and log start offset 1000. " + PARTITION,
        "[2026-12-07 00:54:26,648659] DEBUG [Partition ackreplay-lab-5 broker=2] Recorded replica 3 log end offset (LEO) po",
    ]
    classified = classify(log_frame(spark, server, "server_log", broker_id=2))
    statuses = [(r["line_number"], r["status"], r["detail"]) for r in classified.orderBy("line_number").collect()]
    assert statuses == [
        (1, "parsed", "leo_record"),
        (2, "parsed", "leo_record"),
        (3, "unused", "other message"),
        (4, "parsed", "leo_record"),
        (5, "quarantined", "'Recorded replica ... log end offset (LEO)' line in no known format (cut short?)"),
    ]
    actual = build_follower_leo_records(classified).drop("cluster", "source_file", "ingest_run_id", "event_date")
    expected = spark.createDataFrame(
        [
            ("ackreplay-lab", 1, 2, 1, 3008, 0, ts("2026-12-07 00:52:11.350469"), 1),
            ("ackreplay-lab", 0, 2, 3, 7585, 0, ts("2026-12-07 00:53:57.887686"), 2),
            ("orders", 12, 2, 104, 123456789012, 1000, ts("2025-03-01 10:00:00.125"), 4),
        ],
        "topic string, partition int, broker_id int, follower_id int, log_end_offset bigint, log_start_offset bigint, "
        "t_log timestamp, line_number bigint",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_the_4_2_become_leader_line_with_a_partition_registration_is_classified(spark):
    skip = STATE_43[1]
    state = [
        skip,  # 1 a commit
        skip.split(" since it is")[0] + " since the leader is already at a newer partition epoch 4. " + STATE,  # 2
        skip[:260],  # 3 cut inside the registration
        skip.replace(" and isNew=false", ""),  # 4 neither 4.1's shape nor 4.2's
        "[2026-11-22 02:43:10,812] INFO [Broker id=1] Skipped the become-leader state change for ackreplay-lab-5 with "
        f"topic id {ID_391} due to a storage error Error while creating log " + STATE,  # 5 ReplicaManager
        "[2026-11-22 02:43:48,495] INFO [Broker id=1] Skipped the become-follower state change for ackreplay-lab-0 with "
        f"topic id Some({ID_391}), partition registration PartitionRegistration(replicas=[3, 1, 2], directories=["
        f"{DIRS[3]}, {DIRS[1]}, {DIRS[2]}], isr=[3, 1], removingReplicas=[], addingReplicas=[], elr=[], "
        "lastKnownElr=[], leader=3, leaderRecoveryState=RECOVERED, leaderEpoch=1, partitionEpoch=4) and isNew=false "
        "since it is already a follower with leader epoch 1. " + STATE,  # 6
    ]
    actual = classify(log_frame(spark, state, "state_change_log")).select("line_number", "status", "detail")
    expected = spark.createDataFrame(
        [
            (1, "parsed", "leader_skip"),
            (2, "unused", "become-leader skipped without a state change"),
            (3, "quarantined", "'Skipped the become-leader' line in no known format (cut short?)"),
            (4, "quarantined", "'Skipped the become-leader' line in no known format (cut short?)"),
            (5, "unused", "become-leader skipped without a state change"),
            (6, "unused", "other message"),
        ],
        "line_number bigint, status string, detail string",
    )
    assert_df_equality(actual, expected, ignore_nullable=True)


def test_4_2_lines_of_a_leader_after_a_controlled_shutdown(spark):
    """Broker 3 leads partition 2 of a 4-replica topic (min ISR 3) from leader epoch 7; the controller removes
    broker 2 (controlled shutdown: state-change.log only), then broker 3's own shrink of broker 4 commits
    through both logs, server.log listing the members in its Set's order, not the controller's."""
    tp = "orders-v2-2"
    server = [
        "[2026-11-24 09:15:02,117] INFO [Partition orders-v2-2 broker=3] Shrinking ISR from 1,3,4 to 1,3. Leader: "
        "(highWatermark: 88120, endOffset: 88213). Out of sync replicas: (brokerId: 4, endOffset: 88120, "
        "lastCaughtUpTimeMs: 1795511697093). " + PARTITION,
        "[2026-11-24 09:15:02,131] INFO [Partition orders-v2-2 broker=3] ISR updated to 1,3 (under-min-isr) and "
        "version updated to 13 " + PARTITION,
    ]
    state = [
        "[2026-11-24 09:14:10,004] INFO [Broker id=3] Leader orders-v2-2 with topic id Some(q1Jb0XhGSp2mW7cT4yRz8A) "
        "starts at leader epoch 7 from offset 80006 with partition epoch 11, high watermark 80001, ISR [3,1,4,2], "
        "adding replicas [] and removing replicas [] . Previous leader Some(2) and previous leader epoch was 6. "
        + STATE,
        _skip_registration(
            "2026-11-24 09:14:55,610",
            3,
            tp,
            "q1Jb0XhGSp2mW7cT4yRz8A",
            "3, 1, 4",
            12,
            7,
            87410,
            "3,1,4",
            replicas="3, 1, 4, 2",
        ),
        _skip_registration(
            "2026-11-24 09:15:02,135",
            3,
            tp,
            "q1Jb0XhGSp2mW7cT4yRz8A",
            "3, 1",
            13,
            7,
            88124,
            "3,1",
            replicas="3, 1, 4, 2",
        ),
    ]
    df = log_frame(spark, server, "server_log", broker_id=3).unionByName(
        log_frame(spark, state, "state_change_log", broker_id=3)
    )
    actual = build_isr_changes(classify(df, zones={"c1": "UTC"})).select("topic", *ISR_COLUMNS)
    sc, srv = "state_change_log", "server_log"
    expected = spark.createDataFrame(
        [
            (
                "orders-v2",
                2,
                3,
                7,
                11,
                [3, 1, 4, 2],
                4,
                False,
                None,
                "leader_start",
                None,
                None,
                None,
                sc,
                ts("2026-11-24 09:14:10.004"),
                1,
            ),
            (
                "orders-v2",
                2,
                3,
                7,
                12,
                [3, 1, 4],
                3,
                None,
                [3, 1, 4, 2],
                "shrink",
                None,
                None,
                None,
                sc,
                ts("2026-11-24 09:14:55.610"),
                2,
            ),
            (
                "orders-v2",
                2,
                3,
                7,
                13,
                [1, 3],
                2,
                True,
                [3, 1, 4],
                "shrink",
                ts("2026-11-24 09:15:02.117"),
                [(4, 88120, 1795511697093)],
                88120,
                srv,
                ts("2026-11-24 09:15:02.131"),
                2,
            ),
        ],
        "topic string, " + ISR_DDL,
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_the_console_breaks_each_logs_parsed_lines_down_by_kind_to_their_total():
    """The 4.0.2 lab trace's state-change.log counts: the follower lines are parsed lines like the others."""
    from ackreplay.ingest.broker_logs import BrokerLogReport, LineCounts

    report = BrokerLogReport(
        "r",
        state_change_log_files=3,
        state_change_log=LineCounts(parsed=266 + 121 + 434, unused=100),
        parsed_detail={"leader_start": 266, "leader_skip": 121, "follower_start": 434},
    )
    lines = report.summary_lines()
    state = lines.index("  state-change.log lines: 921 = parsed 821 + unused 100 + quarantined 0")
    assert lines[state + 1 : state + 4] == [
        "    parsed          266  leader_start",
        "    parsed          121  leader_skip",
        "    parsed          434  follower_start",
    ]


def test_broker_settings_come_from_the_config_dump_of_each_start(spark):
    """KafkaConfig's dump (AbstractConfig.logAll) as the 4.4.0 lab trace's broker 1 printed it: a "KafkaConfig
    values:" line, then a "\t<name> = <value>" line per setting without a prefix; the two settings the replay
    uses are kept with the dump's time, every other setting line is a continuation line. A second start with
    another value; a setting line before any dump in the file (a rotation cut it) is not kept; a kept setting
    whose value is not a number is quarantined, not guessed; "ProducerConfig values:" is another dump."""
    server = [
        "\treplica.lag.time.max.ms = 7000",  # 1 its dump is in the previous file
        "[2026-11-25 22:32:01,138] INFO KafkaConfig values: ",  # 2
        "\tadd.partitions.to.txn.retry.backoff.max.ms = 100",  # 3
        "\treplica.fetch.wait.max.ms = 500",  # 4
        "\treplica.lag.time.max.ms = 5000",  # 5
        "\tzookeeper.ssl.truststore.type = null (kafka.server.KafkaConfig)",  # 6
        "[2026-11-25 22:32:01,148] WARN num.partitions is defined in broker. (kafka.server.KafkaConfig)",  # 7
        "[2026-11-25 22:36:12,188] INFO KafkaConfig values: ",  # 8
        "\treplica.lag.time.max.ms = 30000",  # 9
        "\treplica.fetch.wait.max.ms = soon",  # 10
        "[2026-11-25 22:36:13,000] INFO ProducerConfig values: ",  # 11
        "\tacks = -1",  # 12
    ]
    classified = classify(log_frame(spark, server, "server_log"))
    statuses = [(r["line_number"], r["status"], r["detail"]) for r in classified.orderBy("line_number").collect()]
    continuation = "no log4j prefix (continuation line: stack trace, config dump)"
    assert statuses == [
        (1, "parsed", "broker_setting"),
        (2, "parsed", "config_dump"),
        (3, "unused", continuation),
        (4, "parsed", "broker_setting"),
        (5, "parsed", "broker_setting"),
        (6, "unused", continuation),
        (7, "unused", "other message"),
        (8, "parsed", "config_dump"),
        (9, "parsed", "broker_setting"),
        (10, "quarantined", "'KafkaConfig setting' line in no known format (cut short?)"),
        (11, "unused", "other message"),
        (12, "unused", continuation),
    ]
    kept = classified.withColumn("ingest_run_id", F.lit("r1")).withColumn("cluster", F.lit("c1"))
    actual = build_broker_configs(kept).select("broker_id", "setting", "value", "t_log", "line_number", "event_date")
    expected = spark.createDataFrame(
        [
            (1, "replica.fetch.wait.max.ms", 500, ts("2026-11-25 22:32:01.138"), 4, date(2026, 11, 25)),
            (1, "replica.lag.time.max.ms", 5000, ts("2026-11-25 22:32:01.138"), 5, date(2026, 11, 25)),
            (1, "replica.lag.time.max.ms", 30000, ts("2026-11-25 22:36:12.188"), 9, date(2026, 11, 25)),
        ],
        "broker_id int, setting string, value bigint, t_log timestamp, line_number bigint, event_date date",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    assert broker_setting_rows(kept).filter(F.col("t_log").isNull()).select("line_number").collect() == [(1,)]


def test_the_release_and_start_time_come_from_app_info_parser_lines(spark):
    """AppInfoParser's lines at a broker start, as the 3.6.2 corpus trace's broker 1 printed them (its JVM in
    Asia/Kolkata), then a start of a Confluent Platform build (7.7.1-ccs is Apache Kafka 3.7), one cut short
    and one of a build that does not know its version: the release as (major, minor) and the start's epoch
    time, at each line's own time."""
    server = [
        "[2026-11-29 17:40:37,932] INFO Kafka version: 3.6.2 (org.apache.kafka.common.utils.AppInfoParser)",  # 1
        "[2026-11-29 17:40:37,932] INFO Kafka commitId: c4deed513057c94e (org.apache.kafka.common.utils.AppInfoParser)",
        "[2026-11-29 17:40:37,932] INFO Kafka startTimeMs: 1795954237932 (org.apache.kafka.common.utils.AppInfoParser)",
        "[2026-11-29 18:00:00,000] INFO Kafka version: 7.7.1-ccs (org.apache.kafka.common.utils.AppInfoParser)",  # 4
        "[2026-11-29 18:00:00,001] INFO Kafka startTimeMs: 17959 (org.apache.kafka.commo",  # 5 cut short
        "[2026-11-29 18:10:00,000] INFO Kafka version: unknown (org.apache.kafka.common.utils.AppInfoParser)",  # 6
    ]
    classified = classify(log_frame(spark, server, "server_log"), {"c1": "Asia/Kolkata"})
    statuses = [(r["line_number"], r["status"], r["detail"]) for r in classified.orderBy("line_number").collect()]
    assert statuses == [
        (1, "parsed", "app_version"),
        (2, "unused", "other message"),
        (3, "parsed", "app_start_time"),
        (4, "parsed", "app_version"),
        (5, "quarantined", "'Kafka startTimeMs:' line in no known format (cut short?)"),
        (6, "unused", "other message"),  # a build without a version resource: nothing to read
    ]
    kept = classified.withColumn("ingest_run_id", F.lit("r1")).withColumn("cluster", F.lit("c1"))
    actual = build_broker_configs(kept).select("broker_id", "setting", "value", "t_log", "line_number")
    expected = spark.createDataFrame(
        [
            (1, "kafka.version.major", 3, ts("2026-11-29 12:10:37.932"), 1),
            (1, "kafka.version.minor", 6, ts("2026-11-29 12:10:37.932"), 1),
            (1, "kafka.start_time_ms", 1795954237932, ts("2026-11-29 12:10:37.932"), 3),
            (1, "kafka.version.major", 3, ts("2026-11-29 12:30:00.000"), 4),
            (1, "kafka.version.minor", 7, ts("2026-11-29 12:30:00.000"), 4),
        ],
        "broker_id int, setting string, value bigint, t_log timestamp, line_number bigint",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


CONTROLLER = "(org.apache.kafka.controller.ClusterControlManager)"
# Real controller.log lines: the 4.1.1 sample (controller 100, Europe/Berlin; endpoints shortened) and the 3.6.2
# corpus trace's registration, which prints features and the fenced state; the Fence/Unfence/Unregister lines follow
# ClusterControlManager.replay's format strings (3.3-4.4) with those records' toString.
CONTROLLER_LINES = [
    "[2026-11-23 21:09:57,834] INFO [QuorumController id=100] Replayed initial RegisterBrokerRecord for broker 3: "
    "RegisterBrokerRecord(brokerId=3, isMigratingZkBroker=false, incarnationId=dkH04imASOSscWfd8KZWog, brokerEpoch=24, "
    "endPoints=[BrokerEndpoint(name='REPLICATION', host='127.0.0.1', port=39108, securityProtocol=0)], "
    "features=[BrokerFeature(name='metadata.version', minSupportedVersion=7, maxSupportedVersion=27)], rack=null, "
    f"fenced=true, inControlledShutdown=false, logDirs=[Bnz2EbWKhwGqCfgSI40gxg]) {CONTROLLER}",
    "[2026-11-23 21:09:58,832] INFO [QuorumController id=100] Replayed BrokerRegistrationChangeRecord modifying the "
    "registration for broker 3: BrokerRegistrationChangeRecord(brokerId=3, brokerEpoch=24, fenced=-1, "
    f"inControlledShutdown=0, logDirs=[]) {CONTROLLER}",
    "[2026-11-23 21:13:48,493] INFO [QuorumController id=100] Replayed BrokerRegistrationChangeRecord modifying the "
    "registration for broker 2: BrokerRegistrationChangeRecord(brokerId=2, brokerEpoch=32, fenced=0, "
    f"inControlledShutdown=1, logDirs=[]) {CONTROLLER}",
    "[2026-11-23 21:13:50,750] INFO [QuorumController id=100] Replayed BrokerRegistrationChangeRecord modifying the "
    "registration for broker 2: BrokerRegistrationChangeRecord(brokerId=2, brokerEpoch=32, fenced=1, "
    f"inControlledShutdown=0, logDirs=[]) {CONTROLLER}",
    "[2026-11-23 21:14:07,652] INFO [QuorumController id=100] Replayed RegisterBrokerRecord establishing a new "
    "incarnation of broker 2: RegisterBrokerRecord(brokerId=2, isMigratingZkBroker=false, "
    "incarnationId=r7LRH4hlREqM9mojvtZntA, brokerEpoch=818, endPoints=[], features=[], rack=null, fenced=true, "
    f"inControlledShutdown=false) {CONTROLLER}",
    "[2026-11-23 21:14:08,000] INFO [QuorumController id=100] Replayed FenceBrokerRecord modifying the registration "
    f"for broker 1: FenceBrokerRecord(id=1, epoch=28) {CONTROLLER}",
    "[2026-11-23 21:14:09,000] INFO [QuorumController id=100] Replayed UnfenceBrokerRecord modifying the registration "
    f"for broker 1: UnfenceBrokerRecord(id=1, epoch=28) {CONTROLLER}",
    f"[2026-11-23 21:14:10,000] INFO [QuorumController id=100] Replayed UnregisterBrokerRecord(brokerId=4, brokerEpoch=7) {CONTROLLER}",
    "[2026-11-23 21:09:50,987] INFO [QuorumController id=100] Replayed RegisterControllerRecord containing "
    f"ControllerRegistration(id=100, incarnationId=FGW7ts6pRRC4495aSNxVdg, zkMigrationReady=false) {CONTROLLER}",
    "[2026-11-23 21:15:16,314] INFO [QuorumController id=100] Replayed BrokerRegistrationChangeRecord modifying the "
    "registration for broker 2: BrokerRegistrationChangeRecord(brokerId=2, brokerEp",
]


def test_the_controllers_registration_lines_say_when_a_broker_was_fenced_or_shutting_down(spark):
    """Every broker registration record a controller replayed is a row: its broker and epoch, and the fenced and
    controlled-shutdown states it sets (null: left as they were). Other records are unused; a line cut short is
    quarantined. The times are the controller's, in the cluster's zone."""
    classified = classify(log_frame(spark, CONTROLLER_LINES, "controller_log", broker_id=100), {"c1": "Europe/Berlin"})
    statuses = [(r["line_number"], r["status"]) for r in classified.orderBy("line_number").collect()]
    assert statuses == [*((n, "parsed") for n in range(1, 9)), (9, "unused"), (10, "quarantined")]
    actual = build_broker_registrations(classified).drop("cluster", "source_file", "ingest_run_id", "event_date")
    change, register = "BrokerRegistrationChangeRecord", "RegisterBrokerRecord"
    expected = spark.createDataFrame(
        [
            (3, 24, register, True, False, 100, ts("2026-11-23 20:09:57.834"), 1),
            (3, 24, change, False, None, 100, ts("2026-11-23 20:09:58.832"), 2),
            (2, 32, change, None, True, 100, ts("2026-11-23 20:13:48.493"), 3),
            (2, 32, change, True, None, 100, ts("2026-11-23 20:13:50.750"), 4),
            (2, 818, register, True, False, 100, ts("2026-11-23 20:14:07.652"), 5),
            (1, 28, "FenceBrokerRecord", True, None, 100, ts("2026-11-23 20:14:08"), 6),
            (1, 28, "UnfenceBrokerRecord", False, None, 100, ts("2026-11-23 20:14:09"), 7),
            (4, 7, "UnregisterBrokerRecord", None, None, 100, ts("2026-11-23 20:14:10"), 8),
        ],
        "broker_id int, broker_epoch bigint, record string, fenced boolean, in_controlled_shutdown boolean, "
        "controller_id int, t_log timestamp, line_number bigint",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_record_every_controller_logged_is_kept_once_at_the_earliest_line(spark):
    """Each controller of a quorum replays every record: the n-th line of one content on each controller is one
    record (a broker fenced twice in one epoch is two), kept at the earliest controller's time."""
    fence = CONTROLLER_LINES[5]
    fence_again = fence.replace("21:14:08,000", "21:14:20,000")
    on_101 = [
        fence.replace("21:14:08,000", "21:14:08,004").replace("id=100", "id=101"),
        fence_again.replace("id=100", "id=101").replace(",000]", ",001]"),
    ]
    lines = log_frame(spark, [fence, fence_again], "controller_log", broker_id=100).unionByName(
        log_frame(spark, on_101, "controller_log", broker_id=101)
    )
    actual = build_broker_registrations(classify(lines)).select("broker_id", "controller_id", "t_log")
    expected = spark.createDataFrame(
        [(1, 100, ts("2026-11-23 21:14:08")), (1, 100, ts("2026-11-23 21:14:20"))],
        "broker_id int, controller_id int, t_log timestamp",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


STATE_CHANGE = "(state.change.logger)"
# broker 1 of the 4.0.2 corpus trace (America/Sao_Paulo, log4j2 µs stamps) applying the controlled shutdown's batch
DELTA_LINES = [
    f"[2026-11-26 03:51:08,476369] INFO [Broker id=1] Transitioning 24 partition(s) to local leaders. {STATE_CHANGE}",
    f"[2026-11-26 03:51:08,575877] INFO [Broker id=1] Transitioning 29 partition(s) to local followers. {STATE_CHANGE}",
    "[2026-11-26 03:51:08,576001] INFO [Broker id=1] Transitioning 29 partit",
    f"[2026-11-26 03:51:08,581735] INFO [Broker id=1] Stopped fetchers as part of become-follower for 11 partitions "
    f"{STATE_CHANGE}",
]


def test_a_brokers_metadata_deltas_are_its_transitioning_lines(spark):
    """ReplicaManager.applyDelta's first lines ("Transitioning N partition(s) to local leaders|followers") mark when
    the broker's metadata cache took a delta: one row each, at the broker's time in UTC; a cut one is quarantined,
    other state-change messages unused."""
    lines = log_frame(spark, DELTA_LINES, "state_change_log", broker_id=1)
    classified = classify(lines, {"c1": "America/Sao_Paulo"})
    statuses = [(r["line_number"], r["status"]) for r in classified.orderBy("line_number").collect()]
    assert statuses == [(1, "parsed"), (2, "parsed"), (3, "quarantined"), (4, "unused")]
    actual = build_metadata_deltas(classified).select("broker_id", "role", "partitions", "t_log", "line_number")
    expected = spark.createDataFrame(
        [(1, "leaders", 24, ts("2026-11-26 06:51:08.476369"), 1), (1, "followers", 29, ts("2026-11-26 06:51:08.575877"), 2)],
        "broker_id int, role string, partitions int, t_log timestamp, line_number bigint",
    )  # fmt: skip
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
