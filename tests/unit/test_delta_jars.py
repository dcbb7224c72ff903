"""Delta's jars for a session (ackreplay/delta_jars.py): Spark's resolver once, its log off the console,
then the jars it retrieved as `spark.jars`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ackreplay import delta_jars
from ackreplay.config import DELTA_VERSION, SparkSettings

PACKAGE = f"io.delta:delta-spark_4.1_2.13:{DELTA_VERSION}"
NOTICE = (
    "ackreplay: resolving Delta's jars (io.delta:delta-spark_4.1_2.13:4.4.0) from Maven Central with "
    "Spark's resolver into {ivy} (first start only)\n"
)


@pytest.fixture
def ivy(tmp_path: Path) -> Path:
    (tmp_path / "jars").mkdir()
    for name in ("io.delta_delta-spark_4.1_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar"):
        (tmp_path / "jars" / name).write_bytes(b"PK\x03\x04")
    return tmp_path


@pytest.fixture
def resolver(monkeypatch, ivy: Path):
    """Spark's resolver replaced by one that returns the jars of `ivy` and counts its calls; no JVM started yet."""
    calls = []

    def resolve(resolution):
        calls.append(dict(resolution))
        return [
            f"file://{ivy}/jars/io.delta_delta-spark_4.1_2.13-4.4.0.jar",
            f"file://{ivy}/jars/io.delta_delta-storage-4.4.0.jar",
        ]

    monkeypatch.setattr(delta_jars, "resolve", resolve)
    monkeypatch.setattr(delta_jars, "jvm_state", lambda: "none")
    return calls


def settings(ivy: Path, **conf) -> SparkSettings:
    return SparkSettings(conf={"spark.jars.ivy": str(ivy), **conf})


def test_the_default_package_is_the_pinned_pair():
    assert delta_jars.delta_packages(SparkSettings()) == PACKAGE
    assert delta_jars.delta_packages(SparkSettings(delta_package="g:a:1")) == "g:a:1"


def test_first_start_resolves_once_with_one_notice_then_passes_the_jars(ivy, resolver, capsys):
    jars = (
        f"file://{ivy}/jars/io.delta_delta-spark_4.1_2.13-4.4.0.jar,file://{ivy}/jars/io.delta_delta-storage-4.4.0.jar"
    )
    assert delta_jars.jars_conf(settings(ivy)) == {"spark.jars": jars}
    assert resolver == [{"spark.jars.ivy": str(ivy), "spark.jars.packages": PACKAGE}]
    assert capsys.readouterr() == ("", NOTICE.format(ivy=ivy))
    [record] = (ivy / "ackreplay-resolved").glob("*.json")
    assert record == delta_jars.record_path({"spark.jars.ivy": str(ivy), "spark.jars.packages": PACKAGE})

    # later starts: the recorded jars, no resolution, nothing printed
    assert delta_jars.jars_conf(settings(ivy)) == {"spark.jars": jars}
    assert len(resolver) == 1
    assert capsys.readouterr() == ("", "")


def test_a_missing_or_empty_jar_resolves_again(ivy, resolver, capsys):
    delta_jars.jars_conf(settings(ivy))
    (ivy / "jars" / "io.delta_delta-storage-4.4.0.jar").unlink()
    delta_jars.jars_conf(settings(ivy))
    assert len(resolver) == 2
    (ivy / "jars" / "io.delta_delta-storage-4.4.0.jar").write_bytes(b"")
    delta_jars.jars_conf(settings(ivy))
    assert len(resolver) == 3


def test_other_resolution_settings_do_not_reuse_a_record(ivy, resolver):
    delta_jars.jars_conf(settings(ivy))
    delta_jars.jars_conf(settings(ivy, **{"spark.jars.repositories": "https://repo.example/maven2"}))
    assert resolver[1] == {
        "spark.jars.ivy": str(ivy),
        "spark.jars.packages": PACKAGE,
        "spark.jars.repositories": "https://repo.example/maven2",
    }
    assert len(list((ivy / "ackreplay-resolved").glob("*.json"))) == 2


def test_a_users_spark_jars_come_first(ivy, resolver):
    conf = delta_jars.jars_conf(settings(ivy, **{"spark.jars": "/opt/extra.jar"}))
    assert conf["spark.jars"].split(",")[0] == "/opt/extra.jar"
    assert len(conf["spark.jars"].split(",")) == 3


def test_a_failed_resolution_falls_back_to_spark_jars_packages(ivy, monkeypatch, capsys):
    def fail(resolution):
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.")

    monkeypatch.setattr(delta_jars, "resolve", fail)
    monkeypatch.setattr(delta_jars, "jvm_state", lambda: "none")
    assert delta_jars.jars_conf(settings(ivy)) == {"spark.jars.packages": PACKAGE}
    assert capsys.readouterr().err == NOTICE.format(ivy=ivy) + (
        "ackreplay: that failed ([JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port "
        "number.); starting Spark with its resolver's full log\n"
    )
    assert not (ivy / "ackreplay-resolved").exists()


def test_under_spark_submit_the_packages_are_left_to_it(ivy, resolver, monkeypatch, capsys):
    delta_jars.jars_conf(settings(ivy))  # a record exists
    capsys.readouterr()
    monkeypatch.undo()
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert delta_jars.jvm_state() == "submitted"
    assert delta_jars.jars_conf(settings(ivy)) == {"spark.jars.packages": PACKAGE}
    assert capsys.readouterr() == ("", "")


def test_a_running_jvm_is_not_resolved_for(ivy, resolver, monkeypatch, capsys):
    monkeypatch.setattr(delta_jars, "jvm_state", lambda: "running")
    assert delta_jars.jars_conf(settings(ivy)) == {"spark.jars.packages": PACKAGE}
    assert resolver == []
    assert capsys.readouterr() == ("", "")


def test_local_jar_files_are_used_as_listed(ivy, resolver):
    assert delta_jars.jars_conf(SparkSettings(jars=["/a.jar", "/b.jar"])) == {"spark.jars": "/a.jar,/b.jar"}
    assert resolver == []


def test_spark_resolver_runs_with_its_log_off_the_console(capfd):
    """The real resolution (a JVM of its own, no SparkContext): the jars spark-submit retrieved, and not one
    of Ivy's ~88 lines on this process's stdout or stderr."""
    jars = delta_jars.resolve({"spark.jars.packages": PACKAGE})
    ivy_jars = Path.home() / ".ivy2.5.2" / "jars"
    assert jars[0] == f"file://{ivy_jars}/io.delta_delta-spark_4.1_2.13-{DELTA_VERSION}.jar"
    assert f"file://{ivy_jars}/io.delta_delta-storage-{DELTA_VERSION}.jar" in jars
    assert len(jars) == 33  # delta-spark 4.4.0 and its dependencies as Ivy resolves them against Spark 4.1.1
    assert all(delta_jars._local_path(jar).is_file() for jar in jars)
    assert capfd.readouterr() == ("", "")
