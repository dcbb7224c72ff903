"""notebooks/explore.ipynb executed headless as a user would: every cell must run without error.

The notebook opens a lakehouse holding the bundled 3.9.1 trace's tables (a copy of the test session's
run of it, tests/conftest.py), shows the policy summary and draws the charts; the outputs are checked
for both. Its first cells run the pipeline only when the gold tables are missing, through `ackreplay
run`'s own entry point (`ackreplay.pipeline.run`, tested by test_incremental.py); running it again
here would start a second pipeline run of the trace in the kernel's JVM for nothing new.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks/explore.ipynb"
TRACE = REPO / "data/samples/trace-3.9.1-utc"
POLICIES = {"acks=1", "acks=all", "min.insync", "quorum=2"}


def _outputs(nb, output_type: str) -> list[dict]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == output_type]


def test_notebook_shows_the_summary_and_draws_the_charts(tmp_path, monkeypatch, sample_run):
    """The notebook, run by a Jupyter kernel of its own on the session's run of a bundled trace, prints the
    summary and draws the report's charts. About a minute and a half: the kernel starts its own Python and a
    cold Spark JVM, which then reads the gold tables and writes the report as a user's would."""
    lakehouse = Path(sample_run(TRACE, gold=True).copy_lakehouse(tmp_path / "lakehouse"))
    assert not (lakehouse / "report").exists()  # the notebook writes the report
    monkeypatch.setenv("ACKREPLAY_LAKEHOUSE", str(lakehouse))
    monkeypatch.setenv("ACKREPLAY_INPUT", str(TRACE))
    monkeypatch.setenv("ACKREPLAY_CONF", str(REPO / "conf/local.yaml"))
    nb = nbformat.read(NOTEBOOK, as_version=4)

    # Raises CellExecutionError (naming the cell and its traceback) if any cell fails.
    NotebookClient(
        nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()

    printed = "".join(o.get("text", "") for o in _outputs(nb, "stream"))
    assert "running the pipeline" not in printed  # it read the tables it was given
    # the decision for conf/local.yaml's target, as `ackreplay run` prints it (README, "The decision")
    assert (
        "decision for the target P999 <= 1,000 ms, lost acks <= 0: no policy meets it on any of the 1 topic\n"
        in printed
    )
    assert "nothing meets the target; closest: acks=all@lag=3000 (P999 6,735.0 ms > 1,000 ms)" in printed
    assert (lakehouse / "report/report.html").is_file()
    tables = [o["data"]["text/html"] for o in _outputs(nb, "execute_result") if "text/html" in o.get("data", {})]
    summary = next(t for t in tables if "p999 ms" in t)
    assert all(f">{policy}<" in summary for policy in POLICIES), summary
    assert "lab-3.9.1" in summary
    figures = [
        o["data"]["application/vnd.plotly.v1+json"]
        for o in _outputs(nb, "display_data")
        if "application/vnd.plotly.v1+json" in o.get("data", {})
    ]
    # the P999-vs-risk chart of the one topic, then the report's four charts of it, each with a trace per policy
    titles = [f["layout"]["title"]["text"].split("<br>")[0] for f in figures]
    assert titles == [
        "lab-3.9.1 / ackreplay-lab",
        "Produce latency over time — lab-3.9.1 / ackreplay-lab",
        "Produce latency CDF per policy — lab-3.9.1 / ackreplay-lab",
        "Durability risk per window — lab-3.9.1 / ackreplay-lab",
        "P999 latency vs durability risk per policy — lab-3.9.1 / ackreplay-lab",
    ]
    policies = ["acks=all", "acks=all@lag=3000", "acks=all@lag=30000", "min.insync", "quorum=2", "acks=1"]
    # the CDF: every policy of conf/local.yaml in reading order, then the broker's view of each
    assert [t["name"] for t in figures[2]["data"]] == policies + [f"{p}, broker's view" for p in policies]
