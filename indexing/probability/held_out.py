"""A calibration measured on classes it was not fitted on (the test classes): each query's first page of
hits, their probabilities, and the report per score kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.indexing.common.score_calibration import (
    HITS_PER_QUERY,
    NO_CALIBRATION,
    CalibrationKind,
    ScoreCalibration,
)
from retrieval.indexing.probability.fitting import KINDS
from retrieval.indexing.probability.pair_scores import LabelledSet, top_hits
from retrieval.indexing.probability.reliability import CalibrationReport, calibration_report


def held_out_reports(
    calibration: ScoreCalibration, data: LabelledSet, k: int = HITS_PER_QUERY
) -> dict[CalibrationKind, CalibrationReport]:
    """Float and binary reports on ``data``'s first ``k`` hits per query."""
    base_rate = data.base_rate()
    reports: dict[CalibrationKind, CalibrationReport] = {}
    for kind in KINDS:
        scores, same = top_hits(data, kind, k)
        reports[kind] = calibration_report(calibration.probabilities(kind, scores), same, base_rate)
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
    for kind in KINDS:
        report = document.get(kind)
        if isinstance(report, Mapping):
            lines.append(f"probabilities, {kind} index: {_report_text(report)}")
    return lines


def _report_text(report: Mapping[str, Any]) -> str:
    """In words: how far the probabilities are from what happens (ECE), and what each cut-off keeps."""
    parts = [
        f"off by {report['ece']:.2f} on average from how often the hit shares the query's class "
        f"(ECE, {report['hits']} hits)"
    ]
    for cut in report["cutoffs"]:
        if cut["precision"] is None:
            parts.append(f"min_probability {cut['cutoff']:g} keeps no hit")
            continue
        parts.append(
            f"min_probability {cut['cutoff']:g}: {cut['precision'] * 100:.0f} % of the hits it keeps share the "
            f"query's class, and it keeps {cut['recall_kept'] * 100:.0f} % of those that do"
        )
    return "; ".join(parts)
