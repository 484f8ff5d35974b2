"""Ranked (item, score) hits of an index: for query vectors, or for stored items (each left out of
its own results). The one search -> hits path of ``retrieval search`` and of the service's
``POST /search`` and ``GET /items/{id}/similar``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from retrieval.indexing.search.kinds import KindName, SearchKind
from retrieval.indexing.store.shared.item_filter import ItemFilter
from retrieval.indexing.store.shared.items_db import Hit
from retrieval.indexing.store.shared.postprocessed_search import postprocessed_search
from retrieval.indexing.store.shared.store_protocol import Store


def ranked_hits(
    store: Store,
    vectors: np.ndarray,
    k: int,
    *,
    kind: KindName = "float",
    rerank: int | None = None,
    exclude: Sequence[int | None] | None = None,
    where: ItemFilter | None = None,
    postprocess: str = "none",
) -> list[list[Hit]]:
    """Up to ``k`` hits per query row, best first; ``exclude[i]`` is an item id dropped from row i;
    ``where`` keeps only the items that pass the filter; ``postprocess``: none, qe or kreciprocal
    (``postprocessed_search``). One extra result is fetched when an id is excluded, so k hits remain."""
    queries = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    dropped = list(exclude) if exclude is not None else [None] * len(queries)
    if len(dropped) != len(queries):
        raise ValueError(f"exclude has {len(dropped)} entries for {len(queries)} queries")
    if postprocess != "none":
        results = postprocessed_search(
            store, queries, k, postprocess=postprocess, exclude=dropped, kind=kind, rerank=rerank, where=where
        )
        return [store.hits(results, row, limit=k) for row in range(len(queries))]
    wanted = k + (1 if any(item_id is not None for item_id in dropped) else 0)
    results = store.search(queries, wanted, kind=kind, rerank=rerank, where=where)
    return [store.hits(results, row, exclude=dropped[row], limit=k) for row in range(len(queries))]


def similar_hits(
    store: Store,
    item_ids: Sequence[int],
    k: int,
    *,
    kind: KindName = "float",
    rerank: int | None = None,
    where: ItemFilter | None = None,
    postprocess: str = "none",
) -> list[list[Hit]]:
    """The hits of each stored item's own embedding, the item itself left out (ItemNotFoundError for
    an unknown id)."""
    vectors = store.embeddings_of(list(item_ids))
    return ranked_hits(
        store, vectors, k, kind=kind, rerank=rerank, exclude=list(item_ids), where=where, postprocess=postprocess
    )


def score_kind(
    kind: KindName, rerank: int | None, postprocess: str = "none"
) -> Literal["cosine", "hamming", "kreciprocal"]:
    """Float and re-ranked binary searches score by cosine; plain binary ones by 1 - 2 * Hamming / bits;
    k-reciprocal re-ranking by 1 - its final distance."""
    if postprocess == "kreciprocal":
        return "kreciprocal"
    return "hamming" if SearchKind.of(kind) is SearchKind.BINARY and not rerank else "cosine"
