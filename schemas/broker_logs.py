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
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("broker_id", IntegerType(), False),  # the leader: the broker whose log it is
    # From the line, or from the other log's line of the same commit (server.log "ISR updated to" lines
    # carry none); null for a server.log commit the state-change.log did not repeat.
    ("leader_epoch", IntegerType(), True),
    ("partition_epoch", IntegerType(), True),  # "version updated to N" / partitionEpoch (null: pre-3.x leader line)
    ("isr", ArrayType(IntegerType()), False),  # in printed order; the leader is always a member
    ("isr_size", IntegerType(), False),
    # Eligible leader replicas (KIP-966) as a 4.2+ state-change.log registration line prints them for this
    # commit ("elr=[2]"); null where no line of the commit prints them (server.log lines, 3.x-4.1). The
    # replay derives them where null (ackreplay/replay/elr.py).
    ("elr", ArrayType(IntegerType()), True),
    # True/false when the line says (3.5+ "ISR updated to" and leader-start lines); null when it cannot tell.
    ("under_min_isr", BooleanType(), True),
    ("previous_isr", ArrayType(IntegerType()), True),  # same partition and leader; null at a leader start
    # shrink | expand | unchanged | leader_start; null when the first state of a leader in the data is not a
    # leader start (its leadership began before the logs that were read).
    ("change_kind", StringType(), True),
    # The "Shrinking ISR" proposal this commit carried out (shrinks only): when the leader proposed it, the
    # replicas it found out of sync, and its HW / log end offset at that moment.
    ("proposed_at", TimestampType(), True),
    ("out_of_sync_replicas", ArrayType(OUT_OF_SYNC_REPLICA), True),
    ("proposal_high_watermark", LongType(), True),
    ("proposal_end_offset", LongType(), True),
    ("source", StringType(), False),  # server_log | state_change_log
    ("t_log", TimestampType(), False),  # when the leader applied it: the ISR in effect from then on
    *_LINE_ORIGIN,
)

LEADER_EPOCHS = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("topic_id", StringType(), True),  # `Some(id)` in the line; null for `None` and pre-3.x lines
    ("partition", IntegerType(), False),
    ("broker_id", IntegerType(), False),  # the new leader
    ("leader_epoch", IntegerType(), False),
    ("epoch_start_offset", LongType(), False),  # the leader's LEO at the start: offsets >= it are this epoch's
    ("partition_epoch", IntegerType(), True),
    ("high_watermark", LongType(), False),
    ("isr", ArrayType(IntegerType()), False),
    ("previous_leader", IntegerType(), True),  # null for `None` (and pre-3.x lines, which do not print it)
    ("previous_leader_epoch", IntegerType(), False),  # -1 when there was none
    ("t_log", TimestampType(), False),
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
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("broker_id", IntegerType(), False),  # the broker that became a follower
    ("leader_epoch", IntegerType(), False),  # the epoch it follows from now on
    ("log_end_offset", LongType(), False),  # "from offset N": its own log end at that moment
    ("partition_epoch", IntegerType(), True),
    ("high_watermark", LongType(), False),
    ("leader", IntegerType(), True),  # "Current leader is N"; null for -1 (no leader)
    ("t_log", TimestampType(), False),
    *_LINE_ORIGIN,
)

# When a leader learned a follower's LEO: the "Recorded replica <id> log end offset (LEO) position <offset> and log
# start offset <offset>." line `Partition.updateFollowerFetchState` logs at DEBUG (logger kafka.cluster.Partition,
# server.log) for each partition a follower FETCH read, right after it recorded the offset, moved the HW and completed
# the produces that waited for it (`tryCompleteDelayedRequests`). The request log's FETCH line gives only the
# request's times; this is the moment itself.
FOLLOWER_LEO_RECORDS = _schema(
    ("cluster", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("broker_id", IntegerType(), False),  # the leader: the broker whose log it is
    ("follower_id", IntegerType(), False),
    ("log_end_offset", LongType(), False),  # the follower's fetch offset, now its LEO at the leader
    ("log_start_offset", LongType(), False),
    ("t_log", TimestampType(), False),
    *_LINE_ORIGIN,
)

# A broker setting the replay's rules rest on (transforms.broker_logs.BROKER_SETTINGS), as the broker logged
# it when it started ("KafkaConfig values:" in server.log, one line per setting). `t_log`: the dump's time.
BROKER_CONFIGS = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), False),
    ("setting", StringType(), False),
    ("value", LongType(), False),
    ("t_log", TimestampType(), False),
    *_LINE_ORIGIN,
)

# A broker's registration as a KRaft controller replayed it (controller.log, ClusterControlManager.replay): a
# broker that is fenced, in controlled shutdown or unregistered cannot join an ISR nor hold a leader's HW back
# (Partition.isReplicaIsrEligible). One row per record, the earliest of the controllers that logged it.
BROKER_REGISTRATIONS = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), False),  # the broker the record is about
    ("broker_epoch", LongType(), False),
    # RegisterBrokerRecord | BrokerRegistrationChangeRecord | FenceBrokerRecord | UnfenceBrokerRecord |
    # UnregisterBrokerRecord
    ("record", StringType(), False),
    ("fenced", BooleanType(), True),  # after the record; null: the record leaves it as it was
    ("in_controlled_shutdown", BooleanType(), True),  # after the record; null: left as it was
    ("controller_id", IntegerType(), False),  # the controller whose log line this row is
    ("t_log", TimestampType(), False),  # on the controller's clock, read in the cluster's zone
    *_LINE_ORIGIN,
)

# A metadata delta a broker applied that changed partitions it holds: the "Transitioning N partition(s) to local
# leaders|followers" line of state-change.log (ReplicaManager.applyDelta), logged just after the broker's metadata
# cache took the delta (BrokerMetadataPublisher.publish). Against the controller's line of a record in that delta it
# gives how long the cluster's records took to reach the brokers (replay.stage.metadata_apply_delays).
METADATA_DELTAS = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), False),  # the broker that applied it
    ("role", StringType(), False),  # leaders | followers: the partitions this line is about
    ("partitions", IntegerType(), False),
    ("t_log", TimestampType(), False),
    *_LINE_ORIGIN,
)
