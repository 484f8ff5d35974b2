"""Frozen-stage activations of K augmented views per training image, made once (``trainer.cached_views``).

With ``model.frozen_stages`` the first stages never change, so what they make of an augmented image
can be kept: each training image is decoded once, augmented K times (the training transform, drawn
from the run's seed) and run through the frozen stages; every epoch then trains the rest of the
network on one of the K views of each image, each view once per K epochs, in a seeded order. No
image is decoded and no frozen stage runs after the cache is made.

The activations are kept in float16 (half the memory; the rounding moves the loss by about 1e-3,
tests/test_activation_cache.py). ``cache_bytes`` estimates the size before anything is computed, so
a cache that would not fit ``trainer.cache_max_gb`` is refused with the settings that shrink it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.data_pipeline.image_dataset import ImageRecordDataset
from retrieval.training.data_pipeline.transforms import ImageTransform

STORE_DTYPE = torch.float16
_IMAGES_PER_BATCH = 64  # views run through the frozen stages at once


def repeated_transform(transform: ImageTransform, views: int) -> Callable:
    """``image -> (views, 3, H, W)``: ``views`` independent draws of the (random) ``transform``."""
    return lambda image: torch.stack([transform(image) for _ in range(views)])


class ActivationCache:
    """``activations[i, v]``: view ``v`` of training image ``i`` after the frozen stages."""

    def __init__(self, activations: torch.Tensor, seed: int) -> None:
        self.activations = activations
        self.views = int(activations.shape[1])
        self._offsets = np.random.default_rng(seed).integers(0, self.views, len(activations))

    @classmethod
    def build(
        cls,
        dataset: ImageRecordDataset,
        prefix: Callable[[torch.Tensor], torch.Tensor],
        *,
        views: int,
        seed: int,
        workers: int,
        progress: bool,
    ) -> ActivationCache:
        """Run every image of ``dataset`` (whose transform makes ``views`` views, ``repeated_transform``)
        through ``prefix``; workers decode and augment, seeded by ``seed``."""
        loader = DataLoader(
            dataset,
            batch_size=max(1, _IMAGES_PER_BATCH // views),
            num_workers=workers,
            generator=torch.Generator().manual_seed(seed),
        )
        parts = []
        bar = tqdm(total=len(dataset), desc=f"caching {views} views per image", unit="img", disable=not progress)
        for images, _, _ in loader:
            batch = prefix(images.flatten(0, 1))
            parts.append(batch.to("cpu", STORE_DTYPE).reshape(len(images), views, *batch.shape[1:]))
            bar.update(len(images))
        bar.close()
        return cls(torch.cat(parts), seed)

    def batch(self, rows: Sequence[int], epoch: int) -> torch.Tensor:
        """float32 activations of ``rows``: each image's view for ``epoch`` (every view once per K epochs)."""
        index = torch.as_tensor(np.asarray(rows), dtype=torch.long)
        view = torch.as_tensor((self._offsets[index.numpy()] + epoch) % self.views, dtype=torch.long)
        return self.activations[index, view].float()

    @property
    def nbytes(self) -> int:
        return self.activations.numel() * self.activations.element_size()


def cache_bytes(images: int, views: int, activation_shape: Sequence[int]) -> int:
    """Bytes the cache of ``images`` x ``views`` activations of ``activation_shape`` (C, h, w) will take."""
    return images * views * int(np.prod(activation_shape)) * torch.finfo(STORE_DTYPE).bits // 8


def check_cache_size(images: int, views: int, activation_shape: Sequence[int], limit_gb: float) -> int:
    """The cache's size in bytes, or a ConfigError that says how to shrink it."""
    size = cache_bytes(images, views, activation_shape)
    if size > limit_gb * 1e9:
        raise ConfigError(
            f"the activation cache would take {size / 1e9:.1f} GB ({images} images x {views} views x "
            f"{tuple(activation_shape)} float16), over trainer.cache_max_gb = {limit_gb:g}: lower "
            "trainer.cached_views, raise model.frozen_stages (later stages are smaller), lower data.image_size, "
            "or raise trainer.cache_max_gb if the memory is there"
        )
    return size
