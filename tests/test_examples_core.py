"""The pure functions of ``indexing/examples``, each against a hand computation or a brute-force reference
on tiny vectors: the strategies, the similarities of both kinds, grouping with its fetch-more loop, MMR."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.examples.diversity import mmr_order
from retrieval.indexing.examples.grouping import first_groups, grouped_search
from retrieval.indexing.examples.similarity import similarities
from retrieval.indexing.examples.strategies import STRATEGIES, Examples, average_vector, best_score
from retrieval.indexing.search.binary import binarize


def test_average_vector_is_qdrants_formula_by_hand() -> None:
    examples = Examples.of(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 1.0]]))
    # avg(pos) = (0.5, 0.5); avg(pos) + (avg(pos) - avg(neg)) = (0.5, 0.5) + (-0.5, -0.5) = (0, 0)
    assert average_vector(examples).tolist() == [0.0, 0.0]
    assert average_vector(Examples.of(np.array([[2.0, 0.0], [0.0, 4.0]]))).tolist() == [1.0, 2.0]


def test_best_score_against_a_loop() -> None:
    rng = np.random.default_rng(0)
    positive_sims, negative_sims = rng.uniform(-1, 1, (20, 3)), rng.uniform(-1, 1, (20, 2))
    expected = []
    for good, bad in zip(positive_sims, negative_sims):
        best_good, best_bad = max(good), max(bad)
        expected.append(_fast_sigmoid(best_good) if best_good > best_bad else -_fast_sigmoid(best_bad))
    assert np.allclose(best_score(positive_sims, negative_sims), expected, atol=1e-6)
    assert np.allclose(best_score(positive_sims, np.zeros((20, 0))), [_fast_sigmoid(x) for x in positive_sims.max(1)])


def _fast_sigmoid(x: float) -> float:
    return 0.5 * (x / (1 + abs(x)) + 1)


def test_strategy_vectors_and_names() -> None:
    examples = Examples.of(np.eye(3)[:2], np.eye(3)[2:])
    assert STRATEGIES.get("best_score").vectors(examples).shape == (2, 3)
    assert np.allclose(STRATEGIES.get("average_vector").vectors(examples), [[1.0, 1.0, -1.0]])
    with pytest.raises(DataError, match="unknown strategy 'avg'; known strategies: average_vector, best_score"):
        STRATEGIES.get("avg")


def test_no_positive_is_refused_in_one_sentence() -> None:
    with pytest.raises(DataError, match="at least one positive example"):
        Examples.of(np.zeros((0, 4)), np.ones((1, 4)))


def test_similarities_of_float_and_binary_against_brute_force() -> None:
    rng = np.random.default_rng(1)
    left, right = rng.normal(size=(3, 20)).astype(np.float32), rng.normal(size=(5, 20)).astype(np.float32)
    assert np.allclose(similarities(left, right), [[float(a @ b) for b in right] for a in left], atol=1e-5)
    codes_left, codes_right = binarize(left), binarize(right)
    bits = 8 * codes_left.shape[1]
    hamming = [[int(((a > 0) != (b > 0)).sum()) for b in right] for a in left]
    assert np.allclose(similarities(codes_left, codes_right), 1 - 2 * np.array(hamming) / bits)
    with pytest.raises(DataError, match="cannot compare"):
        similarities(left, codes_right)


def _brute_force_groups(scores: np.ndarray, keys: list[int], k: int, group_size: int) -> dict[int, list[int]]:
    best: dict[int, list[int]] = {}
    for key in set(keys):
        members = [i for i in range(len(keys)) if keys[i] == key]
        best[key] = sorted(members, key=lambda i: (-scores[i], i))[:group_size]
    order = sorted(best, key=lambda key: (-scores[best[key][0]], best[key][0]))[:k]
    return {key: best[key] for key in order}


def test_grouped_search_fetches_until_k_groups_and_matches_brute_force() -> None:
    rng = np.random.default_rng(2)
    keys = [0] * 150 + list(rng.integers(1, 30, 250))  # group 0 fills the top 150: the first fetch sees one group
    scores = np.concatenate([np.linspace(1.0, 0.9, 150), rng.uniform(0, 0.8, 250)])
    order = np.argsort(-scores, kind="stable")
    fetches: list[int] = []

    def search(n: int) -> tuple[np.ndarray, np.ndarray]:
        fetches.append(n)
        return order[:n], scores[order[:n]]

    groups = grouped_search(search, lambda ids: [keys[i] for i in ids], k=5, group_size=2, total=len(keys))
    assert fetches == [50, 100, 200]  # k * FETCH_PER_GROUP first, doubled while one group fills it
    exact = _brute_force_groups(scores, keys, 5, 2)
    assert [group.key for group in groups] == list(exact)  # the groups and their order: exact
    for group in groups:  # the best hit exact; the others the group's best among the candidates fetched
        assert group.ids[0] == exact[group.key][0] and set(group.ids) <= {
            i for i in order[:200] if keys[i] == group.key
        }
        assert group.scores == sorted(group.scores, reverse=True) and len(group.ids) <= 2
    assert groups[0].ids == exact[0]


def test_grouped_search_returns_every_group_when_the_index_holds_fewer_than_k() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    keys = ["a", None, "b", "a"]
    groups = grouped_search(lambda n: (np.arange(n), scores[:n]), lambda ids: [keys[i] for i in ids], 3, 5, 4)
    assert [(group.key, group.ids) for group in groups] == [("a", [0, 3]), ("b", [2])]


def test_first_groups_skips_padding_ids() -> None:
    groups = first_groups(np.array([3, -1, 4]), np.array([0.5, -np.inf, 0.1]), ["x", "y", "z"], 5, 1)
    assert [group.key for group in groups] == ["x", "z"]


def _brute_force_mmr(relevance: np.ndarray, pairwise: np.ndarray, diversity: float, k: int) -> list[int]:
    chosen: list[int] = []
    while len(chosen) < min(k, len(relevance)):

        def value(i: int) -> float:
            redundancy = max((pairwise[i][j] for j in chosen), default=0.0)
            return (1 - diversity) * relevance[i] - diversity * redundancy

        chosen.append(max((i for i in range(len(relevance)) if i not in chosen), key=value))
    return chosen


@pytest.mark.parametrize("diversity", [0.0, 0.3, 0.5, 0.9])
def test_mmr_against_brute_force(diversity: float) -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(30, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    relevance = vectors @ vectors[0]
    pairwise = vectors @ vectors.T
    assert mmr_order(relevance, pairwise, diversity, 10).tolist() == _brute_force_mmr(
        relevance, pairwise, diversity, 10
    )


def test_mmr_by_hand_skips_a_near_copy() -> None:
    relevance = np.array([0.9, 0.89, 0.5])
    pairwise = np.array([[1.0, 0.99, 0.0], [0.99, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert mmr_order(relevance, pairwise, 0.0, 3).tolist() == [0, 1, 2]
    # second pick at d = 0.5: item 1 scores 0.445 - 0.495 < 0, item 2 scores 0.25 - 0 > 0
    assert mmr_order(relevance, pairwise, 0.5, 2).tolist() == [0, 2]


def test_ours_agree_with_qdrant_client_recommend() -> None:
    """average_vector and best_score rank (and best_score scores) as qdrant-client's recommend, local mode."""
    qdrant = pytest.importorskip("qdrant_client")
    from qdrant_client import models

    from retrieval.indexing.examples.example_search import search_by_examples

    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    client = qdrant.QdrantClient(":memory:")
    client.create_collection("t", vectors_config=models.VectorParams(size=8, distance=models.Distance.DOT))
    client.upload_collection("t", vectors=vectors, ids=list(range(60)))
    positive, negative = [0, 5, 9], [3, 4]
    examples = Examples.of(vectors[positive], vectors[negative])

    def search(queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        scores = queries @ vectors.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :n]
        return top, np.take_along_axis(scores, top, axis=1)

    for name in ("average_vector", "best_score"):
        ids, scores = search_by_examples(
            search, lambda ids, x: vectors[ids] @ x.T, STRATEGIES.get(name), examples, 5, np.array(positive + negative)
        )
        recommend = models.RecommendInput(positive=positive, negative=negative, strategy=name)
        found = client.query_points("t", query=models.RecommendQuery(recommend=recommend), limit=5).points
        assert ids.tolist() == [point.id for point in found], name
        if name == "best_score":
            assert np.allclose(scores, [point.score for point in found], atol=1e-5)
