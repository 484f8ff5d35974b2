"""What both stores (files ``IndexStore``, ``MilvusStore``) check the same way: query vectors and
added items (every item with a class label and storable text)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.indexing.common.errors import DataError, KeyConflictError
from retrieval.indexing.common.unicode_text import shown
from retrieval.indexing.data.records import ImageRecord, key_problem, label_problem
from retrieval.indexing.store.shared.items.item_filter import check_metadata_text


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
    validate_records(records)
    return vectors


def validate_records(records: Sequence[ImageRecord]) -> None:
    """Every item needs a class label the stores can keep (``records.label_problem``; an empty one would
    silently form its own class), and metadata text they can keep and match (``check_metadata_text``)."""
    for record in records:
        if (problem := label_problem(record.label)) is not None:
            raise DataError(f"image {shown(str(record.path))}: the label {problem}")
        if record.metadata:  # (the sentence's path is shown only when there is text to check)
            check_metadata_text(record.metadata, f"image {shown(str(record.path))}: metadata")
        if record.key is not None and (problem := key_problem(record.key)) is not None:
            raise DataError(f"image {shown(str(record.path))}: the key {problem}")
    keys = [record.key for record in records if record.key is not None]
    if len(set(keys)) != len(keys):
        twice = next(key for key in keys if keys.count(key) > 1)
        raise KeyConflictError(f'the key "{shown(twice)}" is given to more than one image; keys are unique per index')


def check_keys_free(keys: Sequence[str | None], taken: dict[str, int]) -> None:
    """A KeyConflictError naming the first of ``keys`` that an item of the index (``taken``: key -> id)
    already carries: an add never takes a key over (a replace does, ``Store.add(..., replace=True)``)."""
    for key in keys:
        if key is not None and key in taken:
            raise KeyConflictError(
                f'the key "{shown(key)}" is already item {taken[key]}\'s; '
                "replace that item (PUT /items/by-key/KEY, replace=True) or choose another key"
            )
