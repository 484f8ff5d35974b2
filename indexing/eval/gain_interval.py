"""How sure a MAP@R gain is: a paired bootstrap of the per-query AP of two models on the same queries.

Each resample draws the queries with replacement and takes the same queries for both models, so what the
models share (hard queries, easy queries) cancels and only their difference varies. The interval is the
percentile interval of the resampled mean gains (docs/metrics.md, "The gain's interval"). Resamples are
drawn in blocks, so memory stays bounded for any number of queries.
"""

from __future__ import annotations

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.exported_model.training_verdict import GainInterval

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0
_BLOCK_ELEMENTS = 1 << 22
"""Query draws held at once (resamples x queries)."""


def paired_gain_interval(
    before: np.ndarray,
    after: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> GainInterval:
    """MAP@R ``before`` -> ``after`` and the ``confidence`` percentile interval of the gain.

    ``before[i]`` and ``after[i]`` are query i's AP (``RetrievalMetrics.query_ap``) under the two models."""
    before, after = np.asarray(before, np.float64), np.asarray(after, np.float64)
    if before.shape != after.shape or before.ndim != 1 or not len(before):
        raise DataError(
            f"a paired gain needs the same queries for both models, got {before.shape} and {after.shape} per-query APs."
        )
    gains = _resampled_gains(after - before, resamples, seed)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(gains, [tail, 100 - tail])
    return GainInterval(
        before=float(before.mean()),
        after=float(after.mean()),
        low=float(low),
        high=float(high),
        queries=len(before),
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )


def _resampled_gains(differences: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The mean of ``differences`` over ``resamples`` draws of its queries with replacement."""
    rng, n = np.random.default_rng(seed), len(differences)
    block = max(1, _BLOCK_ELEMENTS // n)
    means = [
        differences[rng.integers(0, n, (min(block, resamples - start), n))].mean(axis=1)
        for start in range(0, resamples, block)
    ]
    return np.concatenate(means)
