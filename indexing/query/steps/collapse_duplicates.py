"""``collapse_duplicates``: one hit per group of copies, the best ranked; copies are hits whose stored
vectors are at least the model's measured copy threshold apart (``ModelTraits.copy_threshold``). It
fetches ``COLLAPSE_OVERFETCH`` times the hits asked for, so that ``k`` remain after collapsing."""

from __future__ import annotations

from dataclasses import replace

from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.search.copy_groups import collapse_copies
from retrieval.indexing.store.shared.search_settings import SearchSettings

COLLAPSE_OVERFETCH = 4


class CollapseDuplicates(BaseStep):
    name = "collapse_duplicates"

    def applies(self, settings: SearchSettings) -> bool:
        return settings.collapse_duplicates

    def depth(self, depth: int, settings: SearchSettings) -> int:
        return depth * COLLAPSE_OVERFETCH

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        threshold = context.traits.copy_threshold()
        kept = collapse_copies(context.vectors_of(page.hits), threshold)
        return replace(page, hits=[page.hits[i] for i in kept])
