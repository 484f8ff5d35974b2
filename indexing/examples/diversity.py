"""``diversity``: maximal marginal relevance (Carbonell & Goldstein 1998) over the first candidates.

With ``diversity`` d in [0, 1], each next hit maximises ``(1 - d) * relevance - d * (its highest similarity
to a hit already chosen)``; d = 0 keeps the plain order, d = 1 only spreads.
"""

from __future__ import annotations

import numpy as np


def mmr_order(relevance: np.ndarray, pairwise: np.ndarray, diversity: float, k: int) -> np.ndarray:
    """Positions of ``k`` candidates in MMR order: ``relevance`` (c,) their scores, ``pairwise`` (c, c)
    their similarities to each other."""
    count = min(k, len(relevance))
    if diversity == 0:
        return np.argsort(-relevance, kind="stable")[:count]
    gain = (1.0 - diversity) * np.asarray(relevance, dtype=np.float64)
    closest = np.full(len(relevance), -np.inf)
    chosen: list[int] = []
    for _ in range(count):
        value = gain - diversity * np.where(np.isfinite(closest), closest, 0.0)
        value[chosen] = -np.inf
        best = int(np.argmax(value))
        chosen.append(best)
        closest = np.maximum(closest, pairwise[best])
    return np.array(chosen, dtype=np.int64)
