"""``retrieval eval --postprocess``: the protocol of ``evaluate_retrieval``, and a query never expands with itself."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.indexing.eval.metrics import evaluate_retrieval
from retrieval.indexing.eval.postprocess_eval import KindSpace, LeaveOneOut, postprocess_metrics, ranking
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.postprocess import augment_database, normalize_rows
from retrieval.indexing.search.postprocess_params import METHODS, DbaParams, PostprocessParams, QeParams


def _clustered(classes: int = 6, per: int = 8, dim: int = 16, noise: float = 1.2, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, dim))
    vectors = normalize_rows(np.repeat(centres, per, axis=0) + noise * rng.normal(size=(classes * per, dim)))
    return vectors, np.repeat(np.arange(classes), per)


FLAGS = {
    "same-set": lambda n: (np.ones(n, bool), np.ones(n, bool)),
    "query-gallery": lambda n: (np.arange(n) % 3 != 0, np.arange(n) % 2 == 0),
}


@pytest.mark.parametrize("protocol", list(FLAGS))
def test_none_is_the_evaluation_of_the_raw_embedding(protocol: str) -> None:
    vectors, labels = _clustered()
    is_query, is_gallery = FLAGS[protocol](len(labels))
    found = postprocess_metrics(vectors, labels, is_query, is_gallery, ["none"], PostprocessParams())["none"]
    float_ = evaluate_retrieval(vectors, labels, is_query, is_gallery, compute_nmi=False)
    binary = evaluate_retrieval(binarize(vectors), labels, is_query, is_gallery, metric="hamming", compute_nmi=False)
    assert found["float"] == float_
    assert found["binary"] == binary


def test_dba_scores_each_query_against_the_gallery_augmented_without_it() -> None:
    vectors, _ = _clustered(classes=4, per=6, dim=8)
    augmented = augment_database(vectors, DbaParams(n=3, alpha=1))
    own = np.arange(len(vectors))
    found = LeaveOneOut(augmented, vectors).search(KindSpace(SearchKind.FLOAT), vectors, 5, own)
    for query in range(len(vectors)):  # brute force: drop the query's term from every sum that holds it
        sums = augmented.sums.copy()
        holders, slots = np.nonzero(augmented.neighbours == query)
        sums[holders] -= augmented.weights[holders, slots][:, None] * vectors[query]
        scores = normalize_rows(sums) @ vectors[query]
        scores[query] = -np.inf
        expected = np.lexsort((np.arange(len(scores)), -scores))[:5]
        np.testing.assert_array_equal(found.ids[query], expected)
        np.testing.assert_allclose(found.scores[query], scores[expected], rtol=1e-5)


def test_a_query_never_expands_with_itself() -> None:
    """With its own copy the only close item, QE must not pull the query towards itself."""
    vectors, labels = _clustered(classes=5, per=6, dim=12, seed=3)
    own = np.arange(len(vectors))
    params = PostprocessParams(qe=QeParams(n=1, alpha=1))
    found = ranking("qe", KindSpace(SearchKind.FLOAT), vectors, vectors, own, 5, params)
    assert not (found.ids == own[:, None]).any()


@pytest.mark.parametrize("protocol", list(FLAGS))
def test_postprocessing_identical_vectors_changes_nothing(protocol: str) -> None:
    """Every item of a class the same vector: each method ranks as the raw embedding does."""
    rng = np.random.default_rng(4)
    labels = np.repeat(np.arange(5), 4)
    vectors = normalize_rows(rng.normal(size=(5, 32)))[labels]
    is_query, is_gallery = FLAGS[protocol](len(labels))
    params = PostprocessParams(qe=QeParams(n=2), dba=DbaParams(n=2))
    found = postprocess_metrics(vectors, labels, is_query, is_gallery, METHODS, params)
    for method in METHODS:
        assert found[method] == found["none"], method
