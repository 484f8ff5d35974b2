"""What a fold's training hands back to the study, whichever way it trained (``StudyBackend``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retrieval.indexing.eval.metrics import RetrievalMetrics
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.study.backends.study_evaluation import EvalSet


@dataclass(frozen=True)
class FoldResult:
    fold: int
    val: RetrievalMetrics  # float validation metrics of the chosen (best) epoch
    best_epoch: int
    epochs: int  # epochs trained (fewer after early stopping)
    seconds: float
    untrained_val_map_at_r: float | None = None  # cached features: the freshly initialised head

    @property
    def val_map_at_r(self) -> float:
        return self.val.map_at_r

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "val": self.val.to_dict()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FoldResult:
        return cls(**{**values, "val": RetrievalMetrics.from_dict(values["val"])})


class StudyBackend(Protocol):
    """Trains one fold model: fine-tuning the whole network, or a head on cached features."""

    protocol: str
    test_set: EvalSet

    def fit(self, cfg: TrainConfig, fold: int, workdir: Path) -> FoldResult:
        """Train on the other folds, choose the best epoch on fold ``fold``; never touches the test split."""
        ...

    def fit_and_embed_test(self, cfg: TrainConfig, fold: int, workdir: Path) -> tuple[FoldResult, np.ndarray]:
        """``fit``, then the chosen model's test embeddings (rows of ``test_set``)."""
        ...
