"""Delta's jars for a JVM this process starts: Spark's resolver once, then the jars it retrieved.

spark-submit resolves `spark.jars.packages` with Ivy (org.apache.spark.util.MavenUtils
.resolveMavenCoordinates, Spark 4.1) and Ivy logs every resolution to the launcher's console, the jars
cached or not: ~75 lines (`:: resolving dependencies ::`, a `found ... in central` line per module, the
report table, `:: retrieving ::`) before any line of ours. Nothing turns that log down from outside:
MavenUtils sets Ivy's resolve/retrieve log to quiet only for its own tests, Ivy's message level is set only
through its API, and an ivysettings file has no log level.

So a start that finds the jars an earlier resolution retrieved (a record next to Ivy's `jars/`, every file
present) passes them as `spark.jars`, as `settings.jars` does. A start without such a record resolves once
through Spark's own resolver in a JVM of its own whose output is kept (pyspark's `launch_gateway` and its
`popen_kwargs`), reads the jars that spark-submit put in `spark.jars`, records them and starts the session
with them: one notice line on the console. If that fails, the session resolves the packages as before,
with Ivy's full log. A session under spark-submit (`--packages`) or in a JVM already running is left to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from ackreplay.config import SparkSettings

# The confs that change what spark-submit's resolver returns for the same coordinates.
RESOLUTION_CONF = ("spark.jars.repositories", "spark.jars.ivySettings", "spark.jars.excludes", "spark.jars.ivy")
RECORD_DIR = "ackreplay-resolved"  # under the Ivy directory, next to Spark's `jars/`


def delta_packages(settings: SparkSettings) -> str:
    """The `spark.jars.packages` a session resolves: `settings.delta_package` or delta-spark's own pick."""
    if settings.delta_package:
        return settings.delta_package
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    return configure_spark_with_delta_pip(SparkSession.builder)._options["spark.jars.packages"]


def jars_conf(settings: SparkSettings) -> dict[str, str]:
    """The conf that puts Delta's jars on the session's classpath (see the module docstring)."""
    if settings.jars:
        return {"spark.jars": ",".join(settings.jars)}
    packages = ",".join([delta_packages(settings), *settings.packages])
    jvm = jvm_state()
    if jvm == "submitted":
        return {"spark.jars.packages": packages}
    resolution = {key: str(settings.conf[key]) for key in RESOLUTION_CONF if key in settings.conf}
    resolution["spark.jars.packages"] = packages
    record = record_path(resolution)
    jars = recorded_jars(record, resolution)
    if jars is None:
        if jvm == "running":  # its classpath is set: nothing to resolve for
            return {"spark.jars.packages": packages}
        print(
            f"ackreplay: resolving Delta's jars ({packages}) from Maven Central with Spark's resolver into "
            f"{ivy_dir(resolution)} (first start only)",
            file=sys.stderr,
            flush=True,
        )
        try:
            jars = resolve(resolution)
        except Exception as exc:  # any failure: the ordinary start, whose Ivy log shows why
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            print(
                f"ackreplay: that failed ({reason}); starting Spark with its resolver's full log",
                file=sys.stderr,
                flush=True,
            )
            return {"spark.jars.packages": packages}
        write_record(record, resolution, jars)
    extra = [j for j in str(settings.conf.get("spark.jars", "")).split(",") if j]
    return {"spark.jars": ",".join([*extra, *jars])}


def jvm_state() -> str:
    """`submitted`: pyspark runs under spark-submit or a SparkContext is active (the JVM's jars are set);
    `running`: this process started a JVM earlier; `none`: the session will start one."""
    from pyspark import SparkContext

    if "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._active_spark_context is not None:
        return "submitted"
    return "running" if SparkContext._gateway is not None else "none"


def ivy_dir(resolution: dict[str, str]) -> Path:
    """Spark 4.1's Ivy directory: `spark.jars.ivy`, else ~/.ivy2.5.2 (MavenUtils.processIvyPathArg)."""
    return Path(resolution.get("spark.jars.ivy") or Path.home() / ".ivy2.5.2").expanduser()


def _key(resolution: dict[str, str]) -> dict[str, str]:
    import pyspark

    return {"spark": pyspark.__version__, **dict(sorted(resolution.items()))}


def record_path(resolution: dict[str, str]) -> Path:
    digest = hashlib.sha256(json.dumps(_key(resolution), sort_keys=True).encode()).hexdigest()[:16]
    return ivy_dir(resolution) / RECORD_DIR / f"{digest}.json"


def _local_path(jar: str) -> Path:
    return Path(unquote(urlparse(jar).path)) if jar.startswith("file:") else Path(jar)


def recorded_jars(record: Path, resolution: dict[str, str]) -> list[str] | None:
    """The jars recorded for `resolution`, or None when there is no record, it is for other settings, or a
    jar it lists is missing or empty."""
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    jars = data.get("jars") if isinstance(data, dict) and data.get("key") == _key(resolution) else None
    if not jars or not all(isinstance(j, str) for j in jars):
        return None
    for jar in jars:
        path = _local_path(jar)
        if not path.is_file() or path.stat().st_size == 0:
            return None
    return jars


def write_record(record: Path, resolution: dict[str, str], jars: list[str]) -> None:
    """Record the jars (atomically; a folder that cannot be written only means resolving again next time)."""
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=record.parent, suffix=".tmp", delete=False) as tmp:
            json.dump({"key": _key(resolution), "jars": jars}, tmp, indent=1)
        os.replace(tmp.name, record)
    except OSError as exc:
        print(f"ackreplay: could not record the resolved jars in {record.parent} ({exc})", file=sys.stderr)


def resolve(resolution: dict[str, str]) -> list[str]:
    """Run spark-submit's resolver in a JVM of its own with its output kept, and return the jars it put in
    `spark.jars`."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf(loadDefaults=False).setAll(list(resolution.items()))
    with tempfile.TemporaryFile() as output:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": output, "stderr": subprocess.STDOUT})
        try:
            jars = gateway.jvm.java.lang.System.getProperty("spark.jars")
        finally:
            gateway.shutdown()
            gateway.proc.stdin.close()  # PythonGatewayServer exits when its stdin closes
            try:
                gateway.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                gateway.proc.kill()
                gateway.proc.wait()
    found = [j for j in (jars or "").split(",") if j]
    if not found:
        raise RuntimeError("spark-submit resolved no jars")
    return found
