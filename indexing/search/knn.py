"""Exact k-nearest-neighbour search, in query chunks so memory stays O(gallery + chunk x k).

Float vectors ("ip"): similarities come from NumPy's BLAS matrix product (its OpenBLAS picks a
fast kernel on this machine, where faiss's bundled one runs about 5x slower without
``OPENBLAS_CORETYPE``), block by block, and faiss's C++ heaps keep the k best of each row.
Binary codes ("hamming"): faiss ``IndexBinaryFlat``.

Ties: equal scores are ordered by ascending gallery position, and at the k-th place the lower
positions win. The float heap gets this rule by storing ``-2 - position`` as the id (faiss breaks
heap ties by id) and by receiving gallery columns in ascending order; faiss's binary search
already follows it. Where fewer than k items exist, slots are padded with id -1 and score -inf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

import faiss
import numpy as np
from tqdm import tqdm

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.binary import hamming_to_similarity
from retrieval.indexing.search.fast_transpose import transpose_into
from retrieval.indexing.search.results import PAD_ID, SearchResults

Metric = Literal["ip", "hamming"]
METRICS: tuple[str, ...] = ("ip", "hamming")
_BLOCK_ELEMENTS = 1 << 24
"""Largest similarity block computed at once (64 MiB of float32)."""
_SELF_BLOCK = 2560
"""Rows per block of a same-set search: a 2560 x 2560 float32 block (26 MB) stays in a 32 MB L3 cache
between the product, the heap passes and the transpose. 4096 (64 MB) was 10 % slower at N=60,000
d=512 (17.0 vs 15.1 s, two alternating runs each) and the same at N=8,000 d=2048 (0.90 vs 0.91 s)."""


def knn_search(
    queries: np.ndarray,
    gallery: np.ndarray,
    k: int,
    *,
    metric: Metric = "ip",
    exclude_self: bool = False,
    chunk_size: int = 4096,
    progress: bool = False,
) -> SearchResults:
    """Exact top-k gallery items of each query (see the module docstring for ties and padding).

    ``exclude_self=True`` means the queries ARE the gallery (same rows, same order) and each
    query's own row is never returned. k larger than the gallery is allowed: the extra slots
    are padded (id -1). Same-set float search computes each block pair once and uses it for both
    sides (half the arithmetic).
    """
    queries, gallery = check_pair(queries, gallery, metric)
    _check_k(k, chunk_size)
    if exclude_self:
        if queries.shape != gallery.shape:
            raise DataError("exclude_self=True needs the queries to be the gallery itself (same rows, same order).")
        if metric == "ip":
            return _self_knn_float(gallery, k, chunk_size, progress)
    query_ids = np.arange(len(queries)) if exclude_self else None
    chunks = iter_knn_chunks(
        queries, gallery, k, metric=metric, query_ids=query_ids, chunk_size=chunk_size, progress=progress
    )
    return SearchResults.concatenate([results for _, results in chunks])


def iter_knn_chunks(
    queries: np.ndarray,
    gallery: np.ndarray,
    k: int,
    *,
    metric: Metric = "ip",
    query_ids: np.ndarray | None = None,
    chunk_size: int = 4096,
    progress: bool = False,
) -> Iterator[tuple[int, SearchResults]]:
    """Yield ``(start, results)`` for ``queries[start:start + chunk_size]``, one chunk at a time.

    ``query_ids[i]`` is the gallery position of query i (it is excluded from its own results),
    for same-set evaluation of a subset of the gallery; None = queries are not in the gallery.
    """
    queries, gallery = check_pair(queries, gallery, metric)
    _check_k(k, chunk_size)
    search = _float_chunk if metric == "ip" else _binary_searcher(gallery)
    for start in tqdm(range(0, len(queries), chunk_size), desc="k-NN", unit="chunk", disable=not progress):
        stop = start + chunk_size
        own = None if query_ids is None else np.asarray(query_ids[start:stop], dtype=np.int64)
        yield start, search(queries[start:stop], gallery, k, own)


def check_pair(queries: np.ndarray, gallery: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert to contiguous float32 ("ip") or uint8 codes ("hamming")."""
    if metric not in METRICS:
        raise DataError(f"unknown metric {metric!r}; known metrics: {', '.join(METRICS)}.")
    arrays = [np.asarray(queries), np.asarray(gallery)]
    for name, array in zip(("queries", "gallery"), arrays):
        if array.ndim != 2 or array.shape[0] == 0:
            raise DataError(f"{name} must be a non-empty 2-D array (n, dim), got shape {array.shape}.")
    if arrays[0].shape[1] != arrays[1].shape[1]:
        raise DataError(f"queries have dimension {arrays[0].shape[1]} but the gallery has {arrays[1].shape[1]}.")
    if metric == "hamming":
        if any(a.dtype != np.uint8 for a in arrays):
            raise DataError("metric='hamming' needs uint8 packed codes from binarize(), not float embeddings.")
        return np.ascontiguousarray(arrays[0]), np.ascontiguousarray(arrays[1])
    if any(not np.issubdtype(a.dtype, np.floating) for a in arrays):
        raise DataError("metric='ip' needs float embeddings; use metric='hamming' for binary codes.")
    converted = [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]
    distinct = converted[:1] if converted[0] is converted[1] else converted  # a same-set search passes one array
    if any(not np.isfinite(a).all() for a in distinct):
        raise DataError("embeddings contain NaN or infinite values; check the model output.")
    return converted[0], converted[1]


def _check_k(k: int, chunk_size: int) -> None:
    if int(k) < 1 or int(chunk_size) < 1:
        raise DataError(f"k ({k}) and chunk_size ({chunk_size}) must be positive integers.")


class _TopK:
    """faiss min-heaps keeping the k largest scores per row, ties to the lower gallery position."""

    def __init__(self, n_rows: int, k: int) -> None:
        self._scores = np.empty((n_rows, k), dtype=np.float32)
        self._tids = np.empty((n_rows, k), dtype=np.int64)
        self._heaps = faiss.float_minheap_array_t()
        self._heaps.k, self._heaps.nh = k, n_rows
        self._heaps.val = faiss.swig_ptr(self._scores)
        self._heaps.ids = faiss.swig_ptr(self._tids)
        self._heaps.heapify()

    def add(self, first_row: int, scores: np.ndarray, first_id: int) -> None:
        """Offer ``scores[i, j]`` for row first_row + i and gallery position first_id + j."""
        scores = np.ascontiguousarray(scores, dtype=np.float32)
        rows = np.arange(first_row, first_row + scores.shape[0], dtype=np.int64)
        tids = -2 - np.arange(first_id, first_id + scores.shape[1], dtype=np.int64)
        self._heaps.addn_query_subset_with_ids(
            len(rows), faiss.swig_ptr(rows), scores.shape[1], faiss.swig_ptr(scores), faiss.swig_ptr(tids), 0
        )

    def results(self) -> SearchResults:
        self._heaps.reorder()
        return SearchResults.from_faiss(self._scores, np.where(self._tids == PAD_ID, PAD_ID, -2 - self._tids))


def _block_size(rows: int) -> int:
    return max(256, _BLOCK_ELEMENTS // max(rows, 1))


def _float_chunk(queries: np.ndarray, gallery: np.ndarray, k: int, own: np.ndarray | None) -> SearchResults:
    top = _TopK(len(queries), k)
    block = _block_size(len(queries))
    scratch = _Scratch(len(queries) * min(block, len(gallery)))
    for first in range(0, len(gallery), block):
        scores = scratch.product(queries, gallery[first : first + block])
        if own is not None:
            inside = (own >= first) & (own < first + scores.shape[1])
            scores[np.flatnonzero(inside), own[inside] - first] = -np.inf
        top.add(0, scores, first)
    return top.results()


def _self_knn_float(vectors: np.ndarray, k: int, chunk_size: int, progress: bool) -> SearchResults:
    """Same-set search: block (i, j >= i) feeds rows of i and, transposed, rows of j.

    Every row still receives gallery columns in ascending order (blocks j' < j arrive through
    the transposes of earlier outer steps), which the tie rule needs.
    """
    top = _TopK(len(vectors), k)
    block = min(chunk_size, _SELF_BLOCK)
    scratch, transposed = _Scratch(min(block, len(vectors)) ** 2), _Scratch(min(block, len(vectors)) ** 2)
    starts = range(0, len(vectors), block)
    for i in tqdm(starts, desc="k-NN", unit="block row", disable=not progress):
        rows = vectors[i : i + block]
        for j in range(i, len(vectors), block):
            scores = scratch.product(rows, vectors[j : j + block])
            if j == i:
                np.fill_diagonal(scores, -np.inf)
            top.add(i, scores, j)
            if j != i:
                top.add(j, transpose_into(scores, transposed.view(scores.shape[::-1])), i)
    return top.results()


class _Scratch:
    """One float32 buffer reused for every similarity block of a search. A fresh 64 MiB array per
    block is a fresh mmap whose first touch page-faults (about 14 ms per block here, 15 % of
    N=60,000 evaluation)."""

    def __init__(self, elements: int) -> None:
        self._buffer = np.empty(elements, dtype=np.float32)

    def view(self, shape: tuple[int, int]) -> np.ndarray:
        return self._buffer[: shape[0] * shape[1]].reshape(shape)

    def product(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """``rows @ columns.T`` written into the buffer (NumPy uses SYRK when ``columns`` is ``rows``)."""
        return np.matmul(rows, columns.T, out=self.view((len(rows), len(columns))))


def _binary_searcher(gallery: np.ndarray) -> Callable[[np.ndarray, np.ndarray, int, np.ndarray | None], SearchResults]:
    index = faiss.IndexBinaryFlat(gallery.shape[1] * 8)
    index.add(gallery)

    def search(queries: np.ndarray, _: np.ndarray, k: int, own: np.ndarray | None) -> SearchResults:
        extra = 0 if own is None else 1
        distances, ids = index.search(queries, min(k + extra, index.ntotal))
        if own is not None:
            distances, ids = _drop_own(distances, ids, own)
        return SearchResults.from_faiss(distances, ids, lambda found: hamming_to_similarity(found, index.d)).pad(k)

    return search


def _drop_own(distances: np.ndarray, ids: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove each row's own id; rows where it fell outside the k+1 results lose their last one."""
    is_own = ids == own[:, None]
    is_own[~is_own.any(axis=1), -1] = True
    keep = ~is_own
    shape = (ids.shape[0], ids.shape[1] - 1)
    return distances[keep].reshape(shape), ids[keep].reshape(shape)
