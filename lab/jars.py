"""Resolve Apache Kafka's jars from Maven Central with ``mvn`` and compile the lab's Java workload.

Nothing is downloaded from anywhere but Maven Central (through the user's normal Maven setup).
The jars land in a cache dir (``~/.cache/ackreplay-lab/kafka-<version>/libs`` by default,
``ACKREPLAY_LAB_CACHE`` overrides the root) and are never committed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# JMX exporter agent (Prometheus), also from Maven Central.
JMX_EXPORTER_VERSION = "1.0.1"


def cache_root() -> Path:
    return Path(os.environ.get("ACKREPLAY_LAB_CACHE", Path.home() / ".cache" / "ackreplay-lab"))


def major(version: str) -> int:
    return int(version.split(".", maxsplit=1)[0])


def logging_deps(version: str) -> list[tuple[str, str, str]]:
    """The logging backend the Kafka release tarball ships (the Maven poms leave it out).

    3.x: reload4j (log4j 1 API) behind slf4j 1.7; 4.x: log4j2 (+ YAML config support) behind slf4j 1.7.
    """
    if major(version) >= 4:
        return [
            ("org.apache.logging.log4j", "log4j-api", "2.24.3"),
            ("org.apache.logging.log4j", "log4j-core", "2.24.3"),
            ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3"),
            ("com.fasterxml.jackson.dataformat", "jackson-dataformat-yaml", "2.16.2"),
        ]
    return [
        ("ch.qos.reload4j", "reload4j", "1.2.25"),
        ("org.slf4j", "slf4j-reload4j", "1.7.36"),
    ]


def pom_xml(version: str) -> str:
    deps = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),  # TopicCommand, GetOffsetShell, ...
        ("org.apache.kafka", "kafka-clients", version),
        ("io.prometheus.jmx", "jmx_prometheus_javaagent", JMX_EXPORTER_VERSION),
    ] + logging_deps(version)
    dep_xml = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>ackreplay.lab</groupId>\n"
        "  <artifactId>kafka-jars</artifactId>\n"
        f"  <version>{version}</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{dep_xml}\n  </dependencies>\n"
        "</project>\n"
    )


def kafka_dir(version: str) -> Path:
    return cache_root() / f"kafka-{version}"


def resolve_kafka(version: str, log=print) -> Path:
    """Return the libs dir with every jar Kafka ``version`` needs, running mvn on first use."""
    base = kafka_dir(version)
    libs = base / "libs"
    marker = base / ".complete"
    pom = pom_xml(version)
    if marker.exists() and marker.read_text() == hashlib.sha256(pom.encode()).hexdigest():
        return libs
    base.mkdir(parents=True, exist_ok=True)
    (base / "pom.xml").write_text(pom)
    if libs.exists():
        shutil.rmtree(libs)
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(base / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={libs}",
        "-DincludeScope=runtime",
    ]
    log(f"resolving Kafka {version} jars from Maven Central into {libs} ...")
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"mvn failed for Kafka {version}:\n{res.stdout[-4000:]}")
    jars = list(libs.glob("*.jar"))
    if not any(j.name.startswith(f"kafka_2.13-{version}") for j in jars):
        raise RuntimeError(f"kafka_2.13-{version}.jar missing in {libs}")
    marker.write_text(hashlib.sha256(pom.encode()).hexdigest())
    return libs


def classpath(libs: Path, exclude_agent: bool = True) -> str:
    jars = sorted(
        str(p) for p in libs.glob("*.jar") if not (exclude_agent and p.name.startswith("jmx_prometheus_javaagent"))
    )
    return os.pathsep.join(jars)


def jmx_agent_jar(libs: Path) -> Path | None:
    found = sorted(libs.glob("jmx_prometheus_javaagent-*.jar"))
    return found[0] if found else None


def compile_workload(version: str, libs: Path, log=print) -> Path:
    """Compile lab/java/LabWorkload.java against this version's kafka-clients; return the classes dir."""
    src = HERE / "java" / "LabWorkload.java"
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    out = kafka_dir(version) / f"workload-{digest}"
    if (out / "LabWorkload.class").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    log(f"compiling {src.name} against Kafka {version} clients ...")
    res = subprocess.run(
        ["javac", "-nowarn", "-d", str(out), "-cp", classpath(libs), str(src)],
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise RuntimeError(f"javac failed:\n{res.stdout[-4000:]}")
    return out


@functools.cache
def main_class(libs: Path, *names: str) -> str:
    """The first of ``names`` (a tool's main class under the names Kafka releases gave it, as a Scala tool
    moved to Java) that the Kafka jars in ``libs`` hold."""
    for name in names:
        entry = name.replace(".", "/") + ".class"
        for jar in sorted(Path(libs).glob("kafka*.jar")):
            with zipfile.ZipFile(jar) as zf:
                if entry in zf.namelist():
                    return name
    raise RuntimeError(f"none of {', '.join(names)} in the Kafka jars of {libs}")


if __name__ == "__main__":  # python -m lab.jars 3.9.1 4.1.1
    import sys

    for v in sys.argv[1:]:
        print(resolve_kafka(v))
