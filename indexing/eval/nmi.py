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
    pred = np.asarray(labels_pred).ravel()
    if len(np.asarray(labels_true).ravel()) != len(pred):
        raise DataError(
            f"NMI needs two labellings of the same items, got {len(np.asarray(labels_true))} and {len(pred)}."
        )
    return float(normalized_mutual_info_rows(labels_true, pred[None, :])[0])


def normalized_mutual_info_rows(labels_true: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """(K,) NMI of each row of ``predictions`` (K, n) against the same ``labels_true`` (n,).

    One pass over a sparse contingency table of all rows at once, for callers that score many
    candidate clusterings (the facility-location loss's loss-augmented search).
    """
    true = np.unique(np.asarray(labels_true), return_inverse=True)[1].ravel().astype(np.int64)
    given = np.asarray(predictions)
    if given.ndim != 2 or given.shape[-1] != len(true):
        raise DataError(f"NMI needs labellings of the {len(true)} items, got predictions of shape {given.shape}.")
    pred = np.unique(given, return_inverse=True)[1].reshape(given.shape).astype(np.int64)
    rows, n_true, n_pred = len(pred), int(true.max(initial=-1)) + 1, int(pred.max(initial=-1)) + 1
    if len(true) == 0:
        return np.ones(rows)  # nothing to label: a perfect match, as sklearn
    row = np.repeat(np.arange(rows), len(true))
    pred_cells, pred_counts = np.unique(row * n_pred + pred.ravel(), return_counts=True)
    groups_per_row = np.bincount(pred_cells // n_pred, minlength=rows)
    pred_entropy = _row_entropies(pred_cells // n_pred, pred_counts, rows, len(true))
    true_counts = np.bincount(true, minlength=n_true)
    true_entropy = _entropy(true_counts)
    mutual_info = _mutual_info_rows(row, true, pred, true_counts, n_true, n_pred)
    normalizer = np.maximum((true_entropy + pred_entropy) / 2.0, np.finfo(np.float64).tiny)
    scores = np.where(mutual_info == 0.0, 0.0, mutual_info / normalizer)
    # both labellings put everything in one group (or there is nothing): a perfect match
    return np.where((groups_per_row == n_true) & (n_true <= 1), 1.0, scores)


def _mutual_info_rows(
    row: np.ndarray, true: np.ndarray, pred: np.ndarray, true_counts: np.ndarray, n_true: int, n_pred: int
) -> np.ndarray:
    rows, total = len(pred), float(len(true))
    cells, joint = np.unique((row * n_true + np.tile(true, rows)) * n_pred + pred.ravel(), return_counts=True)
    cell_row, cell_true, cell_pred = cells // (n_true * n_pred), (cells // n_pred) % n_true, cells % n_pred
    pred_counts = np.bincount(row * n_pred + pred.ravel(), minlength=rows * n_pred).astype(np.float64)
    outer = true_counts[cell_true].astype(np.float64) * pred_counts[cell_row * n_pred + cell_pred]
    joint = joint.astype(np.float64)
    terms = joint / total * (np.log(joint) + np.log(total) - np.log(outer))
    return np.maximum(np.bincount(cell_row, weights=terms, minlength=rows), 0.0)


def _row_entropies(cell_row: np.ndarray, counts: np.ndarray, rows: int, total: int) -> np.ndarray:
    probabilities = counts / total
    return -np.bincount(cell_row, weights=probabilities * np.log(probabilities), minlength=rows)


def _entropy(counts: np.ndarray) -> float:
    probabilities = counts[counts > 0] / counts.sum()
    return float(-(probabilities * np.log(probabilities)).sum())
