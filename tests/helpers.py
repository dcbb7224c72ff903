"""Building input frames for transform tests, comparing frames, and the parsers as DataFrame transforms (the
ingest runs them inside its file reader's tasks, `ackreplay.storage.line_reader`; tests apply them to frames of
lines)."""

from __future__ import annotations

import chispa
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ackreplay.schemas.request_log import PARSED_ROW_SPARK_SCHEMA
from ackreplay.storage.line_reader import LINES_SCHEMA
from ackreplay.transforms.send_times import dump_lines_classified


def _without_metadata(df: DataFrame) -> DataFrame:
    return df.select(*[df[c].alias(c, metadata={}) for c in df.columns])


def assert_df_equality(df1: DataFrame, df2: DataFrame, **options) -> None:
    """chispa's comparison of two frames, column descriptions aside: the contracts' columns carry their
    description as metadata (Delta's column comments, `schemas/`), which a computed column does not keep and
    a test's expected frame does not have. The tests compare data; the descriptions have a test of their own."""
    chispa.assert_df_equality(_without_metadata(df1), _without_metadata(df2), **options)


def assert_approx_df_equality(df1: DataFrame, df2: DataFrame, precision: float, **options) -> None:
    """chispa's approximate comparison, column descriptions aside (`assert_df_equality`)."""
    chispa.assert_approx_df_equality(_without_metadata(df1), _without_metadata(df2), precision, **options)


TOPIC_ID = "9X2k7vQJTiGq5lq6w3xZ1A"
TOPIC_IDS = {f"c1/{TOPIC_ID}": "orders"}


def lines_frame(spark, lines: list[str], errors: dict[int, str] | None = None, broker_id: int = 1, cluster: str = "c1"):
    """A frame shaped like the line reader's output, line numbers from 1."""
    errors = errors or {}
    rows = [
        (cluster, broker_id, f"{cluster}/broker-{broker_id}/kafka-request.log", i, text, len(text), errors.get(i), None)
        for i, text in enumerate(lines, start=1)
    ]
    return spark.createDataFrame(rows, LINES_SCHEMA).withColumn("ingest_run_id", F.lit("test-run"))


# Real lines of the 4.1.1 lab trace (data/samples/trace-4.1.1-berlin, broker-1/kafka-request.log.gz): an
# acks=all PRODUCE (v13, topic id) and a follower FETCH (v18, replicaState), as Kafka's `[%d]` writes them.
REAL_TOPIC_IDS = {"c1/acR2urqsTD6AuWhQbIJKyg": "ackreplay-lab"}
REAL_PRODUCE = (
    '[2026-11-23 21:12:37,300] DEBUG Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":0,'
    '"requestApiVersion":13,"correlationId":8,"clientId":"lab-producer-acks-all","requestApiKeyName":"PRODUCE"},'
    '"request":{"transactionalId":null,"acks":-1,"timeoutMs":30000,"topicData":[{"topicId":"acR2urqsTD6AuWhQbIJKyg",'
    '"partitionData":[{"index":2,"recordsSizeInBytes":1232},{"index":3,"recordsSizeInBytes":1686}]}]},'
    '"response":{"responses":[{"topicId":"acR2urqsTD6AuWhQbIJKyg","partitionResponses":[{"index":3,"errorCode":0,'
    '"baseOffset":6540,"logAppendTimeMs":-1,"logStartOffset":0,"recordErrors":[],"errorMessage":null},{"index":2,'
    '"errorCode":0,"baseOffset":6194,"logAppendTimeMs":-1,"logStartOffset":0,"recordErrors":[],"errorMessage":null}]}],'
    '"throttleTimeMs":0},"connection":"127.0.0.1:39101-127.0.0.1:37656-0-3","totalTimeMs":30.423,'
    '"requestQueueTimeMs":0.295,"localTimeMs":1.949,"remoteTimeMs":27.99,"throttleTimeMs":0,'
    '"responseQueueTimeMs":0.078,"sendTimeMs":0.11,"securityProtocol":"PLAINTEXT","principal":"User:ANONYMOUS",'
    '"listener":"CLIENT","clientInformation":{"softwareName":"apache-kafka-java","softwareVersion":"4.1.1"}} '
    "(kafka.request.logger)"
)
REAL_FETCH = (
    '[2026-11-23 21:12:37,302] DEBUG Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":1,"r'
    'equestApiVersion":18,"correlationId":7920,"clientId":"broker-2-fetcher-0","requestApiKeyName":"FETCH"},"requ'
    'est":{"replicaState":{"replicaId":2,"replicaEpoch":32},"maxWaitMs":500,"minBytes":1,"maxBytes":10485760,"iso'
    'lationLevel":0,"sessionId":216719697,"sessionEpoch":7920,"topics":[{"topicId":"acR2urqsTD6AuWhQbIJKyg","part'
    'itions":[{"partition":2,"currentLeaderEpoch":0,"fetchOffset":6197,"lastFetchedEpoch":0,"logStartOffset":0,"p'
    'artitionMaxBytes":1048576},{"partition":3,"currentLeaderEpoch":0,"fetchOffset":6543,"lastFetchedEpoch":0,"lo'
    'gStartOffset":0,"partitionMaxBytes":1048576}]}],"forgottenTopicsData":[],"rackId":""},"response":{"throttleT'
    'imeMs":0,"errorCode":0,"sessionId":216719697,"responses":[{"topicId":"acR2urqsTD6AuWhQbIJKyg","partitions":['
    '{"partitionIndex":3,"errorCode":0,"highWatermark":6543,"lastStableOffset":6543,"logStartOffset":0,"abortedTr'
    'ansactions":null,"preferredReadReplica":-1,"recordsSizeInBytes":2067},{"partitionIndex":2,"errorCode":0,"hig'
    'hWatermark":6197,"lastStableOffset":6197,"logStartOffset":0,"abortedTransactions":null,"preferredReadReplica'
    '":-1,"recordsSizeInBytes":1442}]}]},"connection":"127.0.0.1:39102-127.0.0.1:37662-3-0","totalTimeMs":4.073,"'
    'requestQueueTimeMs":1.383,"localTimeMs":0.192,"remoteTimeMs":2.281,"throttleTimeMs":0,"responseQueueTimeMs":'
    '0.066,"sendTimeMs":0.148,"securityProtocol":"PLAINTEXT","principal":"User:ANONYMOUS","listener":"REPLICATION'
    '","clientInformation":{"softwareName":"unknown","softwareVersion":"unknown"}} (kafka.request.logger)'
)


def micros(line: str, digits: str) -> str:
    """`line` with its `,SSS` stamp written as log4j2's `%d{DEFAULT_MICROS}` does: `,SSS` + `digits`."""
    assert line[24] == "]"
    return line[:24] + digits + line[24:]


def parse_request_log_lines(lines_df: DataFrame, topic_ids: dict[str, str]) -> DataFrame:
    """Numbered lines (the line reader's columns) -> one `line` row per line with `status`, `detail`,
    `api_key_name`, plus the silver rows of its parsed PRODUCE or follower FETCH request.

    The work is `ackreplay.ingest.request_log_parser` in Arrow, run by `mapInArrow`; the ingest calls the
    same code inside its file reader task, so the text crosses into Python once. `topic_ids` maps
    "cluster/topicId" -> topic name (from topics.txt). `log_time_local` is zone-less; follow with
    `with_local_log_time` and `with_event_time`.
    """
    from ackreplay.ingest.request_log_parser import parsed_batches

    origin = [f for f in lines_df.schema.fields if f.name not in ("line", "line_bytes", "read_error")]
    schema = StructType([*origin, *PARSED_ROW_SPARK_SCHEMA.fields])
    origin_names = [f.name for f in origin]

    def parse(batches):
        for batch in batches:
            yield from parsed_batches(
                batch.select(origin_names),
                batch.column("line"),
                batch.column("line_bytes"),
                batch.column("read_error"),
                batch.column("cluster"),
                topic_ids,
            )

    return lines_df.mapInArrow(parse, schema)


def classify_dump_lines(lines: DataFrame) -> DataFrame:
    """Numbered lines of kafka-dump-log output -> every line with a status; parsed ones carry a batch's
    (topic, partition, base_offset, records, t_send).

    Each file's lines are classified in file order by `ackreplay.ingest.dump_log_parser` (the ingest does it in
    the task that reads the file, `line_reader.read_dump_logs`; this takes any DataFrame of lines).
    """
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from ackreplay.ingest.dump_log_parser import CLASSIFIED_SCHEMA

    def classify(table: pa.Table) -> pa.Table:
        table = table.sort_by("line_number")
        out = classify_file(table["line_number"], table["line"], table["read_error"])
        origin = {c: pa.repeat(table[c][0], out.num_rows) for c in ("cluster", "source_file")}  # a group: one file
        lines = pa.repeat(pa.scalar(1, pa.int64()), out.num_rows)  # a row per line (the ingest folds unused ones)
        return pa.table({**origin, **{name: out[name] for name in out.column_names}, "lines": lines})

    origin = [StructField("cluster", StringType()), StructField("source_file", StringType())]
    schema = StructType([*origin, *from_arrow_schema(CLASSIFIED_SCHEMA).fields, StructField("lines", LongType())])
    classified = (
        lines.select("cluster", "source_file", "line_number", "line", "read_error")
        .groupBy("source_file")
        .applyInArrow(classify, schema)
    )
    return dump_lines_classified(classified)


def classify_file(line_numbers, lines, read_errors) -> pa.Table:
    """One whole file's lines (in file order) classified, as the ingest's reading task does it in parts."""
    from ackreplay.ingest.dump_log_parser import CLASSIFIED_SCHEMA, DumpLogClassifier

    classifier = DumpLogClassifier()
    parts = [
        part for part in (classifier.feed(line_numbers, lines, read_errors), classifier.finish()) if part is not None
    ]
    if not parts:
        return CLASSIFIED_SCHEMA.empty_table()
    return pa.concat_tables(parts)
