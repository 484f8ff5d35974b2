"""Examples -> search: each strategy says which vectors are searched for candidates and, where the index's
own score is not the answer, how a candidate is scored from its similarities to the examples.

- ``average_vector`` (Qdrant's): one vector, ``avg(positive) + (avg(positive) - avg(negative))``.
- ``best_score`` (Qdrant's): every positive searched; a candidate closer to a positive than to any negative
  scores ``sigmoid(best positive similarity)``, otherwise ``-sigmoid(best negative similarity)`` (Qdrant's
  fast sigmoid ``(x / (1 + |x|) + 1) / 2``).

Ours that were measured (bench/bench_examples.py: Rocchio with a weight chosen on validation classes, and
others on the validation classes) did not beat ``average_vector`` on the test classes, so none is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.common.registry import Registry

MAX_EXAMPLES = 100
"""The most positive and negative examples one search takes (more is refused in one sentence)."""
NO_POSITIVE = "a search by examples needs at least one positive example."


@dataclass(frozen=True)
class Examples:
    """Positive and negative example vectors, (p, d) and (n, d) float32; at least one positive."""

    positive: np.ndarray
    negative: np.ndarray

    @classmethod
    def of(cls, positive: np.ndarray, negative: np.ndarray | None = None) -> Examples:
        good = np.atleast_2d(np.asarray(positive, dtype=np.float32))
        if good.size == 0:
            raise DataError(NO_POSITIVE)
        if len(good) + (0 if negative is None else len(np.atleast_2d(negative))) > MAX_EXAMPLES:
            raise DataError(
                f"a search by examples takes at most {MAX_EXAMPLES} examples, positive and negative together."
            )
        bad = np.zeros((0, good.shape[1]), np.float32) if negative is None else np.asarray(negative, np.float32)
        bad = bad.reshape(-1, good.shape[1]) if bad.size else np.zeros((0, good.shape[1]), np.float32)
        return cls(good, bad)


@dataclass(frozen=True)
class Strategy:
    """How examples become the searched vectors: ``vector`` makes one, or (None) every positive is searched
    and the candidates are re-scored by ``score``."""

    name: str
    vector: Callable[[Examples], np.ndarray] | None = None

    @property
    def rescores(self) -> bool:
        return self.vector is None

    def vectors(self, examples: Examples) -> np.ndarray:
        """The (m, d) vectors searched for candidates."""
        if self.vector is None:
            return examples.positive
        return np.asarray(self.vector(examples), dtype=np.float32)[None, :]

    def candidate_vector(self, examples: Examples) -> np.ndarray:
        """One unit vector whose neighbours are the candidates: the strategy's own, or (re-scoring
        strategies) the positives' mean."""
        vector = self.vectors(examples)[0] if not self.rescores else examples.positive.mean(axis=0)
        norm = float(np.linalg.norm(vector))
        return (vector / norm if norm > 0 else vector).astype(np.float32)

    def score(self, positive_sims: np.ndarray, negative_sims: np.ndarray) -> np.ndarray:
        """(c,) scores of candidates from their (c, p) and (c, n) similarities to the examples."""
        return best_score(positive_sims, negative_sims)


def average_vector(examples: Examples) -> np.ndarray:
    """Qdrant's ``average_vector``: ``avg(positive) + (avg(positive) - avg(negative))``."""
    mean = examples.positive.mean(axis=0)
    return mean if not len(examples.negative) else mean + (mean - examples.negative.mean(axis=0))


def best_score(positive_sims: np.ndarray, negative_sims: np.ndarray) -> np.ndarray:
    """Qdrant's ``best_score``: ``sigmoid(best positive)`` where it beats the best negative, else
    ``-sigmoid(best negative)`` (a candidate near a negative ranks below every one nearer a positive)."""
    best_positive = np.max(positive_sims, axis=1)
    if negative_sims.size == 0:
        return _sigmoid(best_positive)
    best_negative = np.max(negative_sims, axis=1)
    return np.where(best_positive > best_negative, _sigmoid(best_positive), -_sigmoid(best_negative))


def _sigmoid(values: np.ndarray) -> np.ndarray:
    """Qdrant's ``scaled_fast_sigmoid``: ``(x / (1 + |x|) + 1) / 2``, in (0, 1) and increasing."""
    x = np.asarray(values, dtype=np.float64)
    return (0.5 * (x / (1.0 + np.abs(x)) + 1.0)).astype(np.float32)


STRATEGIES: Registry[Strategy] = Registry("strategy", "strategies", ordered=True, error=DataError)
for _strategy in (Strategy("average_vector", average_vector), Strategy("best_score")):
    STRATEGIES.register(_strategy.name, _strategy)
