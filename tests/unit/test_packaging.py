"""Where users run it: the wheel, the spark-submit entry points and the Databricks bundle, checked offline.

The Databricks CLI is not available here, so the bundle is checked for what the workspace would reject
or run wrongly: every task's file exists and is the entry point of its stage, its parameters parse with
the CLI's own parser and name a conf that validates, every variable it uses is declared, and the tasks
run the stages in order.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from ackreplay.cli import _parser
from ackreplay.config import load_config

REPO = Path(__file__).resolve().parents[2]
# The design's top-level folders, installed as ackreplay.<folder> (the links ackreplay/<folder> -> ../<folder>)
NAMESPACED = ("jobs", "schemas", "transforms")
STAGES = ("ingest", "replay", "gold", "report")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(out)], check=True)
    (built,) = out.glob("ackreplay-*.whl")
    return built


def test_wheel_holds_every_module_of_the_packages(wheel):
    """Every tracked module, the top-level folders' under `ackreplay/`, and no top-level package but `ackreplay`:
    a runtime's site-packages (a Databricks cluster's) gets no generic `transforms`, `schemas` or `jobs`."""
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(
        ["git", "ls-files", "--", "ackreplay/*.py", *(f"{p}/*.py" for p in NAMESPACED)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len([t for t in tracked if t.startswith("transforms/")]) > 10, tracked
    installed = {t if t.startswith("ackreplay/") else f"ackreplay/{t}" for t in tracked}
    assert sorted(installed - names) == []
    assert {n.split("/")[0] for n in names} == {"ackreplay", next(n.split("/")[0] for n in names if ".dist-info/" in n)}


@pytest.mark.parametrize("folder", NAMESPACED)
def test_each_top_level_folder_is_its_ackreplay_package(folder):
    """ackreplay/<folder> is a link to the top-level folder (in git too), so the checkout, mypy, an editable install
    and the wheel all see one module under one name."""
    link = REPO / "ackreplay" / folder
    assert link.is_symlink() and link.resolve() == (REPO / folder).resolve()
    mode = subprocess.run(["git", "ls-files", "-s", f"ackreplay/{folder}"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.split()[0]  # fmt: skip
    assert mode == "120000"  # a symbolic link


def test_wheel_leaves_spark_to_the_runtime(wheel):
    with zipfile.ZipFile(wheel) as z:
        metadata_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(z.read(metadata_name).decode())
        entry_points = z.read(metadata_name.replace("METADATA", "entry_points.txt")).decode()
    requires = metadata.get_all("Requires-Dist")
    unconditional = [r for r in requires if "extra ==" not in r]
    spark_extra = [r.split(";")[0].strip() for r in requires if 'extra == "spark"' in r]
    assert not [r for r in unconditional if r.startswith(("pyspark", "delta-spark", "delta_spark"))]
    assert spark_extra == ["pyspark==4.1.1", "delta-spark==4.4.0"]
    assert "ackreplay = ackreplay.cli:main" in entry_points


def _pins(path: Path) -> dict[str, Version]:
    pins = [Requirement(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert all(len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==" for r in pins), path
    return {canonicalize_name(r.name): Version(next(iter(r.specifier)).version) for r in pins}


def test_dependencies_are_ranges_whose_ends_are_the_tested_constraints(wheel):
    """The wheel installs beside a runtime's own pandas, NumPy and Arrow: each dependency is a range from a tested
    lower bound (constraints-lowest.txt, `make test-lowest`) to below its next major release, and `make setup`
    installs a release inside it (constraints.txt), for every dependency and nothing else."""
    with zipfile.ZipFile(wheel) as z:
        metadata_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(z.read(metadata_name).decode())
    required = {
        canonicalize_name(r.name): r.specifier
        for r in map(Requirement, metadata.get_all("Requires-Dist"))
        if r.marker is None
    }
    lowest, tested = _pins(REPO / "constraints-lowest.txt"), _pins(REPO / "constraints.txt")
    assert set(lowest) == set(tested) == set(required)
    for name, specifier in required.items():
        bounds = {s.operator: Version(s.version) for s in specifier}
        assert set(bounds) == {">=", "<"}, (name, str(specifier))
        assert lowest[name] == bounds[">="], name
        assert tested[name] in specifier, name
        assert bounds["<"] == Version(str(tested[name].major + 1)), name  # the next major release is not tested


@pytest.mark.parametrize("stage", [*STAGES, "run", "export"])
def test_job_entry_point_runs_its_cli_stage(stage):
    """jobs/<stage>.py stays thin: it only calls ackreplay.cli.main with its stage and the arguments."""
    tree = ast.parse((REPO / "jobs" / f"{stage}.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "main"]
    assert len(calls) == 1
    (argv,) = calls[0].args
    assert isinstance(argv, ast.List) and ast.literal_eval(argv.elts[0]) == stage
    assert isinstance(argv.elts[1], ast.Starred)
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert defs == []


@pytest.fixture(scope="module")
def bundle() -> dict:
    return yaml.safe_load((REPO / "databricks.yml").read_text())


def _substitute(value: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{([^}]+)\}", lambda m: variables[m.group(1)], value)


def _references(node) -> set[str]:
    text = yaml.safe_dump(node)
    return set(re.findall(r"\$\{([^}]+)\}", text))


def test_bundle_declares_every_variable_it_uses(bundle):
    used = {ref.removeprefix("var.") for ref in _references(bundle) if ref.startswith("var.")}
    assert used <= set(bundle["variables"]), used - set(bundle["variables"])
    others = {ref for ref in _references(bundle) if not ref.startswith("var.")}
    assert others <= {
        "workspace.file_path",
        "workspace.current_user.userName",
        "bundle.target",
        "bundle.name",
        "resources.schemas.ackreplay.name",
        "resources.volumes.reports.name",
    }
    assert set(bundle["targets"]) == {"dev", "prod"}
    # production runs as a service principal; development mode's prefixed names reach the tasks (no task names
    # the schema by the variable, which a dev deployment would share with production)
    assert bundle["targets"]["prod"]["run_as"] == {"service_principal_name": "${var.service_principal}"}
    assert "var.schema" not in _references(bundle["resources"]["jobs"])


def test_bundle_job_runs_the_stages_in_order_through_the_entry_points(bundle):
    (job,) = bundle["resources"]["jobs"].values()
    tasks = job["tasks"]
    assert [t["task_key"] for t in tasks] == list(STAGES)
    assert [t.get("depends_on") for t in tasks] == [None] + [[{"task_key": s}] for s in STAGES[:-1]]
    assert job["schedule"]["timezone_id"] == "UTC" and job["max_concurrent_runs"] == 1
    cluster_keys = {c["job_cluster_key"] for c in job["job_clusters"]}
    # The wheel the artifact build writes is what every task installs.
    build = bundle["artifacts"]["ackreplay_wheel"]["build"]
    assert "-w dist" in build
    fake = {
        "workspace.file_path": str(REPO),
        "var.lakehouse": "abfss://lake@acct.dfs.core.windows.net/ackreplay",
        "var.catalog": "main",
        "resources.schemas.ackreplay.name": "ackreplay",
        "resources.volumes.reports.name": "reports",
        "var.input": "abfss://logs@acct.dfs.core.windows.net/kafka",
    }
    for task in tasks:
        stage = task["task_key"]
        assert task["job_cluster_key"] in cluster_keys
        assert task["libraries"] == [{"whl": "./dist/*.whl"}]
        assert task["max_retries"] >= 1
        python_file = REPO / task["spark_python_task"]["python_file"]
        assert python_file == REPO / "jobs" / f"{stage}.py" and python_file.is_file()
        argv = [_substitute(p, fake) for p in task["spark_python_task"]["parameters"]]
        args = _parser().parse_args([stage, *argv])  # what jobs/<stage>.py hands to the CLI
        assert args.lakehouse == fake["var.lakehouse"]
        config = load_config(args.conf)
        assert config.spark.master is None  # the runtime owns the session
        if stage != "report":
            assert args.metastore == "main.ackreplay"


def test_bundle_report_goes_to_the_bundles_volume(bundle):
    volume = bundle["resources"]["volumes"]["reports"]
    (job,) = bundle["resources"]["jobs"].values()
    report = next(t for t in job["tasks"] if t["task_key"] == "report")
    out = report["spark_python_task"]["parameters"]
    assert volume["schema_name"] == "${resources.schemas.ackreplay.name}"
    assert out[out.index("--out") + 1] == (
        "/Volumes/${var.catalog}/${resources.schemas.ackreplay.name}/${resources.volumes.reports.name}/latest"
    )
