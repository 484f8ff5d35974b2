"""What both stores (files ``IndexStore``, ``MilvusStore``) check and compute the same way: query
vectors, added items, and the float re-rank of a binary shortlist."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord, is_blank_label
from retrieval.indexing.search.results import PAD_ID, SearchResults


def checked_queries(vectors: np.ndarray, k: int, *, dim: int, count: int, index_dir: Path) -> np.ndarray:
    """Contiguous float32 (n, dim) queries, or a DataError naming what is wrong (dimension, k, empty index)."""
    queries = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    if queries.ndim != 2 or queries.shape[1] != dim:
        raise DataError(
            f"query vectors have shape {queries.shape} but the index holds {dim}-d embeddings; "
            "embed queries with the model the index was built with"
        )
    if k < 1:
        raise DataError(f"k must be at least 1, got {k}")
    if count == 0:
        raise DataError(f"the index {index_dir} is empty; add images with `retrieval index add`")
    return np.ascontiguousarray(queries)


def checked_additions(records: Sequence[ImageRecord], embeddings: np.ndarray, dim: int) -> np.ndarray:
    """The float32 (n, dim) embeddings of ``records`` to add, every record with a class label."""
    vectors = np.asarray(embeddings, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != dim or len(vectors) != len(records):
        raise DataError(f"add() needs one {dim}-d embedding per record, got {vectors.shape} for {len(records)} records")
    validate_labels(records)
    return vectors


def validate_labels(records: Sequence[ImageRecord]) -> None:
    """Every item needs a class label; an empty one would silently form its own class."""
    for record in records:
        if is_blank_label(record.label):
            raise DataError(f"image {record.path} has an empty label; give every image a class name")


def rerank_shortlist(
    queries: np.ndarray, shortlist: np.ndarray, k: int, embeddings_of: Callable[[np.ndarray], np.ndarray]
) -> SearchResults:
    """Order each binary shortlist (ids, PAD_ID padded) by exact inner product with the items' float
    embeddings; equal scores keep the lower id first, as every exact search here does."""
    ids = np.full((len(queries), k), PAD_ID, dtype=np.int64)
    scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    for q, candidates in enumerate(shortlist):
        candidates = np.sort(candidates[candidates != PAD_ID])
        similarity = embeddings_of(candidates) @ queries[q]
        order = np.argsort(-similarity, kind="stable")[:k]
        ids[q, : len(order)], scores[q, : len(order)] = candidates[order], similarity[order]
    return SearchResults(ids=ids, scores=scores)
