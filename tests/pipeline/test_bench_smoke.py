"""Every benchmark command runs at a tiny size and prints its table, so the benchmarks cannot rot.

The commands without Spark run as their own process, as `make bench-*` runs them (`python -m ...`).
Those with Spark run their `main` in the test session (`ackreplay.session.command_session` uses the
active session and leaves it running): a child process would start a JVM of its own each, and a cold
JVM made up most of each such test's minute. `bench.e2e_bench` runs `ackreplay run` as its own child
either way. The figures themselves are measured by hand (docs/benchmarks.md), never here.
"""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import CHILD_JVM_OPTIONS, TEST_SPARK_CONF
from tests.helpers import assert_df_equality


@pytest.fixture(scope="module")
def small_conf(tmp_path_factory) -> str:
    """conf/local.yaml with the test session's Spark settings (tests/conftest.py): a bench run in-process
    applies them to the shared session, a child process gets a 2 GB local[2] driver (C1-compiled)."""
    conf = yaml.safe_load(Path("conf/local.yaml").read_text())
    conf["spark"]["master"] = "local[2]"
    conf["spark"]["conf"] = {**TEST_SPARK_CONF, "spark.driver.extraJavaOptions": CHILD_JVM_OPTIONS}
    path = tmp_path_factory.mktemp("conf") / "bench.yaml"
    path.write_text(yaml.safe_dump(conf))
    return str(path)


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def _run_in_session(main, *args: str) -> str:
    """A bench command's `main(argv)` in this process (the test session's Spark): what it printed."""
    printed = io.StringIO()
    with redirect_stdout(printed):
        main(list(args))
    return printed.getvalue()


def _table_rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]


@pytest.fixture(scope="module")
def replay_bench_run(spark, small_conf, tmp_path_factory) -> tuple[str, Path]:
    """One `bench.replay_bench` run (ackreplay twice, both peers): its table, and its work folder for the floor."""
    from bench import replay_bench

    workdir = tmp_path_factory.mktemp("replay-bench")
    out = _run_in_session(
        replay_bench.main, "--produces", "2000", "--partitions", "2", "--runs", "2", "--conf", small_conf,
        "--workdir", str(workdir),
    )  # fmt: skip
    return out, workdir


def test_replay_bench_times_ackreplay_and_both_peers(replay_bench_run):
    rows = _table_rows(replay_bench_run[0])
    assert [r[0].split(" ")[0] for r in rows[1:]] == ["ackreplay", "ackreplay", "DuckDB", "DuckDB", "pandas"]
    assert rows[1][3] == "1" and all(float(r[3]) > 0 for r in rows[2:])


def test_the_two_peers_compute_the_same_acks(tmp_path):
    from bench.replay_bench import duckdb_acks, generate, pandas_acks

    generate(5000, 4, tmp_path, hot_share=0.5)
    key = ["partition", "base_offset"]
    duck = duckdb_acks(tmp_path).sort_values(key, kind="stable").reset_index(drop=True)
    pand = pandas_acks(tmp_path).sort_values(key, kind="stable").reset_index(drop=True)
    assert len(duck) == len(pand) == 5000
    np.testing.assert_array_equal(duck["base_offset"].to_numpy(), pand["base_offset"].to_numpy())
    for col in ("t_ack_all", "t_ack_quorum2"):
        np.testing.assert_array_equal(duck[col].to_numpy(dtype="float64", na_value=np.inf), pand[col].to_numpy())
    assert np.isfinite(pand["t_ack_all"]).mean() > 0.99


def test_the_duckdb_peer_writes_the_rows_ackreplay_writes(spark, tmp_path):
    # The peer that writes produce_replay's rows implements the same semantics for the bench data's shape:
    # on that data its rows equal ackreplay's, every column (run ids aside) of every policy.
    from ackreplay.config import load_config
    from ackreplay.replay.stage import run_replay
    from ackreplay.schemas.replay import PRODUCE_REPLAY
    from ackreplay.storage.lakehouse import read_table, table_path
    from ackreplay.transforms.common import conform
    from bench.replay_bench import duckdb_produce_replay, generate

    data, lakehouse = tmp_path / "data", str(tmp_path / "lakehouse")
    generate(3000, 3, data)
    for name in ("produce_requests", "follower_fetches", "partitions"):
        spark.read.parquet(str(data / f"{name}.parquet")).write.format("delta").save(table_path(lakehouse, name))
    config = load_config("conf/local.yaml")
    config = config.model_copy(update={"replay": config.replay.model_copy(update={"lag_ms": []})})
    run_replay(spark, config, lakehouse, ["bench"], "bench")
    # produces before a partition's first follower FETCH are outside its (fetch-derived) leader epoch
    replayed = duckdb_produce_replay(data, tmp_path / "duckdb.parquet")
    assert 2990 < replayed < 3000
    theirs = conform(spark.read.parquet(str(tmp_path / "duckdb.parquet")), PRODUCE_REPLAY)
    ours = conform(read_table(spark, lakehouse, "produce_replay"), PRODUCE_REPLAY)
    assert ours.count() == 4 * replayed
    assert_df_equality(ours, theirs, ignore_row_order=True, ignore_nullable=True)  # nullability: Delta vs Parquet


def test_replay_bench_hot_partition_peers(small_conf, tmp_path):
    out = _run(
        "bench.replay_bench",
        "--produces",
        "4000",
        "--partitions",
        "4",
        "--hot-partition",
        "--skip-ackreplay",
        "--conf",
        small_conf,
        "--workdir",
        str(tmp_path),
    )
    rows = _table_rows(out)
    assert "half on partition 0" in rows[0][0]
    assert [r[0].split(" ")[0] for r in rows[1:]] == ["DuckDB", "DuckDB", "pandas"]  # counted peer, rows peer, pandas


def test_replay_bench_from_generator(spark, small_conf, tmp_path):
    """`--from-generator`: a synthetic trace through the real ingest, then the replay stage. About a minute: that
    ingest writes every bronze and silver table of a cluster (a pipeline run's fixed cost, not its 2,000 produces)."""
    from bench import replay_bench

    out = _run_in_session(
        replay_bench.main,
        "--produces",
        "2000",
        "--partitions",
        "2",
        "--from-generator",
        "--skip-peers",
        "--conf",
        small_conf,
        "--workdir",
        str(tmp_path),
    )
    assert "synthetic cluster trace, ingested" in out
    assert _table_rows(out)[1][0].startswith("ackreplay")


def test_scaling_bench(small_conf, tmp_path):
    out = _run(
        "bench.scaling_bench",
        "--sizes",
        "2000",
        "4000",
        "--partitions",
        "2",
        "--skip-ackreplay",
        "--conf",
        small_conf,
        "--workdir",
        str(tmp_path),
    )
    rows = _table_rows(out)
    summary = rows[next(i for i, r in enumerate(rows) if r[0] == "contender") + 1 :]
    assert [r[0] for r in summary] == ["duckdb", "duckdb_rows", "pandas"] and summary[0][-1].startswith("1.00 / ")
    assert sum(r[0].startswith("replay of") for r in rows) == 2  # one table per size as well


def test_e2e_bench(small_conf, tmp_path):
    """About a minute and a half: the bench times `ackreplay run` as a child process, so a cold JVM runs a
    whole pipeline (every stage's Spark jobs and Delta commits; the 2,000 produces cost little of it)."""
    # data-quality checks off: they are tested in test_dq.py; here the command and its table are under test
    conf = yaml.safe_load(Path(small_conf).read_text())
    conf.setdefault("quality", {})["enabled"] = False
    quiet_conf = tmp_path / "no-checks.yaml"
    quiet_conf.write_text(yaml.safe_dump(conf))
    out = _run("bench.e2e_bench", "--produces", "2000", "--conf", str(quiet_conf), "--workdir", str(tmp_path / "work"))
    rows = _table_rows(out)
    assert rows[0][0].startswith("ackreplay run on 2,000 produces")
    assert rows[1][0] == "ingest + replay + gold + report" and rows[1][1].endswith(" s")


def test_ingest_bench(spark, small_conf, tmp_path):
    from bench import ingest_bench

    out = _run_in_session(ingest_bench.main, "--gigabytes", "0.002", "--conf", small_conf, "--workdir", str(tmp_path))
    assert "MB/s" in out
    # The DuckDB peer parsed the same files into as many bronze, PRODUCE and follower FETCH rows.
    (peer_rows,) = [r[1] for r in _table_rows(out) if r[0] == "rows: bronze, PRODUCE, follower FETCH"]
    peer, ours = peer_rows.rstrip(")").split(" (ackreplay: ")
    assert peer == ours and int(peer.split(", ")[0].replace(",", "")) > 1000


def test_ingest_floor(tmp_path):
    out = _run("bench.ingest_floor", "--gigabytes", "0.002", "--workdir", str(tmp_path))
    rows = _table_rows(out)
    assert [r[0] for r in rows[1:]] == [
        "read and split lines",
        "classify and parse",
        "bronze columns to Parquet (pyarrow, snappy)",
        "all three",
    ]
    # every line of the generated files read, counted here without the reader
    logs = sorted((tmp_path / "ingest-0.002GB").rglob("kafka-request.log*"))
    lines = sum(len(p.read_bytes().splitlines()) for p in logs)
    assert len(logs) == 12 and f"12 files, 2 MB of text, {lines:,} lines;" in out


def test_synth_generator_command(tmp_path):
    out = _run("ackreplay.synth", "--out", str(tmp_path), "--produces", "1000", "--long-stalls", "0", "--seed", "5")
    assert "1,000 produces" in out and (tmp_path / "synth" / "topics.txt").exists()
    again = subprocess.run(
        [sys.executable, "-m", "ackreplay.synth", "--out", str(tmp_path), "--produces", "1000"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 2 and "--force" in again.stderr


def test_replay_floor(spark, replay_bench_run, small_conf):
    from bench import replay_floor

    out = _run_in_session(replay_floor.main, "--work", str(replay_bench_run[1] / "replay-2000-2"), "--conf", small_conf)
    passes = [r[0].split(":")[0].split(",")[0] for r in _table_rows(out)[1:]]
    assert passes == [
        "scan",
        "shuffle",
        "cogroup",
        "write long",
        "write wide",
        "replay stage",
        "DuckDB ASOF JOIN",
        "DuckDB ASOF JOIN",
    ]
