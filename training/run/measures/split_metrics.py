"""Retrieval metrics of a validation/test split's embeddings, as ``retrieval eval`` computes them.

Queries and gallery are the records' ``is_query`` / ``is_gallery`` flags, float embeddings are
searched by inner product and their sign bits by Hamming distance (``evaluate_retrieval``), and
images found unreadable while embedding are left out and counted. The trainer uses it for one
model, the ensemble for the members' joined embeddings. ``SplitMetrics`` is typed; dicts appear only
where it is written to JSON (``to_dict``, ``validation_dict``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.indexing.eval.metrics import RetrievalMetrics, evaluate_retrieval
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.knn import Metric
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset


@dataclass(frozen=True)
class SplitMetrics:
    float_metrics: RetrievalMetrics
    binary_metrics: RetrievalMetrics | None
    unreadable_images: int

    @property
    def map_at_r(self) -> float:
        """Float MAP@R, the number models are chosen by."""
        return self.float_metrics.map_at_r

    def to_dict(self) -> dict[str, Any]:
        """``{"float": {...}, "binary": {...}, "unreadable_images": n}`` (binary only where computed)."""
        result: dict[str, Any] = {"float": self.float_metrics.to_dict()}
        if self.binary_metrics is not None:
            result["binary"] = self.binary_metrics.to_dict()
        result["unreadable_images"] = self.unreadable_images
        return result

    def validation_dict(self) -> dict[str, Any]:
        """The float metrics with ``unreadable_images``: a ``val`` row of metrics.jsonl and checkpoints."""
        return {**self.float_metrics.to_dict(), "unreadable_images": self.unreadable_images}


def split_metrics(
    embeddings: np.ndarray,
    labels: np.ndarray,
    dataset: ImageRecordDataset,
    *,
    kinds: tuple[str, ...],
    ks: Sequence[int] | None,
    compute_nmi: bool,
) -> SplitMetrics:
    """Float metrics, and binary ones when ``kinds`` holds "binary", of the readable rows of ``dataset``."""
    keep = ~dataset.bad_mask()
    is_query = np.array([record.is_query for record in dataset.records], bool)[keep]
    is_gallery = np.array([record.is_gallery for record in dataset.records], bool)[keep]
    labels = np.asarray(labels)[keep]

    def measure(values: np.ndarray, metric: Metric) -> RetrievalMetrics:
        return evaluate_retrieval(values, labels, is_query, is_gallery, ks=ks, metric=metric, compute_nmi=compute_nmi)

    float_metrics = measure(embeddings[keep], "ip")
    binary_metrics = measure(binarize(embeddings[keep]), "hamming") if "binary" in kinds else None
    return SplitMetrics(float_metrics, binary_metrics, int((~keep).sum()))
