"""``SearchKind``: the two ways an index is searched, float embeddings or their binary codes.

The one place that says what a kind means: its name on the command line and in the HTTP API
(``"float"``, ``"binary"``), the metric of exact search (inner product, Hamming) and how a
faiss distance becomes a ``SearchResults`` score (as it is; ``1 - 2 * hamming / bits``).
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.search.binary import hamming_to_similarity
from retrieval.indexing.search.knn import Metric


class SearchKind(str, Enum):
    """Float (inner product of embeddings) or binary (Hamming distance of sign codes) search."""

    FLOAT = "float"
    BINARY = "binary"

    @classmethod
    def of(cls, value: str) -> SearchKind:
        """``value`` as a kind, or a DataError naming the two."""
        try:
            return cls(value)
        except ValueError:
            raise DataError(f"unknown search kind {value!r}; use 'float' or 'binary'") from None

    @property
    def metric(self) -> Metric:
        """The metric of exact search over stored vectors of this kind."""
        return "ip" if self is SearchKind.FLOAT else "hamming"

    def scores(self, distances: np.ndarray, bits: int) -> np.ndarray:
        """faiss distances of this kind as similarities (higher = better)."""
        return distances if self is SearchKind.FLOAT else hamming_to_similarity(distances, bits)


KindName = SearchKind | Literal["float", "binary"]
"""A kind as callers pass it: the enum, or its name (the HTTP API and the command line send names)."""
