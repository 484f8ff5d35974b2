"""A calibration measured on classes it was not fitted on (the test classes): each query's first page of
hits, their probabilities at the evaluated gallery's base rate, and the report per score kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def summary_lines(document: Mapping[str, Any] | None) -> list[str]:
    """The terminal's lines for a ``calibration`` block (``test_metrics.json``'s or ``metrics.json``'s)."""
    if not document:
        return []
    if not document.get("available"):
        return [f"calibration: {document.get('sentence', NO_CALIBRATION)}"]
    lines = [f"calibration: {document['sentence']}"]
    unshifted = document.get("without_base_rate_shift") or {}
    for kind in KINDS:
        report = document.get(kind)
        if isinstance(report, Mapping):
            cost = f" (without the base-rate shift: ECE {unshifted[kind]['ece']:.3f})" if kind in unshifted else ""
            if kind in (document.get("logistic_fit") or {}):
                cost += f" (Platt's logistic fit instead: ECE {document['logistic_fit'][kind]['ece']:.3f})"
            lines.append(f"calibration {kind:6s}: {_report_text(report)}{cost}")
    return lines


def _report_text(report: Mapping[str, Any]) -> str:
    parts = [f"ECE {report['ece']:.3f} on {report['hits']} hits"]
    for cut in report["cutoffs"]:
        precision = "no hit kept" if cut["precision"] is None else f"precision {cut['precision']:.2f}"
        parts.append(f"min_probability {cut['cutoff']:g}: {precision}, recall kept {cut['recall_kept']:.2f}")
    return "; ".join(parts)
