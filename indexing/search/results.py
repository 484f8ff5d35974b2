"""The one result type of a k-nearest-neighbour search, and the operations every search path shares.

It feeds the evaluator (``metrics_from_neighbor_labels``), the HTTP response and the
retrieval-grid plot, so every search path (exact, approximate, float, binary, files or Milvus)
returns it. Padding, dropping ids and merging the top k of several parts are its own methods
(``empty``, ``from_faiss``, ``without``, ``head``, ``pad``, ``merge_top_k``, ``replace_rows``), and the
one tie rule is ``rank_order``, so no caller writes them again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

PAD_ID = -1
"""Id of an empty slot: the gallery had fewer than k eligible items."""
_LAST = np.iinfo(np.int64).max  # the sort key of a padded slot: after every real id


def rank_order(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The positions that order ``ids`` (1-D, or each row of 2-D) best first: score descending, equal
    scores by ascending id, a padded slot after every real id. The one tie rule of every search path
    (merged parts, the Milvus backend, re-ranks, DBA's neighbour lists)."""
    return np.lexsort((np.where(ids == PAD_ID, _LAST, ids), -scores), axis=-1)


def _same(distances: np.ndarray) -> np.ndarray:
    return distances


@dataclass(frozen=True)
class SearchResults:
    """k nearest neighbours of each query, best first.

    ids: (n_queries, k) int64 gallery positions or item ids; ``PAD_ID`` (-1) where fewer than k
        results exist.
    scores: (n_queries, k) float32, higher = more similar; ``-inf`` in padded slots.
        Float search: the inner product (the cosine for L2-normalised vectors).
        Binary search: ``1 - 2 * hamming / bits``, the cosine of the +-1 sign vectors
        (see ``retrieval.indexing.search.binary.hamming_to_similarity``), so both lie in [-1, 1].
    Ties in score are ordered by ascending id.
    """

    ids: np.ndarray
    scores: np.ndarray

    def __post_init__(self) -> None:
        if self.ids.ndim != 2 or self.ids.shape != self.scores.shape:
            raise ValueError(
                f"ids {self.ids.shape} and scores {self.scores.shape} must be 2-D arrays of the same shape."
            )

    # ----- making ------------------------------------------------------------------------
    @classmethod
    def empty(cls, queries: int, k: int = 0) -> SearchResults:
        """``queries`` rows of ``k`` padded slots."""
        return cls(np.full((queries, k), PAD_ID, np.int64), np.full((queries, k), -np.inf, np.float32))

    @classmethod
    def from_faiss(
        cls, distances: np.ndarray, ids: np.ndarray, to_scores: Callable[[np.ndarray], np.ndarray] = _same
    ) -> SearchResults:
        """faiss's ``(distances, ids)``: ``to_scores`` turns distances into similarities, and the
        slots faiss leaves empty (id -1, a huge distance) become ``PAD_ID`` / -inf."""
        ids = np.asarray(ids, dtype=np.int64)
        scores = np.where(ids == PAD_ID, -np.inf, to_scores(distances)).astype(np.float32)
        return cls(ids, scores)

    @staticmethod
    def concatenate(parts: list[SearchResults]) -> SearchResults:
        """Stack results of consecutive query chunks."""
        if not parts:
            return SearchResults(np.zeros((0, 0), np.int64), np.zeros((0, 0), np.float32))
        return SearchResults(np.concatenate([p.ids for p in parts]), np.concatenate([p.scores for p in parts]))

    @classmethod
    def merge_top_k(cls, parts: Sequence[SearchResults], k: int) -> SearchResults:
        """The best ``k`` of the parts' results per row (parts of the same queries: segments, blocks,
        shards): by score, ties by ascending id, padded where all parts together hold fewer."""
        if not parts:
            raise ValueError("merge_top_k needs at least one part")
        if len(parts) == 1 and parts[0].k == k:
            return parts[0]
        ids = np.concatenate([part.ids for part in parts], axis=1)
        scores = np.concatenate([part.scores for part in parts], axis=1)
        order = rank_order(ids, scores)[:, :k]
        return cls(np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)).pad(k)

    # ----- reading -----------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def k(self) -> int:
        return int(self.ids.shape[1])

    def valid_mask(self) -> np.ndarray:
        """(n_queries, k) bool: True where a slot holds a real gallery item."""
        return self.ids != PAD_ID

    def short_rows(self, k: int) -> np.ndarray:
        """Positions of the rows that hold fewer than ``k`` results."""
        return np.flatnonzero(self.valid_mask().sum(axis=1) < k)

    def labels_of(self, gallery_labels: np.ndarray, pad_label: int = -1) -> np.ndarray:
        """Neighbour labels, ``pad_label`` in empty slots (pass a label that never matches a query)."""
        labels = np.asarray(gallery_labels)[np.where(self.valid_mask(), self.ids, 0)]
        return np.where(self.valid_mask(), labels, pad_label)

    # ----- changing (each returns new results) ------------------------------------------------
    def without(self, ids: np.ndarray) -> SearchResults:
        """These results with ``ids`` dropped: the rest of each row moves up in rank order, padding fills
        the end (same width)."""
        dropped = np.isin(self.ids, ids) | (self.ids == PAD_ID)
        order = np.argsort(dropped, axis=1, kind="stable")
        kept_ids = np.where(dropped, PAD_ID, self.ids)
        kept_scores = np.where(dropped, -np.inf, self.scores).astype(np.float32)
        return SearchResults(np.take_along_axis(kept_ids, order, 1), np.take_along_axis(kept_scores, order, 1))

    def head(self, k: int) -> SearchResults:
        """The first ``k`` results of each row."""
        return SearchResults(self.ids[:, :k], self.scores[:, :k])

    def pad(self, k: int) -> SearchResults:
        """These results widened to ``k`` slots with padding (unchanged when they hold k or more)."""
        missing = k - self.k
        if missing <= 0:
            return self
        ids = np.pad(self.ids, ((0, 0), (0, missing)), constant_values=PAD_ID)
        scores = np.pad(self.scores, ((0, 0), (0, missing)), constant_values=-np.inf)
        return SearchResults(ids, scores.astype(np.float32))

    def replace_rows(self, rows: np.ndarray, other: SearchResults) -> SearchResults:
        """These results with ``rows`` replaced by the rows of ``other`` (same width)."""
        if not len(rows):
            return self
        ids, scores = self.ids.copy(), self.scores.copy()
        ids[rows], scores[rows] = other.ids, other.scores
        return SearchResults(ids, scores)
