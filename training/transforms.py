"""Image transforms of the papers' standard protocol, built from ``DataConfig``.

Train: RandomResizedCrop(image_size, scale=train_crop_scale) + optional horizontal flip.
Eval: resize the shorter side to ``round(image_size * 256 / 224)`` and centre-crop
``image_size`` (256 -> 224 for the default size). Both end in ToTensor + ImageNet
Normalize. The eval transform is built *from* ``eval_preprocessing(cfg)``, the same
``Preprocessing`` the export writes into ``model.json``, so the ONNX side reproduces the
numbers torch saw during validation.

Rounding rules the ONNX side must copy (torchvision's): the longer side after resizing is
``int(resize * long / short)`` (truncated), and the crop offset is
``int(round((side - crop) / 2))``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from PIL import Image
from torchvision import transforms as T

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.model.manifest import Preprocessing
from retrieval.training.config import DataConfig

ImageTransform = Callable[[Image.Image], torch.Tensor]


def eval_preprocessing(cfg: DataConfig) -> Preprocessing:
    """The eval preprocessing for ``cfg``, as stored in ``model.json``.

    The resize keeps the ImageNet protocol's ratio (resize 256, crop 224).
    """
    return Preprocessing(resize=round(cfg.image_size * 256 / 224), crop=cfg.image_size)


def _normalize(preprocessing: Preprocessing) -> list[Callable]:
    return [T.ToTensor(), T.Normalize(mean=list(preprocessing.mean), std=list(preprocessing.std))]


def preprocessing_transform(preprocessing: Preprocessing) -> ImageTransform:
    """The torch transform that implements a ``Preprocessing`` (shorter-side resize, centre crop)."""
    return T.Compose(
        [
            T.Resize(preprocessing.resize, interpolation=T.InterpolationMode.BILINEAR, antialias=True),
            T.CenterCrop(preprocessing.crop),
            *_normalize(preprocessing),
        ]
    )


def build_eval_transform(cfg: DataConfig) -> ImageTransform:
    """Deterministic transform for validation, test and export parity checks."""
    return preprocessing_transform(eval_preprocessing(cfg))


def build_train_transform(cfg: DataConfig) -> ImageTransform:
    """Random crop (and flip) augmentation; mean/std are the same as the eval transform's."""
    low, high = cfg.train_crop_scale
    if not 0 < low <= high <= 1:
        raise ConfigError(f"data.train_crop_scale must be (low, high) with 0 < low <= high <= 1, got ({low}, {high})")
    steps: list[Callable] = [
        T.RandomResizedCrop(
            cfg.image_size,
            scale=(low, high),
            interpolation=T.InterpolationMode.BILINEAR,
            antialias=True,
        )
    ]
    if cfg.horizontal_flip:
        steps.append(T.RandomHorizontalFlip())
    return T.Compose(steps + _normalize(eval_preprocessing(cfg)))
