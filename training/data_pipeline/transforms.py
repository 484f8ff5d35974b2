"""Image transforms of the papers' standard protocol, built from ``DataConfig``.

Train: RandomResizedCrop(image_size, scale=train_crop_scale) + optional colour jitter + optional horizontal flip.
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
from retrieval.indexing.exported_model.model_manifest import Preprocessing
from retrieval.training.config.train_config import DataConfig
from retrieval.training.model.trunks.backbones import get_backbone
from retrieval.training.model.trunks.timm_trunks import Normalization

ImageTransform = Callable[[Image.Image], torch.Tensor]


def eval_preprocessing(cfg: DataConfig, backbone: str | None = None) -> Preprocessing:
    """The eval preprocessing for ``cfg``, as stored in ``model.json``.

    The resize keeps the ImageNet protocol's ratio (resize 256, crop 224). Mean and std are the
    ones the backbone's pretrained weights expect (e.g. 0.5/0.5 for TensorFlow's EfficientNet-Lite,
    timm's pretrained config for ``timm:NAME``); ImageNet's when no backbone is named.
    """
    norm = get_backbone(backbone).normalization if backbone else Normalization()
    return Preprocessing(resize=round(cfg.image_size * 256 / 224), crop=cfg.image_size, mean=norm.mean, std=norm.std)


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


def build_eval_transform(cfg: DataConfig, backbone: str | None = None) -> ImageTransform:
    """Deterministic transform for validation, test and export parity checks."""
    return preprocessing_transform(eval_preprocessing(cfg, backbone))


def build_train_transform(cfg: DataConfig, backbone: str | None = None) -> ImageTransform:
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
    if cfg.color_jitter:
        strength = cfg.color_jitter
        steps.append(T.ColorJitter(brightness=strength, contrast=strength, saturation=strength, hue=strength / 2))
    if cfg.horizontal_flip:
        steps.append(T.RandomHorizontalFlip())
    return T.Compose(steps + _normalize(eval_preprocessing(cfg, backbone)))
