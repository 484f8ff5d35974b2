"""``min_score``: only the hits scoring at least it; ``HitPage.below_min_score`` counts the ones cut."""

from __future__ import annotations

from dataclasses import replace

from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.store.shared.search_settings import SearchSettings


class MinScore(BaseStep):
    name = "min_score"

    def applies(self, settings: SearchSettings) -> bool:
        return settings.min_score is not None

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        cut = context.settings.min_score
        kept = [hit for hit in page.hits if cut is None or hit.score >= cut]
        return replace(page, hits=kept, below_min_score=page.below_min_score + len(page.hits) - len(kept))
