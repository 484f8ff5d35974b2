"""``retrieval eval --model``'s reference column: the backbone the model was trained from, on the same images.

It needs the training run's ``config.yaml`` (the backbone and its pretrained weights), found in the
run directory passed as ``--model`` or next to its ``export/``, and torch, imported only here and
only when the column is computed. Without them, or without training-class images in ``--data`` to
fit the reduction on, the evaluation goes on without the column and says why. A run with a whitening
stage (``whitening`` in its config) adds the "pretrained + whitening" column: its reference model with the
whitening fitted on it during training (``checkpoints/reference_whitened.pt``), the bar training must beat.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import typer

from retrieval.indexing.common.artifact_names import RUN_CONFIG_NAME, RUN_EXPORT_SUBDIR
from retrieval.indexing.common.errors import RetrievalError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.evaluation import ReferenceRow
from retrieval.indexing.model.manifest import ModelManifest
from retrieval.indexing.model.resolution import resolve_export_dir


def run_dir_of(model: Path) -> Path | None:
    """The training run directory of ``--model``: itself, or the run whose ``export/`` it is."""
    if (Path(model) / RUN_CONFIG_NAME).is_file():
        return Path(model)
    export_dir = resolve_export_dir(model)
    run_dir = export_dir.parent
    return run_dir if export_dir.name == RUN_EXPORT_SUBDIR and (run_dir / RUN_CONFIG_NAME).is_file() else None


def fit_pool(
    all_records: Sequence[ImageRecord], evaluated: Sequence[ImageRecord], manifest: ModelManifest
) -> list[ImageRecord]:
    """Images of the model's training classes (every class when ``model.json`` lists none) that are not evaluated."""
    excluded = {record.label for record in evaluated}
    trained = set(manifest.training_classes)
    return [r for r in all_records if r.label not in excluded and (not trained or r.label in trained)]


def reference_column(
    model: Path,
    all_records: Sequence[ImageRecord],
    evaluated: Sequence[ImageRecord],
    manifest: ModelManifest,
    ks: Sequence[int],
    *,
    progress: bool = True,
) -> tuple[ReferenceRow | None, str]:
    """(the reference row, a line about it) or (None, why there is none)."""
    run_dir = run_dir_of(model)
    if run_dir is None:
        return None, f"no reference column: no training run {RUN_CONFIG_NAME} with {model} (pass the run directory)"
    if importlib.util.find_spec("torch") is None:
        return None, "no reference column: it needs torch (pip install 'retrieval[train]')"
    pool = fit_pool(all_records, evaluated, manifest)
    if not pool:
        return None, "no reference column: --data holds no image of the model's training classes to fit it on"
    if progress:
        typer.echo(
            f"reference column: embedding the {len(evaluated)} evaluated images and a sample of the "
            f"{len(pool)} training-class images with the starting backbone (--no-reference skips it)",
            err=True,
        )
    from retrieval.training.run.measures.reference_eval import reference_row
    from retrieval.training.run.outputs.run_dir import load_run_config

    cfg = load_run_config(run_dir)
    try:
        row = reference_row(cfg, evaluated, pool, dim=manifest.embedding_dim, ks=ks, run_dir=run_dir)
    except RetrievalError as error:  # e.g. the pretrained weights are not on this machine
        return None, f"no reference column: {error}"
    return row, _describe(row, cfg.model.pretrained)


def whitened_reference_column(
    model: Path, evaluated: Sequence[ImageRecord], ks: Sequence[int]
) -> tuple[ReferenceRow | None, str | None]:
    """(the "pretrained + whitening" row, a line about it), or (None, None) for a run without a whitening stage."""
    run_dir = run_dir_of(model)
    if run_dir is None or importlib.util.find_spec("torch") is None:
        return None, None
    from retrieval.training.run.measures.reference_eval import whitened_reference_row
    from retrieval.training.run.outputs.run_dir import load_run_config

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
