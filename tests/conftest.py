"""Shared fixtures: one local Spark session (with Delta) for the whole test run, and one pipeline run of
each bundled trace (data/samples/) shared by every test that reads its tables."""

from __future__ import annotations

import json
import shutil
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ackreplay.config import SparkSettings, load_config
from ackreplay.session import build_spark_session

REPO = Path(__file__).resolve().parents[1]
SAMPLES = sorted(p.parent for p in (REPO / "data/samples").glob("*/manifest.json"))
SAMPLE_CONF = REPO / "conf/local.yaml"


def recorded_policies_config():
    """conf/local.yaml replaying acks=1, acks=all and min.insync only (no quorum or lag what-ifs): for tests
    whose assertions read those policies, at about half a full replay's cost (no ISR re-simulation)."""
    config = load_config(SAMPLE_CONF)
    return config.model_copy(update={"replay": config.replay.model_copy(update={"lag_ms": [], "quorum_sizes": []})})


# Spark for a test's tiny data, in every session the tests start (this one, child `ackreplay run`s, the
# standalone cluster): interpreted expressions instead of generated code, and no adaptive re-planning. With
# data this small a query's cost is its planning, and compiling each new query's generated code (Janino)
# was most of it. Measured on this 2-core machine, `ackreplay run` on the incremental test's 144 lines with
# the checks off, one process (cold, then two warm runs): 161 / 92 / 78 s as Spark ships, 127 / 63 / 59 s
# with codegen off, 119 / 60 / 57 s with AQE off too (AQE off alone: 152 / 90 / 82 s). Results are the
# same either way; conf/*.yaml keep both, which pay off on real volumes.
SMALL_DATA_CONF = {
    "spark.sql.codegen.wholeStage": False,
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": False,
}


@contextmanager
def spark_defaults_for_large_data(spark):
    """Spark's own code generation and adaptive execution for the block (SMALL_DATA_CONF lifted), then
    the test settings again. For a run on megabytes of real logs, where the queries' rows cost more than
    their planning: replaying the corpus traces (tests/pipeline/test_corpus.py) took 141 s instead of 172 s
    (one process each, cold, 2026-11-27, load from the run itself); their ingest gained nothing (379 s
    against 370 s)."""
    for key in SMALL_DATA_CONF:
        spark.conf.unset(key)
    try:
        yield spark
    finally:
        for key, value in SMALL_DATA_CONF.items():
            spark.conf.set(key, str(value).lower() if isinstance(value, bool) else str(value))


# Every test JVM collects with the parallel collector instead of G1: on small runs G1 started a concurrent
# marking cycle about every 2 s (each triggered by a humongous Parquet, Arrow or serialization buffer), and
# its marking thread takes one of the two cores. A warm small run 37 s -> 31-34 s (docs/benchmarks.md,
# "A small run, profiled from three sides").
GC_OPTIONS = "-XX:+UseParallelGC"

# The test session's settings. A command run in-process (the benchmarks' `main`) gets them in its conf:
# building a session while one is active applies the builder's runtime settings to the active one.
TEST_SPARK_CONF = {
    "spark.driver.extraJavaOptions": GC_OPTIONS,
    # PySpark records the Python call site of every Column and DataFrame call for error messages (five
    # Py4J calls each): a quarter of the driver's Python CPU on a small run. Errors still name the failing
    # expression. A static setting: it takes effect where a session is created.
    "spark.python.sql.dataFrameDebugging.enabled": False,
    # as conf/local.yaml: ~70 ms less per Python task (ackreplay/spark_daemon.py)
    "spark.python.daemon.module": "ackreplay.spark_daemon",
    "spark.sql.shuffle.partitions": 2,
    "spark.default.parallelism": 2,
    "spark.databricks.delta.snapshotPartitions": 2,
    "spark.ui.enabled": False,
    "spark.ui.showConsoleProgress": False,
    "spark.driver.memory": "2g",
    **SMALL_DATA_CONF,
}


def spark_conf_yaml(overrides: dict | None = None) -> str:
    """The test session's Spark settings, with `overrides`, as the lines of a conf file's `spark.conf` block:
    for the runs a test starts from a conf file (in this process they take the runtime settings; a child
    process takes them all)."""
    return textwrap.indent(
        yaml.safe_dump({**TEST_SPARK_CONF, **(overrides or {})}, sort_keys=False, width=1000), "    "
    )


# The JVMs a test starts for one short run (a child `ackreplay run`, the standalone cluster's daemons,
# driver and executors) compile with C1 only. Measured on this 2-core machine: a cold `ackreplay run` of
# a 2,000-produce trace spent 40 of its JVM's 107 CPU seconds in the C2 compiler, CPU the other test
# worker needs; with C1 only the JVM used 71 s and the run took 64 s instead of 68 s alone. The test
# session's own long-lived JVM keeps C2: its hot code runs for minutes (a module ran 5% slower on C1).
CHILD_JVM_OPTIONS = f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m {GC_OPTIONS}"


# `make test` runs two pytest-xdist workers, each with its own Spark session. A worker takes a whole
# group: a module's tests (its module fixtures run once), and the modules reading the bundled traces'
# runs (`sample_run`) all together, so each trace goes through the pipeline once per test run.
SAMPLE_RUN_MODULES = frozenset(
    {
        "tests/cluster/test_standalone.py",
        "tests/pipeline/test_broker_logs_samples.py",
        "tests/pipeline/test_isr_check.py",
        "tests/pipeline/test_metrics_samples.py",
        "tests/pipeline/test_notebook.py",
        "tests/pipeline/test_samples.py",
        "tests/pipeline/test_spark_connect.py",
    }
)


def _group(nodeid: str) -> str:
    module = nodeid.split("::", maxsplit=1)[0]
    return "sample-runs" if module in SAMPLE_RUN_MODULES else module


# Worker-seconds of the groups that take more than a minute (`--durations=0` on a clean clone, 2026-12-02;
# docs/development.md; sample-runs with the Spark Connect run added the same day, ~180 s alone, and the cluster
# test's run then moved onto the object store, which made the object-store module's own run unneeded). xdist hands out groups by their number of tests, which put a long module of few tests
# last, with one worker running on alone; instead a free worker takes the longest group left, and groups not
# listed follow by their number of tests.
GROUP_SECONDS = {
    "sample-runs": 950,
    "tests/pipeline/test_corpus.py": 451,
    "tests/pipeline/test_faults.py": 220,
    "tests/pipeline/test_incremental.py": 165,
    "tests/pipeline/test_bench_smoke.py": 145,
    "tests/pipeline/test_hostile_inputs.py": 92,
    "tests/pipeline/test_dq.py": 59,
    "tests/pipeline/test_report.py": 55,
    "tests/pipeline/test_ingest_stage.py": 50,
}


def pytest_xdist_make_scheduler(config, log):
    """The groups above as xdist's scopes (its `xdist_group` mark rewrites node ids, which pytest 9 no
    longer takes), the longest first (`GROUP_SECONDS`)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

        def _assign_work_unit(self, node) -> None:
            longest = max(self.workqueue, key=lambda group: (GROUP_SECONDS.get(group, 0), len(self.workqueue[group])))
            self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return ModuleGroups(config, log)


def pytest_collection_modifyitems(config, items):
    unlisted = {item.nodeid.split("::")[0] for item in items if "sample_run" in item.fixturenames} - SAMPLE_RUN_MODULES
    if unlisted:
        raise pytest.UsageError(
            f"tests/conftest.py: add {sorted(unlisted)} to SAMPLE_RUN_MODULES (they read sample_run)"
        )


# Where the session's JVM serves Spark Connect once tests/pipeline/test_spark_connect.py starts the service in it: on
# 127.0.0.1, on a port of the system's choosing (read back from the service). Read only when the service starts.
CONNECT_SERVICE_CONF = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": 0}


@pytest.fixture(scope="session")
def spark():
    conf = {**TEST_SPARK_CONF, **CONNECT_SERVICE_CONF}
    settings = SparkSettings(master="local[2]", app_name="ackreplay-tests", log_level="ERROR", conf=conf)
    session = build_spark_session(settings)
    yield session
    session.stop()


@dataclass
class SampleRun:
    """A bundled trace ingested (request logs, broker logs, metrics, topics) and replayed with
    conf/local.yaml into a lakehouse of its own. Read it; a test that writes works on `copy_lakehouse`."""

    trace: Path
    manifest: dict
    lakehouse: str
    ingest: object  # ackreplay.ingest.stage.IngestReport
    replay: object  # ackreplay.replay.stage.ReplayReport
    gold: object | None = None  # ackreplay.gold.stage.GoldReport, once `with_gold` ran

    def copy_lakehouse(self, dest: Path) -> str:
        shutil.copytree(self.lakehouse, dest)
        return str(dest)


@pytest.fixture(scope="session")
def sample_run(spark, tmp_path_factory):
    """`sample_run(trace)`: the trace's SampleRun, run on first use and shared by the whole session, so
    each bundled trace goes through the pipeline once per test run instead of once per test module.
    `sample_run(trace, gold=True)` also runs the gold stage (conf/local.yaml's window) on it."""
    from ackreplay.gold.stage import run_gold
    from ackreplay.ingest.stage import run_ingest
    from ackreplay.replay.stage import run_replay

    config = load_config(SAMPLE_CONF)
    runs: dict[Path, SampleRun] = {}

    def get(trace: Path, gold: bool = False) -> SampleRun:
        if trace not in runs:
            lakehouse = str(tmp_path_factory.mktemp(f"sample-{trace.name}") / "lakehouse")
            ingest = run_ingest(spark, config, str(trace), lakehouse)
            replay = run_replay(spark, config, lakehouse, ingest.clusters, run_id="test")
            manifest = json.loads((trace / "manifest.json").read_text())
            runs[trace] = SampleRun(trace, manifest, lakehouse, ingest, replay)
        run = runs[trace]
        if gold and run.gold is None:
            run.gold = run_gold(spark, config, run.lakehouse, run.ingest.clusters, "test-gold", config.gold.window)
        return run

    return get
