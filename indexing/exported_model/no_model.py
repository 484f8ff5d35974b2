"""The model of an index built from vectors alone (``retrieval index build --vectors``): there is none.

Such an index answers searches by vector and takes items by vector; everything that needs the model
(a search or an add by image, ``/embed``, re-embedding in ``verify --deep``) is refused with
``NoModelError``, one sentence, a 409 over HTTP. ``NoModel`` stands where an ``OnnxEmbedder`` stands
(the service's snapshot, the index writer): it names the vectors (``model_sha256``: the sha256 of the
vector file they came from) and their dimension, and embeds nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval.indexing.common.errors import ModelMismatchError
from retrieval.indexing.exported_model.model_manifest import ModelManifest

NO_MODEL_BACKBONE = "none (built from vectors alone)"
"""The ``backbone`` of a vectors-only index's model description (``retrieval index info`` shows it)."""


class NoModelError(ModelMismatchError):
    """What needs a model was asked of an index built from vectors alone (a 409 over HTTP)."""


def no_model_error(what: str = "images") -> NoModelError:
    """The one sentence of every refusal."""
    return NoModelError(
        f"this index was built from vectors alone and has no model, so it cannot embed {what}; "
        "search and add by vector, or build the index with --model"
    )


class NoModel:
    """The model of a vectors-only index: what writing and serving the index read of a model, nothing more."""

    def __init__(self, manifest: ModelManifest, source: Path):
        self.manifest = manifest
        self.model_sha256 = manifest.onnx_sha256
        self.export_dir = Path(source)

    @classmethod
    def of_vectors(cls, vectors_sha256: str, dim: int, source: Path, created_at: str) -> NoModel:
        """The description of vectors of ``dim`` dimensions read from ``source`` (sha256 ``vectors_sha256``)."""
        manifest = ModelManifest(
            onnx_file="",
            onnx_sha256=vectors_sha256,
            embedding_dim=dim,
            backbone=NO_MODEL_BACKBONE,
            loss="none",
            config_hash="",
            created_at=created_at,
        )
        return cls(manifest, Path(source).resolve())

    @property
    def dim(self) -> int:
        return self.manifest.embedding_dim

    def embed_arrays(self, batch: np.ndarray) -> np.ndarray:
        raise no_model_error()

    def close(self) -> None:
        """Nothing to release."""


def has_model(model: ModelManifest) -> bool:
    """Whether an index's model description (``IndexManifest.model``) names a model, not vectors alone."""
    return model.backbone != NO_MODEL_BACKBONE
