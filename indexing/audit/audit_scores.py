"""The audit of a set of labelled vectors, torch-free: within-class whitening (``whitening``), out-of-fold
neighbours (``neighbours``), the class evidence of each item (``class_votes``), its label score and its outlier score (``outlier_scores``).

The label score is ``1 - p(given label | x)`` (``class_votes``): 0 when every neighbour and the nearest class
mean agree with the label, near 1 when they all point elsewhere; the suggested label is the best other class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.indexing.audit.class_votes import TEMPERATURE, class_votes
from retrieval.indexing.audit.neighbours import Neighbours, copy_group_ids, out_of_fold_neighbours
from retrieval.indexing.audit.outlier_scores import outlier_scores
from retrieval.indexing.audit.whitening import whitened
from retrieval.indexing.common.errors import DataError

NEIGHBOURS = 10


@dataclass(frozen=True)
class AuditScores:
    """Per item (in the order given): the label score, the suggested class (-1: none), the outlier score and
    its out-of-fold neighbours; ``classes`` names the class numbers."""

    classes: list[str]
    labels: np.ndarray
    label_scores: np.ndarray
    suggested: np.ndarray
    outlier_scores: np.ndarray
    neighbours: Neighbours

    def suggested_name(self, position: int) -> str:
        number = int(self.suggested[position])
        return self.classes[number] if number >= 0 else ""


def audit_scores(
    vectors: np.ndarray,
    labels: Sequence[str],
    copies: Sequence[Sequence[int]] = (),
    *,
    k: int = NEIGHBOURS,
    progress: bool = False,
) -> AuditScores:
    """Score every row of ``vectors`` (L2-normalised) with its label; ``copies``: groups of positions that are
    copies of one another (none of them votes for another)."""
    vectors = _checked(vectors, labels)
    classes, numbers = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    numbers = numbers.astype(np.int64)
    group = copy_group_ids(len(vectors), copies)
    space = whitened(vectors, numbers)
    neighbours = out_of_fold_neighbours(space, k, group, progress=progress)
    votes = class_votes(space, numbers, neighbours, group, temperature=TEMPERATURE)
    return AuditScores(
        classes=[str(name) for name in classes],
        labels=numbers,
        label_scores=(1.0 - votes.own).astype(np.float32),
        suggested=votes.other,
        outlier_scores=outlier_scores(neighbours, votes.nearest_mean),
        neighbours=neighbours,
    )


def _checked(vectors: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) < 3:
        raise DataError(f"an audit needs three labelled vectors or more, got an array of shape {vectors.shape}")
    if len(labels) != len(vectors):
        raise DataError(f"{len(labels)} labels for {len(vectors)} vectors; give one label per vector")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
