"""Where the tables live and how they are written: path-based Delta tables under one lakehouse root.

Every write is one atomic Delta commit that replaces exactly the rows of the inputs a run covers
(`replaceWhere`), so a rerun on the same files leaves identical tables and a run killed midway
leaves the previous table version intact.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ackreplay.session import is_connect, session_jvm
from ackreplay.storage.filesystems import scheme_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableSpec:
    """A table of the lakehouse: its medallion layer, partition columns and what a row of it is (the table's
    Delta description; its columns' descriptions are the contract's, `schemas/`)."""

    name: str
    layer: str
    partition_by: tuple[str, ...] = ()
    # Columns Delta keeps min/max statistics of (default: the first 32). Stats are computed per row on
    # every write, so a wide table names only the columns its readers filter on.
    stats_columns: tuple[str, ...] = ()
    description: str = ""


# Tables that grow with the logs are partitioned by cluster and event day, so a run replaces whole folders.
# Tables of a few rows per cluster (gold, the ledgers, the configuration seen) are not partitioned: a
# partition per cluster would hold one small file each, and replacing a cluster's rows costs the same
# (0.55-0.9 s warm either way, measured 2026-12-08). Tables first written partitioned by an older version keep
# their partitioning: Delta applies a table's own partition columns to a write that names none.
TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            "request_log_lines",
            "bronze",
            ("cluster", "event_date"),
            ("broker_id", "source_file", "line_number", "status"),
            "One row per line of a broker request log: its text, parsed, quarantined or unused, and its log time.",
        ),
        TableSpec(
            "quarantine",
            "bronze",
            ("cluster",),
            description="One row per input line that could not be used: source file, line number and reason.",
        ),
        TableSpec(
            "produce_requests",
            "silver",
            ("cluster", "event_date"),
            ("source_file", "topic", "partition", "t_local_done"),
            "One row per (PRODUCE request, partition) from the request logs: acks, bytes, offsets, error, the "
            "broker's timing fields and derived times, and the connection it came on.",
        ),
        TableSpec(
            "follower_fetches",
            "silver",
            ("cluster", "event_date"),
            ("source_file", "topic", "partition", "t_dequeue"),
            "One row per (follower FETCH, partition it lists) on the leader: the follower's fetch offset (its LEO "
            "as the leader learns it), leader epoch and fetch session.",
        ),
        TableSpec(
            "isr_changes",
            "silver",
            ("cluster", "event_date"),
            description="One row per committed ISR state on a partition's leader (server.log or state-change.log), "
            "with the change kind and the preceding shrink proposal.",
        ),
        TableSpec(
            "leader_epochs",
            "silver",
            ("cluster", "event_date"),
            description="One row per leadership start (state-change.log): leader, epoch, epoch start offset, ISR.",
        ),
        TableSpec(
            "follower_starts",
            "silver",
            ("cluster", "event_date"),
            description="One row per broker becoming a partition's follower (state-change.log): epoch, its own log "
            "end then, the new leader.",
        ),
        TableSpec(
            "follower_leo_records",
            "silver",
            ("cluster", "event_date"),
            description="One row per follower LEO a leader recorded (server.log at DEBUG, 'Recorded replica ... "
            "log end offset'): when, which follower, which offset.",
        ),
        TableSpec(
            "broker_registrations",
            "silver",
            description="One row per broker registration record a KRaft controller replayed (controller.log): "
            "broker, epoch, fenced, in controlled shutdown.",
        ),
        TableSpec(
            "metadata_deltas",
            "silver",
            description="One row per metadata delta a broker applied that changed partitions it holds "
            "(state-change.log 'Transitioning N partition(s)'): broker, role, partitions.",
        ),
        TableSpec(
            "broker_configs",
            "silver",
            description="One row per broker setting the replay's rules rest on, as each broker logged it at each "
            "start (server.log 'KafkaConfig values').",
        ),
        TableSpec(
            "follower_leo_samples",
            "silver",
            ("cluster", "event_date"),
            description="One row per JMX-exporter sample of a broker's log end offset or fetcher lag metric.",
        ),
        TableSpec(
            "produce_replay",
            "silver",
            ("cluster", "event_date"),
            ("topic", "partition", "policy", "outcome"),
            "One row per (replayed produce, policy): outcome, ack time, producer-visible and broker latency, copies "
            "at the ack, exposure and loss under a leader failure.",
        ),
        TableSpec(
            "partitions",
            "silver",
            description="One row per partition from topics.txt: replica assignment, replication factor, "
            "min.insync.replicas.",
        ),
        TableSpec(
            "batch_send_times",
            "silver",
            ("cluster",),
            description="One row per batch a producer sent: its send time (the first record's CreateTime, a "
            "client log's time, or the topic's), records and each record's own send time.",
        ),
        TableSpec(
            "latency_percentiles",
            "gold",
            description="Producer-visible latency per (cluster, topic, policy, window): P50, P99, P999, P9999 and "
            "max per record.",
        ),
        TableSpec(
            "risk_exposure",
            "gold",
            description="Durability risk per (cluster, topic, policy, window): acks below min ISR, exposure, "
            "single-copy acks, acks a leader failure would lose.",
        ),
        TableSpec(
            "availability",
            "gold",
            description="Availability per (cluster, topic, partition, policy, window): rejections, timeouts, time "
            "under min ISR, and the KIP-637 routing what-if.",
        ),
        TableSpec(
            "routing",
            "gold",
            description="KIP-637 per (cluster, topic, policy, window): rejected batches a producer aware of min ISR "
            "would send to another partition or hold, and what each costs.",
        ),
        TableSpec(
            "policy_summary",
            "gold",
            description="The decision table per (cluster, topic, policy): latency, risk and availability over the "
            "whole run against the replayed acks=all.",
        ),
        TableSpec(
            "ingested_files",
            "meta",
            description="The scheduler's ledger: one row per input file a run has seen, with its fingerprint, "
            "event time range, and the runs that covered it.",
        ),
        TableSpec(
            "replay_checks",
            "meta",
            description="The latest replay's self-check per cluster: the replayed acks=all against the brokers' own "
            "acks, and the ISR re-simulated at the cluster's own lag.",
        ),
        TableSpec(
            "dq_results",
            "quality",
            description="One row per (data-quality run, check) and per reconciliation count between stages.",
        ),
    )
}


def table_contract(name: str) -> StructType:
    """The column contract (schemas/) of table `name`, its columns' descriptions included."""
    from ackreplay.schemas import broker_logs, dq, gold, ledger, metrics, replay, tables

    for module in (tables, broker_logs, metrics, replay, gold, ledger, dq):
        contract = getattr(module, table_spec(name).name.upper(), None)
        if isinstance(contract, StructType):
            return contract
    raise ValueError(f"table {name} has no contract in schemas/")


def column_comments(name: str) -> dict[str, str]:
    """Column name -> description of table `name`'s contract."""
    return {f.name: f.metadata["comment"] for f in table_contract(name).fields if f.metadata.get("comment")}


def with_column_comments(df: DataFrame, name: str) -> DataFrame:
    """`df` with each column carrying its description from table `name`'s contract (Delta stores it as the
    column's comment when the write creates the table)."""
    contract = {f.name: f for f in table_contract(name).fields}
    return df.select(
        *[
            F.col(c).alias(c, metadata=contract[c].metadata) if c in contract and contract[c].metadata else F.col(c)
            for c in df.columns
        ]
    )


def table_spec(name: str) -> TableSpec:
    """The lakehouse's table `name` (an error for a name it does not have)."""
    try:
        return TABLES[name]
    except KeyError:
        raise ValueError(f"unknown table {name!r}; known tables: {', '.join(sorted(TABLES))}") from None


class LakehouseError(ValueError):
    """The lakehouse is not a folder this run can write to."""


def check_writable(spark: SparkSession, lakehouse: str) -> None:
    """Fail before any work when `lakehouse` is a file or cannot be written (read-only, no permission, bad
    credentials), with the filesystem's own reason on one line, instead of a Delta error at the first commit.
    The folder is created if missing; a probe file is written and removed (nothing of the user's is touched).
    On Spark Connect the lakehouse is the server's: its first commit says what is wrong with it instead."""
    import uuid

    if is_connect(spark):
        return
    try:
        fs = HadoopFiles(spark, lakehouse)
        if fs.exists(lakehouse) and not fs.is_dir(lakehouse):
            raise LakehouseError(f"lakehouse {lakehouse} is a file, not a folder")
        probe = f"{lakehouse.rstrip('/')}/_ackreplay_write_probe_{uuid.uuid4().hex[:12]}"
        fs.mkdirs(lakehouse)
        fs.write_empty(probe)
        fs.delete(probe, recursive=False)
    except LakehouseError:
        raise
    except Exception as exc:  # a Py4JJavaError: its Java message names the cause
        java = getattr(exc, "java_exception", None)
        cause = java.toString() if java is not None else str(exc)
        raise LakehouseError(f"lakehouse {lakehouse} is not writable: {cause.strip().splitlines()[0]}") from None


def table_path(lakehouse: str, name: str) -> str:
    """Where table `name` lives under `lakehouse`: <lakehouse>/<layer>/<name>."""
    spec = table_spec(name)
    return f"{lakehouse.rstrip('/')}/{spec.layer}/{spec.name}"


def delta_sql_name(lakehouse: str, name: str) -> str:
    """Table `name` as SQL names a Delta table by its path: delta.`<path>`. Delta takes a path there only when
    it is absolute (`DeltaTableUtils.isValidPath`; a relative one is read as a file source, which cannot be
    queried: UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY), so a relative local lakehouse (`--lakehouse lakehouse`)
    is made absolute against the working folder, where Spark reads and writes it too."""
    path = table_path(lakehouse, name)
    if not scheme_of(path) and not os.path.isabs(path):
        path = os.path.abspath(path)
    return "delta.`" + path.replace("`", "``") + "`"


def table_exists(spark: SparkSession, lakehouse: str, name: str) -> bool:
    """Whether table `name` was written (its Delta log exists)."""
    if is_connect(spark):  # DeltaTable's API needs Delta's Connect plugin on the server; reading needs nothing
        from pyspark.errors import AnalysisException

        try:
            _ = spark.read.format("delta").load(table_path(lakehouse, name)).schema
        except AnalysisException:
            return False
        return True
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, table_path(lakehouse, name))


def read_table(spark: SparkSession, lakehouse: str, name: str) -> DataFrame:
    """Read a table; a table that was never written is an error naming it."""
    if not table_exists(spark, lakehouse, name):
        raise FileNotFoundError(f"table {name} does not exist in lakehouse {lakehouse} (run `ackreplay run` first)")
    return spark.read.format("delta").load(table_path(lakehouse, name))


def sql_string(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def replace_rows(df: DataFrame, lakehouse: str, name: str, predicate: str, run_id: str) -> int:
    """Atomically replace the rows matching `predicate` with `df` (creating the table if needed), and
    return the number of rows written.

    Every row of `df` must match `predicate`; Delta checks it and fails the commit otherwise. The count
    comes from the commit's metrics in the table's history, not from a Spark `Observation` on the write:
    once an Observation is used, Spark's ObservationManager listener logs an ERROR with a stack trace
    for every later query of the session that fails analysis (Great Expectations runs one when it
    samples the rows of a failed uniqueness check), which buries the console.
    """
    spec = table_spec(name)
    writer = (
        with_column_comments(df, name)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", predicate)
        .option("userMetadata", run_id)
        # a column a later release adds to the contract is added to an existing table (older rows: null)
        .option("mergeSchema", "true")
    )
    if spec.partition_by:
        writer = writer.partitionBy(*spec.partition_by)
    if spec.stats_columns:  # a table property, taken when the write creates the table
        writer = writer.option("delta.dataSkippingStatsColumns", ",".join(spec.stats_columns))
    writer.save(table_path(lakehouse, name))
    log.debug("replaced rows of %s where %s", name, predicate)
    commit = _last_commit(df.sparkSession, lakehouse, name)
    if commit["version"] == 0 and commit["userMetadata"] == run_id and spec.description:
        # this write created the table: its description (Spark's writer takes none; one commit, once a table)
        description = sql_string(spec.description)
        df.sparkSession.sql(
            f"ALTER TABLE {delta_sql_name(lakehouse, name)} SET TBLPROPERTIES ('comment' = {description})"
        )
    # An empty replace that matches no files commits nothing (OptimisticTransaction.commitIfNeeded), so
    # the last commit is this write's only if it is a replace by this run on the same predicate. An
    # earlier such commit can only be last if it left no row matching the predicate (else this write
    # would have removed them, and committed): it wrote none, so its count is this one's, 0.
    if commit["userMetadata"] != run_id or not _same_predicate(commit["operationParameters"], predicate):
        return 0
    metrics = commit["operationMetrics"] or {}
    # A replace on a data column rewrites the files it touches without the matching rows: their other
    # rows are written again (numCopiedRows) and counted in numOutputRows, but were not written by `df`.
    return int(metrics.get("numOutputRows", "0")) - int(metrics.get("numCopiedRows", "0"))


def source_files_predicate(files) -> str:
    """The rows a run replaces: those that came from the files it read (`InputFile`s)."""
    clusters = sorted({f.cluster for f in files})
    sources = sorted(f.source_file for f in files)
    return (
        f"cluster IN ({', '.join(map(sql_string, clusters))}) "
        f"AND source_file IN ({', '.join(map(sql_string, sources))})"
    )


def _last_commit(spark: SparkSession, lakehouse: str, name: str) -> dict:
    """The table's last commit: version, userMetadata, operationParameters and operationMetrics, from the commitInfo
    action of its newest `_delta_log/<version>.json` (the values `DeltaTable.history` shows, read without
    the Spark queries a history read runs: two per write, a tenth of a small run's queries)."""
    if is_connect(spark):  # the log's files are the server's: Delta's own history, one query
        (row,) = spark.sql(f"DESCRIBE HISTORY {delta_sql_name(lakehouse, name)} LIMIT 1").collect()
        history = row.asDict()
        return {k: history[k] for k in ("version", "userMetadata", "operationParameters", "operationMetrics")}
    files = HadoopFiles(spark, lakehouse)
    logged = files.glob(f"{table_path(lakehouse, name)}/_delta_log/*.json")
    newest = max(p for p in logged if _COMMIT_FILE.fullmatch(p.rsplit("/", 1)[-1]))  # zero-padded: by name
    info: dict = {}
    for line in files.read_text(newest).splitlines():
        info = json.loads(line).get("commitInfo") or info
    # history() shows each parameter and metric as text (a boolean as `true`)
    as_text = {k: {n: v if isinstance(v, str) else json.dumps(v) for n, v in (info.get(k) or {}).items()} or None
               for k in ("operationParameters", "operationMetrics")}  # fmt: skip
    version = int(newest.rsplit("/", 1)[-1].split(".")[0])
    return {"version": version, "userMetadata": info.get("userMetadata"), **as_text}


_COMMIT_FILE = re.compile(r"\d{20}\.json")


def _same_predicate(parameters: dict | None, predicate: str) -> bool:
    """Whether a WRITE commit's replaceWhere predicate is `predicate` (Delta logs it JSON-encoded)."""
    logged = (parameters or {}).get("predicate")
    if logged is None or logged == predicate:
        return logged is not None
    try:
        return json.loads(logged) == predicate
    except ValueError:
        return False


class HadoopFiles:
    """The Hadoop filesystem of a path (local folders, object stores), through the Spark session's JVM."""

    def __init__(self, spark: SparkSession, path: str, raw_local: bool = False) -> None:
        jvm = self._jvm = session_jvm(spark)
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._path(path).getFileSystem(conf)
        if raw_local and self._fs.getUri().getScheme() == "file":
            # the raw local filesystem: the checksumming one keeps a hidden .<name>.crc beside each file it moves
            self._fs = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
            self._fs.initialize(jvm.java.net.URI("file:///"), conf)

    def qualified(self, path: str) -> str:
        return self._fs.makeQualified(self._path(path)).toString()

    def exists(self, path: str) -> bool:
        return self._fs.exists(self._path(path))

    def is_dir(self, path: str) -> bool:
        return self._fs.getFileStatus(self._path(path)).isDirectory()

    def children(self, path: str) -> list[str]:
        return [status.getPath().toString() for status in self._fs.listStatus(self._path(path))]

    def glob(self, pattern: str) -> list[str]:
        return [status.getPath().toString() for status in self._fs.globStatus(self._path(pattern)) or []]

    def read_text(self, path: str) -> str:
        stream = self._fs.open(self._path(path))
        try:
            return self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._path(path))

    def write_empty(self, path: str) -> None:
        self._fs.create(self._path(path), False).close()

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace the file at `path` with `data`."""
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def delete(self, path: str, recursive: bool) -> None:
        self._fs.delete(self._path(path), recursive)

    def rename(self, source: str, target: str) -> None:
        if not self._fs.rename(self._path(source), self._path(target)):
            raise OSError(f"could not move {source} to {target}")

    def parent(self, path: str) -> str:
        return self._path(path).getParent().toString()

    def name(self, path: str) -> str:
        return self._path(path).getName()
