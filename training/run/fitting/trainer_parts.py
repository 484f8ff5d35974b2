"""The attributes the trainer's parts share (``Trainer`` sets them when it is built): the one place their
types are declared, so each part (``trainer_tests``, ``trainer_checkpoints``) reads them typed."""

from __future__ import annotations

from collections.abc import Callable

import torch

from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.run_data import RunData
from retrieval.training.losses.base import EmbeddingLoss
from retrieval.training.model.device import Precision
from retrieval.training.model.embedding_model import EmbeddingModel
from retrieval.training.run.fitting.distributed import DistContext
from retrieval.training.run.fitting.loop import EpochSelection, OptimizationStep
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix
from retrieval.training.run.inputs.split_inputs import SplitInputs
from retrieval.training.run.outputs.run_dir import RunPaths
from retrieval.training.run.outputs.tracking import Tracker


class TrainerParts:
    """What a run is being trained with: its config and directory, the model, loss and optimisation, the
    validation and test inputs, the epoch selection and the step count."""

    cfg: TrainConfig
    paths: RunPaths
    ctx: DistContext
    progress: bool
    device: torch.device
    precision: Precision
    tracker: Tracker
    data: RunData
    model: EmbeddingModel
    loss: EmbeddingLoss
    prefix: FrozenPrefix | None
    val_inputs: SplitInputs | None
    test_inputs: SplitInputs | None
    steps_per_epoch: int
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    optimization: OptimizationStep
    selection: EpochSelection
    global_step: int
    candidate_epoch: int | None
    stop_check: Callable[[], None]
