"""How little an item belongs to any class: ``1 - max(cosine to the nearest class mean, mean cosine to its k
nearest others)``, out of fold like the label scores. A foreign photo (a car among birds) sits far from every
class mean even when a few foreign photos are each other's neighbours; a blank frame sits far from both."""

from __future__ import annotations

import numpy as np

from retrieval.indexing.audit.neighbours import Neighbours
from retrieval.indexing.search.results import PAD_ID


def outlier_scores(neighbours: Neighbours, nearest_mean: np.ndarray) -> np.ndarray:
    """Higher = belongs to no class well (module docstring); ``nearest_mean``: each item's best cosine with a
    class mean that leaves it out."""
    valid = neighbours.ids != PAD_ID
    mean_cosine = np.where(valid, neighbours.scores, 0.0).sum(axis=1) / np.maximum(valid.sum(axis=1), 1)
    return (1.0 - np.maximum(nearest_mean, mean_cosine)).astype(np.float32)
