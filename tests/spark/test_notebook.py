"""notebooks/10_spark_audit.ipynb runs top to bottom."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "10_spark_audit.ipynb"


def test_spark_audit_notebook_runs() -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
