"""Exact k-NN search against a brute-force ranking by (-score, gallery index)."""

from __future__ import annotations

import numpy as np
import pytest
from reference_hamming import hamming_distances

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.binary import binarize, hamming_to_similarity
from retrieval.indexing.search.knn import iter_knn_chunks, knn_search


def brute_force(similarity: np.ndarray, k: int, exclude_self: bool = False) -> tuple[np.ndarray, np.ndarray]:
    similarity = similarity.astype(np.float64).copy()
    if exclude_self:
        np.fill_diagonal(similarity, -np.inf)
    columns = np.broadcast_to(np.arange(similarity.shape[1]), similarity.shape)
    order = np.lexsort((columns, -similarity), axis=1)[:, :k]
    return order, np.take_along_axis(similarity, order, axis=1)


def tied_vectors(rng, n: int, dim: int = 4) -> np.ndarray:
    """Entries in {-1, 0, 1}: exact float32 inner products with many ties, plus duplicate rows."""
    vectors = rng.integers(-1, 2, (n, dim)).astype(np.float32)
    vectors[: n // 5] = vectors[n // 5 : 2 * (n // 5)]
    return vectors


@pytest.mark.parametrize(("n", "k", "chunk_size"), [(600, 25, 4096), (600, 25, 97), (257, 1, 16), (300, 40, 1)])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_float_search_equals_brute_force_with_ties(n, k, chunk_size, exclude_self):
    vectors = tied_vectors(np.random.default_rng(n + k), n)
    results = knn_search(vectors, vectors, k, exclude_self=exclude_self, chunk_size=chunk_size)
    ids, scores = brute_force(vectors @ vectors.T, k, exclude_self)
    np.testing.assert_array_equal(results.ids, ids)
    np.testing.assert_array_equal(results.scores, scores.astype(np.float32))
    assert results.ids.dtype == np.int64 and results.scores.dtype == np.float32 and len(results) == n


def test_float_search_on_continuous_vectors_and_separate_sets():
    rng = np.random.default_rng(7)
    queries, gallery = rng.standard_normal((130, 32)), rng.standard_normal((500, 32))
    results = knn_search(queries, gallery, 10, chunk_size=50)
    ids, scores = brute_force(queries @ gallery.T, 10)
    np.testing.assert_array_equal(results.ids, ids)
    np.testing.assert_allclose(results.scores, scores, rtol=1e-5, atol=1e-5)


def test_self_excluded_blocks_span_several_blocks():
    """chunk_size < n makes the same-set path combine diagonal and transposed blocks."""
    vectors = tied_vectors(np.random.default_rng(3), 700, dim=5)
    results = knn_search(vectors, vectors, 30, exclude_self=True, chunk_size=64)
    ids, _ = brute_force(vectors @ vectors.T, 30, exclude_self=True)
    np.testing.assert_array_equal(results.ids, ids)
    assert not (results.ids == np.arange(700)[:, None]).any()


@pytest.mark.parametrize("exclude_self", [False, True])
@pytest.mark.parametrize("metric", ["ip", "hamming"])
def test_k_larger_than_gallery_pads_with_minus_one(metric, exclude_self):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5, 16)).astype(np.float32)
    data = binarize(vectors) if metric == "hamming" else vectors
    results = knn_search(data, data, 8, metric=metric, exclude_self=exclude_self)
    real = 5 - int(exclude_self)
    assert results.ids.shape == (5, 8)
    assert (results.ids[:, real:] == -1).all() and np.isneginf(results.scores[:, real:]).all()
    assert (np.sort(results.ids[:, :real], axis=1) >= 0).all()


@pytest.mark.parametrize("chunk_size", [1000, 33])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_hamming_search_equals_brute_force(chunk_size, exclude_self):
    rng = np.random.default_rng(chunk_size)
    codes = binarize(rng.standard_normal((400, 12)))  # 12 bits: massive ties
    codes[:50] = codes[50:100]
    results = knn_search(codes, codes, 20, metric="hamming", exclude_self=exclude_self, chunk_size=chunk_size)
    distances = hamming_distances(codes, codes)
    ids, _ = brute_force(-distances, 20, exclude_self)
    np.testing.assert_array_equal(results.ids, ids)
    expected = hamming_to_similarity(np.take_along_axis(distances, ids, axis=1), 16)
    np.testing.assert_array_equal(results.scores, expected)


def test_iter_knn_chunks_excludes_given_gallery_positions():
    vectors = tied_vectors(np.random.default_rng(11), 200)
    subset = np.array([5, 17, 150, 199])
    parts = list(iter_knn_chunks(vectors[subset], vectors, 12, query_ids=subset, chunk_size=3))
    assert [start for start, _ in parts] == [0, 3]
    ids = np.concatenate([p.ids for _, p in parts])
    expected, _ = brute_force(vectors @ vectors.T, 12, exclude_self=True)
    np.testing.assert_array_equal(ids, expected[subset])


@pytest.mark.parametrize(
    ("queries", "gallery", "kwargs", "message"),
    [
        (np.zeros((3, 4)), np.zeros((5, 3)), {}, "dimension"),
        (np.zeros((3, 4)), np.zeros((5, 4)), {"exclude_self": True}, "queries to be the gallery"),
        (np.zeros(4), np.zeros((5, 4)), {}, "2-D"),
        (np.zeros((3, 4)), np.zeros((5, 4)), {"k": 0}, "positive"),
        (np.zeros((3, 4), np.uint8), np.zeros((5, 4), np.uint8), {"metric": "ip"}, "float embeddings"),
        (np.zeros((3, 4)), np.zeros((5, 4)), {"metric": "l2"}, "known metrics"),
    ],
)
def test_bad_input_raises_data_error(queries, gallery, kwargs, message):
    with pytest.raises(DataError, match=message):
        knn_search(queries, gallery, **{"k": 2, **kwargs})
