"""alpha-QE, alpha-DBA and k-reciprocal re-ranking against hand-computed values and brute-force references."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.postprocess import (
    augment_database,
    expand_queries,
    k_reciprocal_rerank,
    neighbour_weights,
    sign_vectors,
)
from retrieval.indexing.search.postprocess_params import (
    DbaParams,
    KReciprocalParams,
    QeParams,
    load_params,
    parse_methods,
)
from retrieval.indexing.search.results import SearchResults


def _unit(rows: list[list[float]]) -> np.ndarray:
    values = np.asarray(rows, np.float32)
    return values / np.linalg.norm(values, axis=1, keepdims=True)


def test_alpha_qe_hand_computed() -> None:
    query = np.array([[1.0, 0.0]], np.float32)
    gallery = np.array([[0.6, 0.8], [0.0, 1.0], [-1.0, 0.0]], np.float32)
    first = SearchResults(np.array([[0, 1, 2]]), np.array([[0.6, 0.0, -1.0]], np.float32))
    # alpha = 1: q + 0.6 * g0 + 0 * g1 (+ nothing for the negative g2) = (1.36, 0.48), norm sqrt(2.08)
    expanded = expand_queries(query, gallery, first, QeParams(n=3, alpha=1))
    np.testing.assert_allclose(expanded, [[1.36 / np.sqrt(2.08), 0.48 / np.sqrt(2.08)]], rtol=1e-6)
    # alpha = 3, n = 1: q + 0.216 * g0 = (1.1296, 0.1728)
    expanded = expand_queries(query, gallery, first, QeParams(n=1, alpha=3))
    np.testing.assert_allclose(expanded[0], np.array([1.1296, 0.1728]) / np.hypot(1.1296, 0.1728), rtol=1e-6)


def test_qe_weights_ignore_padding_and_negative_scores() -> None:
    weights = neighbour_weights(np.array([[0.5, -0.2, -np.inf]], np.float32), 2.0)
    np.testing.assert_allclose(weights, [[0.25, 0.0, 0.0]])
    query = np.array([[0.0, 1.0]], np.float32)
    padded = SearchResults(np.array([[-1, -1]]), np.full((1, 2), -np.inf, np.float32))
    np.testing.assert_allclose(expand_queries(query, np.eye(2, dtype=np.float32), padded, QeParams(n=2)), query)


def test_alpha_dba_hand_computed() -> None:
    gallery = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], np.float32)
    augmented = augment_database(gallery, DbaParams(n=1, alpha=1))
    # x0's nearest other is x1 (0.8), x1's is x0 (0.8, before x2's 0.6), x2's is x1 (0.6)
    np.testing.assert_array_equal(augmented.neighbours, [[1], [0], [1]])
    sums = np.array([[1.64, 0.48], [1.6, 0.6], [0.48, 1.36]])
    np.testing.assert_allclose(augmented.sums, sums, rtol=1e-6)
    np.testing.assert_allclose(augmented.vectors, sums / np.linalg.norm(sums, axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(augmented.weights, [[0.8], [0.8], [0.6]], rtol=1e-6)


def _zhong_reference(probe: np.ndarray, gallery: np.ndarray, k1: int, k2: int, lam: float) -> np.ndarray:
    """The final distances of Zhong et al.'s published re_ranking() for one probe, written with its loops
    (all items form the set; squared Euclidean distances of unit vectors, each row scaled by its max)."""
    features = np.concatenate([probe[None], gallery]).astype(np.float64)
    n = len(features)
    dist = np.square(features[:, None, :] - features[None, :, :]).sum(axis=2)
    dist = np.transpose(dist / np.max(dist, axis=0))
    rank = np.argsort(dist, axis=1, kind="stable")
    v = np.zeros((n, n))
    for i in range(n):
        forward = rank[i, : k1 + 1]
        backward = rank[forward, : k1 + 1]
        reciprocal = forward[np.where(backward == i)[0]]
        expansion = reciprocal
        for candidate in reciprocal:
            half = int(np.around(k1 / 2.0))
            c_forward = rank[candidate, : half + 1]
            c_backward = rank[c_forward, : half + 1]
            c_reciprocal = c_forward[np.where(c_backward == candidate)[0]]
            if len(np.intersect1d(c_reciprocal, reciprocal)) > 2.0 / 3 * len(c_reciprocal):
                expansion = np.append(expansion, c_reciprocal)
        expansion = np.unique(expansion)
        weight = np.exp(-dist[i, expansion])
        v[i, expansion] = weight / np.sum(weight)
    if k2 != 1:
        v = np.stack([np.mean(v[rank[i, :k2], :], axis=0) for i in range(n)])
    shared = np.minimum(v[0], v[1:]).sum(axis=1)
    jaccard = 1 - shared / (2 - shared)
    return jaccard * (1 - lam) + dist[0, 1:] * lam


@pytest.mark.parametrize(("k1", "k2", "lam"), [(4, 2, 0.3), (3, 1, 0.5), (6, 3, 0.1)])
def test_k_reciprocal_matches_the_papers_reference_code(k1: int, k2: int, lam: float) -> None:
    rng = np.random.default_rng(k1)
    centres = rng.normal(size=(3, 8))
    gallery = _unit((np.repeat(centres, 5, axis=0) + 0.6 * rng.normal(size=(15, 8))).tolist())
    query = _unit([(centres[0] + 0.6 * rng.normal(size=8)).tolist()])
    order = np.argsort(-(gallery @ query[0]), kind="stable")
    first = SearchResults(order[None], (gallery @ query[0])[order][None].astype(np.float32))
    params = KReciprocalParams(k1=k1, k2=k2, lam=lam, candidates=15)
    reranked = k_reciprocal_rerank(query, gallery, first, params)
    expected = _zhong_reference(query[0], gallery[order], k1, k2, lam)
    np.testing.assert_allclose(1.0 - reranked.scores[0], np.sort(expected), atol=1e-5)
    np.testing.assert_array_equal(reranked.ids[0], order[np.argsort(expected, kind="stable")])


def test_k_reciprocal_reranks_only_the_candidates_and_keeps_padding() -> None:
    gallery = _unit([[1, 0], [0.9, 0.1], [0.5, 0.5], [0, 1]])
    query = _unit([[1, 0.05]])
    first = SearchResults(np.array([[0, 1, 2, -1]]), np.array([[1.0, 0.99, 0.7, -np.inf]], np.float32))
    reranked = k_reciprocal_rerank(query, gallery, first, KReciprocalParams(k1=2, k2=1, candidates=3))
    assert reranked.k == 3 and set(reranked.ids[0]) == {0, 1, 2}
    first = SearchResults(np.array([[0, 1, -1]]), np.array([[1.0, 0.99, -np.inf]], np.float32))
    padded = k_reciprocal_rerank(query, gallery, first, KReciprocalParams(k1=2, k2=1, candidates=3))
    assert padded.ids[0, 2] == -1 and padded.scores[0, 2] == -np.inf


def test_binary_sign_vectors_give_the_hamming_score() -> None:
    rng = np.random.default_rng(1)
    codes = binarize(rng.normal(size=(5, 16)).astype(np.float32))
    signs = sign_vectors(codes, 16)
    hamming = np.unpackbits(codes[:, None, :] ^ codes[None, :, :], axis=2).sum(axis=2)
    np.testing.assert_allclose(signs @ signs.T, 1 - 2 * hamming / 16, atol=1e-6)


# ----- post-processing identical vectors changes nothing -------------------------------------------


def test_qe_with_identical_neighbours_returns_the_query() -> None:
    query = _unit([[0.3, -0.2, 0.9]])
    gallery = np.repeat(query, 4, axis=0)
    first = SearchResults(np.arange(4)[None], np.ones((1, 4), np.float32))
    np.testing.assert_allclose(expand_queries(query, gallery, first, QeParams(n=4, alpha=3)), query, atol=1e-6)


def test_dba_of_duplicated_vectors_changes_nothing() -> None:
    rng = np.random.default_rng(2)
    distinct = _unit(rng.normal(size=(6, 16)).tolist()) * np.float32(1)
    gallery = np.repeat(distinct, 3, axis=0)  # every vector twice more: its 2 nearest others are itself
    augmented = augment_database(gallery, DbaParams(n=2, alpha=3))
    np.testing.assert_allclose(augmented.vectors, gallery, atol=1e-6)


def test_k_reciprocal_of_identical_candidates_keeps_the_order() -> None:
    query = _unit([[1, 2, 3]])
    gallery = np.repeat(query, 6, axis=0)
    first = SearchResults(np.array([[3, 0, 5, 1, 4, 2]]), np.ones((1, 6), np.float32))
    reranked = k_reciprocal_rerank(query, gallery, first, KReciprocalParams(k1=3, k2=2, candidates=6))
    np.testing.assert_array_equal(reranked.ids, first.ids)


def test_method_names_and_parameters_are_checked() -> None:
    assert parse_methods("none, qe,dba+qe,qe") == ("none", "qe", "dba+qe")
    with pytest.raises(ConfigError, match="unknown post-processing rerank; known: none, qe"):
        parse_methods("none,rerank")
    assert load_params('{"qe": {"n": 3}}').qe == QeParams(n=3, alpha=3.0)
    with pytest.raises(ConfigError, match="qe.m"):
        load_params('{"qe": {"m": 3}}')
    with pytest.raises(ConfigError, match="cannot read"):
        load_params("/nonexistent/params.json")
