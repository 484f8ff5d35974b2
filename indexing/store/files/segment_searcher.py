"""Search across segments: each segment's own top-k without its tombstones, then one merged top-k.

A segment without tombstones is searched as it is. With tombstones, it is searched for a few more than
k and the tombstones are dropped; rows left with fewer than k are searched again through an
``IDSelectorNot`` of the tombstones in the kind's ``SearchParameters`` (``filtered_search``;
``IndexBinaryIVF`` takes no selector, so it over-fetches k + all tombstones), and rows an approximate
index still leaves short are redone exactly over the segment's live items. So a segment gives
min(k, live items) results, as a freshly built index of its live items would.

The merge keeps the best k of the union by score (float: inner product; binary: ``1 - 2 * hamming /
bits``, i.e. by Hamming distance), ties by ascending item id. Per-segment top-k lists are exact
prefixes of each segment's ranking, so the merged list equals the top-k of one index over all live
items (for exact kinds; for approximate ones, each segment's usual approximation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from retrieval.indexing.search.results import PAD_ID, SearchResults
from retrieval.indexing.store.files.faiss_gpu import Searcher
from retrieval.indexing.store.files.filtered_search import ExactSearch, completed, selected_search, selector_params
from retrieval.indexing.store.files.segments import Segment

ToScores = Callable[[np.ndarray], np.ndarray]


def empty_results(queries: int, k: int = 0) -> SearchResults:
    return SearchResults(np.full((queries, k), PAD_ID, np.int64), np.full((queries, k), -np.inf, np.float32))


def padded(ids: np.ndarray, scores: np.ndarray) -> SearchResults:
    """faiss marks missing results with id -1 (and a huge score): make them ``PAD_ID`` / -inf."""
    ids = np.asarray(ids, dtype=np.int64)
    scores = np.where(ids == PAD_ID, -np.inf, scores).astype(np.float32)
    return SearchResults(ids=ids, scores=scores)


def search_live(
    segment: Segment,
    family: str,
    searcher: Searcher,
    data: np.ndarray,
    k: int,
    *,
    to_scores: ToScores,
    exact: ExactSearch,
) -> SearchResults:
    """Top-``k`` (k <= live items) of one segment's live items; ``data`` are float queries or codes.

    With tombstones, the index's own (BLAS or GPU) search fetches a few more than k and drops them;
    only rows that keep fewer than k go through the selector (which turns flat search into a scan
    without BLAS: 5x slower in batches here) or, where faiss takes none, a full over-fetch."""
    if not len(segment.dead):
        distances, ids = searcher(data, k)
        return padded(ids, to_scores(distances))
    index = segment.float_index if family == "float" else segment.binary_index
    fetch = min(overfetch(k, len(segment.dead) / len(segment.ids)), int(index.ntotal))
    found = _without(segment.dead, *searcher(data, fetch), k, to_scores)
    short = np.flatnonzero((found.ids != PAD_ID).sum(axis=1) < k)
    if len(short):
        redone = _selected(segment, family, data[short], k, to_scores, lambda rows: exact(short[rows]))
        found.ids[short], found.scores[short] = redone.ids, redone.scores
    return found


def overfetch(k: int, dead_fraction: float) -> int:
    """Results to fetch so that k live ones rarely miss: k, a margin, and 4x the tombstones expected."""
    return k + 8 + k // 2 + int(np.ceil(4 * k * dead_fraction / max(1 - dead_fraction, 1e-9)))


def _selected(
    segment: Segment, family: str, data: np.ndarray, k: int, to_scores: ToScores, exact: ExactSearch
) -> SearchResults:
    """Top-``k`` live items through the tombstone selector, or by over-fetching k + all tombstones."""
    index = segment.float_index if family == "float" else segment.binary_index
    kind = segment.float_kind if family == "float" else segment.binary_kind
    selector = segment.tombstone_selector()
    if selector_params(index, selector, k) is None:  # IndexBinaryIVF
        fetch = min(k + len(segment.dead), int(index.ntotal))
        distances, ids = index.search(data, fetch)
        return completed(_without(segment.dead, distances, ids, k, to_scores), k, exact)
    return selected_search(
        index, data, k, segment.live_count, selector, approximate=not kind.exact, to_scores=to_scores, exact=exact
    )


def _without(dead: np.ndarray, distances: np.ndarray, ids: np.ndarray, k: int, to_scores: ToScores) -> SearchResults:
    """faiss results with the tombstones dropped, the first ``k`` left of each row kept in rank order."""
    found = padded(np.where(np.isin(ids, dead), PAD_ID, ids), to_scores(distances))
    order = np.argsort(found.ids == PAD_ID, axis=1, kind="stable")[:, :k]
    return SearchResults(np.take_along_axis(found.ids, order, 1), np.take_along_axis(found.scores, order, 1))


def merge_top_k(parts: Sequence[SearchResults], queries: int, k: int) -> SearchResults:
    """The best ``k`` of the segments' results per row: by score, ties by ascending id."""
    if not parts:
        return empty_results(queries, k)
    if len(parts) == 1 and parts[0].k == k:
        return parts[0]
    ids = np.concatenate([part.ids for part in parts], axis=1)
    scores = np.concatenate([part.scores for part in parts], axis=1)
    order = np.lexsort((np.where(ids == PAD_ID, np.iinfo(np.int64).max, ids), -scores), axis=1)[:, :k]
    ids, scores = np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)
    if ids.shape[1] < k:  # fewer results in all segments together than k: pad
        pad = empty_results(queries, k - ids.shape[1])
        ids, scores = np.concatenate([ids, pad.ids], 1), np.concatenate([scores, pad.scores], 1)
    return SearchResults(ids, scores)
