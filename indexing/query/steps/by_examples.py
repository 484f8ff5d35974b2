"""``positive`` / ``negative``: the hits of a search by examples. The examples themselves are left out, and
under a strategy that re-scores (``best_score``) each candidate is scored from its stored vector's
similarities to the examples (``indexing.examples.strategies``). Runs first, on every candidate; rows that
are not a search by examples pass through. Its depth: the candidates of the averaged positives, four times
as deep, plus room for the examples left out."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from retrieval.indexing.examples.example_search import CANDIDATES_PER_POSITIVE
from retrieval.indexing.examples.similarity import similarities
from retrieval.indexing.examples.strategies import MAX_EXAMPLES, STRATEGIES, Examples
from retrieval.indexing.query.query import Query
from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.search_settings import SearchSettings


class ByExamples(BaseStep):
    name = "examples"

    def applies(self, settings: SearchSettings) -> bool:
        return settings.strategy is not None

    def depth(self, depth: int, settings: SearchSettings) -> int:
        rescores = settings.strategy is not None and STRATEGIES.get(settings.strategy).rescores
        return depth * (CANDIDATES_PER_POSITIVE if rescores else 1) + MAX_EXAMPLES

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        origin = context.origin(page.row)
        if origin is None or origin.kind != "examples":
            return page
        left_out = example_ids(origin)
        hits = [hit for hit in page.hits if hit.item.id not in left_out]
        strategy = STRATEGIES.get(origin.value)
        if not strategy.rescores or not hits:
            return replace(page, hits=hits)
        examples = Examples.of(_vectors(origin.positive, context), _vectors(origin.negative, context))
        stored = context.vectors_of(hits)
        negative = similarities(stored, examples.negative) if len(examples.negative) else np.zeros((len(hits), 0))
        scores = strategy.score(similarities(stored, examples.positive), negative)
        order = np.argsort(-scores, kind="stable")
        return replace(page, hits=[Hit(hits[i].item, float(scores[i]), hits[i].probability) for i in order])


def example_ids(origin: Query | None) -> set[int]:
    """The stored items a search by examples names as examples (none for any other query)."""
    if origin is None or origin.kind != "examples":
        return set()
    return {query.value for query in (*origin.positive, *origin.negative) if query.kind == "item"}


def _vectors(queries: tuple[Query, ...], context: StepContext) -> np.ndarray:
    """The examples' vectors: stored items' own, the others as ``query_vectors`` resolved them."""
    if not queries:
        return np.zeros((0, context.store.dim), np.float32)
    ids = [query.value for query in queries if query.kind == "item"]
    stored = dict(zip(ids, context.store.embeddings_of(ids))) if ids else {}
    rows = [stored[query.value] if query.kind == "item" else query.value for query in queries]
    return np.stack(rows).astype(np.float32)
