"""``retrieval index verify``'s checks of an index's model copy (``INDEX/model``): what search needs of it.

``model_copy_problem``: the copy loads (``OnnxEmbedder``: its ``model.onnx`` is the one its ``model.json``
names, and the preprocessing fits the graph's input shape, which is also what the service checks when
it loads an index), it is the model the index was built with, and its ``model.onnx`` and ``model.json``
together still have the sha256 the index recorded (``model_files_sha256``: a changed ``resize`` or
``mean`` changes every query embedding without breaking anything visible), and, for a model with a text
side, its ``text.onnx`` and ``tokenizer.json`` are the ones ``model.json`` names (``text_copy_problem``). ``reembedding_problem``
(``verify --deep``): a sample of stored images embedded again with the copy, against their stored
vectors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval.indexing.common.artifact_names import INDEX_MODEL_SUBDIR
from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.exported_model.model_manifest import ModelManifest, model_files_sha256
from retrieval.indexing.exported_model.no_model import has_model
from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder, l2_normalize
from retrieval.indexing.exported_model.text_encoder import text_encoder_of
from retrieval.indexing.store.files.segment_storage.segment_set import SegmentSet
from retrieval.indexing.store.shared.index_directory.index_manifest import IndexManifest
from retrieval.indexing.store.shared.items.items_db import ItemsDb

MIN_COSINE = 0.99  # a stored vector (float16) and the same image embedded again agree far closer
DEEP_SAMPLE = 32  # stored images embedded again by `verify --deep`


def model_copy_problem(index_dir: Path, manifest: IndexManifest, notes: list[str]) -> str | None:
    """Why the model copy cannot serve the index's searches (see the module); None when it can."""
    if not has_model(manifest.model):
        notes.append("built from vectors alone: no model copy to check (it answers searches by vector only)")
        return None
    model_dir = Path(index_dir) / INDEX_MODEL_SUBDIR
    try:
        embedder = OnnxEmbedder(model_dir, threads=1, providers="cpu")
    except RetrievalError as error:
        return f"the model copy in {INDEX_MODEL_SUBDIR}/ cannot be used ({error})"
    except OSError as error:
        return f"the model copy in {INDEX_MODEL_SUBDIR}/ is unreadable ({error})"
    embedder.close()
    if embedder.model_sha256 != manifest.model_sha256:
        return f"{INDEX_MODEL_SUBDIR}/{embedder.manifest.onnx_file} is not the model the index was built with"
    if manifest.model_files_sha256 is None:
        notes.append("manifest.json records no sha256 of the model's settings (an older version): not checked")
    return model_settings_problem(model_dir, embedder.manifest, manifest) or text_copy_problem(
        model_dir, embedder.manifest
    )


def text_copy_problem(model_dir: Path, model: ModelManifest) -> str | None:
    """Why the copy's text side (text.onnx, tokenizer.json: their sha256s in model.json) cannot embed texts;
    None when it can or when the model has none."""
    if model.text is None:
        return None
    try:
        text_encoder_of(model_dir, model, threads=1)
    except RetrievalError as error:
        return f"the text side of the model copy in {INDEX_MODEL_SUBDIR}/ cannot be used ({error})"
    return None


def model_settings_problem(model_dir: Path, model: ModelManifest, manifest: IndexManifest) -> str | None:
    """Why the model copy's model.onnx and model.json are not what the index was built with (their sha256
    against ``model_files_sha256``); None when they are, or when the index is too old to record it. The
    service checks this at load too (``load_checks``)."""
    if manifest.model_files_sha256 is None or model_files_sha256(model_dir, model) == manifest.model_files_sha256:
        return None
    return (
        f"{INDEX_MODEL_SUBDIR}/ has changed since the index was built: model.onnx and model.json no longer have "
        "the sha256 the index recorded (a changed preprocessing setting embeds queries differently from the "
        "stored vectors); restore the model copy or rebuild the index"
    )


def reembedding_problem(
    index_dir: Path, manifest: IndexManifest, db: ItemsDb, segments: SegmentSet, notes: list[str], sample: int
) -> str | None:
    """Embed up to ``sample`` stored images again with the model copy; the first item whose stored vector
    differs from its new embedding, as a sentence (None: all agree)."""
    if manifest.postprocess.dba is not None or not has_model(manifest.model):
        notes.append(
            "--deep: the stored vectors carry a DBA augmentation or the index has no model; not embedded again"
        )
        return None
    items = [item for item in db.items(_spread(segments.ids, sample * 4)) if item and Path(item.path).is_file()]
    items = items[:sample]
    if not items:
        notes.append("--deep: no stored image could be found to embed again")
        return None
    embedder = OnnxEmbedder(Path(index_dir) / INDEX_MODEL_SUBDIR, threads=1, providers="cpu")
    result = embedder.embed_paths([Path(item.path) for item in items], progress=False)
    embedder.close()
    kept = [items[position] for position in result.ok]
    stored = l2_normalize(segments.embeddings_of(np.asarray([item.id for item in kept], dtype=np.int64)))
    cosines = np.sum(stored * l2_normalize(result.embeddings), axis=1)
    if len(cosines) and cosines.min() < MIN_COSINE:
        worst = int(cosines.argmin())
        return (
            f"item {kept[worst].id}'s image embedded again with {INDEX_MODEL_SUBDIR}/ differs from its stored vector "
            f"(cosine {cosines[worst]:.3f}): the model copy or its preprocessing is not what the items were "
            "embedded with; restore it or rebuild the index"
        )
    notes.append(f"--deep: {len(kept)} stored images embedded again agree with their stored vectors")
    return None


def _spread(ids: np.ndarray, count: int) -> list[int]:
    """Up to ``count`` ids spread evenly over ``ids``."""
    if len(ids) <= count:
        return [int(i) for i in ids]
    return [int(ids[position]) for position in np.linspace(0, len(ids) - 1, count).astype(int)]
