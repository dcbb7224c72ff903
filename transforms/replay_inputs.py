"""Silver tables -> the rows each replay group needs, keyed by (cluster, leader broker, time bucket).

A group is one time bucket of one leader broker, so a hot partition or broker splits across tasks
and memory per task stays bounded by the bucket length. Every partition of a produce request is in
the same group (a request goes to one broker and has one log time). A group carries its produces
(left side of a cogroup) and, on the right side, the follower LEO events it needs (from `lookback`
before the bucket, for the ISR re-simulation's lag window, to the request timeout after it). What is
constant per partition and leader epoch (assignment, min ISR, epoch bounds, ISR changes) is small
and travels with the group function instead (ackreplay/replay/groups.ReplayContext); the group
function also places each row in its leader epoch.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from ackreplay.schemas.vocabulary import NEVER

# A running leader logs its followers' FETCHes at least every replica.fetch.wait.max.ms (default 500 ms);
# a longer silence after it lost its partition means it had stopped (with_leader_until).
RUNNING_LEADER_MAX_SILENCE_US = 1_000_000
KIND_PRODUCE, KIND_FETCH, KIND_ISR = 0, 1, 2  # row kinds of the ISR check's epoch rows (isr_check.epoch_rows)
# What crosses into Python is numeric: groups as `gid`, partitions as `pkey`, source files as
# `source_file_id` (64-bit hashes; the group function maps them back to names).


def partition_key(cluster: str = "cluster", topic: str = "topic", partition: str = "partition") -> F.Column:
    """`pkey`: a 64-bit hash of (cluster, topic, partition) standing in for the strings in Python."""
    return F.xxhash64(cluster, topic, partition)


def group_key(cluster: F.Column | str, broker_id: F.Column | str, bucket: F.Column | str) -> F.Column:
    """`gid`: the replay group (cluster, leader broker, time bucket) as a 64-bit hash."""
    return F.xxhash64(cluster, broker_id, bucket)


def appended() -> F.Column:
    """A produce the broker appended to its log (acks != 0, no error, an offset): the replay's candidates."""
    return (F.col("acks") != 0) & (F.col("error_code") == 0) & (F.col("base_offset") >= 0)


NOT_ENOUGH_REPLICAS = 19  # Kafka's Errors.NOT_ENOUGH_REPLICAS


def rejected_below_min_isr() -> F.Column:
    """An acks=all produce the broker rejected with NOT_ENOUGH_REPLICAS: `Partition.appendRecordsToLeader`
    throws it, before appending, when the committed ISR is smaller than min.insync.replicas. The replay
    checks its rule against these (the rejection ground truth); they have no offset and are not written
    to produce_replay."""
    return (F.col("acks") == -1) & (F.col("error_code") == NOT_ENOUGH_REPLICAS)


# a retry later than the producer's delivery.timeout.ms default (120 s) is another batch: the first one expired
RETRY_WITHIN_US = 120_000_000


def linked_retries(produce_requests: DataFrame) -> DataFrame:
    """Per real NOT_ENOUGH_REPLICAS rejection (cluster, topic, partition, source_file, line_number): the request
    that got its batch appended, `retry_file`/`retry_line` and the broker's ack of it, `retry_ack_us` (its
    `t_ack_observed`, else its `t_local_done`). A producer resends a rejected batch as it was (the same records,
    so the same size) from the same client: the retry is that client's first later successful acks=all produce
    to the partition with the same `records_size_bytes`, within `RETRY_WITHIN_US`. A rejection with no such
    produce (the batch expired, or the client id is not logged) has none."""
    link = ["cluster", "topic", "partition", "client_id", "records_size_bytes"]
    rejected = produce_requests.filter(rejected_below_min_isr()).select(
        *link, "source_file", "line_number", F.unix_micros("t_start").alias("_at_us")
    )
    appended = produce_requests.filter(
        (F.col("acks") == -1) & (F.col("error_code") == 0) & (F.col("base_offset") >= 0)
    ).select(
        *link,
        F.col("source_file").alias("retry_file"),
        F.col("line_number").alias("retry_line"),
        F.unix_micros("t_start").alias("_retry_us"),
        F.unix_micros(F.coalesce("t_ack_observed", "t_local_done")).alias("retry_ack_us"),
    )
    later = (F.col("_retry_us") > F.col("_at_us")) & (F.col("_retry_us") <= F.col("_at_us") + F.lit(RETRY_WITHIN_US))
    first = F.min_by(F.struct("retry_file", "retry_line", "retry_ack_us"), F.struct("_retry_us", "retry_line"))
    return (
        appended.join(F.broadcast(rejected), link)  # the rejections are few: the produces are read once
        .filter(later)
        .groupBy("cluster", "topic", "partition", "source_file", "line_number")
        .agg(first.alias("_retry"))
        .select("cluster", "topic", "partition", "source_file", "line_number", "_retry.*")
    )


EPISODE_COLUMNS = ("held", "episode_start_us", "episode_done_us")


def retry_episodes(produces_df: DataFrame) -> DataFrame:
    """The appended produces whose producer-visible latency depends on a rejected batch's retries, with the
    attempts that a policy admitting them earlier would have appended instead (`groups._admitted_attempts`):

    * the retry that got a rejected batch appended (`linked_retries`, same leader broker as its rejections):
      `held` false;
    * a batch of the same producer and partition created before that retry was sent and sent after it:
      the producer held it behind the retried batch (`RecordAccumulator.reenqueue` puts a retried batch
      back at the head of its partition's queue, and `drainBatchesForOneNode` drains only a queue's head,
      so nothing behind it is sent until it is): `held` true. Needs `t_send` (`with_send_times`); the
      latest such retry holds it. A retry behind another retried batch keeps its own episode.

    Columns: the produce's key (cluster, topic, partition, source_file, line_number), `held`, and
    `episode_start_us` / `episode_done_us`: the rejected attempts' `t_start` / `t_local_done` in time order,
    then the retry's own (µs). Few rows (one per retried or held batch): the replay joins them by broadcast.
    """
    key = ["cluster", "topic", "partition"]
    links = linked_retries(produces_df)
    attempts = produces_df.filter(rejected_below_min_isr()).select(
        *key, "source_file", "line_number", "broker_id", _micros("t_start").alias("_start"),
        _micros("t_local_done").alias("_done"),
    )  # fmt: skip
    retries = produces_df.filter(appended()).select(
        *key,
        F.col("source_file").alias("retry_file"),
        F.col("line_number").alias("retry_line"),
        F.col("broker_id").alias("_retry_broker"),
        "client_id",
        "base_offset",
        F.struct(_micros("t_start").alias("_start"), _micros("t_local_done").alias("_done")).alias("_retry"),
    )
    linked = attempts.join(links, [*key, "source_file", "line_number"])
    episodes = (
        retries.join(F.broadcast(linked), [*key, "retry_file", "retry_line"])  # the rejections are few
        .filter(F.col("broker_id") == F.col("_retry_broker"))
        .groupBy(*key, "retry_file", "retry_line", "client_id", "base_offset", "_retry")
        .agg(F.array_sort(F.collect_list(F.struct("_start", "_done"))).alias("_attempts"))
        .select(
            *key,
            "client_id",
            "base_offset",
            F.col("_retry._start").alias("_retry_start"),
            F.col("retry_file").alias("source_file"),
            F.col("retry_line").alias("line_number"),
            F.concat("_attempts", F.array("_retry")).alias("_episode"),
        )  # fmt: skip
    )
    out = episodes.select(*key, "source_file", "line_number", F.lit(False).alias("held"), "_episode")
    if "t_send" in produces_df.columns:
        e = F.broadcast(episodes).alias("e")
        b = produces_df.filter(appended() & F.col("t_send").isNotNull()).alias("b")
        behind = (
            (F.col("b.base_offset") > F.col("e.base_offset"))
            & (F.unix_micros(F.col("b.t_send")) < F.col("e._retry_start"))
            & (F.unix_micros(F.col("b.t_start")) >= F.col("e._retry_start"))
        )
        held = (
            b.join(e, [F.col(f"b.{c}") == F.col(f"e.{c}") for c in (*key, "client_id")]).filter(behind)
            .groupBy(*[F.col(f"b.{c}").alias(c) for c in (*key, "source_file", "line_number")])
            .agg(F.max_by("e._episode", "e._retry_start").alias("_episode"))
            .select(*key, "source_file", "line_number", F.lit(True).alias("held"), "_episode")
        )  # fmt: skip
        # a retry behind another retried batch is that retry's final attempt: its own episode
        out = out.unionByName(held.join(out, [*key, "source_file", "line_number"], "left_anti"))
    return out.select(
        *key, "source_file", "line_number", "held",
        F.col("_episode._start").alias("episode_start_us"), F.col("_episode._done").alias("episode_done_us"),
    )  # fmt: skip


def by_controller() -> F.Column:
    """An `isr_changes` row the controller made alone: a shrink no leader proposed. KRaft's controller
    takes a broker out of every ISR when it starts a controlled shutdown or is fenced
    (`ReplicationControlManager.handleBrokerInControlledShutdown` / `handleBrokerFenced`); the leaders
    learn it from the metadata log and print it in state-change.log only."""
    return (F.col("change_kind") == "shrink") & F.col("proposed_at").isNull()


def _micros(col: str) -> F.Column:
    return F.unix_micros(F.col(col))


def fetched_epochs(follower_fetches_df: DataFrame) -> DataFrame:
    """Per (cluster, topic, partition, leader epoch the followers named): the leader that handled the first
    such FETCH and when (`leader_id`, `epoch_start_us`). A small aggregate; fetches of versions without
    `currentLeaderEpoch` form the null-epoch row of their partition."""
    return follower_fetches_df.groupBy(
        "cluster", "topic", "partition", F.col("current_leader_epoch").alias("leader_epoch")
    ).agg(F.min_by("broker_id", "t_dequeue").alias("leader_id"), F.min(_micros("t_dequeue")).alias("epoch_start_us"))


def build_epochs(
    leader_epochs_df: DataFrame,
    fetched_epochs_df: DataFrame,
    follower_starts_df: DataFrame | None = None,
    request_lines_df: DataFrame | None = None,
) -> DataFrame:
    """Leadership spans: (cluster, topic, partition, leader_epoch, leader_id, epoch_start_us, epoch_end_us,
    leader_until_us, start_isr).

    From `leader_epochs` (state-change.log); epochs seen only in follower fetches (`fetched_epochs`: their
    `currentLeaderEpoch`, e.g. when state-change.log was rotated away) start at their first fetch and
    have an unknown start ISR (null: all replicas assumed).
    """
    logged = leader_epochs_df.select(
        "cluster",
        "topic",
        "partition",
        "leader_epoch",
        F.col("broker_id").alias("leader_id"),
        _micros("t_log").alias("epoch_start_us"),
        F.col("isr").alias("start_isr"),
        F.lit("state_change_log").alias("epoch_source"),
    )
    seen = (
        fetched_epochs_df.filter(F.col("leader_epoch").isNotNull())
        .join(
            logged.select("cluster", "topic", "partition", "leader_epoch"),
            ["cluster", "topic", "partition", "leader_epoch"],
            "left_anti",
        )
        .select(
            "cluster",
            "topic",
            "partition",
            "leader_epoch",
            "leader_id",
            "epoch_start_us",
            F.lit(None).cast("array<int>").alias("start_isr"),
            F.lit("follower_fetches").alias("epoch_source"),
        )
    )
    # Several lines can announce the same epoch (a restarted broker re-logs it): keep the first.
    first = Window.partitionBy("cluster", "topic", "partition", "leader_epoch").orderBy("epoch_start_us")
    epochs = (
        logged.unionByName(seen).withColumn("rank", F.row_number().over(first)).filter(F.col("rank") == 1).drop("rank")
    )
    following = Window.partitionBy("cluster", "topic", "partition").orderBy("epoch_start_us", "leader_epoch")
    epochs = epochs.withColumn("epoch_end_us", F.coalesce(F.lead("epoch_start_us").over(following), F.lit(NEVER)))
    return with_leader_until(epochs, follower_starts_df, request_lines_df)


def with_leader_until(
    epochs_df: DataFrame, follower_starts_df: DataFrame | None, request_lines_df: DataFrame | None = None
) -> DataFrame:
    """`leader_until_us`: until when the epoch's leader led it, on its own clock: its first "Follower ...
    starts" line for the partition after the epoch's start (`follower_starts`), or its own next epoch's
    start if that comes first; without such a line, the next epoch's start (`epoch_end_us`). Given
    `request_lines` (cluster, broker_id, t_local_done: when each request the broker logged was handled),
    a leader that lost the partition to another broker and then fell silent leads until just after the
    last of them.

    Kafka's old leader appends and acknowledges produces until it applies the change itself
    (`Partition.makeFollower` switches the leader under the partition's write lock, and
    `Partition.appendRecordsToLeader` reads the leader under its read lock), which can be after the new
    leader logged its start on its own clock: a controlled shutdown's last acks=1 batches are appended
    there, and cut by the new epoch.

    A leader that lost the partition to another broker and then logged nothing (no request line, no
    follower line: a crashed broker logs it when it restarts) for longer than a running leader is ever
    silent did not hand over: it crashed or stopped running, and the controller fenced it (after
    `broker.session.timeout.ms`) and elected the next leader. A running leader logs its followers' FETCHes
    at least every `replica.fetch.wait.max.ms` (500 ms by default: `ReplicaManager.fetchMessages` answers a
    FETCH with no new data when its wait expires; `RUNNING_LEADER_MAX_SILENCE_US` allows twice that), and
    every acknowledgement is made while it handles a request it logs (an acks=1 produce's append, the
    follower FETCH that completes an acks=all one), so it acknowledged nothing after the last request it
    handled (`t_local_done`). So its epoch ends there, not when the next one begins: a what-if that
    acknowledges later than the recorded one must not be answered by a dead broker."""
    same_leader = Window.partitionBy("cluster", "topic", "partition", "leader_id").orderBy("epoch_start_us")
    following = Window.partitionBy("cluster", "topic", "partition").orderBy("epoch_start_us", "leader_epoch")
    epochs = epochs_df.withColumn("_next_own_start", F.lead("epoch_start_us").over(same_leader)).withColumn(
        "_next_leader", F.lead("leader_id").over(following)
    )
    keys = ["cluster", "topic", "partition"]
    if follower_starts_df is not None:
        f = follower_starts_df.select(
            *keys, F.col("broker_id").alias("_follower"), _micros("t_log").alias("_t_follower")
        )
        first_follower_line = (
            epochs.select(*keys, "leader_epoch", "leader_id", "epoch_start_us")
            .join(f, keys)
            .where((F.col("_follower") == F.col("leader_id")) & (F.col("_t_follower") > F.col("epoch_start_us")))
            .groupBy(*keys, "leader_epoch")
            .agg(F.min("_t_follower").alias("_resigned"))
        )
        epochs = epochs.join(first_follower_line, [*keys, "leader_epoch"], "left")
    else:
        epochs = epochs.withColumn("_resigned", F.lit(None).cast("bigint"))
    if request_lines_df is not None:
        lost = epochs.where(F.col("_next_leader") != F.col("leader_id"))
        lines = request_lines_df.select(
            F.col("cluster").alias("_cluster"), F.col("broker_id").alias("_broker"), _micros("t_local_done").alias("_t")
        )
        spans = lost.select(*keys, "leader_epoch", "leader_id", "epoch_start_us", "epoch_end_us", "_resigned")
        during = F.col("_t") < F.col("epoch_end_us")
        seen = (
            lines.join(
                F.broadcast(spans),
                (F.col("_cluster") == F.col("cluster")) & (F.col("_broker") == F.col("leader_id"))
                & (F.col("_t") >= F.col("epoch_start_us")) & (F.col("_t") <= F.greatest("epoch_end_us", "_resigned")),
            )
            .groupBy(*keys, "leader_epoch")
            .agg(
                F.max(F.when(during, F.col("_t"))).alias("_last_line"),
                F.min(F.when(~during, F.col("_t"))).alias("_next_line"),
            )
        )  # fmt: skip
        epochs = epochs.join(seen, [*keys, "leader_epoch"], "left")
    else:
        epochs = epochs.withColumn("_last_line", F.lit(None).cast("bigint")).withColumn(
            "_next_line", F.lit(None).cast("bigint")
        )
    own_end = F.least("_resigned", "_next_own_start")  # least skips nulls
    # lost to another broker, and its next sign of life (a request line, its follower line) is more than a
    # running leader's longest silence after its last line before the next epoch: it crashed or stopped
    next_sign = F.least("_next_line", "_resigned")
    stopped = (
        (F.col("_next_leader") != F.col("leader_id"))
        & F.col("_last_line").isNotNull()
        & (next_sign.isNull() | (next_sign - F.col("_last_line") > F.lit(RUNNING_LEADER_MAX_SILENCE_US)))
    )
    until = (
        F.when(stopped, F.least("epoch_end_us", F.col("_last_line") + 1))
        .when(F.col("_resigned").isNotNull(), own_end)
        .otherwise(F.col("epoch_end_us"))
    )
    return epochs.withColumn("leader_until_us", until).drop(
        "_next_own_start", "_next_leader", "_resigned", "_last_line", "_next_line"
    )


def broker_silences(request_lines_df: DataFrame) -> DataFrame:
    """(cluster, broker_id, silent_from_us, resumed_us): the spans in which a broker logged no request line
    for longer than a running leader is ever silent (`RUNNING_LEADER_MAX_SILENCE_US`), from its last line
    before to its first after. A broker that leads a partition answers its followers' FETCHes at least
    every `replica.fetch.wait.max.ms`, so it did not run then (a stopped JVM, a long GC pause); a broker
    that leads nothing is silent too, and has no ISR to check.

    `request_lines`: (cluster, broker_id, t_local_done). Lines are first reduced to the first and last of
    each quarter of the threshold (a small aggregate: a few rows per broker and second), whose gaps are
    exactly the gaps between consecutive lines longer than a quarter."""
    bin_us = RUNNING_LEADER_MAX_SILENCE_US // 4
    t = _micros("t_local_done")
    bins = request_lines_df.groupBy("cluster", "broker_id", F.floor(t / F.lit(bin_us)).alias("_bin")).agg(
        F.min(t).alias("_first"), F.max(t).alias("_last")
    )
    previous = F.lag("_last").over(Window.partitionBy("cluster", "broker_id").orderBy("_bin"))
    return (
        bins.withColumn("silent_from_us", previous)
        .where(F.col("_first") - F.col("silent_from_us") > F.lit(RUNNING_LEADER_MAX_SILENCE_US))
        .select("cluster", "broker_id", "silent_from_us", F.col("_first").alias("resumed_us"))
    )


def with_leader_epoch(df: DataFrame, epochs_df: DataFrame, time_us: F.Column) -> DataFrame:
    """Attach the leadership span in force at `time_us` on the row's broker (inner join: rows outside any
    known span of their broker are dropped; the caller counts them)."""
    e = epochs_df.alias("e")
    joined = (
        df.withColumn("_t_us", time_us)
        .alias("d")
        .join(
            F.broadcast(e),
            (F.col("d.cluster") == F.col("e.cluster"))
            & (F.col("d.topic") == F.col("e.topic"))
            & (F.col("d.partition") == F.col("e.partition"))
            & (F.col("d.broker_id") == F.col("e.leader_id"))
            & (F.col("d._t_us") >= F.col("e.epoch_start_us"))
            & (F.col("d._t_us") < F.col("e.epoch_end_us")),
            "inner",
        )
    )
    # Aliased: fresh columns, so joining the result with `epochs_df` again is not an ambiguous self-join.
    epoch_columns = ("leader_epoch", "epoch_start_us", "epoch_end_us", "start_isr", "epoch_source")
    return joined.select("d.*", *[F.col(f"e.{c}").alias(c) for c in epoch_columns]).drop("_t_us")


def bucket_of(time_us: F.Column, bucket_us: int) -> F.Column:
    return F.floor(time_us / F.lit(bucket_us)).cast("bigint")


def source_file_id(source_file: str = "source_file") -> F.Column:
    """`source_file_id`: a 64-bit hash of the source file's name standing in for it in Python."""
    return F.xxhash64(source_file)


def produce_side(produces_df: DataFrame, bucket_us: int) -> DataFrame:
    """Left side of the replay cogroup: appended produces (error 0, base offset known) as numeric rows.

    `connection` becomes a 64-bit key (0: none logged); `t_send` (the batch's send time, from
    `with_send_times`) and a retry episode's columns (`retry_episodes`) are used when the frame has them.
    """
    t_us = _micros("t_local_done")
    t_send = _micros("t_send") if "t_send" in produces_df.columns else F.lit(None).cast("long")
    connection = (  # xxhash64 of null is its seed, not null
        F.when(F.col("connection").isNotNull(), F.xxhash64("connection")).otherwise(F.lit(0))
        if "connection" in produces_df.columns
        else F.lit(0)
    )
    t_log = _micros("t_log") if "t_log" in produces_df.columns else F.lit(0).cast("long")
    previous_response = (
        F.when(F.col("connection").isNotNull(), F.max(t_log).over(_earlier_requests_on_the_connection()))
        if "connection" in produces_df.columns and "t_log" in produces_df.columns
        else F.lit(None).cast("long")
    )
    return produces_df.select(
        group_key("cluster", "broker_id", bucket_of(t_us, bucket_us)).alias("gid"),
        partition_key().alias("pkey"),
        "broker_id",
        t_us.alias("t_us"),
        F.col("base_offset").alias("offset"),
        "timeout_ms",
        "acks",
        F.col("records_size_bytes").alias("bytes"),
        _micros("t_start").alias("t_start_us"),
        _micros("t_ack_observed").alias("t_ack_observed_us"),
        (F.coalesce("response_queue_time_ms", F.lit(0.0)) + F.coalesce("send_time_ms", F.lit(0.0))).alias(
            "client_side_ms"
        ),
        source_file_id().alias("source_file_id"),
        "line_number",
        F.unix_date("event_date").alias("event_day"),
        connection.cast("long").alias("connection_key"),
        t_log.alias("t_log_us"),
        previous_response.alias("previous_response_us"),
        t_send.alias("t_send_us"),
        (F.col("records") if "records" in produces_df.columns else F.lit(None)).cast("int").alias("records"),
        (F.col("send_leader_epoch") if "send_leader_epoch" in produces_df.columns else F.lit(None))
        .cast("int")
        .alias("send_leader_epoch"),
        *[c for c in EPISODE_COLUMNS if c in produces_df.columns],
        fixed_retry_backoff(produces_df).alias("fixed_backoff"),
    )


def _earlier_requests_on_the_connection() -> WindowSpec:
    """The requests read before this one on its connection (a replay group's chain starts with the first request of
    its bucket; the response before it is in the previous bucket's group)."""
    return (
        Window.partitionBy("cluster", "broker_id", "connection")
        .orderBy(_micros("t_start"))
        .rangeBetween(Window.unboundedPreceding, -1)
    )


def fixed_retry_backoff(produces_df: DataFrame) -> Column:
    """Whether the producer retried every `retry.backoff.ms` (Kafka's Java client before 3.7:
    `RecordAccumulator.shouldBackoff` against the fixed `retryBackoffMs`) rather than with KIP-580's exponential
    backoff (3.7 on: `ExponentialBackoff(retry.backoff.ms, 2, retry.backoff.max.ms, 0.2)`). From the request log's
    `clientInformation`; other and unknown clients: exponential, as Kafka's own client today."""
    if "client_software_version" not in produces_df.columns:
        return F.lit(False)
    version = F.regexp_extract("client_software_version", r"^(\d+)\.(\d+)", 0)
    major = F.regexp_extract("client_software_version", r"^(\d+)\.", 1).cast("int")
    minor = F.regexp_extract("client_software_version", r"^\d+\.(\d+)", 1).cast("int")
    java = F.col("client_software_name") == F.lit("apache-kafka-java")
    before_3_7 = (major < 3) | ((major == 3) & (minor < 7))
    return F.coalesce(java & (version != F.lit("")) & before_3_7, F.lit(False))


def with_send_times(produces_df: DataFrame, send_times_df: DataFrame) -> DataFrame:
    """Produces with `t_send` and `records`: the send time and record count of their batch, from
    `batch_send_times` rows keyed by topic (kafka-dump-log) or, for client logs without topics, by client
    id. The earliest wins when a batch is listed twice (a segment dumped twice, a client log copied).
    `send_leader_epoch`: the epoch that appended the listed batch (null: unknown); the replay, which places
    each produce in its epoch, keeps the send time only for a produce of that epoch (offsets are reused
    after a truncation)."""
    keys = ["cluster", "partition", "base_offset"]

    def earliest(where: Column, key: str, name: str) -> DataFrame:  # (t_send, records, epoch) of the earliest listing
        listing = F.struct("t_send", "records", F.col("leader_epoch").alias("epoch"))
        return send_times_df.where(where).groupBy(*keys, key).agg(F.min(listing).alias(name))

    by_topic = earliest(F.col("topic").isNotNull(), "topic", "_by_topic")
    by_client = earliest(F.col("topic").isNull(), "client_id", "_by_client")
    joined = produces_df.join(by_topic, [*keys, "topic"], "left").join(by_client, [*keys, "client_id"], "left")
    batch = F.coalesce("_by_topic", "_by_client")
    return joined.withColumns(
        {"t_send": batch["t_send"], "records": batch["records"], "send_leader_epoch": batch["epoch"]}
    ).drop("_by_topic", "_by_client")


SEND_DELAY_QUANTILES = (0.1, 0.5, 0.9)


def send_delays(produces_df: DataFrame, blocked_gap_ms: Column) -> DataFrame:
    """Per (cluster, client_id): how long after its first record each request of the producer reached the broker,
    over its requests that did not wait in the socket and whose every batch has a send time (`with_send_times`):
    `requests`, and the delay's `p10_ms`, `p50_ms`, `p90_ms` (`t_start` less the earliest `t_send`).

    A producer sends a request once its earliest batch has lingered `linger.ms` or filled `batch.size`
    (`RecordAccumulator.ready`, then `Sender.sendProducerData`), so a request that did not wait reached the broker
    that long after its first record plus the sender's and the network's time. The replay takes `linger.ms` for
    that time when it estimates the arrival of a request that did wait (ackreplay/replay/connections.py), so this
    measures the setting it rests on. A request waited when it started within `blocked_gap_ms` (a Column: the
    row's cluster's) of the previous response sent on its connection; a connection's first request, whose
    previous response is not in the data, and requests without a connection are left out."""
    request = ["cluster", "broker_id", "connection", "source_file", "line_number"]
    # the rows of one request share its start: the window over the rows gives each the response before its request,
    # and the request's rows then group within the window's partitioning (no second shuffle)
    on_connection = (
        Window.partitionBy("cluster", "broker_id", "connection")
        .orderBy(_micros("t_start"))
        .rangeBetween(Window.unboundedPreceding, -1)
    )
    per_request = (
        produces_df.where(F.col("connection").isNotNull())
        .select(
            *request,
            "client_id",
            _micros("t_start").alias("_start_us"),
            _micros("t_send").alias("_send_us"),
            F.round(blocked_gap_ms * 1000).cast("long").alias("_gap_us"),
            F.max(_micros("t_log")).over(on_connection).alias("_previous_sent_us"),
        )
        .groupBy(*request)
        .agg(
            F.first("client_id", ignorenulls=True).alias("client_id"),
            F.min("_start_us").alias("t_start_us"),
            F.min("_send_us").alias("first_send_us"),
            (F.count("_send_us") == F.count("*")).alias("every_send_known"),
            F.max("_previous_sent_us").alias("previous_sent_us"),
            F.first("_gap_us").alias("gap_us"),
        )
    )
    delay_ms = (F.col("t_start_us") - F.col("first_send_us")) / 1000.0
    quantiles = F.percentile_approx(delay_ms, list(SEND_DELAY_QUANTILES), 10_000)
    return (
        per_request.where(
            F.col("every_send_known")
            & F.col("previous_sent_us").isNotNull()
            & (F.col("t_start_us") - F.col("previous_sent_us") > F.col("gap_us"))
        )
        .groupBy("cluster", "client_id")
        .agg(F.count("*").alias("requests"), quantiles.alias("_q"))
        .select(
            "cluster",
            "client_id",
            "requests",
            *[F.col("_q")[i].alias(f"p{round(q * 100)}_ms") for i, q in enumerate(SEND_DELAY_QUANTILES)],
        )
    )


def leo_evidence(fetches_df: DataFrame) -> DataFrame:
    """The follower fetches whose `fetchOffset` the leader recorded.

    A partition the leader could not read (not leader, fenced epoch, ...) is not recorded, and any such
    error makes Kafka answer at once (`errorReadingData` in `ReplicaManager.fetchMessages`). So a
    response that waited in purgatory (`remoteTimeMs` > 0) had every partition read, and recorded, when
    the request was handled; an error it carries came at completion, after a leader change (4.1.1 lab
    trace: FENCED_LEADER_EPOCH on the fetches that acked the old leader's last batches). A diverging
    epoch means the follower must truncate first: not recorded either.
    """
    clean = F.coalesce(F.col("partition_error_code"), F.lit(0)) == 0
    answered_late = F.coalesce(F.col("remote_time_ms") > 0, F.lit(False))
    return fetches_df.filter((clean | answered_late) & ~F.col("diverging_epoch"))


def fetch_events(fetches_df: DataFrame, update_fraction: float = 0.0) -> DataFrame:
    """Follower LEO events of fetches: (cluster, broker_id, topic, partition, [leader_epoch,] follower_id,
    offset, t_us), `broker_id` being the leader that handled the FETCH.

    The leader learns `fetch_offset` while handling the FETCH, between `t_dequeue` and `t_local_done`
    (it reads the partitions listed before this one first): the event is placed `update_fraction` of
    the way through that interval. A listing that later incremental requests carried over (the
    partition was idle, so the follower did not re-send it) adds a second event with the same offset
    at `carried_until`: the leader still saw the follower fetching at that offset, which keeps it
    caught up in the ISR re-simulation.
    """
    dequeue, local_done = _micros("t_dequeue"), _micros("t_local_done")
    learned = dequeue + F.round((local_done - dequeue) * F.lit(update_fraction)).cast("bigint")
    times = F.when(F.col("carried_requests") > 0, F.array(learned, _micros("carried_until"))).otherwise(
        F.array(learned)
    )
    epoch = ["leader_epoch"] if "leader_epoch" in fetches_df.columns else []  # when placed in epochs already
    return fetches_df.select(
        "cluster",
        "broker_id",
        "topic",
        "partition",
        *epoch,
        "follower_id",
        F.col("fetch_offset").alias("offset"),
        F.explode(times).alias("t_us"),
    )


def with_recorded_leos(events_df: DataFrame, records_df: DataFrame) -> DataFrame:
    """`fetch_events` with the moments the leaders logged instead, where they did (`follower_leo_records`, from
    `Partition.updateFollowerFetchState`'s DEBUG line): same columns.

    A FETCH line says when the request was handled, not when the leader recorded each partition's offset in it, so
    `fetch_events` places that moment; the line of the leader's own Partition logger is the moment. Over each second
    in which a leader logged any such line its FETCH events are left out (every FETCH logs one line per partition of
    its session, the ones an incremental request leaves out included: `IncrementalFetchContext.foreachPartition`,
    and followers fetch at least every `replica.fetch.wait.max.ms`), so a broker that logged them for part of the
    trace only (the logger's level changed at run time, a restart at INFO) keeps its FETCH events elsewhere.
    """
    second = F.floor(F.col("t_us") / 1_000_000)
    epoch = ["leader_epoch"] if "leader_epoch" in records_df.columns else []  # when placed in epochs already
    recorded = records_df.select(
        "cluster",
        "broker_id",
        "topic",
        "partition",
        *epoch,
        "follower_id",
        F.col("log_end_offset").alias("offset"),
        _micros("t_log").alias("t_us"),
    )
    covered = recorded.select("cluster", "broker_id", second.alias("_second")).distinct()
    placed = events_df.withColumn("_second", second).join(covered, ["cluster", "broker_id", "_second"], "left_anti")
    return placed.drop("_second").unionByName(recorded, allowMissingColumns=True)


def metric_events(leo_samples_df: DataFrame, epochs_df: DataFrame) -> DataFrame:
    """Follower LEO events from JMX-exporter scrapes (`kafka_log_log_logendoffset` of a follower's own
    replica), for clusters without follower FETCH lines: same columns as `fetch_events`.

    A sample says the follower held `value` at `t_sample`; the leader learns it at the follower's next
    FETCH, a few ms later, which this source cannot see, and the scrape interval (~1 s) bounds the time
    resolution: acks replayed from it are coarse, and the stage flags them (`leo_source`).
    """
    samples = leo_samples_df.filter(F.col("metric") == "kafka_log_log_logendoffset").select(
        "cluster", "topic", "partition", F.col("broker_id").alias("follower_id"), F.col("value").alias("offset"),
        _micros("t_sample").alias("t_us"),
    )  # fmt: skip
    e = epochs_df.alias("e")
    placed = samples.alias("s").join(
        F.broadcast(e),
        (F.col("s.cluster") == F.col("e.cluster"))
        & (F.col("s.topic") == F.col("e.topic"))
        & (F.col("s.partition") == F.col("e.partition"))
        & (F.col("s.t_us") >= F.col("e.epoch_start_us"))
        & (F.col("s.t_us") < F.col("e.epoch_end_us"))
        & (F.col("s.follower_id") != F.col("e.leader_id")),  # the leader's own LEO is not a follower's
        "inner",
    )
    return placed.select(
        "s.cluster",
        F.col("e.leader_id").alias("broker_id"),
        "s.topic",
        "s.partition",
        F.col("e.leader_epoch").alias("leader_epoch"),
        "s.follower_id",
        "s.offset",
        "s.t_us",
    )


def event_side(events_df: DataFrame, bucket_us: int, timeout_us: int, lookback_us: int) -> DataFrame:
    """Right side of the cogroup: each LEO event (`fetch_events`, `metric_events`) in every group that needs it.

    A produce of bucket b waits at most `timeout_us` after its local append, so an event at t matters
    to the buckets from floor((t - timeout) / B) to its own; the ISR re-simulation of the buckets
    starting within `lookback_us` after t needs it as history. Most events land in one bucket only.
    """
    t = F.col("t_us")
    buckets = F.sequence(bucket_of(t - F.lit(timeout_us), bucket_us), bucket_of(t + F.lit(lookback_us), bucket_us))
    copied = events_df.select(
        "cluster",
        "broker_id",
        partition_key().alias("pkey"),
        "follower_id",
        "offset",
        "t_us",
        F.explode(buckets).alias("bucket"),
    )
    return copied.select(
        group_key("cluster", "broker_id", "bucket").alias("gid"), "pkey", "broker_id", "t_us", "offset", "follower_id"
    )
