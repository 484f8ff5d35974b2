"""Where each training step's inputs come from: images, images through frozen stages, or the cache.

- ``ImageBatches``: augmented images from the DataLoader; the whole network trains on them.
- ``PrefixBatches`` (``model.frozen_stages``): the same images, run through the frozen stages without
  gradients (``FrozenPrefix``); the step trains the rest from those activations.
- ``CachedBatches`` (``model.frozen_stages`` and ``trainer.cached_views``): activations of K
  augmented views per image made once (``ActivationCache``); no image is decoded after that.

Each yields ``(inputs, labels)`` for ``model(inputs, start_stage)``, ``steps_per_epoch`` times.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import torch
from torch.utils.data import DataLoader

from retrieval.training.data_pipeline.batch_sampler import ClassBalancedBatchSampler, ShuffleBatchSampler
from retrieval.training.data_pipeline.data_loaders import set_loader_epoch
from retrieval.training.run.fitting.loop import batches_of
from retrieval.training.run.inputs.activation_cache import ActivationCache
from retrieval.training.run.inputs.frozen_prefix import FrozenPrefix


class TrainBatches(Protocol):
    start_stage: int
    steps_per_epoch: int

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The ``(inputs, labels)`` of epoch ``epoch`` (1-based), ``steps_per_epoch`` of them."""
        ...


class ImageBatches:
    start_stage = 0

    def __init__(self, loader: DataLoader, steps_per_epoch: int) -> None:
        self.loader, self.steps_per_epoch = loader, steps_per_epoch

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        set_loader_epoch(self.loader, epoch)
        for images, labels, _ in batches_of(self.loader, self.steps_per_epoch):
            yield images, labels


class PrefixBatches(ImageBatches):
    def __init__(self, loader: DataLoader, steps_per_epoch: int, prefix: FrozenPrefix) -> None:
        super().__init__(loader, steps_per_epoch)
        self.prefix, self.start_stage = prefix, prefix.model.frozen_stages

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels in super().epoch(epoch):
            yield self.prefix(images), labels


class CachedBatches:
    """``cache`` is made before the first trained epoch (``Trainer._prepare_inputs``), not at construction."""

    def __init__(
        self,
        cache: ActivationCache | None,
        labels: Sequence[int],
        sampler: ClassBalancedBatchSampler | ShuffleBatchSampler,
        steps_per_epoch: int,
        start_stage: int,
    ) -> None:
        self.cache, self.sampler = cache, sampler
        self.labels = torch.as_tensor(list(labels), dtype=torch.long)
        self.steps_per_epoch, self.start_stage = steps_per_epoch, start_stage

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self.cache is None:
            raise RuntimeError("the activation cache was not made before the first epoch")
        self.sampler.set_epoch(epoch)
        for rows in batches_of(self.sampler, self.steps_per_epoch):
            yield self.cache.batch(rows, epoch), self.labels[torch.as_tensor(rows, dtype=torch.long)]
