"""Column contract of silver `follower_leo_samples`: scraped replica LEO / fetcher lag samples.

Built from the JMX-exporter scrapes `<cluster>/metrics/broker-<id>.prom` (Prometheus text format, one
millisecond timestamp per sample; see transforms/metrics.py). Times are TIMESTAMP (UTC, microseconds),
durations DOUBLE milliseconds.
"""

from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, TimestampType

from ackreplay.schemas.tables import _LINE_ORIGIN, _schema

FOLLOWER_LEO_SAMPLES = _schema(
    ("cluster", StringType(), False, "Cluster of the scraped broker"),
    ("broker_id", IntegerType(), False, "The scraped broker (from the file name broker-<id>.prom)"),
    (
        "metric",
        StringType(),
        False,
        "kafka_log_log_logendoffset (LEO of broker_id's replica) or kafka_server_fetcherlagmetrics_consumerlag (on a "
        "follower: leader HW - fetch offset)",
    ),
    ("topic", StringType(), False, "Topic label of the sample"),
    ("partition", IntegerType(), False, "Partition label of the sample"),
    (
        "client_id",
        StringType(),
        True,
        "clientId label (consumerlag: ReplicaFetcherThread-<fetcherId>-<leaderId>); null when the sample has none",
    ),
    (
        "leader_id",
        IntegerType(),
        True,
        "The leader fetched from, read from client_id; null when it does not say",
    ),
    ("value", LongType(), False, "The sample's value: an offset (logendoffset) or a lag in messages (consumerlag)"),
    (
        "t_sample",
        TimestampType(),
        False,
        "The sample's own millisecond timestamp, else the scrape time the file marks",
    ),
    # the time resolution of these timelines, far coarser than the request log's
    (
        "granularity_ms",
        DoubleType(),
        True,
        "The file's observed scrape interval: the median gap between consecutive scrape times, ms; null when it has "
        "one scrape",
    ),
    # a gap much longer than granularity_ms is a missed scrape (paused or restarting broker)
    (
        "sample_gap_ms",
        DoubleType(),
        True,
        "Time since the previous sample of the same series in the file, ms; null for the first",
    ),
    *_LINE_ORIGIN,
)
