"""Near-copy pairs of a whole collection: a self-join on binary codes, re-checked in float.

Every item asks a faiss binary index for its ``k`` nearest codes by Hamming distance (exact
``IndexBinaryFlat`` for small collections, ``IndexBinaryIVF`` probing ``nprobe`` cells past
``EXACT_BELOW`` items), a block of queries at a time; only the neighbours whose code similarity
clears the threshold are kept, so memory is the codes and O(N * k) pairs, never an N x N matrix. Past
``EXACT_BELOW`` items the IVF index holds only the first ``SEARCH_BITS`` bits of each code (a copy is as
close in any 512 of its bits as in all of them, and comparing 512 bits is 3x faster than 2,048 here); the
full codes then give each neighbour's distance. With float embeddings the candidates are admitted a margin below the binary
threshold and kept on their cosine similarity. A group larger than ``k`` yields fewer than all its
pairs but stays one connected group (``copy_groups``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import faiss
import numpy as np
from tqdm import tqdm

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.binary import hamming_to_similarity

DEFAULT_K = 10
EXACT_BELOW = 20_000
"""Below this many items the join is exact (every pair compared); above it an IVF index."""
SEARCH_BITS = 512
"""The bits of each code the IVF index compares (the full codes then decide)."""
NPROBE = 16
RECHECK_MARGIN = 0.1
"""How far below the binary threshold a candidate is admitted when float embeddings re-check it."""
QUERY_BLOCK = 4096
WORKERS = max(1, min(4, os.cpu_count() or 1))
"""Blocks of queries searched side by side, each worker with one OpenMP thread: faiss's own threads meet at a
barrier after every block, which on a loaded machine waits on the slowest (8x slower at load 12 on 2 cores)."""
TRAIN_PER_CELL = 32


@dataclass(frozen=True)
class CopyPairs:
    """Pairs of row numbers (``first < second``, each pair once) and their similarity, best first."""

    first: np.ndarray
    second: np.ndarray
    score: np.ndarray

    def __len__(self) -> int:
        return len(self.score)

    @classmethod
    def empty(cls) -> CopyPairs:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32))

    @classmethod
    def of(cls, first: np.ndarray, second: np.ndarray, score: np.ndarray) -> CopyPairs:
        """Ordered within each pair, deduplicated (the best score kept), sorted by score descending."""
        low, high = np.minimum(first, second).astype(np.int64), np.maximum(first, second).astype(np.int64)
        order = np.lexsort((high, low, -np.asarray(score)))
        low, high, score = low[order], high[order], np.asarray(score, np.float32)[order]
        _, keep = np.unique(np.stack([low, high], axis=1), axis=0, return_index=True)
        keep = np.sort(keep)
        return cls(low[keep], high[keep], score[keep])


def near_copy_pairs(
    codes: np.ndarray,
    bits: int,
    threshold: float,
    *,
    embeddings: np.ndarray | Callable[[np.ndarray], np.ndarray] | None = None,
    float_threshold: float | None = None,
    k: int = DEFAULT_K,
    nprobe: int = NPROBE,
    progress: bool = True,
) -> CopyPairs:
    """Pairs whose code similarity (``1 - 2 * hamming / bits``) is at least ``threshold``; with
    ``embeddings`` (rows L2-normalised, memory-mapped is fine) those whose cosine similarity is at least
    ``float_threshold``, among candidates admitted at ``threshold - RECHECK_MARGIN``."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    if len(codes) < 2:
        return CopyPairs.empty()
    admit = threshold if embeddings is None else threshold - RECHECK_MARGIN
    max_distance = math.floor((1.0 - admit) * bits / 2.0 + 1e-9)
    search = codes if len(codes) < EXACT_BELOW else np.ascontiguousarray(codes[:, : SEARCH_BITS // 8])
    with ThreadPoolExecutor(max_workers=WORKERS, initializer=faiss.omp_set_num_threads, initargs=(1,)) as pool:
        index = pool.submit(_binary_index, search, nprobe).result()
        first, second, distance = _join(pool, index, search, codes, min(k + 1, len(codes)), max_distance, progress)
    if embeddings is None:
        return CopyPairs.of(first, second, hamming_to_similarity(distance, bits))
    if float_threshold is None:
        raise DataError("a float re-check needs float_threshold")
    return recheck(embeddings, CopyPairs.of(first, second, np.zeros(len(first), np.float32)), float_threshold)


def recheck(
    embeddings: np.ndarray | Callable[[np.ndarray], np.ndarray],
    candidates: CopyPairs,
    threshold: float,
    block: int = 65536,
) -> CopyPairs:
    """The candidates whose cosine similarity (rows of ``embeddings`` dotted) is at least ``threshold``."""
    rows_of = embeddings if callable(embeddings) else embeddings.__getitem__
    scores = np.empty(len(candidates), np.float32)
    for start in range(0, len(candidates), block):
        a = np.asarray(rows_of(candidates.first[start : start + block]), np.float32)
        b = np.asarray(rows_of(candidates.second[start : start + block]), np.float32)
        scores[start : start + block] = np.einsum("ij,ij->i", a, b)
    keep = scores >= threshold
    return CopyPairs.of(candidates.first[keep], candidates.second[keep], scores[keep])


def _binary_index(codes: np.ndarray, nprobe: int) -> faiss.IndexBinary:
    dim = codes.shape[1] * 8
    if len(codes) < EXACT_BELOW:
        flat = faiss.IndexBinaryFlat(dim)
        flat.add(codes)
        return flat
    nlist = int(math.sqrt(len(codes)))
    ivf = faiss.IndexBinaryIVF(faiss.IndexBinaryFlat(dim), dim, nlist)
    ivf.cp.niter = 10
    ivf.nprobe = nprobe
    sample = np.random.default_rng(0).choice(len(codes), min(len(codes), nlist * TRAIN_PER_CELL), replace=False)
    ivf.train(codes[np.sort(sample)])
    ivf.add(codes)
    return ivf


def _join(
    pool: ThreadPoolExecutor,
    index: faiss.IndexBinary,
    search: np.ndarray,
    codes: np.ndarray,
    k: int,
    max_distance: int,
    progress: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query row, neighbour row, Hamming distance of the full ``codes``) of every neighbour within
    ``max_distance``, the neighbours found by ``index`` over ``search`` (the codes or their first bits),
    a block of queries per task of ``pool``."""

    def block(start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        distance, neighbour = index.search(search[start : start + QUERY_BLOCK], k)
        rows = np.arange(start, start + len(neighbour))[:, None].repeat(k, axis=1)
        keep = (neighbour >= 0) & (neighbour != rows)
        rows, neighbour, distance = rows[keep], neighbour[keep], distance[keep]
        if search is not codes:
            distance = np.bitwise_count(codes[rows] ^ codes[neighbour]).sum(axis=1, dtype=np.int32)
        keep = distance <= max_distance
        return rows[keep], neighbour[keep], distance[keep]

    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    with tqdm(total=len(codes), desc="near copies", unit="item", disable=not progress) as bar:
        for start, part in zip(range(0, len(codes), QUERY_BLOCK), pool.map(block, range(0, len(codes), QUERY_BLOCK))):
            parts.append(part)
            bar.update(min(QUERY_BLOCK, len(codes) - start))
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    return tuple(np.concatenate(column) for column in zip(*parts))  # type: ignore[return-value]
