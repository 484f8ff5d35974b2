"""A store's search after a per-query post-processing: alpha-QE or k-reciprocal re-ranking
(``retrieval search --postprocess``, the service's ``postprocess``), with the parameters of the index's
manifest (``postprocess``: ``index build --postprocess-params``).

Both start from the store's own search (float, binary, or binary re-ranked: whatever the request
asked for, its filter included) and read the stored float vectors of what it found, once:

* ``qe``: the query plus its top n hits weighted by score^alpha (each query's excluded item, e.g. the
  item of ``/items/{id}/similar``, is never among them), searched again the same way. Cost: one more
  search and n stored vectors. A binary search re-ranked by float (``rerank=N``) does not scan the
  codes twice: the expanded query re-ranks the same binary shortlist of N (its float vectors read once).
* ``kreciprocal``: the top ``candidates`` hits re-ordered by the k-reciprocal distance of the query and
  their stored float vectors (cosine); scores are 1 - that distance. Cost: (candidates + 1)^2 dot
  products, whatever the index size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.search.postprocess import expand_queries, k_reciprocal_rerank
from retrieval.indexing.search.postprocess_params import QeParams
from retrieval.indexing.search.results import PAD_ID, SearchResults
from retrieval.indexing.store.shared.rerank import rerank_shortlist, shortlist_ids
from retrieval.indexing.store.shared.search_settings import SearchSettings
from retrieval.indexing.store.shared.store_protocol import Store


def postprocessed_search(
    store: Store, queries: np.ndarray, k: int, settings: SearchSettings, exclude: Sequence[int | None]
) -> SearchResults:
    """The top ``k`` item ids per query after ``settings.postprocess`` (qe, kreciprocal; none: the plain
    search), searched as ``settings`` say (kind, rerank, where), ``exclude[i]`` dropped from row i."""
    kind, rerank, where = settings.kind, settings.rerank, settings.where

    def search(vectors: np.ndarray, wanted: int) -> SearchResults:
        return _without_own(store.search(vectors, wanted + 1, kind=kind, rerank=rerank, where=where), exclude, wanted)

    params = store.manifest.postprocess
    if settings.postprocess == "qe" and rerank and settings.search_kind is SearchKind.BINARY:
        shortlist = store.search(queries, max(rerank, k) + 1, kind=kind, where=where)
        return _qe_within(store, shortlist, queries, k, params.qe, exclude)
    if settings.postprocess == "qe":
        first = search(queries, params.qe.n)
        ids, gallery = _stored(store, first)
        return search(expand_queries(queries, gallery, _local(first, ids), params.qe), k)
    if settings.postprocess == "kreciprocal":
        first = search(queries, max(params.kreciprocal.candidates, k))
        ids, gallery = _stored(store, first)
        if ids.size == 0:  # nothing matched (a filter no item passes): nothing to re-rank
            return first.head(k)
        reranked = k_reciprocal_rerank(queries, gallery, _local(first, ids), params.kreciprocal)
        return SearchResults(np.where(reranked.valid_mask(), ids[reranked.ids.clip(0)], PAD_ID), reranked.scores).head(
            k
        )
    return search(queries, k)


def _qe_within(
    store: Store, shortlist: SearchResults, queries: np.ndarray, k: int, params: QeParams, exclude: Sequence[int | None]
) -> SearchResults:
    """alpha-QE inside one binary shortlist: re-ranked by float for the query, then for the expanded query."""
    ids = shortlist_ids(shortlist)
    vectors = store.embeddings_of(ids)

    def reranked(vectors_q: np.ndarray, wanted: int) -> SearchResults:
        return _without_own(rerank_shortlist(vectors_q, shortlist, wanted + 1, ids, vectors), exclude, wanted)

    first = reranked(queries, params.n)
    return reranked(expand_queries(queries, vectors, _local(first, ids), params), k)


def _local(results: SearchResults, ids: np.ndarray) -> SearchResults:
    """``results`` with item ids as positions in the ascending ``ids``."""
    return SearchResults(np.where(results.valid_mask(), np.searchsorted(ids, results.ids), PAD_ID), results.scores)


def _stored(store: Store, results: SearchResults) -> tuple[np.ndarray, np.ndarray]:
    """(ascending distinct ids of ``results``, their stored float vectors)."""
    ids = np.unique(results.ids[results.valid_mask()])
    return ids, store.embeddings_of(ids) if len(ids) else np.zeros((0, store.manifest.dim), np.float32)


def _without_own(results: SearchResults, exclude: Sequence[int | None], k: int) -> SearchResults:
    """Each row without its excluded id (or its last result, when it held none), ``k`` wide."""
    rows = [
        SearchResults(results.ids[r : r + 1], results.scores[r : r + 1]).without(np.array([own]))
        if own is not None
        else SearchResults(results.ids[r : r + 1], results.scores[r : r + 1])
        for r, own in enumerate(exclude)
    ]
    return SearchResults.concatenate(rows).head(k).pad(k)
