"""Follower FETCH lines -> `follower_fetches`: the follower LEO as the leader learns it, per partition.

Replica fetchers use incremental fetch sessions (KIP-227): a request lists only partitions whose fetch
position changed, and the leader keeps serving the others at their cached `fetchOffset`. So a
partition absent from an incremental request still has a (carried-over) row at that request, with the
offset of its latest listing in the same session; a new session (epoch 0) lists everything again.
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
    """One row per partition listed in a follower FETCH request (`carried_over` = false)."""
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
            "carried_over": F.lit(False),
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


_CARRIED_VALUES = ["topic_id", "fetch_offset", "current_leader_epoch", "last_fetched_epoch", "follower_log_start_offset"]
_REQUEST_COLUMNS = [
    "session_epoch",
    "request_error_code",
    "api_version",
    "correlation_id",
    "max_wait_ms",
    "t_log",
    "t_start",
    "t_dequeue",
    "t_local_done",
    "total_time_ms",
    "source_file",
    "line_number",
    "event_date",
    "ingest_run_id",
]


def with_carried_over_partitions(
    fetch_requests_df: DataFrame, listed_df: DataFrame, forgotten_df: DataFrame
) -> DataFrame:
    """`listed_df` plus a carried-over row for every session partition an incremental request omits."""
    in_session = listed_df.filter(F.col("session_id") != 0)
    members = in_session.select(*_SESSION_KEY, "topic", "partition").distinct()
    incremental = fetch_requests_df.filter((F.col("session_id") != 0) & (F.col("session_epoch") > 0)).select(
        *_SESSION_KEY, *_REQUEST_COLUMNS
    )
    candidates = incremental.join(members, on=_SESSION_KEY, how="inner").withColumns(
        {"is_event": F.lit(False), "forgotten": F.lit(False), **{c: F.lit(None) for c in _CARRIED_VALUES}}
    )
    listings = in_session.select(
        *_PARTITION_KEY, "session_epoch", *_CARRIED_VALUES, F.lit(True).alias("is_event"), F.lit(False).alias("forgotten")
    )
    forgets = forgotten_df.select(
        *_PARTITION_KEY,
        "session_epoch",
        *[F.lit(None).alias(c) for c in _CARRIED_VALUES],
        F.lit(True).alias("is_event"),
        F.lit(True).alias("forgotten"),
    )
    events = listings.unionByName(forgets)
    timeline = candidates.unionByName(events, allowMissingColumns=True)
    # Events sort before a candidate of the same epoch, so a candidate sees the latest event up to it.
    window = (
        Window.partitionBy(*_PARTITION_KEY)
        .orderBy("session_epoch", F.col("is_event").desc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    carried = (
        timeline.withColumns(
            {
                "last_event_epoch": F.last(F.when(F.col("is_event"), F.col("session_epoch")), ignorenulls=True).over(
                    window
                ),
                "last_forgotten": F.last(F.when(F.col("is_event"), F.col("forgotten")), ignorenulls=True).over(window),
                **{
                    f"last_{c}": F.last(F.when(F.col("is_event"), F.col(c)), ignorenulls=True).over(window)
                    for c in _CARRIED_VALUES
                },
            }
        )
        .filter(
            ~F.col("is_event")
            & (F.col("last_event_epoch") < F.col("session_epoch"))
            & ~F.col("last_forgotten")
        )
        .withColumns(
            {
                **{c: F.col(f"last_{c}") for c in _CARRIED_VALUES},
                "carried_over": F.lit(True),
                "partition_error_code": F.lit(None).cast("int"),
                "high_watermark": F.lit(None).cast("bigint"),
                "diverging_epoch": F.lit(False),
            }
        )
    )
    return conform(listed_df, tables.FOLLOWER_FETCHES).unionByName(conform(carried, tables.FOLLOWER_FETCHES))


def build_follower_fetches(lines_df: DataFrame, topic_ids: dict[str, str]) -> DataFrame:
    """Classified lines -> the `follower_fetches` table (listed and carried-over rows)."""
    requests = lines_df.filter(
        (F.col("status") == "parsed") & (F.col("api_key_name") == "FETCH")
    ).transform(with_fetch_session)
    listed = explode_listed_partitions(requests, topic_ids)
    forgotten = explode_forgotten_partitions(requests, topic_ids)
    return with_carried_over_partitions(requests, listed, forgotten)
