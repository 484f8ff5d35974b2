"""``SegmentSearcher``: one segment of a files index searched for one kind, tombstones and filters included.

A searcher owns what a search of its segment needs: the kind (float or binary), the faiss index of
that kind and its searcher (on the GPUs where faiss sees any: every segment, base and deltas), the
conversion of faiss distances into scores, and the exact fallback over the stored embeddings.

A segment without tombstones is searched as it is. With tombstones, it is searched for a few more than
k and the tombstones are dropped; rows left with fewer than k are searched again through an
``IDSelectorNot`` of the tombstones in the kind's ``SearchParameters`` (``filtered_search``;
``IndexBinaryIVF`` takes no selector, so it over-fetches k + all tombstones), and rows an approximate
index still leaves short are redone exactly over the segment's live items. So a segment gives
min(k, live items) results, as a freshly built index of its live items would. A filter's matches
in the segment go through an ``IDSelectorBatch`` the same way.

``IndexStore`` merges the segments' results into one top-k (``SearchResults.merge_top_k``: by score,
ties by ascending id). Per-segment top-k lists are exact prefixes of each segment's ranking, so the
merged list equals the top-k of one index over all live items (for exact kinds; for approximate
ones, each segment's usual approximation).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.results import SearchResults
from retrieval.indexing.store.files.faiss_search.faiss_gpu import Searcher, searcher
from retrieval.indexing.store.files.faiss_search.filtered_search import (
    CodeScan,
    StoredVectors,
    batch_selector,
    exact_search,
    search_numpy,
    selector_params,
    small_selection,
)
from retrieval.indexing.store.files.segment_storage.segments import Segment


def overfetch(k: int, dead_fraction: float) -> int:
    """Results to fetch so that k live ones rarely miss: k, a margin, and 4x the tombstones expected."""
    return k + 8 + k // 2 + int(np.ceil(4 * k * dead_fraction / max(1 - dead_fraction, 1e-9)))


class SegmentSearcher:
    """Top-k searches of one segment's live items, for one kind."""

    def __init__(self, segment: Segment, kind: SearchKind, stored: StoredVectors, bits: int) -> None:
        self.segment, self.kind = segment, kind
        self._index = segment.index(kind)
        self._approximate = not segment.index_kind(kind).exact
        self._search: Searcher = searcher(kind, self._index, segment.index_kind(kind).name)
        self._stored, self._bits = stored, bits
        self._code_scan: CodeScan | None = CodeScan.of(self._index) if kind is SearchKind.BINARY else None

    def search(self, data: np.ndarray, k: int, selected: np.ndarray | None = None) -> SearchResults:
        """Top-``k`` of the segment's live items, or of ``selected`` (ascending live ids of this segment,
        a filter's matches); ``k`` is at most their number. ``data``: float queries or binary codes."""
        if selected is not None:
            if self._code_scan is not None and self._scans(len(selected)):
                return self._code_scan.search(data, k, selected)
            return self._through_selector(data, k, batch_selector(selected), selected)
        dead = self.segment.dead
        if not len(dead):
            return self._faiss(self._search, data, k)
        fetch = min(overfetch(k, len(dead) / len(self.segment.ids)), int(self._index.ntotal))
        found = self._faiss(self._search, data, fetch).without(dead).head(k)
        short = found.short_rows(k)
        return found.replace_rows(short, self._live_through_selector(data[short], k)) if len(short) else found

    def _scans(self, selected: int) -> bool:
        """Whether a selection is small enough to gather and scan its codes: at most half the segment
        (beyond that faiss's scan with a selector reads less) and within ``small_selection``'s memory."""
        return 2 * selected <= self._index.ntotal and small_selection(selected, self._index.d)

    def _live_through_selector(self, data: np.ndarray, k: int) -> SearchResults:
        """Top-``k`` live items through the tombstone selector (which turns flat search into a scan
        without BLAS: 5x slower in batches here, so only for rows the over-fetch left short) or, where
        faiss takes none, by over-fetching k + all tombstones."""
        selector, live = self.segment.tombstone_selector(), self.segment.live_ids()
        if selector_params(self._index, selector, k) is None:  # IndexBinaryIVF
            fetch = min(k + len(self.segment.dead), int(self._index.ntotal))
            found = self._faiss(self._index.search, data, fetch).without(self.segment.dead).head(k)
            return self._completed(found, data, k, live)
        return self._through_selector(data, k, selector, live)

    def _through_selector(self, data: np.ndarray, k: int, selector: Any, allowed: np.ndarray) -> SearchResults:
        """Top-``k`` of the ``allowed`` ids that ``selector`` selects (it must outlive the search)."""
        skip = self._approximate and small_selection(len(allowed), self._index.d)
        params = None if skip else selector_params(self._index, selector, k)
        if params is None:
            return exact_search(data, allowed, k, self.kind, self._stored)
        found = self._faiss(search_numpy(self._index), data, k, params=params)
        return self._completed(found, data, k, allowed)

    def _completed(self, found: SearchResults, data: np.ndarray, k: int, allowed: np.ndarray) -> SearchResults:
        """``found`` with the rows that hold fewer than ``k`` results redone exactly over ``allowed``."""
        short = found.short_rows(k)
        if not len(short):
            return found
        return found.replace_rows(short, exact_search(data[short], allowed, k, self.kind, self._stored))

    def _faiss(self, search: Any, data: np.ndarray, k: int, **params: Any) -> SearchResults:
        distances, ids = search(data, k, **params)
        return SearchResults.from_faiss(distances, ids, lambda found: self.kind.scores(found, self._bits))
