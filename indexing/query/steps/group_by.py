"""``group_by`` and ``group_size``: the best ``k`` groups of items sharing a label (``group_by="label"``) or a
metadata value, each with up to ``group_size`` hits, a group ranked by its best hit: exactly ``k`` groups
whenever the index holds them (Milvus's strict semantics), fetching more candidates while fewer have
appeared (``indexing.examples.grouping``). It replaces the ``page`` step's cut: ``offset`` and ``k`` count
groups; the hits come group after group, best group first."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

import numpy as np

from retrieval.indexing.examples.grouping import FETCH_PER_GROUP, grouped_search
from retrieval.indexing.query.candidates import candidates
from retrieval.indexing.query.steps.by_examples import example_ids
from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.search_settings import SearchSettings


class GroupBy(BaseStep):
    name = "group_by"

    def applies(self, settings: SearchSettings) -> bool:
        return settings.group_by is not None

    def depth(self, depth: int, settings: SearchSettings) -> int:
        return depth * max(settings.group_size, FETCH_PER_GROUP)

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        settings = context.settings
        fetched = {0: page.hits}

        def search(n: int) -> tuple[np.ndarray, np.ndarray]:
            hits = page.hits if n <= len(page.hits) else self._more(page, context, n)
            fetched[0] = hits
            return np.array([hit.item.id for hit in hits], np.int64), np.array([hit.score for hit in hits])

        def key_of(ids: np.ndarray) -> list[Hashable | None]:
            return [_key(hit, settings.group_by) for hit in fetched[0][: len(ids)]]

        wanted = settings.offset + settings.k
        groups = grouped_search(search, key_of, wanted, settings.group_size, context.store.count)
        by_id = {hit.item.id: hit for hit in fetched[0]}
        shown = groups[settings.offset :]
        return replace(page, hits=[by_id[item_id] for group in shown for item_id in group.ids])

    @staticmethod
    def _more(page: HitPage, context: StepContext, n: int) -> list[Hit]:
        """The best ``n`` candidates of the row again, a search by examples' examples left out again."""
        row = page.row
        hits = candidates(context.store, context.queries[row : row + 1], context.settings, n, [context.exclude[row]])[0]
        left_out = example_ids(context.origin(row))
        return [hit for hit in hits if hit.item.id not in left_out] if left_out else hits


def _key(hit: Hit, group_by: str | None) -> Hashable | None:
    if group_by == "label":
        return hit.item.label
    value = (hit.item.metadata or {}).get(group_by or "")
    return value if isinstance(value, Hashable) else str(value)
