"""The layout of a training run directory (written by the trainer, read by export and eval).

    run_dir/
      config.yaml            resolved TrainConfig, ``model_dump(mode="json")`` as YAML
      metrics.jsonl          one JSON object per epoch
      checkpoints/best.pt    checkpoint with the best validation MAP@R
      checkpoints/last.pt    checkpoint after the last completed epoch
      curves.png             training curves
      test_metrics.json      metrics on the test split
      excluded.txt           with ``data.exclude``: the images the run left out, one path a line
      export/                model.onnx + model.json (``retrieval export``)
      selection/             with ``trainer.final_fit``: the class-disjoint fit that chose the epochs (a run
                             directory itself); the run's own model is then retrained on every class

An ensemble run (``retrieval train --ensemble L``, ``training.ensemble``) holds the base
``config.yaml``, ``ensemble.json`` (the member count), ``members/0..L-1/`` (each a run directory
as above), ``ensemble_metrics.json`` (the joined embedding's metrics) and ``export/``.

A checkpoint is a plain dict (``Checkpoint``) of tensors and Python primitives, so it loads
with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import torch
from pydantic import ValidationError

from retrieval.indexing.common.artifact_names import (
    ENSEMBLE_MEMBERS_SUBDIR,
    RUN_BEST_CHECKPOINT_NAME,
    RUN_CHECKPOINTS_SUBDIR,
    RUN_CONFIG_NAME,
    RUN_EXPORT_SUBDIR,
)
from retrieval.indexing.common.atomic_write import atomic_write_text, atomic_write_with
from retrieval.indexing.common.errors import ConfigError, RetrievalError
from retrieval.training.config.config_checks import CLI_SPELLING, check_run_dir
from retrieval.training.config.train_config import TrainConfig, config_yaml, describe_validation_error, read_yaml


class Checkpoint(TypedDict):
    model: dict[str, torch.Tensor]
    model_config: dict[str, Any]  # the model section this state dict fits (epoch 0, the reference, has its own)
    loss: dict[str, Any]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    scaler: dict[str, Any] | None
    epoch: int  # completed epochs
    global_step: int
    world_size: int  # processes that trained it (a resume may use another number)
    steps_per_epoch: int  # of one rank; the schedule follows epochs when a resume changes it
    best_map_at_r: float
    best_epoch: int
    stale_epochs: int  # epochs since the best one (early stopping)
    val_metrics: dict[str, Any]
    val_query_ap: torch.Tensor | None  # MAP@R's per-query validation term (the verdict's interval)
    num_classes: int
    config: dict[str, Any]  # resolved TrainConfig, model_dump(mode="json")
    loss_name: str
    training_classes: list[str]  # fitted + validation classes (export records them in model.json)


@dataclass(frozen=True)
class RunPaths:
    run_dir: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_dir", Path(self.run_dir))

    @property
    def config(self) -> Path:
        return self.run_dir / RUN_CONFIG_NAME

    @property
    def metrics(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    @property
    def checkpoints_dir(self) -> Path:
        return self.run_dir / RUN_CHECKPOINTS_SUBDIR

    @property
    def best_checkpoint(self) -> Path:
        return self.checkpoints_dir / RUN_BEST_CHECKPOINT_NAME

    @property
    def last_checkpoint(self) -> Path:
        return self.checkpoints_dir / "last.pt"

    @property
    def reference_checkpoint(self) -> Path:
        """Epoch 0: the starting backbone as the reference row defines it (``training.run.reference``)."""
        return self.checkpoints_dir / "reference.pt"

    @property
    def whitened_reference_checkpoint(self) -> Path:
        """The reference with the whitening stage fitted on it: the "pretrained + whitening" row."""
        return self.checkpoints_dir / "reference_whitened.pt"

    @property
    def whitening_report(self) -> Path:
        """What the whitening stage fitted, read and chose (``training.run.whitening_stage``)."""
        return self.run_dir / "whitening.json"

    @property
    def curves(self) -> Path:
        return self.run_dir / "curves.png"

    @property
    def test_metrics(self) -> Path:
        return self.run_dir / "test_metrics.json"

    @property
    def excluded(self) -> Path:
        """``data.exclude``: the images the run left out."""
        return self.run_dir / "excluded.txt"

    @property
    def export_dir(self) -> Path:
        return self.run_dir / RUN_EXPORT_SUBDIR

    @property
    def selection_dir(self) -> Path:
        """``trainer.final_fit``: the class-disjoint fit that chose the number of epochs."""
        return self.run_dir / "selection"

    @property
    def ensemble_spec(self) -> Path:
        return self.run_dir / "ensemble.json"

    @property
    def ensemble_metrics(self) -> Path:
        return self.run_dir / "ensemble_metrics.json"

    @property
    def members_dir(self) -> Path:
        return self.run_dir / ENSEMBLE_MEMBERS_SUBDIR

    def member_dir(self, index: int) -> Path:
        return self.members_dir / str(index)


def write_run_config(run_dir: Path, config: TrainConfig) -> Path:
    """Write ``config.yaml`` atomically; returns its path."""
    path = RunPaths(run_dir).config
    atomic_write_text(path, config_yaml(config))
    return path


def load_run_config(run_dir: Path) -> TrainConfig:
    """Read the resolved config of a run; ConfigError if it is missing or invalid."""
    path = RunPaths(run_dir).config
    if not path.is_file():
        raise ConfigError(f"{path} does not exist; pass a run directory written by `retrieval train`")
    try:
        return TrainConfig.model_validate(read_yaml(path))
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, str(path))) from None


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """torch.save to a temporary file, then rename: a crash never leaves a half-written .pt."""
    atomic_write_with(Path(path), lambda tmp: torch.save(checkpoint, tmp))


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint onto the CPU; RetrievalError if it is missing, corrupt or not a dict."""
    path = Path(path)
    if not path.is_file():
        raise RetrievalError(f"checkpoint {path} does not exist; train the run first or pick another checkpoint")
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises RuntimeError, UnpicklingError, EOFError, ... on bad files
        raise RetrievalError(
            f"checkpoint {path} cannot be read ({type(error).__name__}); it is corrupt, not a torch checkpoint, "
            "or holds objects other than tensors and plain Python values"
        ) from None
    if not isinstance(loaded, dict):
        raise RetrievalError(f"checkpoint {path} holds a {type(loaded).__name__}, expected a dict with a 'model' key")
    return loaded


RUN_ARTIFACTS = (
    "config.yaml",
    "metrics.jsonl",
    "curves.png",
    "test_metrics.json",
    "excluded.txt",
    "whitening.json",
    "untrained_test_metrics.json",
    "ensemble.json",
    "ensemble_metrics.json",
)


def claim_run_dir(run_dir: Path, *, resume: bool, overwrite: bool, spelling: tuple[str, str] = CLI_SPELLING) -> None:
    """Refuse to train into a directory that already holds a run, unless resuming or replacing it.

    ``overwrite`` removes the previous run's artifacts (config, logs, checkpoints, ensemble members, export) and
    nothing else, so a run directory placed inside a user's folder cannot take other files with it.
    """
    paths = RunPaths(run_dir)
    if not check_run_dir(paths.run_dir, resume=resume, overwrite=overwrite, spelling=spelling):
        return
    for name in RUN_ARTIFACTS:
        (paths.run_dir / name).unlink(missing_ok=True)
    for folder in (paths.checkpoints_dir, paths.export_dir, paths.members_dir, paths.selection_dir):
        shutil.rmtree(folder, ignore_errors=True)
