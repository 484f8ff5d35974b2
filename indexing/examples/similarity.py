"""Similarities of query vectors to item vectors, on the scale of ``SearchResults`` scores (higher = closer).

Float vectors: inner products (cosines of L2-normalised embeddings). Packed binary codes (uint8, as
``search.binary.binarize`` writes them): ``1 - 2 * hamming / bits``, the binary index's own score.
"""

from __future__ import annotations

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.binary import hamming_to_similarity


def similarities(queries: np.ndarray, items: np.ndarray) -> np.ndarray:
    """(q, d) x (n, d) -> (q, n) float32 similarities; uint8 arrays are packed codes (Hamming)."""
    left, right = np.atleast_2d(queries), np.atleast_2d(items)
    if left.shape[1] != right.shape[1] or (left.dtype == np.uint8) != (right.dtype == np.uint8):
        raise DataError(
            f"cannot compare vectors of shape {left.shape} ({left.dtype}) with {right.shape} ({right.dtype})"
        )
    if left.dtype != np.uint8:
        return (left.astype(np.float32) @ right.astype(np.float32).T).astype(np.float32)
    distances = np.bitwise_count(left[:, None, :] ^ right[None, :, :]).sum(axis=2, dtype=np.int64)
    return hamming_to_similarity(distances, bits=8 * left.shape[1])
