"""Search on GPUs when faiss sees any, on the CPU otherwise (the CPU path is the tested one).

The CPU indexes stay the canonical copies (they are what gets written to disk); this
module only makes search-time copies. Float indexes go through ``index_cpu_to_all_gpus``
(HNSW has no GPU version and stays on the CPU). Binary indexes cannot be cloned to a GPU;
only the flat kind has a GPU twin, ``GpuIndexBinaryFlat``, whose positions are mapped
back to item ids here. Check ``get_num_gpus()`` first: with no GPU, faiss-gpu's
``index_cpu_to_all_gpus`` returns an empty replica set instead of raising.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import faiss
import numpy as np

from retrieval.indexing.search.kinds import SearchKind
from retrieval.indexing.store.files.faiss_kinds import id_map_ids

Searcher = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]
_log = logging.getLogger(__name__)


def gpu_count() -> int:
    """Number of GPUs faiss can use (0 with faiss-cpu)."""
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get else 0


def searcher(kind: SearchKind, index: Any, name: str) -> Searcher:
    """``search(data, k) -> (distances, ids)`` of a segment's index of ``kind`` (built as kind ``name``)."""
    return float_searcher(index, name) if kind is SearchKind.FLOAT else binary_searcher(index, name)


def float_searcher(index: faiss.IndexIDMap2, kind: str) -> Searcher:
    """``search(queries, k) -> (scores, ids)`` on all GPUs when possible, else on ``index`` itself."""
    if gpu_count() == 0 or kind == "hnsw":
        return index.search
    try:
        return faiss.index_cpu_to_all_gpus(index).search
    except RuntimeError as error:  # an index type without a GPU version: search on the CPU
        _log.warning("float %s index stays on the CPU: %s", kind, error)
        return index.search


def binary_searcher(index: faiss.IndexBinaryIDMap2, kind: str) -> Searcher:
    """``search(codes, k) -> (hamming, ids)``; the flat kind moves to GPU 0 when there is one."""
    if gpu_count() == 0 or kind != "flat":
        return index.search
    inner = faiss.downcast_IndexBinary(index.index)
    resources = faiss.StandardGpuResources()
    gpu_index = faiss.GpuIndexBinaryFlat(resources, inner)  # type: ignore[call-overload]  # inner is a flat index
    ids = id_map_ids(index)

    def search(codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        assert resources is not None  # keeps the GPU memory alive as long as the searcher
        distances, positions = gpu_index.search(codes, k)
        return distances, np.where(positions >= 0, ids[np.maximum(positions, 0)], -1)

    return search
