"""Send times of batches: kafka-dump-log output and client batch logs -> batch_send_times (chispa)."""

from datetime import date, datetime, timedelta

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from ackreplay.schemas.tables import BATCH_SEND_TIMES
from ackreplay.storage.line_reader import LINES_SCHEMA
from ackreplay.transforms.send_times import (
    CREATED_AFTER_REQUEST,
    LOG_APPEND_TIME,
    NOT_IN_TOPIC,
    batch_send_times,
    classify_client_lines,
    topic_batch_extents,
    topic_send_times,
    with_truncation,
)
from tests.helpers import assert_df_equality, classify_dump_lines

_BATCH = (
    "baseOffset: {base} lastOffset: {last} count: {count} baseSequence: 0 lastSequence: 1 producerId: 0"
    " producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false"
    " deleteHorizonMs: OptionalLong.empty position: 0 {kind}: {ms} size: 87 magic: 2 compresscodec: none"
    " crc: 1 isvalid: true"
)
MS = 1795372263006
DUMP = [
    "baseOffset: 0 lastOffset: 0 count: 1 position: 0 CreateTime: 1795372263000 size: 70",  # 1: no Dumping line yet
    "Dumping /var/kafka/data/orders-3/00000000000000000000.log",  # 2
    "Log starting offset: 0",  # 3
    _BATCH.format(base=0, last=1, count=2, kind="CreateTime", ms=MS + 6),  # 4: max timestamp of the batch
    f"| offset: 0 CreateTime: {MS} keySize: -1 valueSize: 5 sequence: 0 headerKeys: []",  # 5
    f"| offset: 1 CreateTime: {MS + 6} keySize: 3 valueSize: 5 sequence: 1 headerKeys: []",  # 6: a key
    # 7: one record, no record line; appended by the leader of epoch 4
    _BATCH.format(base=2, last=2, count=1, kind="CreateTime", ms=MS + 20).replace("LeaderEpoch: 0", "LeaderEpoch: 4"),
    _BATCH.format(base=3, last=4, count=2, kind="CreateTime", ms=MS + 30),  # 8: two records, no record line
    "Dumping /var/kafka/data/my-topic-10/00000000000000000000.log",  # 9
    _BATCH.format(base=7, last=7, count=1, kind="LogAppendTime", ms=MS + 40),  # 10
    _BATCH.format(base=8, last=8, count=1, kind="CreateTime", ms=1795372263),  # 11: seconds
    _BATCH.format(base=9, last=9, count=1, kind="CreateTime", ms=MS + 50),  # 12
]
CLIENT = [
    "client_id,acks,partition,base_offset,records,value_bytes,first_send_us,ack_us",  # 1
    "lab-producer,all,5,2209,2,1221,1795372263006295,1795372263435751",  # 2
    "lab-producer,all,5,x,2,1221,1795372263006295,1795372263435751",  # 3
    "lab-producer,all,5,2211,2,1221",  # 4
    "",  # 5
]


def _frame(spark, lines, source_file, errors=None):
    errors = errors or {}
    rows = [("c1", None, source_file, i, text, len(text), errors.get(i), None) for i, text in enumerate(lines, start=1)]
    return spark.createDataFrame(rows, LINES_SCHEMA)


def test_dump_log_lines_give_each_batch_its_first_records_create_time(spark):
    classified = classify_dump_lines(_frame(spark, DUMP, "c1/create-times/dump.txt", errors={12: "invalid UTF-8"}))
    statuses = [tuple(r) for r in classified.select("line_number", "status", "detail").orderBy("line_number").collect()]
    assert statuses == [
        (1, "quarantined", "a batch before any 'Dumping <segment>' line: partition unknown"),
        (2, "unused", "other"),
        (3, "unused", "other"),
        (4, "parsed", None),
        (5, "unused", "record"),
        (6, "unused", "record"),
        (7, "parsed", None),
        (
            8,
            "quarantined",
            "a batch of several records without its first record's line: run kafka-dump-log with --deep-iteration",
        ),
        (9, "unused", "other"),
        (10, "quarantined", "timestamps are LogAppendTime, not the producer's CreateTime"),
        (11, "quarantined", "CreateTime outside 2000..2100 (not epoch milliseconds)"),
        (12, "quarantined", "invalid UTF-8"),
    ]
    expected = spark.createDataFrame(
        [
            ("c1", "orders", None, 3, 0, 2, 0, datetime(2026, 11, 22, 18, 31, 3, 6000), "create_time",
             [(0, 1), (6, 1)], 1, "c1/create-times/dump.txt", 4, date(2026, 11, 22), "run"),
            # one record and no record line: its key not seen
            ("c1", "orders", None, 3, 2, 1, 4, datetime(2026, 11, 22, 18, 31, 3, 26000), "create_time", None, None,
             "c1/create-times/dump.txt", 7, date(2026, 11, 22), "run"),
        ],
        BATCH_SEND_TIMES,
    )  # fmt: skip
    assert_df_equality(batch_send_times(classified, "run"), expected, ignore_row_order=True, ignore_nullable=True)


def test_client_batch_logs_give_the_send_time_of_each_batch(spark):
    classified = classify_client_lines(_frame(spark, CLIENT, "c1/client/batches-lab.csv"))
    statuses = [tuple(r) for r in classified.select("line_number", "status", "detail").orderBy("line_number").collect()]
    assert statuses == [
        (1, "unused", "header"),
        (2, "parsed", None),
        (3, "quarantined", "partition, base_offset or client_id missing or not a number"),
        (4, "quarantined", "field count differs from the header's"),
        (5, "unused", "blank"),
    ]
    row = batch_send_times(classified, "run").select("topic", "client_id", "partition", "base_offset", "t_send").first()
    assert tuple(row) == (None, "lab-producer", 5, 2209, datetime(2026, 11, 22, 18, 31, 3, 6295))


def test_a_client_log_without_the_columns_it_needs_is_quarantined_whole(spark):
    lines = ["client_id,partition,offset", "a,1,5", "b,2,6"]
    classified = classify_client_lines(_frame(spark, lines, "c1/client/batches-x.csv"))
    reasons = classified.where(F.col("status") == "quarantined").select("detail").distinct().collect()
    assert [r[0] for r in reasons] == ["the file's header lacks base_offset, first_send_us"]
    assert classified.where(F.col("status") == "quarantined").count() == 2


def test_a_dump_classified_in_pieces_equals_it_classified_whole():
    """The reader hands a file over in batches of lines: cut anywhere (between a batch line and its first
    record, inside a batch's records, after a Dumping line), the classification is the whole file's."""
    import pyarrow as pa

    from ackreplay.ingest.dump_log_parser import DumpLogClassifier
    from tests.helpers import classify_file

    numbers = pa.array(range(1, len(DUMP) + 1), pa.int64())
    text = pa.array(DUMP, pa.string())
    errors = pa.array([None] * 11 + ["invalid UTF-8"], pa.string())
    whole = classify_file(numbers, text, errors)
    assert whole.column("status").to_pylist()[3:6] == ["parsed", "unused", "unused"]
    for cuts in [(k,) for k in range(1, len(DUMP))] + [(3, 4, 5), (1, 8, 9)]:
        classifier, parts, start = DumpLogClassifier(), [], 0
        for end in (*cuts, len(DUMP)):
            parts.append(classifier.feed(numbers[start:end], text[start:end], errors[start:end]))
            start = end
        parts.append(classifier.finish())
        pieces = pa.concat_tables([p for p in parts if p is not None])
        assert pieces.equals(whole), cuts


def test_the_reader_folds_unused_lines_into_a_row_per_detail():
    """What the reading task hands to Spark: the parsed and quarantined lines as they are, the unused ones
    (no table keeps them) as one row per detail with how many lines it stands for and the last one's number."""
    import pyarrow as pa

    from ackreplay.ingest.dump_log_parser import FOLDED_SCHEMA, fold_unused_lines
    from tests.helpers import classify_file

    numbers = pa.array(range(1, len(DUMP) + 1), pa.int64())
    errors = pa.array([None] * 11 + ["invalid UTF-8"], pa.string())
    whole = classify_file(numbers, pa.array(DUMP, pa.string()), errors)
    folded = fold_unused_lines(whole)
    assert folded.schema == FOLDED_SCHEMA
    rows = sorted((r["line_number"], r["status"], r["detail"], r["lines"]) for r in folded.to_pylist())
    assert rows == [
        (1, "quarantined", "a batch before any 'Dumping <segment>' line: partition unknown", 1),
        (4, "parsed", None, 1),
        (6, "unused", "record", 2),  # lines 5 and 6
        (7, "parsed", None, 1),
        (
            8,
            "quarantined",
            "a batch of several records without its first record's line: run kafka-dump-log with --deep-iteration",
            1,
        ),
        (9, "unused", "other", 3),  # lines 2, 3 and 9
        (10, "quarantined", "timestamps are LogAppendTime, not the producer's CreateTime", 1),
        (11, "quarantined", "CreateTime outside 2000..2100 (not epoch milliseconds)", 1),
        (12, "quarantined", "invalid UTF-8", 1),
    ]
    kept = folded.filter(pa.compute.not_equal(folded["status"], "unused")).drop_columns(["lines"])
    assert kept.equals(whole.filter(pa.compute.not_equal(whole["status"], "unused")))  # the other rows unchanged
    assert fold_unused_lines(whole.slice(0, 0)).num_rows == 0


def test_send_times_read_from_the_topic_take_each_batchs_records_up_to_the_next_base_offset(spark):
    """Spark's Kafka source returns records, the request log each batch's base offset: a batch's records are
    those up to the next batch the logs know. Partition 0: three batches with every record, one whose range
    holds records created after its request (a produce the logs lack: counts unknown), and the last one
    (next base offset unknown: its first record only); then a LogAppendTime topic, a first record gone, and a
    record at a base offset created after the request reached the broker."""
    t0 = datetime(2026, 11, 22, 18, 31, 3)

    def at(ms):
        return t0 + timedelta(milliseconds=ms)

    produces = spark.createDataFrame(
        [("c1", "orders", 0, 0, 0), ("c1", "orders", 0, 3, 0), ("c1", "orders", 0, 5, 0), ("c1", "orders", 0, 9, 0),
         ("c1", "orders", 0, -1, 6), ("c1", "orders", 1, 0, 0), ("c1", "orders", 2, 4, 0), ("c1", "orders", 3, 0, 0)],
        "cluster string, topic string, partition int, base_offset bigint, error_code int",
    )  # fmt: skip
    batches = spark.createDataFrame(
        [("c1", "orders", 0, 0, at(5), "r.log", 1), ("c1", "orders", 0, 3, at(15), "r.log", 2),
         ("c1", "orders", 0, 5, at(30), "r.log", 3), ("c1", "orders", 0, 9, at(90), "r.log", 5),
         ("c1", "orders", 1, 0, at(5), "r.log", 6), ("c1", "orders", 2, 4, at(5), "r.log", 7),
         ("c1", "orders", 3, 0, at(5), "r.log", 8)],
        "cluster string, topic string, partition int, base_offset bigint, t_start timestamp, source_file string,"
        " line_number bigint",
    )  # fmt: skip
    records = spark.createDataFrame(
        [("c1", "orders", 0, o, at(ms), 0, o == 4) for o, ms in
         [(0, 0), (1, 0), (2, 4), (3, 10), (4, 12), (5, 20), (6, 21), (7, 60), (8, 61), (9, 80), (10, 95)]]
        + [("c1", "orders", 1, 0, at(1), 1, False), ("c1", "orders", 2, 6, at(1), 0, False),
           ("c1", "orders", 3, 0, at(7), 0, False)],
        "cluster string, topic string, partition int, offset bigint, timestamp timestamp, timestampType int,"
        " keyed boolean",
    )  # fmt: skip
    rows = topic_send_times(records, topic_batch_extents(produces), batches, "run")
    expected = spark.createDataFrame(
        [
            # keyed_records: of the records counted (offset 4 alone has a key)
            ("c1", "orders", None, 0, 0, 3, None, at(0), "topic", [(0, 2), (4, 1)], 0, "r.log", 1, t0.date(), "run",
             None),
            ("c1", "orders", None, 0, 3, 2, None, at(10), "topic", [(0, 1), (2, 1)], 1, "r.log", 2, t0.date(), "run",
             None),
            ("c1", "orders", None, 0, 5, None, None, at(20), "topic", None, None, "r.log", 3, t0.date(), "run", None),
            ("c1", "orders", None, 0, 9, None, None, at(80), "topic", None, None, "r.log", 5, t0.date(), "run", None),
            ("c1", "orders", None, 1, 0, None, None, at(1), "topic", None, None, "r.log", 6, t0.date(), "run",
             LOG_APPEND_TIME),
            ("c1", "orders", None, 2, 4, None, None, None, "topic", None, None, "r.log", 7, None, "run", NOT_IN_TOPIC),
            ("c1", "orders", None, 3, 0, None, None, at(7), "topic", None, None, "r.log", 8, t0.date(), "run",
             CREATED_AFTER_REQUEST),
        ],
        StructType([StructField(f.name, f.dataType) for f in BATCH_SEND_TIMES.fields] + [StructField("problem", StringType())]),
    )  # fmt: skip
    assert_df_equality(rows, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_batch_is_cut_when_a_later_leader_epoch_starts_at_or_before_its_offset(spark):
    """Epoch 0 on broker 1, epoch 1 on broker 2 from offset 10, epoch 2 on broker 1 again from offset 15: a
    batch is its broker's latest epoch's, and cut when a later epoch starts at or before its offset (a paused
    leader appending after the next epoch began included); a broker with no epoch is not judged."""
    t0 = datetime(2026, 11, 22, 18, 0, 0)
    epochs = spark.createDataFrame(
        [("c1", "orders", 0, 1, 0, 0, t0), ("c1", "orders", 0, 2, 1, 10, t0 + timedelta(seconds=10)),
         ("c1", "orders", 0, 1, 2, 15, t0 + timedelta(seconds=20))],
        "cluster string, topic string, partition int, broker_id int, leader_epoch int, epoch_start_offset bigint,"
        " t_log timestamp",
    )  # fmt: skip
    produces = spark.createDataFrame(
        [("c1", "orders", 0, broker, t0 + timedelta(seconds=s), base) for broker, s, base in
         [(1, 1, 5), (1, 5, 12), (1, 11, 14), (2, 12, 11), (2, 21, 16), (1, 25, 15), (3, 1, 3)]],
        "cluster string, topic string, partition int, broker_id int, t_local_done timestamp, base_offset bigint",
    )  # fmt: skip
    rows = with_truncation(produces, epochs).select("broker_id", "base_offset", "truncated", "leader_epoch")
    assert sorted(tuple(r) for r in rows.collect()) == [
        (1, 5, False, 0),
        (1, 12, True, 0),
        (1, 14, True, 0),
        (1, 15, False, 2),
        (2, 11, False, 1),
        (2, 16, True, 1),
        (3, 3, None, None),
    ]
