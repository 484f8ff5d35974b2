"""Iterative quantization (ITQ, Gong & Lazebnik 2011): the rotation that makes the sign code fit the vectors.

The binary index stores ``sign(y)`` of each unit embedding ``y``. ITQ looks for the orthogonal map
``R`` (d x bits, orthonormal rows: ``R R^T = I``) minimising ``||B - Z R||`` over the training
embeddings ``Z`` and their codes ``B = sign(Z R)``, alternating the two: ``B`` from ``R``, then ``R``
from ``B`` (orthogonal Procrustes: ``Z^T B = U S V^T`` gives ``R = U V^T``). With ``bits`` > d the map
is an orthogonal expansion (the d whitened dimensions spread over ``bits`` axes) learned in the same
loop. Orthonormal rows keep every inner product, ``<z R, z' R> = <z, z'>``: float rankings are
unchanged, only the sign code improves.
"""

from __future__ import annotations

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.training.model.whitening import one_lapack_thread


def orthonormal_rows(dim: int, bits: int, seed: int = 0) -> np.ndarray:
    """A random d x bits matrix with orthonormal rows (Haar-distributed for d == bits)."""
    if dim > bits:
        raise DataError(f"an orthogonal map cannot take {dim} dimensions to fewer ({bits})")
    gaussian = np.random.default_rng(seed).standard_normal((bits, dim))
    with one_lapack_thread():
        q, r = np.linalg.qr(gaussian)  # bits x d, orthonormal columns
    return (q * np.sign(np.diag(r))).T


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    values = np.asarray(vectors, np.float64)
    return values / np.maximum(np.linalg.norm(values, axis=1, keepdims=True), 1e-12)


def signs(values: np.ndarray) -> np.ndarray:
    """The code's bits as +-1 (zero counts as +1, as ``binarize`` sets the bit of a value >= 0)."""
    return np.where(values >= 0, 1.0, -1.0)


def quantization_error(vectors: np.ndarray, rotation: np.ndarray) -> float:
    """Mean ``|| sign(y) / sqrt(bits) - y ||^2`` of the unit rows ``y`` of ``vectors @ rotation`` (0: a perfect code).
    A figure for the report: the product runs in float32, as ITQ's own steps do."""
    rotated = unit_rows(unit_rows(vectors).astype(np.float32) @ np.asarray(rotation, np.float32))
    bits = rotation.shape[1]
    return float(np.mean(np.sum((signs(rotated) / np.sqrt(bits) - rotated) ** 2, axis=1)))


def fit_itq(vectors: np.ndarray, bits: int, *, iterations: int, seed: int = 0) -> np.ndarray:
    """The d x bits rotation (orthonormal rows) after ``iterations`` ITQ steps from a seeded random one."""
    values = unit_rows(vectors).astype(np.float32)
    rotation = orthonormal_rows(values.shape[1], bits, seed)
    for _ in range(iterations):
        codes = np.where(values @ rotation.astype(np.float32) >= 0, np.float32(1), np.float32(-1))
        rotation = procrustes(values.T @ codes)
    return rotation


def procrustes(target: np.ndarray) -> np.ndarray:
    """The d x bits matrix with orthonormal rows nearest ``target`` (d <= bits): ``U V^T`` of its SVD, computed as
    ``(M M^T)^(-1/2) M`` through the d x d eigenproblem (a d x bits SVD is several times slower)."""
    m = np.asarray(target, np.float64)
    with one_lapack_thread():
        values, vectors = np.linalg.eigh(m @ m.T)
    inverse_root = (vectors / np.sqrt(np.maximum(values, 1e-12 * max(float(values.max()), 1e-12)))) @ vectors.T
    return inverse_root @ m
