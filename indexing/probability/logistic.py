"""Platt's fit: P(same class | score) = sigmoid(a * score + b), by Newton's method on the log-likelihood.
The chosen fit (``fitting``): two parameters carry over from a few validation classes to others better than
a free monotone curve does (docs/results.md, chosen on class halves of the validation and training classes)."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.common.score_calibration import MAX_KNOTS, CalibrationCurve

ITERATIONS = 50


def logistic_parameters(scores: np.ndarray, same: np.ndarray) -> tuple[float, float]:
    """(a, b) maximising the likelihood of ``same`` under sigmoid(a * score + b); a small ridge on a keeps it
    finite when the classes separate."""
    x = np.stack([np.asarray(scores, np.float64), np.ones(len(scores))], axis=1)
    y = np.asarray(same, np.float64)
    theta = np.zeros(2)
    for _ in range(ITERATIONS):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ theta, -30, 30)))
        gradient = x.T @ (p - y) + 1e-6 * theta
        hessian = (x * (p * (1 - p))[:, None]).T @ x + 1e-6 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.abs(step).max() < 1e-9:
            break
    return float(theta[0]), float(theta[1])


def fit_logistic(scores: np.ndarray, same: np.ndarray, max_knots: int = MAX_KNOTS) -> CalibrationCurve:
    """The logistic curve as knots over the range of ``scores`` (the same form as the isotonic curve)."""
    a, b = logistic_parameters(scores, same)
    if a < 0:  # higher scores less often the same class: the best non-decreasing curve of this form is flat
        share = float(np.clip(np.mean(same), 1e-6, 1 - 1e-6))
        a, b = 0.0, float(np.log(share / (1 - share)))
    grid = np.linspace(float(np.min(scores)), float(np.max(scores)), max_knots)
    return CalibrationCurve.of("logistic", grid, 1.0 / (1.0 + np.exp(-(a * grid + b))), max_knots)
