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
from threadpoolctl import threadpool_limits

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


def one_lapack_thread() -> threadpool_limits:
    """NumPy's BLAS on one thread, for the LAPACK calls (``eigh``, ``qr``) of the fit.

    An eigendecomposition is thousands of small BLAS calls, each synchronising OpenBLAS's threads; on
    the shared 2-core machine (load average 8-14) a 1,280 x 1,280 ``eigh`` took 50-74 s on two
    threads and 8-10 s on one, a 512 x 512 one 5-10 s against 0.45 s (bench/bench_whitening_fit.py).
    Matrix products keep their threads: they scale."""
    return threadpool_limits(limits=1, user_api="blas")


def scatter(centred: np.ndarray) -> np.ndarray:
    """The covariance ``X^T X / n`` of centred rows ``X``."""
    return centred.T @ centred / len(centred)


def descending_eigh(symmetric: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (largest first, floored above zero) and their eigenvectors (as columns)."""
    with one_lapack_thread():
        values, vectors = np.linalg.eigh(symmetric)
    values, vectors = values[::-1], vectors[:, ::-1]
    return np.maximum(values, EIGEN_FLOOR * max(float(values[0]), EIGEN_FLOOR)), vectors


def fit_pca_whitening(embeddings: np.ndarray, *, shrinkage: float) -> WhiteningBasis:
    """Centre, principal axes by decreasing variance, each divided by its (shrunk) standard deviation."""
    return fit_whitenings("pca", embeddings, (), [shrinkage])[0]


def fit_supervised_whitening(embeddings: np.ndarray, labels: Sequence[object], *, shrinkage: float) -> WhiteningBasis:
    """Whiten the within-class scatter, then rotate onto the leading axes of the total scatter there."""
    return fit_whitenings("supervised", embeddings, labels, [shrinkage])[0]


def fit_whitenings(
    method: WhiteningMethod, embeddings: np.ndarray, labels: Sequence[object], shrinkages: Sequence[float]
) -> list[WhiteningBasis]:
    """``method`` fitted at each shrinkage, sharing the work they have in common.

    Shrinking ``C`` towards ``m I`` keeps its eigenvectors and maps each eigenvalue ``l`` to
    ``(1 - s) l + s m``: the scatter matrices and the first eigendecomposition are made once for
    every shrinkage (``pca``: its only one; ``supervised``: the within-class one, then one
    eigendecomposition of the whitened total scatter per shrinkage). Eigendecompositions run on one
    BLAS thread (``one_lapack_thread``)."""
    if method not in ("pca", "supervised"):
        raise DataError(f"unknown whitening method {method!r}; use pca or supervised")
    values = _checked(embeddings, min_rows=2)
    mean = values.mean(axis=0)
    centred = values - mean
    if method == "pca":
        variances, axes = descending_eigh(scatter(centred))
        return [WhiteningBasis("pca", mean, axes / np.sqrt(shrunk_values(variances, s))) for s in shrinkages]
    codes = np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)
    if len(codes) != len(values) or np.bincount(codes).max() < 2:
        raise DataError("supervised whitening needs a label per embedding and a class with two images or more")
    within = centred - _class_means(centred, codes)[codes]
    spread, axes = descending_eigh(scatter(within))
    total_scatter = axes.T @ scatter(centred) @ axes  # the total scatter on the within-class axes
    bases = []
    for shrinkage in shrinkages:
        scale = 1 / np.sqrt(shrunk_values(spread, shrinkage))
        total = scale[:, None] * total_scatter * scale[None, :]
        _, leading = descending_eigh((total + total.T) / 2)
        bases.append(WhiteningBasis("supervised", mean, (axes * scale) @ leading))
    return bases


def shrunk_values(values: np.ndarray, shrinkage: float) -> np.ndarray:
    """The eigenvalues of ``shrunk(C, s)`` from those of ``C``, floored above zero as ``descending_eigh`` floors."""
    pulled = (1.0 - shrinkage) * values + shrinkage * float(np.mean(values))
    return np.maximum(pulled, EIGEN_FLOOR * max(float(pulled[0]), EIGEN_FLOOR))


def _class_means(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    sums = np.zeros((int(codes.max()) + 1, values.shape[1]))
    np.add.at(sums, codes, values)
    return sums / np.bincount(codes)[:, None]


def _checked(embeddings: np.ndarray, *, min_rows: int) -> np.ndarray:
    values = np.asarray(embeddings, np.float64)
    if values.ndim != 2 or len(values) < min_rows:
        raise DataError(f"whitening needs at least {min_rows} embeddings to fit on, got {len(values)}")
    return values
