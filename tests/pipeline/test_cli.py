"""The console command: config errors before Spark, export of a table to CSV and Parquet (one file by default,
never over what a user owns)."""

from __future__ import annotations

import csv
import json

import pandas as pd

from ackreplay.cli import main
from ackreplay.config import parse_config
from ackreplay.ingest.stage import run_ingest
from ackreplay.storage.lakehouse import read_table
from tests.pipeline.test_ingest_stage import input_dir  # noqa: F401  (fixture)


def test_bad_conf_exits_2_naming_the_key(tmp_path, capsys):
    conf = tmp_path / "bad.yaml"
    conf.write_text("spark:\n  mastr: local[1]\n")
    assert main(["ingest", "--input", str(tmp_path), "--conf", str(conf)]) == 2
    assert "unknown key 'spark.mastr'" in capsys.readouterr().err


def test_a_request_log_outside_its_broker_folder_stops_the_run_naming_it(spark, input_dir, tmp_path, capsys):  # noqa: F811
    (input_dir / "c1" / "broker-2" / "kafka-request.log.2026-11-20-12").rename(input_dir / "c1" / "kafka-request.log")
    lakehouse = str(tmp_path / "lakehouse")
    assert main(["ingest", "--input", str(input_dir), "--lakehouse", lakehouse]) == 2
    assert "are not where it reads them:\n  c1/kafka-request.log\n" in capsys.readouterr().err
    # checked to be writable, nothing written but the command's log
    assert [p.name for p in (tmp_path / "lakehouse").iterdir()] == ["logs"]
    assert main(["ingest", "--input", str(input_dir), "--lakehouse", lakehouse, "--allow-skipped"]) == 0
    printed = capsys.readouterr().out
    assert "1 files named like inputs but outside the layout, not read: c1/kafka-request.log" in printed
    assert "1 other files outside the input layout not read, e.g. README.txt" in printed


def test_a_lakehouse_that_is_a_file_stops_the_run_before_any_work(spark, input_dir, tmp_path, capsys):  # noqa: F811
    lakehouse = tmp_path / "lakehouse"
    lakehouse.write_text("not a folder")
    assert main(["run", "--input", str(input_dir), "--lakehouse", str(lakehouse)]) == 2
    assert f"error: lakehouse {lakehouse} is a file, not a folder" in capsys.readouterr().err
    assert lakehouse.read_text() == "not a folder"
    below_a_file = lakehouse / "sub"  # the filesystem refuses to create a folder under a file
    assert main(["ingest", "--input", str(input_dir), "--lakehouse", str(below_a_file)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: lakehouse {below_a_file} is not writable: ") and len(error.splitlines()) == 1


def test_export_writes_one_file_pandas_reads_with_every_quote_and_microsecond(spark, input_dir, tmp_path):  # noqa: F811
    lakehouse = str(tmp_path / "lakehouse")
    run_ingest(spark, parse_config({}), str(input_dir), lakehouse)
    lines = tmp_path / "lines.csv"
    assert main(["export", "request_log_lines", "--lakehouse", lakehouse, "--format", "csv", "--out", str(lines)]) == 0
    assert lines.is_file() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    exported = {(r["source_file"], int(r["line_number"])): r for r in csv.DictReader(lines.open(newline=""))}
    table = read_table(spark, lakehouse, "request_log_lines").select("source_file", "line_number", "line").collect()
    assert len(exported) == len(table) == 41  # input_dir: 21 + 11 lines, and 9 on broker 2 (two of them broken)
    # the JSON bodies' quotes survive Python's csv reader (RFC 4180 doubling, not Spark's default backslash)
    differ = [
        (r["line"], exported[(r["source_file"], r["line_number"])]["line"])
        for r in table
        if exported[(r["source_file"], r["line_number"])]["line"] != (r["line"] or "")
    ]
    assert differ == []
    assert sum('"' in r["line"] for r in table if r["line"]) == 40  # every line but the binary garbage
    from_pandas = pd.read_csv(lines)
    quoted = {r["line"] for r in table if r["line"] and '"' in r["line"]}  # (pandas' parser drops a NUL byte)
    assert len(from_pandas) == 41 and {line for line in from_pandas["line"].dropna() if '"' in line} == quoted

    produce = tmp_path / "produce.csv"
    assert main(["export", "produce_requests", "--lakehouse", lakehouse, "--format", "csv", "--out", str(produce)]) == 0
    rows = list(csv.DictReader(produce.open(newline="")))
    starts = sorted(r["t_start"] for r in rows)
    # t_start = log time - totalTimeMs (fractional ms): microseconds, which Spark's default format would cut
    expected = sorted(r["t_start"] for r in read_table(spark, lakehouse, "produce_requests").collect())
    assert starts == [t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for t in expected] and len(starts) == 18
    assert starts[0] == "2026-11-20T11:59:59.997820Z"
    parts = tmp_path / "partitions.csv"
    assert main(["export", "partitions", "--lakehouse", lakehouse, "--format", "csv", "--out", str(parts)]) == 0
    (row,) = csv.DictReader(parts.open(newline=""))
    assert row["topic"] == "orders" and json.loads(row["replicas"]) == [1, 2, 3]

    parquet = tmp_path / "produce.parquet"
    assert (
        main(["export", "produce_requests", "--lakehouse", lakehouse, "--format", "parquet", "--out", str(parquet)])
        == 0
    )
    assert parquet.is_file() and len(pd.read_parquet(parquet)) == 18
    assert (
        main(["export", "no_such_table", "--lakehouse", lakehouse, "--format", "csv", "--out", str(tmp_path / "x")])
        == 2
    )


def test_export_never_deletes_what_it_did_not_write(spark, input_dir, tmp_path, capsys):  # noqa: F811
    lakehouse = str(tmp_path / "lakehouse")
    run_ingest(spark, parse_config({}), str(input_dir), lakehouse)

    def export(out, *flags):
        return main(["export", "partitions", "--lakehouse", lakehouse, "--format", "csv", "--out", str(out), *flags])

    mine = tmp_path / "mine.csv"
    mine.write_text("a user's own file\n")
    assert export(mine) == 2
    assert mine.read_text() == "a user's own file\n"
    assert f"{mine} exists: pass --replace" in capsys.readouterr().err
    assert export(mine, "--replace") == 0
    assert mine.read_text().startswith("cluster,")

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    assert export(folder) == 2  # a folder is not a file name
    assert export(folder, "--parts") == 2
    assert export(folder, "--parts", "--replace") == 2
    assert "holds files an export did not write (notes.txt)" in capsys.readouterr().err
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]

    spark_parts = tmp_path / "parts"
    assert export(spark_parts, "--parts") == 0
    assert len(list(spark_parts.glob("part-*.csv"))) >= 1
    assert export(spark_parts, "--parts") == 2  # not empty
    assert export(spark_parts, "--parts", "--replace") == 0  # an earlier export's part files: replaced
    rows = [r for part in sorted(spark_parts.glob("part-*.csv")) for r in csv.DictReader(part.open(newline=""))]
    assert [r["topic"] for r in rows] == ["orders"]
    assert not [p for p in tmp_path.iterdir() if ".ackreplay-export-" in p.name]
