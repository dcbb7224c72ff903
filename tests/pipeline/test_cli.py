"""The console command: config errors before Spark, export of a table to CSV and Parquet."""

from __future__ import annotations

import csv
import json

from ackreplay.cli import main
from ackreplay.config import parse_config
from ackreplay.ingest import run_ingest
from tests.pipeline.test_ingest_stage import input_dir  # noqa: F401  (fixture)


def test_bad_conf_exits_2_naming_the_key(tmp_path, capsys):
    conf = tmp_path / "bad.yaml"
    conf.write_text("spark:\n  mastr: local[1]\n")
    assert main(["ingest", "--input", str(tmp_path), "--conf", str(conf)]) == 2
    assert "unknown key 'spark.mastr'" in capsys.readouterr().err


def test_export_csv_and_parquet(spark, input_dir, tmp_path):  # noqa: F811
    lakehouse = str(tmp_path / "lakehouse")
    run_ingest(spark, parse_config({}), str(input_dir), lakehouse)
    out_csv = tmp_path / "partitions_csv"
    assert main(["export", "partitions", "--lakehouse", lakehouse, "--format", "csv", "--out", str(out_csv)]) == 0
    rows = [row for part in sorted(out_csv.glob("part-*.csv")) for row in csv.DictReader(part.open())]
    assert len(rows) == 1
    assert rows[0]["topic"] == "orders" and json.loads(rows[0]["replicas"]) == [1, 2, 3]
    out_parquet = tmp_path / "produce_parquet"
    assert main(["export", "produce_requests", "--lakehouse", lakehouse, "--format", "parquet", "--out", str(out_parquet)]) == 0
    assert spark.read.parquet(str(out_parquet)).count() == 18
    assert main(["export", "no_such_table", "--lakehouse", lakehouse, "--format", "csv", "--out", str(tmp_path / "x")]) == 2
