"""Groups of copies: the connected components of a pair graph, largest first."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


def copy_groups(first: np.ndarray, second: np.ndarray, count: int) -> list[np.ndarray]:
    """The connected components of the graph on ``count`` nodes with edges ``first[i] -- second[i]`` that
    hold two nodes or more: sorted node numbers each, largest group first (ties: smallest first node)."""
    if len(first) == 0:
        return []
    graph = coo_matrix((np.ones(len(first), np.int8), (first, second)), shape=(count, count))
    _, component = connected_components(graph, directed=False)
    order = np.argsort(component, kind="stable")
    bounds = np.flatnonzero(np.diff(component[order])) + 1
    groups = [group for group in np.split(order, bounds) if len(group) > 1]
    return sorted(groups, key=lambda group: (-len(group), int(group[0])))


def collapse_copies(vectors: np.ndarray, threshold: float) -> np.ndarray:
    """Row numbers to keep from ranked ``vectors`` (best first, L2-normalised): the first of each group of
    rows connected by a cosine similarity of at least ``threshold``, in rank order."""
    if len(vectors) < 2:
        return np.arange(len(vectors))
    similar = np.triu(vectors @ vectors.T >= threshold, k=1)
    first, second = np.nonzero(similar)
    _, component = connected_components(
        coo_matrix((np.ones(len(first), np.int8), (first, second)), shape=(len(vectors),) * 2), directed=False
    )
    _, keep = np.unique(component, return_index=True)
    return np.sort(keep)
