"""Send times read from a real cluster's topic with Spark's Kafka source equal kafka-dump-log's (slow: a
3-broker Kafka lab, a ProducerPerformance run, two `ackreplay ingest` processes; about 4 minutes).

Marked ``lab``; the default test command skips it. Run it with::

    pytest -m lab tests/integration/test_lab_kafka_source.py

Needs Java 17+ and ``mvn`` reaching Maven Central (Kafka's jars into ``~/.cache/ackreplay-lab``, Spark's
Kafka source through Spark's resolver). ``ACKREPLAY_LAB_KAFKA_VERSION`` picks the Kafka version (default
4.4.0).

The lab cluster takes ProducerPerformance's acks=all records and is stopped, its logs captured as an operator
would collect them; it is started again and `ackreplay ingest`, with `create_times_from_kafka` naming its
brokers, reads each batch's records from the topic. Its segments are then dumped with kafka-dump-log
--deep-iteration and ingested into a second lakehouse. Every batch of the request logs has the same send
time both ways, and the same record count and per-record send times where the topic path counts them
(all but each partition's last batch).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = os.environ.get("ACKREPLAY_LAB_KAFKA_VERSION", "4.4.0")
TOPIC = "ackreplay-lab"
PARTITIONS = 6
RECORDS = 9000  # 30 s at 300 records/s

pytestmark = pytest.mark.lab


def _ingest(input_dir: Path, lakehouse: Path, conf: Path) -> str:
    cmd = [sys.executable, "-m", "ackreplay.cli", "ingest", "--input", str(input_dir), "--lakehouse", str(lakehouse),
           "--conf", str(conf)]  # fmt: skip
    res = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                         env={**os.environ, "PYSPARK_PYTHON": sys.executable}, check=False)  # fmt: skip
    assert res.returncode == 0, res.stdout[-5000:]
    return res.stdout


def _conf(path: Path, cluster: str, bootstrap: str | None) -> Path:
    kafka = f"    create_times_from_kafka:\n      kafka.bootstrap.servers: '{bootstrap}'\n" if bootstrap else ""
    path.write_text(
        "spark:\n  master: local[2]\n  log_level: ERROR\n  conf:\n    spark.sql.shuffle.partitions: 2\n"
        f"clusters:\n  {cluster}:\n    log_timezone: UTC\n{kafka}quality:\n  enabled: false\n"
    )
    return path


def test_send_times_from_sparks_kafka_source_equal_kafka_dump_logs(tmp_path):
    if not all(shutil.which(t) for t in ("java", "mvn")):
        pytest.skip("needs java and mvn")
    from deltalake import DeltaTable

    from lab.cluster import CONTROLLER_ID, ClusterSpec, LabCluster
    from lab.record_trace import capture_create_times, capture_logs

    cluster_name = f"lab-{VERSION}"
    cluster = LabCluster(ClusterSpec(version=VERSION, jmx_exporter=False), tmp_path / "work")
    from_topic = tmp_path / "from-topic" / cluster_name
    from_dump = tmp_path / "from-dump" / cluster_name
    try:
        cluster.start()
        cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": 2})
        perf = cluster.reg.start("perf", cluster._jvm(None, "256m") + [
            "-cp", cluster.cp, "org.apache.kafka.tools.ProducerPerformance", "--topic", TOPIC,
            "--num-records", str(RECORDS), "--throughput", "300", "--record-size", "512",
            "--producer-props", f"bootstrap.servers={cluster.bootstrap}", "acks=all", "linger.ms=5",
        ], tmp_path / "perf.out")  # fmt: skip
        assert perf.wait(timeout=180) == 0, (tmp_path / "perf.out").read_text()[-2000:]
        topics = cluster.describe()
        cluster.stop()
        from_topic.mkdir(parents=True)
        (from_topic / "topics.txt").write_text(topics)
        capture_logs(cluster, from_topic)
        shutil.copytree(from_topic, from_dump)
        capture_create_times(cluster, from_dump, TOPIC)

        # the same cluster again (same data), for the Kafka source to read the topic from
        sizes = {n: cluster.server_log_size(n) for n in [CONTROLLER_ID, *cluster.broker_ids]}
        for node in [CONTROLLER_ID, *cluster.broker_ids]:
            cluster.start_node(node)
        for node in [CONTROLLER_ID, *cluster.broker_ids]:
            cluster.wait_started(node, since_bytes=sizes[node])
        printed = _ingest(
            from_topic.parent, tmp_path / "lh-topic", _conf(tmp_path / "topic.yaml", cluster_name, cluster.bootstrap)
        )
    finally:
        cluster.stop()
    print(printed[-3000:])
    _ingest(from_dump.parent, tmp_path / "lh-dump", _conf(tmp_path / "dump.yaml", cluster_name, None))

    def batches(lakehouse: Path):
        table = DeltaTable(str(lakehouse / "silver" / "batch_send_times")).to_pandas()
        return table.set_index(["partition", "base_offset"]).sort_index()

    topic, dump = batches(tmp_path / "lh-topic"), batches(tmp_path / "lh-dump")
    assert set(topic["source"]) == {"topic"} and set(dump["source"]) == {"create_time"}
    assert len(topic) > RECORDS / 20  # linger.ms 5 at 300 records/s: a few records a batch
    assert topic.index.isin(dump.index).all()  # the dump lists the warm-up's and every other batch too
    both = topic.join(dump, rsuffix="_dump", how="inner")
    assert (both["t_send"] == both["t_send_dump"]).all()
    assert (both["leader_epoch"] == both["leader_epoch_dump"]).all()
    counted = both[both["records"].notna()]
    assert len(counted) == len(both) - PARTITIONS  # each partition's last batch: its end is not in the logs
    assert (counted["records"] == counted["records_dump"]).all()
    sends = zip(counted["record_sends"], counted["record_sends_dump"], strict=True)
    assert all([dict(x) for x in ours] == [dict(x) for x in theirs] for ours, theirs in sends)
    assert f"send times from the topics of {cluster_name}" in printed
