"""Registry of faiss index kinds: a name on the command line -> a builder sized for the gallery.

Float kinds search L2-normalised embeddings by inner product; binary kinds search packed
sign codes by Hamming distance. Every index is wrapped in an ID map (``IndexIDMap2`` /
``IndexBinaryIDMap2``) so faiss returns item ids, not positions. Parameters that matter
at search time (``nprobe``, ``efSearch``) are set at build time and saved with the index.

Indexes never remove ids: a removed item stays in its segment's indexes as a tombstone that searches
drop, until a compaction rebuilds the segment (``segments.py``). (``IndexIDMap2.remove_ids`` would
be wrong for IVF, which does not renumber its positions, and HNSW cannot remove at all.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np
from tqdm import tqdm

from retrieval.indexing.common.registry import Registry

HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128
ADD_CHUNK = 20_000
MIN_POINTS_PER_CENTROID = 39  # below this faiss k-means warns that training is unreliable
TRAINING_POINTS_PER_LIST = 64  # training_sample: rows per inverted list kept for k-means
TRAINING_SEED = 1234


@dataclass(frozen=True)
class IndexKind:
    """How to make one kind of index for ``dim`` (float dims or bits) and ``count`` items."""

    name: str
    build: Callable[[int, int], Any]  # a faiss.Index or faiss.IndexBinary
    exact: bool
    description: str


def ivf_list_count(count: int) -> int:
    """About 4 * sqrt(n) inverted lists, but never fewer than 39 training points per list."""
    return max(1, min(int(4 * math.sqrt(max(count, 1))), count // MIN_POINTS_PER_CENTROID))


def ivf_probe_count(nlist: int) -> int:
    """Visit about sqrt(nlist) lists, at least 16 (all of them for tiny galleries)."""
    return min(nlist, max(16, round(math.sqrt(nlist))))


def pq_layout(dim: int, count: int) -> tuple[int, int]:
    """(sub-quantizers, bits each): about d/16 sub-vectors of 8 bits, fewer bits for tiny galleries."""
    target = max(1, min(64, dim // 16))
    subquantizers = max(m for m in range(1, target + 1) if dim % m == 0)
    bits = max(1, min(8, int(math.log2(max(count / MIN_POINTS_PER_CENTROID, 2)))))
    return subquantizers, bits


def _float_ivf(dim: int, count: int) -> faiss.Index:
    nlist = ivf_list_count(count)
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.nprobe = ivf_probe_count(nlist)
    return index


def _float_ivfpq(dim: int, count: int) -> faiss.Index:
    nlist = ivf_list_count(count)
    subquantizers, bits = pq_layout(dim, count)
    index = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, nlist, subquantizers, bits, faiss.METRIC_INNER_PRODUCT)
    index.nprobe = ivf_probe_count(nlist)
    return index


def _float_hnsw(dim: int, count: int) -> faiss.Index:
    index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = HNSW_EF_SEARCH
    return index


def _binary_ivf(bits: int, count: int) -> faiss.IndexBinary:
    nlist = ivf_list_count(count)
    index = faiss.IndexBinaryIVF(faiss.IndexBinaryFlat(bits), bits, nlist)
    index.nprobe = ivf_probe_count(nlist)
    return index


def _binary_hnsw(bits: int, count: int) -> faiss.IndexBinary:
    index = faiss.IndexBinaryHNSW(bits, HNSW_M)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = HNSW_EF_SEARCH
    return index


FLOAT_KINDS: Registry[IndexKind] = Registry("float index kind", "kinds", ordered=True)
for _kind in (
    IndexKind("flat", lambda d, n: faiss.IndexFlatIP(d), True, "exact inner product"),
    IndexKind("hnsw", _float_hnsw, False, f"HNSW graph, M={HNSW_M}, efSearch={HNSW_EF_SEARCH}"),
    IndexKind("ivf", _float_ivf, False, "inverted lists (~4 sqrt(n)), k-means trained on the gallery"),
    IndexKind("ivfpq", _float_ivfpq, False, "inverted lists + product quantisation (~d/16 bytes)"),
):
    FLOAT_KINDS.register(_kind.name, _kind)

BINARY_KINDS: Registry[IndexKind] = Registry("binary index kind", "kinds", ordered=True)
for _kind in (
    IndexKind("flat", lambda b, n: faiss.IndexBinaryFlat(b), True, "exact Hamming"),
    IndexKind("ivf", _binary_ivf, False, "binary inverted lists, trained on the gallery codes"),
    IndexKind("hnsw", _binary_hnsw, False, f"binary HNSW graph, M={HNSW_M}"),
):
    BINARY_KINDS.register(_kind.name, _kind)


def float_kind(name: str) -> IndexKind:
    return FLOAT_KINDS.get(name)


def binary_kind(name: str) -> IndexKind:
    return BINARY_KINDS.get(name)


def build_float_index(
    kind: IndexKind, embeddings: np.ndarray, ids: np.ndarray, *, progress: bool = False
) -> faiss.IndexIDMap2:
    """Train (if the kind needs it) on ``embeddings`` (float32, or a float16 memory map) and add them under ``ids``."""
    index = kind.build(embeddings.shape[1], len(embeddings))
    if not index.is_trained and len(embeddings):
        index.train(np.ascontiguousarray(training_sample(embeddings, getattr(index, "nlist", 0)), dtype=np.float32))
    wrapped = faiss.IndexIDMap2(index)
    _add_in_chunks(wrapped, embeddings, np.float32, ids, progress, f"float {kind.name}")
    return wrapped


def build_binary_index(
    kind: IndexKind, codes: np.ndarray, ids: np.ndarray, bits: int, *, progress: bool = False
) -> faiss.IndexBinaryIDMap2:
    """Train (if needed) on packed uint8 ``codes`` and add them under ``ids``."""
    index = kind.build(bits, len(codes))
    if not index.is_trained and len(codes):
        index.train(np.ascontiguousarray(training_sample(codes, getattr(index, "nlist", 0)), dtype=np.uint8))
    wrapped = faiss.IndexBinaryIDMap2(index)
    _add_in_chunks(wrapped, codes, np.uint8, ids, progress, f"binary {kind.name}")
    return wrapped


def training_sample(data: np.ndarray, nlist: int) -> np.ndarray:
    """At most ``TRAINING_POINTS_PER_LIST`` rows per inverted list (a fixed-seed sample, in order).

    faiss caps k-means at 256 points per centroid itself, but only after the whole array has been
    converted to float32 (binary IVF: one float per BIT, 8 KiB per 2048-bit code, 8 GB at 1M items);
    64 per list is well inside faiss's advice (39 to 256) and bounds that copy."""
    limit = TRAINING_POINTS_PER_LIST * nlist
    if not nlist or len(data) <= limit:
        return data
    rows = np.sort(np.random.default_rng(TRAINING_SEED).choice(len(data), size=limit, replace=False))
    return data[rows]


def _add_in_chunks(index: Any, data: np.ndarray, dtype: type, ids: np.ndarray, progress: bool, name: str) -> None:
    """``add_with_ids`` in slices, each converted to ``dtype`` on its own (a float16 memory map is never
    copied whole), so that a long HNSW build also shows a progress bar."""
    ids = np.asarray(ids, dtype=np.int64)
    with tqdm(total=len(data), desc=f"adding to {name}", unit="vec", disable=not progress) as bar:
        for start in range(0, len(data), ADD_CHUNK):
            stop = start + ADD_CHUNK
            chunk: np.ndarray = np.ascontiguousarray(data[start:stop], dtype=dtype)
            index.add_with_ids(chunk, np.ascontiguousarray(ids[start:stop]))
            bar.update(len(chunk))


def id_map_ids(index: faiss.IndexIDMap2 | faiss.IndexBinaryIDMap2) -> np.ndarray:
    """The item ids stored in an ID-mapped index, in insertion order."""
    return faiss.vector_to_array(index.id_map).astype(np.int64)
