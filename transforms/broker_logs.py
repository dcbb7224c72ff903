"""Broker `server.log` / `state-change.log` lines -> `isr_changes` and `leader_epochs` (silver).

Lines use the log4j layout `[%d] %p %m (%c)%n` (Kafka's default for both files; `%d` to the millisecond,
or to the microsecond from a Kafka 4.x broker set to log4j2's `%d{DEFAULT_MICROS}`). The lines used
(kafka-reference.md §3.3; `[Partition <topic>-<p> broker=<id>] ` and `[Broker id=<id>] ` prefixes):

server.log (logger kafka.cluster.Partition), on the partition's leader:

    Shrinking ISR from 1,3,2 to 1,3. Leader: (highWatermark: 1030, endOffset: 1046). Out of sync replicas:
        (brokerId: 2, endOffset: 1030, lastCaughtUpTimeMs: 1795315387189).      (3.6+; 2.4-3.5 without
        lastCaughtUpTimeMs; 2.0 only "Shrinking ISR from 1,2,3 to 1,2")
    ISR updated to 1,3  and version updated to 1            (3.5+; "(under-min-isr)" before "and" when under)
    ISR updated to 1,3 and version updated to 1             (3.1-3.4; 2.8-3.0: "version updated to [1]")

state-change.log (state.change.logger), from Partition.makeLeader:

    Leader <tp> with topic id Some(<id>) starts at leader epoch 1 from offset 3457 with partition epoch 3,
        high watermark 3454, ISR [3,1], adding replicas [] and removing replicas [] . Previous leader Some(2)
        and previous leader epoch was 0.
    Skipped the become-leader state change for <tp> with topic id Some(<id>) and partition state
        LeaderAndIsrPartitionState(..., partitionEpoch=1, ...) since it is already the leader with leader
        epoch 0. Current high watermark 1446, ISR [2,3], adding replicas [] and removing replicas [].
                                                                                        (3.6-4.1)
    Skipped the become-leader state change for <tp> with topic id Some(<id>), partition registration
        PartitionRegistration(replicas=[...], ..., leaderEpoch=0, partitionEpoch=1) and isNew=false since
        it is already the leader with leader epoch 0. Current high watermark 1446, ISR [2,3], adding
        replicas [] and removing replicas [].                                           (4.2+)

    Follower <tp> starts at leader epoch 1 from offset 14457 with partition epoch 1 and high watermark 14452.
        Current leader is 3. Previous leader Some(3) and previous leader epoch was 1.   (Partition.makeFollower)

The other four lines have the same text in 3.6 to 4.4; from 4.2 the server.log lines list the ISR in
an immutable java.util.Set's order, which changes from one broker start to the next. docs/kafka-versions.md
has each version's source.

Also in server.log (logger kafka.cluster.Partition at DEBUG, which brokers log at INFO unless told), on the
leader, for each partition each follower FETCH read (Partition.updateFollowerFetchState, the same text from 2.8
to 4.4), logged after the leader recorded the offset, moved the HW and completed the produces that waited for it:

    Recorded replica 2 log end offset (LEO) position 1046 and log start offset 0.

A committed ISR reaches the leader either through its own AlterPartition response ("ISR updated to",
server.log) or through the metadata log (a "Skipped the become-leader" line, state-change.log); often
both, in either order, and controller-driven changes (controlled shutdown, fencing) only the latter.
`isr_changes` keeps each commit once (the earliest line), whichever log it came from.

Every line gets a `status`: `parsed` (one of the lines above, parsed; `detail` names its kind),
`unused` (any other message; `detail` says which) or `quarantined` (a line that has the shape of one
of the lines above but cannot be parsed; `detail` says why).
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.schemas.broker_logs import (
    BROKER_CONFIGS,
    BROKER_REGISTRATIONS,
    FOLLOWER_LEO_RECORDS,
    FOLLOWER_STARTS,
    ISR_CHANGES,
    LEADER_EPOCHS,
    METADATA_DELTAS,
)
from ackreplay.transforms.common import conform

SERVER_LOG, STATE_CHANGE_LOG, CONTROLLER_LOG = "server_log", "state_change_log", "controller_log"

# Line kinds (the `detail` of a parsed line).
ISR_SHRINK, ISR_UPDATE, LEADER_START, LEADER_SKIP = "isr_shrink", "isr_update", "leader_start", "leader_skip"
FOLLOWER_START = "follower_start"
LEO_RECORD = "leo_record"
BROKER_REGISTRATION = "broker_registration"
METADATA_DELTA = "metadata_delta"
CONFIG_DUMP, BROKER_SETTING = "config_dump", "broker_setting"
APP_VERSION, APP_START_TIME = "app_version", "app_start_time"

# The broker settings the replay's rules rest on, from the dump KafkaConfig's constructor logs at every
# broker start (`AbstractConfig.logAll`): a "KafkaConfig values: " line, then one "\t<name> = <value>" line per
# setting, without a log4j prefix (the last one ends with the logger). Neither is a dynamic config
# (`DynamicBrokerConfig.AllDynamicConfigs`): a broker runs with the values of its last start.
# replica.lag.time.max.ms: the leader's ISR expiry (`Partition.getOutOfSyncReplicas`, `ReplicaManager`'s
# isr-expiration task every half of it); replica.fetch.wait.max.ms: how long a follower's FETCH may wait.
BROKER_SETTINGS = ("replica.lag.time.max.ms", "replica.fetch.wait.max.ms")
_SETTING_NAMES = "|".join(re.escape(name) for name in BROKER_SETTINGS)
_CONFIG_DUMP = r"^\[[^\]]*\] [A-Z]+ KafkaConfig values: ?$"

# AppInfoParser.AppInfo logs the release and the start's epoch time when the broker (and any client in its
# JVM) starts: "Kafka version: 3.6.2", "Kafka startTimeMs: 1795464599951". Kept in `broker_configs` as the
# settings below: the release decides rules that changed (Partition.maybeIncrementLeaderHW holds the HW
# below min ISR from 3.7), and the epoch time next to the line's local stamp shows the JVM's time zone.
KAFKA_VERSION_MAJOR, KAFKA_VERSION_MINOR = "kafka.version.major", "kafka.version.minor"
KAFKA_START_TIME_MS = "kafka.start_time_ms"
_APP_VERSION = r"^Kafka version: (\d{1,4})\.(\d{1,4})(?:\.\d{1,4})?(\S*)$"
_APP_START_TIME = r"^Kafka startTimeMs: (\d{1,18})$"

# The message between `[time] LEVEL ` and ` (logger)`; a line cut short has no logger suffix.
_MESSAGE = r"^\[[^\]]*\] [A-Z]+ (.*) \([\w.$]+\)$"

# Digit counts are bounded so that every number a pattern accepts fits its column (int / bigint):
# with ANSI mode a cast overflow would fail the job instead of the line.
_ID, _INT, _LONG = r"\d{1,9}", r"-?\d{1,9}", r"-?\d{1,18}"
_ISR = rf"({_ID}(?:,{_ID})*)"
_SETTING = rf"^\t({_SETTING_NAMES}) = ({_LONG})(?: \([\w.$]+\))?$"
_OUT_OF_SYNC = rf"\(brokerId: {_ID}, endOffset: (?:{_LONG}|unknown)(?:, lastCaughtUpTimeMs: (?:{_LONG}|unknown))?\)"
_SHRINK = (
    rf"^\[Partition (\S+)-({_ID}) broker=({_ID})\] Shrinking ISR from {_ISR} to {_ISR}"
    rf"(?:\. Leader: \(highWatermark: ({_LONG}), endOffset: ({_LONG})\)\. "
    rf"Out of sync replicas: ({_OUT_OF_SYNC}(?: {_OUT_OF_SYNC})*)\.)?$"
)
_SHRINK_GROUPS = (
    "topic",
    "partition",
    "line_broker",
    "from_isr",
    "to_isr",
    "high_watermark",
    "end_offset",
    "out_of_sync",
)
_UPDATE = (
    rf"^\[Partition (\S+)-({_ID}) broker=({_ID})\] ISR updated (?:from AlterIsr )?to \[?{_ISR}\]?"
    rf"( +\(under-min-isr\))?( +)and (?:zk)?[vV]ersion updated to \[?({_INT})\]?$"
)
_UPDATE_GROUPS = ("topic", "partition", "line_broker", "isr", "under_min", "gap", "partition_epoch")
# Also the pre-3.x shape: no topic id, no partition epoch, no previous leader, camelCase replica lists.
_LEADER = (
    rf"^\[Broker id=({_ID})\] Leader (\S+)-({_ID})(?: with topic id (\S+))? starts at leader epoch ({_INT}) "
    rf"from offset ({_LONG}) with (?:partition epoch ({_INT}), )?high watermark ({_LONG}),? "
    rf"ISR \[{_ISR}\],? (?:adding replicas|addingReplicas) \[[\d,]*\] (?:and )?"
    r"(?:removing replicas|removingReplicas) \[[\d,]*\]( ?)(\(under-min-isr\))?\. ?"
    rf"Previous leader (?:(None|Some\({_INT}\)) and previous leader )?epoch was ({_INT})\.$"
)
_LEADER_GROUPS = (
    "line_broker",
    "topic",
    "partition",
    "topic_id",
    "leader_epoch",
    "epoch_start_offset",
    "partition_epoch",
    "high_watermark",
    "isr",
    "gap",
    "under_min",
    "previous_leader",
    "previous_leader_epoch",
)
# kafka.cluster.Partition.makeLeader prints the new state's toString: 3.6-4.1 " and partition state
# LeaderAndIsrPartitionState(...)" (3.x LeaderAndIsrRequestData.LeaderAndIsrPartitionState, 4.0-4.1
# LeaderAndIsrRequest.PartitionState), 4.2+ ", partition registration PartitionRegistration(...) and isNew=false"
# (org.apache.kafka.metadata.PartitionRegistration.toString, partitionEpoch last). Both: the partition epoch
# from the state, the leader epoch and the ISR from the text after it, which reads the same in every version.
_SKIP = (
    rf"^\[Broker id=({_ID})\] Skipped the become-leader state change for (\S+)-({_ID}) with topic id (\S+?)"
    rf"(?: and partition state \S+\(.*\bpartitionEpoch=({_INT})\b.*\)"
    rf"|, partition registration PartitionRegistration\(.*\bpartitionEpoch=({_INT})\) and isNew=(?:true|false))"
    rf" since it is already the leader with leader epoch ({_INT})\. Current high watermark ({_LONG}), "
    rf"ISR \[{_ISR}\], adding replicas \[[\d,]*\] and removing replicas \[[\d,]*\]\.$"
)
_SKIP_GROUPS = (
    "line_broker",
    "topic",
    "partition",
    "topic_id",
    "state_partition_epoch",
    "registration_partition_epoch",
    "leader_epoch",
    "high_watermark",
    "isr",
)
# The 4.2+ registration also prints the eligible leader replicas (KIP-966, `PartitionRegistration.elr`):
# "elr=[2, 3]", "elr=[]"; the 3.6-4.1 partition state has none.
_REGISTRATION_ELR = r", partition registration PartitionRegistration\(.*?\belr=\[([\d, ]*)\]"

# Partition.makeFollower; "with partition epoch" and "Current leader is" since 2.8/3.0, optional here. Its
# "Previous leader ... epoch" print the values just set (the new leader and epoch): read, not kept.
_FOLLOWER = (
    rf"^\[Broker id=({_ID})\] Follower (\S+)-({_ID}) starts at leader epoch ({_INT}) from offset ({_LONG}) "
    rf"with (?:partition epoch ({_INT}) and )?high watermark ({_LONG})\.(?: Current leader is ({_INT})\.)? "
    rf"Previous leader (?:(?:None|Some\({_INT}\)) and previous leader )?epoch was {_INT}\.$"
)
_FOLLOWER_GROUPS = ("line_broker", "topic", "partition", "leader_epoch", "log_end_offset", "partition_epoch",
                    "high_watermark", "leader")  # fmt: skip

_LEO_RECORD = (
    rf"^\[Partition (\S+)-({_ID}) broker=({_ID})\] Recorded replica ({_ID}) log end offset \(LEO\) position "
    rf"({_LONG}) and log start offset ({_LONG})\.$"
)
_LEO_RECORD_GROUPS = ("topic", "partition", "line_broker", "follower_id", "log_end_offset", "log_start_offset")

# state-change.log, the first line a broker logs when it applies a metadata delta that changes partitions it holds
# (ReplicaManager.applyDelta: "Transitioning 24 partition(s) to local leaders." then, if any, "... to local
# followers."; the same text in 3.3 to 4.4). BrokerMetadataPublisher.publish sets the broker's metadata cache to the
# new image just before, so the line marks when the broker, as a leader, knew of the records in that delta (a
# follower's fencing or controlled shutdown among them: Partition.isReplicaIsrEligible reads that cache).
_METADATA_DELTA = rf"^\[Broker id=({_ID})\] Transitioning ({_ID}) partition\(s\) to local (leaders|followers)\.$"
_METADATA_DELTA_GROUPS = ("line_broker", "partitions", "role")

# controller.log (logger org.apache.kafka.controller.ClusterControlManager, INFO), on every KRaft controller as it
# replays a broker registration record (the active one when it writes the record, the others when they read it):
#
#   Replayed initial RegisterBrokerRecord for broker 3: RegisterBrokerRecord(brokerId=3, ..., brokerEpoch=24, ...,
#       fenced=true, inControlledShutdown=false, ...)                  (also "... establishing a new incarnation of
#       broker 2: ..." and "... modifying the registration for broker 2: ...")
#   Replayed BrokerRegistrationChangeRecord modifying the registration for broker 2: BrokerRegistrationChangeRecord(
#       brokerId=2, brokerEpoch=32, fenced=0, inControlledShutdown=1, logDirs=[])    (fenced: 1 fence, -1 unfence,
#       0 unchanged; inControlledShutdown: 1 entering it, 0 unchanged: BrokerRegistrationFencingChange, ...)
#   Replayed FenceBrokerRecord modifying the registration for broker 2: FenceBrokerRecord(id=2, epoch=15)
#   Replayed UnfenceBrokerRecord modifying the registration for broker 2: UnfenceBrokerRecord(id=2, epoch=15)
#   Replayed UnregisterBrokerRecord(brokerId=2, brokerEpoch=15)
#
# (ClusterControlManager.replay, the same text in 3.3 to 4.4). A follower's broker that is fenced, in controlled
# shutdown or not registered cannot join an ISR nor hold a leader's HW back outside it
# (Partition.isReplicaIsrEligible), however caught up its FETCHes are.
_REGISTRATION_RECORDS = (
    "(?:RegisterBrokerRecord|BrokerRegistrationChangeRecord|FenceBrokerRecord|UnfenceBrokerRecord"
    "|UnregisterBrokerRecord)"
)
# The message starts with the controller's log context: "[QuorumController id=100] " (3.5+), "[Controller 100] ".
_REGISTRATION = (
    r"^(?:\[[^\]]*\] )?Replayed (?:initial RegisterBrokerRecord for"
    r"|RegisterBrokerRecord establishing a new incarnation of"
    r"|(?:RegisterBrokerRecord|BrokerRegistrationChangeRecord|FenceBrokerRecord|UnfenceBrokerRecord) modifying the"
    rf" registration for) broker ({_ID}): (\w+)\((.*)\)$"
)
_UNREGISTRATION = r"^(?:\[[^\]]*\] )?Replayed (UnregisterBrokerRecord)\((.*)\)$"
_REGISTRATION_ANY = rf"{_REGISTRATION}|{_UNREGISTRATION}"

# The quarantine reason of a used line without a readable stamp (either layout `with_log_fields` reads).
NO_LOG_TIME = "no readable log4j time '[yyyy-MM-dd HH:mm:ss,SSS]' (or ',SSSSSS') at the start of the line"
# The quarantine reason of a line of a kind the replay reads whose text no pattern matches.
UNKNOWN_FORMAT = "line in no known format (cut short?)"
_PATTERNS = {
    ISR_SHRINK: _SHRINK,
    ISR_UPDATE: _UPDATE,
    LEADER_START: _LEADER,
    LEADER_SKIP: _SKIP,
    FOLLOWER_START: _FOLLOWER,
    LEO_RECORD: _LEO_RECORD,
    BROKER_REGISTRATION: _REGISTRATION_ANY,
    METADATA_DELTA: _METADATA_DELTA,
    APP_VERSION: _APP_VERSION,
    APP_START_TIME: _APP_START_TIME,
}
# Kinds whose whole line is matched: a config dump's first line has no logger suffix, its settings no prefix.
_LINE_PATTERNS = {CONFIG_DUMP: _CONFIG_DUMP, BROKER_SETTING: _SETTING}
_LABELS = {
    CONFIG_DUMP: "KafkaConfig values:",
    BROKER_SETTING: "KafkaConfig setting",
    ISR_SHRINK: "Shrinking ISR",
    ISR_UPDATE: "ISR updated to",
    LEADER_START: "Leader ... starts at leader epoch",
    LEADER_SKIP: "Skipped the become-leader",
    FOLLOWER_START: "Follower ... starts at leader epoch",
    LEO_RECORD: "Recorded replica ... log end offset (LEO)",
    BROKER_REGISTRATION: "Replayed ... broker registration record",
    METADATA_DELTA: "Transitioning ... partition(s) to local",
    APP_VERSION: "Kafka version:",
    APP_START_TIME: "Kafka startTimeMs:",
}
# "Skipped the become-leader" lines that change nothing (stale partition epoch, already a local leader,
# storage error): known messages, not a commit.
_SKIP_NO_CHANGE = (
    r"since the leader is already at a newer partition epoch|because this partition is already a local leader"
    r"|due to a storage error|due to disk error"
)


def with_broker_message(lines_df: DataFrame) -> DataFrame:
    """`message`: the text between the log4j `[time] LEVEL ` prefix and the ` (logger)` suffix (null if absent).

    Expects `with_log_fields` (log_time_local, log_level, logger) to have run.
    """
    return lines_df.withColumn("message", F.nullif(F.regexp_extract(F.col("line"), _MESSAGE, 1), F.lit("")))


def _line_kind(stage: Column, line: Column) -> Column:
    """Which of the used lines a line looks like (by a marker that survives a cut), else null."""
    return (
        F.when((stage == SERVER_LOG) & line.contains("Shrinking ISR from"), F.lit(ISR_SHRINK))
        .when((stage == SERVER_LOG) & line.rlike(r"ISR updated (from AlterIsr )?to"), F.lit(ISR_UPDATE))
        .when((stage == STATE_CHANGE_LOG) & line.rlike(r"\[Broker id=\d+\] Leader \S"), F.lit(LEADER_START))
        .when(
            (stage == STATE_CHANGE_LOG) & line.rlike(r"\[Broker id=\d+\] Follower \S+ starts at leader epoch"),
            F.lit(FOLLOWER_START),
        )
        .when(
            (stage == STATE_CHANGE_LOG)
            & line.contains("Skipped the become-leader state change for ")
            & ~line.rlike(_SKIP_NO_CHANGE),
            F.lit(LEADER_SKIP),
        )
        .when((stage == SERVER_LOG) & line.contains("] Recorded replica "), F.lit(LEO_RECORD))
        .when(
            (stage == STATE_CHANGE_LOG) & line.rlike(r"\[Broker id=\d+\] Transitioning \d"),
            F.lit(METADATA_DELTA),
        )
        .when(
            (stage == CONTROLLER_LOG) & line.rlike(rf"\] Replayed (?:initial )?{_REGISTRATION_RECORDS}\b"),
            F.lit(BROKER_REGISTRATION),
        )
        .when((stage == SERVER_LOG) & line.rlike(r"KafkaConfig values: ?$"), F.lit(CONFIG_DUMP))
        .when((stage == SERVER_LOG) & line.rlike(rf"^\t({_SETTING_NAMES}) = "), F.lit(BROKER_SETTING))
        # AppInfoParser prints "unknown" when its jar has no version resource (a build from source): not used
        .when((stage == SERVER_LOG) & line.rlike(r"\] INFO Kafka version: \d"), F.lit(APP_VERSION))
        .when((stage == SERVER_LOG) & line.contains("] INFO Kafka startTimeMs: "), F.lit(APP_START_TIME))
    )


def with_broker_line_status(df: DataFrame) -> DataFrame:
    """Classify each line: `line_kind`, `status` parsed | quarantined | unused, `detail`.

    Expects `stage` (server_log | state_change_log | controller_log), `with_log_fields` and `with_broker_message`.

    The kind and whether the line parses are columns of their own, read by name below: as one expression
    tree, the kind's thirteen tests were copied into every rule that reads it (some forty copies), which
    made the generated code too large to compile (Janino: "Code grows beyond 64 KB") and evaluated every
    regular expression once per copy. Spark keeps a projection of its own when the next one reads its
    costly columns more than once (`CollapseProject`), so each is evaluated once a line.
    """
    stage, line, message = F.col("stage"), F.col("line"), F.col("message")
    df = df.withColumn("line_kind", _line_kind(stage, line))
    kind = F.col("line_kind")
    df = df.withColumn(
        "_parses",
        F.coalesce(
            *[F.when(kind == k, message.rlike(pattern)) for k, pattern in _PATTERNS.items()],
            *[F.when(kind == k, line.rlike(pattern)) for k, pattern in _LINE_PATTERNS.items()],
            F.lit(False),
        ),
    )
    parses = F.col("_parses")
    label = F.coalesce(*[F.when(kind == k, F.lit(v)) for k, v in _LABELS.items()])
    quarantined, parsed, unused = F.lit("quarantined"), F.lit("parsed"), F.lit("unused")
    used = kind.isNotNull()
    no_prefix = F.col("log_time_local").isNull()
    rules: list[tuple[Column, Column, Column]] = [
        (used & F.col("read_error").isNotNull(), quarantined, F.col("read_error")),
        # a setting line of a config dump has no prefix: its time is the dump's
        (used & no_prefix & (kind != BROKER_SETTING), quarantined, F.lit(NO_LOG_TIME)),
        (used & ~parses, quarantined, F.format_string(f"'%s' {UNKNOWN_FORMAT}", label)),
        (used, parsed, kind),
        # A file that could not be read to its end loses lines nobody can classify: say so.
        (F.col("read_error").startswith("file unreadable"), quarantined, F.col("read_error")),
        (no_prefix, unused, F.lit("no log4j prefix (continuation line: stack trace, config dump)")),
        (
            (stage == STATE_CHANGE_LOG) & line.contains("Skipped the become-leader state change for "),
            unused,
            F.lit("become-leader skipped without a state change"),
        ),
    ]
    status, detail = unused, F.lit("other message")
    for condition, rule_status, rule_detail in reversed(rules):
        status = F.when(condition, rule_status).otherwise(status)
        detail = F.when(condition, rule_detail).otherwise(detail)
    return df.withColumns({"status": status, "detail": detail}).drop("_parses")


def _groups(text: Column, pattern: str, names: tuple[str, ...]) -> dict[str, Column]:
    """The regex groups of `pattern` in `text` by name ("" for a group that did not take part)."""
    return {name: F.regexp_extract(text, pattern, i) for i, name in enumerate(names, start=1)}


def _int_list(text: Column) -> Column:
    return F.split(text, ",").cast("array<int>")


def _registration_elr(message: Column) -> Column:
    """The eligible leader replicas a 4.2+ registration line prints (empty array for `elr=[]`), else null."""
    listed = F.regexp_replace(F.regexp_extract(message, _REGISTRATION_ELR, 1), " ", "")
    return F.when(
        message.rlike(_REGISTRATION_ELR),
        F.when(listed == "", F.array().cast("array<int>")).otherwise(_int_list(listed)),
    )


def _parsed(df: DataFrame, kind: str) -> DataFrame:
    return df.filter((F.col("status") == "parsed") & (F.col("line_kind") == kind))


_ORIGIN = ("t_log", "source_file", "line_number", "event_date", "ingest_run_id")


def isr_commit_events(lines_df: DataFrame) -> DataFrame:
    """Every line that states the ISR in effect on a leader, as one frame (before deduplication)."""
    m = F.col("message")
    upd = _groups(m, _UPDATE, _UPDATE_GROUPS)
    updates = _parsed(lines_df, ISR_UPDATE).select(
        "cluster",
        upd["topic"].alias("topic"),
        upd["partition"].cast("int").alias("partition"),
        "broker_id",
        F.lit(None).cast("int").alias("leader_epoch"),
        upd["partition_epoch"].cast("int").alias("partition_epoch"),
        _int_list(upd["isr"]).alias("isr"),
        F.lit(None).cast("array<int>").alias("elr"),
        # 3.5+ prints two spaces (or "(under-min-isr)") where older versions print one.
        F.when(upd["under_min"] != "", F.lit(True)).when(upd["gap"] == "  ", F.lit(False)).alias("under_min_isr"),
        F.lit(False).alias("is_leader_start"),
        F.lit(SERVER_LOG).alias("source"),
        *_ORIGIN,
    )
    skp = _groups(m, _SKIP, _SKIP_GROUPS)
    skips = _parsed(lines_df, LEADER_SKIP).select(
        "cluster",
        skp["topic"].alias("topic"),
        skp["partition"].cast("int").alias("partition"),
        "broker_id",
        skp["leader_epoch"].cast("int").alias("leader_epoch"),
        F.coalesce(
            F.nullif(skp["state_partition_epoch"], F.lit("")), F.nullif(skp["registration_partition_epoch"], F.lit(""))
        )
        .cast("int")
        .alias("partition_epoch"),
        _int_list(skp["isr"]).alias("isr"),
        _registration_elr(m).alias("elr"),
        F.lit(None).cast("boolean").alias("under_min_isr"),
        F.lit(False).alias("is_leader_start"),
        F.lit(STATE_CHANGE_LOG).alias("source"),
        *_ORIGIN,
    )
    starts = parse_leader_starts(lines_df).select(
        "cluster",
        "topic",
        "partition",
        "broker_id",
        "leader_epoch",
        "partition_epoch",
        "isr",
        F.lit(None).cast("array<int>").alias("elr"),
        "under_min_isr",
        F.lit(True).alias("is_leader_start"),
        F.lit(STATE_CHANGE_LOG).alias("source"),
        *_ORIGIN,
    )
    return updates.unionByName(skips).unionByName(starts)


def parse_leader_starts(lines_df: DataFrame) -> DataFrame:
    """Parsed "Leader ... starts at leader epoch" lines with their fields (one row per line)."""
    g = _groups(F.col("message"), _LEADER, _LEADER_GROUPS)
    topic_id = F.regexp_extract(g["topic_id"], r"^Some\((.*)\)$", 1)
    previous = F.regexp_extract(g["previous_leader"], r"^Some\((-?\d+)\)$", 1)
    return _parsed(lines_df, LEADER_START).select(
        "cluster",
        g["topic"].alias("topic"),
        F.nullif(topic_id, F.lit("")).alias("topic_id"),
        g["partition"].cast("int").alias("partition"),
        "broker_id",
        g["leader_epoch"].cast("int").alias("leader_epoch"),
        g["epoch_start_offset"].cast("bigint").alias("epoch_start_offset"),
        F.nullif(g["partition_epoch"], F.lit("")).cast("int").alias("partition_epoch"),
        g["high_watermark"].cast("bigint").alias("high_watermark"),
        _int_list(g["isr"]).alias("isr"),
        # 3.5+ leaves a blank (or "(under-min-isr)") before the period; older versions print neither.
        F.when(g["under_min"] != "", F.lit(True)).when(g["gap"] == " ", F.lit(False)).alias("under_min_isr"),
        F.nullif(previous, F.lit("")).cast("int").alias("previous_leader"),
        g["previous_leader_epoch"].cast("int").alias("previous_leader_epoch"),
        *_ORIGIN,
    )


def build_leader_epochs(lines_df: DataFrame) -> DataFrame:
    """Classified state-change.log lines -> one row per leadership start (`leader_epochs` contract)."""
    return conform(parse_leader_starts(lines_df), LEADER_EPOCHS)


def build_follower_starts(lines_df: DataFrame) -> DataFrame:
    """Classified state-change.log lines -> one row per "Follower ... starts at leader epoch" line
    (`follower_starts` contract)."""
    g = _groups(F.col("message"), _FOLLOWER, _FOLLOWER_GROUPS)
    leader = F.nullif(g["leader"], F.lit("")).cast("int")
    return conform(
        _parsed(lines_df, FOLLOWER_START).select(
            "cluster",
            g["topic"].alias("topic"),
            g["partition"].cast("int").alias("partition"),
            "broker_id",
            g["leader_epoch"].cast("int").alias("leader_epoch"),
            g["log_end_offset"].cast("bigint").alias("log_end_offset"),
            F.nullif(g["partition_epoch"], F.lit("")).cast("int").alias("partition_epoch"),
            g["high_watermark"].cast("bigint").alias("high_watermark"),
            F.when(leader >= 0, leader).alias("leader"),
            *_ORIGIN,
        ),
        FOLLOWER_STARTS,
    )


def build_follower_leo_records(lines_df: DataFrame) -> DataFrame:
    """Classified server.log lines -> one row per "Recorded replica ... log end offset (LEO)" line
    (`follower_leo_records` contract)."""
    g = _groups(F.col("message"), _LEO_RECORD, _LEO_RECORD_GROUPS)
    return conform(
        _parsed(lines_df, LEO_RECORD).select(
            "cluster",
            g["topic"].alias("topic"),
            g["partition"].cast("int").alias("partition"),
            "broker_id",
            g["follower_id"].cast("int").alias("follower_id"),
            g["log_end_offset"].cast("bigint").alias("log_end_offset"),
            g["log_start_offset"].cast("bigint").alias("log_start_offset"),
            *_ORIGIN,
        ),
        FOLLOWER_LEO_RECORDS,
    )


def build_metadata_deltas(lines_df: DataFrame) -> DataFrame:
    """Classified state-change.log lines -> one row per "Transitioning N partition(s) to local leaders|followers"
    line (`metadata_deltas` contract)."""
    g = _groups(F.col("message"), _METADATA_DELTA, _METADATA_DELTA_GROUPS)
    return conform(
        _parsed(lines_df, METADATA_DELTA).select(
            "cluster", "broker_id", g["role"].alias("role"), g["partitions"].cast("int").alias("partitions"), *_ORIGIN
        ),
        METADATA_DELTAS,
    )


def broker_registration_rows(lines_df: DataFrame) -> DataFrame:
    """Classified controller.log lines -> one row per broker registration record a controller replayed, before the
    controllers' copies of one record are reduced to one (`broker_id` of the lines: the controller's id)."""
    m = F.col("message")
    g = _groups(m, _REGISTRATION, ("broker", "record", "fields"))
    u = _groups(m, _UNREGISTRATION, ("record", "fields"))
    record = F.coalesce(F.nullif(g["record"], F.lit("")), u["record"])
    fields = F.coalesce(F.nullif(g["fields"], F.lit("")), u["fields"])

    def field(name: str, pattern: str) -> Column:
        return F.nullif(F.regexp_extract(fields, rf"\b{name}=({pattern})(?:,|$)", 1), F.lit(""))

    broker = F.coalesce(field("brokerId", _ID), field("id", _ID)).cast("int")
    epoch = F.coalesce(field("brokerEpoch", _LONG), field("epoch", _LONG)).cast("bigint")
    flag = F.coalesce(field("fenced", r"true|false|-?\d"), F.lit(""))
    shutdown = F.coalesce(field("inControlledShutdown", r"true|false|\d"), F.lit(""))
    # BrokerRegistrationChangeRecord: fenced 1 fence, -1 unfence, 0 unchanged; inControlledShutdown 1 entering
    # it, 0 unchanged (BrokerRegistrationFencingChange, BrokerRegistrationInControlledShutdownChange)
    fenced = (
        F.when(record == "FenceBrokerRecord", F.lit(True))
        .when(record == "UnfenceBrokerRecord", F.lit(False))
        .when(flag.isin("true", "1"), F.lit(True))
        .when(flag.isin("false", "-1"), F.lit(False))
    )
    in_shutdown = F.when(shutdown.isin("true", "1"), F.lit(True)).when(shutdown == "false", F.lit(False))
    return _parsed(lines_df, BROKER_REGISTRATION).select(
        "cluster",
        broker.alias("broker_id"),
        epoch.alias("broker_epoch"),
        record.alias("record"),
        fenced.alias("fenced"),
        in_shutdown.alias("in_controlled_shutdown"),
        F.col("broker_id").alias("controller_id"),
        *_ORIGIN,
    )


def build_broker_registrations(lines_df: DataFrame) -> DataFrame:
    """Classified controller.log lines -> `broker_registrations`: each record once, at the earliest controller's line.

    Every controller of a quorum replays every record, so a record is logged once per controller: the n-th
    line of one content (broker, epoch, record, fenced, shutdown) in each controller's log is the same record
    (a broker fenced twice in one epoch logs the same content twice, in order on every controller)."""
    rows = broker_registration_rows(lines_df)
    content = ["cluster", "broker_id", "broker_epoch", "record", "fenced", "in_controlled_shutdown"]
    nth = F.row_number().over(Window.partitionBy(*content, "controller_id").orderBy("t_log", "line_number"))
    earliest = Window.partitionBy(*content, "_nth").orderBy("t_log", "controller_id", "source_file", "line_number")
    return conform(
        rows.withColumn("_nth", nth).withColumn("_rank", F.row_number().over(earliest)).filter(F.col("_rank") == 1),
        BROKER_REGISTRATIONS,
    )


def broker_setting_rows(lines_df: DataFrame) -> DataFrame:
    """Classified server.log lines -> one row per broker setting line, with the time of the "KafkaConfig
    values:" line before it in the same file (`t_log`, null when the file holds none before it: a dump cut
    by a rotation). Expects the setting lines' `line` and the dump lines' `t_log`, `event_date`."""
    marks = _parsed(lines_df, CONFIG_DUMP).select(
        "source_file", "line_number", "t_log", "event_date", F.lit(None).cast("string").alias("line")
    )
    settings = _parsed(lines_df, BROKER_SETTING).select(
        "source_file", "line_number", F.lit(None).cast("timestamp").alias("t_log"),
        F.lit(None).cast("date").alias("event_date"), "line",
    )  # fmt: skip
    before = Window.partitionBy("source_file").orderBy("line_number").rowsBetween(Window.unboundedPreceding, 0)
    dated = marks.unionByName(settings).select(
        "source_file", "line_number", "line",
        F.last("t_log", ignorenulls=True).over(before).alias("t_log"),
        F.last("event_date", ignorenulls=True).over(before).alias("event_date"),
    ).filter(F.col("line").isNotNull())  # fmt: skip
    g = _groups(F.col("line"), _SETTING, ("setting", "value"))
    keys = ["source_file", "line_number"]
    return (
        _parsed(lines_df, BROKER_SETTING)
        .select("cluster", "broker_id", "ingest_run_id", *keys)
        .join(dated, keys)
        .select(
            "cluster",
            "broker_id",
            g["setting"].alias("setting"),
            g["value"].cast("bigint").alias("value"),
            "t_log",
            *keys,
            "event_date",
            "ingest_run_id",
        )  # fmt: skip
    )


def kafka_release(major: Column, minor: Column, suffix: Column) -> tuple[Column, Column]:
    """The Apache Kafka release (major, minor) of a logged version: Confluent Platform's builds log their own
    number with a `-ccs` or `-ce` suffix: 5.x is Apache Kafka 2.x, 6.0-6.2 are 2.6-2.8, 7.x is 3.x, 8.x is 4.x."""
    confluent = suffix.rlike(r"^-(ccs|ce)\b") & (major >= 5)
    return (
        F.when(confluent & (major <= 6), F.lit(2)).when(confluent, major - 4).otherwise(major),
        F.when(confluent & (major == 6), minor + 6).otherwise(minor),
    )


def app_info_rows(lines_df: DataFrame) -> DataFrame:
    """Classified server.log lines -> `broker_configs` rows of each AppInfoParser line: the Kafka release
    (`kafka.version.major`, `kafka.version.minor`) and the start's epoch time (`kafka.start_time_ms`), at the
    line's own time."""
    message = F.col("message")
    version = _groups(message, _APP_VERSION, ("major", "minor", "suffix"))
    major, minor = kafka_release(version["major"].cast("bigint"), version["minor"].cast("bigint"), version["suffix"])
    versions = _parsed(lines_df, APP_VERSION).select(
        "cluster",
        "broker_id",
        F.explode(
            F.array(
                F.struct(F.lit(KAFKA_VERSION_MAJOR).alias("setting"), major.alias("value")),
                F.struct(F.lit(KAFKA_VERSION_MINOR).alias("setting"), minor.alias("value")),
            )
        ).alias("kv"),
        *_ORIGIN,
    )
    start_times = _parsed(lines_df, APP_START_TIME).select(
        "cluster",
        "broker_id",
        F.struct(
            F.lit(KAFKA_START_TIME_MS).alias("setting"),
            F.regexp_extract(message, _APP_START_TIME, 1).cast("bigint").alias("value"),
        ).alias("kv"),
        *_ORIGIN,
    )
    return versions.unionByName(start_times).select("cluster", "broker_id", "kv.setting", "kv.value", *_ORIGIN)


def build_broker_configs(lines_df: DataFrame) -> DataFrame:
    """Classified server.log lines -> the brokers' settings as logged at their starts (`broker_configs`
    contract): the KafkaConfig dump's settings the replay reads (a setting line without its dump's first
    line in the same file is left out, counted by the stage) and the AppInfoParser lines (`app_info_rows`)."""
    settings = broker_setting_rows(lines_df).filter(F.col("t_log").isNotNull())
    return conform(settings.unionByName(app_info_rows(lines_df), allowMissingColumns=True), BROKER_CONFIGS)


def _shrink_proposals(lines_df: DataFrame) -> DataFrame:
    g = _groups(F.col("message"), _SHRINK, _SHRINK_GROUPS)
    items = F.regexp_extract_all(g["out_of_sync"], F.lit(r"\(([^()]*)\)"), 1)
    out_of_sync = F.transform(
        items,
        lambda s: F.struct(
            F.regexp_extract(s, r"brokerId: (\d+)", 1).cast("int").alias("broker_id"),
            F.regexp_extract(s, r"endOffset: (-?\d+)", 1).try_cast("bigint").alias("end_offset"),
            F.regexp_extract(s, r"lastCaughtUpTimeMs: (-?\d+)", 1).try_cast("bigint").alias("last_caught_up_time_ms"),
        ),
    )
    return _parsed(lines_df, ISR_SHRINK).select(
        F.col("cluster").alias("p_cluster"),
        g["topic"].alias("p_topic"),
        g["partition"].cast("int").alias("p_partition"),
        F.col("broker_id").alias("p_broker_id"),
        F.array_sort(_int_list(g["to_isr"])).alias("p_to_isr_sorted"),
        F.col("t_log").alias("proposed_at"),
        F.when(g["out_of_sync"] != "", out_of_sync).alias("out_of_sync_replicas"),
        F.nullif(g["high_watermark"], F.lit("")).cast("bigint").alias("proposal_high_watermark"),
        F.nullif(g["end_offset"], F.lit("")).cast("bigint").alias("proposal_end_offset"),
        F.col("source_file").alias("p_source_file"),
        F.col("line_number").alias("p_line_number"),
    )


def _deduplicate_commits(commits_df: DataFrame) -> DataFrame:
    """One row per (cluster, topic, partition, leader, partition epoch): the earliest line.

    The leader epoch, eligible leader replicas and under-min-ISR flag are taken from whichever line of the
    commit states them.
    Commits without a partition epoch (pre-3.x leader lines) are kept as they are.
    """
    solo = F.when(F.col("partition_epoch").isNull(), F.concat_ws(":", "source_file", "line_number"))
    source_rank = F.when(F.col("source") == SERVER_LOG, F.lit(0)).otherwise(F.lit(1))
    group = Window.partitionBy("cluster", "topic", "partition", "broker_id", "partition_epoch", "_solo")
    ordered = group.orderBy("t_log", "_source_rank", "source_file", "line_number")
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    return (
        commits_df.withColumns({"_solo": solo, "_source_rank": source_rank})
        .withColumns(
            {
                "_rank": F.row_number().over(ordered),
                "leader_epoch": F.first("leader_epoch", ignorenulls=True).over(whole),
                "elr": F.first("elr", ignorenulls=True).over(whole),
                "under_min_isr": F.first("under_min_isr", ignorenulls=True).over(whole),
                "is_leader_start": F.max("is_leader_start").over(whole),
            }
        )
        .filter(F.col("_rank") == 1)
        .drop("_solo", "_rank")
    )


def _change_kind(isr: Column, previous: Column, is_leader_start: Column, proposed_at: Column) -> Column:
    """leader_start; shrink when a "Shrinking ISR" proposal was carried out or a member left; expand when
    members joined and none left; unchanged; null with nothing to compare to."""
    return (
        F.when(is_leader_start, F.lit("leader_start"))
        .when(proposed_at.isNotNull(), F.lit("shrink"))
        .when(previous.isNull(), F.lit(None).cast("string"))
        .when(F.size(F.array_except(previous, isr)) > 0, F.lit("shrink"))
        .when(F.size(F.array_except(isr, previous)) > 0, F.lit("expand"))
        .otherwise(F.lit("unchanged"))
    )


def build_isr_changes(lines_df: DataFrame) -> DataFrame:
    """Classified server.log + state-change.log lines -> one row per committed ISR state (`isr_changes`).

    Rows of one partition and leader are ordered by log time (then partition epoch); each is compared
    with the one before it. A "Shrinking ISR" line of the same leader and partition, logged after the
    previous commit and no later than this one, whose proposed ISR is this commit's ISR, is the
    proposal the commit carried out (the latest such line when the leader proposed it more than once).
    """
    commits = _deduplicate_commits(isr_commit_events(lines_df))
    leader = Window.partitionBy("cluster", "topic", "partition", "broker_id").orderBy(
        "t_log", F.coalesce(F.col("partition_epoch"), F.lit(-1)), "_source_rank", "source_file", "line_number"
    )
    commits = commits.withColumns(
        {
            "previous_isr": F.when(~F.col("is_leader_start"), F.lag("isr").over(leader)),
            "_previous_t": F.lag("t_log").over(leader),
            "_previous_isr_sorted": F.array_sort(F.lag("isr").over(leader)),
            "_isr_sorted": F.array_sort("isr"),
        }
    )
    proposals = _shrink_proposals(lines_df)
    c, p = commits.alias("c"), proposals.alias("p")
    after_previous = (
        F.col("c._previous_t").isNull()
        | (F.col("p.proposed_at") > F.col("c._previous_t"))
        # Same millisecond as the previous commit: only if that commit was not already this ISR.
        | (
            (F.col("p.proposed_at") == F.col("c._previous_t"))
            & (F.col("c._previous_isr_sorted") != F.col("p.p_to_isr_sorted"))
        )
    )
    matched = c.join(
        p,
        on=(
            (F.col("c.cluster") == F.col("p.p_cluster"))
            & (F.col("c.topic") == F.col("p.p_topic"))
            & (F.col("c.partition") == F.col("p.p_partition"))
            & (F.col("c.broker_id") == F.col("p.p_broker_id"))
            & (F.col("p.proposed_at") <= F.col("c.t_log"))
            & after_previous
            & (F.col("c._isr_sorted") == F.col("p.p_to_isr_sorted"))
            & ~F.col("c.is_leader_start")
        ),
        how="left",
    )
    latest_proposal = Window.partitionBy("source_file", "line_number").orderBy(
        F.col("proposed_at").desc_nulls_last(), F.col("p_source_file").desc(), F.col("p_line_number").desc()
    )
    rows = (
        matched.withColumn("_proposal_rank", F.row_number().over(latest_proposal))
        .filter(F.col("_proposal_rank") == 1)
        .withColumns(
            {
                "isr_size": F.size("isr"),
                "change_kind": _change_kind(
                    F.col("isr"), F.col("previous_isr"), F.col("is_leader_start"), F.col("proposed_at")
                ),
            }
        )
    )
    return conform(rows, ISR_CHANGES)
