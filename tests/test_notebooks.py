"""Every notebook in docs/notebooks runs from top to bottom without an error (executed with
nbclient in a fresh kernel; the committed outputs are not touched)."""
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "docs" / "notebooks").glob("*.ipynb"))


def test_there_is_one_notebook_per_part_of_the_notes():
    assert len(NOTEBOOKS) == 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    # each notebook shows something: a plot or printed results
    kinds = {o.get("output_type") for c in nb.cells if c.cell_type == "code" for o in c.outputs}
    assert kinds & {"display_data", "stream"}
