"""The whole pipeline under spark-submit on a real Spark standalone cluster (a master and a two-core worker
on 127.0.0.1, separate JVMs started from the pyspark installation), its input and its lakehouse on an S3-compatible
object store (moto's server on 127.0.0.1, tests/object_store.py), gives the tables of a local run.

That is where a scheduled job's data lives: the driver lists the input folder and commits every Delta table through
Hadoop's S3A connector (`--packages`, the settings of README "Running on object storage"), the executors read the
logs from the bucket with pyarrow's S3 client, and the replay writes `produce_replay` with Spark's writer. The
lakehouse is then downloaded and every table compared with the test session's local run of the same trace; a user's
`ackreplay run` on a local Spark then reruns the same input against the same bucket and finds nothing new.

The code reaches the driver and the executors only as the built wheel passed with `--py-files`: both run
a Python that has the dependencies but not the project (the venv's editable install is hidden from it),
so a module that was not shipped fails the run instead of being imported from the checkout.

Why it takes minutes (CI's longest test): a master, a worker, its executor and the spark-submit driver
are four JVMs on two cores, and the driver runs the whole pipeline on the 3.9.1 trace (without the
data-quality checks: `cluster_conf`) on the executor's two cores. The local side is the session's shared
run of the same trace. One run covers the cluster and the object store: as two runs (a local `ackreplay run`
from and to the bucket was a module of its own) they cost a cold JVM's whole pipeline more, about 150-270 s of
the suite's worker time.
The cost is the stages' Spark jobs and Delta commits, not the input: a generated trace 25 times
smaller took as long (622 s against 597 s under spark-submit). Its tasks are sized for two cores
(`cluster_conf`): about 1,100 executor tasks instead of 6,300, 4,800 of which were Delta log replays
in Delta's default 50 partitions. One worker with two cores rather than two with one: the second
executor was a second cold JVM compiling the same code (measured alone on this 2-core machine,
2026-11-28: 346 s and 443 CPU-seconds with two workers, 275 s and 334 CPU-seconds with one; the
driver on C2 instead of C1: 304 s, 464 CPU-seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import venv
from pathlib import Path

import pyspark
import pytest
import yaml

from ackreplay.config import DELTA_VERSION
from ackreplay.storage.lakehouse import TABLES
from tests.child_runs import NOT_COMPARED, assert_same_table, run_cli
from tests.conftest import CHILD_JVM_OPTIONS, SAMPLE_CONF, SMALL_DATA_CONF
from tests.object_store import HADOOP_VERSION, S3A_PACKAGES, hadoop_version, object_store

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "data/samples/trace-3.9.1-utc"
CONF = REPO / "conf/cluster.yaml"
SPARK_HOME = Path(pyspark.__file__).parent
SPARK_MINOR = ".".join(pyspark.__version__.split(".")[:2])
DELTA_PACKAGE = f"io.delta:delta-spark_{SPARK_MINOR}_2.13:{DELTA_VERSION}"
WORKERS = 1
CORES_PER_WORKER = 2
# A guard against a hung run, not a speed check: a shared 2-core machine under load needed > 20 min.
SUBMIT_TIMEOUT_S = 3600


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(condition, what: str, timeout_s: float, logs: list[Path]):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(1)
    tails = "\n".join(f"--- {p}:\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
    raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s\n{tails}")


def _master_state(ui_port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as response:
            return json.load(response)
    except OSError:
        return None


def _env(**extra: str) -> dict[str, str]:
    """The environment of the cluster's processes: no PYTHONPATH leaking the checkout into them."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def _python_without_project(root: Path) -> Path:
    """A venv whose site-packages are this venv's (pyspark, pandas, ...) without the editable ackreplay.

    A path line in a .pth file adds that folder without running the .pth files inside it, so the
    editable install's finder is not installed and `import ackreplay` works only from shipped code.
    """
    venv.create(root, with_pip=False, symlinks=True)
    site_packages = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    (next(root.glob("lib/python*/site-packages")) / "ackreplay_deps.pth").write_text(site_packages + "\n")
    python = root / "bin/python"
    probe = subprocess.run(
        [python, "-c", "import pandas, pyspark, ackreplay"],
        capture_output=True,
        text=True,
        cwd=root,
        env=_env(),
        check=False,
    )
    assert "No module named 'ackreplay'" in probe.stderr, probe.stderr
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(out)],
        check=True,
    )
    (built,) = out.glob("ackreplay-*.whl")
    # Spark puts --py-files on the executors' sys.path only for .zip/.egg/.jar names; a pure-Python
    # wheel is a zip of the packages, so ship it under a .zip name (see README, "Running on a cluster").
    shipped = out / "ackreplay.zip"
    shutil.copyfile(built, shipped)
    return shipped


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory):
    """spark://127.0.0.1:<port> with its worker(s); every JVM is stopped at teardown."""
    root = tmp_path_factory.mktemp("standalone")
    port, ui_port = _free_port(), _free_port()
    env = _env(SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(root), SPARK_DAEMON_JAVA_OPTS=CHILD_JVM_OPTIONS)
    spark_class = str(SPARK_HOME / "bin/spark-class")
    daemons: list[subprocess.Popen] = []
    logs: list[Path] = []

    def start(name: str, *args: str) -> None:
        log_path = root / f"{name}.log"
        logs.append(log_path)
        with open(log_path, "wb") as log_file:
            daemons.append(
                subprocess.Popen([spark_class, *args], env=env, stdout=log_file, stderr=subprocess.STDOUT, cwd=root)
            )

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
        )
        _wait_for(lambda: _master_state(ui_port), "Spark master", 120, logs)
        url = f"spark://127.0.0.1:{port}"
        for i in range(WORKERS):
            work_dir = root / f"worker-{i}"
            work_dir.mkdir()
            start(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(CORES_PER_WORKER),
                "--memory",
                "3g",
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(work_dir),
            )
        _wait_for(
            lambda: (_master_state(ui_port) or {}).get("aliveworkers", 0) >= WORKERS, "the Spark workers", 120, logs
        )
        yield url, root, logs
    finally:
        for process in reversed(daemons):
            process.terminate()
        for process in reversed(daemons):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    pytest.importorskip("boto3")
    assert hadoop_version() == HADOOP_VERSION, "pyspark's Hadoop changed: update tests/object_store.py's versions"
    with object_store(tmp_path_factory.mktemp("moto") / "server.log") as store:
        store.client.create_bucket(Bucket="logs")
        store.client.create_bucket(Bucket="lake")
        yield store


INPUT_URI = f"s3a://logs/traces/{TRACE.name}"
LAKEHOUSE_URI = "s3a://lake/ackreplay"


@pytest.fixture(scope="module")
def cluster_run(standalone_master, wheel, cluster_conf, store, tmp_path_factory):
    """The trace uploaded, jobs/run.py under spark-submit from and to the bucket, and the lakehouse downloaded:
    (what the driver printed, the local copy of the lakehouse, the bucket's object keys, the run's working folder)."""
    url, root, logs = standalone_master
    store.upload_folder(TRACE, "logs", f"traces/{TRACE.name}")
    python = _python_without_project(root / "python-without-project")
    env = _env(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    command = [
        str(SPARK_HOME / "bin/spark-submit"),
        "--master",
        url,
        "--packages",
        ",".join([DELTA_PACKAGE, *S3A_PACKAGES]),
        "--py-files",
        str(wheel),
        "--driver-memory",
        "1g",
        "--executor-memory",
        "1g",
        "--executor-cores",
        str(CORES_PER_WORKER),
        "--total-executor-cores",
        str(WORKERS * CORES_PER_WORKER),
        "--conf",
        "spark.ui.enabled=false",
        # four cold JVMs on two cores: C1 only (tests/conftest.py, CHILD_JVM_OPTIONS)
        "--conf",
        f"spark.driver.extraJavaOptions={CHILD_JVM_OPTIONS}",
        "--conf",
        f"spark.executor.extraJavaOptions={CHILD_JVM_OPTIONS}",
        "--conf",
        "spark.driver.host=127.0.0.1",
    ]
    # The S3A settings on the command line: the driver's Hadoop configuration is built before the job reads its conf.
    for key, value in store.s3a_conf().items():
        command += ["--conf", f"{key}={value}"]
    command += [str(REPO / "jobs/run.py"), "--conf", str(cluster_conf), "--input", INPUT_URI]
    command += ["--lakehouse", LAKEHOUSE_URI]
    # Run from an empty folder: nothing of the checkout is importable from the working directory.
    workdir = root / "submit"
    workdir.mkdir()
    stdout_path, stderr_path = root / "submit.out", root / "submit.err"
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        returncode = subprocess.run(
            command, env=env, cwd=workdir, stdout=stdout, stderr=stderr, timeout=SUBMIT_TIMEOUT_S, check=False
        ).returncode
    printed, errors = stdout_path.read_text(errors="replace"), stderr_path.read_text(errors="replace")
    executor_logs = "\n".join(
        f"--- {p}:\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(root.glob("worker-*/app-*/*/stderr"))
    )
    assert returncode == 0, f"spark-submit failed:\n{printed[-4000:]}\n{errors[-8000:]}\n{executor_logs}"
    assert "done in" in printed, printed
    # The application really ran on the worker(s): each one started an executor for it.
    assert len(list(root.glob("worker-*/app-*/*"))) >= WORKERS, executor_logs
    downloaded = tmp_path_factory.mktemp("cluster_run") / "downloaded"
    keys = store.download_bucket("lake", downloaded)
    return printed, str(downloaded / "ackreplay"), keys, workdir


@pytest.fixture(scope="module")
def cluster_conf(tmp_path_factory) -> Path:
    """conf/cluster.yaml with the policies, gold window and cluster settings of conf/local.yaml, so the
    cluster's tables are comparable with the session's local run of the same trace (tests/conftest.py)."""
    conf = yaml.safe_load(CONF.read_text())
    local = yaml.safe_load(SAMPLE_CONF.read_text())
    conf["replay"] = {**conf["replay"], **{k: local["replay"][k] for k in ("quorum_sizes", "lag_ms", "strict_min_isr")}}
    for section in ("gold", "clusters", "ingest", "report"):
        conf[section] = local[section]
    # The data-quality checks are Spark queries the driver plans (Great Expectations on the DataFrames):
    # they ship no project code to the executors, and under spark-submit they were 30% of this run (231 of
    # 770 s). They run on the local session's run of the same trace instead
    # (test_samples.py::test_every_data_quality_check_passes_on_a_real_trace).
    conf["quality"] = {**conf["quality"], "enabled": False}
    # Tasks sized for this cluster's two executor cores, as conf/local.yaml sizes them for a laptop:
    # shuffles in 2 x its cores (conf/cluster.yaml's rule), Delta's log replay in one partition per core
    # instead of Delta's default 50 (each commit and table read replays a log: most of the run's tasks).
    conf["spark"]["conf"] = {
        **conf["spark"]["conf"],
        "spark.sql.shuffle.partitions": 2 * WORKERS * CORES_PER_WORKER,
        "spark.databricks.delta.snapshotPartitions": WORKERS * CORES_PER_WORKER,
        **SMALL_DATA_CONF,  # a test's data is tiny (tests/conftest.py)
    }
    path = tmp_path_factory.mktemp("conf") / "cluster.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


@pytest.fixture(scope="module")
def local_lakehouse(sample_run) -> str:
    """The same trace, run on the local test session with conf/local.yaml (the session's shared run)."""
    return sample_run(TRACE, gold=True).lakehouse


def test_the_job_reads_and_writes_the_object_store_and_says_where(cluster_run):
    printed, _, keys, workdir = cluster_run
    assert f"lakehouse: {LAKEHOUSE_URI}" in printed, printed
    # the console's first line of the ingest: every file of the layout listed from the bucket
    assert "inputs: 16 files listed; 16 to ingest (16 new, 0 changed)" in printed, printed
    assert f"report: {LAKEHOUSE_URI}/report/report.html" in printed, printed
    assert "ackreplay/report/report.html" in keys
    # nothing was written to the working folder as a local path named like a URI
    assert not [p.name for p in workdir.iterdir() if p.name.startswith("s3")]


@pytest.mark.parametrize("table", sorted(set(TABLES) - set(NOT_COMPARED)))
def test_each_table_equals_the_local_runs(spark, cluster_run, local_lakehouse, table):
    _, lakehouse, _, _ = cluster_run
    assert_same_table(spark, lakehouse, local_lakehouse, table)


def test_a_users_run_on_a_local_spark_finds_nothing_new_in_the_bucket(cluster_run, cluster_conf, store, tmp_path):
    """README "Running on object storage" as a user types it: `ackreplay run` with the S3A connector among the
    conf's packages, on the input and the lakehouse the cluster job used: the ledger on the store says every file
    was ingested, so nothing is read again and no table is rebuilt."""
    local_conf = store.local_conf(cluster_conf, tmp_path / "s3.yaml")
    run = run_cli("run", "--input", INPUT_URI, "--lakehouse", LAKEHOUSE_URI, "--conf", str(local_conf), cwd=tmp_path)
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-8000:]}"
    assert "inputs: 16 files listed; 0 to ingest (0 new, 0 changed), 16 unchanged" in run.stdout, run.stdout
    assert "report: unchanged (no gold table was rebuilt)" in run.stdout, run.stdout
