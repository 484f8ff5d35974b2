"""Structured clustering loss via facility location (Oh Song et al., CVPR 2017).

The facility-location score of a set S of medoids (batch indices) is
F(S) = -sum_i min_{j in S} ||x_i - x_j||, and the ground-truth score is
F~ = sum_k max_{j in class k} -sum_{i in class k} ||x_i - x_j|| (each class's best medoid). The loss
is the structured hinge

    relu( F(S*) + gamma * (1 - NMI(g(S*), y)) - F~ ),

where S* is the loss-augmented clustering: |classes in the batch| medoids chosen greedily, each
step adding the candidate that maximises F(S + c) + gamma * (1 - NMI(g(S + c), y)), with g(S) the
assignment of every image to its nearest medoid and NMI the arithmetic-mean normalised mutual
information; then ``pam_iterations`` rounds of the paper's PAM-style refinement: for each cluster
in turn, the member that maximises its cluster's facility score plus gamma * (1 - NMI) becomes the
medoid (as TensorFlow's ``cluster_loss``, which implements the paper). The search is not
differentiable (argmax over indices, on detached distances); the loss is, through the distances
inside F(S*) and F~.

Cost per batch of B images and C classes: C greedy steps x B candidates, each an O(B) assignment
update and one NMI (all candidates of a step in one vectorised NMI call), i.e. O(B^2 * C) in
NumPy, plus B more NMIs per refinement round. Like the paper, the hinge is a sum over the batch, not a mean, so its scale
grows with B.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.eval.nmi import normalized_mutual_info, normalized_mutual_info_rows
from retrieval.training.losses.base import EmbeddingLoss, Sampler


def pairwise_distances(embeddings: torch.Tensor) -> torch.Tensor:
    """(B, B) Euclidean distances with a zero diagonal and a finite gradient at zero distance."""
    norms = embeddings.pow(2).sum(dim=1)
    squared = (norms.unsqueeze(1) + norms.unsqueeze(0) - 2 * embeddings @ embeddings.T).clamp_min(0)
    squared = squared * (1 - torch.eye(len(squared), dtype=squared.dtype, device=squared.device))
    root = squared.clamp_min(torch.finfo(squared.dtype).tiny).sqrt()
    return torch.where(squared > 0, root, torch.zeros_like(squared))


def facility_score(distances: torch.Tensor, medoids: list[int]) -> torch.Tensor:
    """F(S) = -sum_i min_{j in S} d(i, j)."""
    return -distances[medoids].min(dim=0).values.sum()


def ground_truth_score(distances: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """F~ = sum over classes of the best within-class medoid's score on that class's images."""
    total = distances.new_zeros(())
    for label in torch.unique(labels):
        members = torch.nonzero(labels == label).squeeze(1)
        total = total - distances[members][:, members].sum(dim=0).min()
    return total


def assign(distances: np.ndarray, medoids: list[int]) -> np.ndarray:
    """g(S): the position in ``medoids`` of each image's nearest medoid; a medoid is its own cluster."""
    clusters = distances[medoids].argmin(axis=0)
    clusters[medoids] = np.arange(len(medoids))
    return clusters


def augmented_greedy_medoids(distances: np.ndarray, labels: np.ndarray, gamma: float) -> list[int]:
    """S*: greedily add the medoid that maximises F(S + c) + gamma * (1 - NMI(g(S + c), labels))."""
    medoids: list[int] = []
    nearest = np.full(len(labels), np.inf)  # each image's distance to its nearest chosen medoid
    clusters = np.zeros(len(labels), dtype=np.int64)
    for _ in range(len(np.unique(labels))):
        candidates = np.setdiff1d(np.arange(len(labels)), medoids)
        facility = -np.minimum(nearest, distances[candidates]).sum(axis=1)
        # g(S + c) for every candidate c at once: an image moves to c only if c is strictly nearer
        # (argmin keeps the earlier medoid on ties), and c is its own cluster
        moved = np.where(distances[candidates] < nearest, len(medoids), clusters)
        moved[np.arange(len(candidates)), candidates] = len(medoids)
        scores = facility + gamma * (1.0 - normalized_mutual_info_rows(labels, moved))
        medoids.append(int(candidates[int(np.argmax(scores))]))
        nearest = np.minimum(nearest, distances[medoids[-1]])
        clusters = assign(distances, medoids)
    return medoids


def refine_medoids(
    distances: np.ndarray, labels: np.ndarray, medoids: list[int], gamma: float, iterations: int
) -> list[int]:
    """PAM-style refinement: per cluster, the member maximising its facility score + gamma * (1 - NMI)."""
    medoids = list(medoids)
    for _ in range(iterations):
        clusters = assign(distances, medoids)  # fixed for the round, as in the paper's implementation
        for k in range(len(medoids)):
            members = np.flatnonzero(clusters == k)
            facility = -distances[np.ix_(members, members)].sum(axis=0)
            swapped = np.stack([assign(distances, [*medoids[:k], int(j), *medoids[k + 1 :]]) for j in members])
            scores = facility + gamma * (1.0 - normalized_mutual_info_rows(labels, swapped))
            medoids[k] = int(members[int(np.argmax(scores))])
    return medoids


class FacilityLocationLoss(EmbeddingLoss):
    """relu(F(S*) + gamma * (1 - NMI(g(S*), y)) - F~) on one batch."""

    sampler: ClassVar[Sampler] = "balanced"

    def __init__(self, gamma: float = 1.0, pam_iterations: int = 5) -> None:
        super().__init__()
        if gamma < 0:
            raise ConfigError(f"facility_location gamma must be >= 0, got {gamma}")
        if not int(pam_iterations) == pam_iterations >= 0:
            raise ConfigError(f"facility_location pam_iterations must be an integer >= 0, got {pam_iterations}")
        self.gamma = float(gamma)
        self.pam_iterations = int(pam_iterations)

    def compute(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        distances = pairwise_distances(embeddings)
        fixed = distances.detach().cpu().double().numpy()
        label_array = labels.cpu().numpy()
        medoids = augmented_greedy_medoids(fixed, label_array, self.gamma)
        medoids = refine_medoids(fixed, label_array, medoids, self.gamma, self.pam_iterations)
        margin = 1.0 - normalized_mutual_info(label_array, assign(fixed, medoids))
        violation = facility_score(distances, medoids) + self.gamma * margin - ground_truth_score(distances, labels)
        return torch.relu(violation)

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, pam_iterations={self.pam_iterations}"
