"""The run's calibration: fitted on the validation classes with the chosen model (after its whitening stage),
searched among themselves and the training images (``LabelledSet.with_distractors``), measured on the test
classes, which fitted nothing; ``calibration.json`` in the run directory (``retrieval
export`` copies it into ``model.json``) and the ``calibration`` block of ``test_metrics.json``. The fits it was
chosen against (isotonic, the validation classes alone, every pair with or without a base-rate shift) are
measured by ``bench/bench_calibration.py``, not by every run (issue 55).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.score_calibration import ScoreCalibration
from retrieval.indexing.probability.fitting import fit_score_calibration
from retrieval.indexing.probability.held_out import calibration_document, held_out_reports, labelled_set
from retrieval.indexing.probability.pair_scores import LabelledSet
from retrieval.training.run.inputs.split_inputs import SplitInputs

CALIBRATION_NAME = "calibration.json"
DISTRACTOR_IMAGES = 20_000  # training images the validation queries are searched among, at most


def split_set(inputs: SplitInputs, model: nn.Module) -> LabelledSet:
    """The readable images of a split, embedded by ``model``, with their labels and query / gallery flags."""
    keep = ~inputs.dataset.bad_mask()
    records = inputs.dataset.records
    is_query = np.array([record.is_query for record in records], bool)[keep]
    is_gallery = np.array([record.is_gallery for record in records], bool)[keep]
    return labelled_set(inputs.embed(model)[keep], inputs.labels[keep], is_query, is_gallery)


def fitting_set(validation: SplitInputs, distractors: SplitInputs | None, model: nn.Module) -> LabelledSet:
    """The validation split's images, with every readable image of ``distractors`` (training images) added to
    their gallery."""
    fitted = split_set(validation, model)
    if distractors is None:
        return fitted
    extra = split_set(distractors, model)
    return fitted.with_distractors(extra.embeddings, extra.labels)


def fit_run_calibration(
    validation: SplitInputs | None,
    distractors: SplitInputs | None,
    test: SplitInputs,
    model: nn.Module,
    run_dir: Path,
) -> dict[str, Any]:
    """Fit on ``validation`` searched among itself and ``distractors``, write ``calibration.json`` (removed when
    there is nothing to fit on), and return ``test_metrics.json``'s ``calibration`` block: the test figures per
    kind and what the fit rests on."""
    target = run_dir / CALIBRATION_NAME
    fitted = fitting_set(validation, distractors, model) if validation is not None else None
    calibration = fit_score_calibration(fitted) if fitted is not None else None
    if calibration is None or fitted is None:
        target.unlink(missing_ok=True)
        return calibration_document(None, {})
    atomic_write_text(target, calibration.model_dump_json(indent=2) + "\n")
    held_out = split_set(test, model)
    document = calibration_document(calibration, held_out_reports(calibration, held_out))
    document["fitted_on"] = calibration.fitted_on.model_dump()
    return document


def run_calibration(run_dir: Path) -> ScoreCalibration | None:
    """The run's ``calibration.json``, if it has a readable one (a run without validation classes has none)."""
    try:
        return ScoreCalibration.model_validate_json((Path(run_dir) / CALIBRATION_NAME).read_text())
    except (OSError, ValueError):
        return None
