"""Follower FETCH rows -> `follower_fetches`: the follower LEO as the leader learns it, per partition.

Replica fetchers use incremental fetch sessions (KIP-227): a request lists only partitions whose fetch
position changed, and the leader keeps serving the others at their cached `fetchOffset`. So a
partition absent from an incremental request keeps the offset of its latest listing in the same
session (recorded on that listing as `carried_requests`/`carried_until`); a new session (epoch 0)
lists everything again.
Requests are ordered within a session by `sessionEpoch`, which the client increments by one per
request, so the order does not depend on log timestamps.

The input is the request-log parser's output (`ackreplay.ingest.request_log_parser`): rows of kind `fetch`
(one per listed partition), `fetch_request` (one per request of an incremental session) and
`forgotten` (one per partition a request removes from its session), with `t_log`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ackreplay.schemas import tables
from ackreplay.transforms.common import conform
from ackreplay.transforms.request_log import with_request_times

_SESSION_KEY = ["cluster", "broker_id", "follower_id", "session_id"]
_PARTITION_KEY = [*_SESSION_KEY, "topic", "partition"]
_FETCH_KINDS = ("fetch", "fetch_request", "forgotten")
_TO_SESSION_END = 2**31 - 1


def with_carried_over_span(fetch_rows_df: DataFrame) -> DataFrame:
    """Each listed partition plus how long the leader kept using its offset without it being re-sent.

    `carried_requests` counts the later requests of the same session that omitted the partition (the
    leader kept the listed `fetchOffset` for them); `carried_until` is the `t_dequeue` of the last of
    them (the listing's own `t_dequeue` when none). The span ends at the next listing of the partition,
    when a request forgets it, or with the session. Encoding carry-over as a span instead of one row per
    omitted partition keeps the table linear in the log size: a fetch session can hold hundreds of idle
    partitions, each omitted from every request.

    One shuffle (by session): a window over each (session, partition) finds the next listing or
    forget, then a window over the session, in epoch order, finds the last request up to it.
    """
    kind = F.col("row_kind")
    epoch = F.col("session_epoch")
    in_session = F.coalesce(F.col("session_id") != 0, F.lit(False))
    outside = fetch_rows_df.filter((kind == "fetch") & ~in_session).withColumns(
        {"carried_requests": F.lit(0), "carried_until": F.col("t_dequeue")}
    )
    events = fetch_rows_df.filter(in_session).repartition(*_SESSION_KEY)
    # Listings and forgets of one partition, a listing before a forget of the same epoch.
    next_event = F.lead(epoch).over(
        Window.partitionBy(*_PARTITION_KEY).orderBy(epoch, (kind == "forgotten").alias("forgets"))
    )
    probes = (
        events.withColumn("carried_through_epoch", F.when(kind == "fetch", next_event - 1))
        .filter(kind != "forgotten")
        .withColumn(
            "probe_epoch",
            F.when(kind == "fetch", F.coalesce(F.col("carried_through_epoch"), F.lit(_TO_SESSION_END))).otherwise(
                epoch
            ),
        )
    )
    # Requests sort before a listing probing the same epoch; of two requests with one epoch (a
    # duplicated file, a restart) the later time counts.
    up_to_probe = (
        Window.partitionBy(*_SESSION_KEY)
        .orderBy("probe_epoch", (kind == "fetch").alias("is_listing"), "t_dequeue")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    is_request = kind == "fetch_request"
    spans = (
        probes.withColumns(
            {
                "last_request_epoch": F.last(F.when(is_request, epoch), ignorenulls=True).over(up_to_probe),
                "last_request_time": F.last(F.when(is_request, F.col("t_dequeue")), ignorenulls=True).over(up_to_probe),
            }
        )
        .filter(kind == "fetch")
        .withColumns(
            {
                "carried_requests": F.greatest(
                    F.coalesce(F.col("carried_through_epoch"), F.col("last_request_epoch"), epoch) - epoch, F.lit(0)
                ),
                "carried_until": F.when(
                    F.coalesce(F.col("last_request_epoch") > epoch, F.lit(False)), F.col("last_request_time")
                ).otherwise(F.col("t_dequeue")),
            }
        )
    )
    columns = [field.name for field in tables.FOLLOWER_FETCHES.fields]
    return conform(spans.select(*columns).unionByName(outside.select(*columns)), tables.FOLLOWER_FETCHES)


def build_follower_fetches(rows_df: DataFrame) -> DataFrame:
    """Parsed request-log rows (with `t_log`) -> the `follower_fetches` table (one row per listed partition)."""
    fetch_rows = rows_df.filter(F.col("row_kind").isin(*_FETCH_KINDS)).transform(with_request_times)
    # Only the contract's columns go through the shuffle (the parser's rows are wide).
    spans = ("carried_requests", "carried_until")
    columns = ["row_kind", *[f.name for f in tables.FOLLOWER_FETCHES.fields if f.name not in spans]]
    return with_carried_over_span(fetch_rows.select(*columns))
