"""``retrieval eval --model``'s reference columns: the backbone the model was trained from, on the same images.

It needs the training run's ``config.yaml`` (the backbone and its pretrained weights), found in the
run directory passed as ``--model`` or next to its ``export/`` (``indexing.model.resolution.run_dir_of``,
which the command checks before it loads torch for this module). Without training-class images in
``--data`` to fit the reduction on, the evaluation goes on without the column and says why. A run with a whitening
stage (``whitening`` in its config) adds the "pretrained + whitening" column: its reference model with the
whitening fitted on it during training (``checkpoints/reference_whitened.pt``), the bar training must beat.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.evaluation import ReferenceRow
from retrieval.indexing.exported_model.model_manifest import ModelManifest
from retrieval.training.run.measures.reference_eval import reference_row, whitened_reference_row
from retrieval.training.run.outputs.run_dir import load_run_config


def fit_pool(
    all_records: Sequence[ImageRecord], evaluated: Sequence[ImageRecord], manifest: ModelManifest
) -> list[ImageRecord]:
    """Images of the model's training classes (every class when ``model.json`` lists none) that are not evaluated."""
    excluded = {record.label for record in evaluated}
    trained = set(manifest.training_classes)
    return [r for r in all_records if r.label not in excluded and (not trained or r.label in trained)]


def reference_column(
    run_dir: Path,
    all_records: Sequence[ImageRecord],
    evaluated: Sequence[ImageRecord],
    manifest: ModelManifest,
    ks: Sequence[int],
    *,
    announce: Callable[[str], object] | None = None,
) -> tuple[ReferenceRow | None, str]:
    """(the reference row of the run ``run_dir``'s starting backbone, a line about it) or (None, why there is
    none); ``announce`` is told what is embedded before the work starts."""
    pool = fit_pool(all_records, evaluated, manifest)
    if not pool:
        return None, "no reference column: --data holds no image of the model's training classes to fit it on"
    if announce is not None:
        announce(
            f"reference column: embedding the {len(evaluated)} evaluated images and a sample of the "
            f"{len(pool)} training-class images with the starting backbone (--no-reference skips it)"
        )
    cfg = load_run_config(run_dir)
    try:
        row = reference_row(cfg, evaluated, pool, dim=manifest.embedding_dim, ks=ks, run_dir=run_dir)
    except RetrievalError as error:  # e.g. the pretrained weights are not on this machine
        return None, f"no reference column: {error}"
    return row, _describe(row, cfg.model.pretrained)


def whitened_reference_column(
    run_dir: Path, evaluated: Sequence[ImageRecord], ks: Sequence[int]
) -> tuple[ReferenceRow | None, str | None]:
    """(the "pretrained + whitening" row, a line about it), or (None, None) for a run without a whitening stage."""
    row = whitened_reference_row(load_run_config(run_dir), evaluated, ks, run_dir)
    if row is None:
        return None, None
    details = row.details
    return row, (
        f"{row.name} column: the reference with the run's whitening ({details['method']}, {details['dim']} dims "
        f"-> {details['bits']} bits), fitted on {details['fit_images']} training-class images"
    )


def _describe(row: ReferenceRow, weights: str | None) -> str:
    """One line saying what the column is: whose pooled features, and how they were reduced."""
    details = row.details
    reduced = f"PCA to {details['dim']}" if details["reduction"] == "pca" else "not reduced, centred"
    fitted = details["fit_images"]
    fitted = f"{fitted} training-class images" if isinstance(fitted, int) else fitted
    how = f"{details['feature_dim']}-d, {reduced}, fitted on {fitted}"
    if weights:
        return f"{row.name} column: {details['backbone']} with its {weights} weights, pooled features ({how})"
    return (
        f"{row.name} column: the model was trained from random weights, so the reference is its random "
        f"initial {details['backbone']} backbone, pooled features ({how})"
    )
