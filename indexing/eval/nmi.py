"""NMI of a k-means clustering against the class labels (the clustering metric of DML papers).

k-means is faiss's, with a fixed seed and one cluster per class; the mutual information is
computed here in NumPy from a sparse contingency table (12,000 classes would make a dense one
144M cells), normalised by the arithmetic mean of the two entropies, as scikit-learn's default.
"""

from __future__ import annotations

import faiss
import numpy as np

from retrieval.indexing.common.errors import DataError


def nmi_kmeans(embeddings: np.ndarray, labels: np.ndarray, *, seed: int = 0, niter: int = 20) -> float:
    """Cluster ``embeddings`` into as many clusters as there are labels and score the clustering."""
    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    classes = np.unique(np.asarray(labels), return_inverse=True)[1].ravel()
    if vectors.ndim != 2 or len(vectors) != len(classes):
        raise DataError(f"NMI needs one label per embedding, got {len(classes)} labels for shape {vectors.shape}.")
    n_clusters = int(classes.max()) + 1
    return normalized_mutual_info(classes, kmeans_assignments(vectors, n_clusters, seed=seed, niter=niter))


def kmeans_assignments(vectors: np.ndarray, n_clusters: int, *, seed: int = 0, niter: int = 20) -> np.ndarray:
    """(n,) int64 index of the nearest k-means centroid of each vector (faiss, deterministic for a seed)."""
    if n_clusters <= 1:
        return np.zeros(len(vectors), dtype=np.int64)
    # min_points_per_centroid=1 only silences faiss's "please provide more points" warning
    kmeans = faiss.Kmeans(vectors.shape[1], n_clusters, niter=niter, seed=seed, min_points_per_centroid=1)
    kmeans.train(vectors)
    return kmeans.index.search(vectors, 1)[1].ravel().astype(np.int64)


def normalized_mutual_info(labels_true: np.ndarray, labels_pred: np.ndarray) -> float:
    """NMI with arithmetic normalisation; same edge cases as ``sklearn.metrics.normalized_mutual_info_score``."""
    true = np.unique(np.asarray(labels_true), return_inverse=True)[1].ravel().astype(np.int64)
    pred = np.unique(np.asarray(labels_pred), return_inverse=True)[1].ravel().astype(np.int64)
    if len(true) != len(pred):
        raise DataError(f"NMI needs two labellings of the same items, got {len(true)} and {len(pred)}.")
    n_true, n_pred = int(true.max(initial=-1)) + 1, int(pred.max(initial=-1)) + 1
    if n_true == n_pred and n_true <= 1:
        return 1.0  # both labellings put everything in one group (or there is nothing): a perfect match
    mutual_info = _mutual_info(true, pred, n_pred)
    if mutual_info == 0.0:
        return 0.0
    normalizer = (_entropy(np.bincount(true)) + _entropy(np.bincount(pred))) / 2.0
    return float(mutual_info / normalizer)


def _mutual_info(true: np.ndarray, pred: np.ndarray, n_pred: int) -> float:
    cells, joint = np.unique(true * n_pred + pred, return_counts=True)
    total = float(len(true))
    row_sums, col_sums = np.bincount(true).astype(np.float64), np.bincount(pred).astype(np.float64)
    outer = row_sums[cells // n_pred] * col_sums[cells % n_pred]
    joint = joint.astype(np.float64)
    terms = joint / total * (np.log(joint) + np.log(total) - np.log(outer))
    return max(float(terms.sum()), 0.0)


def _entropy(counts: np.ndarray) -> float:
    probabilities = counts[counts > 0] / counts.sum()
    return float(-(probabilities * np.log(probabilities)).sum())
