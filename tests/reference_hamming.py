"""Brute-force Hamming distances: the test oracle for faiss's binary search (small inputs only)."""

from __future__ import annotations

import numpy as np


def hamming_distances(query_codes: np.ndarray, gallery_codes: np.ndarray) -> np.ndarray:
    """(n_q, n_g) int32 Hamming distances of packed uint8 codes by NumPy popcount."""
    xor = np.asarray(query_codes, np.uint8)[:, None, :] ^ np.asarray(gallery_codes, np.uint8)[None, :, :]
    return np.unpackbits(xor, axis=2).sum(axis=2, dtype=np.int32)
