"""Column contract of silver `follower_leo_samples`: scraped replica LEO / fetcher lag samples.

Built from the JMX-exporter scrapes `<cluster>/metrics/broker-<id>.prom` (Prometheus text format, one
millisecond timestamp per sample; see transforms/metrics.py). Times are TIMESTAMP (UTC, microseconds),
durations DOUBLE milliseconds.
"""

from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, TimestampType

from ackreplay.schemas.tables import _LINE_ORIGIN, _schema

FOLLOWER_LEO_SAMPLES = _schema(
    ("cluster", StringType(), False),
    ("broker_id", IntegerType(), False),  # the scraped broker (from the file name broker-<id>.prom)
    # kafka_log_log_logendoffset: LEO of broker_id's replica (a follower's own LEO when broker_id follows);
    # kafka_server_fetcherlagmetrics_consumerlag: on a follower, leader HW (last fetch response) - fetch offset
    ("metric", StringType(), False),
    ("topic", StringType(), False),
    ("partition", IntegerType(), False),
    ("client_id", StringType(), True),  # clientId label (consumerlag: ReplicaFetcherThread-<fetcherId>-<leaderId>)
    ("leader_id", IntegerType(), True),  # the leader fetched from, from clientId; null when it does not say
    ("value", LongType(), False),
    ("t_sample", TimestampType(), False),  # the sample's own ms timestamp, else the scrape time the file marks
    # The observed scrape interval of the file (median gap between consecutive scrape times): the time
    # resolution of these timelines, far coarser than the request log's.
    ("granularity_ms", DoubleType(), True),
    # Time since the previous sample of the same series in the file (null for the first): a gap much
    # longer than granularity_ms is a missed scrape (paused or restarting broker).
    ("sample_gap_ms", DoubleType(), True),
    *_LINE_ORIGIN,
)
