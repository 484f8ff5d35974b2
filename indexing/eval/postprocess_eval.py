"""``retrieval eval --postprocess``: the metrics of alpha-QE, DBA, DBA + alpha-QE and k-reciprocal
re-ranking beside the raw embedding, float and binary, under the protocol of ``evaluate_retrieval``.

The protocol does not change: queries are the ``is_query`` items, the gallery the ``is_gallery``
items, and a query that is also a gallery item is removed from its own ranking and from its R. On
top of that, a query never expands with itself:

* alpha-QE expands a query with its first search's results, from which its own item was removed.
* DBA augments the gallery with itself, so in the same-set protocol the query's own vector would sit
  inside the augmented vectors of its neighbours. Each query is therefore scored against the gallery
  augmented WITHOUT it (``LeaveOneOut``): every gallery vector that took the query's item as a neighbour
  is recomputed without that term (its other neighbours and weights kept) before it is scored; the
  rest of the gallery is scored as augmented. A query that is not a gallery item needs no correction.

Float rankings search the vectors by inner product; binary rankings search the sign codes of the same
float vectors (DBA: of the augmented ones) by Hamming distance, and alpha-QE weighs neighbours by their
binary scores. All searches are exact (``iter_knn_chunks``); k-reciprocal re-ranks the top
``candidates`` and leaves the ranking below them as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.indexing.eval.metrics import (
    RetrievalMetrics,
    gallery_positions,
    metrics_from_neighbor_labels,
    relevant_counts,
    resolve_ks,
)
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.knn import iter_knn_chunks
from retrieval.indexing.search.postprocess import (
    AugmentedGallery,
    augment_database,
    expand_queries,
    expand_with,
    local_sets,
    normalize_rows,
    rerank_local_sets,
    sign_vectors,
)
from retrieval.indexing.search.postprocess_params import PostprocessParams
from retrieval.indexing.search.results import PAD_ID, SearchResults


@dataclass(frozen=True)
class KindSpace:
    """How one kind searches and scores float vectors: as they are, or as their sign codes."""

    kind: SearchKind
    threshold: float = 0.0

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        return np.asarray(vectors, np.float32) if self.kind is SearchKind.FLOAT else binarize(vectors, self.threshold)

    def similarity_vectors(self, vectors: np.ndarray) -> np.ndarray:
        """Vectors whose dot products are this kind's scores."""
        if self.kind is SearchKind.FLOAT:
            return np.asarray(vectors, np.float32)
        return sign_vectors(binarize(vectors, self.threshold), np.asarray(vectors).shape[1])

    def search(self, queries: np.ndarray, gallery: np.ndarray, k: int, own: np.ndarray) -> SearchResults:
        """Exact top-k of float ``queries`` in the encoded ``gallery``, each query's ``own`` row left out."""
        chunks = iter_knn_chunks(self.encode(queries), gallery, k, metric=self.kind.metric, query_ids=own)
        return SearchResults.concatenate([results for _, results in chunks])


class LeaveOneOut:
    """A DBA gallery as each query sees it: without the query's own vector in its neighbours' sums."""

    def __init__(self, augmented: AugmentedGallery, raw: np.ndarray) -> None:
        self.augmented, self.raw = augmented, np.asarray(raw, np.float32)
        used = (augmented.neighbours >= 0) & (augmented.weights > 0)
        holders, slots = np.nonzero(used)  # gallery row holders[i] took neighbours[holders[i], slots[i]]
        taken = augmented.neighbours[holders, slots]
        order = np.argsort(taken, kind="stable")
        self._holders, self._weights = holders[order], augmented.weights[holders, slots][order]
        self._starts = np.searchsorted(taken[order], np.arange(len(self.raw) + 1))
        self._last: tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def degree(self, own: np.ndarray) -> np.ndarray:
        """How many gallery vectors took each of ``own`` (-1: none) as a neighbour."""
        counts = np.diff(self._starts)
        return np.where(own >= 0, counts[own.clip(0)], 0)

    def corrections(self, own: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query rows, gallery rows, vectors): for every query, the augmented gallery vectors that took its
        own item (``own``, -1: none), recomputed without that item's term (kept for the same ``own``)."""
        if self._last is not None and np.array_equal(self._last[0], own):
            return self._last[1]
        degree = self.degree(own)
        rows = np.repeat(np.arange(len(own)), degree)
        first = np.repeat(self._starts[own.clip(0)] - np.cumsum(degree) + degree, degree)
        taken = first + np.arange(len(rows))
        holders, weights = self._holders[taken], self._weights[taken]
        vectors = normalize_rows(self.augmented.sums[holders] - weights[:, None] * self.raw[own[rows]])
        self._last = (own.copy(), (rows, holders, vectors))
        return rows, holders, vectors

    def search(self, space: KindSpace, queries: np.ndarray, k: int, own: np.ndarray) -> SearchResults:
        """Exact top-k of each query against the augmented gallery without its own item (``own``)."""
        gallery = space.encode(self.augmented.vectors)
        degree = self.degree(own)
        base = space.search(queries, gallery, min(k + int(degree.max(initial=0)), len(self.raw)), own)
        rows, holders, vectors = self.corrections(own)
        fixed = np.einsum(
            "pd,pd->p", space.similarity_vectors(vectors), space.similarity_vectors(queries)[rows]
        ).astype(np.float32)
        stale = np.isin(
            _pair_keys(np.arange(len(own))[:, None], base.ids, len(self.raw)), _pair_keys(rows, holders, len(self.raw))
        )
        kept = SearchResults(
            np.where(stale, PAD_ID, base.ids), np.where(stale, -np.inf, base.scores).astype(np.float32)
        )
        width = int(degree.max(initial=0))
        slot = np.arange(len(rows)) - np.repeat(np.cumsum(degree) - degree, degree)
        block = SearchResults.empty(len(own), width)
        block.ids[rows, slot], block.scores[rows, slot] = holders, fixed
        return SearchResults.merge_top_k([kept, block], k) if width else kept.head(k).pad(k)

    def neighbour_vectors(self, first: SearchResults, own: np.ndarray) -> np.ndarray:
        """(n, k, d) float vectors of ``first``'s results as each query sees them (corrected where they
        took the query's own item)."""
        vectors = self.augmented.vectors[first.ids.clip(0)].copy()
        rows, holders, corrected = self.corrections(own)
        keys = _pair_keys(rows, holders, len(self.raw))  # ascending: rows ascend, holders ascend per row
        found = _pair_keys(np.arange(len(own))[:, None], first.ids, len(self.raw))
        where = np.isin(found, keys) & first.valid_mask()
        vectors[where] = corrected[np.searchsorted(keys, found[where])]
        return vectors


def _pair_keys(rows: np.ndarray, ids: np.ndarray, size: int) -> np.ndarray:
    """One int64 per (query row, gallery row) pair."""
    return np.asarray(rows, np.int64) * (size + 1) + np.asarray(ids, np.int64)


def ranking(
    method: str,
    space: KindSpace,
    queries: np.ndarray,
    gallery: np.ndarray,
    own: np.ndarray,
    depth: int,
    params: PostprocessParams,
    cache: dict[str, Any] | None = None,
) -> SearchResults:
    """The top ``depth`` gallery rows of each float query after ``method`` (``own``: each query's gallery
    row, -1 when it is not in the gallery). ``cache``: what earlier calls on THESE queries and gallery
    made that does not depend on the parameters searched over (DBA galleries by their parameters,
    k-reciprocal local sets by kind and size), filled in as it is made."""
    cache = cache if cache is not None else {}
    if method in ("dba", "dba+qe"):
        key = f"dba {params.dba.model_dump_json()}"
        if key not in cache:
            cache[key] = LeaveOneOut(augment_database(gallery, params.dba), gallery)
        gallery_view: LeaveOneOut = cache[key]
        if method == "dba":
            return gallery_view.search(space, queries, depth, own)
        first = gallery_view.search(space, queries, params.qe.n, own)
        expanded = expand_with(queries, gallery_view.neighbour_vectors(first, own), first.scores, params.qe)
        return gallery_view.search(space, expanded, depth, own)
    encoded = space.encode(gallery)
    if method == "none":
        return space.search(queries, encoded, depth, own)
    if method == "qe":
        first = space.search(queries, encoded, params.qe.n, own)
        return space.search(expand_queries(queries, gallery, first, params.qe), encoded, depth, own)
    if method == "kreciprocal":
        size = params.kreciprocal.candidates
        key = f"kreciprocal {space.kind.value} {size} {depth}"
        if key not in cache:
            first = space.search(queries, encoded, max(size, depth), own)
            vectors = (space.similarity_vectors(queries), space.similarity_vectors(gallery))
            cache[key] = (first, local_sets(*vectors, first, size))
        first, sets = cache[key]
        reranked = rerank_local_sets(sets, params.kreciprocal)
        rest = SearchResults(first.ids[:, reranked.k :], first.scores[:, reranked.k :])
        return SearchResults(
            np.concatenate([reranked.ids, rest.ids], 1), np.concatenate([reranked.scores, rest.scores], 1)
        ).head(depth)
    raise ValueError(f"unknown post-processing {method!r}")


def postprocess_metrics(
    embeddings: np.ndarray,
    labels: np.ndarray,
    is_query: np.ndarray,
    is_gallery: np.ndarray,
    methods: Sequence[str],
    params: PostprocessParams,
    *,
    ks: Sequence[int] | None = None,
    threshold: float = 0.0,
    cache: dict[str, Any] | None = None,
) -> dict[str, dict[str, RetrievalMetrics]]:
    """{method: {"float": metrics, "binary": metrics}} of each method, the queries and gallery from the
    flags as ``evaluate_retrieval`` takes them (queries with R = 0 left out; no NMI). ``cache``: see
    ``ranking`` (one dict per data set, for repeated calls with other parameters)."""
    cache = cache if cache is not None else {}
    _, codes = np.unique(np.asarray(labels), return_inverse=True)
    queries, gallery = np.flatnonzero(is_query), np.flatnonzero(is_gallery)
    own = gallery_positions(queries, gallery)
    relevant = relevant_counts(codes[queries], codes[gallery], own)
    kept = relevant > 0
    queries, own, relevant = queries[kept], own[kept], relevant[kept]
    chosen = resolve_ks(ks, codes[gallery])
    depth = int(min(max(relevant.max(initial=0), max(chosen)), len(gallery)))
    vectors = np.asarray(embeddings, np.float32)
    out: dict[str, dict[str, RetrievalMetrics]] = {}
    for method in methods:
        out[method] = {}
        for kind in SearchKind:
            space = KindSpace(kind, threshold)
            found = ranking(method, space, vectors[queries], vectors[gallery], own, depth, params, cache)
            neighbour_labels = found.labels_of(codes[gallery])
            out[method][kind.value] = metrics_from_neighbor_labels(neighbour_labels, codes[queries], relevant, chosen)
    return out
