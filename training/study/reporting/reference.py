"""The study's pretrained reference row, from the cached pooled features (``training.reference``).

As in the Reality Check's tables, the backbone's own pooled features are reduced to the compared
embedding size with the project's one reference reduction (``training.reference.fit_reduction``:
centred on the training mean, PCA fitted on training-class images where the features are wider):
d dimensions for "separated", k x d for "concatenated". The features come from the study's cache
(``cached_features``), so the row costs no extra pass over the images.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval.indexing.data.records import ImageRecord
from retrieval.training.run.measures.reference import fit_reduction, fit_sample
from retrieval.training.study.backends.cached_features import FeatureSet
from retrieval.training.study.backends.study_evaluation import KINDS, EvalSet, metrics


def reference_metrics(
    features: FeatureSet,
    train_records: Sequence[ImageRecord],
    test_records: Sequence[ImageRecord],
    *,
    embedding_dim: int,
    folds: int,
) -> dict[str, Any]:
    """``{"separated": {kind: metrics}, "concatenated": {kind: metrics}, "dims": {...}, "feature_dim": F}``."""
    train = features.features[features.rows(fit_sample(train_records))]
    test = features.features[features.rows(test_records)]
    test_set = EvalSet.from_records(test_records)
    result: dict[str, Any] = {"dims": {}, "feature_dim": features.dim}
    for mode, dim in (("separated", embedding_dim), ("concatenated", folds * embedding_dim)):
        reduction = fit_reduction(train, dim)
        result["dims"][mode] = reduction.dim
        reduced = reduction.apply(test)
        result[mode] = {kind: metrics(reduced, test_set, kind).to_dict() for kind in KINDS}
    return result
