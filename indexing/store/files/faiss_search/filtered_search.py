"""Search restricted to a set of item ids (a filter's matches, a segment's live items): faiss id
selectors, and exact search where that is better.

The selector (``IDSelectorBatch`` of a filter's matches, or ``IDSelectorNot`` of a segment's tombstones,
translated to positions by the ID map) travels in the index kind's own ``SearchParameters``, which
also carry the ``nprobe`` / ``efSearch`` it was built with: ``SearchParametersIVF`` for IVF kinds,
``SearchParametersHNSW`` for HNSW, plain ones for flat. Where the selector cannot give the right
answer, the selected items' stored embeddings are searched exactly instead (``exact_search``):
- faiss's ``IndexBinaryIVF`` rejects selectors;
- an approximate kind with a small selection (at most ``EXACT_SEARCH_ELEMENTS`` vector elements):
  IVF visits only ``nprobe`` lists, which hold a share of the few matches, and HNSW walks a graph
  the selector prunes; scanning the selection is then both exact and cheap (16 384 items of 2048-d);
- rows an approximate search left short of k.
So a row always holds min(k, matches) results. Exact float scores come from the stored float16
embeddings, as re-ranking's do (within about 1e-3 of faiss's float32 ones). Filtered searches run on
the CPU copies of the indexes. ``segment_searcher`` decides which of these a search takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import faiss
import numpy as np

from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.knn import knn_search
from retrieval.indexing.search.results import PAD_ID, SearchResults
from retrieval.indexing.store.files.segment_storage.segment_set import SegmentSet

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


class CodeScan:
    """Exact Hamming search of a few rows of an ID-mapped ``IndexBinaryFlat``, read from the index's own
    codes (a view without a copy, so the same codes faiss scans; the view lives as long as the index).

    A filter's few matches are gathered and scanned (a microsecond per thousand codes) instead of
    faiss scanning the whole segment through an ``IDSelectorBatch``, which tests every row against
    the selector and was slower than the unfiltered search (bench/bench_filtered_search.py)."""

    def __init__(self, index: Any, inner: Any) -> None:
        self._index, self._inner = index, inner  # the ID map and its IndexBinaryFlat

    @classmethod
    def of(cls, index: Any) -> CodeScan | None:
        """The scan of ``index``'s codes, or None where it is not an ID-mapped flat binary index. Nothing is
        read until the first search (a store opens without this cost; most are never filtered)."""
        inner = index.index
        if not isinstance(inner, faiss.IndexBinary):
            return None
        inner = faiss.downcast_IndexBinary(inner)
        if not isinstance(inner, faiss.IndexBinaryFlat) or inner.ntotal == 0:
            return None
        return cls(index, inner)

    @cached_property
    def _codes(self) -> np.ndarray:
        count, width = int(self._inner.ntotal), int(self._inner.code_size)
        return faiss.rev_swig_ptr(self._inner.xb.data(), count * width).reshape(count, width)

    @cached_property
    def _rows(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(the ids ascending, the row of each; None where the rows are already in ascending id order)."""
        ids = faiss.vector_to_array(self._index.id_map).astype(np.int64)
        if (np.diff(ids) > 0).all():
            return ids, None
        order = np.argsort(ids, kind="stable")
        return ids[order], order

    def search(self, codes: np.ndarray, k: int, selected: np.ndarray) -> SearchResults:
        """Top-``k`` of the ``selected`` ids (ascending, all in the index) for the query ``codes``; ties
        keep the lower id first, as faiss's own search does."""
        ascending, order = self._rows
        rows = np.searchsorted(ascending, selected)
        found = knn_search(codes, self._codes[rows if order is None else order[rows]], k, metric="hamming")
        return SearchResults(np.where(found.valid_mask(), selected[found.ids.clip(0)], PAD_ID), found.scores)


def small_selection(size: int, width: int) -> bool:
    """A selection of ``size`` items of ``width`` elements (dimensions or bits) small enough that an
    approximate index is skipped for an exact scan of it."""
    return size * width <= EXACT_SEARCH_ELEMENTS


@dataclass(frozen=True)
class StoredVectors:
    """The stored embeddings of a files index as exact search reads them: float32, or binary codes."""

    segments: SegmentSet
    threshold: float
    dim: int

    def of(self, kind: SearchKind, ids: np.ndarray) -> np.ndarray:
        embeddings = self.segments.embeddings_of(ids)
        return embeddings if kind is SearchKind.FLOAT else binarize(embeddings, self.threshold)


def exact_search(
    queries: np.ndarray, allowed: np.ndarray, k: int, kind: SearchKind, stored: StoredVectors
) -> SearchResults:
    """Exact top-``k`` of the ``allowed`` ids (ascending), reading their stored vectors a block at a
    time so memory stays bounded on large selections; ties keep the lower id first."""
    width = max(1, _EXACT_BLOCK_ELEMENTS // stored.dim)
    parts = []
    for start in range(0, len(allowed), width):
        block = allowed[start : start + width]
        found = knn_search(queries, stored.of(kind, block), min(k, len(block)), metric=kind.metric)
        parts.append(SearchResults(np.where(found.valid_mask(), block[found.ids.clip(0)], PAD_ID), found.scores))
    return SearchResults.merge_top_k(parts, k)


def search_numpy(index: faiss.Index | faiss.IndexBinary) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """faiss's own numpy ``search``, which takes ``params=``.

    ``faiss.contrib.torch_utils`` (imported by pytorch-metric-learning, so by any process that also
    trains) replaces ``search`` on every index class with a version without ``params`` and keeps
    the original as ``search_numpy``.
    """
    return getattr(index, "search_numpy", index.search)
