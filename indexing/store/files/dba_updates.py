"""DBA kept up to date by the updates of a DBA index (``index build --dba N``).

* An **add** augments each new item with its top-n neighbours among the items already indexed and the
  other new items, from their raw vectors (``raw_vectors``), exactly as the build augmented every item.
  The old items' vectors are not touched (an add stays O(added)), so an old item that the new ones would
  now count among its top n is re-augmented only by the next full compaction.
* A full **compaction** re-augments every live item from the raw vectors, as a fresh build would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from retrieval.indexing.search.knn import knn_search
from retrieval.indexing.search.postprocess import augment_database, expand_with
from retrieval.indexing.search.postprocess_params import DbaParams
from retrieval.indexing.search.results import PAD_ID, SearchResults, rank_order
from retrieval.indexing.store.files.raw_vectors import write_raw

_SHORTLIST = 4
"""Indexed neighbours fetched per wanted one (by the augmented vectors), then ranked by the raw ones."""


def augment_additions(
    raw: np.ndarray,
    params: DbaParams,
    search: Callable[[np.ndarray, int], SearchResults],
    raw_of: Callable[[np.ndarray], np.ndarray],
    count: int,
) -> np.ndarray:
    """Augmented vectors of new raw vectors (n, d): each with its top ``params.n`` by raw inner product among
    a shortlist of the ``count`` indexed items (``search``: float search of the index) and the other new
    vectors. ``raw_of(ids)``: the raw vectors of indexed items."""
    vectors = np.asarray(raw, np.float32)
    parts = [_among_new(vectors, params.n)]
    if count:
        shortlist = search(vectors, min(count, max(_SHORTLIST * params.n, 32)))
        ids = np.unique(shortlist.ids[shortlist.valid_mask()])
        known = raw_of(ids)
        scores = np.einsum("qkd,qd->qk", known[np.searchsorted(ids, shortlist.ids.clip(0))], vectors)
        parts.append(_ranked(shortlist.ids, np.where(shortlist.valid_mask(), scores, -np.inf)))
    merged = SearchResults.merge_top_k(parts, params.n)
    neighbours = np.zeros((*merged.ids.shape, vectors.shape[1]), np.float32)
    new = merged.ids <= -2  # the other new vectors carry ids -2 - position
    neighbours[new] = vectors[-2 - merged.ids[new]]
    if count:
        indexed = merged.ids >= 0
        neighbours[indexed] = known[np.searchsorted(ids, merged.ids[indexed])]
    return expand_with(vectors, neighbours, merged.scores, params)


def reaugmented(
    index_dir: Path, generation: int, ids: np.ndarray, raw_of: Callable[[np.ndarray], np.ndarray], params: DbaParams
) -> np.ndarray:
    """alpha-DBA of the live items ``ids`` (ascending) from their raw vectors, for a full compaction of
    ``generation``, whose raw chunk (all of them) is written first."""
    raw = raw_of(ids)
    write_raw(index_dir, generation, ids, raw)
    return augment_database(raw, params).vectors


def _among_new(vectors: np.ndarray, n: int) -> SearchResults:
    found = knn_search(vectors, vectors, n, exclude_self=True)
    return SearchResults(np.where(found.valid_mask(), -2 - found.ids, PAD_ID), found.scores)


def _ranked(ids: np.ndarray, scores: np.ndarray) -> SearchResults:
    order = rank_order(ids, scores)
    return SearchResults(np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1).astype(np.float32))
