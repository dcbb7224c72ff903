"""`kafka-topics --describe` output (topics.txt) -> the `partitions` table.

    Topic: orders	TopicId: 9X2k7vQJTiGq5lq6w3xZ1A	PartitionCount: 6	ReplicationFactor: 3	Configs: min.insync.replicas=2
        Topic: orders	Partition: 0	Leader: 1	Replicas: 1,2,3	Isr: 1,2,3	Elr: 	LastKnownElr:

`TopicId:` (2.8+) and `Elr:`/`LastKnownElr:` (3.7+/4.x) are optional; old tools print no space after the colon.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ackreplay.schemas import tables
from ackreplay.transforms.common import conform

_HEADER = (
    r"^Topic:\s*(\S+)\s+(?:TopicId:\s*(\S+)\s+)?PartitionCount:\s*(\d+)\s+"
    r"ReplicationFactor:\s*(\d+)\s+Configs:\s*(.*?)\s*$"
)
_PARTITION = (
    r"^\s+Topic:\s*(\S+)\s+Partition:\s*(\d+)\s+Leader:\s*(-?\d+|none)\s+"
    r"Replicas:\s*([\d,]*)\s+Isr:\s*([\d,]*)(?:\s+\S.*)?$"
)


def _int_list(text: Column) -> Column:
    return F.when(text == "", F.array().cast("array<int>")).otherwise(F.split(text, ",").cast("array<int>"))


def _optional_list(line: Column, field: str) -> Column:
    value = F.regexp_extract(line, rf"\s{field}:\s*([\d,]*)", 1)
    return F.when(line.rlike(rf"\s{field}:"), _int_list(value))


def with_topics_line_kind(lines_df: DataFrame) -> DataFrame:
    """`line_kind`: header | partition | blank | unrecognised."""
    line = F.col("line")
    return lines_df.withColumn(
        "line_kind",
        F.when(F.col("read_error").isNotNull(), F.lit("unrecognised"))
        .when(F.trim(line) == "", F.lit("blank"))
        .when(line.rlike(_HEADER), F.lit("header"))
        .when(line.rlike(_PARTITION), F.lit("partition"))
        .otherwise(F.lit("unrecognised")),
    )


def build_partitions(lines_df: DataFrame, default_min_isr: dict[str, int]) -> DataFrame:
    """Classified topics.txt lines -> one row per partition (`partitions` contract).

    `default_min_isr` maps cluster -> broker-level min.insync.replicas for topics without an override.
    """
    line = F.col("line")
    headers = lines_df.filter(F.col("line_kind") == "header").select(
        "cluster",
        F.regexp_extract(line, _HEADER, 1).alias("topic"),
        F.nullif(F.regexp_extract(line, _HEADER, 2), F.lit("")).alias("topic_id"),
        F.regexp_extract(line, _HEADER, 4).cast("int").alias("replication_factor"),
        F.when(
            F.regexp_extract(line, _HEADER, 5) != "",
            F.str_to_map(F.regexp_extract(line, _HEADER, 5), F.lit(","), F.lit("=")),
        ).alias("topic_configs"),
    )
    partitions = lines_df.filter(F.col("line_kind") == "partition").select(
        "cluster",
        F.regexp_extract(line, _PARTITION, 1).alias("topic"),
        F.regexp_extract(line, _PARTITION, 2).cast("int").alias("partition"),
        F.when(F.regexp_extract(line, _PARTITION, 3) == "none", F.lit(-1))
        .otherwise(F.regexp_extract(line, _PARTITION, 3).cast("int"))
        .alias("leader_at_describe"),
        _int_list(F.regexp_extract(line, _PARTITION, 4)).alias("replicas"),
        _int_list(F.regexp_extract(line, _PARTITION, 5)).alias("isr_at_describe"),
        _optional_list(line, "Elr").alias("elr_at_describe"),
        "source_file",
        "line_number",
        "ingest_run_id",
    )
    defaults = F.create_map(*[x for k, v in sorted(default_min_isr.items()) for x in (F.lit(k), F.lit(v))])
    topic_min_isr = F.try_element_at(F.col("topic_configs"), F.lit("min.insync.replicas")).try_cast("int")
    joined = partitions.join(headers, on=["cluster", "topic"], how="left").withColumns(
        {
            "replication_factor": F.coalesce(F.col("replication_factor"), F.size("replicas")),
            "min_insync_replicas": F.coalesce(
                topic_min_isr,
                F.try_element_at(defaults, F.col("cluster")) if default_min_isr else F.lit(None),
                F.lit(1),
            ),
            "min_insync_replicas_source": F.when(topic_min_isr.isNotNull(), F.lit("topic")).otherwise(
                F.lit("cluster_default")
            ),
        }
    )
    return conform(joined, tables.PARTITIONS)
