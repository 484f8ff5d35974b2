"""Each item's class evidence, out of fold, from the two published families that need no classifier:

- **neighbour votes** (cleanlab's kNN path; Deep k-NN, Bahri et al. 2020): the k nearest others vote for their
  labels, each with weight ``exp((cosine - 1) / temperature)``; ``p_knn(c | x)`` is class c's share of the weight;
- **class prototypes** (the class means): ``p_proto(c | x)`` is a softmax of ``cosine(x, mean_c) / temperature``
  over the ``PROTOTYPES`` nearest class means (``search.knn``: faiss heaps) and the item's own; every mean leaves out the item and its
  copies (``neighbours.copy_group_ids``), so neither votes for itself.

``p(c | x) = KNN_WEIGHT * p_knn + (1 - KNN_WEIGHT) * p_proto``, on within-class whitened vectors
(``whitening``). Only the given label's share and the best other class are kept (two
numbers per item), so memory stays O(items x k) whatever the number of classes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.indexing.audit.neighbours import Neighbours
from retrieval.indexing.search.knn import knn_search
from retrieval.indexing.search.results import PAD_ID

TEMPERATURE = 0.03
KNN_WEIGHT = 0.25
PROTOTYPES = 10
CHUNK = 16384


@dataclass(frozen=True)
class ClassVotes:
    """Per item: ``own``, the share its given label gets; ``other``, the best other class and ``other_share``,
    its share (``other`` is -1 when no other class has a share); ``nearest_mean``, its best cosine with a class
    mean (its own left out)."""

    own: np.ndarray
    other: np.ndarray
    other_share: np.ndarray
    nearest_mean: np.ndarray


def class_votes(
    vectors: np.ndarray,
    labels: np.ndarray,
    neighbours: Neighbours,
    group: np.ndarray,
    *,
    temperature: float = TEMPERATURE,
) -> ClassVotes:
    """The mean of the neighbour and the prototype shares of each item's classes (module docstring)."""
    knn_classes, knn_shares = neighbour_shares(neighbours, labels, temperature)
    proto_classes, proto_shares, nearest_mean = prototype_shares(vectors, labels, group, temperature)
    classes = np.concatenate([knn_classes, proto_classes], axis=1)
    shares = np.concatenate([KNN_WEIGHT * knn_shares, (1 - KNN_WEIGHT) * proto_shares], axis=1)
    own, other, other_share = _combined(classes, shares, labels)
    return ClassVotes(own, other, other_share, nearest_mean.astype(np.float32))


def _combined(classes: np.ndarray, shares: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sum the shares each row gives one class in several slots; keep the own label's and the best other's."""
    same = (classes[:, :, None] == classes[:, None, :]) & (classes[:, None, :] >= 0)
    first = np.argmax(same, axis=2) == np.arange(classes.shape[1])  # the first slot of each class counts it
    total = np.where(first & (classes >= 0), (same * shares[:, None, :]).sum(axis=2), 0.0)
    own = np.where(classes == labels[:, None], total, 0.0).max(axis=1)
    others = np.where(classes == labels[:, None], -1.0, total)
    best = others.argmax(axis=1)
    rows = np.arange(len(labels))
    has_other = others[rows, best] > 0
    return (
        own.astype(np.float32),
        np.where(has_other, classes[rows, best], -1),
        np.where(has_other, others[rows, best], 0.0).astype(np.float32),
    )


def neighbour_shares(
    neighbours: Neighbours, labels: np.ndarray, temperature: float = TEMPERATURE
) -> tuple[np.ndarray, np.ndarray]:
    """``(classes, shares)``, each ``(n, k)``: the label in each neighbour slot (-1 padded) and the weight of
    that slot as a share of the row's total."""
    valid = neighbours.ids != PAD_ID
    voted = np.where(valid, labels[np.where(valid, neighbours.ids, 0)], -1)
    weights = np.where(valid, np.exp((neighbours.scores.astype(np.float64) - 1.0) / temperature), 0.0)
    total = np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
    return voted, weights / total


def prototype_shares(
    vectors: np.ndarray, labels: np.ndarray, group: np.ndarray, temperature: float = TEMPERATURE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(classes, shares, nearest)``: ``(n, PROTOTYPES + 1)`` the nearest class means and the own class's, with
    their softmax shares, and each item's best cosine with a mean; every mean leaves out the item's copies."""
    classes = int(labels.max()) + 1
    sums = np.zeros((classes, vectors.shape[1]), np.float64)
    np.add.at(sums, labels, vectors)
    means = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    near = min(PROTOTYPES, classes)
    found = knn_search(vectors, means.astype(np.float32), near)  # NumPy's BLAS products, faiss's heaps
    nearest = found.ids.astype(np.int64)
    cosines = found.scores.astype(np.float64)
    held_out = _group_class_sums(vectors, labels, group)
    for column in range(near):  # each mean that holds one of the item's group: recomputed without it
        cosines[:, column] = _left_out_cosine(vectors, sums, nearest[:, column], held_out, group, cosines[:, column])
    own = _left_out_cosine(vectors, sums, labels, held_out, group, None)
    candidates = np.concatenate([nearest, labels[:, None]], axis=1)
    scores = np.concatenate([cosines, own[:, None]], axis=1)
    duplicate_own = nearest == labels[:, None]  # the own class appears once, as its left-out mean
    candidates[:, :near] = np.where(duplicate_own, -1, nearest)
    logits = np.where(candidates >= 0, scores / temperature, -np.inf)
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    nearest_cosine = np.where(candidates >= 0, scores, -1.0).max(axis=1)
    return candidates, weights / weights.sum(axis=1, keepdims=True), nearest_cosine


def _group_class_sums(vectors: np.ndarray, labels: np.ndarray, group: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """For the items that have copies: the sum of each (copy group, class)'s vectors."""
    copied = np.flatnonzero(np.bincount(group, minlength=len(group))[group] > 1)
    sums: dict[tuple[int, int], np.ndarray] = {}
    for position in copied:
        key = (int(group[position]), int(labels[position]))
        sums[key] = sums.get(key, 0.0) + vectors[position].astype(np.float64)
    return sums


def _left_out_cosine(
    vectors: np.ndarray,
    sums: np.ndarray,
    classes: np.ndarray,
    held_out: dict[tuple[int, int], np.ndarray],
    group: np.ndarray,
    known: np.ndarray | None,
) -> np.ndarray:
    """Cosine of each item with the mean of ``classes[i]`` without the item's own copies of that class (``known``:
    the full means' cosines, right for every item whose group holds no member of that class)."""
    if known is None:  # the own class: always without the item
        own = sums[classes] - vectors
        result = np.einsum("ij,ij->i", vectors, own) / np.maximum(np.linalg.norm(own, axis=1), 1e-12)
        result = np.where(np.linalg.norm(own, axis=1) > 1e-9, result, -1.0)
    else:
        result = known.copy()
    for (copy_group, label), removed in held_out.items():
        rows = np.flatnonzero((group == copy_group) & (classes == label))
        if len(rows):
            left = sums[label] - removed
            norm = np.linalg.norm(left)
            result[rows] = vectors[rows] @ left / norm if norm > 1e-9 else -1.0
    return result
