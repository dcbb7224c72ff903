"""notebooks/explore.ipynb executed headless as a user would: every cell must run without error.

The notebook runs the pipeline on the bundled 3.9.1 trace into a fresh lakehouse (its gold tables do not
exist yet), then shows the policy summary and the charts; the outputs are checked for both.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks/explore.ipynb"
POLICIES = {"acks=1", "acks=all", "min.insync", "quorum=2", "quorum=3"}


def _outputs(nb, output_type: str) -> list[dict]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == output_type]


def test_notebook_runs_the_pipeline_and_draws_the_summary_and_charts(tmp_path, monkeypatch):
    lakehouse = tmp_path / "lakehouse"
    monkeypatch.setenv("ACKREPLAY_LAKEHOUSE", str(lakehouse))
    monkeypatch.setenv("ACKREPLAY_INPUT", str(REPO / "data/samples/trace-3.9.1-utc"))
    monkeypatch.setenv("ACKREPLAY_CONF", str(REPO / "conf/local.yaml"))
    nb = nbformat.read(NOTEBOOK, as_version=4)

    # Raises CellExecutionError (naming the cell and its traceback) if any cell fails.
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()

    assert (lakehouse / "gold/policy_summary/_delta_log").is_dir()
    assert (lakehouse / "report/report.html").is_file()
    tables = [o["data"]["text/html"] for o in _outputs(nb, "execute_result") if "text/html" in o.get("data", {})]
    summary = next(t for t in tables if "p999 ms" in t)
    assert all(f">{policy}<" in summary for policy in POLICIES), summary
    assert "lab-3.9.1" in summary
    images = [o for o in _outputs(nb, "display_data") if "image/png" in o.get("data", {})]
    # One P999-vs-loss chart per topic, and the report's four charts per topic.
    assert len(images) >= 5
