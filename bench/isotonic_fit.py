"""Isotonic regression by pool adjacent violators: the non-decreasing step function closest (weighted least
squares) to the fraction of same-class pairs at each score, then its knots joined by straight lines. A fit the
calibration was chosen against (Platt's logistic fit won, docs/results.md), kept for the comparisons of
``bench_calibration.py`` and ``calibration_trials.py``; ``model.json`` may still hold an older isotonic curve, which
``CalibrationCurve`` reads without this module."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.common.score_calibration import MAX_KNOTS, CalibrationCurve


def pool_adjacent_violators(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blocks of the isotonic fit of ``values`` (in score order) with ``weights``: each block's mean value,
    its total weight and the index of its first element. Neighbouring blocks whose means decrease are merged
    until none do; O(n) amortised."""
    means: list[float] = []
    totals: list[float] = []
    starts: list[int] = []
    for index, (value, weight) in enumerate(zip(values.tolist(), weights.tolist(), strict=True)):
        means.append(value)
        totals.append(weight)
        starts.append(index)
        while len(means) > 1 and means[-2] >= means[-1]:
            weight_sum = totals[-2] + totals[-1]
            means[-2] = (means[-2] * totals[-2] + means[-1] * totals[-1]) / weight_sum
            totals[-2] = weight_sum
            del means[-1], totals[-1], starts[-1]
    return np.array(means), np.array(totals), np.array(starts, dtype=np.int64)


def fit_isotonic(scores: np.ndarray, same: np.ndarray, max_knots: int = MAX_KNOTS) -> CalibrationCurve:
    """P(same class | score) as a non-decreasing curve: pairs grouped by equal score (a binary score has few
    values), pooled into monotone blocks, each block a knot at its weighted mean score; a block's probability
    is its same-class fraction with one pair of each outcome added (never exactly 0 or 1, so a base-rate shift
    stays finite)."""
    unique, inverse, counts = np.unique(np.asarray(scores, np.float64), return_inverse=True, return_counts=True)
    positives = np.bincount(inverse, weights=np.asarray(same, np.float64), minlength=len(unique))
    means, totals, starts = pool_adjacent_violators(positives / counts, counts.astype(np.float64))
    block_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(unique))))
    knot_scores = np.bincount(block_of, weights=unique * counts) / totals
    probabilities = (means * totals + 1.0) / (totals + 2.0)
    probabilities = np.maximum.accumulate(probabilities)  # the smoothing must not undo the order
    return CalibrationCurve.of("isotonic", knot_scores, probabilities, max_knots)
