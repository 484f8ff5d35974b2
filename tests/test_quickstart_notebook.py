"""docs/quickstart.ipynb runs as written (nbclient, in an empty folder, offline): from a folder of images to
a search whose pictures are shown inline, through the flat ``from retrieval import ...`` API."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "quickstart.ipynb"


@pytest.mark.slow
def test_the_quickstart_notebook_runs_and_shows_pictures(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    pictures = [output["data"]["image/png"] for output in outputs if "image/png" in output.get("data", {})]
    assert len(pictures) == 2, "the search and the filtered search are shown as pictures"
    first = Image.open(io.BytesIO(base64.b64decode(pictures[0])))
    assert first.width == 7 * 112  # the query and its 6 hits
    text = "".join(output.get("text", "") for output in outputs)
    assert "no training epoch ran: the pretrained backbone is the run's model" in text
    assert "trained MAP@R" in text and "pretrained" in text
    assert (tmp_path / "runs/pretrained/export/model.onnx").is_file() and (tmp_path / "index").is_dir()
