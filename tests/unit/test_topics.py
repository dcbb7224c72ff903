"""topics.txt (kafka-topics --describe) -> partitions (chispa)."""

from pyspark.sql import functions as F

from ackreplay.transforms.topics import build_partitions, with_topics_line_kind
from tests.helpers import assert_df_equality, lines_frame

DESCRIBE = [
    # 3.9 / 4.x tool: TopicId and Elr fields
    "Topic: orders\tTopicId: 9X2k7vQJTiGq5lq6w3xZ1A\tPartitionCount: 2\tReplicationFactor: 3\t"
    "Configs: min.insync.replicas=2,cleanup.policy=compact,delete",
    "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2\tElr: 3\tLastKnownElr: ",
    "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: \tElr: \tLastKnownElr: ",
    "",
    # older tool: no TopicId, no Elr, no topic override of min.insync.replicas
    "Topic: logs\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: ",
    "\tTopic: logs\tPartition: 0\tLeader: 2\tReplicas: 2,1\tIsr: 2,1",
    "Error while executing topic command : Timed out waiting for a node assignment.",
]


def test_describe_output_becomes_partitions(spark):
    lines = with_topics_line_kind(lines_frame(spark, DESCRIBE).withColumn("source_file", F.lit("c1/topics.txt")))
    kinds = [r["line_kind"] for r in lines.orderBy("line_number").collect()]
    assert kinds == ["header", "partition", "partition", "blank", "header", "partition", "unrecognised"]
    out = build_partitions(lines, {"c1": 1})
    actual = out.select(
        "topic",
        "topic_id",
        "partition",
        "replicas",
        "replication_factor",
        "min_insync_replicas",
        "min_insync_replicas_source",
        "leader_at_describe",
        "isr_at_describe",
        "elr_at_describe",
        "line_number",
    )
    expected = spark.createDataFrame(
        [
            ("orders", "9X2k7vQJTiGq5lq6w3xZ1A", 0, [1, 2, 3], 3, 2, "topic", 1, [1, 2], [3], 2),
            ("orders", "9X2k7vQJTiGq5lq6w3xZ1A", 1, [2, 3, 1], 3, 2, "topic", -1, [], [], 3),
            ("logs", None, 0, [2, 1], 2, 1, "cluster_default", 2, [2, 1], None, 6),
        ],
        "topic string, topic_id string, partition int, replicas array<int>, replication_factor int, "
        "min_insync_replicas int, min_insync_replicas_source string, leader_at_describe int, "
        "isr_at_describe array<int>, elr_at_describe array<int>, line_number bigint",
    )
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
    configs = out.filter("topic = 'orders'").select("topic_configs").first()["topic_configs"]
    assert configs["min.insync.replicas"] == "2"
