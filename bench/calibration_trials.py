"""The calibrations tried for issue 48 and not kept, for ``bench_calibration.py --trials``: query-adaptive scores
(each hit's score read against its own query's neighbourhood), and the class-halves protocol the kept fit was
chosen on (never the test classes).

Query-adaptive features of a hit at score s, from its query's first ``CONTEXT`` hits: ``s - background`` (the
mean score at ranks 20-50), ``s - s10`` (the gap to the 10th hit), and the z-score of s among the first 50;
fitted by isotonic regression (one feature) or Platt's logistic fit (the score beside the z-score).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from isotonic_fit import fit_isotonic

from retrieval.indexing.common.score_calibration import HITS_PER_QUERY, CalibrationKind
from retrieval.indexing.probability.logistic import fit_logistic
from retrieval.indexing.probability.pair_scores import LabelledSet, score_rows
from retrieval.indexing.probability.reliability import expected_calibration_error

CONTEXT = 50
BACKGROUND_FROM = 19  # ranks 20-50 (in a smaller gallery: its last ranks)
Features = dict[str, np.ndarray]


def ranked_scores(data: LabelledSet, kind: CalibrationKind) -> tuple[np.ndarray, np.ndarray]:
    """Each query's first ``CONTEXT`` scores (best first) and whether each hit shares the query's class."""
    scores, same = [], []
    depth = min(CONTEXT, len(data.gallery) - 1)  # a query in the gallery has one hit fewer
    for chunk_scores, chunk_same, kept in score_rows(data, kind, data.queries):
        masked = np.where(kept, chunk_scores, -np.inf)
        order = np.argsort(-masked, axis=1, kind="stable")[:, :depth]
        scores.append(np.take_along_axis(masked, order, 1))
        same.append(np.take_along_axis(chunk_same, order, 1))
    return np.concatenate(scores), np.concatenate(same)


def features(scores: np.ndarray) -> Features:
    """Per hit of the first ``HITS_PER_QUERY``: its score and the query-adaptive features, flattened."""
    shown = scores[:, :HITS_PER_QUERY]
    background = scores[:, min(BACKGROUND_FROM, scores.shape[1] - 1) :].mean(1, keepdims=True)
    mean, spread = scores.mean(1, keepdims=True), scores.std(1, keepdims=True) + 1e-9
    return {
        "s": shown.ravel(),
        "s - background": (shown - background).ravel(),
        "s - s10": (shown - shown[:, -1:]).ravel(),
        "z": ((shown - mean) / spread).ravel(),
    }


def _one(name: str, fit: Callable = fit_isotonic) -> Callable[[Features, np.ndarray, Features], np.ndarray]:
    return lambda train, same, test: fit(train[name], same)(test[name])


def _score_and_z(train: Features, same: np.ndarray, test: Features) -> np.ndarray:
    """Platt's fit on the score and the z-score (a logistic regression on both, by Newton's method)."""
    x = np.column_stack([train["s"], train["z"], np.ones(len(same))])
    theta = np.zeros(3)
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(x @ theta, -30, 30)))
        hessian = (x * (p * (1 - p))[:, None]).T @ x + 1e-6 * np.eye(3)
        theta -= np.linalg.solve(hessian, x.T @ (p - same) + 1e-6 * theta)
    z = np.column_stack([test["s"], test["z"], np.ones(len(test["s"]))])
    return 1 / (1 + np.exp(-np.clip(z @ theta, -30, 30)))


TRIALS = {
    "logistic on the score (kept)": _one("s", fit_logistic),
    "isotonic on the score": _one("s"),
    "isotonic on s - background (ranks 20-50)": _one("s - background"),
    "isotonic on s - s10": _one("s - s10"),
    "logistic on the score and its z-score in the first 50": _score_and_z,
}


def trial_eces(fit: LabelledSet, test: LabelledSet, kind: CalibrationKind) -> dict[str, float]:
    """Per trial, the ECE on ``test``'s first hits of the fit on ``fit``'s."""
    fit_scores, fit_same = ranked_scores(fit, kind)
    test_scores, test_same = ranked_scores(test, kind)
    train, same = features(fit_scores), fit_same[:, :HITS_PER_QUERY].ravel().astype(np.float64)
    truth = test_same[:, :HITS_PER_QUERY].ravel()
    return {
        name: expected_calibration_error(trial(train, same, features(test_scores)), truth)
        for name, trial in TRIALS.items()
    }


def class_halves(data: LabelledSet, validation_classes: int) -> list[tuple[LabelledSet, LabelledSet]]:
    """The selection protocol: the classes in their order cut in two halves; each half in turn fits (its last
    ``validation_classes`` classes as queries, the whole half their gallery, as a run fits) and the other half
    is measured (every image a query in its own gallery)."""
    classes = np.unique(data.labels)
    halves = (classes[: len(classes) // 2], classes[len(classes) // 2 :])
    folds = []
    for fit_classes, measure_classes in (halves, halves[::-1]):
        queries = np.isin(data.labels, fit_classes[-validation_classes:])
        fit = LabelledSet(data.embeddings, data.labels, queries, np.isin(data.labels, fit_classes))
        measured = np.isin(data.labels, measure_classes)
        folds.append((fit, LabelledSet(data.embeddings, data.labels, measured, measured)))
    return folds
