"""One search by examples over any index: the strategy's vectors searched, the examples left out, the
candidates re-scored where the strategy says so, the best ``k`` kept.

The index is two callables, so the float and the binary index (and the benchmark's) share this code:
``search(vectors, n)`` -> the best ``n`` (ids, scores) of each vector, ids -1 for padding, and
``compare(ids, vectors)`` -> the (len(ids), len(vectors)) similarities of those items to the float vectors on
the index's own scale (inner products, or Hamming similarities of the binarised vectors).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retrieval.indexing.examples.strategies import Examples, Strategy

Search = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
Compare = Callable[[np.ndarray, np.ndarray], np.ndarray]

CANDIDATES_PER_POSITIVE = 4
"""``best_score`` re-scores the best ``CANDIDATES_PER_POSITIVE * k`` hits of each positive (besides the examples)."""


def search_by_examples(
    search: Search, compare: Compare, strategy: Strategy, examples: Examples, k: int, exclude: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` (ids, scores) for ``examples`` under ``strategy``, none of the ids in ``exclude``."""
    left_out = np.asarray(exclude, dtype=np.int64)
    wanted = (CANDIDATES_PER_POSITIVE if strategy.rescores else 1) * k + len(left_out)
    ids, scores = search(strategy.vectors(examples), wanted)
    if not strategy.rescores:
        keep = (ids[0] >= 0) & ~np.isin(ids[0], left_out)
        return ids[0][keep][:k], scores[0][keep][:k]
    candidates = np.setdiff1d(ids[ids >= 0], left_out)
    negative_sims = compare(candidates, examples.negative) if len(examples.negative) else np.zeros((len(candidates), 0))
    rescored = strategy.score(compare(candidates, examples.positive), negative_sims)
    order = np.lexsort((candidates, -rescored))[:k]
    return candidates[order], rescored[order]
