"""Out-of-fold neighbours: each item's k nearest others by cosine (``search.knn``: exact, faiss heaps), never
itself nor a member of its own group of copies (the exact and near copies ``retrieval data duplicates`` finds),
so that a copy planted under a wrong class cannot vouch for itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.indexing.search.knn import knn_search
from retrieval.indexing.search.results import PAD_ID


@dataclass(frozen=True)
class Neighbours:
    """Row i: the positions (``ids``, ``PAD_ID`` past the last) and cosines of item i's nearest others."""

    ids: np.ndarray
    scores: np.ndarray


def copy_group_ids(count: int, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Each item's group number: its copy group's first member, or itself when it has no copy."""
    group = np.arange(count, dtype=np.int64)
    for members in groups:
        group[np.asarray(members, dtype=np.int64)] = int(min(members))
    return group


def out_of_fold_neighbours(
    vectors: np.ndarray, k: int, group: np.ndarray | None = None, *, progress: bool = False
) -> Neighbours:
    """The ``k`` nearest other items of each row of ``vectors`` (L2-normalised), members of its own copy
    ``group`` (``copy_group_ids``) left out."""
    count = len(vectors)
    group = np.arange(count) if group is None else group
    extra = int(np.bincount(group, minlength=1).max()) - 1  # the most copies one item can lose
    found = knn_search(vectors, vectors, min(k + extra, max(count - 1, 1)), exclude_self=True, progress=progress)
    ids, scores = found.ids, found.scores
    valid = (ids != PAD_ID) & (group[np.where(ids == PAD_ID, 0, ids)] != group[:, None])
    order = np.argsort(~valid, axis=1, kind="stable")[:, :k]  # the valid ones first, in rank order
    kept_ids = np.take_along_axis(np.where(valid, ids, PAD_ID), order, axis=1)
    kept_scores = np.take_along_axis(np.where(valid, scores, -np.inf), order, axis=1)
    if kept_ids.shape[1] < k:
        pad = k - kept_ids.shape[1]
        kept_ids = np.pad(kept_ids, ((0, 0), (0, pad)), constant_values=PAD_ID)
        kept_scores = np.pad(kept_scores, ((0, 0), (0, pad)), constant_values=-np.inf)
    return Neighbours(kept_ids, kept_scores.astype(np.float32))
