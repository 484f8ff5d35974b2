"""``DataLoader`` factories for training and evaluation.

Callers resolve ``data.sampler == "auto"`` with ``config.loss_and_sampler.sampler_kind`` and pass
``sampler_kind``. Worker processes get reproducible seeds: the loader's generator is
seeded from ``(trainer.seed, rank)``, and torch derives each worker's ``random``,
``numpy`` and ``torch`` seeds from it. Call ``set_loader_epoch(loader, epoch)`` before
every epoch, or every epoch repeats the same batch order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch.utils.data import DataLoader

from retrieval.indexing.data.records import ImageRecord
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.batch_sampler import (
    ClassBalancedBatchSampler,
    ShuffleBatchSampler,
    make_batch_sampler,
)
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset
from retrieval.training.data_pipeline.transforms import build_eval_transform, build_train_transform

SamplerKind = Literal["balanced", "shuffle"]


def build_train_loader(
    records: Sequence[ImageRecord],
    label_to_index: dict[str, int],
    cfg: TrainConfig,
    *,
    sampler_kind: SamplerKind,
    rank: int = 0,
    world_size: int = 1,
    device: torch.device | str = "cpu",
) -> DataLoader:
    """Augmented images in class-balanced (C x M) or shuffled batches of ``trainer.batch_size`` per rank."""
    dataset = ImageRecordDataset(records, label_to_index, build_train_transform(cfg.data, cfg.model.backbone))
    batch_sampler = train_batch_sampler(dataset.labels, label_to_index, cfg, sampler_kind, rank, world_size)
    workers = cfg.data.num_workers
    return DataLoader(
        dataset,
        batch_sampler=batch_sampler,
        num_workers=workers,
        pin_memory=torch.device(device).type == "cuda",
        persistent_workers=workers > 0,
        generator=torch.Generator().manual_seed(_loader_seed(cfg.trainer.seed, rank)),
    )


def build_eval_loader(
    records: Sequence[ImageRecord],
    label_to_index: dict[str, int],
    cfg: TrainConfig,
    device: torch.device | str = "cpu",
) -> DataLoader:
    """Eval-transformed images in record order, ``trainer.eval_batch_size`` per batch."""
    dataset = ImageRecordDataset(
        records, label_to_index, build_eval_transform(cfg.data, cfg.model.backbone), substitute=False
    )
    return DataLoader(
        dataset,
        batch_size=cfg.trainer.eval_batch_size,
        shuffle=False,
        num_workers=cfg.data.num_workers,
        pin_memory=torch.device(device).type == "cuda",
    )


def set_loader_epoch(loader: DataLoader, epoch: int) -> None:
    """Reseed the loader's sampler for ``epoch`` (no-op for loaders without one, e.g. eval)."""
    for sampler in (loader.batch_sampler, loader.sampler):
        set_epoch = getattr(sampler, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(epoch)


def train_batch_sampler(
    labels: Sequence[int],
    label_to_index: dict[str, int],
    cfg: TrainConfig,
    sampler_kind: SamplerKind,
    rank: int = 0,
    world_size: int = 1,
) -> ClassBalancedBatchSampler | ShuffleBatchSampler:
    """The training batches (of item positions in ``labels``): class-balanced C x M or shuffled;
    also used by ``retrieval study`` on cached features."""
    seed, batch_size = cfg.trainer.seed, cfg.trainer.batch_size
    if sampler_kind == "shuffle":
        return ShuffleBatchSampler(
            len(labels), batch_size=batch_size, seed=seed, rank=rank, world_size=world_size, drop_last=True
        )
    if sampler_kind != "balanced":
        raise ValueError(f"unknown sampler kind {sampler_kind!r}; known: 'balanced', 'shuffle'")
    return make_batch_sampler(
        batch_size,
        cfg.data.images_per_class,
        labels,
        batches_per_epoch=cfg.data.batches_per_epoch,
        seed=seed,
        rank=rank,
        world_size=world_size,
        class_names={index: label for label, index in label_to_index.items()},
        small_classes=cfg.data.small_classes,
    )


def _loader_seed(seed: int, rank: int) -> int:
    """A 63-bit seed that differs per rank, so ranks do not augment in lockstep."""
    return int(np.random.SeedSequence([seed, rank]).generate_state(2, dtype=np.uint64)[0] >> 1)
