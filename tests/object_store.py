"""An S3-compatible object store for the tests that run the pipeline where users' data lives (moto's S3 server from
PyPI, on 127.0.0.1), and the settings README "Running on object storage" gives a user for it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark
import yaml

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


def hadoop_version() -> str:
    """The Hadoop release pyspark ships (its hadoop-client-api jar)."""
    jars = Path(pyspark.__file__).parent / "jars"
    (jar,) = jars.glob("hadoop-client-api-*.jar")
    return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")


@dataclass(frozen=True)
class ObjectStore:
    endpoint: str
    client: object  # boto3's S3 client

    def s3a_conf(self) -> dict[str, str]:
        """README "Running on object storage": the S3A settings, for a server on plain HTTP with path-style URLs."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": REGION,
            "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
            "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.jars.excludes": "software.amazon.awssdk:bundle",
        }

    def local_conf(self, conf_file: Path, out: Path) -> Path:
        """`conf_file` as a user of README "Running on object storage" writes it for `ackreplay` on a local Spark
        (the S3A connector among the conf's packages, the settings above), with the test JVMs' settings; at `out`."""
        from tests.conftest import CHILD_JVM_OPTIONS, TEST_SPARK_CONF

        conf = yaml.safe_load(conf_file.read_text())
        conf["spark"]["master"] = "local[2]"
        conf["spark"]["packages"] = S3A_PACKAGES
        conf["spark"]["conf"] = {
            **conf["spark"]["conf"],
            **TEST_SPARK_CONF,
            "spark.driver.extraJavaOptions": CHILD_JVM_OPTIONS,
            **self.s3a_conf(),
        }
        out.write_text(yaml.safe_dump(conf))
        return out

    def upload_folder(self, folder: Path, bucket: str, prefix: str) -> str:
        """Every file under `folder` to `s3a://<bucket>/<prefix>/<its relative path>`; returns that folder's URI."""
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            self.client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder)}")
        return f"s3a://{bucket}/{prefix}"

    def keys(self, bucket: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def download_bucket(self, bucket: str, dest: Path) -> list[str]:
        """Every object of `bucket` to `dest/<key>`; returns the keys."""
        keys = self.keys(bucket)
        for key in keys:
            if key.endswith("/"):  # S3A's marker of an empty folder
                continue
            target = dest / key
            target.parent.mkdir(parents=True, exist_ok=True)
            self.client.download_file(bucket, key, str(target))
        return keys


@contextmanager
def object_store(log: Path) -> Iterator[ObjectStore]:
    """moto's S3 server on a free port of 127.0.0.1, stopped on exit."""
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
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
        yield ObjectStore(endpoint, client)
    finally:
        server.terminate()
        server.wait(timeout=30)
