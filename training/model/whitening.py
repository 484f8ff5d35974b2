"""Learned whitening of embeddings: a linear map ``x -> x W + b`` fitted on training-class embeddings.

- ``pca`` (Jegou & Chum 2012): centre, rotate onto the principal axes, divide each by its standard
  deviation; the first ``dim`` axes are kept.
- ``supervised`` (Radenovic et al. 2018, "learned whitening"; LDA-like): centre, whiten the
  within-class scatter (the scatter of each embedding around its class mean), then rotate onto the
  leading directions of the total scatter in that whitened space (the directions along which classes
  spread most against their own spread); the first ``dim`` are kept.

Both covariances are shrunk towards their mean eigenvalue, ``(1 - s) C + s mean(eig(C)) I``
(``shrinkage`` s): with fewer images than dimensions a covariance has zero eigenvalues, and whitening
would divide by them. Pure numpy; ``itq`` then rotates the result for the sign code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from retrieval.indexing.common.errors import DataError

WhiteningMethod = Literal["pca", "supervised"]
EIGEN_FLOOR = 1e-12  # relative to the largest eigenvalue: a zero variance is never divided by


@dataclass(frozen=True)
class LinearMap:
    """``x -> x @ weight + bias`` (weight: D x d), then L2 normalisation in ``apply``."""

    weight: np.ndarray
    bias: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.weight.shape[1])

    def apply(self, embeddings: np.ndarray) -> np.ndarray:
        mapped = np.asarray(embeddings, np.float64) @ self.weight + self.bias
        return (mapped / np.maximum(np.linalg.norm(mapped, axis=1, keepdims=True), 1e-12)).astype(np.float32)

    def then(self, rotation: np.ndarray) -> LinearMap:
        """This map followed by ``z -> z @ rotation`` (one MatMul + bias still)."""
        return LinearMap(self.weight @ rotation, self.bias @ rotation)


@dataclass(frozen=True)
class WhiteningBasis:
    """A fitted whitening at full dimension, its axes in order of importance: ``map(dim)`` keeps the first ``dim``."""

    method: WhiteningMethod
    mean: np.ndarray
    projection: np.ndarray  # D x D: column j is the j-th axis, already scaled to unit variance

    @property
    def max_dim(self) -> int:
        return int(self.projection.shape[1])

    def map(self, dim: int) -> LinearMap:
        weight = self.projection[:, : min(dim, self.max_dim)]
        return LinearMap(weight, -self.mean @ weight)


def shrunk(covariance: np.ndarray, shrinkage: float) -> np.ndarray:
    """``(1 - s) C + s mean(eig(C)) I``: the eigenvectors kept, each eigenvalue pulled towards their mean."""
    size = covariance.shape[0]
    return (1.0 - shrinkage) * covariance + shrinkage * (np.trace(covariance) / size) * np.eye(size)


def descending_eigh(symmetric: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (largest first, floored above zero) and their eigenvectors (as columns)."""
    values, vectors = np.linalg.eigh(symmetric)
    values, vectors = values[::-1], vectors[:, ::-1]
    return np.maximum(values, EIGEN_FLOOR * max(float(values[0]), EIGEN_FLOOR)), vectors


def fit_pca_whitening(embeddings: np.ndarray, *, shrinkage: float) -> WhiteningBasis:
    """Centre, principal axes by decreasing variance, each divided by its (shrunk) standard deviation."""
    values = _checked(embeddings, min_rows=2)
    mean = values.mean(axis=0)
    centred = values - mean
    variances, axes = descending_eigh(shrunk(centred.T @ centred / len(centred), shrinkage))
    return WhiteningBasis("pca", mean, axes / np.sqrt(variances))


def fit_supervised_whitening(embeddings: np.ndarray, labels: Sequence[object], *, shrinkage: float) -> WhiteningBasis:
    """Whiten the within-class scatter, then rotate onto the leading axes of the total scatter there."""
    values = _checked(embeddings, min_rows=2)
    codes = np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)
    if len(codes) != len(values) or np.bincount(codes).max() < 2:
        raise DataError("supervised whitening needs a label per embedding and a class with two images or more")
    mean = values.mean(axis=0)
    centred = values - mean
    within = centred - _class_means(centred, codes)[codes]
    spread, axes = descending_eigh(shrunk(within.T @ within / len(within), shrinkage))
    whiten = axes / np.sqrt(spread)
    total = whiten.T @ (centred.T @ centred / len(centred)) @ whiten
    _, leading = descending_eigh((total + total.T) / 2)
    return WhiteningBasis("supervised", mean, whiten @ leading)


def fit_whitening(
    method: WhiteningMethod, embeddings: np.ndarray, labels: Sequence[object], *, shrinkage: float
) -> WhiteningBasis:
    """The one entry point: ``pca`` ignores the labels."""
    if method == "pca":
        return fit_pca_whitening(embeddings, shrinkage=shrinkage)
    if method == "supervised":
        return fit_supervised_whitening(embeddings, labels, shrinkage=shrinkage)
    raise DataError(f"unknown whitening method {method!r}; use pca or supervised")


def _class_means(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    sums = np.zeros((int(codes.max()) + 1, values.shape[1]))
    np.add.at(sums, codes, values)
    return sums / np.bincount(codes)[:, None]


def _checked(embeddings: np.ndarray, *, min_rows: int) -> np.ndarray:
    values = np.asarray(embeddings, np.float64)
    if values.ndim != 2 or len(values) < min_rows:
        raise DataError(f"whitening needs at least {min_rows} embeddings to fit on, got {len(values)}")
    return values
