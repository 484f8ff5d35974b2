"""Retrieval after the embedding: alpha-query expansion, database-side augmentation and k-reciprocal
re-ranking, as pure functions over embeddings and ``SearchResults``.

* **alpha-QE** (Radenovic, Tolias and Chum, TPAMI 2018): a query becomes the L2-normalised sum of
  itself (weight 1) and its top-n neighbours, neighbour i weighted by max(s_i, 0)^alpha, s_i its
  score; then it is searched again. The neighbours come from a first search that the caller ran (and
  from which it dropped the query's own item), so a query never expands with itself.
* **alpha-DBA**: the same sum for every gallery vector over its top-n OTHER gallery vectors (exact
  k-NN, ``knn_search``), once, when the gallery is indexed; searches then pay nothing.
* **k-reciprocal re-ranking** (Zhong, Zheng, Cao and Li, CVPR 2017) on each query's top-K candidates
  only: the query and its K candidates form a local set whose (K+1)^2 similarities give the
  k-reciprocal neighbour sets R(p, k1), expanded by the R(c, k1/2) that share more than 2/3 of their
  members with it, Gaussian-weighted set vectors V (exp(-d), d the row-max-normalised distance
  1 - s), V averaged over each item's k2 nearest (local query expansion), and the Jaccard distance
  1 - sum min(V_p, V_c) / sum max(V_p, V_c); the final distance is (1 - lambda) Jaccard +
  lambda d. Memory and time are O(K^2) per query whatever the gallery size: no N x N matrix.

Similarities are dot products: of L2-normalised float vectors (cosine), or, for binary codes, of
``sign_vectors(codes, bits)`` (+-1/sqrt(bits), whose dot product is 1 - 2 Hamming / bits, the binary
score), so every method works on both kinds.
"""

from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

from retrieval.indexing.search.binary import codes_to_signs
from retrieval.indexing.search.knn import knn_search
from retrieval.indexing.search.postprocess_params import DbaParams, KReciprocalParams, QeParams
from retrieval.indexing.search.results import SearchResults

_EPS = 1e-12
_RERANK_CHUNK = 128  # queries re-ranked at once: (chunk, K+1, K+1) float32 matrices


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32); an all-zero row stays zero."""
    values = np.asarray(vectors, dtype=np.float32)
    return values / np.maximum(np.linalg.norm(values, axis=-1, keepdims=True), _EPS)


def neighbour_weights(scores: np.ndarray, alpha: float) -> np.ndarray:
    """max(score, 0)^alpha, 0 for padded slots (score -inf): the weights of alpha-QE and alpha-DBA."""
    positive = np.where(np.isfinite(scores), np.maximum(scores, 0.0), 0.0)
    return np.power(positive, alpha, dtype=np.float64).astype(np.float32) * np.isfinite(scores)


def weighted_sums(own: np.ndarray, neighbours: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """own (n, d) + sum_i weights[:, i] * neighbours[:, i] for neighbours (n, m, d): unnormalised."""
    return np.asarray(own, np.float32) + np.einsum("nm,nmd->nd", weights, np.asarray(neighbours, np.float32))


def expand_queries(queries: np.ndarray, gallery: np.ndarray, first: SearchResults, params: QeParams) -> np.ndarray:
    """alpha-QE: each float query (n, d) summed with its top ``params.n`` results of ``first`` (ids =
    rows of the float ``gallery``), weighted by their scores^alpha, L2-normalised. Padded slots add
    nothing. The caller searches the returned queries again."""
    head, gallery = first.head(params.n), np.asarray(gallery)
    if len(gallery) == 0:  # no query found anything (a filter no item passes): nothing to add
        return normalize_rows(queries)
    return expand_with(queries, gallery[np.where(head.valid_mask(), head.ids, 0)], head.scores, params)


def expand_with(
    vectors: np.ndarray, neighbours: np.ndarray, scores: np.ndarray, params: QeParams | DbaParams
) -> np.ndarray:
    """The alpha-weighted sum of QE and DBA: vectors (n, d) + their neighbours' float vectors (n, m, d)
    weighted by max(score, 0)^alpha (scores (n, m), -inf: no neighbour), the first ``params.n`` of each
    row, L2-normalised."""
    weights = neighbour_weights(scores[:, : params.n], params.alpha)
    return normalize_rows(weighted_sums(vectors, neighbours[:, : params.n], weights))


@dataclass(frozen=True)
class AugmentedGallery:
    """alpha-DBA of a gallery: ``vectors`` (L2-normalised) = ``sums`` / |sums|, sums[j] = x_j +
    sum_i weights[j, i] * x_{neighbours[j, i]} (``neighbours`` gallery rows, PAD_ID where the gallery had
    fewer, weight 0 there). The sums and weights let an evaluation take one item back out (``eval``)."""

    vectors: np.ndarray
    sums: np.ndarray
    neighbours: np.ndarray
    weights: np.ndarray


def augment_database(gallery: np.ndarray, params: DbaParams) -> AugmentedGallery:
    """alpha-DBA of float gallery vectors (n, d): each replaced by the weighted sum of itself and its top
    ``params.n`` other gallery vectors (exact inner-product k-NN, itself excluded)."""
    vectors = np.asarray(gallery, np.float32)
    found = knn_search(vectors, vectors, params.n, exclude_self=True)
    weights = neighbour_weights(found.scores, params.alpha)
    sums = weighted_sums(vectors, vectors[np.where(found.valid_mask(), found.ids, 0)], weights)
    return AugmentedGallery(normalize_rows(sums), sums, found.ids, weights)


def sign_vectors(codes: np.ndarray, bits: int) -> np.ndarray:
    """Packed binary codes as +-1/sqrt(bits) float32 rows: their dot product is 1 - 2 Hamming / bits."""
    return codes_to_signs(codes, bits) / np.float32(np.sqrt(bits))


def k_reciprocal_rerank(
    queries: np.ndarray, gallery: np.ndarray, candidates: SearchResults, params: KReciprocalParams
) -> SearchResults:
    """Each row of ``candidates`` (ids = rows of ``gallery``; its first ``params.candidates`` re-ranked)
    re-ordered by the k-reciprocal distance (module docstring). ``queries`` and ``gallery`` are vectors
    whose dot products are the similarities (unit float vectors, or ``sign_vectors``). Scores become
    1 - the final distance (higher = closer); ties keep the first search's order."""
    return rerank_local_sets(local_sets(queries, gallery, candidates, params.candidates), params)


@dataclass(frozen=True)
class LocalSets:
    """The local sets [query, its first candidates] of k-reciprocal re-ranking, by number of candidates:
    what does not depend on k1, k2 or lambda (a parameter search makes them once)."""

    head: SearchResults  # the candidates re-ranked
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # (rows of head, distances (b, m, m), ranks)


def local_sets(queries: np.ndarray, gallery: np.ndarray, candidates: SearchResults, size: int) -> LocalSets:
    """Each query's local set of its first ``size`` candidates: distances 1 - s, each row scaled to
    [0, 1] by its maximum as Zhong et al. do, and each row's ranking (the item itself first, ties or not)."""
    head = candidates.head(size)
    groups = []
    counts = head.valid_mask().sum(axis=1)
    for count in np.unique(counts):
        rows = np.flatnonzero(counts == count)
        for start in range(0, len(rows), _RERANK_CHUNK):
            chunk = rows[start : start + _RERANK_CHUNK]
            local = np.concatenate(
                [
                    np.asarray(queries, np.float32)[chunk, None],
                    np.asarray(gallery, np.float32)[head.ids[chunk, :count]],
                ],
                axis=1,
            )
            distance = np.maximum(1.0 - _local_similarities(local), 0.0)
            distance /= np.maximum(distance.max(axis=2, keepdims=True), _EPS)
            self_first = np.where(np.eye(local.shape[1], dtype=bool), -1.0, distance)
            groups.append((chunk, distance, np.argsort(self_first, axis=2, kind="stable")))
    return LocalSets(head, groups)


def rerank_local_sets(sets: LocalSets, params: KReciprocalParams) -> SearchResults:
    """The candidates of ``sets`` ordered by their final k-reciprocal distance under ``params``."""
    out = SearchResults.empty(len(sets.head), sets.head.k)
    for rows, distance, rank in sets.groups:
        count = distance.shape[1] - 1
        if count < 1:
            continue
        final = _final_distance(distance, rank, params)
        order = np.argsort(final, axis=1, kind="stable")
        out.ids[rows, :count] = np.take_along_axis(sets.head.ids[rows, :count], order, 1)
        out.scores[rows, :count] = 1.0 - np.take_along_axis(final, order, 1)
    return out


def _final_distance(distance: np.ndarray, rank: np.ndarray, params: KReciprocalParams) -> np.ndarray:
    """(b, K) final distances of the candidates (rows 1..K) to the query (row 0) of each local set."""
    expanded = _expanded_reciprocal_sets(rank, params.k1)
    v = np.where(expanded, np.exp(-distance), 0.0)
    v /= v.sum(axis=2, keepdims=True)
    if params.k2 > 1:  # local query expansion: each row the mean of its k2 nearest rows
        nearest = rank[:, :, : params.k2]
        v = np.take_along_axis(v[:, None, :, :], nearest[..., None], axis=2).mean(axis=2)
    shared = np.minimum(v[:, :1, :], v[:, 1:, :]).sum(axis=2)
    jaccard = 1.0 - shared / (2.0 - shared)
    return ((1.0 - params.lam) * jaccard + params.lam * distance[:, 0, 1:]).astype(np.float32)


def _local_similarities(local: np.ndarray) -> np.ndarray:
    """(b, m, m) dot products within each local set (b, m, d), by faiss's exact search of the set against
    itself on one OpenMP thread (the setting is per thread; restored after): 1-2 ms for 101 x 2048-d, where
    2 threads took 6 ms and numpy's BLAS product 0.4 to 90 ms on the busy 2-core machine (its threads
    spin against other jobs)."""
    b, m, _ = local.shape
    similarities = np.empty((b, m, m), np.float32)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        for row in range(b):
            found, ids = faiss.knn(local[row], local[row], m, metric=faiss.METRIC_INNER_PRODUCT)
            np.put_along_axis(similarities[row], ids, found, axis=1)
    finally:
        faiss.omp_set_num_threads(threads)
    return similarities


def _expanded_reciprocal_sets(rank: np.ndarray, k1: int) -> np.ndarray:
    """(b, m, m) bool: the k-reciprocal set R*(i, k1) of every item i of each local set, expanded by the
    R(j, k1/2) of its members j that share more than 2/3 of their own members with R(i, k1).

    The set operations run on bit-packed rows (AND + popcount, OR): exact, and free of BLAS threads,
    which on a busy 2-core machine made (b, m, m) float products of sets 30x slower than one thread."""
    reciprocal = _reciprocal_sets(rank, k1)
    half = _reciprocal_sets(rank, int(np.around(k1 / 2.0)))
    m = rank.shape[1]
    packed_r, packed_h = np.packbits(reciprocal, axis=2), np.packbits(half, axis=2)
    overlap = np.bitwise_count(packed_r[:, :, None, :] & packed_h[:, None, :, :]).sum(axis=3, dtype=np.int32)
    taken = reciprocal & (overlap > 2.0 / 3.0 * half.sum(axis=2)[:, None, :])  # |R(i) & R_half(j)| > 2/3 |R_half(j)|
    added = np.bitwise_or.reduce(np.where(taken[..., None], packed_h[:, None, :, :], 0), axis=2)
    return reciprocal | np.unpackbits(added, axis=2, count=m).astype(bool)


def _reciprocal_sets(rank: np.ndarray, k: int) -> np.ndarray:
    """(b, m, m) bool: j in R(i, k) when each is among the other's k + 1 nearest (itself included)."""
    b, m, _ = rank.shape
    forward = np.zeros((b, m, m), bool)
    np.put_along_axis(forward, rank[:, :, : k + 1], True, axis=2)
    return forward & forward.transpose(0, 2, 1)
