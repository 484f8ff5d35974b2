"""What the calibration's choices cost, measured on the same test hits as the chosen fit: isotonic regression
instead of Platt's logistic fit; the validation classes searched alone, without the training images in their
gallery; and, on the validation classes alone, every query-gallery pair instead of each query's first hits
(keeping the validation classes' base rate, or moving it to the test gallery's by Bayes' rule on the odds).
Comparison only (``bench_calibration.py`` prints it; issue 55): the training run fits and measures the chosen fit
alone."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from isotonic_fit import fit_isotonic

from retrieval.indexing.common.score_calibration import HITS_PER_QUERY, CalibrationKind, shift_base_rate
from retrieval.indexing.probability.fitting import KINDS
from retrieval.indexing.probability.logistic import fit_logistic
from retrieval.indexing.probability.pair_scores import LabelledSet, all_pairs, top_hits
from retrieval.indexing.probability.reliability import CalibrationReport, calibration_report

Probabilities = Callable[[LabelledSet, LabelledSet, CalibrationKind, np.ndarray], np.ndarray]


def _pairs(shift: bool) -> Probabilities:
    def probabilities(fit: LabelledSet, test: LabelledSet, kind: CalibrationKind, scores: np.ndarray) -> np.ndarray:
        pair_scores, same, _ = all_pairs(fit.without_distractors(), kind)
        fitted = fit_isotonic(pair_scores, same)(scores)
        return shift_base_rate(fitted, float(same.mean()), test.base_rate()) if shift else fitted

    return probabilities


def _isotonic(fit: LabelledSet, test: LabelledSet, kind: CalibrationKind, scores: np.ndarray) -> np.ndarray:
    return fit_isotonic(*top_hits(fit, kind, HITS_PER_QUERY))(scores)


def _alone(fit: LabelledSet, test: LabelledSet, kind: CalibrationKind, scores: np.ndarray) -> np.ndarray:
    return fit_logistic(*top_hits(fit.without_distractors(), kind, HITS_PER_QUERY))(scores)


ALTERNATIVES: dict[str, Probabilities] = {
    "isotonic on the first hits": _isotonic,
    "validation classes alone (no training images)": _alone,
    "every pair, validation base rate": _pairs(shift=False),
    "every pair, shifted to the test base rate": _pairs(shift=True),
}


def alternative_reports(fit: LabelledSet, test: LabelledSet) -> dict[str, dict[CalibrationKind, CalibrationReport]]:
    """Per alternative, its float and binary reports on ``test``'s first hits."""
    reports: dict[str, dict[CalibrationKind, CalibrationReport]] = {name: {} for name in ALTERNATIVES}
    for kind in KINDS:
        scores, same = top_hits(test, kind, HITS_PER_QUERY)
        for name, probabilities in ALTERNATIVES.items():
            reports[name][kind] = calibration_report(probabilities(fit, test, kind, scores), same, test.base_rate())
    return reports


def figures(report: CalibrationReport) -> dict[str, float | None]:
    """ECE and the precision realised at the 0.8 cut-off, with the recall it keeps."""
    cut = next(cut for cut in report.cutoffs if cut.cutoff == 0.8)
    return {"ece": report.ece, "precision_at_0.8": cut.precision, "recall_kept_at_0.8": cut.recall_kept}
