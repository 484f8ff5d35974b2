"""Fit ``ScoreCalibration`` on labelled embeddings (the validation classes, searched among themselves and the
training images, ``LabelledSet.with_distractors``): a curve per score kind through each query's first hits,
Platt's logistic fit (chosen on class halves of the validation and training classes, docs/results.md), and what
it rests on."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import numpy as np

from retrieval.indexing.common.score_calibration import (
    HITS_PER_QUERY,
    MIN_CALIBRATION_CLASSES,
    CalibrationCurve,
    CalibrationFit,
    CalibrationKind,
    LogitInterval,
    ScoreCalibration,
    calibration_sentence,
)
from retrieval.indexing.probability.interval import jackknife_interval
from retrieval.indexing.probability.logistic import fit_logistic, logistic_parameters
from retrieval.indexing.probability.pair_scores import LabelledSet, top_hits_by_class

CurveFit = Callable[[np.ndarray, np.ndarray], CalibrationCurve]
KINDS: tuple[CalibrationKind, ...] = get_args(CalibrationKind)


def fit_score_calibration(
    validation: LabelledSet, fit: CurveFit = fit_logistic, k: int = HITS_PER_QUERY
) -> ScoreCalibration | None:
    """The calibration fitted on ``validation``'s first ``k`` hits per query; None when no hit shares its
    query's class (nothing to fit)."""
    curves: dict[CalibrationKind, CalibrationCurve] = {}
    intervals: dict[CalibrationKind, LogitInterval] = {}
    for kind in KINDS:
        scores, same, pair_classes = top_hits_by_class(validation, kind, k)
        if not same.any():
            return None
        curves[kind] = fit(scores, same)
        intervals[kind] = jackknife_interval(scores, same, pair_classes, logistic_parameters)
    classes = len(np.unique(validation.labels[validation.queries]))
    queries = len(validation.queries)
    record = CalibrationFit(
        classes=classes,
        queries=queries,
        pairs=len(same),
        same_class_pairs=int(same.sum()),
        hits_per_query=k,
        gallery=len(validation.gallery),
        distractors=int(validation.distractor_mask().sum()),
    )
    return ScoreCalibration(
        curves=curves,
        fitted_on=record,
        reliable=classes >= MIN_CALIBRATION_CLASSES,
        sentence=calibration_sentence(record),
        interval=intervals,
    )
