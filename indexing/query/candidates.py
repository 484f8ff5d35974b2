"""The candidates of a search, before any result step: the store's own search of each query vector (float,
binary, or binary re-ranked by float: ``kind`` and ``rerank``; the filter ``where``), or its post-processed
search (``postprocess``: alpha-QE or k-reciprocal re-ranking, ``store.shared.postprocessed_search``), as
ranked hits. These three re-order the whole candidate list inside the index (QE searches again), so they
choose the candidates; ``chain.RESULT_STEPS`` then works on what they return."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.postprocessed_search import postprocessed_search
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.store.shared.store_protocol import Store


def candidates(
    store: Store, queries: np.ndarray, settings: SearchSettings, depth: int, exclude: Sequence[int | None]
) -> list[list[Hit]]:
    """At most ``depth`` ranked hits per query row, ``exclude[i]`` left out of row i (one extra result is
    fetched then, so ``depth`` remain)."""
    dropped = list(exclude)
    if settings.postprocess != "none":
        results = postprocessed_search(store, queries, depth, settings, dropped)
        dropped = [None] * len(queries)  # already left out
    else:
        wanted = depth + (1 if any(item_id is not None for item_id in dropped) else 0)
        results = store.search(queries, wanted, kind=settings.kind, rerank=settings.rerank, where=settings.where)
    return [store.hits(results, row, exclude=dropped[row], limit=depth) for row in range(len(queries))]
