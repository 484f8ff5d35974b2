"""Sign binarisation of embeddings into packed codes for faiss ``IndexBinary*``.

Zhai & Wu (BMVC 2019) threshold each dimension at zero: a 2048-d float embedding becomes
2048 bits (256 bytes, 1/32 of float32) searched by Hamming distance.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from retrieval.indexing.common.errors import DataError

BIT_ORDER: Literal["little"] = "little"
"""faiss stores bit j of a vector in bit (j % 8) of byte j // 8 (see ``faiss.real_to_binary``)."""


def binarize(embeddings: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """(n, d) float -> (n, ceil(d / 8)) uint8 packed sign bits, bit = value > threshold.

    The bit order is the one faiss ``IndexBinary*`` and ``faiss.real_to_binary`` use; when d is not
    a multiple of 8 the last byte is padded with zero bits (they add no Hamming distance).
    """
    values = np.asarray(embeddings)
    if values.ndim != 2 or not np.issubdtype(values.dtype, np.floating):
        raise DataError(
            f"binarize expects a 2-D float array of embeddings, got shape {values.shape} dtype {values.dtype}."
        )
    if values.dtype == np.float16:  # widened first (exactly): numpy compares float16 slowly, element by element
        values = values.astype(np.float32)
    return np.packbits(values > threshold, axis=1, bitorder=BIT_ORDER)  # the booleans, with no uint8 copy


def unpack_bits(codes: np.ndarray, dim: int) -> np.ndarray:
    """(n, ceil(dim / 8)) uint8 packed codes -> (n, dim) uint8 of 0/1, the inverse of ``binarize``."""
    packed = _check_codes(codes)
    if not 0 < dim <= packed.shape[1] * 8:
        raise DataError(f"dim={dim} does not fit codes of {packed.shape[1]} bytes; pass the number of bits.")
    return np.unpackbits(packed.astype(np.uint8, copy=False), axis=1, count=dim, bitorder=BIT_ORDER)


def codes_to_signs(codes: np.ndarray, dim: int) -> np.ndarray:
    """Packed codes -> (n, dim) float32 of -1/+1, the form k-means (NMI) runs on for binary embeddings."""
    return unpack_bits(codes, dim).astype(np.float32) * 2.0 - 1.0


def hamming_to_similarity(distances: np.ndarray, bits: int) -> np.ndarray:
    """Hamming distances -> similarity ``1 - 2 * distance / bits`` (float32, in [-1, 1]).

    This is the cosine similarity of the +-1 sign vectors, so binary scores sit on the same scale
    as float scores of L2-normalised embeddings; higher = more similar, like every ``SearchResults``.
    """
    return (1.0 - 2.0 * np.asarray(distances, dtype=np.float64) / bits).astype(np.float32)


def _check_codes(codes: np.ndarray) -> np.ndarray:
    packed = np.asarray(codes)
    if packed.ndim != 2 or packed.dtype != np.uint8:
        raise DataError(
            f"binary codes must be a 2-D uint8 array from binarize(), got shape {packed.shape} dtype {packed.dtype}."
        )
    return packed
