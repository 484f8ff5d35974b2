"""The start-of-run summary: what a training run is about to do, logged before its progress bars.

``training_rows`` describes one run (device, split sizes, model, loss and miner, sampler, batches,
epochs, run directory, and for CLIP whether its text tower is exported); ``log_summary`` prints any rows as one aligned block. ``Trainer.fit`` logs
a run's rows, and ``training.ensemble`` logs its own rows (members, seeds) the same way before
its members' runs each log theirs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from retrieval.indexing.exported_model.text_side import TEXT_TOWERS
from retrieval.training.config.hub_access import has_tower_embedding, text_dropped_reason
from retrieval.training.config.train_config import LossConfig, TrainConfig
from retrieval.training.data_pipeline.run_data import RunData
from retrieval.training.losses import get_loss_spec
from retrieval.training.losses.params import merge_params
from retrieval.training.losses.registry import chosen_miner
from retrieval.training.model.device import Precision
from retrieval.training.run.measures.reference import reference_name

log = logging.getLogger(__name__)

Row = tuple[str, str]


@dataclass(frozen=True)
class RunSetup:
    """What the trainer resolved beyond the config: where it runs and how the batches come."""

    run_dir: Path
    device: torch.device
    precision: Precision
    sampler: str  # "balanced" or "shuffle" (data.sampler "auto" resolved by the loss)
    steps_per_epoch: int
    embedding_dim: int
    reference_dim: int | None = None  # epoch 0's embedding: the pooled features, reduced to at most embedding_dim
    world_size: int = 1
    resuming: bool = False


def log_summary(rows: Sequence[Row]) -> None:
    """The rows as one block, names aligned: ``device   cpu (float32)``."""
    width = max(len(name) for name, _ in rows)
    log.info("\n".join(f"{name:<{width}}  {text}" for name, text in rows))


def training_rows(cfg: TrainConfig, data: RunData, setup: RunSetup) -> list[Row]:
    """The summary of one training run."""
    resumed = " (resuming from checkpoints/last.pt)" if setup.resuming else ""
    training: list[Row] = (
        [("loss", _loss(cfg.loss)), ("batches", _batches(cfg, setup)), ("optimizer", _optimizer(cfg))]
        if cfg.trainer.epochs > 0
        else []  # --epochs 0: no step runs, so no loss, batches or optimizer to speak of
    )
    return [
        ("run", f"{setup.run_dir}{resumed}"),
        ("device", _device(setup)),
        ("data", f"{cfg.data.path}: {_splits(data)}{_excluded(cfg, data)}"),
        ("model", _model(cfg, setup)),
        *training,
        ("epochs", _epochs(cfg)),
        *([("text", _text(cfg))] if cfg.model.backbone in TEXT_TOWERS else []),
    ]


def _text(cfg: TrainConfig) -> str:
    """Whether the export will carry the CLIP text tower: why not, in ``model.json``'s own sentence."""
    return text_dropped_reason(cfg) or (
        f"the {cfg.model.backbone} text tower is exported beside the image tower (training-free: the image "
        "embedding is the tower's own, text and image queries share it)"
    )


def _device(setup: RunSetup) -> str:
    precision = setup.precision
    kind = f"{str(precision.dtype).removeprefix('torch.')} autocast" if precision.enabled else "float32"
    processes = f", {setup.world_size} processes" if setup.world_size > 1 else ""
    return f"{setup.device} ({kind}){processes}"


def _excluded(cfg: TrainConfig, data: RunData) -> str:
    if cfg.data.exclude is None:
        return ""
    return f"; {len(data.excluded)} images left out ({cfg.data.exclude}, listed in excluded.txt)"


def _splits(data: RunData) -> str:
    splits = data.splits
    counts = [
        f"{name} {len(classes)} classes / {len(records)} images"
        for name, classes, records in (
            ("train", splits.train_classes, splits.train),
            ("val", splits.val_classes, splits.val),
            ("test", splits.test_classes, splits.test),
        )
    ]
    grouped = len(splits.train_classes) != data.num_train_labels
    meta = f" (trained as {data.num_train_labels} meta-classes)" if grouped else ""
    return ", ".join(counts) + meta


def _model(cfg: TrainConfig, setup: RunSetup) -> str:
    weights = cfg.model.pretrained
    start = f"{weights} weights" if weights in ("imagenet", "torchvision") else f"weights {weights}"
    return (
        f"{cfg.model.backbone}, {start if weights else 'random initialisation'}, "
        f"{_embedding(cfg, setup)}, {cfg.data.image_size} px crops"
    )


def _embedding(cfg: TrainConfig, setup: RunSetup) -> str:
    """The size of the embedding the run's model will have: epoch 0's when no epoch trains."""
    starting = reference_name(cfg.model)
    if has_tower_embedding(cfg.model):  # epoch 0: the CLIP tower's own embedding, its size known from the file
        tower = "the image tower's own embedding"
        return tower if cfg.trainer.epochs == 0 else f"{setup.embedding_dim}-d embedding (epoch 0: {tower})"
    reference = setup.reference_dim
    if reference is None or reference == setup.embedding_dim:
        return f"{setup.embedding_dim}-d embedding"
    if cfg.trainer.epochs == 0:
        return f"{reference}-d embedding (the {starting} backbone's pooled features)"
    return f"{setup.embedding_dim}-d embedding (epoch 0, the {starting} backbone: {reference}-d)"


def _loss(loss: LossConfig) -> str:
    spec = get_loss_spec(loss.name)
    params = merge_params(spec.default_params, loss.params, f"loss {loss.name!r}")
    miner, _ = chosen_miner(spec, params, loss.miner or "default")
    shown = ", ".join(f"{key}={value}" for key, value in params.items())
    return f"{loss.name}({shown}), miner: {miner or 'none'}"


def _batches(cfg: TrainConfig, setup: RunSetup) -> str:
    size, per_class = cfg.trainer.batch_size, cfg.data.images_per_class
    kind = (
        f"class-balanced, {size // per_class} classes x {per_class} images"
        if setup.sampler == "balanced"
        else "shuffled"
    )
    total = f" per process, {size * setup.world_size} in all" if setup.world_size > 1 else ""
    return f"{size} images{total} ({kind}), {setup.steps_per_epoch} steps per epoch"


def _optimizer(cfg: TrainConfig) -> str:
    opt = cfg.optimizer
    head = f", new layers {opt.head_lr:g}" if opt.head_lr is not None and opt.head_lr != opt.lr else ""
    return f"{opt.name}, lr {opt.lr:g}{head}, {cfg.schedule.name} schedule"


def _epochs(cfg: TrainConfig) -> str:
    trainer = cfg.trainer
    if trainer.epochs == 0:
        return f"0 (no training: the {reference_name(cfg.model)} backbone is measured and is the run's model)"
    notes = []
    if trainer.warm_start_epochs:
        notes.append(f"{_count(trainer.warm_start_epochs, 'warm-start epoch')} training only the new layers")
    if trainer.patience is not None:
        notes.append(f"early stop after {_count(trainer.patience, 'epoch')} without a better validation MAP@R")
    return f"{trainer.epochs}" + (f" ({'; '.join(notes)})" if notes else "")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
