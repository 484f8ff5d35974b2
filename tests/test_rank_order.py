"""The one tie rule of every search path: score descending, equal scores by ascending id, padded slots
last; checked against Python's sort by the key (-score, id), and through its users (merging parts and
re-ranking a shortlist)."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.search.results import PAD_ID, SearchResults, rank_order
from retrieval.indexing.store.shared.rerank import rerank_shortlist


def brute_force(ids: list[int], scores: list[float]) -> list[int]:
    """Positions sorted by (-score, id), a padded slot after every real id of the same score."""
    key = {i: (-scores[i], (1, 0) if ids[i] == PAD_ID else (0, ids[i])) for i in range(len(ids))}
    return sorted(range(len(ids)), key=key.__getitem__)


def test_rank_order_is_score_descending_then_id_ascending() -> None:
    ids = np.array([7, 3, 5, PAD_ID, 1, 9], np.int64)
    scores = np.array([0.5, 0.5, 0.9, -np.inf, 0.5, -np.inf], np.float32)
    assert rank_order(ids, scores).tolist() == [2, 4, 1, 0, 5, 3]  # by hand: 0.9, then ids 1, 3, 7; 9 before a pad
    rng = np.random.default_rng(0)
    many_ids = rng.permutation(40)[:24].reshape(3, 8)
    many_scores = rng.integers(0, 3, (3, 8)).astype(np.float32)  # few values: many ties
    order = rank_order(many_ids, many_scores)
    for row in range(3):
        assert order[row].tolist() == brute_force(many_ids[row].tolist(), many_scores[row].tolist())


def test_merging_and_reranking_follow_the_same_rule() -> None:
    first = SearchResults(np.array([[4, 2]]), np.array([[1.0, 0.5]], np.float32))
    second = SearchResults(np.array([[1, PAD_ID]]), np.array([[0.5, -np.inf]], np.float32))
    merged = SearchResults.merge_top_k([first, second], 4)
    assert merged.ids.tolist() == [[4, 1, 2, PAD_ID]]
    embeddings = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8]], np.float32)  # items 1, 2, 4, 6
    shortlist = SearchResults(np.array([[6, 4, 2, 1]]), np.zeros((1, 4), np.float32))
    reranked = rerank_shortlist(np.array([[1.0, 0.0]], np.float32), shortlist, 3, np.array([1, 2, 4, 6]), embeddings)
    assert reranked.ids.tolist() == [[1, 4, 6]]  # 1 and 4 tie at 1.0 (lower id first), then 6 at 0.6
    assert np.allclose(reranked.scores, [[1.0, 1.0, 0.6]])
