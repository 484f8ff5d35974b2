"""Relevance feedback simulated on labelled vectors (bench_examples.py): a query image searched plainly, then
each round the first ``k`` hits are marked positive (the query's class) or negative (another) and the
examples so far are searched again (the examples never come back). ``Method``: the examples -> ``k`` ids.

Ours run ``search_by_examples`` over an exact float index of the vectors; Qdrant's run qdrant-client's
``recommend`` in local, in-process mode on a collection of the same vectors (dot product).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retrieval.indexing.examples.example_search import search_by_examples
from retrieval.indexing.examples.strategies import STRATEGIES, Examples, Strategy

Method = Callable[[list[int], list[int], int], list[int]]
"""(positive ids, negative ids, k) -> the best k other ids."""


def precision_by_round(
    method: Method, vectors: np.ndarray, labels: np.ndarray, queries: np.ndarray, rounds: int, k: int
) -> np.ndarray:
    """Mean P@k of each round over ``queries``; round 0 is the plain search (one positive: the query), the
    same for every method, so every method starts from the same marks."""
    plain = ours(vectors, STRATEGIES.get("average_vector"))
    precision = np.zeros(rounds + 1)
    for query in queries.tolist():
        positive, negative = [query], []
        for round_number in range(rounds + 1):
            hits = (method if round_number else plain)(positive, negative, k)
            relevant = [hit for hit in hits if labels[hit] == labels[query]]
            precision[round_number] += len(relevant) / k
            positive += relevant
            negative += [hit for hit in hits if labels[hit] != labels[query]]
    return precision / len(queries)


def rocchio(examples: Examples, negative_weight: float) -> np.ndarray:
    """Rocchio (1971), tried as our own strategy: ``avg(positive) - negative_weight * avg(negative)``
    (``negative_weight`` 0.5 ranks as Qdrant's average_vector)."""
    mean = examples.positive.mean(axis=0)
    return mean if not len(examples.negative) else mean - negative_weight * examples.negative.mean(axis=0)


def ours(vectors: np.ndarray, strategy: Strategy) -> Method:
    """``search_by_examples`` with ``strategy`` over an exact inner-product index of ``vectors``."""

    def search(queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        scores = queries @ vectors.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :n]
        return top, np.take_along_axis(scores, top, axis=1)

    def compare(ids: np.ndarray, examples: np.ndarray) -> np.ndarray:
        return vectors[ids] @ examples.T

    def method(positive: list[int], negative: list[int], k: int) -> list[int]:
        examples = Examples.of(vectors[positive], vectors[negative] if negative else None)
        ids, _ = search_by_examples(search, compare, strategy, examples, k, np.array(positive + negative))
        return ids.tolist()

    return method


def our_methods(vectors: np.ndarray) -> dict[str, Method]:
    return {name: ours(vectors, STRATEGIES.get(name)) for name in STRATEGIES.names()}


def qdrant_methods(vectors: np.ndarray) -> dict[str, Method]:
    """qdrant-client's recommend (local mode) with each of its strategies; {} when it is not installed."""
    try:
        from qdrant_client import QdrantClient, models
    except ImportError:
        return {}
    client = QdrantClient(":memory:")
    client.create_collection(
        "bench", vectors_config=models.VectorParams(size=vectors.shape[1], distance=models.Distance.DOT)
    )
    client.upload_collection("bench", vectors=vectors, ids=list(range(len(vectors))))

    def method_of(strategy: models.RecommendStrategy) -> Method:
        def method(positive: list[int], negative: list[int], k: int) -> list[int]:
            recommend = models.RecommendInput(positive=positive, negative=negative, strategy=strategy)
            found = client.query_points("bench", query=models.RecommendQuery(recommend=recommend), limit=k).points
            return [int(point.id) for point in found]

        return method

    strategies = {
        "average_vector": models.RecommendStrategy.AVERAGE_VECTOR,
        "best_score": models.RecommendStrategy.BEST_SCORE,
    }
    return {f"qdrant {name}": method_of(strategy) for name, strategy in strategies.items()}
