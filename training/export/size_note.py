"""Why an exported model's size differs from the configured ``--embedding-dim`` (``retrieval export``)."""

from __future__ import annotations

from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.training.config.train_config import ModelConfig

DEFAULT_DIM = ModelConfig.model_fields["embedding_dim"].default


def size_note(manifest: ModelManifest, configured_dim: int | None) -> str | None:
    """One sentence when the model's embedding (per ensemble member) is not ``configured_dim`` wide: the
    verdict kept the starting backbone, whose reference reduction is at most as wide as the images its PCA
    was fitted on or as the backbone's own features; or a fitted whitening chose another width. None
    when the sizes agree or none was configured."""
    if configured_dim is None:
        return None
    members = max(manifest.ensemble_members, 1)
    dim = manifest.embedding_dim // members
    if dim == configured_dim:
        return None
    verdict = manifest.verdict
    configured = f"--embedding-dim {configured_dim}" + (" (the default)" if configured_dim == DEFAULT_DIM else "")
    if verdict is not None and (verdict.decision in ("reference", "no-training") or verdict.best_epoch == 0):
        start = "no epoch was trained (--epochs 0)" if verdict.decision == "no-training" else "the verdict kept epoch 0"
        why = (
            f"{start}, so the model is the starting backbone's pooled features, which have no layer of that size "
            f"(--embedding-dim sizes the layer training adds); they are narrowed by a PCA only where they are wider "
            f"than that, to at most one dimension per training image, and else kept at the backbone's own width"
        )
    else:
        why = "the whitening fitted after training (the config's whitening section) chose that width"
    return f"the model is {dim}-d, not the configured {configured}: {why}"
