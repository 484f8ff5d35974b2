"""The interface of a result step (open-metric-learning's ``IRetrievalPostprocessor``): ``HitPage``, the one
hits type every step reads and returns; ``StepContext``, what a step may look at besides the hits (the store,
the settings, the query vectors, the model's traits, the candidates' stored vectors on demand); and
``ResultStep``, the protocol. ``chain.RESULT_STEPS`` lists the steps in the order they run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from retrieval.indexing.query.model_traits import ModelTraits
from retrieval.indexing.query.query import Query
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.store.shared.store_protocol import Store


@dataclass(frozen=True)
class HitPage:
    """The hits of one query, best first (each an ``(Item, score)`` with its ``probability``; the item carries
    its label and metadata), and how many of its ``k`` scored below ``min_score``, or (of the rest) below
    ``min_probability``, and were cut. Inside the chain it holds more candidates than ``k`` until the
    ``page`` step cuts it; ``row`` is the query's row of ``StepContext.queries``."""

    hits: list[Hit]
    below_min_score: int = 0
    below_min_probability: int = 0
    row: int = field(default=0, compare=False, repr=False)


@dataclass
class StepContext:
    """What a step may read besides the hits: the open ``store``, the request's ``settings``, the query
    vectors (one row per query, ``HitPage.row``), the ids left out of each row (a stored item searched by its
    own vector), ``traits`` (the model's calibration and copy threshold, read once per loaded model) and
    ``origins``: the ``Query`` each row came from, when the caller knows it (empty otherwise)."""

    store: Store
    settings: SearchSettings
    queries: np.ndarray
    exclude: Sequence[int | None]
    traits: ModelTraits
    origins: Sequence[Query] = ()

    def origin(self, row: int) -> Query | None:
        """The ``Query`` of row ``row`` (e.g. to read its examples), or None when not known."""
        return self.origins[row] if row < len(self.origins) else None

    def vectors_of(self, hits: Sequence[Hit]) -> np.ndarray:
        """The stored float vectors (n, d) of ``hits``, in their order (read from the store on demand)."""
        if not hits:
            return np.empty((0, self.store.dim), np.float32)
        return np.asarray(self.store.embeddings_of([hit.item.id for hit in hits]), np.float32)


class ResultStep(Protocol):
    """One option that changes the hits. ``applies``: whether these settings ask for it (a step that does not
    apply is skipped entirely); ``check``: refuse the request (a DataError) before anything is searched;
    ``depth``: how many candidates the search must fetch for it (given what the later steps need);
    ``apply``: the page after the step."""

    name: str

    def applies(self, settings: SearchSettings) -> bool: ...

    def check(self, context: StepContext) -> None: ...

    def depth(self, depth: int, settings: SearchSettings) -> int: ...

    def apply(self, page: HitPage, context: StepContext) -> HitPage: ...


class BaseStep:
    """Defaults of ``ResultStep`` for a step that needs no check and no extra candidates."""

    name = "step"

    def check(self, context: StepContext) -> None:
        return None

    def depth(self, depth: int, settings: SearchSettings) -> int:
        return depth
