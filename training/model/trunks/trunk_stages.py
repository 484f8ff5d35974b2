"""A backbone trunk as a sequence of stages, so its first stages can be frozen and run apart.

Running the stages in order is exactly the trunk's forward pass (tests/test_trunk_stages.py). The
stages are views over the trunk's own modules: nothing is copied and the state-dict keys stay the
trunk's, so checkpoints and pretrained weights load as before.

How a trunk divides:
- timm EfficientNet-style models (``conv_stem``, ``bn1``, ``blocks``, ``conv_head``, ``bn2``; the
  EfficientNet-Lite backbones): the stem, each block stage, the head convolution. Lite0: 9 stages,
  the stem and blocks 0-2 (4 stages) run at 1/2 to 1/8 of the input resolution.
- torchvision ResNets: the stem (conv1, bn1, relu, maxpool), layer1 ... layer4.
- torchvision MobileNetV3 / EfficientNet (``features``) and DenseNet (``features`` + ``relu``): the
  children of ``features`` (then the final ReLU of DenseNet).
- timm vision transformers (DINOv2, CLIP, SigLIP, ``timm:vit_*``): the embedding, each transformer
  block, the final norm (``vit_trunks.vit_stages``); ViT-S/14 and ViT-B: 14 stages.
"""

from __future__ import annotations

from torch import nn

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.model.trunks.vit_trunks import is_token_trunk, vit_stages

_EFFICIENTNET_PARTS = ("conv_stem", "bn1", "blocks", "conv_head", "bn2")
_RESNET_STEM = ("conv1", "bn1", "relu", "maxpool")


def trunk_stages(trunk: nn.Module) -> list[nn.Module]:
    """The trunk's stages in forward order (see the module docstring); ConfigError for an unknown layout."""
    if is_token_trunk(trunk):
        return vit_stages(trunk)
    children = dict(trunk.named_children())
    if all(name in children for name in _EFFICIENTNET_PARTS):
        blocks = children["blocks"]
        assert isinstance(blocks, nn.Sequential)
        stem = nn.Sequential(children["conv_stem"], children["bn1"])
        return [stem, *blocks, nn.Sequential(children["conv_head"], children["bn2"])]
    if all(name in children for name in _RESNET_STEM) and "layer1" in children:
        stem = nn.Sequential(*(children[name] for name in _RESNET_STEM))
        return [stem, *(module for name, module in children.items() if name.startswith("layer"))]
    features = children.get("features")
    if isinstance(trunk, nn.Sequential) and isinstance(features, nn.Sequential):
        rest = [module for name, module in children.items() if name != "features"]
        return [*features, *rest]
    raise ConfigError(
        f"model.frozen_stages needs a trunk whose stages are known ({type(trunk).__name__} is not one of them); "
        "use an EfficientNet-Lite, ResNet, MobileNetV3, EfficientNet, DenseNet or ViT backbone, or frozen_stages 0"
    )


def check_frozen_stages(trunk: nn.Module, frozen: int) -> int:
    """``frozen`` when at least one stage stays trainable, else a ConfigError naming the limit."""
    count = len(trunk_stages(trunk))
    if not 0 <= frozen < count:
        raise ConfigError(
            f"model.frozen_stages is {frozen}, but this backbone has {count} stages and at least one must train "
            f"(choose 0 to {count - 1})"
        )
    return frozen
