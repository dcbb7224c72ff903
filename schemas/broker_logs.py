"""Column contracts of the silver tables built from the brokers' `server.log` and `state-change.log`.

Times are TIMESTAMP (UTC, microseconds), converted from the broker's local log time like the request
logs (cluster zone, broker clock offset). See transforms/broker_logs.py for the lines they come from.
"""

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ackreplay.schemas.tables import _LINE_ORIGIN, _schema

# One replica named in a "Shrinking ISR" line: `(brokerId: 2, endOffset: 1030, lastCaughtUpTimeMs: 1795315387189)`.
# endOffset / lastCaughtUpTimeMs are null when printed as `unknown`; lastCaughtUpTimeMs is not printed before 3.6.
OUT_OF_SYNC_REPLICA = StructType(
    [
        StructField("broker_id", IntegerType(), True),
        StructField("end_offset", LongType(), True),
        StructField("last_caught_up_time_ms", LongType(), True),
    ]
)

ISR_CHANGES = _schema(
    ("cluster", StringType(), False, "Cluster of the leader that committed the ISR"),
    ("topic", StringType(), False, "Topic of the partition"),
    ("partition", IntegerType(), False, "Partition whose ISR changed"),
    ("broker_id", IntegerType(), False, "The leader: the broker whose log the line is in"),
    (
        "leader_epoch",
        IntegerType(),
        True,
        "Leader epoch of the commit, from its line or the other log's line of it (server.log ISR-update lines carry "
        "none); null for a server.log commit the state-change.log did not repeat",
    ),
    (
        "partition_epoch",
        IntegerType(),
        True,
        'Partition epoch after the commit ("version updated to N" / partitionEpoch); null for pre-3.x leader lines',
    ),
    (
        "isr",
        ArrayType(IntegerType()),
        False,
        "Committed ISR broker ids in printed order; the leader is always a member",
    ),
    ("isr_size", IntegerType(), False, "Number of replicas in isr"),
    (
        "elr",
        ArrayType(IntegerType()),
        True,
        "Eligible leader replicas (KIP-966) a 4.2+ state-change.log line prints for this commit; null where no line "
        "of it does (server.log, 3.x-4.1: the replay derives them)",
    ),
    (
        "under_min_isr",
        BooleanType(),
        True,
        "Whether the line says the ISR is below min.insync.replicas (3.5+ ISR-update and leader-start lines); null "
        "when it cannot tell",
    ),
    (
        "previous_isr",
        ArrayType(IntegerType()),
        True,
        "ISR of the previous commit of the same partition and leader; null at a leader start",
    ),
    (
        "change_kind",
        StringType(),
        True,
        "shrink, expand, unchanged or leader_start; null when a leader's first state in the data is not a leader "
        "start (it led before the logs that were read)",
    ),
    # The "Shrinking ISR" proposal this commit carried out (shrinks only): when the leader proposed it, the
    # replicas it found out of sync, and its HW / log end offset at that moment.
    (
        "proposed_at",
        TimestampType(),
        True,
        "When the leader logged the Shrinking ISR proposal this commit carried out; null: no such proposal",
    ),
    (
        "out_of_sync_replicas",
        ArrayType(OUT_OF_SYNC_REPLICA),
        True,
        "Replicas the proposal found out of sync, with their end offset and last caught-up time (epoch ms); null: "
        "none printed",
    ),
    (
        "proposal_high_watermark",
        LongType(),
        True,
        "Leader's high watermark when it proposed the shrink; null: not printed or no proposal",
    ),
    (
        "proposal_end_offset",
        LongType(),
        True,
        "Leader's log end offset when it proposed the shrink; null: not printed or no proposal",
    ),
    ("source", StringType(), False, "Log the commit's row comes from: server_log or state_change_log"),
    (
        "t_log",
        TimestampType(),
        False,
        "When the leader applied the commit (the line's log time): the ISR in effect from then on",
    ),
    *_LINE_ORIGIN,
)

LEADER_EPOCHS = _schema(
    ("cluster", StringType(), False, "Cluster of the new leader"),
    ("topic", StringType(), False, "Topic of the partition"),
    (
        "topic_id",
        StringType(),
        True,
        "Topic id the line prints as Some(id); null for None and pre-3.x lines",
    ),
    ("partition", IntegerType(), False, "Partition whose leadership started"),
    ("broker_id", IntegerType(), False, "The new leader (the broker whose state-change.log it is)"),
    ("leader_epoch", IntegerType(), False, "Leader epoch that starts"),
    (
        "epoch_start_offset",
        LongType(),
        False,
        "The leader's LEO at the start: offsets >= it are this epoch's",
    ),
    ("partition_epoch", IntegerType(), True, "Partition epoch at the start; null for pre-3.x lines"),
    ("high_watermark", LongType(), False, "Partition's high watermark at the start"),
    ("isr", ArrayType(IntegerType()), False, "ISR at the start, in printed order"),
    (
        "previous_leader",
        IntegerType(),
        True,
        "Previous leader's broker id; null for None (and pre-3.x lines, which do not print it)",
    ),
    ("previous_leader_epoch", IntegerType(), False, "Previous leader epoch; -1 when there was none"),
    ("t_log", TimestampType(), False, "When the broker logged the leadership start"),
    *_LINE_ORIGIN,
)

# A broker becoming a follower of a partition ("Follower <tp> starts at leader epoch N ..." in its
# state-change.log). `Partition.makeFollower` logs it under the partition's write lock after switching
# the leader, and appends take that lock to read the leader: so when the broker led the partition before,
# this is when it stopped leading (it appended and acknowledged produces until then, on its own clock),
# and `log_end_offset` says how far its log reached past the new leader's epoch start (offsets the new
# epoch cuts). The line's "Previous leader ... previous leader epoch" repeat the new values (printed
# after the update), so they are not kept.
FOLLOWER_STARTS = _schema(
    ("cluster", StringType(), False, "Cluster of the broker"),
    ("topic", StringType(), False, "Topic of the partition"),
    ("partition", IntegerType(), False, "Partition the broker now follows"),
    ("broker_id", IntegerType(), False, "The broker that became a follower"),
    ("leader_epoch", IntegerType(), False, "The leader epoch it follows from now on"),
    (
        "log_end_offset",
        LongType(),
        False,
        'Its own log end offset at that moment ("from offset N")',
    ),
    ("partition_epoch", IntegerType(), True, "Partition epoch; null when the line does not print it"),
    ("high_watermark", LongType(), False, "Its high watermark at that moment"),
    ("leader", IntegerType(), True, 'The new leader ("Current leader is N"); null for -1 (no leader) or not printed'),
    (
        "t_log",
        TimestampType(),
        False,
        "When the broker logged it; for a former leader, when it stopped leading",
    ),
    *_LINE_ORIGIN,
)

# When a leader learned a follower's LEO: the "Recorded replica <id> log end offset (LEO) position <offset> and log
# start offset <offset>." line `Partition.updateFollowerFetchState` logs at DEBUG (logger kafka.cluster.Partition,
# server.log) for each partition a follower FETCH read, right after it recorded the offset, moved the HW and completed
# the produces that waited for it (`tryCompleteDelayedRequests`). The request log's FETCH line gives only the
# request's times; this is the moment itself.
FOLLOWER_LEO_RECORDS = _schema(
    ("cluster", StringType(), False, "Cluster of the leader"),
    ("topic", StringType(), False, "Topic of the partition"),
    ("partition", IntegerType(), False, "Partition the follower fetched"),
    ("broker_id", IntegerType(), False, "The leader: the broker whose server.log it is"),
    ("follower_id", IntegerType(), False, "Broker id of the follower whose LEO was recorded"),
    (
        "log_end_offset",
        LongType(),
        False,
        "The follower's fetch offset, now its LEO at the leader",
    ),
    ("log_start_offset", LongType(), False, "The follower's log start offset the leader recorded"),
    ("t_log", TimestampType(), False, "When the leader recorded the LEO (the line's log time)"),
    *_LINE_ORIGIN,
)

# A broker setting the replay's rules rest on (transforms.broker_logs.BROKER_SETTINGS), as the broker logged
# it when it started ("KafkaConfig values:" in server.log, one line per setting). `t_log`: the dump's time.
BROKER_CONFIGS = _schema(
    ("cluster", StringType(), False, "Cluster of the broker"),
    ("broker_id", IntegerType(), False, "Broker that logged the setting"),
    (
        "setting",
        StringType(),
        False,
        "Setting name: replica.lag.time.max.ms, replica.fetch.wait.max.ms, or kafka.version.major/minor and "
        "kafka.start_time_ms from AppInfoParser",
    ),
    (
        "value",
        LongType(),
        False,
        "The setting's value (ms for the two settings, the version number, or the start's epoch ms)",
    ),
    (
        "t_log",
        TimestampType(),
        False,
        "Time of the KafkaConfig dump the setting was in (an AppInfoParser value: its own line's time)",
    ),
    *_LINE_ORIGIN,
)

# A broker's registration as a KRaft controller replayed it (controller.log, ClusterControlManager.replay): a
# broker that is fenced, in controlled shutdown or unregistered cannot join an ISR nor hold a leader's HW back
# (Partition.isReplicaIsrEligible). One row per record, the earliest of the controllers that logged it.
BROKER_REGISTRATIONS = _schema(
    ("cluster", StringType(), False, "Cluster of the controller"),
    ("broker_id", IntegerType(), False, "The broker the record is about"),
    ("broker_epoch", LongType(), False, "The broker's epoch (its registration incarnation) in the record"),
    (
        "record",
        StringType(),
        False,
        "Record type: RegisterBrokerRecord, BrokerRegistrationChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord "
        "or UnregisterBrokerRecord",
    ),
    (
        "fenced",
        BooleanType(),
        True,
        "Whether the broker is fenced after the record; null: the record leaves it as it was",
    ),
    (
        "in_controlled_shutdown",
        BooleanType(),
        True,
        "Whether the broker is in controlled shutdown after the record; null: the record leaves it as it was",
    ),
    ("controller_id", IntegerType(), False, "The controller whose log line this row is"),
    (
        "t_log",
        TimestampType(),
        False,
        "When the controller replayed the record, on the controller's clock read in the cluster's zone",
    ),
    *_LINE_ORIGIN,
)

# A metadata delta a broker applied that changed partitions it holds: the "Transitioning N partition(s) to local
# leaders|followers" line of state-change.log (ReplicaManager.applyDelta), logged just after the broker's metadata
# cache took the delta (BrokerMetadataPublisher.publish). Against the controller's line of a record in that delta it
# gives how long the cluster's records took to reach the brokers (replay.stage.metadata_apply_delays).
METADATA_DELTAS = _schema(
    ("cluster", StringType(), False, "Cluster of the broker"),
    ("broker_id", IntegerType(), False, "The broker that applied the delta"),
    ("role", StringType(), False, "leaders or followers: the partitions this line is about"),
    ("partitions", IntegerType(), False, "Number of partitions the line transitions (N)"),
    ("t_log", TimestampType(), False, "When the broker logged it, just after its metadata cache took the delta"),
    *_LINE_ORIGIN,
)
