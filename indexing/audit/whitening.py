"""Within-class whitening (the LDA view of a class-mean classifier): the vectors are centred and turned by
``(S_w + shrink * mean_eigenvalue * I)^(-1/2)``, ``S_w`` the covariance of the items around their class means,
then L2-normalised again. Directions along which images of one class vary (pose, background, light) shrink and
those that tell classes apart grow, so a photo filed under a look-alike class stands out (chosen on the
training classes of cub50 and cars196: docs/data.md). A fitted global transform: each item weighs ``1/n`` in
``S_w``, far less than in the votes, which stay out of fold."""

from __future__ import annotations

import numpy as np

SHRINK = 3.0


def whitened(vectors: np.ndarray, labels: np.ndarray, shrink: float = SHRINK) -> np.ndarray:
    """``vectors`` (n, d) in the within-class whitened space, L2-normalised (float32)."""
    data = vectors.astype(np.float64)
    classes = int(labels.max()) + 1
    sums = np.zeros((classes, data.shape[1]))
    np.add.at(sums, labels, data)
    counts = np.bincount(labels, minlength=classes).astype(np.float64)
    scatter = data.T @ data - (sums.T / np.maximum(counts, 1)) @ sums
    covariance = scatter / len(data)
    covariance += shrink * max(np.trace(covariance) / len(covariance), 1e-12) * np.eye(len(covariance))
    values, basis = np.linalg.eigh(covariance)
    turned = (data - data.mean(axis=0)) @ (basis / np.sqrt(values))
    norms = np.linalg.norm(turned, axis=1, keepdims=True)
    return (turned / np.maximum(norms, 1e-12)).astype(np.float32)
