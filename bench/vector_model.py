"""The model manifest of benches that index random vectors instead of images: no ONNX model behind it."""

from __future__ import annotations

from retrieval.indexing.exported_model.model_manifest import ModelManifest, Preprocessing
from retrieval.indexing.store.shared.index_directory.index_manifest import utc_now

NO_MODEL_SHA256 = "0" * 64


def vectors_only_manifest(dim: int) -> ModelManifest:
    """A ``model.json`` for ``dim``-d vectors that came from no model (sha256 of zeros)."""
    return ModelManifest(
        onnx_sha256=NO_MODEL_SHA256,
        embedding_dim=dim,
        preprocessing=Preprocessing(resize=256, crop=224),
        backbone="none",
        loss="none",
        config_hash="bench",
        created_at=utc_now(),
    )
