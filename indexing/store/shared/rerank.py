"""Re-ranking a binary shortlist by the float inner product: the ``rerank=N`` of both stores' ``search``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retrieval.indexing.search.results import PAD_ID, SearchResults


def rerank_shortlist(
    queries: np.ndarray, shortlist: SearchResults, k: int, embeddings_of: Callable[[np.ndarray], np.ndarray]
) -> SearchResults:
    """Each row of a binary ``shortlist`` ordered by the exact inner product of its query with the
    items' stored float embeddings (``embeddings_of(ids)``), best ``k`` kept; equal scores keep the
    lower id first, as every exact search here does."""
    reranked = SearchResults.empty(len(queries), k)
    for q, candidates in enumerate(shortlist.ids):
        candidates = np.sort(candidates[candidates != PAD_ID])
        similarity = embeddings_of(candidates) @ queries[q]
        order = np.argsort(-similarity, kind="stable")[:k]
        reranked.ids[q, : len(order)], reranked.scores[q, : len(order)] = candidates[order], similarity[order]
    return reranked
