"""Re-ranking a binary shortlist by the float inner product: the ``rerank=N`` of both stores' ``search``."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.search.results import PAD_ID, SearchResults, rank_order


def rerank_shortlist(
    queries: np.ndarray, shortlist: SearchResults, k: int, ids: np.ndarray, embeddings: np.ndarray
) -> SearchResults:
    """Each row of a binary ``shortlist`` ordered by the exact inner product of its query with the
    items' stored float ``embeddings`` (rows of the ascending ``ids``, every id of the shortlist),
    best ``k`` kept; equal scores keep the lower id first, as every exact search here does."""
    reranked = SearchResults.empty(len(queries), k)
    for q, candidates in enumerate(shortlist.ids):
        candidates = candidates[candidates != PAD_ID]
        similarity = embeddings[np.searchsorted(ids, candidates)] @ queries[q]
        order = rank_order(candidates, similarity)[:k]
        reranked.ids[q, : len(order)], reranked.scores[q, : len(order)] = candidates[order], similarity[order]
    return reranked


def shortlist_ids(shortlist: SearchResults) -> np.ndarray:
    """The distinct ids of a shortlist, ascending: whose embeddings a re-rank reads."""
    return np.unique(shortlist.ids[shortlist.valid_mask()])
