"""Retrieval metrics of a validation/test split's embeddings, as ``retrieval eval`` computes them.

Queries and gallery are the records' ``is_query`` / ``is_gallery`` flags, float embeddings are
searched by inner product and their sign bits by Hamming distance (``evaluate_retrieval``), and
images found unreadable while embedding are left out and counted. The trainer uses it for one
model, the ensemble for the members' joined embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.indexing.eval.metrics import evaluate_retrieval
from retrieval.indexing.search.binary import binarize
from retrieval.indexing.search.knn import Metric
from retrieval.training.data.image_dataset import ImageRecordDataset


def split_metrics(
    embeddings: np.ndarray,
    labels: np.ndarray,
    dataset: ImageRecordDataset,
    *,
    kinds: tuple[str, ...],
    ks: Sequence[int] | None,
    compute_nmi: bool,
) -> dict[str, Any]:
    """``{kind: metrics dict for kind in kinds, "unreadable_images": n}``; kinds are "float" and "binary"."""
    keep = ~dataset.bad_mask()
    is_query = np.array([record.is_query for record in dataset.records], bool)[keep]
    is_gallery = np.array([record.is_gallery for record in dataset.records], bool)[keep]
    vectors: dict[str, tuple[np.ndarray, Metric]] = {
        "float": (embeddings[keep], "ip"),
        "binary": (binarize(embeddings[keep]), "hamming"),
    }
    result: dict[str, Any] = {}
    for kind in kinds:
        values, metric = vectors[kind]
        result[kind] = evaluate_retrieval(
            values, labels[keep], is_query, is_gallery, ks=ks, metric=metric, compute_nmi=compute_nmi
        ).to_dict()
    result["unreadable_images"] = int((~keep).sum())
    return result
