"""What a service checks when it loads an index, and the choice to verify it whole (``--verify-on-load``).

Always, in milliseconds beside the model's load: the manifest (readable, this version's format, its
fields with the sha256 it recorded of them: ``manifest_edit_problem``), the model copy (``model.onnx``
is the one ``model.json`` names, the preprocessing fits the graph's input, it is the model the index
was built with, and ``model.onnx`` with ``model.json`` have the sha256 the index recorded:
``model_settings_problem``), and, when the store opens, the item table's generation against the
manifest's. What only ``retrieval index verify`` reads (every byte of every file against its sha256,
every vector and record) is checked at load with ``verify``: its cost grows with the index
(``bench/bench_verify_on_load.py``; docs/operations.md).
"""

from __future__ import annotations

from pathlib import Path

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
from retrieval.indexing.common.errors import IndexFormatError
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.indexing.store.maintenance.index_verify import verify_index
from retrieval.indexing.store.maintenance.model_check import model_settings_problem
from retrieval.indexing.store.shared.index_directory.index_manifest import load_index_manifest, manifest_edit_problem


def check_on_load(index_dir: Path, model: ModelManifest, *, verify: bool = False) -> None:
    """Refuse (IndexFormatError, one sentence naming the index) an index whose manifest was edited or whose
    model copy (``model``: its loaded ``model.json``) is not what the index recorded; ``verify`` also runs
    ``retrieval index verify``'s checks of every file, vector and record."""
    index_dir = Path(index_dir)
    manifest = load_index_manifest(index_dir)
    problem = manifest_edit_problem(index_dir) or model_settings_problem(
        index_dir / INDEX_MODEL_SUBDIR, model, manifest
    )
    if problem:
        raise IndexFormatError(f"{index_dir}: {problem}")
    if verify:
        verify_index(index_dir)
