"""Fit ``ScoreCalibration`` on labelled embeddings (the validation classes): a curve per score kind through
every query-gallery pair, what it rests on, and the base rate searches are shifted to."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import numpy as np

from retrieval.indexing.calibration.isotonic import fit_isotonic
from retrieval.indexing.calibration.pair_scores import LabelledSet, all_pairs
from retrieval.indexing.calibration.score_calibration import (
    MIN_CALIBRATION_CLASSES,
    CalibrationCurve,
    CalibrationFit,
    CalibrationKind,
    ScoreCalibration,
    calibration_sentence,
)

CurveFit = Callable[[np.ndarray, np.ndarray], CalibrationCurve]
KINDS: tuple[CalibrationKind, ...] = get_args(CalibrationKind)


def fit_score_calibration(
    validation: LabelledSet, serving_base_rate: float | None = None, fit: CurveFit = fit_isotonic
) -> ScoreCalibration | None:
    """The calibration fitted on ``validation``; None when it holds no pair of a class (nothing to fit).
    ``serving_base_rate``: where searches' probabilities are shifted to (None: the validation's own)."""
    curves: dict[CalibrationKind, CalibrationCurve] = {}
    for kind in KINDS:
        scores, same, queries = all_pairs(validation, kind)
        if not same.any():
            return None
        curves[kind] = fit(scores, same)
    classes = len(np.unique(validation.labels[validation.queries]))
    record = CalibrationFit(classes=classes, queries=queries, pairs=len(same), same_class_pairs=int(same.sum()))
    target = serving_base_rate if serving_base_rate and 0 < serving_base_rate < 1 else record.base_rate
    return ScoreCalibration(
        curves=curves,
        fitted_on=record,
        serving_base_rate=target,
        reliable=classes >= MIN_CALIBRATION_CLASSES,
        sentence=calibration_sentence(record, target),
    )
