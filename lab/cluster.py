"""A local KRaft Kafka cluster on 127.0.0.1: one dedicated controller + N brokers, real Apache Kafka jars.

Every process is started in its own session/process group and registered in a ``ProcessRegistry``;
``ProcessRegistry.stop_all`` SIGCONTs (a paused broker cannot exit otherwise), SIGTERMs, waits and
finally SIGKILLs each group.  ``LabCluster`` is a context manager that always calls it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from . import jars

TEMPLATES = Path(__file__).resolve().parent / "templates"

CONTROLLER_ID = 100


class LabError(RuntimeError):
    pass


# Line stamps the brokers can write (`ClusterSpec.log_stamp`): the stamp text, and the log4j2 date
# pattern the template's `[%d{${sys:ackreplay.logDatePattern}}]` gets (log4j-core
# FixedDateFormat.FixedFormat: DEFAULT is what a bare `%d` prints; DEFAULT_MICROS is
# `yyyy-MM-dd HH:mm:ss,nnnnnn`). log4j 1 / reload4j (Kafka 3.x) formats a java.util.Date, so
# milliseconds only.
LOG_STAMPS = {
    "ms": {"stamp": "yyyy-MM-dd HH:mm:ss,SSS", "log4j2_date_pattern": "DEFAULT"},
    "us": {"stamp": "yyyy-MM-dd HH:mm:ss,SSSSSS", "log4j2_date_pattern": "DEFAULT_MICROS"},
}


def check_log_stamp(version: str, log_stamp: str) -> None:
    """Raise LabError unless Kafka `version`'s logging backend can print `log_stamp` stamps."""
    if log_stamp not in LOG_STAMPS:
        raise LabError(f"unknown log stamp {log_stamp!r} (one of {', '.join(LOG_STAMPS)})")
    if log_stamp == "us" and jars.major(version) < 4:
        raise LabError(
            f"microsecond log stamps need Kafka 4.x (log4j2); Kafka {version} logs through reload4j "
            "(log4j 1), whose %d prints milliseconds only: use --log-stamp ms"
        )


# ---------------------------------------------------------------------------------------------
# processes


def _die_with_parent() -> None:  # runs in the child between fork and exec
    """Linux: SIGKILL this child if the lab process dies without cleaning up (e.g. kill -9)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class ProcessRegistry:
    """Every child the lab starts; ``stop_all`` ends them (idempotent, safe from finally/atexit)."""

    def __init__(self) -> None:
        self._procs: dict[str, subprocess.Popen] = {}
        self._lock = threading.Lock()

    def start(
        self, name: str, cmd: list[str], log_path: Path, env: dict | None = None, cwd: Path | None = None
    ) -> subprocess.Popen:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(log_path, "ab")  # noqa: SIM115 (the child keeps its own descriptor; ours is closed below)
        try:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
                # the broker dies with the lab (no orphan JVMs); set before any thread starts in the child
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # noqa: PLW1509
            )
        finally:
            out.close()
        with self._lock:
            self._procs[name] = proc
        return proc

    def get(self, name: str) -> subprocess.Popen | None:
        return self._procs.get(name)

    def forget(self, name: str) -> None:
        with self._lock:
            self._procs.pop(name, None)

    @staticmethod
    def _signal_group(proc: subprocess.Popen, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)  # start_new_session=True: pgid == pid

    def stop(self, name: str, timeout: float = 30.0, sig: int = signal.SIGTERM) -> int | None:
        proc = self._procs.get(name)
        if proc is None:
            return None
        rc = self._stop_proc(proc, timeout, sig)
        self.forget(name)
        return rc

    def _stop_proc(self, proc: subprocess.Popen, timeout: float, sig: int) -> int | None:
        if proc.poll() is not None:
            return proc.returncode
        self._signal_group(proc, signal.SIGCONT)
        self._signal_group(proc, sig)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal_group(proc, signal.SIGKILL)
            try:
                return proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                return None

    def stop_all(self, timeout: float = 30.0) -> None:
        with self._lock:
            procs = list(self._procs.items())
        # resume everything first, then terminate all in parallel, then wait
        for _, p in procs:
            if p.poll() is None:
                self._signal_group(p, signal.SIGCONT)
        for _, p in procs:
            if p.poll() is None:
                self._signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for _, p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._signal_group(p, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=10)
        with self._lock:
            for name, _ in procs:
                self._procs.pop(name, None)


# ---------------------------------------------------------------------------------------------
# ports


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def find_port_block(n: int, start: int = 39100, stop: int = 60000, step: int = 20) -> int:
    """First base port such that base..base+n-1 are all free on 127.0.0.1."""
    for base in range(start, stop, step):
        if all(_port_free(base + i) for i in range(n)):
            return base
    raise LabError("no free port block found")


# ---------------------------------------------------------------------------------------------
# cluster


@dataclass
class ClusterSpec:
    version: str
    brokers: int = 3
    timezone: str = "UTC"
    replica_lag_time_max_ms: int = 3000
    broker_session_timeout_ms: int = 15000
    broker_heartbeat_interval_ms: int = 2000
    replica_fetch_wait_max_ms: int = 500
    num_replica_fetchers: int = 1
    min_insync_replicas: int = 2
    default_replication_factor: int = 3
    heap: str = "768m"
    jmx_exporter: bool = True
    extra_broker_props: dict = field(default_factory=dict)
    log_stamp: str = "ms"  # a key of LOG_STAMPS: "us" needs Kafka 4.x
    # kafka.cluster.Partition at DEBUG: its "Recorded replica ... log end offset (LEO) position" line marks when the
    # leader learned each follower's LEO (Partition.updateFollowerFetchState), in server.log
    leo_lines: bool = False

    def broker_props_that_matter(self) -> dict:
        return {
            "replica.lag.time.max.ms": self.replica_lag_time_max_ms,
            "broker.session.timeout.ms": self.broker_session_timeout_ms,
            "broker.heartbeat.interval.ms": self.broker_heartbeat_interval_ms,
            "replica.fetch.wait.max.ms": self.replica_fetch_wait_max_ms,
            "num.replica.fetchers": self.num_replica_fetchers,
            "min.insync.replicas": self.min_insync_replicas,
            "default.replication.factor": self.default_replication_factor,
            **self.extra_broker_props,
        }


def random_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class LabCluster:
    """Start/stop/pause a KRaft cluster: controller ``CONTROLLER_ID`` + brokers 1..N."""

    def __init__(self, spec: ClusterSpec, work_dir: Path, log=print) -> None:
        self.spec = spec
        self.work = work_dir
        self.log = log
        self.reg = ProcessRegistry()
        check_log_stamp(spec.version, spec.log_stamp)
        self.libs = jars.resolve_kafka(spec.version, log=log)
        self.cp = jars.classpath(self.libs)
        self.agent = jars.jmx_agent_jar(self.libs) if spec.jmx_exporter else None
        self.v4 = jars.major(spec.version) >= 4
        self.cluster_id = random_cluster_id()
        # ports: controller, then per broker (client, replication, metrics)
        n = 1 + 3 * spec.brokers
        base = find_port_block(n)
        self.controller_port = base
        self.client_ports = {b: base + 1 + 3 * (b - 1) for b in self.broker_ids}
        self.replication_ports = {b: base + 2 + 3 * (b - 1) for b in self.broker_ids}
        self.metrics_ports = {b: base + 3 + 3 * (b - 1) for b in self.broker_ids}
        self.started_at: dict[int, list[float]] = {}

    # -- layout ---------------------------------------------------------------------------
    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.spec.brokers + 1))

    def node_dir(self, node: int) -> Path:
        return self.work / (f"controller-{node}" if node == CONTROLLER_ID else f"broker-{node}")

    def logs_dir(self, node: int) -> Path:
        return self.node_dir(node) / "logs"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.client_ports[b]}" for b in self.broker_ids)

    @property
    def voters(self) -> str:
        return f"{CONTROLLER_ID}@127.0.0.1:{self.controller_port}"

    # -- configs --------------------------------------------------------------------------
    def _common_props(self, node: int) -> dict:
        s = self.spec
        return {
            "node.id": node,
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
            "log.dirs": str(self.node_dir(node) / "data"),
            "broker.session.timeout.ms": s.broker_session_timeout_ms,
            "broker.heartbeat.interval.ms": s.broker_heartbeat_interval_ms,
        }

    def controller_props(self) -> dict:
        return {
            **self._common_props(CONTROLLER_ID),
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "num.io.threads": 4,
            "num.network.threads": 2,
        }

    def broker_props(self, b: int) -> dict:
        s = self.spec
        client = f"127.0.0.1:{self.client_ports[b]}"
        repl = f"127.0.0.1:{self.replication_ports[b]}"
        props = {
            **self._common_props(b),
            "process.roles": "broker",
            "listeners": f"CLIENT://{client},REPLICATION://{repl}",
            "advertised.listeners": f"CLIENT://{client},REPLICATION://{repl}",
            "inter.broker.listener.name": "REPLICATION",
            # production-like defaults, spelled out
            "num.network.threads": 3,
            "num.io.threads": 8,
            "socket.send.buffer.bytes": 102400,
            "socket.receive.buffer.bytes": 102400,
            "socket.request.max.bytes": 104857600,
            "num.partitions": 6,
            "default.replication.factor": s.default_replication_factor,
            "min.insync.replicas": s.min_insync_replicas,
            "offsets.topic.replication.factor": 3,
            "transaction.state.log.replication.factor": 3,
            "transaction.state.log.min.isr": 2,
            "auto.create.topics.enable": "false",
            "unclean.leader.election.enable": "false",
            "log.retention.hours": 168,
            "log.segment.bytes": 1073741824,
            "log.retention.check.interval.ms": 300000,
            "group.initial.rebalance.delay.ms": 3000,
            # what the trace needs
            "replica.lag.time.max.ms": s.replica_lag_time_max_ms,
            "replica.fetch.wait.max.ms": s.replica_fetch_wait_max_ms,
            "num.replica.fetchers": s.num_replica_fetchers,
        }
        props.update(s.extra_broker_props)
        return props

    @staticmethod
    def _write_props(path: Path, props: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _log4j_opts(self, tools: bool = False) -> list[str]:
        partition_level = (
            [] if tools else [f"-Dackreplay.partitionLogLevel={'DEBUG' if self.spec.leo_lines else 'INFO'}"]
        )
        if self.v4:
            f = TEMPLATES / ("tools-log4j2.yaml" if tools else "log4j2.yaml")
            opts = [f"-Dlog4j2.configurationFile=file:{f}"]
            if not tools:  # every appender of log4j2.yaml shares this date pattern
                opts.append(f"-Dackreplay.logDatePattern={LOG_STAMPS[self.spec.log_stamp]['log4j2_date_pattern']}")
            return opts + partition_level
        f = TEMPLATES / ("tools-log4j.properties" if tools else "log4j.properties")
        return [f"-Dlog4j.configuration=file:{f}"] + partition_level

    def _jvm(self, node: int | None, heap: str) -> list[str]:
        opts = [
            "java",
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-server",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true",
            f"-Duser.timezone={self.spec.timezone}",
        ]
        if node is None:
            return opts + self._log4j_opts(tools=True)
        opts += [f"-Dkafka.logs.dir={self.logs_dir(node)}"] + self._log4j_opts()
        if self.agent is not None and node != CONTROLLER_ID:
            cfg = TEMPLATES / "jmx-exporter.yaml"
            opts.append(f"-javaagent:{self.agent}=127.0.0.1:{self.metrics_ports[node]}:{cfg}")
        return opts

    def run_tool(self, main_class: str, args: list[str], timeout: float = 120) -> str:
        cmd = self._jvm(None, "256m") + ["-cp", self.cp, main_class] + args
        name = f"tool-{main_class.rsplit('.', 1)[-1]}-{time.monotonic_ns()}"
        out_path = self.work / "tools" / f"{name}.out"
        proc = self.reg.start(name, cmd, out_path)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.reg.stop(name, timeout=5, sig=signal.SIGKILL)
            raise LabError(f"{main_class} {' '.join(args)} timed out") from exc
        finally:
            self.reg.forget(name)
        text = out_path.read_text(errors="replace")
        if rc != 0:
            raise LabError(f"{main_class} {' '.join(args)} failed rc={rc}:\n{text[-3000:]}")
        return text

    # -- lifecycle ------------------------------------------------------------------------
    def prepare(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        nodes = [CONTROLLER_ID] + self.broker_ids
        for node in nodes:
            props = self.controller_props() if node == CONTROLLER_ID else self.broker_props(node)
            self._write_props(self.node_dir(node) / "server.properties", props)
            self.logs_dir(node).mkdir(parents=True, exist_ok=True)
        # format all storage dirs in parallel (one JVM each)
        procs = []
        for node in nodes:
            cmd = self._jvm(None, "256m") + [
                "-cp",
                self.cp,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(self.node_dir(node) / "server.properties"),
            ]
            procs.append((node, self.reg.start(f"format-{node}", cmd, self.node_dir(node) / "format.out")))
        for node, p in procs:
            rc = p.wait(timeout=180)
            self.reg.forget(f"format-{node}")
            if rc != 0:
                raise LabError(
                    f"storage format failed for node {node}: {(self.node_dir(node) / 'format.out').read_text()[-2000:]}"
                )

    def start_node(self, node: int) -> subprocess.Popen:
        heap = "384m" if node == CONTROLLER_ID else self.spec.heap
        cmd = self._jvm(node, heap) + ["-cp", self.cp, "kafka.Kafka", str(self.node_dir(node) / "server.properties")]
        self.started_at.setdefault(node, []).append(time.time())
        return self.reg.start(f"node-{node}", cmd, self.node_dir(node) / "stdout.out")

    def pid(self, node: int) -> int:
        p = self.reg.get(f"node-{node}")
        if p is None or p.poll() is not None:
            raise LabError(f"node {node} is not running")
        return p.pid

    def running(self, node: int) -> bool:
        p = self.reg.get(f"node-{node}")
        return p is not None and p.poll() is None

    def wait_started(self, node: int, timeout: float = 120, since_bytes: int = 0) -> None:
        """Wait for the node's 'Kafka Server started' line in server.log (after offset since_bytes)."""
        log = self.logs_dir(node) / "server.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running(node):
                out = (self.node_dir(node) / "stdout.out").read_text(errors="replace")[-3000:]
                raise LabError(f"node {node} exited during startup:\n{out}")
            if log.exists():
                with open(log, "rb") as f:
                    f.seek(since_bytes)
                    if b"Kafka Server started" in f.read():
                        return
            time.sleep(0.5)
        raise LabError(f"node {node} did not start within {timeout}s")

    def server_log_size(self, node: int) -> int:
        log = self.logs_dir(node) / "server.log"
        return log.stat().st_size if log.exists() else 0

    def start(self) -> None:
        self.prepare()
        self.start_node(CONTROLLER_ID)
        self.wait_started(CONTROLLER_ID)
        for b in self.broker_ids:
            self.start_node(b)
        for b in self.broker_ids:
            self.wait_started(b)

    def pause(self, node: int) -> None:
        os.kill(self.pid(node), signal.SIGSTOP)

    def resume(self, node: int) -> None:
        os.kill(self.pid(node), signal.SIGCONT)

    def stop_node(self, node: int, timeout: float = 60, sig: int = signal.SIGTERM) -> int | None:
        return self.reg.stop(f"node-{node}", timeout=timeout, sig=sig)

    def stop(self) -> None:
        # brokers first (controlled shutdown needs the controller), then the controller, then anything left
        for b in self.broker_ids:
            if self.running(b):
                self.reg._signal_group(self.reg.get(f"node-{b}"), signal.SIGCONT)
        for b in self.broker_ids:
            if self.running(b):
                self.reg._signal_group(self.reg.get(f"node-{b}"), signal.SIGTERM)
        for b in self.broker_ids:
            self.stop_node(b, timeout=45)
        self.stop_node(CONTROLLER_ID, timeout=30)
        self.reg.stop_all()

    def __enter__(self) -> LabCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- tools ----------------------------------------------------------------------------
    def topics(self, *args: str, timeout: float = 120) -> str:
        return self.run_tool(
            # kafka-topics: Scala kafka.admin.TopicCommand until 3.6, Java in kafka-tools from 3.7
            jars.main_class(self.libs, "org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
            ["--bootstrap-server", self.bootstrap, *args],
            timeout=timeout,
        )

    def create_topic(self, topic: str, partitions: int, rf: int, configs: dict) -> str:
        args = ["--create", "--topic", topic, "--partitions", str(partitions), "--replication-factor", str(rf)]
        for k, v in configs.items():
            args += ["--config", f"{k}={v}"]
        return self.topics(*args)

    def describe(self) -> str:
        return self.topics("--describe")


_DESC_RE = re.compile(
    r"Topic:\s*(?P<topic>\S+)\s+Partition:\s*(?P<p>\d+)\s+Leader:\s*(?P<leader>-?\d+|none)\s+"
    r"Replicas:\s*(?P<replicas>[\d,]*)\s+Isr:\s*(?P<isr>[\d,]*)"
)


def parse_describe(text: str) -> dict:
    """{topic: {"topic_id":..., "partitions": {p: {"leader", "replicas", "isr"}}}} from kafka-topics --describe."""
    out: dict = {}
    for line in text.splitlines():
        m = re.match(r"Topic:\s*(\S+)\s+TopicId:\s*(\S+)", line)
        if m:
            out.setdefault(m.group(1), {"partitions": {}})["topic_id"] = m.group(2)
            continue
        m = _DESC_RE.search(line)
        if m:
            t = out.setdefault(m.group("topic"), {"partitions": {}})
            leader = m.group("leader")
            t["partitions"][int(m.group("p"))] = {
                "leader": int(leader) if leader != "none" else -1,
                "replicas": [int(x) for x in m.group("replicas").split(",") if x],
                "isr": [int(x) for x in m.group("isr").split(",") if x],
            }
    return out


def rmtree_quiet(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
