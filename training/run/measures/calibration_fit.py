"""The run's calibration: fitted on the validation classes with the chosen model (after its whitening stage),
measured on the test classes, which fitted nothing; ``calibration.json`` in the run directory (``retrieval
export`` copies it into ``model.json``) and the ``calibration`` block of ``test_metrics.json``.

Searches take the test classes' base rate (``ScoreCalibration.serving_base_rate``): a gallery of unseen classes
resembles them more than the fewer validation classes. The block also says what the test ECE would be had the
probabilities kept the validation base rate (``without_base_rate_shift``), the cost docs/results.md reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from retrieval.indexing.calibration.fitting import fit_score_calibration
from retrieval.indexing.calibration.held_out import calibration_document, held_out_reports, labelled_set
from retrieval.indexing.calibration.logistic import fit_logistic
from retrieval.indexing.calibration.pair_scores import LabelledSet
from retrieval.indexing.calibration.reliability import CalibrationReport
from retrieval.indexing.calibration.score_calibration import ScoreCalibration
from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.training.run.inputs.split_inputs import SplitInputs

CALIBRATION_NAME = "calibration.json"


def split_set(inputs: SplitInputs, model: nn.Module) -> LabelledSet:
    """The readable images of a split, embedded by ``model``, with their labels and query / gallery flags."""
    keep = ~inputs.dataset.bad_mask()
    records = inputs.dataset.records
    is_query = np.array([record.is_query for record in records], bool)[keep]
    is_gallery = np.array([record.is_gallery for record in records], bool)[keep]
    return labelled_set(inputs.embed(model)[keep], inputs.labels[keep], is_query, is_gallery)


def fit_run_calibration(
    validation: SplitInputs | None, test: SplitInputs, model: nn.Module, run_dir: Path
) -> dict[str, Any]:
    """Fit on ``validation``, write ``calibration.json`` (removed when there is nothing to fit on), and return
    ``test_metrics.json``'s ``calibration`` block: the test figures per kind, with and without the shift."""
    target = run_dir / CALIBRATION_NAME
    held_out = split_set(test, model)
    fitted = split_set(validation, model) if validation is not None else None
    calibration = fit_score_calibration(fitted, held_out.base_rate()) if fitted is not None else None
    if calibration is None or fitted is None:
        target.unlink(missing_ok=True)
        return calibration_document(None, {})
    atomic_write_text(target, calibration.model_dump_json(indent=2) + "\n")
    document = calibration_document(calibration, held_out_reports(calibration, held_out))
    document["fitted_on"] = calibration.fitted_on.model_dump()
    document.update(_alternatives(calibration, fitted, held_out))
    return document


def _alternatives(calibration: ScoreCalibration, fitted: LabelledSet, held_out: LabelledSet) -> dict[str, Any]:
    """What the choices cost, on the same test hits: keeping the validation base rate, and Platt's fit."""
    unshifted = held_out_reports(calibration, held_out, shift=False)
    logistic = fit_score_calibration(fitted, held_out.base_rate(), fit=fit_logistic)
    platt = held_out_reports(logistic, held_out) if logistic is not None else {}
    return {
        "without_base_rate_shift": {kind: _figures(report) for kind, report in unshifted.items()},
        "logistic_fit": {kind: _figures(report) for kind, report in platt.items()},
    }


def _figures(report: CalibrationReport) -> dict[str, Any]:
    """ECE and the precision realised at the 0.8 cut-off."""
    at_80 = next((cut.precision for cut in report.cutoffs if cut.cutoff == 0.8), None)
    return {"ece": report.ece, "precision_at_0.8": at_80}


def run_calibration(run_dir: Path) -> ScoreCalibration | None:
    """The run's ``calibration.json``, if it has a readable one (a run without validation classes has none)."""
    try:
        return ScoreCalibration.model_validate_json((Path(run_dir) / CALIBRATION_NAME).read_text())
    except (OSError, ValueError):
        return None
