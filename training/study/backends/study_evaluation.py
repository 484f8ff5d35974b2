"""Metrics of the study's models, all through ``evaluate_retrieval`` (the project's one protocol).

A fold's validation set is evaluated in float after every epoch of a search or final run; the
test set only once per final model. For the k fold models of one run, "separated" is each
model's metrics averaged over the folds, "concatenated" the metrics of their L2-normalised
embeddings joined and normalised again (``ensemble_model.join_embeddings``), each in float
(inner product) and binary (sign bits, Hamming).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.metrics import RetrievalMetrics, evaluate_retrieval
from retrieval.indexing.search.binary import binarize
from retrieval.training.model.ensemble_model import join_embeddings

KINDS = ("float", "binary")
REPORTED = ("map_at_r", "r_precision", "precision_at_1")


@dataclass(frozen=True)
class EvalSet:
    """Labels and query/gallery flags of a validation or test split, in embedding row order."""

    labels: np.ndarray
    is_query: np.ndarray
    is_gallery: np.ndarray

    @classmethod
    def from_records(cls, records: Sequence[ImageRecord]) -> EvalSet:
        return cls(
            np.array([record.label for record in records]),
            np.array([record.is_query for record in records], bool),
            np.array([record.is_gallery for record in records], bool),
        )

    @property
    def classes(self) -> list[str]:
        return sorted({str(label) for label in self.labels})


def metrics(embeddings: np.ndarray, eval_set: EvalSet, kind: str = "float") -> RetrievalMetrics:
    """MAP@R, R-precision, P@1 and Recall@K of float (inner product) or binary (Hamming) embeddings."""
    values = binarize(embeddings) if kind == "binary" else embeddings
    result = evaluate_retrieval(
        values,
        eval_set.labels,
        eval_set.is_query,
        eval_set.is_gallery,
        metric="hamming" if kind == "binary" else "ip",
        compute_nmi=False,
    )
    return result


def run_metrics(fold_embeddings: Sequence[np.ndarray], eval_set: EvalSet) -> dict[str, Any]:
    """Test metrics of one run's k fold models: ``{"folds": [...], "separated": ..., "concatenated": ...}``."""
    folds = [{kind: metrics(embeddings, eval_set, kind).to_dict() for kind in KINDS} for embeddings in fold_embeddings]
    separated = {
        kind: {name: float(np.mean([fold[kind][name] for fold in folds])) for name in REPORTED} for kind in KINDS
    }
    joined = join_embeddings(fold_embeddings)
    concatenated = {kind: metrics(joined, eval_set, kind).to_dict() for kind in KINDS}
    return {"folds": folds, "separated": separated, "concatenated": concatenated}
