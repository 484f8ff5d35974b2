"""``cutoff=auto``: each query keeps as many of its hits as its own probabilities say are worth keeping.

A query's hits, best first, with calibrated probabilities ``p_1 >= ... >= p_k`` (the chance each shares the
query's class). Keeping the first ``n`` returns ``sum_{i<=n} p_i`` right hits in expectation, out of
``R = sum_i p_i`` right ones among the hits; the expected F1 of keeping ``n`` is about
``2 * sum_{i<=n} p_i / (n + R)`` (the ratio of expectations), and ``auto`` keeps the ``n`` that maximises it
(the plug-in rule of Lipton et al., "Optimal thresholding of classifiers to maximize F1", 2014: keep while a
hit's probability is at least half the best expected F1). A query whose first hits are sure and whose tail is
not keeps few; one whose page is all likely keeps it all. ``min_probability`` is its floor: a hit below it is
never kept. Chosen over Weaviate's ``autocut`` and open-metric-learning's ``AdaptiveThresholding`` on
validation classes (bench/bench_calibration.py, docs/results.md).
"""

from __future__ import annotations

import numpy as np

CUTOFF_MODES = ("none", "auto")


def auto_cutoff(probabilities: np.ndarray, floor: float | None = None) -> int:
    """How many of a query's hits (``probabilities`` best first) ``cutoff=auto`` keeps."""
    p = np.asarray(probabilities, np.float64)
    if not len(p):
        return 0
    kept = np.cumsum(p)
    expected_f1 = 2.0 * kept / (np.arange(1, len(p) + 1) + kept[-1])
    count = int(np.argmax(expected_f1)) + 1
    if floor is not None:
        count = min(count, int(np.sum(p[:count] >= floor)))
    return count


def auto_cutoff_rows(probabilities: np.ndarray, floor: float | None = None) -> np.ndarray:
    """``auto_cutoff`` of each row of a (queries, hits) array: a boolean (queries, hits) mask of the kept."""
    rows = np.atleast_2d(np.asarray(probabilities, np.float64))
    counts = np.array([auto_cutoff(row, floor) for row in rows], np.int64)
    return np.arange(rows.shape[1])[None, :] < counts[:, None]
