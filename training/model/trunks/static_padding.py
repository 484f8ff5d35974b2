"""TensorFlow-"same" convolutions with their padding fixed for one image size, for ONNX export.

timm's TF-ported backbones (EfficientNet-Lite0 among them) pad stride-2 convolutions
asymmetrically, computing the pad from the input size on every call. Traced to ONNX, that
is a Shape -> arithmetic -> Pad chain that onnxruntime cannot fold, so every such Pad copies
its whole feature map (about 15 % of Lite0's time at 224 px), and an INT8 graph cannot fuse
the Pad into its quantized convolution. The export fixes the crop size anyway
(``model.json``), so the pads are constants: each ``Conv2dSame`` is swapped for a constant
zero ``Pad`` + ``Conv``, which onnxruntime folds into the convolution's own ``pads``. The
arithmetic is identical (the export's parity check compares with the original module).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn


class StaticSamePadConv(nn.Module):
    """``conv`` applied after a constant zero pad of (left, right, top, bottom) pixels."""

    def __init__(self, conv: nn.Conv2d, pad: list[int]) -> None:
        super().__init__()
        self.conv = conv
        self.pad = [int(value) for value in pad]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        conv = self.conv
        # value=0.0 explicitly: without it the exported Pad has no constant input and onnxruntime will not fuse it
        padded = F.pad(images, self.pad, value=0.0)
        return F.conv2d(padded, conv.weight, conv.bias, conv.stride, 0, conv.dilation, conv.groups)


def with_static_same_padding(model: nn.Module, image_size: int) -> nn.Module:
    """``model`` itself when it has no dynamic-"same" convolutions, else a copy with static ones."""
    same_convs = _dynamic_same_convs(model)
    if not same_convs:
        return model
    model = copy.deepcopy(model).eval()
    input_sizes: dict[str, tuple[int, int]] = {}
    hooks = [
        model.get_submodule(name).register_forward_pre_hook(
            lambda _, args, name=name: input_sizes.__setitem__(name, tuple(args[0].shape[-2:]))
        )
        for name in same_convs
    ]
    with torch.no_grad():
        model(torch.zeros(1, 3, image_size, image_size))
    for hook in hooks:
        hook.remove()
    for name, size in input_sizes.items():
        parent_name, _, attribute = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        conv = getattr(parent, attribute)
        setattr(parent, attribute, StaticSamePadConv(conv, _same_pad(conv, size)))
    return model


def _dynamic_same_convs(model: nn.Module) -> list[str]:
    try:
        from timm.layers.conv2d_same import Conv2dSame
    except ImportError:  # timm is optional (the pretrained extra); without it no backbone has such convs
        return []
    return [name for name, module in model.named_modules() if isinstance(module, Conv2dSame)]


def _same_pad(conv: nn.Conv2d, size: tuple[int, int]) -> list[int]:
    from timm.layers.padding import pad_same_arg

    return list(pad_same_arg(list(size), list(conv.weight.shape[-2:]), list(conv.stride), list(conv.dilation)))
