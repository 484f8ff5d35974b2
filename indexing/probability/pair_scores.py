"""(score, same class) pairs of queries against their gallery, as a search would score them.

Float scores are inner products of the embeddings (cosines); binary scores ``1 - 2 * hamming / bits``, the
cosine of the sign vectors (``indexing.search.binary``), both computed exactly here (no index). A query is never
paired with itself. ``all_pairs`` samples queries when there would be more than ``MAX_PAIRS`` pairs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from retrieval.indexing.common.score_calibration import CalibrationKind
from retrieval.indexing.search.binary import binarize

MAX_PAIRS = 4_000_000
QUERY_CHUNK = 512


@dataclass(frozen=True)
class LabelledSet:
    """Embeddings with labels and the query / gallery flags of their records."""

    embeddings: np.ndarray
    labels: np.ndarray
    is_query: np.ndarray
    is_gallery: np.ndarray

    @property
    def queries(self) -> np.ndarray:
        return np.flatnonzero(self.is_query)

    @property
    def gallery(self) -> np.ndarray:
        return np.flatnonzero(self.is_gallery)

    def vectors(self, kind: CalibrationKind) -> np.ndarray:
        """What the ``kind`` score is an inner product of (divided by the width): embeddings, or +-1 signs."""
        if kind == "float":
            return np.asarray(self.embeddings, np.float32)
        dim = self.embeddings.shape[1]
        bits = np.unpackbits(binarize(np.asarray(self.embeddings, np.float32)), axis=1)[:, :dim]
        return (bits.astype(np.float32) * 2 - 1) / np.sqrt(dim, dtype=np.float32)

    def with_distractors(self, embeddings: np.ndarray, labels: np.ndarray) -> LabelledSet:
        """This set with ``embeddings`` added to the gallery, never as queries: images of other classes (the
        training images beside the validation classes), so that a query's first hits meet as many look-alike
        classes as in a gallery of the test's size."""
        added = np.zeros(len(labels), bool)
        return LabelledSet(
            np.concatenate([self.embeddings, np.asarray(embeddings, self.embeddings.dtype)]),
            np.concatenate([self.labels, np.asarray(labels)]),
            np.concatenate([self.is_query, added]),
            np.concatenate([self.is_gallery, ~added]),
        )

    def distractor_mask(self) -> np.ndarray:
        """The gallery records of classes that no query is of."""
        return self.is_gallery & ~np.isin(self.labels, self.labels[self.queries])

    def without_distractors(self) -> LabelledSet:
        """The records of the queries' classes only (the validation classes alone)."""
        keep = ~self.distractor_mask()
        return LabelledSet(self.embeddings[keep], self.labels[keep], self.is_query[keep], self.is_gallery[keep])

    def base_rate(self) -> float:
        """The fraction of query-gallery pairs (a query not paired with itself) that share a class."""
        gallery_labels = self.labels[self.gallery]
        values, counts = np.unique(gallery_labels, return_counts=True)
        per_label = dict(zip(values.tolist(), counts.tolist(), strict=True))
        same = np.array([per_label.get(label, 0) for label in self.labels[self.queries].tolist()], np.float64)
        same -= self.is_gallery[self.queries]  # itself
        others = len(gallery_labels) - self.is_gallery[self.queries].astype(np.float64)
        return float(same.sum() / max(others.sum(), 1.0))


def score_rows(data: LabelledSet, kind: CalibrationKind, queries: np.ndarray) -> Iterator[tuple[np.ndarray, ...]]:
    """Per chunk of ``queries``: (scores (q, g), same class (q, g), not itself (q, g)) against the gallery."""
    vectors, gallery = data.vectors(kind), data.gallery
    for start in range(0, len(queries), QUERY_CHUNK):
        rows = queries[start : start + QUERY_CHUNK]
        scores = vectors[rows] @ vectors[gallery].T
        same = data.labels[rows][:, None] == data.labels[gallery][None, :]
        yield scores, same, rows[:, None] != gallery[None, :]


def all_pairs(data: LabelledSet, kind: CalibrationKind, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """(scores, same class, queries used) of every query-gallery pair, of a seeded sample of queries when
    there would be more than ``MAX_PAIRS``."""
    queries = data.queries
    most = max(1, MAX_PAIRS // max(len(data.gallery), 1))
    if len(queries) > most:
        queries = np.sort(np.random.default_rng(seed).choice(queries, most, replace=False))
    scores, same = [], []
    for chunk_scores, chunk_same, kept in score_rows(data, kind, queries):
        scores.append(chunk_scores[kept])
        same.append(chunk_same[kept])
    return np.concatenate(scores), np.concatenate(same), len(queries)


def top_hits(data: LabelledSet, kind: CalibrationKind, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, same class) of each query's ``k`` best hits, flattened: what a search returns."""
    scores, same, _ = top_hits_by_class(data, kind, k)
    return scores, same


def top_hits_by_class(data: LabelledSet, kind: CalibrationKind, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``top_hits`` with the query's class of each pair (what a fit over classes groups by)."""
    scores, same, classes = [], [], []
    rows = [data.queries[start : start + QUERY_CHUNK] for start in range(0, len(data.queries), QUERY_CHUNK)]
    for chunk, (chunk_scores, chunk_same, kept) in zip(rows, score_rows(data, kind, data.queries), strict=True):
        masked = np.where(kept, chunk_scores, -np.inf)
        depth = min(k, masked.shape[1] - 1) if masked.shape[1] > 1 else masked.shape[1]
        best = np.argpartition(-masked, depth - 1, axis=1)[:, :depth] if depth else masked[:, :0].astype(int)
        top = np.take_along_axis(masked, best, 1)
        valid = np.isfinite(top)
        scores.append(top[valid])
        same.append(np.take_along_axis(chunk_same, best, 1)[valid])
        classes.append(np.broadcast_to(data.labels[chunk][:, None], top.shape)[valid])
    return np.concatenate(scores), np.concatenate(same), np.concatenate(classes)
