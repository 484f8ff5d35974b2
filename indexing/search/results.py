"""The one result type of a k-nearest-neighbour search.

It feeds the evaluator (``metrics_from_neighbor_labels``), the HTTP response and the
retrieval-grid plot, so every search path (exact, approximate, float, binary) returns it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD_ID = -1
"""Id of an empty slot: the gallery had fewer than k eligible items."""


@dataclass(frozen=True)
class SearchResults:
    """k nearest neighbours of each query, best first.

    ids: (n_queries, k) int64 gallery positions; ``PAD_ID`` (-1) where fewer than k results exist.
    scores: (n_queries, k) float32, higher = more similar; ``-inf`` in padded slots.
        Float search: the inner product (the cosine for L2-normalised vectors).
        Binary search: ``1 - 2 * hamming / bits``, the cosine of the +-1 sign vectors
        (see ``retrieval.indexing.search.binary.hamming_to_similarity``), so both lie in [-1, 1].
    Ties in score are ordered by ascending gallery position.
    """

    ids: np.ndarray
    scores: np.ndarray

    def __post_init__(self) -> None:
        if self.ids.ndim != 2 or self.ids.shape != self.scores.shape:
            raise ValueError(
                f"ids {self.ids.shape} and scores {self.scores.shape} must be 2-D arrays of the same shape."
            )

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def k(self) -> int:
        return int(self.ids.shape[1])

    def valid_mask(self) -> np.ndarray:
        """(n_queries, k) bool: True where a slot holds a real gallery item."""
        return self.ids != PAD_ID

    def labels_of(self, gallery_labels: np.ndarray, pad_label: int = -1) -> np.ndarray:
        """Neighbour labels, ``pad_label`` in empty slots (pass a label that never matches a query)."""
        labels = np.asarray(gallery_labels)[np.where(self.valid_mask(), self.ids, 0)]
        return np.where(self.valid_mask(), labels, pad_label)

    @staticmethod
    def concatenate(parts: list[SearchResults]) -> SearchResults:
        """Stack results of consecutive query chunks."""
        if not parts:
            return SearchResults(np.zeros((0, 0), np.int64), np.zeros((0, 0), np.float32))
        return SearchResults(np.concatenate([p.ids for p in parts]), np.concatenate([p.scores for p in parts]))
