"""``offset`` and ``k``: the page of the ranked candidates that was asked for (the best ``offset`` skipped,
then at most ``k``). Every step before it sees the whole candidate list; every step after it, the page."""

from __future__ import annotations

from dataclasses import replace

from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.store.shared.search_settings import SearchSettings


class Page(BaseStep):
    name = "page"

    def applies(self, settings: SearchSettings) -> bool:
        return settings.group_by is None  # grouped, ``group_by`` cuts the page by groups

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        settings = context.settings
        return replace(page, hits=page.hits[settings.offset : settings.depth])
