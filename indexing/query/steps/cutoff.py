"""``cutoff=auto``: per query, the first hits of its page that its own calibrated probabilities mark as worth
keeping (``probability.cutoff.auto_cutoff``: the count that maximises their expected F1, ``min_probability``
its floor). It runs after ``Probability`` and works on the page only (after ``Page``: offset and k), as the
probabilities it reads are the page's; the hits it cuts count in ``below_min_probability``. Its check (a
calibration, scores it was fitted on) is ``Probability``'s (``check_min_probability``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from retrieval.indexing.probability.cutoff import auto_cutoff
from retrieval.indexing.query.steps.step import BaseStep, HitPage, StepContext
from retrieval.indexing.store.shared.search_settings import SearchSettings


class Cutoff(BaseStep):
    """``cutoff="auto"``: the page's best expected-F1 prefix."""

    name = "cutoff"

    def applies(self, settings: SearchSettings) -> bool:
        return settings.cutoff == "auto"

    def apply(self, page: HitPage, context: StepContext) -> HitPage:
        probabilities = np.array([hit.probability or 0.0 for hit in page.hits])
        kept = page.hits[: auto_cutoff(probabilities, context.settings.min_probability)]
        cut = len(page.hits) - len(kept)
        return replace(page, hits=kept, below_min_probability=page.below_min_probability + cut)
