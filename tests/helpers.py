"""Building input frames for transform tests."""

from __future__ import annotations

from pyspark.sql import functions as F

from ackreplay.line_reader import LINES_DDL

TOPIC_ID = "9X2k7vQJTiGq5lq6w3xZ1A"
TOPIC_IDS = {f"c1/{TOPIC_ID}": "orders"}


def lines_frame(spark, lines: list[str], errors: dict[int, str] | None = None, broker_id: int = 1, cluster: str = "c1"):
    """A frame shaped like the line reader's output, line numbers from 1."""
    errors = errors or {}
    rows = [
        (cluster, broker_id, f"{cluster}/broker-{broker_id}/kafka-request.log", i, text, len(text), errors.get(i), None)
        for i, text in enumerate(lines, start=1)
    ]
    return spark.createDataFrame(rows, LINES_DDL).withColumn("ingest_run_id", F.lit("test-run"))
