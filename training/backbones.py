"""Backbone registry: a torchvision model name -> (feature extractor, number of output channels).

Each builder creates the torchvision model with random weights (``weights=None``) and keeps
only its convolutional trunk: the extractor maps images (B, 3, H, W) to a feature map
(B, C, h, w); pooling and the embedding head live in ``embedding_model``. The extractor's
``state_dict`` keys are the torchvision keys unchanged (``conv1.weight``, ``features.0.0.weight``),
so a torchvision ImageNet state dict loads into it after dropping the classifier keys
(see ``pretrained``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torchvision
from torch import nn

from retrieval.indexing.common.errors import ConfigError

BackboneBuilder = Callable[[], tuple[nn.Module, int]]

# torchvision state-dict prefixes of the removed classifiers, per family (ignored when loading)
CLASSIFIER_PREFIXES = ("fc.", "classifier.")


def _resnet(name: str) -> BackboneBuilder:
    def build() -> tuple[nn.Module, int]:
        model = torchvision.models.get_model(name, weights=None)
        trunk = OrderedDict((key, child) for key, child in model.named_children() if key not in ("avgpool", "fc"))
        return nn.Sequential(trunk), model.fc.in_features

    return build


def _densenet(name: str) -> BackboneBuilder:
    def build() -> tuple[nn.Module, int]:
        model = torchvision.models.get_model(name, weights=None)
        # torchvision's DenseNet.forward applies ReLU after `features` (which ends with norm5)
        trunk = nn.Sequential(OrderedDict(features=model.features, relu=nn.ReLU(inplace=False)))
        return trunk, model.classifier.in_features

    return build


def _features_trunk(name: str) -> BackboneBuilder:
    """MobileNetV3 / EfficientNet: ``model.features`` is the whole convolutional trunk."""

    def build() -> tuple[nn.Module, int]:
        model = torchvision.models.get_model(name, weights=None)
        last_conv = model.features[-1][0]
        return nn.Sequential(OrderedDict(features=model.features)), last_conv.out_channels

    return build


BACKBONES: dict[str, BackboneBuilder] = {
    "resnet18": _resnet("resnet18"),
    "resnet34": _resnet("resnet34"),
    "resnet50": _resnet("resnet50"),
    "resnet101": _resnet("resnet101"),
    "densenet121": _densenet("densenet121"),
    "densenet169": _densenet("densenet169"),
    "mobilenet_v3_small": _features_trunk("mobilenet_v3_small"),
    "mobilenet_v3_large": _features_trunk("mobilenet_v3_large"),
    "efficientnet_b0": _features_trunk("efficientnet_b0"),
}


def known_backbones() -> list[str]:
    return sorted(BACKBONES)


def build_backbone(name: str) -> tuple[nn.Module, int]:
    """Return (feature extractor with random weights, feature channels) for a registered name."""
    try:
        builder = BACKBONES[name]
    except KeyError:
        raise ConfigError(
            f"unknown backbone {name!r}; known backbones: {', '.join(known_backbones())}"
        ) from None
    return builder()


def torchvision_weights_url(name: str) -> str:
    """URL of the default torchvision ImageNet weights of a registered backbone (never fetched here)."""
    if name not in BACKBONES:
        build_backbone(name)  # raises the ConfigError listing the known names
    return torchvision.models.get_model_weights(name).DEFAULT.url
