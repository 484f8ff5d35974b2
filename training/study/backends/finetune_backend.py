"""Fold models of the full protocol: the ``Trainer`` fine-tunes the whole network on each fold.

Fold i is an ordinary run directory trained with ``data.val_fold = i`` of ``data.num_folds = k``
(``retrieval train --val-fold``), early-stopped and chosen on its validation fold, with the test
split never embedded (``Trainer(evaluate_test=False)``). A finished fold leaves
``fold_result.json``, so a rerun skips it; an unfinished one resumes from ``checkpoints/last.pt``.
Search folds then drop their checkpoints (only the validation numbers matter); final folds keep
``best.pt``, from which the test classes are embedded once.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from retrieval.indexing.common.atomic_write import atomic_write_text
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.eval.metrics import RetrievalMetrics
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.data_loaders import build_eval_loader
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset, label_index
from retrieval.training.model.device import resolve_device, resolve_precision
from retrieval.training.run.fitting.trainer import Trainer
from retrieval.training.run.inputs.embed import embed_loader
from retrieval.training.run.outputs.run_dir import RunPaths
from retrieval.training.run.outputs.run_model import load_run_model
from retrieval.training.study.backends.fold_result import FoldResult
from retrieval.training.study.backends.study_evaluation import EvalSet

RESULT_FILE = "fold_result.json"


class FineTuneBackend:
    protocol = "fine-tune"

    def __init__(self, test_records: Sequence[ImageRecord], folds: int, *, progress: bool) -> None:
        self.folds, self.progress = folds, progress
        self._test_records = list(test_records)
        self.test_set = EvalSet.from_records(self._test_records)

    def fit(self, cfg: TrainConfig, fold: int, workdir: Path) -> FoldResult:
        result = self._fit(cfg, fold, workdir)
        shutil.rmtree(RunPaths(workdir).checkpoints_dir, ignore_errors=True)  # a search fold needs no weights
        return result

    def fit_and_embed_test(self, cfg: TrainConfig, fold: int, workdir: Path) -> tuple[FoldResult, np.ndarray]:
        result = self._fit(cfg, fold, workdir)
        RunPaths(workdir).last_checkpoint.unlink(missing_ok=True)
        return result, self._embed_test(cfg, workdir)

    def fold_config(self, cfg: TrainConfig, fold: int) -> TrainConfig:
        data = cfg.data.model_copy(update={"val_fold": fold, "num_folds": self.folds})
        # a fold model is a trained epoch: the study compares losses, and the pretrained row is its own row
        trainer = cfg.trainer.model_copy(update={"evaluate_untrained_test": False, "select_reference": False})
        return cfg.model_copy(update={"data": data, "trainer": trainer})

    def _fit(self, cfg: TrainConfig, fold: int, workdir: Path) -> FoldResult:
        marker = workdir / RESULT_FILE
        if marker.is_file():
            return FoldResult.from_dict(json.loads(marker.read_text()))
        started = time.perf_counter()
        paths = RunPaths(workdir)
        trainer = Trainer(
            self.fold_config(cfg, fold),
            workdir,
            resume=paths.last_checkpoint.is_file(),
            progress=self.progress,
            evaluate_test=False,
        )
        trained = trainer.fit()
        result = FoldResult(
            fold=fold,
            val=RetrievalMetrics.from_dict(trained.best_val or {}),
            best_epoch=trained.best_epoch,
            epochs=trained.epochs_completed,
            seconds=time.perf_counter() - started,
        )
        atomic_write_text(marker, json.dumps(result.to_dict(), indent=2) + "\n")
        return result

    def _embed_test(self, cfg: TrainConfig, workdir: Path) -> np.ndarray:
        """The test classes through the fold's best checkpoint: the one time this model sees them."""
        device = resolve_device(cfg.trainer.device)
        _, _, model = load_run_model(workdir)
        model.to(device)
        if cfg.model.channels_last:
            model.to(memory_format=torch.channels_last)
        loader = build_eval_loader(self._test_records, label_index(self._test_records), cfg, device)
        precision = resolve_precision(device, cfg.trainer.amp)
        embeddings, _ = embed_loader(model, loader, device, precision, cfg.model.channels_last)
        dataset: ImageRecordDataset = loader.dataset  # type: ignore[assignment]
        if dataset.bad_mask().any():
            raise DataError(
                f"test images became unreadable during the study ({', '.join(map(str, dataset.bad_paths[:3]))}); "
                "restore them or run the study again"
            )
        return embeddings
