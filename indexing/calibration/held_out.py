"""A calibration measured on classes it was not fitted on (the test classes): each query's first page of
hits, their probabilities at the evaluated gallery's base rate, and the report per score kind."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.calibration.fitting import KINDS
from retrieval.indexing.calibration.pair_scores import LabelledSet, top_hits
from retrieval.indexing.calibration.reliability import HITS_PER_QUERY, CalibrationReport, calibration_report
from retrieval.indexing.calibration.score_calibration import NO_CALIBRATION, CalibrationKind, ScoreCalibration


def held_out_reports(
    calibration: ScoreCalibration, data: LabelledSet, *, shift: bool = True, k: int = HITS_PER_QUERY
) -> dict[CalibrationKind, CalibrationReport]:
    """Float and binary reports on ``data``'s top-``k`` hits per query; ``shift=False`` keeps the fitted
    base rate (what ignoring the change of class count costs)."""
    base_rate = data.base_rate()
    reports: dict[CalibrationKind, CalibrationReport] = {}
    for kind in KINDS:
        scores, same = top_hits(data, kind, k)
        target = base_rate if shift else calibration.fitted_on.base_rate
        reports[kind] = calibration_report(calibration.probabilities(kind, scores, target), same, base_rate)
    return reports


def calibration_document(
    calibration: ScoreCalibration | None, reports: dict[CalibrationKind, CalibrationReport]
) -> dict[str, object]:
    """``metrics.json``'s ``calibration``: per kind its report (``ece`` first), and the fit's sentence."""
    if calibration is None:
        return {"available": False, "sentence": NO_CALIBRATION}
    document: dict[str, object] = {kind: report.to_dict() for kind, report in reports.items()}
    return {"available": True, "sentence": calibration.sentence, "reliable": calibration.reliable, **document}


def labelled_set(
    embeddings: np.ndarray, labels: np.ndarray, is_query: np.ndarray, is_gallery: np.ndarray
) -> LabelledSet:
    return LabelledSet(
        np.asarray(embeddings), np.asarray(labels), np.asarray(is_query, bool), np.asarray(is_gallery, bool)
    )
