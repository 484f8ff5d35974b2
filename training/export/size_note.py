"""Why an exported model's size differs from the configured ``--embedding-dim`` (``retrieval export``)."""

from __future__ import annotations

from retrieval.indexing.exported_model.model_manifest import ModelManifest


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
    if verdict is not None and (verdict.decision in ("reference", "no-training") or verdict.best_epoch == 0):
        why = (
            "the verdict kept the starting backbone (epoch 0), whose pooled features are reduced by a PCA fitted "
            "on the training images, and a PCA keeps no more dimensions than the images it is fitted on or the "
            "backbone's own feature width, whichever is smaller"
        )
    else:
        why = "the whitening fitted after training (the config's whitening section) chose that width"
    return f"the model is {dim}-d, not the configured --embedding-dim {configured_dim}: {why}"
