"""`ackreplay run` with its input and its lakehouse on an S3-compatible object store gives the tables of a local run.

An S3 server (moto's, from PyPI) runs on 127.0.0.1 for the module; the 3.9.1 trace is uploaded to one bucket and
`ackreplay run --input s3a://… --lakehouse s3a://…` runs as a user would run it, in a process of its own, with
conf/local.yaml plus the S3A block of README "Running on object storage" (Hadoop's S3A connector from Maven
Central for the lakehouse; the input readers use pyarrow's S3 client with the same settings). The lakehouse is
then downloaded and its tables compared with the session's local run of the same trace (tests/conftest.py).

Why it takes minutes: a cold JVM runs the whole pipeline (the data-quality checks off: they run on the local run,
test_samples.py), and every Delta commit is a few requests to the S3 server.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
import yaml

from ackreplay.storage.lakehouse import TABLES
from tests.child_runs import NOT_COMPARED, assert_same_table, run_cli
from tests.conftest import CHILD_JVM_OPTIONS, REPO, SAMPLE_CONF, TEST_SPARK_CONF

boto3 = pytest.importorskip("boto3")

TRACE = REPO / "data/samples/trace-3.9.1-utc"
ACCESS_KEY, SECRET_KEY, REGION = "ackreplay-test", "ackreplay-test-secret", "us-east-1"
# Hadoop's S3A connector for the Hadoop pyspark ships (hadoop-client-api-<version>.jar), with the two AWS SDK
# modules it uses instead of the SDK's 600 MB bundle (the versions hadoop-project's pom pins for that release).
HADOOP_VERSION = "3.4.2"
AWS_SDK_VERSION = "2.29.52"
S3A_PACKAGES = [
    f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}",
    f"software.amazon.awssdk:s3:{AWS_SDK_VERSION}",
    f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK_VERSION}",
]


def _hadoop_version() -> str:
    jars = Path(pyspark.__file__).parent / "jars"
    (jar,) = jars.glob("hadoop-client-api-*.jar")
    return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """moto's S3 server on a free port of 127.0.0.1: its endpoint, stopped with the module."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("moto") / "server.log"
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            client.list_buckets()
            break
        except Exception:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"moto's S3 server did not start:\n{log.read_text()[-2000:]}") from None
            time.sleep(0.3)
    try:
        yield endpoint, client
    finally:
        server.terminate()
        server.wait(timeout=30)


def s3a_conf(endpoint: str) -> dict:
    """README "Running on object storage": the S3A settings, for a server on plain HTTP with path-style URLs."""
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": REGION,
        "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
        "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.jars.excludes": "software.amazon.awssdk:bundle",
    }


@pytest.fixture(scope="module")
def s3_conf(s3_server, tmp_path_factory) -> Path:
    endpoint, _ = s3_server
    conf = yaml.safe_load(SAMPLE_CONF.read_text())
    conf["spark"]["master"] = "local[2]"
    conf["spark"]["packages"] = S3A_PACKAGES
    conf["spark"]["conf"] = {
        **conf["spark"]["conf"],
        **TEST_SPARK_CONF,
        "spark.driver.extraJavaOptions": CHILD_JVM_OPTIONS,
        **s3a_conf(endpoint),
    }
    conf["quality"] = {**conf["quality"], "enabled": False}
    path = tmp_path_factory.mktemp("conf") / "s3.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


@pytest.fixture(scope="module")
def s3_run(s3_server, s3_conf, tmp_path_factory):
    """The trace uploaded, `ackreplay run` from and to the bucket, and the lakehouse downloaded: (the run,
    the local copy of the lakehouse, the bucket's object keys, the run's working folder)."""
    assert _hadoop_version() == HADOOP_VERSION, "pyspark's Hadoop changed: update HADOOP_VERSION, AWS_SDK_VERSION"
    _, client = s3_server
    client.create_bucket(Bucket="logs")
    client.create_bucket(Bucket="lake")
    for path in sorted(p for p in TRACE.rglob("*") if p.is_file()):
        client.upload_file(str(path), "logs", f"traces/{TRACE.name}/{path.relative_to(TRACE)}")
    workdir = tmp_path_factory.mktemp("s3-run")
    input_uri = f"s3a://logs/traces/{TRACE.name}"
    run = run_cli(
        "run", "--input", input_uri, "--lakehouse", "s3a://lake/ackreplay", "--conf", str(s3_conf), cwd=workdir
    )
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-8000:]}"
    keys = [
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket="lake")
        for o in page.get("Contents", [])
    ]
    local = workdir / "downloaded"
    for key in keys:
        if key.endswith("/"):  # S3A's marker of an empty folder
            continue
        target = local / key
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file("lake", key, str(target))
    return run, str(local / "ackreplay"), keys, workdir


@pytest.fixture(scope="module")
def local_lakehouse(sample_run) -> str:
    return sample_run(TRACE, gold=True).lakehouse


def test_the_run_reads_and_writes_the_object_store_and_says_where(s3_run):
    run, _, keys, workdir = s3_run
    assert "done in" in run.stdout and "lakehouse: s3a://lake/ackreplay" in run.stdout, run.stdout
    assert "report: s3a://lake/ackreplay/report/report.html" in run.stdout, run.stdout
    assert "ackreplay/report/report.html" in keys
    # the console's first line of the ingest: every file of the layout listed from the bucket
    assert "inputs: 15 files listed; 15 to ingest (15 new, 0 changed)" in run.stdout, run.stdout
    # nothing was written to the working folder as a local path named like the URI (Spark may make its
    # default `spark-warehouse` there)
    assert not [p.name for p in workdir.iterdir() if p.name.startswith("s3")]


@pytest.mark.parametrize("table", sorted(set(TABLES) - set(NOT_COMPARED)))
def test_each_table_equals_the_local_runs(spark, s3_run, local_lakehouse, table):
    _, s3_lakehouse, _, _ = s3_run
    assert_same_table(spark, s3_lakehouse, local_lakehouse, table)


def test_a_bucket_that_does_not_answer_is_a_clear_input_error(s3_conf, tmp_path):
    conf = yaml.safe_load(s3_conf.read_text())
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    conf["spark"]["conf"]["spark.hadoop.fs.s3a.endpoint"] = f"http://127.0.0.1:{closed}"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(conf))
    run = run_cli(
        "ingest", "--input", "s3a://logs/traces", "--lakehouse", str(tmp_path / "lh"), "--conf", str(bad), cwd=tmp_path
    )
    assert run.returncode == 2, run.stderr
    assert "error: cannot list input folder s3a://logs/traces: " in run.stderr, run.stderr
    assert "Could not connect" in run.stderr and "Traceback" not in run.stderr, run.stderr
