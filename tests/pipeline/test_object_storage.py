"""An input on an object store that does not answer is a clear input error, not a traceback or an abort.

The whole pipeline from and to an S3-compatible store (moto's server on 127.0.0.1) is tested under spark-submit on
the standalone cluster (tests/cluster/test_standalone.py), with a user's local `ackreplay run` on the same bucket
after it. Here `ackreplay ingest` runs as a user would, with conf/local.yaml plus the S3A block of README "Running on
object storage", against an endpoint nothing listens on.
"""

from __future__ import annotations

import socket

from tests.child_runs import run_cli
from tests.conftest import SAMPLE_CONF
from tests.object_store import ObjectStore


def test_a_bucket_that_does_not_answer_is_a_clear_input_error(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    bad = ObjectStore(f"http://127.0.0.1:{closed}", client=None).local_conf(SAMPLE_CONF, tmp_path / "bad.yaml")
    run = run_cli(
        "ingest", "--input", "s3a://logs/traces", "--lakehouse", str(tmp_path / "lh"), "--conf", str(bad), cwd=tmp_path
    )
    assert run.returncode == 2, run.stderr
    assert "error: cannot list input folder s3a://logs/traces: " in run.stderr, run.stderr
    assert "Could not connect" in run.stderr and "Traceback" not in run.stderr, run.stderr
