"""Ranked (item, score) hits of an index: for query vectors, or for stored items (each left out of
its own results). The one search -> hits path of ``retrieval search`` and of the service's
``POST /search`` and ``GET /items/{id}/similar``: ``ranked_pages`` (and ``ranked_hits``, its hits
alone) within a ``Window`` (``offset``, ``min_score``); ``filter_warnings`` names the keys of a filter
that no item has."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.kinds import KindName, SearchKind
from retrieval.indexing.store.shared.items.item_filter import ItemFilter
from retrieval.indexing.store.shared.items.items_db import Hit
from retrieval.indexing.store.shared.postprocessed_search import postprocessed_search
from retrieval.indexing.store.shared.store_protocol import Store

MAX_KEYS_SHOWN = 50
MIN_SCORE_RANGE = (-1.0, 1.0)
"""Every score kind lies in it: cosine, ``1 - 2 * hamming / bits``, ``1 -`` the k-reciprocal distance."""


@dataclass(frozen=True)
class Window:
    """Which of the ranked hits a search returns: ``k`` after skipping the best ``offset`` (paging), and
    of those only the ones scoring at least ``min_score``."""

    offset: int = 0
    min_score: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < 0:
            raise DataError(f"offset must be a whole number of at least 0, got {self.offset!r}")
        low, high = MIN_SCORE_RANGE
        if self.min_score is not None and not low <= self.min_score <= high:  # NaN fails too
            raise DataError(
                f"min_score must be between {low:g} and {high:g} (scores are similarities), got {self.min_score}"
            )


@dataclass(frozen=True)
class HitPage:
    """The hits of one query within a ``Window``, best first, and how many of its ``k`` scored below
    ``min_score`` and were cut."""

    hits: list[Hit]
    below_min_score: int = 0


def ranked_pages(
    store: Store,
    vectors: np.ndarray,
    k: int,
    *,
    kind: KindName = "float",
    rerank: int | None = None,
    exclude: Sequence[int | None] | None = None,
    where: ItemFilter | None = None,
    postprocess: str = "none",
    window: Window = Window(),
) -> list[HitPage]:
    """Up to ``k`` hits per query row within ``window``, best first; ``exclude[i]`` is an item id dropped
    from row i; ``where`` keeps only the items that pass the filter; ``postprocess``: none, qe or
    kreciprocal (``postprocessed_search``). One extra result is fetched when an id is excluded, so k hits
    remain."""
    queries = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    dropped = list(exclude) if exclude is not None else [None] * len(queries)
    if len(dropped) != len(queries):
        raise ValueError(f"exclude has {len(dropped)} entries for {len(queries)} queries")
    depth = window.offset + k
    if postprocess != "none":
        results = postprocessed_search(
            store, queries, depth, postprocess=postprocess, exclude=dropped, kind=kind, rerank=rerank, where=where
        )
        rows = [store.hits(results, row, limit=depth) for row in range(len(queries))]
    else:
        wanted = depth + (1 if any(item_id is not None for item_id in dropped) else 0)
        results = store.search(queries, wanted, kind=kind, rerank=rerank, where=where)
        rows = [store.hits(results, row, exclude=dropped[row], limit=depth) for row in range(len(queries))]
    return [_page(hits[window.offset :], window.min_score) for hits in rows]


def _page(hits: list[Hit], min_score: float | None) -> HitPage:
    if min_score is None:
        return HitPage(hits)
    kept = [hit for hit in hits if hit.score >= min_score]
    return HitPage(kept, len(hits) - len(kept))


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
    window: Window = Window(),
) -> list[list[Hit]]:
    """The hits of ``ranked_pages``, without the counts of those cut."""
    pages = ranked_pages(
        store,
        vectors,
        k,
        kind=kind,
        rerank=rerank,
        exclude=exclude,
        where=where,
        postprocess=postprocess,
        window=window,
    )
    return [page.hits for page in pages]


def similar_pages(
    store: Store,
    item_ids: Sequence[int],
    k: int,
    *,
    kind: KindName = "float",
    rerank: int | None = None,
    where: ItemFilter | None = None,
    postprocess: str = "none",
    window: Window = Window(),
) -> list[HitPage]:
    """The pages of each stored item's own embedding, the item itself left out (ItemNotFoundError for
    an unknown id)."""
    vectors = store.embeddings_of(list(item_ids))
    return ranked_pages(
        store,
        vectors,
        k,
        kind=kind,
        rerank=rerank,
        exclude=list(item_ids),
        where=where,
        postprocess=postprocess,
        window=window,
    )


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
    """The hits of ``similar_pages``, without the counts of those cut."""
    pages = similar_pages(store, item_ids, k, kind=kind, rerank=rerank, where=where, postprocess=postprocess)
    return [page.hits for page in pages]


def filter_warnings(store: Store, where: ItemFilter | None) -> list[str]:
    """A sentence for the metadata keys of ``where`` that no item has (a typo finds nothing, or with
    ``$ne`` everything), naming the keys items do have; none when every key is in use."""
    keys = where.keys() if where is not None else []
    missing = sorted(set(keys) - store.keys_in_use(keys)) if keys else []
    if not missing:
        return []
    known = store.metadata_keys()
    shown = ", ".join(known[:MAX_KEYS_SHOWN]) + (", ..." if len(known) > MAX_KEYS_SHOWN else "")
    names = ", ".join(f"'{key}'" for key in missing)
    return [f"no item has the metadata key {names}; the keys in use: {shown or 'none'}"]


def score_kind(
    kind: KindName, rerank: int | None, postprocess: str = "none"
) -> Literal["cosine", "hamming", "kreciprocal"]:
    """Float and re-ranked binary searches score by cosine; plain binary ones by 1 - 2 * Hamming / bits;
    k-reciprocal re-ranking by 1 - its final distance."""
    if postprocess == "kreciprocal":
        return "kreciprocal"
    return "hamming" if SearchKind.of(kind) is SearchKind.BINARY and not rerank else "cosine"
