"""`ackreplay run --remote sc://…` on a Spark Connect server gives the tables of a classic session's run.

The module starts Spark's own Connect service (`org.apache.spark.sql.connect.service.SparkConnectService`, in
pyspark's jars; what `SparkConnectServer`'s main starts) inside the test session's JVM, which has Delta's jars and the
Delta extension and the test session's settings, on 127.0.0.1 (tests/conftest.py `CONNECT_SERVICE_CONF`). The
JVM is the server only: `ackreplay run` runs in a process of its own as a Spark Connect client (no JVM in it), on
the 3.9.1 trace with conf/local.yaml and every data-quality check on (Great Expectations on Connect DataFrames), in
a Connect session of its own, and every table is compared with the session's local run of the same trace
(tests/conftest.py). The lakehouse is a local folder both the server and the client see. The session's JVM rather
than a server JVM of its own: that one would compile the whole pipeline's code again (docs/development.md has the
times).

Why it takes minutes: the client runs the whole pipeline.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ackreplay.storage.lakehouse import TABLES
from tests.child_runs import NOT_COMPARED, assert_same_table, run_cli
from tests.conftest import REPO, SAMPLE_CONF

pytest.importorskip("grpc", reason="Spark Connect's client needs pyspark[connect]'s grpcio")

TRACE = REPO / "data/samples/trace-3.9.1-utc"


@pytest.fixture(scope="module")
def connect_server(spark):
    """sc://127.0.0.1:<port>, the session's JVM serving Spark Connect until the module ends."""
    jvm = spark._jvm
    service = getattr(getattr(jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"), "MODULE$")
    service.start(spark.sparkContext._jsc.sc())
    try:
        yield f"sc://127.0.0.1:{service.localPort()}"
    finally:
        service.stop(jvm.scala.Option.empty(), jvm.scala.Option.empty())


@pytest.fixture(scope="module")
def connect_run(connect_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("connect-run")
    lakehouse = str(root / "lakehouse")
    run = run_cli(
        "run", "--remote", connect_server, "--input", str(TRACE), "--lakehouse", lakehouse, "--conf", str(SAMPLE_CONF),
        cwd=root,
    )  # fmt: skip
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-8000:]}"
    return run, lakehouse


@pytest.fixture(scope="module")
def local_lakehouse(sample_run) -> str:
    return sample_run(TRACE, gold=True).lakehouse


def test_the_run_on_spark_connect_checks_replays_and_reports(connect_run):
    run, lakehouse = connect_run
    printed = run.stdout
    assert "data quality after ingest" in printed and "0 blocking failures" in printed, printed
    assert "lab-3.9.1: n=26,334, 99.46% within 2 ms, 0 not acked, P999 123.8 ms replayed vs 120.1 ms observed  ok" in (
        printed
    )
    # Spark's writer (the replay's own needs a filesystem shared with the server's workers); the trace has no
    # NOT_ENOUGH_REPLICAS answer, so no rejection line
    assert "NOT_ENOUGH_REPLICAS" not in printed
    assert f"report: {lakehouse}/report/report.html" in printed
    assert Path(lakehouse, "report/report.html").stat().st_size > 0


@pytest.mark.parametrize("table", sorted(set(TABLES) - set(NOT_COMPARED)))
def test_each_table_equals_the_classic_sessions(spark, connect_run, local_lakehouse, table):
    _, lakehouse = connect_run
    assert_same_table(spark, lakehouse, local_lakehouse, table)


def test_a_rerun_on_spark_connect_finds_nothing_new(connect_server, connect_run, tmp_path):
    _, lakehouse = connect_run
    run = run_cli("run", "--remote", connect_server, "--input", str(TRACE), "--lakehouse", lakehouse, "--conf",
               str(SAMPLE_CONF), cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "inputs: 16 files listed; 0 to ingest (0 new, 0 changed), 16 unchanged" in run.stdout, run.stdout
    assert "report: unchanged (no gold table was rebuilt)" in run.stdout, run.stdout


def test_export_on_spark_connect_is_refused_with_the_way_out(connect_server, connect_run, tmp_path):
    _, lakehouse = connect_run
    run = run_cli("export", "policy_summary", "--format", "csv", "--out", str(tmp_path / "p.csv"), "--remote",
               connect_server, "--lakehouse", lakehouse, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "error: export moves and checks files through the driver's Hadoop filesystem" in run.stderr, run.stderr
    assert not (tmp_path / "p.csv").exists()


def test_the_notebook_runs_on_spark_connect(connect_server, connect_run, tmp_path, monkeypatch):
    """notebooks/explore.ipynb with SPARK_REMOTE set, on a copy of the Connect run's lakehouse (its report removed):
    the kernel's session is a Connect client (ackreplay.session honours SPARK_REMOTE as pyspark does), and every
    cell runs, the decision and the report included (test_notebook.py checks the same cells on a classic session)."""
    import nbformat
    from nbclient import NotebookClient

    _, lakehouse = connect_run
    copy = tmp_path / "lakehouse"
    shutil.copytree(lakehouse, copy, ignore=shutil.ignore_patterns("report", "logs"))
    notebook = REPO / "notebooks/explore.ipynb"
    for name, value in {"SPARK_REMOTE": connect_server, "ACKREPLAY_LAKEHOUSE": str(copy),
                        "ACKREPLAY_INPUT": str(TRACE), "ACKREPLAY_CONF": str(SAMPLE_CONF)}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
    ).execute()
    printed = "".join(
        o.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for o in cell.outputs
        if o.output_type == "stream"
    )
    assert "running the pipeline" not in printed
    assert "nothing meets the target; closest: acks=all@lag=3000 (P999 6,735.0 ms > 1,000 ms)" in printed, printed
    assert (copy / "report/report.html").stat().st_size > 0
