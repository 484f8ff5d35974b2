"""Search restricted to a set of item ids (a filter's matches): faiss id selectors, exact where better.

The selector (``IDSelectorBatch`` of a filter's matches, or ``IDSelectorNot`` of a segment's tombstones,
translated to positions by the ID map) travels in the index
kind's own ``SearchParameters``, which also carry the ``nprobe`` / ``efSearch`` it was built with:
``SearchParametersIVF`` for IVF kinds, ``SearchParametersHNSW`` for HNSW, plain ones for flat.
Where the selector cannot give the right answer, the selected items' stored embeddings are
searched exactly instead:
- faiss's ``IndexBinaryIVF`` rejects selectors;
- an approximate kind with a small selection (at most ``EXACT_SEARCH_ELEMENTS`` vector elements):
  IVF visits only ``nprobe`` lists, which hold a share of the few matches, and HNSW walks a graph
  the selector prunes; scanning the selection is then both exact and cheap (16 384 items of 2048-d);
- rows an approximate search left short of k.
So a row always holds min(k, matches) results. Exact float scores come from the stored float16
embeddings, as re-ranking's do (within about 1e-3 of faiss's float32 ones). Filtered searches run on
the CPU copies of the indexes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faiss
import numpy as np

from retrieval.indexing.search.knn import Metric, knn_search
from retrieval.indexing.search.results import PAD_ID, SearchResults

ExactSearch = Callable[[np.ndarray], SearchResults]
"""(query rows) -> exact results over the selected items, in item ids."""
_EXACT_BLOCK_ELEMENTS = 1 << 24  # vector elements read at once by the exact search (64 MiB of float32)
EXACT_SEARCH_ELEMENTS = 1 << 25
"""Selections of at most this many vector elements (items x dimensions) skip an approximate index."""


def batch_selector(ids: np.ndarray) -> Any:
    """A faiss selector of exactly ``ids`` (item ids; the ID map translates them to positions)."""
    return faiss.IDSelectorBatch(np.ascontiguousarray(ids, dtype=np.int64))


def selector_params(index: Any, selector: Any, k: int) -> Any | None:
    """``SearchParameters`` for ``index.search(..., params=)`` of an ID-mapped index, pointing to
    ``selector`` (which must outlive the search); None where faiss cannot filter this index kind."""
    inner = index.index
    inner = faiss.downcast_IndexBinary(inner) if isinstance(inner, faiss.IndexBinary) else faiss.downcast_index(inner)
    if isinstance(inner, faiss.IndexBinaryIVF):
        return None
    if isinstance(inner, faiss.IndexIVF):
        return faiss.SearchParametersIVF(sel=selector, nprobe=inner.nprobe)  # type: ignore[call-arg]
    hnsw = getattr(inner, "hnsw", None)
    if hnsw is not None:
        hnsw_params = faiss.SearchParametersHNSW  # type: ignore[attr-defined]  # missing from faiss's stubs
        return hnsw_params(sel=selector, efSearch=max(hnsw.efSearch, k))
    return faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]  # faiss sets keyword attributes


def selected_search(
    index: Any,
    queries: np.ndarray,
    k: int,
    size: int,
    selector: Any,
    *,
    approximate: bool,
    to_scores: Callable[[np.ndarray], np.ndarray],
    exact: ExactSearch,
) -> SearchResults:
    """Top-``k`` (k <= size) of the ``size`` ids that ``selector`` selects, per query row of an ID-mapped
    index of an ``approximate`` kind or not; ``to_scores`` turns faiss distances into similarities;
    ``exact`` answers what faiss cannot or should not (see the module docstring)."""
    small = size * index.d <= EXACT_SEARCH_ELEMENTS
    params = None if approximate and small else selector_params(index, selector, k)
    if params is None:
        return exact(np.arange(len(queries)))
    distances, ids = search_numpy(index)(queries, k, params=params)
    ids = np.asarray(ids, dtype=np.int64)
    scores = np.where(ids == PAD_ID, -np.inf, to_scores(distances)).astype(np.float32)
    return completed(SearchResults(ids=ids, scores=scores), k, exact)


def completed(found: SearchResults, k: int, exact: ExactSearch) -> SearchResults:
    """``found`` with the rows that hold fewer than ``k`` results redone by ``exact``."""
    short = np.flatnonzero((found.ids != PAD_ID).sum(axis=1) < k)
    if len(short):
        redone = exact(short)
        found.ids[short], found.scores[short] = redone.ids, redone.scores
    return found


def exact_selected(
    queries: np.ndarray,
    allowed: np.ndarray,
    k: int,
    gallery_of: Callable[[np.ndarray], np.ndarray],
    metric: Metric,
    *,
    dim: int,
) -> SearchResults:
    """Exact top-``k`` of the ``allowed`` ids, reading their vectors (``gallery_of(ids)``: float
    embeddings or binary codes made from them; ``dim`` float elements per item) a block at a time so
    memory stays bounded on large selections."""
    width = max(1, _EXACT_BLOCK_ELEMENTS // dim)
    parts = []
    for start in range(0, len(allowed), width):
        block = allowed[start : start + width]
        found = knn_search(queries, gallery_of(block), min(k, len(block)), metric=metric)
        parts.append((np.where(found.valid_mask(), block[found.ids.clip(0)], PAD_ID), found.scores))
    ids = np.concatenate([p[0] for p in parts], axis=1)
    scores = np.concatenate([p[1] for p in parts], axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]  # blocks ascend by id: ties keep the lower id
    return SearchResults(np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1))


def search_numpy(index: faiss.Index | faiss.IndexBinary) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """faiss's own numpy ``search``, which takes ``params=``.

    ``faiss.contrib.torch_utils`` (imported by pytorch-metric-learning, so by any process that also
    trains) replaces ``search`` on every index class with a version without ``params`` and keeps
    the original as ``search_numpy``.
    """
    return getattr(index, "search_numpy", index.search)
