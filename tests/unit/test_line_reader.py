"""The file reader, tested as plain Python (it runs inside mapInArrow on the executors)."""

import gzip

import pyarrow as pa

from ackreplay.storage.line_reader import READER_SCHEMA, iter_file_lines, read_lines, read_order


def _read(path, compression="none", chunk_bytes=64, max_line_bytes=1024):
    row = {"file_index": 0, "uri": str(path), "compression": compression}
    batches = list(iter_file_lines(row, chunk_bytes, max_line_bytes))
    return pa.Table.from_batches(batches, schema=READER_SCHEMA).to_pylist()


def test_lines_are_numbered_across_chunks(tmp_path):
    path = tmp_path / "kafka-request.log"
    lines = [f"[2026-11-20 13:00:00,{i:03d}] DEBUG line {i}" for i in range(50)]
    path.write_text("\n".join(lines) + "\n")
    rows = _read(path, chunk_bytes=100)
    assert [r["line"] for r in rows] == lines
    assert [r["line_number"] for r in rows] == list(range(1, 51))
    assert {r["read_error"] for r in rows} == {None}
    assert rows[0]["first_log_time"] == "2026-11-20 13:00:00,000"
    assert rows[3]["line_bytes"] == len(lines[3])


def test_last_line_without_newline_and_crlf(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a\r\nbb\r\nccc")
    rows = _read(path)
    assert [(r["line_number"], r["line"]) for r in rows] == [(1, "a"), (2, "bb"), (3, "ccc")]


def test_gzip_and_truncated_gzip(tmp_path):
    text = "".join(f"line {i}\n" for i in range(5000)).encode()
    whole = gzip.compress(text)
    full = tmp_path / "full.gz"
    full.write_bytes(whole)
    rows = _read(full, "gzip", chunk_bytes=4096)
    assert len(rows) == 5000 and rows[-1]["line"] == "line 4999"
    cut = tmp_path / "cut.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    rows = _read(cut, "gzip", chunk_bytes=4096)
    errors = [r for r in rows if r["read_error"]]
    assert len(errors) == 1
    assert errors[0] is rows[-1]
    assert "file unreadable after line" in errors[0]["read_error"]
    assert "Truncated" in errors[0]["read_error"]
    # every line before the cut is intact and numbered
    assert [r["line"] for r in rows[:-1]] == [f"line {i}" for i in range(len(rows) - 1)]


def test_oversized_line_is_kept_truncated_and_flagged(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"short\n" + b"x" * 5000 + b"\nafter\n")
    rows = _read(path, chunk_bytes=256, max_line_bytes=1024)
    assert [r["line_number"] for r in rows] == [1, 2, 3]
    assert rows[1]["line"] == "x" * 1024
    assert rows[1]["read_error"] == "line of 5000 bytes exceeds ingest.max_line_bytes=1024; first bytes kept"
    assert rows[2]["line"] == "after" and rows[2]["read_error"] is None


def test_invalid_utf8_is_flagged_not_fatal(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"good\n\xff\xfe garbage\nalso good\n")
    rows = _read(path)
    assert [r["read_error"] for r in rows] == [None, "invalid UTF-8 at byte 0", None]
    assert rows[1]["line"].endswith(" garbage")


def test_empty_file_has_no_lines(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"")
    assert _read(path) == []


def test_first_log_time_keeps_a_microsecond_stamp(tmp_path):
    # log4j2 %d{DEFAULT_MICROS} (Kafka 4.x): `,SSSSSS`; the first stamp is read whole, not cut to `,SSS`.
    path = tmp_path / "kafka-request.log.gz"
    lines = ["\tcontinuation", "[2026-11-20 13:00:00,000123] DEBUG line 1", "[2026-11-20 13:00:00,000456] DEBUG line 2"]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    rows = _read(path, "gzip")
    assert [r["line"] for r in rows] == lines
    assert {r["first_log_time"] for r in rows} == {"2026-11-20 13:00:00,000123"}


def test_files_are_dealt_to_tasks_by_size_in_the_order_spark_range_splits_them():
    sizes = [5, 100, 1, 40, 60, 3, 2]
    order = read_order(sizes, 3)  # Spark's range: ids [0, 2), [2, 4), [4, 7)
    assert sorted(order) == list(range(7))
    tasks = [order[0:2], order[2:4], order[4:7]]
    assert tasks == [[1, 2], [4, 6], [3, 0, 5]]  # 100, 60 and 40 first, then the least-loaded task with room
    assert [sum(sizes[i] for i in t) for t in tasks] == [101, 62, 48]
    assert read_order(sizes, 7) == [1, 4, 3, 0, 5, 6, 2]  # one file a task: biggest first


def test_every_line_of_many_files_is_read_once_by_fewer_tasks(spark, tmp_path):
    from ackreplay.storage.inputs import InputFile

    files = []
    for i in range(9):
        path = tmp_path / f"f{i}.log"
        path.write_text("".join(f"file {i} line {n}\n" for n in range(1, i + 2)))
        files.append(
            InputFile(
                cluster="c",
                broker_id=i,
                source_file=str(path),
                uri=str(path),
                compression="none",
                kind="server_log",
                size=path.stat().st_size,
                mtime_ns=0,
            )
        )
    lines = read_lines(spark, files, 1 << 20, 1 << 20)
    assert lines.rdd.getNumPartitions() == 2 * spark.sparkContext.defaultParallelism == 4
    rows = sorted((r["broker_id"], r["line_number"], r["line"]) for r in lines.collect())
    assert rows == [(i, n, f"file {i} line {n}") for i in range(9) for n in range(1, i + 2)]
