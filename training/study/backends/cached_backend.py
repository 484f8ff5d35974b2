"""Fold models of ``--cached-features``: a head trained on frozen, cached backbone features."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.indexing.data.records import ImageRecord
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.study.backends.cached_features import FeatureSet, load_or_extract
from retrieval.training.study.backends.fold_result import FoldResult
from retrieval.training.study.backends.folds import fold_split
from retrieval.training.study.backends.head_training import HeadFit, embed_features, fit_head, restore_head
from retrieval.training.study.backends.study_evaluation import EvalSet


class CachedBackend:
    protocol = "cached-features"

    def __init__(
        self, records: Sequence[ImageRecord], test_records: Sequence[ImageRecord], folds: int, cache_dir: Path
    ):
        """``records``: every record (training pool and test); features are embedded on first use per backbone."""
        self.records, self.folds, self.cache_dir = list(records), folds, cache_dir
        self._test_records = list(test_records)
        self._features: dict[tuple, FeatureSet] = {}
        self.test_set = EvalSet.from_records(self._test_records)

    def features(self, cfg: TrainConfig) -> FeatureSet:
        """The features of every record for ``cfg``'s backbone, weights, image size and pooling."""
        key = (cfg.model.backbone, cfg.model.pretrained, cfg.data.image_size, cfg.model.pooling)
        if key not in self._features:
            self._features[key] = load_or_extract(cfg, self.records, self.cache_dir)
        return self._features[key]

    def fit(self, cfg: TrainConfig, fold: int, workdir: Path) -> FoldResult:
        return self._fit(cfg, fold)[0]

    def fit_and_embed_test(self, cfg: TrainConfig, fold: int, workdir: Path) -> tuple[FoldResult, np.ndarray]:
        result, fit = self._fit(cfg, fold)
        features = self.features(cfg)
        head = restore_head(cfg.model, features.dim, fit)
        return result, embed_features(head, features.features[features.rows(self._test_records)])

    def _fit(self, cfg: TrainConfig, fold: int) -> tuple[FoldResult, HeadFit]:
        started = time.perf_counter()
        features = self.features(cfg)
        split = fold_split(features.records, fold, self.folds)
        fit = fit_head(
            cfg,
            features.features[features.rows(split.train)],
            [record.label for record in split.train],
            features.features[features.rows(split.val)],
            EvalSet.from_records(split.val),
        )
        result = FoldResult(
            fold=fold,
            val=fit.val,
            best_epoch=fit.best_epoch,
            epochs=fit.epochs,
            seconds=time.perf_counter() - started,
            untrained_val_map_at_r=fit.untrained_val.map_at_r,
        )
        return result, fit
