"""``diversity``: maximal marginal relevance (MMR) over the first candidates, before the page is cut: each
next hit maximises ``(1 - diversity) * score - diversity * (its highest cosine to a hit already chosen)``
(stored float vectors, on the binary index too); 0 keeps the plain order. It looks at ``DEPTH_FACTOR``
times the hits asked for, at least ``MIN_CANDIDATES``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from retrieval.indexing.examples.diversity import mmr_order
from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.store.shared.search_settings import SearchSettings

DEPTH_FACTOR = 4
MIN_CANDIDATES = 50


class Diversity(BaseStep):
    name = "diversity"

    def applies(self, settings: SearchSettings) -> bool:
        return bool(settings.diversity)

    def depth(self, depth: int, settings: SearchSettings) -> int:
        return max(depth * DEPTH_FACTOR, MIN_CANDIDATES)

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        if len(page.hits) < 2:
            return page
        vectors = context.vectors_of(page.hits)
        relevance = np.array([hit.score for hit in page.hits], np.float64)
        order = mmr_order(relevance, vectors @ vectors.T, float(context.settings.diversity or 0), len(page.hits))
        return replace(page, hits=[page.hits[i] for i in order])
