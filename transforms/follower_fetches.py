"""Follower FETCH lines -> `follower_fetches`: the follower LEO as the leader learns it, per partition.

Replica fetchers use incremental fetch sessions (KIP-227): a request lists only partitions whose fetch
position changed, and the leader keeps serving the others at their cached `fetchOffset`. So a
partition absent from an incremental request keeps the offset of its latest listing in the same
session (recorded on that listing as `carried_requests`/`carried_until`); a new session (epoch 0)
lists everything again.
Requests are ordered within a session by `sessionEpoch`, which the client increments by one per
request, so the order does not depend on log timestamps.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from schemas import tables
from transforms.common import conform, literal_map, plus_ms

_SESSION_KEY = ["cluster", "broker_id", "follower_id", "session_id"]
_PARTITION_KEY = [*_SESSION_KEY, "topic", "partition"]


def with_fetch_session(fetch_lines_df: DataFrame) -> DataFrame:
    """Request-level columns of parsed follower FETCH lines, including the effective session id.

    A full request (epoch 0) opens the session whose id is in its response; incremental requests
    (epoch > 0) name it; sessionless requests (epoch -1) and failed requests get session 0 (no carry-over).
    """
    req = F.col("req")
    epoch = req["request"]["sessionEpoch"]
    request_error = req["response"]["errorCode"]
    session_id = (
        F.when(F.coalesce(request_error, F.lit(0)) != 0, F.lit(0))
        .when(epoch == 0, F.coalesce(req["response"]["sessionId"], F.lit(0)))
        .when(epoch > 0, req["request"]["sessionId"])
        .otherwise(F.lit(0))
    )
    t_start = plus_ms(F.col("t_log"), -req["totalTimeMs"])
    t_dequeue = plus_ms(t_start, req["requestQueueTimeMs"])
    return fetch_lines_df.withColumns(
        {
            "session_id": session_id,
            "session_epoch": epoch,
            "request_error_code": request_error,
            "api_version": req["requestHeader"]["requestApiVersion"],
            "correlation_id": req["requestHeader"]["correlationId"],
            "max_wait_ms": req["request"]["maxWaitMs"],
            "t_start": t_start,
            "t_dequeue": t_dequeue,
            "t_local_done": plus_ms(t_dequeue, req["localTimeMs"]),
            "total_time_ms": req["totalTimeMs"],
        }
    )


def explode_listed_partitions(fetch_requests_df: DataFrame, topic_ids: dict[str, str]) -> DataFrame:
    """One row per partition listed in a follower FETCH request."""
    ids = literal_map(topic_ids)
    req = F.col("req")
    exploded = fetch_requests_df.select(
        "*", F.explode(req["request"]["topics"]).alias("tt")
    ).select("*", F.explode(F.col("tt")["partitions"]).alias("pp"))
    tt, pp = F.col("tt"), F.col("pp")
    response_topic = F.try_element_at(
        F.filter(
            req["response"]["responses"],
            lambda r: r["topic"].eqNullSafe(tt["topic"]) & r["topicId"].eqNullSafe(tt["topicId"]),
        ),
        F.lit(1),
    )
    response_partition = F.try_element_at(
        F.filter(response_topic["partitions"], lambda p: p["partitionIndex"] == pp["partition"]), F.lit(1)
    )
    return exploded.withColumns(
        {
            "topic": F.coalesce(
                tt["topic"], F.try_element_at(ids, F.concat_ws("/", F.col("cluster"), tt["topicId"]))
            ),
            "topic_id": tt["topicId"],
            "partition": pp["partition"],
            "fetch_offset": pp["fetchOffset"],
            "current_leader_epoch": pp["currentLeaderEpoch"],
            "last_fetched_epoch": pp["lastFetchedEpoch"],
            "follower_log_start_offset": pp["logStartOffset"],
            "partition_error_code": response_partition["errorCode"],
            "high_watermark": response_partition["highWatermark"],
            "diverging_epoch": response_partition["divergingEpoch"].isNotNull(),
        }
    ).drop("tt", "pp")


def explode_forgotten_partitions(fetch_requests_df: DataFrame, topic_ids: dict[str, str]) -> DataFrame:
    """(session, topic, partition, epoch) of partitions a request removes from its session."""
    ids = literal_map(topic_ids)
    ft = F.col("ft")
    return (
        fetch_requests_df.filter(F.col("session_id") != 0)
        .select(*_SESSION_KEY, "session_epoch", F.explode(F.col("req")["request"]["forgottenTopicsData"]).alias("ft"))
        .select(
            *_SESSION_KEY,
            "session_epoch",
            F.coalesce(ft["topic"], F.try_element_at(ids, F.concat_ws("/", F.col("cluster"), ft["topicId"]))).alias(
                "topic"
            ),
            F.explode(ft["partitions"]).alias("partition"),
        )
    )


def with_carried_over_span(
    fetch_requests_df: DataFrame, listed_df: DataFrame, forgotten_df: DataFrame
) -> DataFrame:
    """Each listed partition plus how long the leader kept using its offset without it being re-sent.

    `carried_requests` counts the later requests of the same session that omitted the partition (the
    leader kept the listed `fetchOffset` for them); `carried_until` is the `t_dequeue` of the last of
    them (the listing's own `t_dequeue` when none). The span ends at the next listing of the partition,
    when a request forgets it, or with the session. Encoding carry-over as a span instead of one row per
    omitted partition keeps the table linear in the log size: a fetch session can hold hundreds of idle
    partitions, each omitted from every request.
    """
    row_key = ["source_file", "line_number", "topic", "partition"]  # unique per listed row
    in_session = listed_df.filter(F.col("session_id") != 0)
    events = in_session.select(
        *_PARTITION_KEY, "session_epoch", "source_file", "line_number", F.lit(False).alias("forgotten")
    ).unionByName(
        forgotten_df.select(*_PARTITION_KEY, "session_epoch", F.lit(True).alias("forgotten")),
        allowMissingColumns=True,
    )
    next_event = F.lead("session_epoch").over(
        Window.partitionBy(*_PARTITION_KEY).orderBy("session_epoch", "forgotten")
    )
    # One time per (session, epoch) even if a session id shows up twice (restart, duplicated file).
    request_times = (
        fetch_requests_df.filter(F.col("session_id") != 0)
        .groupBy(*_SESSION_KEY, "session_epoch")
        .agg(F.max("t_dequeue").alias("carried_until"))
    )
    last_epoch = request_times.groupBy(*_SESSION_KEY).agg(F.max("session_epoch").alias("last_epoch"))
    spans = (
        events.withColumn("next_event_epoch", next_event)
        .filter(~F.col("forgotten"))
        .join(last_epoch, on=_SESSION_KEY, how="left")
        .withColumn("carried_through_epoch", F.coalesce(F.col("next_event_epoch") - 1, F.col("last_epoch")))
        .join(
            request_times.withColumnRenamed("session_epoch", "carried_through_epoch"),
            on=[*_SESSION_KEY, "carried_through_epoch"],
            how="left",
        )
        .select(*row_key, "carried_through_epoch", "carried_until")
    )
    with_spans = listed_df.join(spans, on=row_key, how="left").withColumns(
        {
            "carried_requests": F.greatest(
                F.coalesce(F.col("carried_through_epoch") - F.col("session_epoch"), F.lit(0)), F.lit(0)
            ),
            "carried_until": F.when(
                (F.coalesce(F.col("carried_through_epoch"), F.col("session_epoch")) > F.col("session_epoch"))
                & F.col("carried_until").isNotNull(),
                F.col("carried_until"),
            ).otherwise(F.col("t_dequeue")),
        }
    )
    return conform(with_spans, tables.FOLLOWER_FETCHES)


def build_follower_fetches(lines_df: DataFrame, topic_ids: dict[str, str]) -> DataFrame:
    """Classified lines -> the `follower_fetches` table (one row per listed partition)."""
    requests = lines_df.filter(
        (F.col("status") == "parsed") & (F.col("api_key_name") == "FETCH")
    ).transform(with_fetch_session)
    listed = explode_listed_partitions(requests, topic_ids)
    forgotten = explode_forgotten_partitions(requests, topic_ids)
    return with_carried_over_span(requests, listed, forgotten)
